"""The reference grammar of tool steps' arguments (aimegraph.state.references)."""

from __future__ import annotations

from typing import Any

import pytest

from aimegraph.state import TaskResult
from aimegraph.state.references import UnresolvedReferenceError, referenced_ids, resolve_args

RESULTS = {
    "t1": TaskResult(
        status="completed",
        summary='{"n": 3, "rows": [{"name": "a"}, {"name": "b"}], "nested": "{\\"x\\": 1}"}',
        artifacts={"file": "out.csv"},
    ),
    "t2": TaskResult(status="completed", summary="plain text", artifacts={"k": '{"v": [7]}'}),
    "my-task": TaskResult(status="completed", summary="odd id"),
}


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("$t2", "plain text"),
        ("$t1.n", 3),  # a whole reference keeps its type
        ("$t1.rows.1.name", "b"),
        ("$t1.rows.0", {"name": "a"}),
        ("$t1.nested.x", 1),  # a string holding JSON is walked into
        ("$t1.file", "out.csv"),  # not in the JSON: from the artifacts
        ("$t2.k.v.0", 7),  # the text is not JSON: from the artifacts
        ("${my-task}", "odd id"),
        ("n=$t1.n.", "n=3."),  # a trailing dot is text
        ("${t2}.csv", "plain text.csv"),
        ("rows: $t1.rows.0", 'rows: {"name": "a"}'),
        ("costs $$5, $ 6 and $", "costs $5, $ 6 and $"),
        ("$$t1", "$t1"),
    ],
)
def test_references_are_filled_in(written: str, value: Any) -> None:
    assert resolve_args({"a": written}, RESULTS) == {"a": value}


def test_references_in_nested_values_are_filled_in_and_keys_left_alone() -> None:
    args = {"opts": {"$t2": ["$t1.n", 5, None]}}
    assert resolve_args(args, RESULTS) == {"opts": {"$t2": [3, 5, None]}}
    assert referenced_ids(args) == {"t1"}


@pytest.mark.parametrize(
    ("written", "says"),
    [
        ("$t9", "$t9: task 't9' has no result"),
        (
            "$t1.wind",
            "$t1.wind: no field 'wind' (fields: n, rows, nested) in the result of 't1', "
            "and it has no artifact 'wind' (artifacts: file)",
        ),  # fmt: skip
        ("$t1.rows.5", "no field 'rows.5'"),
        ("$t2.v", "no field 'v': the text is not JSON in the result of 't2'"),
        ("$t2.k.w", "$t2.k.w: no field 'w' (fields: v) in artifact 'k' of 't2'"),
    ],
)
def test_a_value_that_is_not_there_says_why(written: str, says: str) -> None:
    with pytest.raises(UnresolvedReferenceError) as caught:
        resolve_args({"a": written}, RESULTS)
    assert says in str(caught.value)


def test_referenced_ids_reads_every_form() -> None:
    assert referenced_ids({"a": "$a.b and ${c-d.e} but $$f", "b": ["$g"], "c": 7}) == {
        "a",
        "c-d",
        "g",
    }
