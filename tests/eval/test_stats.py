"""pass@k, pass^k, the Wilson interval and the paired sign test, against values
worked out by hand or published."""

from __future__ import annotations

import pytest

from aimegraph.eval.stats import paired, pass_at_k, pass_hat_k, sign_test, wilson
from aimegraph.eval.summary import compare


def test_pass_at_k_and_pass_hat_k() -> None:
    # n=5, c=2: pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass^2 = C(2,2)/C(5,2) = 1/10.
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_hat_k(5, 2, 2) == pytest.approx(0.1)
    assert pass_at_k(5, 2, 1) == pass_hat_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(3, 0, 3) == 0.0 and pass_at_k(3, 1, 3) == 1.0
    assert pass_hat_k(3, 3, 3) == 1.0 and pass_hat_k(3, 2, 3) == 0.0
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_wilson_interval_matches_published_values() -> None:
    # Wilson score interval, z = 1.96 (Newcombe 1998, Table I): 0/10, 5/10, 81/263.
    assert wilson(0.0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(0.5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(81 / 263, 263) == pytest.approx((0.2553, 0.3662), abs=1e-4)
    low, high = wilson(1.0, 30)
    assert high == pytest.approx(1.0) and low == pytest.approx(0.8865, abs=1e-4)


def test_sign_test() -> None:
    assert sign_test(8, 1) == pytest.approx(2 * (1 + 9) / 512)
    assert sign_test(0, 0) == 1.0 and sign_test(3, 3) == 1.0


def test_paired_difference() -> None:
    result = paired([1, 1, 0, 1], [0, 1, 0, 0])
    assert result.mean_difference == pytest.approx(0.5)
    assert (result.a_better, result.b_better, result.ties) == (2, 0, 2)
    # sd of (1, 0, 0, 1) = sqrt(1/3); half-width 1.96 * sqrt(1/3) / 2.
    low, high = result.interval
    assert high - 0.5 == pytest.approx(1.959964 * (1 / 3) ** 0.5 / 2, abs=1e-5)
    assert result.p_value == pytest.approx(0.5)


def _record(task: str, passed: bool, tokens: int) -> dict[str, object]:
    return {
        "task": task,
        "passed": passed,
        "usage": {"input_tokens": tokens, "output_tokens": 0, "cost_usd": 0.0},
    }


def test_compare_pairs_by_task() -> None:
    a = [_record("x", True, 10), _record("x", False, 10), _record("y", True, 20)]
    b = [_record("x", False, 5), _record("y", True, 5), _record("z", True, 5)]
    result = compare(a, b, label_a="A", label_b="B")
    assert result["tasks"] == 2 and result["only_in_b"] == ["z"]
    assert result["pass_at_1_a"] == pytest.approx(0.75) and result["pass_at_1_b"] == 0.5
    assert result["differing"] == [{"task": "x", "a": 0.5, "b": 0.0}]
    assert result["per_solved_a"]["input_tokens_per_solved"] == pytest.approx(40 / 2)
    assert result["per_solved_b"]["input_tokens_per_solved"] == pytest.approx(10 / 1)
    with pytest.raises(ValueError, match="no task in common"):
        compare(a, [_record("q", True, 1)], label_a="A", label_b="B")
