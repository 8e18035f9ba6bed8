"""Offline, deterministic embeddings based on feature hashing."""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections import Counter

import numpy as np
from langchain_core.embeddings import Embeddings
from numpy.typing import NDArray

__all__ = ["HashingEmbeddings"]

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
