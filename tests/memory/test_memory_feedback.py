"""A user's verdict on a run (issue 37, point 4): ``steering.feedback`` and
``aimegraph feedback`` store it with the run; a low rating or a correction becomes a
lesson (``source="user"``) that the planner of the next similar goal sees first,
ahead of the engine's own lessons and episodes."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import Item
from langgraph.store.memory import InMemoryStore
from tests.conftest import Cli
from tests.memory.test_memory_episodes import GOAL, _run

from aimegraph.checkpoints import ThreadNotFoundError, make_serializer
from aimegraph.memory import LESSONS, namespace, open_store
from aimegraph.memory.episodes import rank_items
from aimegraph.memory.feedback import FEEDBACK, rated_runs
from aimegraph.steering import feedback

CORRECTION = "The total must exclude the cancelled invoices (status=void)."
SIMILAR_GOAL = "Total the amounts in the April invoices export."
assert SIMILAR_GOAL != GOAL


def _lessons(store: InMemoryStore) -> dict[str, dict[str, object]]:
    return {i.key: i.value for i in store.search(namespace("default", LESSONS), limit=100)}


def test_a_rated_down_run_teaches_the_next_similar_goals_planner_first(tmp_path: Path) -> None:
    saver = InMemorySaver(serde=make_serializer())
    with open_store("memory") as store:
        first, _, _ = _run(store, tmp_path, "first", saver=saver)
        assert first["status"] == "succeeded"  # the engine judged it a success
        verdict = feedback(saver, store, "first", 1, CORRECTION)
        assert (verdict.goal, verdict.status, verdict.score) == (GOAL, "succeeded", 0.0)
        (rated,) = rated_runs(store, "default")
        assert rated.note == CORRECTION and rated.answer == first["final_answer"]
        user_lessons = [v for v in _lessons(store).values() if v.get("source") == "user"]
        assert len(user_lessons) == 1 and user_lessons[0]["rating"] == 1
        # A similar goal, not the same one: the lesson is found by similarity.
        _, model, _ = _run(store, tmp_path, "second", saver=saver, goal=SIMILAR_GOAL)
    prompt = model.prompts("planner")[0]
    assert SIMILAR_GOAL in prompt
    section = prompt.split("From memory", 1)[1]
    items = [line for line in section.splitlines() if line.startswith("- ")]
    # The user's verdict comes first, ahead of the engine's own lesson and episode.
    assert items[0].startswith("- USER FEEDBACK") and CORRECTION in items[0]
    assert "rated this run 1/5" in items[0]
    assert any("lesson from" in line for line in items[1:])  # the engine's, after it


def test_a_good_rating_without_a_note_teaches_nothing_and_replaces_a_lesson(
    tmp_path: Path,
) -> None:
    saver = InMemorySaver(serde=make_serializer())
    store = InMemoryStore()
    _run(store, tmp_path, "first", saver=saver)
    feedback(saver, store, "first", 2, "")
    assert any(v.get("source") == "user" for v in _lessons(store).values())
    feedback(saver, store, "first", 5, "great")  # changed their mind: praise, no lesson
    assert not any(v.get("source") == "user" for v in _lessons(store).values())
    assert [r.rating for r in rated_runs(store, "default")] == [5]  # one verdict per run


def test_feedback_refuses_an_unknown_thread_and_a_bad_rating(tmp_path: Path) -> None:
    saver = InMemorySaver(serde=make_serializer())
    store = InMemoryStore()
    with pytest.raises(ThreadNotFoundError):
        feedback(saver, store, "ghost", 3)
    _run(store, tmp_path, "first", saver=saver)
    with pytest.raises(ValueError, match=r"^rating must be a whole number from 1 to 5, not 6$"):
        feedback(saver, store, "first", 6)
    assert not store.search(namespace("default", FEEDBACK))


def _item(key: str, text: str, source: str | None = None, goal: str | None = None) -> Item:
    value = (
        {"text": text} | ({"source": source} if source else {}) | ({"goal": goal} if goal else {})
    )
    return Item(value=value, key=key, namespace=namespace("default", LESSONS),
                created_at="2026-01-01T00:00:00+00:00", updated_at="2026-01-01T00:00:00+00:00")  # fmt: skip


def test_ranking_puts_a_users_lesson_first_among_the_nearest() -> None:
    store = InMemoryStore()  # no index: ranked here by cosine similarity
    engine = _item("engine", "Total the March invoices export amounts")
    user = _item("user", "Total the March invoices export amounts please", "user")
    unrelated = _item("other", "Translate a poem into French", "user")
    ranked = rank_items(store, [[engine, unrelated], [user]], "Total the March invoices", 2)
    assert [i.key for i in ranked] == ["user", "engine"]  # the unrelated one is not near


def test_a_users_lesson_on_a_recalled_goal_takes_the_weakest_engine_items_place() -> None:
    store = InMemoryStore()
    march, april = "Total the March invoices", "Total the April invoices"
    engine = [
        _item("e1", "Total the April invoices export amounts", goal=march),
        _item("e2", "Total the April invoices export amounts again", goal=march),
    ]
    # Scores below both engine items against the query, but it is the user's verdict
    # on the goal they were recalled for.
    user = _item("user", "A rated run", "user", goal=march)
    elsewhere = _item("poem", "A rated poem", "user", goal="Translate a poem")
    ranked = rank_items(store, [engine, [user, elsewhere]], april, 2)
    assert [i.key for i in ranked] == ["user", "e1"]


def test_feedback_from_the_cli(cli: Cli, tmp_path: Path) -> None:
    assert cli.run("rated")[0] == 0
    with pytest.raises(SystemExit) as refused:  # argparse's one line, exit 2
        cli("feedback", "rated", "--rating", "9")
    assert refused.value.code == 2
    code, text = cli("feedback", "ghost", "--rating", "2")
    assert code == 6 and "no thread 'ghost'" in text
    code, out = cli.json("feedback", "rated", "--rating", "2", "--note", "use 6*7=42 exactly")
    assert code == 0 and out["rating"] == 2 and out["lesson"] is True
    assert out["goal"] == "Multiply six by seven"
    code, text = cli("memory", "list", "--kind", "lessons")
    assert code == 0 and "rated:feedback:" in text and "use 6*7=42 exactly" in text
    code, text = cli("feedback", "rated", "--rating", "5")
    assert code == 0 and "5/5 stored" in text and "lesson" not in text
    assert "rated:feedback:" not in cli("memory", "list", "--kind", "lessons")[1]
