"""``with_structured_output`` by a provider's JSON mode, besides tool calling.

LangChain's models take ``method=``: ``"function_calling"`` (the schema as a forced
tool, what ``BaseChatModel.with_structured_output`` builds), ``"json_schema"`` (the
provider constrains the reply to the schema) and ``"json_mode"`` (the provider only
guarantees JSON; the prompt says which keys). :class:`JsonModes` adds the last two to a
chat model whose ``_generate`` honours a ``response_format`` call argument, which the
mixin binds and then parses the reply's JSON text. ``strict`` is accepted: the models
using it constrain their replies fully or not at all.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.output_parsers.base import OutputParserLike
from langchain_core.runnables import Runnable, RunnableMap, RunnablePassthrough
from langchain_core.utils.function_calling import convert_to_json_schema
from langchain_core.utils.pydantic import is_basemodel_subclass

__all__ = ["JsonModes", "StructuredMethod"]

StructuredMethod = Literal["function_calling", "json_schema", "json_mode"]


class JsonModes(BaseChatModel):
    """Mixin: ``with_structured_output(..., method="json_schema" | "json_mode")``.

    Subclasses say how their provider is asked for JSON (:meth:`_response_format`);
    the default is OpenAI's shape.
    """

    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        include_raw: bool = False,
        method: StructuredMethod = "function_calling",
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | Any]:
        if method == "function_calling":
            return BaseChatModel.with_structured_output(
                self, schema, include_raw=include_raw, **kwargs
            )
        if method not in ("json_schema", "json_mode"):
            raise ValueError(
                f"unknown structured output method {method!r}: "
                "use 'function_calling', 'json_schema' or 'json_mode'"
            )
        if kwargs:
            raise ValueError(f"Received unsupported arguments {kwargs}")
        wanted = convert_to_json_schema(schema) if method == "json_schema" else None
        model = self.bind(
            response_format=self._response_format(wanted),
            ls_structured_output_format={"kwargs": {"method": method}, "schema": schema},
        )
        parser: OutputParserLike[Any] = (
            PydanticOutputParser(pydantic_object=schema)
            if isinstance(schema, type) and is_basemodel_subclass(schema)
            else JsonOutputParser()
        )
        if not include_raw:
            return model | parser
        parsed = RunnablePassthrough.assign(
            parsed=itemgetter("raw") | parser, parsing_error=lambda _: None
        )
        unparsed = RunnablePassthrough.assign(parsed=lambda _: None)
        return RunnableMap(raw=model) | parsed.with_fallbacks(
            [unparsed], exception_key="parsing_error"
        )

    def _response_format(self, schema: dict[str, Any] | None) -> dict[str, Any]:
        """The ``response_format`` argument asking for JSON (matching ``schema`` if any)."""
        if schema is None:
            return {"type": "json_object"}
        name = str(schema.get("title") or "response")
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
