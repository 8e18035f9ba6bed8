"""Serve the bundled Gemma 3 270M (or a GGUF) over an OpenAI-compatible HTTP API.

::

    python -m aimegraph.models.local_server --host 127.0.0.1 --port 8000
    OPENAI_BASE_URL=http://127.0.0.1:8000/v1 aimegraph run --model openai:gemma-3-270m "..."

This is ``llama_cpp.server`` (extra ``[local]``, which pulls in
``llama-cpp-python[server]``) with the two things the bundled model needs and the stock
``python -m llama_cpp.server`` cannot give it:

- the AMX load-time patch of :func:`aimegraph.models.local.amx_safe_loading`: the
  llama.cpp wheel built on a CPU reporting AMX otherwise dies with SIGILL on its first
  matrix product;
- the plain-transcript chat format of :func:`aimegraph.models.local.transcript_format`
  (the GGUF is a base model without a chat template), registered with llama-cpp-python
  as :data:`CHAT_FORMAT`, with a cap on the tokens of every completion
  (``--max-tokens``, 512 by default): OpenAI clients send no ``max_tokens`` by default,
  which llama.cpp reads as "until the context is full", minutes for a model that loops.
  A capped reply reports ``finish_reason="length"``, which the engine treats as a
  degenerate reply and asks again;
- :class:`OpenAIRequestShim`, translating the request fields of current OpenAI clients
  that ``llama_cpp.server`` does not know (``response_format`` of type ``json_schema``,
  which ``with_structured_output`` sends, and ``max_completion_tokens``).

Any model name in a request is served by the one loaded model. Settings are taken from
the command line only: ``llama_cpp.server``'s own settings classes would also read
environment variables such as ``API_KEY``, ``MODEL`` or ``N_CTX``.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aimegraph.models.errors import ModelSpecError
from aimegraph.models.local import (
    DEFAULT_LOCAL_SETTINGS,
    _require_llama_cpp,
    amx_safe_loading,
    local_model_path,
    transcript_chat_handler,
)

__all__ = [
    "CHAT_FORMAT",
    "DEFAULT_ALIAS",
    "OpenAIRequestShim",
    "build_app",
    "main",
    "register_chat_format",
    "rewrite_chat_request",
]

CHAT_FORMAT = "aimegraph-transcript"
"""The name :func:`register_chat_format` gives the transcript format in llama-cpp-python."""

DEFAULT_ALIAS = "gemma-3-270m"
"""The model id the server reports in ``/v1/models`` and in its replies."""

DEFAULT_MAX_TOKENS = int(DEFAULT_LOCAL_SETTINGS["max_tokens"])

SERVER_HINT = "the local server needs llama-cpp-python[server]: pip install 'aimegraph[local]'"


def register_chat_format(*, max_tokens_cap: int | None = DEFAULT_MAX_TOKENS) -> str:
    """Register the transcript format (with its token cap) as :data:`CHAT_FORMAT`.

    Re-registering replaces the previous handler, so the cap of the last call wins.
    Returns the name to put in ``ModelSettings.chat_format``.
    """
    from llama_cpp.llama_chat_format import LlamaChatCompletionHandlerRegistry

    LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(
        CHAT_FORMAT, transcript_chat_handler(max_tokens_cap=max_tokens_cap), overwrite=True
    )
    return CHAT_FORMAT


def _default_server_threads() -> int:
    """All usable cores, at most 4: the server has the machine to itself while generating."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


def build_app(
    model_path: str | Path | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    alias: str = DEFAULT_ALIAS,
    n_ctx: int = int(DEFAULT_LOCAL_SETTINGS["n_ctx"]),
    n_batch: int = int(DEFAULT_LOCAL_SETTINGS["n_batch"]),
    n_threads: int | None = None,
    max_tokens: int | None = DEFAULT_MAX_TOKENS,
    chat_format: str | None = None,
    seed: int = int(DEFAULT_LOCAL_SETTINGS["seed"]),
    use_extra_bufts: bool | None = None,
    verbose: bool = False,
    cache_dir: Path | None = None,
) -> Any:
    """The FastAPI app of ``llama_cpp.server`` with the model loaded (AMX-safe).

    Without ``model_path`` the bundled Gemma is served with the transcript format
    (capped at ``max_tokens`` per completion; ``None`` for no cap); a ``model_path``
    keeps llama-cpp-python's choice of format unless ``chat_format`` names one.

    Raises:
        ModelSpecError: when llama-cpp-python[server] or the weights are missing, or the
            GGUF does not exist.
    """
    _require_llama_cpp()  # first: it sets OMP_WAIT_POLICY before llama.cpp loads
    try:
        from llama_cpp.server.app import create_app
        from llama_cpp.server.settings import ModelSettings, ServerSettings
    except ImportError as exc:
        raise ModelSpecError(f"{SERVER_HINT} ({exc})") from exc

    if model_path:
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise ModelSpecError(f"no such GGUF file: {path}")
        fmt = chat_format
    else:
        path = local_model_path(cache_dir)
        fmt = chat_format or CHAT_FORMAT
    if fmt == CHAT_FORMAT:
        register_chat_format(max_tokens_cap=max_tokens)

    threads = n_threads or _default_server_threads()
    server_settings = _explicit(ServerSettings)(host=host, port=port)
    model_settings = _explicit(ModelSettings)(
        model=str(path),
        model_alias=alias,
        chat_format=fmt,
        n_ctx=n_ctx,
        n_batch=n_batch,
        n_threads=threads,
        n_threads_batch=threads,
        seed=seed,
        verbose=verbose,
    )
    with amx_safe_loading(use_extra_bufts):  # create_app loads the model
        app = create_app(server_settings=server_settings, model_settings=[model_settings])
    app.add_middleware(OpenAIRequestShim)
    return app


class OpenAIRequestShim:
    """ASGI middleware: rewrites chat requests of today's OpenAI clients for llama.cpp.

    ``llama_cpp.server`` predates two request fields that ``langchain-openai`` sends:

    - ``response_format={"type": "json_schema", "json_schema": {"schema": ...}}``
      (``with_structured_output``'s default method), which it rejects with HTTP 500, is
      rewritten to its own ``{"type": "json_object", "schema": ...}``: the reply is then
      grammar-constrained JSON for the schema;
    - ``max_completion_tokens``, which it ignores, becomes ``max_tokens`` when that is
      absent.

    Other requests pass through untouched.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if (
            scope.get("type") != "http"
            or scope.get("method") != "POST"
            or not str(scope.get("path", "")).endswith("/chat/completions")
        ):
            await self.app(scope, receive, send)
            return
        parts: list[bytes] = []
        while True:
            message = await receive()
            if message.get("type") != "http.request":  # the client went away
                await self.app(scope, _replay([message], receive), send)
                return
            parts.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = rewrite_chat_request(b"".join(parts))
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        request = {"type": "http.request", "body": body, "more_body": False}
        await self.app({**scope, "headers": headers}, _replay([request], receive), send)


def _replay(messages: list[dict[str, Any]], receive: Any) -> Any:
    pending = list(messages)

    async def replayed() -> Any:
        return pending.pop(0) if pending else await receive()

    return replayed


def rewrite_chat_request(body: bytes) -> bytes:
    """The chat completion request ``body`` in the dialect ``llama_cpp.server`` accepts."""
    try:
        data = json.loads(body)
    except ValueError:
        return body  # let the server report it
    if not isinstance(data, dict):
        return body
    changed = False
    response_format = data.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        spec = response_format.get("json_schema") or {}
        rewritten: dict[str, Any] = {"type": "json_object"}
        if isinstance(spec, dict) and isinstance(spec.get("schema"), dict):
            rewritten["schema"] = spec["schema"]
        data["response_format"] = rewritten
        changed = True
    if data.get("max_tokens") is None and data.get("max_completion_tokens") is not None:
        data["max_tokens"] = data.pop("max_completion_tokens")
        changed = True
    return json.dumps(data).encode("utf-8") if changed else body


def _explicit(settings_cls: type) -> type:
    """``settings_cls`` reading its init arguments only, never the environment or .env."""

    class Explicit(settings_cls):  # type: ignore[misc, valid-type]
        @classmethod
        def settings_customise_sources(
            cls, settings_cls: Any, init_settings: Any, *_: Any, **__: Any
        ) -> Any:
            return (init_settings,)

    Explicit.__name__ = Explicit.__qualname__ = settings_cls.__name__
    return Explicit


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m aimegraph.models.local_server",
        description="Serve the bundled Gemma 3 270M (or a GGUF) over an OpenAI-compatible API.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="listen address (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="listen port (8000)")
    parser.add_argument("--model", default=None, help="a GGUF to serve instead of the bundled one")
    parser.add_argument("--alias", default=DEFAULT_ALIAS, help=f"model id ({DEFAULT_ALIAS})")
    parser.add_argument("--chat-format", default=None, help=f"default: {CHAT_FORMAT} (bundled)")
    parser.add_argument("--n-ctx", type=int, default=int(DEFAULT_LOCAL_SETTINGS["n_ctx"]))
    parser.add_argument("--n-threads", type=int, default=None, help="default: cores, at most 4")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=DEFAULT_MAX_TOKENS,
        help=f"cap on each completion with the transcript format ({DEFAULT_MAX_TOKENS}; 0: none)",
    )
    parser.add_argument("--seed", type=int, default=int(DEFAULT_LOCAL_SETTINGS["seed"]))
    parser.add_argument("--log-level", default="warning", help="uvicorn log level (warning)")
    parser.add_argument("--verbose", action="store_true", help="llama.cpp's own logging")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        import uvicorn
    except ImportError:
        print(f"error: {SERVER_HINT}")
        return 2
    try:
        app = build_app(
            args.model,
            host=args.host,
            port=args.port,
            alias=args.alias,
            n_ctx=args.n_ctx,
            n_threads=args.n_threads,
            max_tokens=args.max_tokens or None,
            chat_format=args.chat_format,
            seed=args.seed,
            verbose=args.verbose,
        )
    except ModelSpecError as exc:
        print(f"error: {exc}")
        return 2
    print(f"serving {args.alias} on http://{args.host}:{args.port}/v1", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
