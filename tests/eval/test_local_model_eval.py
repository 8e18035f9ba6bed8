"""A smoke run of ``aimegraph eval`` with the bundled Gemma 3 270M (``--model local``):
whatever it scores, every rollout ends as a record with its status and reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aimegraph.cli import main
from aimegraph.eval.harness import REPORT_HTML, RESULTS
from tests.markers import LOCAL_LLM

pytestmark = LOCAL_LLM

pytest.importorskip("langchain.agents", reason="create_agent needs the [eval] extra")


@pytest.mark.timeout(900)
def test_bundled_gemma_ends_as_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = main(
        [
            "--checkpoints",
            "memory",
            "eval",
            "bundled",
            "--model",
            "local",
            "--tasks",
            "compound-interest",
            "--max-llm-calls",
            "3",
            "--concurrency",
            "1",
            "--out",
            str(out),
            "--json",
        ]
    )
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["complete"]
    records = [json.loads(line) for line in (out / RESULTS).read_text().splitlines()]
    assert sorted(r["system"] for r in records) == ["aimegraph", "create_agent"]
    for record in records:
        assert record["passed"] or record["failure"], record
        assert record["status"] in ("succeeded", "failed", "budget_exhausted", "rejected")
        assert 1 <= record["usage"]["llm_calls"] <= 3 + 2  # a planner visit may pass the cap
        assert record["usage"]["input_tokens"] > 0
    assert (out / REPORT_HTML).is_file()
