"""embeddings="minilm" (extra [semantic]): offline all-MiniLM-L6-v2 finds paraphrases
that share no words with the query, where the hashing embeddings cannot."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from aimegraph.knowledge import KnowledgeBase
from aimegraph.knowledge.embeddings import MiniLMEmbeddings, resolve_embeddings
from aimegraph.memory import open_store
from aimegraph.memory.episodes import rank_items, search_ops

pytest.importorskip("sentence_transformers", reason="the [semantic] extra is not installed")

NS = ("aimegraph", "default", "episodes")
STORED = {
    "car": "Repair the automobile engine",
    "cook": "Bake a chocolate cake for the party",
    "money": "Reconcile the bank statement with the ledger",
}
QUERY = "fix my vehicle's motor"  # no word in common with "Repair the automobile engine"


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbeddings:
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may come from the network
    embeddings = resolve_embeddings("minilm")
    assert isinstance(embeddings, MiniLMEmbeddings)
    return embeddings


def _nearest(embeddings: object) -> str:
    with open_store("memory", embeddings=embeddings) as store:  # type: ignore[arg-type]
        for key, text in STORED.items():
            store.put(NS, key, {"text": text})
        results = store.batch(search_ops(store, "default", ["episodes"], QUERY, 1))
        return rank_items(store, results, QUERY, 1)[0].key


def test_minilm_matches_a_paraphrase_with_no_shared_word(minilm: MiniLMEmbeddings) -> None:
    assert len(minilm.embed_query("x")) == 384
    assert _nearest(minilm) == "car"
    assert _similarity(minilm, STORED["car"]) > 0.5
    # Lexical hashing sees no overlap at all: whatever it ranks first, it is noise.
    hashing = resolve_embeddings("hashing")
    assert all(_similarity(hashing, text) < 0.1 for text in STORED.values())


def _similarity(embeddings: Any, text: str) -> float:
    query, stored = embeddings.embed_query(QUERY), embeddings.embed_query(text)
    return float(np.dot(query, stored))


def test_minilm_is_chosen_by_name_everywhere(minilm: MiniLMEmbeddings) -> None:
    assert resolve_embeddings("minilm") is minilm  # one model per process
    kb = KnowledgeBase(resolve_embeddings("minilm"))
    kb.add_texts(list(STORED.values()))
    assert kb.search(QUERY, k=1)[0].text == STORED["car"]


def test_unknown_embeddings_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown embeddings"):
        resolve_embeddings("word2vec")  # type: ignore[arg-type]


def test_minilm_by_name_in_the_actor_factory(minilm: MiniLMEmbeddings, tmp_path: Any) -> None:
    from aimegraph import DefaultActorFactory, Task, default_registry

    task = Task(id="t", title="Find out from the person what they prefer")
    registry = default_registry(tmp_path)
    # No word of the task is in the human bundle's description: only the meaning matches.
    semantic = DefaultActorFactory(registry, workspace=tmp_path, embeddings="minilm")
    lexical = DefaultActorFactory(registry, workspace=tmp_path)
    assert semantic.bundles(task) == ["human"]
    assert lexical.bundles(task) == []
