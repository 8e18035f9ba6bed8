"""What Agent Skills cost an actor's prompt (issue 36 point 2): the tokens of its
system prompt and of the tool schemas bound with it (the task's bundles; with skills
installed, ``load_skill`` and ``read_skill_file`` too), with 20 skills installed against
none, and against putting every skill's body in the prompt (what progressive disclosure
saves: bodies come only via ``load_skill``).

Each skill has a two-sentence description and a body of about 300 words, the size the
Agent Skills guidance suggests keeping well under. Tokens are counted with LangChain's
``count_tokens_approximately`` (tool schemas by its ``tools=``), as the eval bench's
token figures are.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from langchain_core.messages import SystemMessage
from langchain_core.messages.utils import count_tokens_approximately

from aimegraph.nodes.actor_factory import DefaultActorFactory
from aimegraph.sandbox import UnconfinedSandbox
from aimegraph.state import Task
from aimegraph.tools.registry import default_registry
from aimegraph.tools.skills import Skill, load_skills
from bench.common import Headline, SectionResult, Table

SKILLS = 20
BODY_WORDS = 300
TASK = Task(id="t1", title="Summarise sales.csv", description="Total the amounts by region.")


def _write_skills(parent: Path, count: int) -> None:
    for i in range(count):
        folder = parent / f"skill-{i:02d}"
        folder.mkdir()
        description = (
            f"Handle document kind {i}, extract its fields and check them against the rules. "
            f"Use when a task mentions kind {i} documents or their fields."
        )
        body = " ".join(f"step{j % 40}" for j in range(BODY_WORDS))
        (folder / "SKILL.md").write_text(
            f"---\nname: {folder.name}\ndescription: '{description}'\n---\n{body}\n"
        )


def _prompt_tokens(workspace: Path, skills: tuple[Skill, ...]) -> tuple[int, int, list[str]]:
    """The actor's system prompt's tokens, its bound tool schemas' tokens, and the
    tools' names."""
    registry = default_registry(workspace, skills=skills, sandbox=UnconfinedSandbox())
    factory = DefaultActorFactory(registry, workspace=workspace, skills=skills)
    spec = factory.build(TASK, "Report the sales totals.", {})
    prompt = [SystemMessage(spec.system_prompt())]
    system = count_tokens_approximately(prompt)
    with_tools = count_tokens_approximately(prompt, tools=list(spec.tools))
    return system, with_tools - system, [tool.name for tool in spec.tools]


def run(quick: bool) -> SectionResult:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "skills").mkdir()
        _write_skills(root / "skills", SKILLS)
        skills = load_skills([root / "skills"])
        none_system, none_tools, none_names = _prompt_tokens(root / "ws", ())
        listed_system, listed_tools, listed_names = _prompt_tokens(root / "ws", skills)
        bodies = count_tokens_approximately([SystemMessage(s.body) for s in skills])
    none = none_system + none_tools
    listed = listed_system + listed_tools
    per_skill = (listed_system - none_system) / SKILLS
    table = Table(
        "Actor prompt tokens (system prompt + bound tool schemas), Agent Skills installed",
        ["skills installed", "system prompt", "tool schemas", "total", "added", "added per skill"],
    )
    table.add("none", none_system, none_tools, none, "", "")
    table.add(
        f"{SKILLS} (names and descriptions; load_skill, read_skill_file bound)",
        listed_system,
        listed_tools,
        listed,
        listed - none,
        f"{per_skill:.0f} + {listed_tools - none_tools} once",
    )
    table.add(
        f"{SKILLS}, every body in the prompt (not done)",
        listed_system + bodies,
        listed_tools,
        listed + bodies,
        listed + bodies - none,
        "",
    )
    added = sorted(set(listed_names) - set(none_names))
    table.notes.append(
        "Tokens by count_tokens_approximately, tool schemas by its tools= argument. Tools "
        f"bound without skills: {', '.join(none_names)}; with them also {', '.join(added)}. "
        "The bodies row is what loading every skill up front would cost; aimegraph returns "
        "a body only when load_skill asks."
    )
    metrics = {
        "prompt_tokens_no_skills": float(none),
        "prompt_tokens_20_skills": float(listed),
        "system_prompt_tokens_no_skills": float(none_system),
        "system_prompt_tokens_20_skills": float(listed_system),
        "skill_tool_schema_tokens": float(listed_tools - none_tools),
        "prompt_tokens_per_skill": per_skill,
        "body_tokens_20_skills": float(bodies),
    }
    headline = Headline(
        f"actor prompt tokens (system prompt + tool schemas) with {SKILLS} Agent Skills installed",
        f"none installed: {none}",
        f"{listed} (+{per_skill:.0f} per skill in the prompt, +{listed_tools - none_tools} "
        f"for the load_skill and read_skill_file schemas; their bodies, {bodies}, load on "
        "demand)",
    )
    return SectionResult("skills", [table], metrics, [headline])
