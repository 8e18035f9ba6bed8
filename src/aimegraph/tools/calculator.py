"""A safe arithmetic calculator tool.

Expressions are parsed with :mod:`ast` and evaluated by walking the tree; nothing
is ever passed to ``eval`` or ``exec``. Only numbers, arithmetic operators,
parentheses, a fixed set of functions and the constants ``pi`` and ``e`` exist.

Percentages follow pocket-calculator conventions. A ``%`` that is directly followed
by a number, a name or ``(`` is the modulo operator (``10 % 3`` is 1); any other
``%`` is a percent sign, and then:

* ``15%`` is 0.15 and ``200 * 15%`` is 30;
* ``15% of 200`` is 30 (``of`` is only accepted right after a percent sign);
* ``50 + 10%`` is 55 and ``50 - 10%`` is 45: a percentage added to or subtracted
  from a value is a percentage *of that value*.

Write ``10 % (-3)`` for a modulo by a negative number: ``10 % -3`` reads as
``10% - 3``.
"""

from __future__ import annotations

import ast
import io
import math
import operator
import tokenize
from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

__all__ = ["CalculatorInput", "calculator", "evaluate", "format_number", "make_calculator_tool"]

Number = int | float

DEFAULT_MAX_CHARS = 500
DEFAULT_MAX_MAGNITUDE = 1e300

_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "floor": math.floor,
    "ceil": math.ceil,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}
_NAMES = _FUNCTIONS.keys() | _CONSTANTS.keys()
_ALLOWED_NAMES = ", ".join([*_FUNCTIONS, *_CONSTANTS])

_BINARY_OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY_OPERATORS: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}

# Postfix percent signs are rewritten into calls of this marker. The name cannot
# come from the user: every name in the input is checked against the allowed names
# before the rewrite.
_PERCENT = "__percent__"
_OPERAND_END = {tokenize.NUMBER, tokenize.NAME}
_SKIPPED_TOKENS = {
    tokenize.ENCODING,
    tokenize.NEWLINE,
    tokenize.NL,
    tokenize.ENDMARKER,
    tokenize.INDENT,
    tokenize.DEDENT,
}


class CalculatorInput(BaseModel):
    """Arguments of the calculator tool."""

    expression: str = Field(
        description=(
            "Arithmetic expression, e.g. '(3 + 4) * 2', 'sqrt(2) ** 3', '15% of 200', "
            f"'50 + 10%'. Operators: + - * / // % **. Names: {_ALLOWED_NAMES}."
        )
    )


def _tokens(expression: str) -> list[tokenize.TokenInfo]:
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(expression).readline))
    except tokenize.TokenError as exc:
        raise ToolException(f"syntax error: {exc.args[0]} (check the parentheses)") from exc
    except SyntaxError as exc:
        raise ToolException(f"syntax error at column {exc.offset}: {exc.msg}") from exc
    return [tok for tok in tokens if tok.type not in _SKIPPED_TOKENS]


def _operand_start(tokens: list[tokenize.TokenInfo], end: int) -> int:
    """Index of the first token of the operand that ends at ``tokens[end]``."""
    if tokens[end].string != ")":
        return end
    depth = 0
    for i in range(end, -1, -1):
        if tokens[i].string == ")":
            depth += 1
        elif tokens[i].string == "(":
            depth -= 1
            if depth == 0:
                # A call such as ``sqrt(4)%`` takes the function name along.
                return i - 1 if i > 0 and tokens[i - 1].string in _FUNCTIONS else i
    raise ToolException("syntax error: unbalanced parentheses")


def _rewrite_percent(expression: str) -> str:
    """Check the names in ``expression`` and turn postfix ``%`` into marker calls."""
    tokens = _tokens(expression)
    out: list[str] = []
    # Start index in ``out`` of each already emitted token, to wrap operands.
    starts: list[int] = []
    after_percent = False
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.NAME and tok.string not in _NAMES:
            if tok.string == "of" and after_percent:
                starts.append(len(out))
                out.append("*")
                after_percent = False
                continue
            raise ToolException(f"unknown name '{tok.string}'; allowed: {_ALLOWED_NAMES}")
        after_percent = False
        if tok.string == "%" and i > 0:
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            is_modulo = (
                nxt is not None
                and nxt.string != "of"
                and (nxt.type in _OPERAND_END or nxt.string == "(")
            )
            prev = tokens[i - 1]
            if not is_modulo and (prev.type in _OPERAND_END or prev.string == ")"):
                first = starts[_operand_start(tokens, i - 1)]
                out[first:] = [_PERCENT, "(", *out[first:], ")"]
                after_percent = True
                starts.append(len(out))
                continue
        if tok.string == "^":
            raise ToolException("'^' is not supported; use ** for powers")
        if tok.string == ".":
            raise ToolException("attribute access is not allowed")
        starts.append(len(out))
        out.append(tok.string)
    # Tokens joined by spaces re-parse to the same expression.
    return " ".join(out)


class _Evaluator:
    def __init__(self, max_magnitude: float) -> None:
        self.max_magnitude = max_magnitude

    def check(self, value: Any) -> Number:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ToolException("the result is not a real number")
        if isinstance(value, float) and not math.isfinite(value):
            raise ToolException("result too large")
        if abs(value) > self.max_magnitude:
            raise ToolException(f"result too large (limit {self.max_magnitude:g})")
        return value

    def eval(self, node: ast.AST) -> Number:
        return self.check(self._eval(node))

    def _eval(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return self.eval(node.body)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise ToolException(f"only numbers are allowed, got {node.value!r}")
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in _CONSTANTS:
                raise ToolException(f"'{node.id}' is a function; call it like {node.id}(x)")
            return _CONSTANTS[node.id]
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY_OPERATORS:
            return _UNARY_OPERATORS[type(node.op)](self.eval(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPERATORS:
            return self._binop(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Tuple):
            raise ToolException("commas only separate function arguments; write 1000, not 1,000")
        raise ToolException(f"unsupported syntax: {type(node).__name__}")

    def _binop(self, node: ast.BinOp) -> Any:
        left = self.eval(node.left)
        if isinstance(node.op, ast.Add | ast.Sub) and _is_percent(node.right):
            rate = self.eval(node.right)
            return left * (1 + rate if isinstance(node.op, ast.Add) else 1 - rate)
        right = self.eval(node.right)
        if isinstance(node.op, ast.Pow):
            self._check_power(left, right)
        try:
            return _BINARY_OPERATORS[type(node.op)](left, right)
        except ZeroDivisionError as exc:
            raise ToolException("division by zero") from exc
        except OverflowError as exc:
            raise ToolException("result too large") from exc

    def _check_power(self, base: Number, exponent: Number) -> None:
        # Estimate the size first: computing 9 ** 10**9 exactly would hang the process.
        if base == 0 and exponent < 0:
            raise ToolException("division by zero")
        if abs(base) in (0, 1) or exponent <= 0:
            return
        if exponent * math.log10(abs(base)) > math.log10(self.max_magnitude):
            raise ToolException(f"result too large (limit {self.max_magnitude:g})")

    def _call(self, node: ast.Call) -> Any:
        if not isinstance(node.func, ast.Name):
            raise ToolException("only the built-in functions can be called")
        name = node.func.id
        if node.keywords or any(isinstance(arg, ast.Starred) for arg in node.args):
            raise ToolException(f"{name}() takes positional arguments only")
        args = [self.eval(arg) for arg in node.args]
        if name == _PERCENT:
            return args[0] / 100
        if name not in _FUNCTIONS:
            raise ToolException(f"'{name}' is not a function; functions: {', '.join(_FUNCTIONS)}")
        if name == "round" and len(args) == 2 and not isinstance(args[1], int):
            raise ToolException("round(x, n) needs a whole number of digits n")
        try:
            return _FUNCTIONS[name](*args)
        except OverflowError as exc:
            raise ToolException("result too large") from exc
        except (TypeError, ValueError) as exc:
            shown = ", ".join(format_number(arg) for arg in args)
            raise ToolException(f"invalid call {name}({shown}): {exc}") from exc


def _is_percent(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == _PERCENT
    )


def evaluate(
    expression: str,
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_magnitude: float = DEFAULT_MAX_MAGNITUDE,
) -> Number:
    """Evaluate an arithmetic expression safely.

    Raises:
        ToolException: the expression is empty, too long, malformed, uses anything
            outside the allowed operators, functions and constants, divides by zero
            or produces a magnitude above ``max_magnitude``.
    """
    expression = expression.strip()
    if not expression:
        raise ToolException("empty expression")
    if len(expression) > max_chars:
        raise ToolException(
            f"expression too long ({len(expression)} characters, limit {max_chars})"
        )
    source = _rewrite_percent(expression)
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise ToolException(f"syntax error {_near(source, exc.offset)}: {exc.msg}") from exc
    except (RecursionError, MemoryError) as exc:
        raise ToolException("expression nested too deeply") from exc
    try:
        return _Evaluator(max_magnitude).eval(tree)
    except RecursionError as exc:
        raise ToolException("expression nested too deeply") from exc


def _near(source: str, offset: int | None) -> str:
    # Offsets refer to the space-joined rewrite, so show the text there, not a column.
    rest = source[(offset or 1) - 1 :].strip()
    return f"at '{rest[:20]}'" if rest else "at the end of the expression"


def format_number(value: Number) -> str:
    """Render a result: whole numbers without ``.0``, others to 15 significant digits."""
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        # 15 digits hide binary rounding noise such as 0.1 + 0.2 = 0.30000000000000004.
        return f"{value:.15g}"
    return str(value)


def make_calculator_tool(
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_magnitude: float = DEFAULT_MAX_MAGNITUDE,
) -> BaseTool:
    """Build the ``calculator`` tool with the given expression length and magnitude caps."""

    def calculate(expression: str) -> str:
        return format_number(evaluate(expression, max_chars=max_chars, max_magnitude=max_magnitude))

    return StructuredTool.from_function(
        func=calculate,
        name="calculator",
        description=(
            "Evaluate an arithmetic expression exactly and return the number. Use it for "
            "any arithmetic instead of computing in your head. Supports + - * / // % ** "
            f"and parentheses, the names {_ALLOWED_NAMES}, and percentages: "
            "'15% of 200' = 30, '200 * 15%' = 30, '50 + 10%' = 55."
        ),
        args_schema=CalculatorInput,
    )


calculator: BaseTool = make_calculator_tool()
"""The calculator tool with default limits."""
