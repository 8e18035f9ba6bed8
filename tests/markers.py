"""Markers shared by test modules."""

import importlib.util

import pytest

LOCAL_LLM = [
    pytest.mark.local_llm,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None,
        reason="llama_cpp is not importable: pip install 'aimegraph[local]'",
    ),
]
"""Runs the bundled Gemma 3 270M through llama.cpp (the ``[local]`` extra)."""
