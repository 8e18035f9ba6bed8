"""The calculator tool: arithmetic, percentages, functions and abuse guards."""

from __future__ import annotations

import ast
import builtins

import pytest
from langchain_core.tools import ToolException

from aimegraph.tools.calculator import calculator, evaluate, format_number, make_calculator_tool


def calc(expression: str) -> str:
    return calculator.invoke({"expression": expression})


def test_tool_metadata() -> None:
    assert calculator.name == "calculator"
    assert set(calculator.args) == {"expression"}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2", "3"),
        ("2 * (3 + 4)", "14"),
        ("-3 + +5", "2"),
        ("7 / 2", "3.5"),
        ("10 / 5", "2"),
        ("7 // 2", "3"),
        ("-7 // 2", "-4"),
        ("10 % 3", "1"),
        ("2 ** 10", "1024"),
        ("2 ** -2", "0.25"),
        ("0.1 + 0.2", "0.3"),
        ("1e3", "1000"),
        ("1_000 * 3", "3000"),
        ("2 ** 100", str(2**100)),
    ],
)
def test_arithmetic(expression: str, expected: str) -> None:
    assert calc(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("15%", "0.15"),
        ("15% of 200", "30"),
        ("200 * 15%", "30"),
        ("50 + 10%", "55"),
        ("50 - 10%", "45"),
        ("50 + 10% of 200", "70"),
        ("(50 + 50)%", "1"),
        ("sqrt(16)%", "0.04"),
        ("10% of (200)", "20"),
        ("50% of (10 + 10)%", "0.1"),
        ("10 %3", "1"),
        ("10 % (2 + 1)", "1"),
    ],
)
def test_percentages_and_modulo(expression: str, expected: str) -> None:
    assert calc(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("sqrt(16)", "4"),
        ("sqrt(2)", "1.4142135623731"),
        ("abs(-3.5)", "3.5"),
        ("round(2.567, 2)", "2.57"),
        ("round(2.6)", "3"),
        ("min(4, 2, 8)", "2"),
        ("max(4, 2, 8)", "8"),
        ("log(e)", "1"),
        ("log(8, 2)", "3"),
        ("log10(1000)", "3"),
        ("exp(0)", "1"),
        ("floor(2.7)", "2"),
        ("ceil(2.1)", "3"),
        ("pi", "3.14159265358979"),
        ("2 * pi * 10", "62.8318530717959"),
    ],
)
def test_functions_and_constants(expression: str, expected: str) -> None:
    assert calc(expression) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1 / 0", "division by zero"),
        ("5 // 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("x + 1", "unknown name 'x'; allowed: sqrt, abs, round, min, max, log"),
        ("__import__('os')", "unknown name '__import__'"),
        ("True + 1", "unknown name 'True'"),
        ("lambda: 1", "unknown name 'lambda'"),
        ("(1).real", "attribute access is not allowed"),
        ("pi.x", "attribute access is not allowed"),
        ("'a' * 3", "only numbers are allowed"),
        ("1 +* 2", "syntax error at '* 2'"),
        ("(1 + 2", "syntax error"),
        ("2 ^ 3", "use ** for powers"),
        ("1,000", "write 1000, not 1,000"),
        ("1 < 2", "unsupported syntax: Compare"),
        ("sqrt", "'sqrt' is a function"),
        ("pi(2)", "'pi' is not a function"),
        ("round(2.5, 1.5)", "whole number of digits"),
        ("sqrt(-1)", "invalid call sqrt(-1): math domain error"),
        ("max()", "invalid call max()"),
        ("sqrt(pi=4)", "positional arguments only"),
        ("max(*(1, 2))", "positional arguments only"),
        ("(-8) ** (1/3)", "not a real number"),
        ("", "empty expression"),
    ],
)
def test_errors_are_clear_tool_exceptions(expression: str, message: str) -> None:
    with pytest.raises(ToolException) as info:
        calc(expression)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "expression", ["9 ** 9 ** 9", "10 ** 301", "2 ** 10000", "exp(1000)", "1e300 * 10"]
)
def test_huge_results_are_refused_before_they_are_computed(expression: str) -> None:
    # 9 ** 9 ** 9 computed exactly would take hours: without the guard this test would
    # run into the suite's timeout instead of getting the refusal.
    with pytest.raises(ToolException, match="result too large"):
        calc(expression)


def test_length_and_magnitude_caps_are_configurable() -> None:
    small = make_calculator_tool(max_chars=10, max_magnitude=1000)
    assert small.invoke({"expression": "999 + 1"}) == "1000"
    with pytest.raises(ToolException, match="result too large"):
        small.invoke({"expression": "999 + 2"})
    with pytest.raises(ToolException, match="expression too long"):
        small.invoke({"expression": "1 + 1 + 1 + 1"})
    with pytest.raises(ToolException, match="expression too long"):
        calc("1+" * 300 + "1")


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    with pytest.raises(ToolException):
        calc("(" * 240 + "1" + ")" * 240)


def test_never_calls_eval_or_exec(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("eval/exec must not be used")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    # evaluate() directly: LangChain's tool plumbing itself may use eval.
    assert evaluate("sqrt(16) + 15% of 200") == 34


def test_evaluate_returns_numbers() -> None:
    assert evaluate("7 // 2") == 3
    assert isinstance(evaluate("7 // 2"), int)
    assert evaluate("1 / 4") == 0.25
    assert ast.literal_eval(format_number(evaluate("2 ** 70"))) == 2**70


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, "3"),
        (3.0, "3"),
        (-0.0, "0"),
        (2.5, "2.5"),
        (1e20, "1e+20"),
        (1 / 3, "0.333333333333333"),
    ],
)
def test_format_number(value: float, expected: str) -> None:
    assert format_number(value) == expected
