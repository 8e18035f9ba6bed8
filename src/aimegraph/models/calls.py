"""Calling chat models from graph nodes: usage accounting, retries, structured output.

Failures split in two. Transient ones (rate limits, timeouts, dropped
connections, 5xx) are re-raised so that LangGraph's ``RetryPolicy`` re-runs the
node with exponential backoff and jitter, except on the node's last attempt,
where they become data like every other failure. Nothing a model does escapes
the graph as an exception.
"""

from __future__ import annotations

import functools
import json
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast

import tenacity
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolCall
from langchain_core.runnables import Runnable, RunnableLambda, RunnableSequence
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime
from langgraph.types import RetryPolicy
from pydantic import BaseModel, ValidationError

from aimegraph.models.errors import is_transient, openai_errors
from aimegraph.models.partial import PartialReader, streamed_call, tool_name
from aimegraph.models.reply_reading import RE_ASK, describe_error, read_reply, reply_in_error
from aimegraph.models.resolve import supports_structured_output, supports_tool_calling
from aimegraph.models.server_schema import ServerSchema, constrained
from aimegraph.models.steps import CallWrapper, Steps, arun_steps, model_call, run_steps
from aimegraph.prompts import json_mode
from aimegraph.state import Prices, Usage

if TYPE_CHECKING:
    import openai

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")
Mode = Literal["native", "json"]


LLM_RETRY_POLICY = RetryPolicy(
    initial_interval=1.0,
    backoff_factor=2.0,
    max_interval=30.0,
    max_attempts=3,
    retry_on=is_transient,
)
"""Retry policy for every node that calls a model."""


RetryingT = TypeVar("RetryingT", bound=tenacity.BaseRetrying)


def retrying(
    kind: type[RetryingT],
    *,
    retry_on: Callable[[BaseException], bool] = is_transient,
    max_attempts: int = LLM_RETRY_POLICY.max_attempts,
    initial_interval: float = LLM_RETRY_POLICY.initial_interval,
) -> RetryingT:
    """Retries (``tenacity.Retrying`` or ``AsyncRetrying``) on the errors ``retry_on``
    accepts (default: transient ones), with ``LLM_RETRY_POLICY``'s exponential backoff
    and jitter, its attempts by default; the last error propagates. Models and tools
    marked retryable (:mod:`aimegraph.tools.policy`) retry this way."""
    policy = LLM_RETRY_POLICY
    return kind(
        retry=tenacity.retry_if_exception(retry_on),
        wait=tenacity.wait_exponential_jitter(
            initial=initial_interval,
            exp_base=policy.backoff_factor,
            max=policy.max_interval,
            # As RetryPolicy: up to 1 s, and never more than the first wait.
            jitter=min(1.0, initial_interval) if policy.jitter else 0.0,
        ),
        stop=tenacity.stop_after_attempt(max_attempts),
        reraise=True,
    )


def retrying_in_place(runnable: Runnable[Any, R]) -> Runnable[Any, R]:
    """``runnable`` retried in place on transient errors (``LLM_RETRY_POLICY``'s
    attempts and backoff); the waits are ``time.sleep`` under ``invoke`` and
    ``asyncio.sleep`` under ``ainvoke``; the last error propagates."""
    return RunnableLambda(
        retrying(tenacity.Retrying).wraps(runnable.invoke),
        afunc=retrying(tenacity.AsyncRetrying).wraps(runnable.ainvoke),
        name="retrying",
    )


def reraise_if_retryable(exc: BaseException, runtime: Runtime[Any] | None) -> None:
    """Re-raise ``exc`` when it is transient and the node has attempts left."""
    info = runtime.execution_info if runtime is not None else None
    attempt = info.node_attempt if info is not None else LLM_RETRY_POLICY.max_attempts
    if is_transient(exc) and attempt < LLM_RETRY_POLICY.max_attempts:
        raise exc


def usage_of(
    message: BaseMessage, role: str, prices: Prices | None = None, *, tool_calls: int = 0
) -> Usage:
    """One LLM call's usage, from the reply's ``usage_metadata``: its tokens, the
    cached-input and reasoning tokens among them (``input_token_details.cache_read``,
    ``output_token_details.reasoning``), and its cost when ``prices`` has the
    reply's model; counted under that model's name too; ``tool_calls`` are the calls
    of tools it asked for."""
    meta = getattr(message, "usage_metadata", None) or {}
    cached = (meta.get("input_token_details") or {}).get("cache_read")
    reasoning = (meta.get("output_token_details") or {}).get("reasoning")
    model_name = str(message.response_metadata.get("model_name", ""))
    return Usage.of_call(
        role,
        input_tokens=int(meta.get("input_tokens", 0)),
        output_tokens=int(meta.get("output_tokens", 0)),
        cached_input_tokens=int(cached or 0),
        reasoning_tokens=int(reasoning or 0),
        tool_calls=tool_calls,
        price=(prices or {}).get(model_name),
        model=model_name,
    )


def _usage_of_completion(completion: Any, role: str) -> Usage:
    """Usage from an OpenAI completion object (when LangChain raised before wrapping it);
    one call of unknown size for ``None``."""
    used = getattr(completion, "usage", None)
    return Usage.of_call(
        role,
        input_tokens=int(getattr(used, "prompt_tokens", 0) or 0),
        output_tokens=int(getattr(used, "completion_tokens", 0) or 0),
    )


def resolve_mode(setting: str, model: BaseChatModel, *, structured: bool = False) -> Mode:
    """``auto`` means native when the model class implements it: tool calling for
    actors; for ``structured`` output (plans, verdicts), ``with_structured_output``,
    which some local models offer as grammar-constrained JSON without tool calling."""
    if setting == "auto":
        support = native_support(model)
        return "native" if (support.structured if structured else support.tools) else "json"
    return "json" if setting == "json" else "native"


@dataclass(frozen=True)
class NativeSupport:
    """What a model does natively: tool calling (:func:`supports_tool_calling`) and
    structured output (:func:`supports_structured_output`)."""

    tools: bool
    structured: bool


_NATIVE_SUPPORT: dict[int, NativeSupport] = {}


def native_support(model: BaseChatModel) -> NativeSupport:
    """``model``'s native support, decided on its first use and kept while the model
    lives: every ReAct step and structured call of every run asks for it."""
    key = id(model)
    support = _NATIVE_SUPPORT.get(key)
    if support is None:
        support = NativeSupport(supports_tool_calling(model), supports_structured_output(model))
        _NATIVE_SUPPORT[key] = support
        # Forgotten with the model, before its id can be reused.
        weakref.finalize(model, _NATIVE_SUPPORT.pop, key, None)
    return support


def with_json_instructions(messages: Sequence[BaseMessage], instructions: str) -> list[BaseMessage]:
    """Append JSON-mode instructions to the system prompt (or add one)."""
    out = list(messages)
    if out and isinstance(out[0], SystemMessage):
        out[0] = SystemMessage(content=f"{out[0].content}{instructions}")
    else:
        out.insert(0, SystemMessage(content=instructions))
    return out


@dataclass(frozen=True)
class ToolsBeside(Generic[M]):
    """Tools bound beside a structured call's schema (native mode, a model with tool
    calling): a reply may call them instead of the schema's tool, or as well;
    ``merge`` folds those calls into the value (None when the reply has only them)."""

    tools: Sequence[BaseTool]
    merge: Callable[[M | None, list[ToolCall]], M]


@dataclass
class StructuredReply(Generic[M]):
    """The outcome of asking for a structured object: a value, or the reason there is none."""

    value: M | None
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    model_failed: bool = False
    """The model could not be called (as opposed to replying badly)."""
    message: AIMessage | None = None
    """The reply the value was read from."""


def structured_steps(
    model: BaseChatModel,
    schema: type[M],
    messages: Sequence[BaseMessage],
    *,
    role: str,
    mode: Mode,
    retries: int,
    runtime: Runtime[Any] | None = None,
    prices: Prices | None = None,
    server_schema: ServerSchema = "auto",
    beside: ToolsBeside[M] | None = None,
    stream: Callable[[], PartialReader] | None = None,
    wrap: CallWrapper | None = None,
) -> Steps[StructuredReply[M]]:
    """Ask ``model`` for a ``schema`` object; send invalid replies back with the error.

    Native mode uses ``with_structured_output`` (the raw reply kept, as with
    ``include_raw=True``), or with ``beside`` tools and a model that calls tools, binds
    the schema as the first tool and those after it (see :class:`ToolsBeside`); JSON
    mode puts the JSON schema in the system prompt and parses the reply tolerantly, and
    asks an OpenAI-compatible server for the schema as ``server_schema`` says
    (:mod:`aimegraph.models.server_schema`). With ``stream``, each reply is streamed and
    read as it comes by a reader from ``stream`` (one per call,
    :func:`aimegraph.models.partial.streamed_call`). Either way at most ``retries``
    re-asks follow a reply that does not parse, does not validate or is degenerate
    (empty, looping, cut off at the token limit), a native one's arguments included.

    With ``wrap`` (a role's middleware) each call runs inside its ``wrap_model_call``
    hooks, and the reply is read as the model that gave it reads its own.

    The steps yield each model call (:mod:`aimegraph.models.steps`): run them with
    :func:`invoke_structured`, :func:`ainvoke_structured`, or ``yield from`` them
    in a node's steps.
    """
    usage = Usage()
    base = list(messages)
    if mode == "json":
        instructions = json_mode.STRUCTURED.format(schema=_schema_text(schema))
        base = with_json_instructions(base, instructions)
    conversation = base
    error = "no reply"
    error_or_none: str | None
    for _ in range(retries + 1):
        first = usage.llm_calls == 0

        def bind(chat: BaseChatModel, first: bool = first) -> Runnable[Any, Any]:
            # The first call may fail transiently and be retried by re-running the node
            # (RetryPolicy): nothing is spent yet. A re-ask follows calls already made, so
            # it is retried in place with the same backoff, keeping their usage.
            call = _structured_stages(chat, schema, mode, server_schema, beside).call
            if stream is not None:  # read as it streams in
                call = streamed_call(call, tool_name(schema), stream)
            return call if first else retrying_in_place(call)

        try:
            call, answered = model_call(model, conversation, bind, wrap=wrap, runtime=runtime)
            reply = yield call
            stages = _structured_stages(answered(), schema, mode, server_schema, beside)
        except openai_errors("LengthFinishReasonError") as cut_off:
            exc = cast("openai.LengthFinishReasonError", cut_off)
            # A native structured reply cut off at the token limit: a degenerate
            # reply like any other, to be re-asked, and its tokens were spent.
            usage = usage + _usage_of_completion(exc.completion, role)
            value, raw_text, error_or_none = None, "", "the reply was cut off at the token limit"
        except (ValidationError, OutputParserException) as exc:
            # Some clients parse the reply into the schema inside the call (ChatOpenAI's
            # json_schema method, through the OpenAI SDK): a reply that does not fit
            # fails the call. The model did answer: a bad reply, to be re-asked.
            usage = usage + _usage_of_completion(None, role)
            value, raw_text, error_or_none = None, reply_in_error(exc), describe_error(exc)
        except Exception as exc:  # noqa: BLE001 - every model failure becomes data
            if usage.llm_calls == 0:  # a node retry would not count calls already made
                reraise_if_retryable(exc, runtime)
            return StructuredReply(
                None, f"model call failed: {type(exc).__name__}: {exc}", usage, model_failed=True
            )
        else:
            value, raw_text, error_or_none, raw = read_reply(stages.read(reply), schema, mode)
            usage = usage + usage_of(raw, role, prices)
        if value is not None:
            return StructuredReply(value, None, usage, message=raw)
        error = (error_or_none or "the reply held no structured output") + (
            "; answer briefly" if "token limit" in (error_or_none or "") else ""
        )
        conversation = [
            *base,
            HumanMessage(
                content=json_mode.PARSE_ERROR.format(error=error)
                + (f"\nYour reply was:\n{raw_text[:2000]}" if raw_text else ""),
                response_metadata={RE_ASK: error},
            ),
        ]
    return StructuredReply(
        None,
        f"no valid {schema.__name__} in {retries + 1} replies "
        f"(max_output_retries={retries} re-asks used up): {error}",
        usage,
    )


def invoke_structured(
    model: BaseChatModel,
    schema: type[M],
    messages: Sequence[BaseMessage],
    *,
    role: str,
    mode: Mode,
    retries: int,
    runtime: Runtime[Any] | None = None,
    prices: Prices | None = None,
    server_schema: ServerSchema = "auto",
) -> StructuredReply[M]:
    """:func:`structured_steps` with sync model calls."""
    return run_steps(
        structured_steps(
            model,
            schema,
            messages,
            role=role,
            mode=mode,
            retries=retries,
            runtime=runtime,
            prices=prices,
            server_schema=server_schema,
        )
    )


async def ainvoke_structured(
    model: BaseChatModel,
    schema: type[M],
    messages: Sequence[BaseMessage],
    *,
    role: str,
    mode: Mode,
    retries: int,
    runtime: Runtime[Any] | None = None,
    prices: Prices | None = None,
    server_schema: ServerSchema = "auto",
) -> StructuredReply[M]:
    """:func:`structured_steps` with awaited model calls."""
    return await arun_steps(
        structured_steps(
            model,
            schema,
            messages,
            role=role,
            mode=mode,
            retries=retries,
            runtime=runtime,
            prices=prices,
            server_schema=server_schema,
        )
    )


@dataclass(frozen=True)
class _Stages:
    """What one structured attempt runs: the model ``call``, then (native mode) the
    ``parse`` of its reply by the parser the library chained to the model."""

    call: Runnable[Any, Any]
    parse: Runnable[Any, Any] | None = None
    """None in JSON mode (parsed by :func:`aimegraph.models.reply_reading.read_reply`),
    and when the library's runnable is not a call-then-parse sequence: then ``call`` is
    its ``include_raw=True`` form, which returns the raw reply and the parse together."""

    def read(self, reply: Any) -> Any:
        """The call's reply, parsed as ``include_raw=True`` reports it (native mode)."""
        if self.parse is None:
            return reply
        try:
            parsed = self.parse.invoke(reply)
        except Exception as exc:  # noqa: BLE001 - as include_raw: the error is the outcome
            return {"raw": reply, "parsed": None, "parsing_error": exc}
        return {"raw": reply, "parsed": parsed, "parsing_error": None}


def _structured_stages(
    model: BaseChatModel,
    schema: type[M],
    mode: Mode,
    server_schema: ServerSchema,
    beside: ToolsBeside[M] | None = None,
) -> _Stages:
    """The model with structured output in stages (native; with tools ``beside`` it
    when there are any and the model calls tools), or the model asking its server for
    the schema where it can (JSON)."""
    if mode == "native" and beside is not None and beside.tools and native_support(model).tools:
        # The schema first: as with_structured_output binds it, "any" makes the reply
        # call a tool (the schema's or a work tool), never answer in prose.
        bound = model.bind_tools([schema, *beside.tools], tool_choice="any")
        read = functools.partial(_value_of_calls, schema, beside)
        return _Stages(bound, RunnableLambda(read, name="calls"))
    if mode == "native":
        return _with_structured_output(_Same(model), schema)
    return _Stages(constrained(model, _json_schema(schema), server_schema))


def _value_of_calls(schema: type[M], beside: ToolsBeside[M], reply: AIMessage) -> M:
    """The value of a reply to a schema bound beside tools: the schema's call (its
    first), merged with the calls of the other tools."""
    name = tool_name(schema)
    own = [call for call in reply.tool_calls if call["name"] == name]
    others = [call for call in reply.tool_calls if call["name"] != name]
    if not own and not others:
        raise OutputParserException(f"the reply called no tool: call {name} or the tools")
    return beside.merge(schema.model_validate(own[0]["args"]) if own else None, others)


@dataclass(frozen=True, eq=False)
class _Same:
    """A model as a cache key by identity (chat models are unhashable); holding it
    keeps its id from being reused while the entry is cached."""

    model: BaseChatModel

    def __hash__(self) -> int:
        return id(self.model)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.model is self.model


@functools.lru_cache(maxsize=64)
def _with_structured_output(model: _Same, schema: type[BaseModel]) -> _Stages:
    # Converting the schema to a tool (pydantic's JSON schema) costs more than a fast
    # model's reply (~2 ms for a PlanUpdate); the binding only refers to the model, so
    # later changes to the model still apply. Chat models build structured output as
    # `bound model | parser`; the two stages run here one after the other, as
    # include_raw=True runs them, but without its RunnableParallel, whose thread pools
    # cost 1.5 ms a call (more than an instant model's whole reply).
    structured = model.model.with_structured_output(schema)
    if isinstance(structured, RunnableSequence):
        first, *rest = structured.steps
        return _Stages(first, rest[0] if len(rest) == 1 else RunnableSequence(*rest))
    return _Stages(model.model.with_structured_output(schema, include_raw=True))


@functools.lru_cache(maxsize=64)
def _json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    return schema.model_json_schema()


@functools.lru_cache(maxsize=64)
def _schema_text(schema: type[BaseModel]) -> str:
    return json.dumps(_json_schema(schema), indent=1)
