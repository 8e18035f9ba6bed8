"""Schema-constrained JSON-mode replies from OpenAI-compatible servers.

In JSON mode (``tool_calling="json"``) the schema a reply must match is described in the
prompt. A server that decodes under a JSON schema can be asked for it too, and then even
a tiny model writes JSON that parses and fits: llama.cpp's server, vLLM, Ollama and
LM Studio take OpenAI's ``response_format`` of type ``json_schema``;
llama-cpp-python's ``python -m llama_cpp.server`` takes its own
``{"type": "json_object", "schema": ...}``; older vLLM releases take ``guided_json``.

:func:`constrained` wraps an OpenAI-compatible chat model (``BaseChatOpenAI``: the
``openai:<model>`` specs) so that each call carries the schema in one of those forms
(:data:`ServerSchema`, ``AimeConfig.server_schema``). The field goes in ``extra_body``,
so langchain-openai sends the request as any other (no client-side parsing, streaming
unchanged). A server that answers a constrained request with an error naming the field
(or with 400/404/422) is asked again with the next form, and at last without any (the
prompt alone, as before). The first form a server accepts is remembered for that model
and that schema's title, so the probing happens once per model, schema and process.
Other chat models are returned as they are: in-process llama.cpp has its own grammars
(:func:`aimegraph.models.json_tools.json_step_model`), and providers' own clients have
native structured output.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # the module is light: the config names its values
    import openai
    from langchain_core.language_models import BaseChatModel, LanguageModelInput
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import Runnable, RunnableConfig

__all__ = ["ServerSchema", "accepted_form", "constrained", "request_fields"]

ServerSchema = Literal["auto", "json_schema", "json_object", "guided_json", "off"]
"""How JSON-mode calls ask an OpenAI-compatible server for their schema: ``auto`` tries
``json_schema`` then ``json_object`` (then none); the others name one form (then none)."""

Form = Literal["json_schema", "json_object", "guided_json", "off"]

_AUTO_FORMS: tuple[Form, ...] = ("json_schema", "json_object", "off")
# Statuses saying "this request is wrong" whatever its text; a 5xx counts as a rejection
# only when it names the field (llama_cpp.server answers an unknown response_format type
# with a 500 quoting its validation error).
_REJECTING_STATUSES = frozenset({400, 404, 405, 415, 422})
_FIELD_NAMES = ("response_format", "json_schema", "json_object", "guided_json")

_accepted: dict[tuple[int, str], Form] = {}
_accepted_lock = threading.Lock()


def is_openai_compatible(model: BaseChatModel) -> bool:
    """Whether ``model`` is a langchain-openai client (``ChatOpenAI`` and its kin)."""
    return any(base.__name__ == "BaseChatOpenAI" for base in type(model).__mro__)


def request_fields(form: Form, schema: dict[str, Any]) -> dict[str, Any]:
    """The request body fields asking for ``schema`` in ``form`` (none for ``off``)."""
    if form == "json_schema":
        name = str(schema.get("title") or "reply")
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema},
            }
        }
    if form == "json_object":
        return {"response_format": {"type": "json_object", "schema": schema}}
    if form == "guided_json":
        return {"guided_json": schema}
    return {}


def accepted_form(model: BaseChatModel, schema: dict[str, Any]) -> Form | None:
    """The form ``model``'s server accepted last for schemas named as ``schema`` (None
    before the first constrained call)."""
    with _accepted_lock:
        return _accepted.get(_key(model, schema))


def constrained(
    model: BaseChatModel, schema: dict[str, Any], setting: ServerSchema
) -> Runnable[LanguageModelInput, AIMessage]:
    """``model`` asking its server for replies matching ``schema`` (see the module
    docstring); ``model`` itself when the setting is ``off`` or the model is not an
    OpenAI-compatible client. A fallback chain asks each member that is one."""
    from aimegraph.models.fallbacks import FallbackChatModel

    if isinstance(model, FallbackChatModel):
        return model.each(lambda member: constrained(member, schema, setting))
    if setting == "off" or not is_openai_compatible(model):
        return model
    from langchain_core.runnables import RunnableLambda
    from openai import APIStatusError  # loaded already: the model is an OpenAI client

    forms: tuple[Form, ...] = _AUTO_FORMS if setting == "auto" else (setting, "off")
    calls = {form: _with_fields(model, request_fields(form, schema)) for form in forms}

    def plan() -> tuple[list[Form], Form]:
        """The forms to try in turn: the remembered one (else the first) and those after
        it; a rejection of the last one is the call's error."""
        remembered = accepted_form(model, schema)
        *first, last = forms[forms.index(remembered) if remembered in forms else 0 :]
        return first, last

    def invoke(messages: LanguageModelInput, config: RunnableConfig) -> AIMessage:
        tries, last = plan()
        for form in tries:
            try:
                reply = calls[form].invoke(messages, config)
            except APIStatusError as exc:
                if not _rejects_field(exc):
                    raise
                continue
            _remember(model, schema, form)
            return reply
        reply = calls[last].invoke(messages, config)
        _remember(model, schema, last)
        return reply

    async def ainvoke(messages: LanguageModelInput, config: RunnableConfig) -> AIMessage:
        tries, last = plan()
        for form in tries:
            try:
                reply = await calls[form].ainvoke(messages, config)
            except APIStatusError as exc:
                if not _rejects_field(exc):
                    raise
                continue
            _remember(model, schema, form)
            return reply
        reply = await calls[last].ainvoke(messages, config)
        _remember(model, schema, last)
        return reply

    return RunnableLambda(invoke, afunc=ainvoke, name="server_schema")


def _with_fields(model: BaseChatModel, fields: dict[str, Any]) -> Runnable[Any, AIMessage]:
    """``model`` sending ``fields`` in every request body, besides its own ``extra_body``."""
    if not fields:
        return model
    own = getattr(model, "extra_body", None) or {}
    return model.bind(extra_body={**own, **fields})


def _rejects_field(exc: openai.APIStatusError) -> bool:
    """Whether the server refused the request for the schema field, not for its load."""
    if exc.status_code in _REJECTING_STATUSES:
        return True
    text = f"{exc.message} {exc.body}".lower()
    return exc.status_code >= 500 and any(name in text for name in _FIELD_NAMES)


def _key(model: BaseChatModel, schema: dict[str, Any]) -> tuple[int, str]:
    # Per schema too: a server may refuse one schema (an anyOf at the root, say) and take
    # another, and one refusal must not cost the others their constraint.
    return id(model), str(schema.get("title") or "")


def _remember(model: BaseChatModel, schema: dict[str, Any], form: Form) -> None:
    key = _key(model, schema)
    with _accepted_lock:
        if key not in _accepted:
            # Forget the model with it, so a later model reusing its id starts afresh.
            weakref.finalize(model, _forget, key)
        _accepted[key] = form


def _forget(key: tuple[int, str]) -> None:
    with _accepted_lock:
        _accepted.pop(key, None)
