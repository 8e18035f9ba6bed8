"""Full runs whose actors use the web and the knowledge base: fetch_url against a
page on loopback, and a question about a PDF answered with its page cited; from
Python and from the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import SCENARIOS, Cli, GraphFactory
from tests.documents import ARTICLE_HTML, write_pdf
from tests.local_http import LocalSite, serve
from tests.scripted import call, plan, spec, submit

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import latest_settings, open_checkpointer
from aimegraph.config import WebConfig
from aimegraph.knowledge import KnowledgeBase
from aimegraph.models import ScriptedChatModel
from aimegraph.steering import run_tools

PDF_QUESTION = SCENARIOS / "pdf_question.yaml"
REPORT_PAGES = [
    "Annual report of Freedonia Shipping. Contents: fleet, revenue, staff.",
    "Fleet. Twelve cargo ships and two tugs sail from the port of Brest.",
    "Revenue. The revenue of Freedonia Shipping in 2024 was 7.3 million euros.",
    "Staff. Freedonia Shipping employs 85 sailors and 12 engineers.",
]


@pytest.fixture
def site() -> Iterator[LocalSite]:
    yield from serve()


def fetch_scenario(url: str) -> dict[str, object]:
    return {
        "planner": [plan(spec("read", tool_bundles=["web"]))],
        "actors": {"read": [call("fetch_url", url=url), submit("{last_tool_output}")]},
        "reporter": [{"text": "{result:read}"}],
    }


def test_an_actor_fetches_a_local_page(site: LocalSite, scripted_graph: GraphFactory) -> None:
    url = site.route("/harbour", body=ARTICLE_HTML.encode(), headers={"Content-Type": "text/html"})
    graph, _ = scripted_graph(
        fetch_scenario(url), web=WebConfig(allow_private_hosts=("127.0.0.1",))
    )
    out = graph.invoke({"goal": "When is high tide at Brest on 3 May?"})
    assert out["status"] == "succeeded"
    assert out["final_answer"].startswith(f"{url} (text/html)")
    assert "# Harbour notes" in out["final_answer"] and "06:42" in out["final_answer"]
    assert "trackVisitor" not in out["final_answer"]
    assert site.hosts == [f"127.0.0.1:{site.port}"]


async def test_an_actor_fetches_a_local_page_under_ainvoke(
    site: LocalSite, scripted_graph: GraphFactory
) -> None:
    url = site.route("/harbour", body=ARTICLE_HTML.encode(), headers={"Content-Type": "text/html"})
    graph, _ = scripted_graph(
        fetch_scenario(url), web=WebConfig(allow_private_hosts=("127.0.0.1",))
    )
    out = await graph.ainvoke({"goal": "When is high tide at Brest on 3 May?"})
    assert out["status"] == "succeeded" and "06:42" in out["final_answer"]


def test_under_the_default_policy_the_actor_is_refused_loopback(
    site: LocalSite, scripted_graph: GraphFactory
) -> None:
    url = site.route("/harbour", body=ARTICLE_HTML.encode(), headers={"Content-Type": "text/html"})
    graph, _ = scripted_graph(fetch_scenario(url), web=WebConfig())
    out = graph.invoke({"goal": "When is high tide at Brest on 3 May?"})
    # The refusal is the actor's observation; the run goes on and ends cleanly, its
    # answer (the refusal) rejected as a tool error.
    assert (
        out["status"] == "rejected" and "tool error: Error: 127.0.0.1" in out["verdict"].issues[0]
    )
    summary = out["tasks"]["read"].result.summary
    assert summary.startswith("Error: 127.0.0.1 resolves to 127.0.0.1, which is not a public")
    assert site.hosts == []


def test_a_pdf_question_is_answered_with_its_page_cited(tmp_path: Path, workspace: Path) -> None:
    kb = KnowledgeBase()
    pdf = write_pdf(tmp_path / "annual-report.pdf", REPORT_PAGES)
    kb.add_files(pdf)
    model = ScriptedChatModel.from_scenario(str(PDF_QUESTION))
    graph = build_aime_graph(model, config=AimeConfig(workspace=workspace), knowledge=kb)
    out = graph.invoke(
        {"goal": "What was the revenue of Freedonia Shipping in 2024? Cite the page."}
    )
    assert out["status"] == "succeeded"
    answer = out["final_answer"]
    assert f"source: {pdf.as_posix()}, page 3 (score" in answer
    assert "7.3 million euros" in answer
    # The passages the actor factory put in the actor's prompt are cited the same way.
    (prompt,) = model.prompts("actor")[:1]
    assert f"[{pdf.as_posix()}, page 3] Revenue. The revenue of Freedonia" in prompt


def test_cli_knowledge_add_then_run_with_knowledge(tmp_path: Path, cli: Cli) -> None:
    pdf = write_pdf(tmp_path / "annual-report.pdf", REPORT_PAGES)
    (tmp_path / "notes.md").write_text("# Notes\n\nThe AGM is in June.\n", encoding="utf-8")
    kb_dir = tmp_path / "kb"
    code, added = cli.json(
        "knowledge", "--kb", str(kb_dir), "add", str(pdf), str(tmp_path / "notes.md")
    )
    assert code == 0 and added == {
        "added": 5,
        "replaced": 0,
        "unchanged": [],
        "passages": 5,
        "knowledge": str(kb_dir),
    }

    code, hits = cli.json(
        "knowledge", "--kb", str(kb_dir), "search", "sailors and engineers", "-k", "1"
    )
    assert code == 0 and hits[0]["page"] == 4 and hits[0]["source"] == pdf.as_posix()

    code, out = cli.run("t-pdf", "--knowledge", str(kb_dir), model=f"scripted:{PDF_QUESTION}")
    assert code == 0 and out["status"] == "succeeded"
    assert f"source: {pdf.as_posix()}, page 3 (score" in out["final_answer"]
    # Stored with the run, so a resume (another process) loads the same knowledge base.
    with open_checkpointer(cli.url) as saver:
        settings = latest_settings(saver, "t-pdf")
    assert settings.knowledge == str(kb_dir.absolute())
    assert run_tools(settings).bundles["knowledge"].tools == ("knowledge_search",)


def test_cli_knowledge_add_again(tmp_path: Path, cli: Cli) -> None:
    """Adding a file again replaces its passages (or leaves them when it is unchanged):
    searches, the actor's knowledge_search included, never see a passage twice."""
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nThe AGM is in June.\n", encoding="utf-8")
    kb = ("knowledge", "--kb", str(tmp_path / "kb"))
    assert cli(*kb, "add", str(notes)) == (0, f"added 1 passage(s); {tmp_path / 'kb'} holds 1\n")
    code, text = cli(*kb, "add", str(notes))
    assert code == 0
    assert text.startswith(f"added 0 passage(s); 1 file(s) unchanged, already indexed ({notes})")
    notes.write_text("# Notes\n\nThe AGM is in July.\n", encoding="utf-8")
    code, text = cli(*kb, "add", str(notes))
    assert code == 0
    assert text.startswith("added 1 passage(s), replacing 1 from an earlier add of the same file")
    code, hits = cli.json(*kb, "search", "AGM")
    assert code == 0 and [hit["text"] for hit in hits] == ["# Notes\n\nThe AGM is in July."]

    config = tmp_path / "berths.yaml"
    config.write_text("berths: 40\n", encoding="utf-8")
    code, text = cli(*kb, "add", str(config))
    assert code == 0
    assert f"warning: {config}: unknown file type (.yaml), indexed as plain text" in text


def test_cli_knowledge_errors(tmp_path: Path, cli: Cli) -> None:
    kb_dir = str(tmp_path / "kb")
    code, text = cli("knowledge", "--kb", kb_dir, "search", "anything")
    assert code == 2 and "no knowledge base in" in text
    code, text = cli("knowledge", "--kb", kb_dir, "add", str(tmp_path / "missing.pdf"))
    assert code == 2 and "no such file or directory" in text
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 broken")
    code, text = cli("knowledge", "--kb", kb_dir, "add", str(tmp_path / "broken.pdf"))
    assert code == 1 and "broken.pdf: not a readable PDF" in text and "nothing was added" in text
    assert "EOF marker" not in text and len(text.strip().splitlines()) == 1
    code, text = cli(
        "run", "a goal", "--model", "scripted:demo", "--workspace", str(tmp_path / "ws"),
        "--knowledge", kb_dir,
    )  # fmt: skip
    assert code == 2 and "is not a saved knowledge base" in text


def test_cli_run_with_the_web_bundle(site: LocalSite, tmp_path: Path, cli: Cli) -> None:
    url = site.route("/harbour", body=ARTICLE_HTML.encode(), headers={"Content-Type": "text/html"})
    scenario = tmp_path / "fetch.json"
    scenario.write_text(json.dumps(fetch_scenario(url)), encoding="utf-8")
    web = json.dumps({"web": {"allow_private_hosts": ["127.0.0.1"]}})
    code, out = cli.run("t-web", "--config", web, model=f"scripted:{scenario}")
    assert code == 0 and "06:42" in out["final_answer"]
    with open_checkpointer(cli.url) as saver:
        stored = latest_settings(saver, "t-web").config.web
    assert stored == WebConfig(allow_private_hosts=("127.0.0.1",))
