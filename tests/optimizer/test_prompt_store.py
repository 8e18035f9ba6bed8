"""The prompt store (an append-only JSON Lines file) and ``aimegraph prompts``.

Versions are content hashes with parents, scores, source and date; the active
pointer is the last ``use`` record; other processes (and other store objects)
see what one appended; ``aimegraph run`` picks the active version up.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from aimegraph.optimizer.store import (
    PromptStore,
    UnknownPromptVersionError,
    UnreadablePromptRecordWarning,
    default_prompt_store,
)
from aimegraph.prompts import DEFAULT_PROMPTS, planner, reporter
from aimegraph.prompts.source import DEFAULT_VERSION, version_id
from tests.conftest import TWO_TASKS, Cli

CHECKING = planner.SYSTEM + "\nAlways end the plan with a task that checks the result.\n"


@pytest.fixture
def store(tmp_path: Path) -> PromptStore:
    return PromptStore(tmp_path / "prompts.jsonl")


def test_versions_keep_full_texts_parent_scores_source_and_date(store: PromptStore) -> None:
    assert store.list() == [] and store.active() is None and store.current() == DEFAULT_VERSION
    v1 = store.add({"planner": CHECKING}, scores={"val": 0.5}, source="manual", note="checking")
    v2 = store.add({"reporter": "# Role: reporter\nBe brief."}, parent=v1, source="gepa")
    first, second = store.get(v1), store.get(v2)
    assert v1 == version_id({**DEFAULT_PROMPTS, "planner": CHECKING})
    assert first.parent is None and second.parent == v1
    # A child holds every component: the parent's planner text is kept in full.
    assert second.texts["planner"] == CHECKING and second.texts["actor"] == DEFAULT_PROMPTS["actor"]
    assert second.changed() == ["planner", "reporter"] and second.changed(first.texts) == [
        "reporter"
    ]
    assert (first.source, first.note, first.scores) == ("manual", "checking", {"val": 0.5})
    assert second.source == "gepa" and second.created_at.startswith("20")
    assert [v.version for v in store.list()] == [v1, v2]


def test_adding_stored_texts_again_only_records_their_scores(store: PromptStore) -> None:
    v1 = store.add({"planner": CHECKING}, scores={"val": 0.5})
    assert store.add({"planner": CHECKING}, scores={"train": 0.9}) == v1
    store.score(v1[:6], {"val": 0.75})
    assert len(store.list()) == 1
    assert store.get(v1).scores == {"val": 0.75, "train": 0.9}


def test_best_picks_the_highest_score_of_a_metric(store: PromptStore) -> None:
    low = store.add({"reporter": reporter.SYSTEM + "A"}, scores={"val": 0.2, "train": 0.9})
    high = store.add({"reporter": reporter.SYSTEM + "B"}, scores={"val": 0.8})
    store.add({"reporter": reporter.SYSTEM + "C"})
    assert store.best("val") == high and store.best("train") == low and store.best("x") is None
    # The built-in prompts can be scored as a baseline without being added first.
    assert store.score("default", {"val": 0.9}) == DEFAULT_VERSION
    assert store.best("val") == DEFAULT_VERSION and store.get(DEFAULT_VERSION).source == "default"


def test_use_sets_the_active_version_for_every_reader(store: PromptStore) -> None:
    v1 = store.add({"planner": CHECKING})
    other = PromptStore(store.path)  # e.g. a graph's store in another process
    assert other.current() == DEFAULT_VERSION
    assert store.use(v1[:5]) == v1
    assert other.active() == v1 and other.texts()["planner"] == CHECKING
    store.use("default")
    assert other.current() == DEFAULT_VERSION and other.texts() == dict(DEFAULT_PROMPTS)
    records = [json.loads(line) for line in store.path.read_text().splitlines()]
    assert [r["kind"] for r in records] == ["prompt", "use", "use"]  # append-only


def test_unknown_and_ambiguous_versions_are_refused(store: PromptStore) -> None:
    with pytest.raises(UnknownPromptVersionError, match="no prompt version 'nope'"):
        store.get("nope")
    versions = [store.add({"reporter": reporter.SYSTEM + str(i)}) for i in range(40)]
    shared = next(
        a[0] for a in versions if sum(b.startswith(a[0]) for b in versions + [DEFAULT_VERSION]) > 1
    )
    with pytest.raises(UnknownPromptVersionError, match="ambiguous"):
        store.get(shared)
    with pytest.raises(UnknownPromptVersionError):
        store.use("nope")
    with pytest.raises(UnknownPromptVersionError):
        store.add({"planner": CHECKING}, parent="nope")


def test_bad_texts_are_refused_and_nothing_is_written(store: PromptStore) -> None:
    with pytest.raises(ValueError, match=r"lacks placeholder"):
        store.add({"planner": "# Role: planner\nPlan it."})
    with pytest.raises(ValueError, match="unknown prompt component"):
        store.add({"plannr": "x"})
    assert not store.path.exists()


def test_unreadable_lines_are_skipped_with_a_warning(store: PromptStore) -> None:
    v1 = store.add({"planner": CHECKING})
    with store.path.open("a") as handle:
        handle.write('{not json\n{"kind": "prompt", "version": "x"}\n{"kind": "use", "ver')
    reader = PromptStore(store.path)
    with pytest.warns(UnreadablePromptRecordWarning, match=r"prompts.jsonl: skipped") as seen:
        assert [v.version for v in reader.list()] == [v1]
    assert len(seen) == 2  # the torn last line is not read yet: it may still be written
    # The next append ends the torn line first, so the new record stays readable.
    with pytest.warns(UnreadablePromptRecordWarning):
        store.use(v1)
    with pytest.warns(UnreadablePromptRecordWarning):  # a new reader sees the bad lines again
        assert PromptStore(store.path).active() == v1


def test_concurrent_writers_and_readers_lose_no_record(store: PromptStore) -> None:
    reader = PromptStore(store.path)  # one object read by several threads, as a graph's is
    writing = threading.Event()

    def add(worker: int) -> None:
        mine = PromptStore(store.path)
        for i in range(10):
            mine.add({"reporter": f"{reporter.SYSTEM}{worker}-{i}"}, scores={"val": i / 10})

    def read() -> None:
        while writing.is_set():
            reader.current()
            reader.list()

    writing.set()
    readers = [threading.Thread(target=read) for _ in range(3)]
    writers = [threading.Thread(target=add, args=(w,)) for w in range(4)]
    for thread in readers + writers:
        thread.start()
    for thread in writers:
        thread.join()
    writing.clear()
    for thread in readers:
        thread.join()
    assert len(PromptStore(store.path).list()) == 40
    assert len(reader.list()) == 40
    assert all(json.loads(line) for line in store.path.read_text().splitlines())


def test_default_store_sits_beside_sqlite_checkpoints(tmp_path: Path) -> None:
    assert default_prompt_store(f"sqlite:///{tmp_path}/cp.db") == tmp_path / "prompts.jsonl"
    assert default_prompt_store("memory") == Path(".aimegraph/prompts.jsonl")


# --- aimegraph prompts ---


def test_cli_list_show_diff_use(cli: Cli, tmp_path: Path) -> None:
    store = PromptStore(tmp_path / "prompts.jsonl")  # beside cp.db: the CLI's default
    v1 = store.add({"planner": CHECKING}, scores={"val": 0.5}, note="adds a check")
    v2 = store.add({"reporter": "# Role: reporter\nBe brief."}, parent=v1, source="gepa")

    code, listed = cli("prompts", "list")
    assert code == 0
    assert f"  {v1}" in listed and "val=0.5" in listed and "adds a check" in listed
    assert f"gepa    parent {v1}" in listed and "changed: planner, reporter" in listed
    assert "active: none" in listed

    code, shown = cli("prompts", "show", v2[:6])
    assert code == 0 and f"version {v2}\n" in shown and f"parent: {v1}" in shown
    for name in DEFAULT_PROMPTS:  # every component, in full
        assert f"--- {name} ---" in shown
    assert "Always end the plan with a task that checks the result." in shown
    code, text = cli("prompts", "show", v2, "--component", "reporter")
    assert (code, text) == (0, "# Role: reporter\nBe brief.\n")

    code, shown = cli("prompts", "show", "default")
    assert code == 0 and f"version default ({DEFAULT_VERSION})" in shown
    assert DEFAULT_PROMPTS["actor"].strip() in shown

    code, diff = cli("prompts", "diff", v1, v2)
    assert code == 0 and diff.startswith(f"--- {v1}/reporter\n+++ {v2}/reporter\n")
    assert "+Be brief.\n" in diff and "planner" not in diff
    code, diff = cli("prompts", "diff", "default", v1, "--json")
    assert code == 0 and list(json.loads(diff)) == ["planner"]
    assert "+Always end the plan" in json.loads(diff)["planner"]
    code, same = cli("prompts", "diff", v1, v1)
    assert code == 0 and "no differences" in same

    code, used = cli("prompts", "use", v1[:4])
    assert code == 0 and used.strip() == f"active prompt version: {v1}"
    code, listed = cli("prompts", "list", "--json")
    rows = json.loads(listed)
    assert [(r["version"], r["active"]) for r in rows] == [(v1, True), (v2, False)]
    assert "texts" not in rows[0] and rows[1]["changed"] == ["planner", "reporter"]


def test_cli_unknown_version_is_exit_6(cli: Cli, tmp_path: Path) -> None:
    code, out = cli("prompts", "show", "0123456789ab")
    assert code == 6 and "error: no prompt version '0123456789ab'" in out
    code, out = cli("prompts", "use", "zzz")
    assert code == 6 and "error:" in out


def test_cli_add_a_prompt_set_file(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "set.yaml"
    path.write_text("persona_habits: Always state units.\n", encoding="utf-8")
    code, out = cli("prompts", "add", str(path), "--note", "units", "--use", "--json")
    assert code == 0
    added = json.loads(out)
    assert added["active"] == added["version"]
    stored = PromptStore(tmp_path / "prompts.jsonl").get(added["version"])
    assert stored.texts["persona_habits"] == "Always state units." and stored.note == "units"
    path.write_text("persona_habits: 'Use {units}.'\n", encoding="utf-8")
    code, out = cli("prompts", "add", str(path))
    assert code == 2 and "error: prompt 'persona_habits' has unknown placeholder" in out


@pytest.mark.filterwarnings("error::aimegraph.prompts.source.UnknownPromptVersionWarning")
def test_cli_run_uses_the_active_version_and_resume_keeps_it(cli: Cli, tmp_path: Path) -> None:
    store = PromptStore(tmp_path / "prompts.jsonl")
    v1 = store.add({"persona_habits": "Double-check every product."})
    ws = str(tmp_path / "ws")
    run = ("run", "Multiply six by seven", "--model", TWO_TASKS, "--workspace", ws)

    code, out = cli(*run, "--thread", "plain", "--json")  # no active version: built-in
    assert code == 0 and json.loads(out)["prompt_version"] == DEFAULT_VERSION

    store.use(v1)
    code, out = cli(*run, "--thread", "tuned")
    assert code == 0 and f"prompts: version {v1} from {store.path}" in out
    code, out = cli("show", "tuned", "--json")
    assert json.loads(out)["prompt_version"] == v1

    # An explicit prompt set wins over the store.
    path = tmp_path / "set.json"
    path.write_text(json.dumps({"persona_habits": "Be exact."}), encoding="utf-8")
    code, out = cli(*run, "--thread", "file", "--prompts", str(path), "--json")
    assert code == 0
    assert json.loads(out)["prompt_version"] == version_id(
        {**DEFAULT_PROMPTS, "persona_habits": "Be exact."}
    )
    code, out = cli(*run, "--thread", "bad", "--prompts", str(tmp_path / "none.yaml"))
    assert code == 2 and "none.yaml: no such file" in out
    code, out = cli(*run, "--thread", "bad", "--prompts", str(tmp_path / "typo.jsonl"))
    assert code == 2 and "typo.jsonl: no such file" in out

    # A paused run resumed after the active version changed keeps its own.
    code, _ = cli(*run, "--thread", "paused", "--approve-plan", "--json")
    assert code == 5
    v2 = store.add({"persona_habits": "Round nothing."}, parent=v1)
    store.use(v2)
    code, out = cli("resume", "paused", "--approve", "--json")
    assert code == 0 and json.loads(out)["prompt_version"] == v1


@pytest.mark.slow
def test_cli_prompts_in_a_new_process(cli: Cli, tmp_path: Path) -> None:
    store = PromptStore(tmp_path / "prompts.jsonl")
    v1 = store.add({"planner": CHECKING}, source="gepa")
    done = subprocess.run(
        [sys.executable, "-m", "aimegraph.cli", "--checkpoints", cli.url, "prompts", "use", v1],
        capture_output=True, text=True, check=True, env={"COLUMNS": "200", "PATH": ""},
    )  # fmt: skip
    assert v1 in done.stdout and PromptStore(store.path).active() == v1
