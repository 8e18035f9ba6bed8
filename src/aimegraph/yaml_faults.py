"""A YAML syntax error told on one line, for every file a user writes (eval suites,
systems, alert rules): PyYAML's own message quotes the text over several lines."""

from __future__ import annotations

import yaml

__all__ = ["yaml_problem"]


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML syntax error as the tail of one line after the file name: where
    (``line L column C``) and what, without PyYAML's multi-line excerpt."""
    if not isinstance(exc, yaml.MarkedYAMLError) or exc.problem_mark is None:
        return f" is not valid YAML: {' '.join(str(exc).split())}"
    mark = exc.problem_mark
    said = f" line {mark.line + 1} column {mark.column + 1}: not valid YAML: {exc.problem}"
    if exc.context and exc.context_mark is not None and exc.context_mark.line != mark.line:
        said += f" ({exc.context} started at line {exc.context_mark.line + 1})"
    elif exc.context:
        said += f" ({exc.context})"
    return said
