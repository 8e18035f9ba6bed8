"""``aimegraph run --stream``: the answer is printed as the model writes it, and not
printed again in the summary."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

from langchain_core.messages import AIMessageChunk
from rich.console import Console
from tests.conftest import TWO_TASKS, Cli

from aimegraph.console import LiveProgress
from aimegraph.streaming import ROLE


def test_run_stream_prints_the_answer_then_a_summary_without_it(cli: Cli) -> None:
    code, text = cli(
        "run", "Multiply six by seven", "--model", TWO_TASKS, "--thread", "s",
        "--workspace", str(cli.workspace), "--stream",
    )  # fmt: skip
    assert code == 0
    answer = "Answer: six times seven is the product is 42"
    assert f"answer:\n{answer}\n" in text
    assert text.count(answer) == 1 and "final answer: as streamed above" in text


def test_the_answer_is_printed_piece_by_piece_as_it_streams() -> None:
    out = io.StringIO()
    progress = LiveProgress(Console(file=out, width=120))
    pieces = ["Paris ", "has ", "2.1 ", "million."]

    def stream() -> Iterator[tuple[tuple[str, ...], str, Any]]:
        for number, piece in enumerate(pieces):
            # Every piece already printed before the next one is generated.
            assert out.getvalue().endswith("".join(pieces[:number]))
            yield (), "messages", (AIMessageChunk(content=piece, id="r"), {ROLE: "reporter"})
            yield ("executor:1",), "messages", (AIMessageChunk(content="noise"), {ROLE: "actor"})

    with progress:
        progress.follow(stream())
    assert out.getvalue() == "answer:\nParis has 2.1 million.\n"
    assert progress.answer == "Paris has 2.1 million."
