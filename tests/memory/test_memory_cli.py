"""The CLI's memory: runs record into memory.db beside the checkpoints (or --store), a
new process still has it, and ``aimegraph memory list | search | forget | export``."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import TWO_TASKS, Cli

from aimegraph.cli import main


def test_runs_are_remembered_beside_the_checkpoints(cli: Cli, tmp_path: Path) -> None:
    assert cli.run("first")[0] == 0
    assert (tmp_path / "memory.db").is_file()
    code, listed = cli("memory", "list")
    assert code == 0
    assert "first:t1:1" in listed and "first:t2:1" in listed and "first:run:" in listed
    code, found = cli("memory", "search", "compute a product", "-k", "1")
    assert code == 0 and "first:t1:1" in found and "first:t2:1" not in found
    # A new process reads the same memory.
    listed_elsewhere = subprocess.run(
        [sys.executable, "-m", "aimegraph.cli", "--checkpoints", cli.url, "memory", "list"],
        capture_output=True, text=True, check=True, env={"COLUMNS": "200", "PATH": ""},
    ).stdout  # fmt: skip
    assert "first:t1:1" in listed_elsewhere


def test_forget_and_export(cli: Cli, tmp_path: Path) -> None:
    assert cli.run("first")[0] == 0
    assert cli("memory", "forget", "first:t1:1")[0] == 0
    assert cli("memory", "forget", "first:t1:1")[0] == 6  # already gone
    out = tmp_path / "memory.jsonl"
    assert cli("memory", "export", str(out))[0] == 0
    records: list[dict[str, Any]] = [json.loads(line) for line in out.read_text().splitlines()]
    keys = {r["key"] for r in records}
    assert "first:t1:1" not in keys and "first:t2:1" in keys
    assert all(r["namespace"][:2] == ["aimegraph", "default"] for r in records)


def test_store_option_and_user_scope(cli: Cli, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    config = json.dumps({"user_id": "ann"})
    code, _ = cli(
        "--store", store, "run", "Multiply six by seven", "--model", TWO_TASKS, "--thread",
        "ann", "--workspace", str(tmp_path / "ws"), "--config", config, "--json",
    )  # fmt: skip
    assert code == 0
    assert not (tmp_path / "memory.db").exists()
    assert "ann:t1:1" in cli("--store", store, "memory", "--user", "ann", "list")[1]
    assert "(no memories)" in cli("--store", store, "memory", "list")[1]


def test_memory_off_records_nothing(cli: Cli) -> None:
    code, _ = cli(
        "run", "Multiply six by seven", "--model", TWO_TASKS, "--thread", "off",
        "--workspace", str(cli.tmp_path / "ws"), "--config", '{"memory": "off"}', "--json",
    )  # fmt: skip
    assert code == 0
    assert "(no memories)" in cli("memory", "list")[1]


def test_run_remembers_in_the_embedded_store_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No flags: memory is on, in SQLite at .aimegraph/memory.db beside the default
    .aimegraph/checkpoints.db."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    code = main(["run", "Multiply six by seven", "--model", TWO_TASKS, "--thread", "plain",
                 "--json"])  # fmt: skip
    assert code == 0
    assert (tmp_path / ".aimegraph" / "checkpoints.db").is_file()
    with sqlite3.connect(tmp_path / ".aimegraph" / "memory.db") as conn:
        keys = {k for (k,) in conn.execute("SELECT key FROM store WHERE prefix LIKE 'aimegraph.%'")}
    assert {"plain:t1:1", "plain:t2:1"} <= keys
    capsys.readouterr()
    assert main(["memory", "list"]) == 0
    assert "plain:t1:1" in capsys.readouterr().out


def test_memory_ttl_days_ages_memories_out(cli: Cli, tmp_path: Path) -> None:
    assert cli.run("kept")[0] == 0
    assert cli.run("aging", before=("--memory-ttl-days", "30"))[0] == 0
    with sqlite3.connect(tmp_path / "memory.db") as conn:
        expiry = dict(conn.execute("SELECT key, expires_at FROM store WHERE key LIKE '%:t1:1'"))
    assert expiry["kept:t1:1"] is None and expiry["aging:t1:1"] is not None
    assert cli("--memory-ttl-days", "0", "memory", "list")[0] == 2  # a usage error
