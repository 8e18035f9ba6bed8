"""Knowledge retrieval: query latency and recall of the default offline embedding.

Latency: ``aimegraph.knowledge.KnowledgeBase`` (FAISS inner-product index, the
default ``HashingEmbeddings``) filled with synthetic passages, against a numpy
brute-force dot product over the very same vectors. Both paths include
embedding the query, so the ratio isolates the index and its LangChain wrapper.
Both are timed with the libraries' default threads and again on one thread, since
single-query latency on a small, busy machine is dominated by thread wake-ups.
The two must return the same top-5 passages, which is checked and reported.

Recall: recall@5 (and recall@1, MRR@5) on the small labelled set shipped in
``bench/data``: 40 short documents on distinct topics and two sets of 40 questions, one
per document. The first paraphrases its document but shares content words with it; the
harder twin shares no content word with its document (checked here, and the count
reported), so a lexical embedding has nothing to match. Both sets are measured with the
default offline embedding (hashing) and with MiniLM (extra ``[semantic]``; left out with
a note when it is not installed, and in quick mode).
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import json
import random
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from langchain_core.embeddings import Embeddings
from numpy.typing import NDArray

from aimegraph.knowledge import HashingEmbeddings, KnowledgeBase
from bench.common import Headline, SectionResult, Table, content_words, fmt_ms, fmt_x, timed

DATA = Path(__file__).parent / "data"
K = 5
BATCH = 5_000
AGREEMENT_QUERIES = 20
_SYLLABLES: tuple[str, ...] = ("ka", "lo", "mi", "ne", "ru", "ta", "shi", "vo", "pe", "zan")
_SYLLABLES += ("dor", "el", "fi", "gu", "ha", "jo", "bri", "sel", "tam", "qu")


class RecordingEmbeddings(Embeddings):
    """Delegates to another embedding and keeps the document vectors it returned,
    so the numpy baseline searches exactly the vectors the index holds."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.batches: list[NDArray[np.float32]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = self.inner.embed_documents(texts)
        self.batches.append(np.asarray(vectors, dtype=np.float32))
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)

    def matrix(self) -> NDArray[np.float32]:
        """All document vectors, L2-normalised as the knowledge base stores them."""
        matrix = np.concatenate(self.batches)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


@contextmanager
def single_threaded() -> Iterator[None]:
    """Run FAISS (OpenMP) and numpy's bundled OpenBLAS on one thread inside the block.

    OpenBLAS is reached through ctypes (numpy has no API for it); when its library
    is not found, numpy keeps its threads and only FAISS is limited.
    """
    omp = faiss.omp_get_max_threads()
    get, set_ = _openblas_thread_functions()
    blas = get() if get else None
    faiss.omp_set_num_threads(1)
    if set_:
        set_(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(omp)
        if set_ and blas:
            set_(blas)


@functools.cache
def _openblas_thread_functions() -> tuple[Any, Any]:
    libs = Path(np.__file__).parent.parent / "numpy.libs"
    for path in sorted(libs.glob("*openblas*.so*")):
        lib = ctypes.CDLL(str(path))
        for prefix in ("scipy_openblas", "openblas"):
            for suffix in ("64_", ""):
                get = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                set_ = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
                if get is not None and set_ is not None:
                    set_.argtypes = [ctypes.c_int]
                    return get, set_
    return None, None


def synthetic_passages(n: int, seed: int = 0) -> list[str]:
    """``n`` passages of 8-16 pseudo-words from a ~4,000-word vocabulary (Zipf-like use).

    Passage length only changes the build time (the index is flat), so they are kept
    short: embedding 100k passages in pure Python is the slowest part of the bench."""
    rng = random.Random(seed)
    vocab = sorted({"".join(rng.choices(_SYLLABLES, k=rng.randint(2, 4))) for _ in range(6_000)})
    cumulative = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(vocab))))
    return [
        " ".join(rng.choices(vocab, cum_weights=cumulative, k=rng.randint(8, 16))) for _ in range(n)
    ]


def numpy_search(
    embeddings: Embeddings, matrix: NDArray[np.float32], query: str, k: int = K
) -> list[int]:
    """Brute force: embed, normalise, one matrix-vector product, top-k rows best first."""
    q = np.asarray(embeddings.embed_query(query), dtype=np.float32)
    norm = np.linalg.norm(q)
    scores = matrix @ (q / norm if norm > 0 else q)
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])].tolist()


def latency(n: int, queries: int) -> dict[str, float]:
    """Build an ``n``-passage knowledge base; time ``queries`` searches both ways."""
    passages = synthetic_passages(n)
    recorder = RecordingEmbeddings(HashingEmbeddings())
    kb = KnowledgeBase(embeddings=recorder)

    def build() -> None:
        for start in range(0, n, BATCH):
            chunk = passages[start : start + BATCH]
            kb.add_texts(chunk, [{"source": str(start + i)} for i in range(len(chunk))])

    _, build_s = timed(build)
    matrix = recorder.matrix()
    recorder.batches.clear()
    # Queries: a few words of a random passage, so each has real matches.
    rng = random.Random(1)
    asked = [" ".join(rng.choice(passages).split()[:6]) for _ in range(queries)]
    # Each path is timed in its own loop: interleaving them lets FAISS's OpenMP threads
    # (still spinning after a search) and OpenBLAS's threads slow each other down.
    search_kb = functools.partial(kb.search, k=K)
    search_np = functools.partial(numpy_search, recorder, matrix)
    kb_s = _median_latency(search_kb, asked)
    np_s = _median_latency(search_np, asked)
    with single_threaded():
        kb_1thread_s = _median_latency(search_kb, asked)
        np_1thread_s = _median_latency(search_np, asked)
    # Ties in score may order equal passages differently; compare as sets.
    checked = asked[:AGREEMENT_QUERIES]
    agree = sum(
        {int(h.source or -1) for h in kb.search(q, k=K)} == set(numpy_search(recorder, matrix, q))
        for q in checked
    )
    embed_s = _median_latency(recorder.embed_query, asked)
    return {
        "passages": n,
        "build_s": build_s,
        "kb_query_s": kb_s,
        "kb_query_1thread_s": kb_1thread_s,
        "numpy_query_s": np_s,
        "numpy_query_1thread_s": np_1thread_s,
        "embed_query_s": embed_s,
        "agreement": agree / len(checked),
        "matrix_bytes": float(matrix.nbytes),
    }


def _median_latency(search: Callable[[str], object], queries: list[str], warmup: int = 5) -> float:
    for query in queries[:warmup]:
        search(query)
    samples = []
    for query in queries:
        start = time.perf_counter()
        search(query)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


QUERY_SETS = {
    "paraphrased": "retrieval_queries.jsonl",
    "no shared content word": "retrieval_queries_no_shared_word.jsonl",
}


def recall(kb: KnowledgeBase, queries: list[dict[str, Any]], k: int = K) -> dict[str, float]:
    """recall@1, recall@k and MRR@k of ``kb`` on labelled queries."""
    ranks = []
    for q in queries:
        sources = [p.source for p in kb.search(q["query"], k=k)]
        ranks.append(sources.index(q["relevant"]) + 1 if q["relevant"] in sources else None)
    return {
        "recall_at_1": sum(r == 1 for r in ranks) / len(ranks),
        f"recall_at_{k}": sum(r is not None for r in ranks) / len(ranks),
        f"mrr_at_{k}": sum(1 / r for r in ranks if r is not None) / len(ranks),
    }


def quality(quick: bool) -> tuple[Table, dict[str, float]]:
    """Recall of each embedding on each query set, and how many queries share a word."""
    corpus = {d["id"]: d["text"] for d in load_jsonl(DATA / "retrieval_corpus.jsonl")}
    table = Table(
        f"5b. Retrieval quality on bench/data ({len(corpus)} documents)",
        ["queries", "share a content word with their document", "embeddings", "recall@1",
         f"recall@{K}", f"MRR@{K}"],
    )  # fmt: skip
    metrics: dict[str, float] = {}
    for embeddings in ("hashing",) if quick else ("hashing", "minilm"):
        try:
            kb = KnowledgeBase(embeddings=embeddings)  # type: ignore[arg-type]
        except ImportError as exc:
            table.notes.append(f"{embeddings}: not measured ({exc})")
            continue
        kb.add_texts(list(corpus.values()), [{"source": key} for key in corpus])
        for label, name in QUERY_SETS.items():
            queries = load_jsonl(DATA / name)
            sharing = sum(
                bool(content_words(q["query"]) & content_words(corpus[q["relevant"]]))
                for q in queries
            )
            scores = recall(kb, queries)
            table.add(
                f"{label} (`{name}`)",
                f"{sharing} of {len(queries)}",
                embeddings,
                *(f"{scores[k]:.2f}" for k in ("recall_at_1", f"recall_at_{K}", f"mrr_at_{K}")),
            )
            key = f"recall.{embeddings}.{label.split()[0]}"
            metrics |= {f"{key}.{k}": v for k, v in scores.items()}
            metrics[f"{key}.sharing"] = sharing
    table.notes.append(
        "Content words: lower-cased words less a short stop-word list "
        "(bench.common.content_words). HashingEmbeddings is lexical (hashed words and "
        "character n-grams), so a query sharing no word with its document can only match "
        "through shared word pieces; MiniLM (all-MiniLM-L6-v2) embeds meaning."
    )
    return table, metrics


def run(quick: bool) -> SectionResult:
    # (passages, timed queries)
    sizes = ((1_000, 20), (2_000, 20)) if quick else ((10_000, 200), (100_000, 50))
    speed = Table(
        f"5a. Retrieval latency: KnowledgeBase (FAISS, HashingEmbeddings dim=1024) vs numpy "
        f"brute force, top-{K} (median over the queries)",
        [
            "passages",
            "queries",
            "index build (s)",
            "KnowledgeBase.search (ms)",
            "numpy brute force (ms)",
            "ratio",
            "KnowledgeBase.search, 1 thread (ms)",
            "numpy, 1 thread (ms)",
            "ratio, 1 thread",
            "of which query embedding (ms)",
            "same top-5",
        ],
    )
    metrics: dict[str, float] = {}
    for n, queries in sizes:
        r = latency(n, queries)
        speed.add(
            f"{n:,}",
            queries,
            f"{r['build_s']:.1f}",
            fmt_ms(r["kb_query_s"]),
            fmt_ms(r["numpy_query_s"]),
            fmt_x(r["kb_query_s"] / r["numpy_query_s"]),
            fmt_ms(r["kb_query_1thread_s"]),
            fmt_ms(r["numpy_query_1thread_s"]),
            fmt_x(r["kb_query_1thread_s"] / r["numpy_query_1thread_s"]),
            fmt_ms(r["embed_query_s"]),
            f"{r['agreement']:.0%}",
        )
        metrics |= {f"n{n}.{k}": v for k, v in r.items()}
    speed.notes += [
        "Both paths embed the query with the same HashingEmbeddings, then search the same "
        "L2-normalised float32 vectors (numpy: one matrix-vector product + argpartition). "
        "ratio = KnowledgeBase.search / numpy. First with the libraries' default threads "
        "(FAISS: OpenMP, numpy: OpenBLAS, one per core), then with both on one thread "
        "(faiss.omp_set_num_threads(1), openblas_set_num_threads(1)).",
        "Passages are synthetic: 8-16 pseudo-words each; queries are 6-word prefixes of "
        "random passages. same top-5 = share of (up to 20) queries for which both return "
        "the same set of passages.",
    ]
    quality_table, quality_metrics = quality(quick)
    metrics |= quality_metrics
    return SectionResult(
        "retrieval", [speed, quality_table], metrics, headlines=headlines(sizes, metrics)
    )


def headlines(sizes: tuple[tuple[int, int], ...], metrics: dict[str, float]) -> list[Headline]:
    ratios_1 = " / ".join(
        fmt_x(metrics[f"n{n}.kb_query_1thread_s"] / metrics[f"n{n}.numpy_query_1thread_s"])
        for n, _ in sizes
    )
    ratios = " / ".join(
        fmt_x(metrics[f"n{n}.kb_query_s"] / metrics[f"n{n}.numpy_query_s"]) for n, _ in sizes
    )
    agree = min(metrics[f"n{n}.agreement"] for n, _ in sizes)
    rows = [
        Headline(
            f"retrieval, {' / '.join(f'{n:,}' for n, _ in sizes)} passages, top-{K}",
            "numpy brute force on the same vectors",
            f"{ratios_1} numpy's time on one thread ({ratios} with default threads); same "
            f"top-{K} in {agree:.0%} of queries",
        )
    ]
    found = [e for e in ("hashing", "minilm") if f"recall.{e}.paraphrased.recall_at_1" in metrics]
    for label, key in (
        ("paraphrasing their document", "paraphrased"),
        ("sharing no content word with their document (the harder twin)", "no"),
    ):
        n_sharing = metrics[f"recall.hashing.{key}.sharing"]
        scores = "; ".join(
            f"{e}: recall@1 {metrics[f'recall.{e}.{key}.recall_at_1']:.2f}, recall@{K} "
            f"{metrics[f'recall.{e}.{key}.recall_at_{K}']:.2f}"
            for e in found
        )
        rows.append(
            Headline(
                f"retrieval quality, 40 labelled queries {label}; {n_sharing:.0f} of 40 share "
                "a content word with it",
                "the other embedding",
                scores,
            )
        )
    return rows
