"""Typed final answers: the ``response_format`` a graph's reporter fills in.

A format is a pydantic model or a JSON schema (a mapping describing an object), as
LangChain's ``create_agent`` takes it. Either way the reporter asks for it through
:func:`aimegraph.models.calls.structured_steps` (native structured output or
prompted JSON, with re-asks when a reply does not validate), so a JSON schema is
wrapped in a pydantic model whose schema is the given one and whose validation is
the schema's own (``jsonschema``). The state's ``structured_response`` is then an
instance of the pydantic model, or a plain ``dict`` for a JSON schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator

from aimegraph.imports import import_object

__all__ = ["ResponseFormat", "TypedAnswer", "answer_as_json", "load_response_format"]

ResponseFormat = type[BaseModel] | Mapping[str, Any]
"""What ``build_aime_graph(response_format=...)`` takes."""


class _JsonSchemaAnswer(BaseModel):
    """An answer checked against a JSON schema: its fields are the reply's keys."""

    model_config = ConfigDict(extra="allow", frozen=True)
    json_schema: ClassVar[dict[str, Any]] = {}
    validator: ClassVar[Any] = None

    @model_validator(mode="before")
    @classmethod
    def _matches_the_schema(cls, data: Any) -> Any:
        errors = sorted(cls.validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if errors:
            problems = [
                f"{'.'.join(map(str, e.absolute_path)) or 'reply'}: {e.message}" for e in errors[:8]
            ]
            raise ValueError("; ".join(problems))
        return data

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        # What model providers (tool or JSON-schema structured output) and the JSON
        # mode's instructions are given: the user's schema itself.
        return dict(cls.json_schema)


@dataclass(frozen=True)
class TypedAnswer:
    """A response format, ready for the reporter: ``schema`` is what the model is
    asked to fill in; :meth:`value` is what ``structured_response`` holds."""

    schema: type[BaseModel]
    plain: bool
    """A JSON schema: ``structured_response`` is a plain ``dict``."""

    @classmethod
    def of(cls, response_format: ResponseFormat) -> TypedAnswer:
        """Raises ``ValueError`` for a JSON schema that is invalid or does not describe
        an object (structured output fills in an object), ``TypeError`` for anything
        that is neither a pydantic model nor a mapping."""
        if isinstance(response_format, type) and issubclass(response_format, BaseModel):
            return cls(response_format, plain=False)
        if isinstance(response_format, Mapping):
            return cls(_schema_model(dict(response_format)), plain=True)
        raise TypeError(
            "response_format takes a pydantic model or a JSON schema (a dict), "
            f"not {type(response_format).__name__}"
        )

    def value(self, answer: BaseModel) -> Any:
        return answer.model_dump() if self.plain else answer

    def render(self, answer: BaseModel) -> str:
        """The answer as the JSON text of ``final_answer`` (what the verifier judges)."""
        return json.dumps(answer.model_dump(mode="json"), indent=2, ensure_ascii=False)


def _schema_model(schema: dict[str, Any]) -> type[BaseModel]:
    import jsonschema  # 0.2 s to import: only for graphs given a JSON schema

    try:
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"response_format is not a valid JSON schema: {exc.message}") from exc
    if schema.get("type") != "object":
        raise ValueError(
            'a JSON schema response_format must describe an object ("type": "object"); '
            "wrap a list or a value in an object's property"
        )
    title = str(schema.get("title") or "Answer")
    named = {"title": title, **schema}
    return type(
        title,
        (_JsonSchemaAnswer,),
        {
            "__doc__": str(schema.get("description") or "The final answer."),
            "model_config": ConfigDict(extra="allow", frozen=True, title=title),
            "json_schema": named,
            "validator": validator_class(named),
        },
    )


def answer_as_json(answer: Any) -> Any:
    """A ``structured_response`` as JSON data: a pydantic instance dumped; a dict (a
    JSON schema's answer, or a model's revived by a reader without its class) and
    None as they are."""
    return answer.model_dump(mode="json") if isinstance(answer, BaseModel) else answer


def load_response_format(spec: str) -> ResponseFormat:
    """The response format ``spec`` names: a JSON schema file (``*.json``) or
    ``module:attr`` (a pydantic model or a JSON schema dict), as the CLI's
    ``--response-format`` takes it. Raises ``ValueError`` saying what is wrong."""
    if spec.endswith(".json"):
        try:
            loaded = json.loads(Path(spec).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"cannot read the response format {spec}: {exc.strerror}") from exc
        except ValueError as exc:
            raise ValueError(f"the response format {spec} is not JSON: {exc}") from exc
    else:
        loaded = import_object(
            spec,
            malformed="--response-format takes module:attr (a pydantic model or a JSON "
            f"schema) or a schema.json file; got {spec!r}",
            failed="cannot import the response format",
        )
    try:
        TypedAnswer.of(loaded)  # refuses here what no reporter could fill in
    except TypeError as exc:
        raise ValueError(f"{spec}: {exc}") from exc
    return loaded  # type: ignore[no-any-return]
