"""The dashboard's JSON API and event streams, in process: what the pages are fed
from the checkpoints, and steering through Command(resume=...) shared with the CLI.
The safety rules are in ``test_api_safety.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from starlette.testclient import TestClient
from tests.conftest import TWO_TASKS
from tests.dashboard.conftest import HOSTILE, LOCAL, LiveServer, demo, post

from aimegraph.answers import resume_command
from aimegraph.checkpoints import hold_thread, run_config
from aimegraph.cli import main
from aimegraph.dashboard import create_app
from aimegraph.dashboard.runs import RunManager
from aimegraph.steering import prepare_demo, run_graph

STEERING_SCENARIO: dict[str, Any] = {
    "goal": "Ask which product to price, then price it",
    "planner": [
        {
            "rationale": "one task",
            "tasks": [
                {"id": "t1", "title": "Ask and compute", "tool_bundles": ["human", "compute"]}
            ],
        }
    ],
    "actors": {
        "t1": [
            {"tool": "ask_human", "args": {"question": "How many units?"}},
            {"tool": "calculator", "args": {"expression": "6 * 7"}},
            {
                "tool": "submit_result",
                "args": {"status": "completed", "summary": "{last_tool_output}"},
            },
        ]
    },
    "reporter": [{"text": "{all_results}"}],
    "verifier": [{"passed": True, "reasoning": "fine"}],
}


def view(client: TestClient, thread_id: str) -> dict[str, Any]:
    response = client.get(f"/api/threads/{thread_id}")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def test_a_finished_run_reads_from_its_checkpoints(client: TestClient, runs: RunManager) -> None:
    thread_id = demo(client, runs)
    run = view(client, thread_id)
    assert run["status"] == "succeeded" and run["settings"]["model"] == "scripted:demo"
    assert run["checklist"].count("- [x]") == 4
    assert [p["reason"] for p in run["plans"]] == [None] and run["plans"][0]["rationale"]
    assert run["verdict"]["passed"] is True and run["final_answer"]
    assert set(run["usage"]["by_role"]) == {"planner", "actor", "reporter", "verifier"}
    assert run["usage"]["llm_calls"] == sum(
        r["llm_calls"] for r in run["usage"]["by_role"].values()
    )

    (actor,) = run["actors"]["t1"]
    assert actor["persona"] == "a data engineer" and "list_dir" in actor["tools"]
    assert "data engineer" in actor["system_prompt"] and "list_dir" in actor["system_prompt"]
    kinds = [e["kind"] for e in actor["transcript"]]
    assert kinds[0] == "prompt" and kinds[-2:] == ["result", "observation"]
    call = next(e for e in actor["transcript"] if e["kind"] == "call")
    seen = actor["transcript"][kinds.index("call") + 1]
    assert (
        call["tool"] == "list_dir" and seen["kind"] == "observation" and "sales.csv" in seen["text"]
    )

    timeline = run["timeline"]
    names = [bar["name"] for bar in timeline["bars"]]
    assert names[0] == "planner" and names[-2:] == ["reporter", "verifier"]
    assert sorted(names[1:-2]) == ["t1", "t2", "t3", "t4"]
    assert timeline["time_to_first_task_s"] == min(b["start"] for b in timeline["bars"][1:-2])
    assert timeline["critical_path"] and timeline["critical_path"][-1] == "t4"

    svg = client.get(f"/api/threads/{thread_id}/plan.svg")
    assert (
        svg.headers["content-type"].startswith("image/svg+xml")
        and "t4: Write the report" in svg.text
    )

    (row,) = client.get("/api/threads").json()["threads"]
    assert row["thread_id"] == thread_id and row["status"] == "succeeded"
    assert row["usage"]["llm_calls"] == run["usage"]["llm_calls"] and "sales" in row["goal"]


def test_threads_filter_by_status(
    client: TestClient, runs: RunManager, hostile_thread: str
) -> None:
    paused = demo(client, runs, approve_plan=True)
    every = client.get("/api/threads").json()["threads"]
    assert {r["thread_id"]: r["status"] for r in every} == {
        paused: "paused",
        hostile_thread: "succeeded",
    }
    only = client.get("/api/threads", params={"status": "paused"}).json()["threads"]
    assert [r["thread_id"] for r in only] == [paused]


def test_replans_carry_their_reasons(client: TestClient, hostile_thread: str) -> None:
    run = view(client, hostile_thread)
    first, second = run["plans"]
    assert first["reason"] is None and second["rationale"] == "second plan: try another way"
    assert "t1" in second["reason"] and "failed" in second["reason"]
    # Run through the Python API with a model object: its config is stored, no model spec.
    assert run["settings"]["model"] is None and run["settings"]["config"]["task_retries"] == 0


def test_plan_drawing_escapes_markup(client: TestClient, hostile_thread: str) -> None:
    svg = client.get(f"/api/threads/{hostile_thread}/plan.svg").text
    assert "<script" not in svg and "&lt;script&gt;" in svg


def test_plan_drawing_without_the_draw_extra(
    client: TestClient, hostile_thread: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "aimegraph.drawing", None)  # import fails
    response = client.get(f"/api/threads/{hostile_thread}/plan.svg")
    assert response.status_code == 501 and "no drawing" in response.json()["error"]
    assert view(client, hostile_thread)["tasks"]  # the page falls back to a task list


def test_approve_a_plan_on_the_dashboard(client: TestClient, runs: RunManager) -> None:
    thread_id = demo(client, runs, approve_plan=True)
    run = view(client, thread_id)
    (waiting,) = run["interrupts"]
    assert run["status"] == "paused" and waiting["kind"] == "approve_plan"
    assert "- [ ] t1: Inspect the dataset" in waiting["checklist"]

    not_a_decision = post(client, f"/api/threads/{thread_id}/resume", {"answer": "sure"})
    assert not_a_decision.status_code == 400 and "needs a decision" in not_a_decision.text
    unknown = post(
        client, f"/api/threads/{thread_id}/resume", {"action": "approve", "interrupt_id": "nope"}
    )
    assert unknown.status_code == 404

    approved = post(
        client,
        f"/api/threads/{thread_id}/resume",
        {"action": "approve", "interrupt_id": waiting["id"]},
    )
    assert approved.status_code == 202
    runs.wait(thread_id, timeout=60)
    assert view(client, thread_id)["status"] == "succeeded"
    finished = post(client, f"/api/threads/{thread_id}/resume", {"action": "approve"})
    assert finished.status_code == 404 and "nothing to resume" in finished.text


def test_reject_and_edit_a_plan(client: TestClient, runs: RunManager) -> None:
    rejected = demo(client, runs, approve_plan=True)
    post(client, f"/api/threads/{rejected}/resume", {"action": "reject", "reason": "too long"})
    runs.wait(rejected, timeout=60)
    run = view(client, rejected)
    assert run["status"] == "rejected" and "too long" in run["reason"]

    edited = demo(client, runs, approve_plan=True)
    plan = view(client, edited)["interrupts"][0]["plan"]
    plan["tasks"] = [t for t in plan["tasks"] if t["id"] == "t1"]
    post(client, f"/api/threads/{edited}/resume", {"action": "edit", "plan": plan})
    runs.wait(edited, timeout=60)
    assert [t["id"] for t in view(client, edited)["tasks"]] == ["t1"]


def test_answer_ask_human_and_deny_a_tool_call(
    client: TestClient, runs: RunManager, tmp_path: Path
) -> None:
    scenario = tmp_path / "steering.json"
    scenario.write_text(json.dumps(STEERING_SCENARIO))
    started = post(
        client,
        "/api/runs",
        {
            "goal": STEERING_SCENARIO["goal"],
            "model": f"scripted:{scenario}",
            "config": {"approve_tools": ["calculator"]},
            "thread_id": "steer",
        },
    )
    assert started.status_code == 202 and started.json()["thread_id"] == "steer"
    runs.wait("steer", timeout=60)
    (question,) = view(client, "steer")["interrupts"]
    assert question["kind"] == "ask_human" and question["question"] == "How many units?"
    wrong = post(client, "/api/threads/steer/resume", {"action": "approve"})
    assert wrong.status_code == 400 and "asks a question" in wrong.text

    post(client, "/api/threads/steer/resume", {"answer": "42 units"})
    runs.wait("steer", timeout=60)
    (call,) = view(client, "steer")["interrupts"]
    assert call["kind"] == "approve_tool" and call["tool"] == "calculator"
    assert call["args"] == {"expression": "6 * 7"}

    post(client, "/api/threads/steer/resume", {"action": "reject", "reason": "not now"})
    runs.wait("steer", timeout=60)
    run = view(client, "steer")
    assert not run["interrupts"]
    transcript = run["actors"]["t1"][0]["transcript"]
    observations = [e["text"] for e in transcript if e["kind"] == "observation"]
    assert observations[0] == "42 units"
    assert "denied" in observations[1] and "not now" in observations[1]


def test_a_run_paused_in_the_cli_is_answered_on_the_dashboard_and_back(
    client: TestClient, runs: RunManager, store_url: str
) -> None:
    code = main(["--checkpoints", store_url, "run", "Multiply six by seven", "--model", TWO_TASKS,
                 "--approve-plan", "--thread", "from-cli", "--json"])  # fmt: skip
    assert code == 5
    assert view(client, "from-cli")["interrupts"][0]["kind"] == "approve_plan"
    post(
        client,
        "/api/threads/from-cli/resume",
        {"action": "reject", "reason": "answered on the page"},
    )
    runs.wait("from-cli", timeout=60)
    assert view(client, "from-cli")["status"] == "rejected"

    paused_here = demo(client, runs, approve_plan=True)
    assert main(["--checkpoints", store_url, "resume", paused_here, "--approve", "--json"]) == 0
    assert view(client, paused_here)["status"] == "succeeded"


def test_a_new_goal_on_a_thread_keeps_its_stored_settings(
    client: TestClient, runs: RunManager, store_url: str
) -> None:
    """As ``aimegraph run --thread``: the thread's model and safety settings (here plan
    approval) hold for its next goal started on the page, the form's over them."""
    code = main(["--checkpoints", store_url, "run", "Multiply six by seven", "--model", TWO_TASKS,
                 "--approve-plan", "--thread", "kept", "--json"])  # fmt: skip
    assert code == 5
    post(client, "/api/threads/kept/resume", {"action": "reject", "reason": "not this one"})
    runs.wait("kept", timeout=60)
    started = post(client, "/api/runs", {"goal": "Multiply six by seven", "thread_id": "kept"})
    assert started.status_code == 202, started.text
    runs.wait("kept", timeout=60)
    run = view(client, "kept")
    assert run["interrupts"][0]["kind"] == "approve_plan"  # the stored approve_plan
    assert run["settings"]["model"] == TWO_TASKS  # not the form's default
    # The form's config goes over the stored one.
    post(client, "/api/threads/kept/resume", {"action": "reject", "reason": "again"})
    runs.wait("kept", timeout=60)
    started = post(
        client,
        "/api/runs",
        {"goal": "Multiply six by seven", "thread_id": "kept", "config": {"approve_plan": False}},
    )
    assert started.status_code == 202, started.text
    runs.wait("kept", timeout=60)
    assert view(client, "kept")["status"] == "succeeded"


def test_a_run_built_with_middleware_is_not_carried_on_by_the_dashboard(
    client: TestClient, saver: BaseCheckpointSaver[Any], tmp_path: Path
) -> None:
    """The dashboard rebuilds a run from its stored settings, which cannot hold the
    middleware objects: it refuses, rather than carrying the run on without them."""
    from langchain.agents.middleware import PIIMiddleware

    from aimegraph import AimeConfig, build_aime_graph
    from aimegraph.guardrails import guardrail

    @guardrail("output")
    def no_shouting(subject: Any) -> None:
        return None

    # Built-in guardrails go by name in the config, which is stored: only objects count.
    config = AimeConfig(workspace=tmp_path / "ws", approve_plan=True, guardrails=("secrets",))
    graph = build_aime_graph(
        TWO_TASKS,
        config=config,
        checkpointer=saver,
        middleware=[PIIMiddleware("email")],
        guardrails=[no_shouting],
    )
    assert graph.invoke({"goal": "Multiply six by seven"}, run_config("mw"))["__interrupt__"]
    refused = post(client, "/api/threads/mw/resume", {"action": "approve"})
    assert refused.status_code == 400
    assert refused.json()["error"].startswith(
        "the run was built with middleware actor: PIIMiddleware[email], guardrail no_shouting "
        "given to build_aime_graph as Python objects, which its stored settings cannot rebuild"
    )
    assert view(client, "mw")["interrupts"][0]["kind"] == "approve_plan"  # still waiting


def _stopped_demo(saver: BaseCheckpointSaver[Any], thread_id: str) -> None:
    """A demo run stopped after its planner (as a crash or a Ctrl-C leaves one)."""
    settings, goal = prepare_demo(thread_id)
    graph = run_graph(settings, saver)
    graph.invoke({"goal": goal}, run_config(thread_id, settings), interrupt_after=["planner"])


def test_live_and_stopped_runs_resume_and_cancel_buttons(
    client: TestClient, runs: RunManager, saver: BaseCheckpointSaver[Any]
) -> None:
    _stopped_demo(saver, "stopped")
    run = view(client, "stopped")
    assert run["status"] == "stopped" and run["holder"] is None  # the Resume button shows

    with hold_thread(saver, "stopped"):  # another process runs it now
        run = view(client, "stopped")
        assert run["status"] == "running" and "pid " in run["holder"]
        rows = {r["thread_id"]: r["status"] for r in client.get("/api/threads").json()["threads"]}
        assert rows["stopped"] == "running"
        busy = post(client, "/api/threads/stopped/resume", {})
        assert busy.status_code == 409 and "is being run by another process" in busy.text

    resumed = post(client, "/api/threads/stopped/resume", {})  # the Resume button
    assert resumed.status_code == 202
    runs.wait("stopped", timeout=60)
    assert view(client, "stopped")["status"] == "succeeded"

    _stopped_demo(saver, "doomed")
    cancelled = post(client, "/api/threads/doomed/cancel", {})  # the Cancel button
    assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"
    assert view(client, "doomed")["status"] == "cancelled"
    assert post(client, "/api/threads/doomed/resume", {}).status_code == 404
    assert post(client, "/api/threads/doomed/cancel", {}).status_code == 404
    assert post(client, "/api/threads/ghost/cancel", {}).status_code == 404


def test_bad_starts_are_refused(client: TestClient, runs: RunManager) -> None:
    assert post(client, "/api/runs", {"goal": ""}).status_code == 400
    bad_config = post(client, "/api/runs", {"goal": "g", "config": {"max_parallel": 0}})
    assert bad_config.status_code == 400 and "max_parallel" in bad_config.text
    bad_model = post(client, "/api/runs", {"goal": "g", "model": "nope:thing"})
    assert bad_model.status_code == 400
    paused = demo(client, runs, approve_plan=True)
    again = post(client, "/api/demo", {"thread_id": paused})
    assert again.status_code == 409 and "has not ended: resume or cancel it" in again.text
    assert client.get("/api/threads/unknown").status_code == 404
    assert post(client, "/api/threads/unknown/resume", {"action": "approve"}).status_code == 404


def test_event_streams_push_each_change(live: LiveServer, hostile_thread: str) -> None:
    def first_event(path: str) -> tuple[str, dict[str, Any]]:
        with httpx.stream("GET", live.url + path, timeout=10) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            event = ""
            for line in response.iter_lines():
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:"):
                    return event, json.loads(line.split(":", 1)[1])
        raise AssertionError("the stream ended")

    event, data = first_event(f"/api/threads/{hostile_thread}/events")
    assert event == "run" and data["thread_id"] == hostile_thread and data["goal"].endswith(HOSTILE)
    event, data = first_event("/api/events")
    assert event == "threads" and [t["thread_id"] for t in data["threads"]] == [hostile_thread]


@pytest.mark.postgres
def test_postgres_checkpoints_feed_the_dashboard(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aimegraph.checkpoints import new_thread_id, open_checkpointer

    monkeypatch.chdir(tmp_path)
    with open_checkpointer(postgres_url) as saver:
        runs = RunManager(saver)
        client = TestClient(create_app(saver, runs=runs), base_url=LOCAL)
        thread_id = demo(client, runs, thread_id=new_thread_id("dash-pg-"))
        rows = {r["thread_id"]: r for r in client.get("/api/threads").json()["threads"]}
        assert rows[thread_id]["status"] == "succeeded"
        run = view(client, thread_id)
        assert run["checklist"].count("- [x]") == 4 and set(run["actors"]) == {
            "t1",
            "t2",
            "t3",
            "t4",
        }
        assert client.app.state.reader.version(thread_id) == run["version"]


def test_a_run_in_another_connection_streams_live(live: LiveServer, store_url: str) -> None:
    """The page's stream follows a run written through another connection to the
    store (as another process would): opened while that process holds the thread
    before its first checkpoint, it waits for the thread to appear, shows the pause,
    then the end."""
    import queue
    import threading

    from aimegraph.checkpoints import open_checkpointer, run_config
    from aimegraph.steering import prepare_demo, run_graph

    views: queue.Queue[dict[str, Any]] = queue.Queue()
    answered: queue.Queue[int] = queue.Queue()

    def follow() -> None:
        try:
            with httpx.stream("GET", f"{live.url}/api/threads/elsewhere/events", timeout=30) as r:
                answered.put(r.status_code)
                for line in r.iter_lines():
                    if line.startswith("data:"):
                        views.put(json.loads(line.removeprefix("data:")))
        except httpx.HTTPError:
            pass  # the server stopped at the end of the test

    def next_with(status: str) -> dict[str, Any]:
        while True:
            view = views.get(timeout=30)
            if view["status"] == status:
                return view

    with open_checkpointer(store_url) as elsewhere:
        with hold_thread(elsewhere, "elsewhere"):  # starting its run: no checkpoint yet
            threading.Thread(target=follow, daemon=True).start()
            assert answered.get(timeout=30) == 200
        settings, goal = prepare_demo("elsewhere", approve_plan=True)
        graph = run_graph(settings, elsewhere)
        graph.invoke({"goal": goal}, run_config("elsewhere", settings))
        paused = next_with("paused")
        assert paused["interrupts"][0]["kind"] == "approve_plan" and not paused["active"]
        graph.invoke(
            resume_command(
                graph.get_state(run_config("elsewhere")).interrupts, {"action": "approve"}
            ),
            run_config("elsewhere", settings),
        )
        done = next_with("succeeded")
    assert done["checklist"].count("- [x]") == 4 and done["version"] != paused["version"]


@pytest.mark.parametrize("scheduler", ["batch", "eager"])
def test_actors_and_interrupts_show_once_under_either_scheduler(
    client: TestClient, saver: BaseCheckpointSaver[Any], tmp_path: Path, scheduler: str
) -> None:
    """The eager scheduler runs each actor graph inside the executor node (actor
    checkpoints one namespace deeper, interrupts written by both tasks): the page
    still shows each task's actor once and the pending question once."""
    from aimegraph import AimeConfig, build_aime_graph
    from aimegraph.checkpoints import thread_config
    from aimegraph.models import ScriptedChatModel

    graph = build_aime_graph(
        ScriptedChatModel.from_dict(STEERING_SCENARIO),
        config=AimeConfig(workspace=tmp_path, scheduler=scheduler),
        checkpointer=saver,
    )
    graph.invoke({"goal": STEERING_SCENARIO["goal"]}, thread_config(scheduler))
    paused = view(client, scheduler)
    assert [i["kind"] for i in paused["interrupts"]] == ["ask_human"]
    (actor,) = paused["actors"]["t1"]
    assert actor["transcript"][-1] == {
        "kind": "call",
        "tool": "ask_human",
        "args": {"question": "How many units?"},
    }
    graph.invoke(
        resume_command(graph.get_state(thread_config(scheduler)).interrupts, {"answer": "42"}),
        thread_config(scheduler),
    )
    done = view(client, scheduler)
    assert done["status"] == "succeeded" and not done["interrupts"]
    (actor,) = done["actors"]["t1"]
    observations = [e["text"] for e in actor["transcript"] if e["kind"] == "observation"]
    assert observations[:2] == ["42", "42"]  # the answer, then the calculator's 6 * 7
    assert [e["kind"] for e in actor["transcript"]].count("result") == 1
