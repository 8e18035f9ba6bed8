"""Markers shared by test modules."""

import importlib.util
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

LOCAL_LLM = [
    pytest.mark.local_llm,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None,
        reason="llama_cpp is not importable: pip install 'aimegraph[local]'",
    ),
]
"""Runs the bundled Gemma 3 270M through llama.cpp (the ``[local]`` extra)."""

F = TypeVar("F", bound=Callable[..., Any])


def skip_for_quality(reason: str) -> Callable[[F], F]:
    """Skip one of LangChain's standard tests that fails on the model's answer, not on
    the contract (``reason`` says why). langchain-tests accepts an overridden standard
    test only when it carries an ``xfail`` mark with a reason, so it gets one too; the
    skip keeps it from running."""

    def mark(test: F) -> F:
        return pytest.mark.skip(reason=reason)(pytest.mark.xfail(reason=reason)(test))

    return mark
