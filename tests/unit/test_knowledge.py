"""Hashing embeddings, the FAISS knowledge base, its pickle-free persistence and the tool."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.tools import ToolException

from aimegraph.knowledge import (
    FilesAdded,
    HashingEmbeddings,
    KnowledgeBase,
    KnowledgeBaseFormatError,
)
from aimegraph.tools.knowledge import make_knowledge_search_tool

CORPUS = {
    "faiss.md": "# FAISS\n\nFAISS is a library for efficient similarity search and clustering "
    "of dense vectors, written by Meta AI Research.",
    "langgraph.md": "# LangGraph\n\nLangGraph builds stateful multi-agent applications as "
    "graphs, with checkpointers, interrupts and streaming.",
    "python.md": "# Python\n\nPython is a programming language with dynamic typing, garbage "
    "collection and a large standard library.",
    "espresso.md": "# Espresso\n\nEspresso is brewed by forcing hot water through finely ground "
    "coffee beans under high pressure.",
    "tides.txt": "Ocean tides are caused by the gravitational pull of the moon and the sun on "
    "the oceans of the Earth.",
    "sourdough.md": "# Sourdough\n\nSourdough bread rises thanks to a starter culture of wild "
    "yeast and lactic acid bacteria.",
    "chess.txt": "In chess, castling moves the king two squares towards a rook, and the rook "
    "jumps over the king.",
    "volcanoes.md": "# Volcanoes\n\nVolcanoes erupt when magma from the mantle rises through "
    "cracks in the crust.",
}

QUERIES = {
    "vector similarity search library": "faiss.md",
    "multi-agent graphs with checkpointers": "langgraph.md",
    "garbage collected programming language": "python.md",
    "how is espresso coffee brewed": "espresso.md",
    "what causes ocean tides": "tides.txt",
    "wild yeast starter": "sourdough.md",
    "castling the king": "chess.txt",
    "magma eruption": "volcanoes.md",
}


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "corpus"
    directory.mkdir()
    for name, text in CORPUS.items():
        (directory / name).write_text(text, encoding="utf-8")
    (directory / "ignored.json").write_text('{"not": "matched by the glob"}')
    return directory


@pytest.fixture
def kb(corpus_dir: Path) -> KnowledgeBase:
    kb = KnowledgeBase()
    kb.add_files(corpus_dir)
    return kb


def source_name(source: str | None) -> str:
    assert source is not None
    return Path(source).name


# --- embeddings ---------------------------------------------------------------------


def test_hashing_embeddings_shape_norm_and_determinism() -> None:
    emb = HashingEmbeddings(dim=256)
    vectors = np.asarray(emb.embed_documents(["Hello world", "hello WORLD", "other text"]))
    assert vectors.shape == (3, 256)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Lower-casing makes these identical.
    assert np.allclose(vectors[0], vectors[1])
    assert np.allclose(emb.embed_query("Hello world"), vectors[0])
    assert float(vectors[0] @ vectors[2]) < 0.5
    assert emb.embed_query("") == [0.0] * 256


def test_hashing_embeddings_are_stable_across_processes() -> None:
    # Python's hash() is salted per process; the embedding must not depend on it.
    script = (
        "from aimegraph.knowledge import HashingEmbeddings;"
        "print(HashingEmbeddings(dim=64).embed_query('stable hashing across runs'))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1
    assert json.loads(outputs.pop()) == pytest.approx(
        HashingEmbeddings(dim=64).embed_query("stable hashing across runs"), abs=1e-6
    )


def test_hashing_embeddings_capture_subwords_and_bigrams() -> None:
    emb = HashingEmbeddings()

    def sim(a: str, b: str) -> float:
        return float(np.dot(emb.embed_query(a), emb.embed_query(b)))

    # Character n-grams relate inflections and typos.
    assert sim("volcanic", "volcanoes") > sim("volcanic", "sourdough")
    assert sim("espreso", "espresso") > 0.3
    # Word order matters through bigrams.
    assert sim("new york", "new york") > sim("new york", "york new")


# --- knowledge base -----------------------------------------------------------------


def test_empty_knowledge_base() -> None:
    kb = KnowledgeBase()
    assert len(kb) == 0
    assert kb.search("anything") == []
    assert kb.add_texts([]) == []


@pytest.mark.parametrize(("query", "expected"), QUERIES.items())
def test_relevant_document_comes_first(kb: KnowledgeBase, query: str, expected: str) -> None:
    passages = kb.search(query, k=3)
    assert len(passages) == 3
    assert source_name(passages[0].source) == expected
    assert passages[0].score > passages[1].score
    assert -1.0 <= passages[-1].score <= passages[0].score <= 1.0 + 1e-6


def test_add_files_chunks_with_source_metadata(corpus_dir: Path) -> None:
    kb = KnowledgeBase()
    long_text = "\n\n".join(f"Paragraph {i} talks about topic number {i}." for i in range(40))
    (corpus_dir / "long.md").write_text(long_text)
    ids = kb.add_files(corpus_dir, chunk_size=200, chunk_overlap=0).ids
    assert len(kb) == len(ids) > len(CORPUS) + 1
    sources = {source_name(p.source) for p in kb.search("topic", k=len(kb))}
    assert sources == {*CORPUS, "long.md"}
    top = kb.search("Paragraph 37 talks about topic number 37", k=1)[0]
    assert "Paragraph 37" in top.text
    assert len(top.text) <= 200


def test_add_files_accepts_files_lists_and_globs(corpus_dir: Path) -> None:
    kb = KnowledgeBase()
    kb.add_files(corpus_dir, glob="*.txt")
    assert len(kb) == 2
    kb.add_files([corpus_dir / "faiss.md", str(corpus_dir / "ignored.json")])
    assert len(kb) == 4
    # A file reached twice in one call (named, and under a directory named) counts once.
    kb.add_files([corpus_dir / "python.md", corpus_dir], glob="python.*")
    assert len(kb) == 5
    with pytest.raises(FileNotFoundError):
        kb.add_files(corpus_dir / "missing")


def test_adding_a_file_again_replaces_its_passages(corpus_dir: Path, tmp_path: Path) -> None:
    notes = corpus_dir / "notes.md"
    notes.write_text("# Notes\n\nThe AGM is in June.\n", encoding="utf-8")
    kb = KnowledgeBase()
    first = kb.add_files(notes)
    assert (len(first.ids), first.replaced, first.unchanged) == (1, 0, [])

    # Same path, same content: nothing changes, and it says so.
    assert kb.add_files(notes) == FilesAdded(ids=[], replaced=0, unchanged=[notes.as_posix()])
    assert len(kb) == 1
    assert [p.text for p in kb.search("AGM", k=4)] == ["# Notes\n\nThe AGM is in June."]

    # Same path, new content: the old passages leave the index, the new ones come in;
    # also after a save and a load, and when the file is named by another path.
    kb.save(tmp_path / "kb")
    kb = KnowledgeBase.load(tmp_path / "kb")
    notes.write_text("# Notes\n\nThe AGM is in July.\n\nThe board meets in May.\n")
    again = kb.add_files(corpus_dir / ".." / "corpus" / "notes.md", chunk_size=30, chunk_overlap=0)
    assert (len(again.ids), again.replaced, again.unchanged) == (2, 1, [])
    assert len(kb) == 2
    texts = {p.text for p in kb.search("AGM", k=4)}
    assert texts == {"# Notes\n\nThe AGM is in July.", "The board meets in May."}
    # The directory holding it: only the files not indexed yet are added.
    assert kb.add_files(corpus_dir).unchanged == [notes.as_posix()]
    assert len(kb) == 2 + len(CORPUS)


def test_indexes_saved_before_files_had_an_identity(corpus_dir: Path, tmp_path: Path) -> None:
    """A knowledge base saved by an older version, where adding a file twice doubled
    its passages (random ids, no path or hash): it loads, searches return each
    passage once, and adding the file again replaces both copies."""
    notes = corpus_dir / "notes.md"
    notes.write_text("# Notes\n\nThe AGM is in June.\n", encoding="utf-8")
    old = KnowledgeBase()
    text = "# Notes\n\nThe AGM is in June."
    for _ in range(2):
        old.add_texts([text], [{"source": notes.as_posix(), "start_index": 0}])
    old.add_texts(["Penguins live in the south."], [{"source": "penguins"}])
    old.save(tmp_path / "old")

    kb = KnowledgeBase.load(tmp_path / "old")
    assert [p.text for p in kb.search("AGM", k=2)] == [text, "Penguins live in the south."]
    added = kb.add_files(notes)
    assert (len(added.ids), added.replaced) == (1, 2)
    assert len(kb) == 2  # the notes once, and the passage that came from no file
    assert kb.add_files(notes).unchanged == [notes.as_posix()]


def test_searches_return_each_text_once() -> None:
    kb = KnowledgeBase()
    kb.add_texts(["Tides follow the moon."] * 3 + ["Tides also follow the sun."])
    found = kb.search("tides moon", k=2)
    assert [p.text for p in found] == ["Tides follow the moon.", "Tides also follow the sun."]
    assert len(kb.search("tides", k=4)) == 2


def test_add_documents_and_texts_keep_metadata() -> None:
    kb = KnowledgeBase()
    kb.add_documents([Document(page_content="alpha beta gamma", metadata={"source": "greek"})])
    kb.add_texts(["delta epsilon"], [{"source": "more-greek", "page": 2}])
    kb.add_texts(["no metadata here"])
    assert len(kb) == 3
    assert kb.search("beta gamma", k=1)[0].source == "greek"
    assert kb.search("epsilon", k=1)[0].source == "more-greek"
    assert kb.search("metadata", k=1)[0].source is None
    with pytest.raises(ValueError, match="2 texts but 1 metadatas"):
        kb.add_texts(["a", "b"], [{}])


def test_k_is_capped_by_size_and_validated(kb: KnowledgeBase) -> None:
    assert len(kb.search("coffee", k=50)) == len(CORPUS)
    with pytest.raises(ValueError):
        kb.search("coffee", k=0)


# --- persistence --------------------------------------------------------------------


def test_save_load_roundtrip_without_pickle(kb: KnowledgeBase, tmp_path: Path) -> None:
    target = tmp_path / "saved"
    kb.save(target)
    names = {p.name for p in target.iterdir()}
    assert names == {"manifest.json", "index.faiss", "documents.json"}
    assert not list(target.rglob("*.pkl"))
    assert not list(target.rglob("*.pickle"))
    for path in target.iterdir():
        # Pickle streams start with the PROTO opcode 0x80.
        assert not path.read_bytes().startswith(b"\x80")
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["version"] == 1
    assert manifest["dim"] == 1024
    assert manifest["count"] == len(kb)
    assert manifest["embeddings"].endswith("HashingEmbeddings")

    loaded = KnowledgeBase.load(target)
    assert len(loaded) == len(kb)
    for query in QUERIES:
        assert loaded.search(query, k=4) == kb.search(query, k=4)
    # A loaded knowledge base keeps growing.
    loaded.add_texts(["Penguins live in the southern hemisphere."], [{"source": "penguins"}])
    assert loaded.search("penguins southern hemisphere", k=1)[0].source == "penguins"


def test_load_does_not_unpickle(
    kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pickle

    kb.save(tmp_path / "saved")

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("pickle must not be used")

    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "dump", forbidden)
    monkeypatch.setattr(pickle, "dumps", forbidden)
    kb.save(tmp_path / "again")
    assert len(KnowledgeBase.load(tmp_path / "again")) == len(kb)


def test_empty_knowledge_base_roundtrip(tmp_path: Path) -> None:
    KnowledgeBase().save(tmp_path / "empty")
    loaded = KnowledgeBase.load(tmp_path / "empty")
    assert len(loaded) == 0
    assert loaded.search("x") == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m.update(format="something-else"), "not a valid"),
        (lambda m: m.update(version=99), "not a valid"),
        (lambda m: m.update(dim=512), "does not match the manifest"),
        (lambda m: m.update(count=3), "the manifest says 3"),
        (lambda m: m.pop("embeddings"), "not a valid"),
        (lambda m: m.update(extra="field"), "not a valid"),
        (lambda m: m.update(embeddings="some.other.Embeddings"), "built with some.other"),
    ],
)
def test_load_refuses_tampered_manifest(
    kb: KnowledgeBase, tmp_path: Path, change: object, message: str
) -> None:
    target = tmp_path / "saved"
    kb.save(target)
    manifest = json.loads((target / "manifest.json").read_text())
    change(manifest)  # type: ignore[operator]
    (target / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(KnowledgeBaseFormatError, match=message):
        KnowledgeBase.load(target)


def test_load_refuses_missing_or_broken_files(kb: KnowledgeBase, tmp_path: Path) -> None:
    with pytest.raises(KnowledgeBaseFormatError, match="manifest.json is missing"):
        KnowledgeBase.load(tmp_path / "nothing-here")
    target = tmp_path / "saved"
    kb.save(target)
    (target / "manifest.json").write_text("not json")
    with pytest.raises(KnowledgeBaseFormatError, match="not a valid"):
        KnowledgeBase.load(target)

    kb.save(target)
    (target / "documents.json").write_text('[{"id": 1}]')
    with pytest.raises(KnowledgeBaseFormatError, match="documents.json"):
        KnowledgeBase.load(target)

    kb.save(target)
    (target / "index.faiss").write_bytes(b"garbage")
    with pytest.raises(KnowledgeBaseFormatError, match="index.faiss"):
        KnowledgeBase.load(target)


def test_load_refuses_embeddings_of_another_dimension(kb: KnowledgeBase, tmp_path: Path) -> None:
    kb.save(tmp_path / "saved")
    with pytest.raises(KnowledgeBaseFormatError, match="512-dimensional vectors"):
        KnowledgeBase.load(tmp_path / "saved", embeddings=HashingEmbeddings(dim=512))


def test_save_refuses_unserialisable_metadata(tmp_path: Path) -> None:
    kb = KnowledgeBase()
    kb.add_texts(["text"], [{"source": object()}])
    with pytest.raises(TypeError, match="JSON-serialisable"):
        kb.save(tmp_path / "saved")
    assert not (tmp_path / "saved" / "manifest.json").exists()


# --- custom embeddings --------------------------------------------------------------


class KeywordEmbeddings(Embeddings):
    """Counts of a few keywords, deliberately unnormalised."""

    KEYWORDS = ("cat", "dog", "fish")

    def __init__(self) -> None:
        self.calls = 0

    def _vector(self, text: str) -> list[float]:
        self.calls += 1
        words = text.lower().split()
        return [float(words.count(keyword)) + 0.01 for keyword in self.KEYWORDS]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def test_custom_embeddings_plug_in(tmp_path: Path) -> None:
    embeddings = KeywordEmbeddings()
    kb = KnowledgeBase(embeddings=embeddings)
    kb.add_texts(
        ["dog dog dog", "cat", "fish fish fish fish fish"],
        [{"source": "dogs"}, {"source": "cats"}, {"source": "fish"}],
    )
    assert embeddings.calls == 3
    top = kb.search("cat", k=3)
    assert [p.source for p in top][0] == "cats"
    # Unnormalised vectors are normalised, so the score is a cosine similarity.
    assert top[0].score == pytest.approx(1.0, abs=0.01)
    assert kb.search("fish", k=1)[0].source == "fish"

    kb.save(tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "manifest.json").read_text())["dim"] == 3
    with pytest.raises(KnowledgeBaseFormatError, match="KeywordEmbeddings"):
        KnowledgeBase.load(tmp_path / "saved")
    loaded = KnowledgeBase.load(tmp_path / "saved", embeddings=KeywordEmbeddings())
    assert loaded.search("cat", k=3) == top


def test_adding_vectors_of_another_dimension_fails() -> None:
    kb = KnowledgeBase(embeddings=KeywordEmbeddings())
    kb.add_texts(["cat"])
    kb.embeddings = HashingEmbeddings(dim=8)
    with pytest.raises(KnowledgeBaseFormatError, match="8-dimensional"):
        kb.add_texts(["dog"])


# --- tool ---------------------------------------------------------------------------


def test_knowledge_search_tool(kb: KnowledgeBase) -> None:
    tool = make_knowledge_search_tool(kb, k=2)
    assert tool.name == "knowledge_search"
    assert set(tool.args) == {"query", "k"}
    out = tool.invoke({"query": "what causes ocean tides"})
    blocks = out.split("\n\n[")
    assert len(blocks) == 2
    assert blocks[0].startswith("[1] source: ")
    assert (
        blocks[0]
        .splitlines()[0]
        .endswith(f"tides.txt (score {kb.search('what causes ocean tides', k=1)[0].score:.3f})")
    )
    assert "gravitational pull of the moon" in blocks[0]
    assert blocks[1].startswith("2] source: ")
    assert out.count("source: ") == 2
    assert tool.invoke({"query": "coffee", "k": 5}).count("source: ") == 5


def test_knowledge_search_tool_edge_cases(kb: KnowledgeBase) -> None:
    assert make_knowledge_search_tool(KnowledgeBase()).invoke({"query": "x"}) == (
        "no passages found"
    )
    tool = make_knowledge_search_tool(kb)
    with pytest.raises(ToolException, match="query is empty"):
        tool.invoke({"query": "  "})
    with pytest.raises(ValueError):
        tool.invoke({"query": "x", "k": 0})
