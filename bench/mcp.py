"""MCP tools: one session per run against a session per call (``--only mcp``, [mcp] extra).

One task whose actor calls one MCP tool ``calls`` times (different arguments each time),
against two real FastMCP servers (:mod:`bench.mcp_servers`): ``notes`` over stdio (a
Python process) and ``weather`` over streamable HTTP on loopback. Side by side in one
process, under ``invoke``:

* aimegraph's way (``build_aime_graph(mcp_servers=...)``): the run opens one session per
  server on its first call and closes it when the run ends;
* the way ``MultiServerMCPClient.get_tools()`` tools work when handed to an agent as they
  are (what peers do): every call opens a session of its own (a stdio server starts a
  process per call) and closes it.

Both runs make the same model calls on the instant scripted model, so the difference is
the sessions. Also measured: the time ``build_aime_graph`` spends listing the servers'
tools (one short session each, in parallel).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from bench.common import (
    Headline,
    SectionResult,
    Table,
    config,
    fmt_s,
    fmt_x,
    scenario,
    task,
    workspace,
)
from bench.mcp_servers import notes_command, serve_weather


def run(quick: bool) -> SectionResult:
    from langchain_mcp_adapters.client import MultiServerMCPClient

    from aimegraph import build_aime_graph
    from aimegraph.models.offline.scripted import ScriptedChatModel

    calls, repeat = (2, 1) if quick else (10, 3)
    table = Table(
        f"MCP tools: one run, {calls} calls of one tool (median of {repeat})",
        ["server", "session per run (s)", "session per call (s)", "per call: run / call",
         "ratio", "listing at build (s)"],
    )  # fmt: skip
    metrics: dict[str, float] = {"calls": calls}
    with serve_weather() as url, workspace() as ws:
        servers: dict[str, dict[str, Any]] = {"notes": notes_command(), "weather": {"url": url}}
        probes = {"notes": ("read_note", "key"), "weather": ("forecast", "city")}
        for name, (tool_name, arg) in probes.items():
            steps = [{"tool": tool_name, "args": {arg: f"x{i}"}} for i in range(calls)]

            def model(bundle: str, steps: list[dict[str, Any]] = steps) -> ScriptedChatModel:
                plan = [{**task("a"), "tool_bundles": [bundle]}]
                return ScriptedChatModel.from_dict(scenario(plan, actor_steps=steps))

            started = time.perf_counter()
            per_run = build_aime_graph(
                model(name),
                config=config(ws, verify="off", max_actor_steps=calls + 2),
                mcp_servers={name: servers[name]},
            )
            listing = time.perf_counter() - started
            connection = {**servers[name], "transport": "stdio" if name == "notes" else "http"}
            adapter_tools = asyncio.run(MultiServerMCPClient({name: connection}).get_tools())
            per_call = build_aime_graph(
                model("custom"),
                tools=adapter_tools,
                config=config(ws, verify="off", max_actor_steps=calls + 2),
            )
            walls: dict[str, list[float]] = {"run": [], "call": []}
            for _ in range(repeat):
                for label, graph in (("run", per_run), ("call", per_call)):
                    started = time.perf_counter()
                    out = graph.invoke({"goal": "Look the items up."})
                    walls[label].append(time.perf_counter() - started)
                    assert out["status"] == "succeeded", out.get("reason")
            run_s, call_s = (statistics.median(walls[k]) for k in ("run", "call"))
            table.add(
                name,
                fmt_s(run_s),
                fmt_s(call_s),
                f"{run_s / calls * 1e3:.0f} / {call_s / calls * 1e3:.0f} ms",
                fmt_x(call_s / run_s),
                fmt_s(listing),
            )
            metrics.update(
                {
                    f"{name}.per_run_s": run_s,
                    f"{name}.per_call_s": call_s,
                    f"{name}.listing_s": listing,
                }
            )
    table.notes += [
        "session per run: the run's time includes starting the server (stdio) or opening the "
        "HTTP session once, and closing it at the end (a stdio server gets its input closed "
        "and exits).",
        "session per call: the adapter's tools as they come; each call starts the stdio "
        "server's process (a Python interpreter importing the mcp package) or opens an HTTP "
        "session, then closes it.",
        "ratio: session per call over session per run, whole runs (planner, actor, reporter "
        "on the instant scripted model included).",
    ]
    per_call = {
        name: (metrics[f"{name}.per_run_s"] / calls, metrics[f"{name}.per_call_s"] / calls)
        for name in ("notes", "weather")
    }
    headline = Headline(
        f"MCP tools: one run, {calls} calls of one tool of a stdio and of a streamable-HTTP "
        "FastMCP server, instant scripted model",
        "the adapter's tools as they come (MultiServerMCPClient.get_tools()): a session per call",
        "the run's one session: "
        + "; ".join(
            f"{kind} {fmt_x(call / run)} faster ({run * 1e3:.0f} against {call * 1e3:.0f} ms "
            "per call)"
            for kind, (run, call) in zip(("stdio", "HTTP"), per_call.values(), strict=True)
        )
        + f"; listing the tools at build {metrics['notes.listing_s']:.2f} s (stdio) / "
        f"{metrics['weather.listing_s']:.2f} s (HTTP)",
    )
    return SectionResult("mcp", [table], metrics, [headline])
