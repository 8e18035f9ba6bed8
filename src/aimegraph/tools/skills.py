"""Agent Skills: folders with a ``SKILL.md`` (``name`` and ``description`` in YAML
front matter, then instructions), plus supporting files, loaded by progressive
disclosure.

An actor's prompt lists only each skill's name and description
(:func:`skills_section`); ``load_skill`` returns a skill's instructions when the
actor decides to follow it, and ``read_skill_file`` one of its files. The code tools
see each skill's folder read-only at ``/skills/<name>`` (:func:`skill_sandbox`), so
its scripts run in the sandbox like any other code, confined the same way. A sandbox
that cannot mount folders read-only (``docker``, most of one's own) does not see them:
``load_skill`` says so, and the files are read with ``read_skill_file`` only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from aimegraph.sandbox import MountedSandbox, Sandbox, mounts_read_only

__all__ = [
    "SKILLS_BUNDLE",
    "SKILLS_ROOT",
    "Skill",
    "SkillError",
    "load_skills",
    "make_skill_tools",
    "skill_sandbox",
    "skills_description",
    "skills_section",
]

SKILLS_BUNDLE = "skills"
SKILLS_ROOT = "/skills"
"""Where the sandbox shows the skills' folders, each at ``/skills/<name>``."""

SKILL_FILE = "SKILL.md"
# The Agent Skills format: 1-64 lowercase letters, digits and single inner hyphens.
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_MAX_NAME = 64
_MAX_DESCRIPTION = 1024
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*\r?$\n?", re.DOTALL | re.MULTILINE)
_MAX_LISTED_FILES = 50
_MAX_FILE_CHARS = 50_000


class SkillError(ValueError):
    """A skill folder is malformed; the message is one line naming the file."""


@dataclass(frozen=True)
class Skill:
    """One skill: what the prompt shows (``name``, ``description``), what
    ``load_skill`` returns (``body``), and its folder on the host (``root``)."""

    name: str
    description: str
    body: str
    root: Path


def load_skills(folders: Iterable[str | Path]) -> tuple[Skill, ...]:
    """The skills in ``folders``: each a skill folder (it holds a ``SKILL.md``) or a
    folder of skill folders.

    Raises:
        SkillError: a folder is missing or holds no skill, a ``SKILL.md`` is malformed,
            or two skills have the same name.
    """
    found: dict[str, Skill] = {}
    for folder in folders:
        for skill in map(read_skill, _skill_folders(Path(folder).expanduser().resolve())):
            if skill.name in found:
                raise SkillError(
                    f"{skill.root / SKILL_FILE}: skill name {skill.name!r} is already taken "
                    f"by {found[skill.name].root / SKILL_FILE}"
                )
            found[skill.name] = skill
    return tuple(found.values())


def _skill_folders(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise SkillError(f"{folder}: no such skill folder")
    if (folder / SKILL_FILE).is_file():
        return [folder]
    inner = sorted(path.parent for path in folder.glob(f"*/{SKILL_FILE}"))
    if not inner:
        raise SkillError(
            f"{folder / SKILL_FILE}: missing (a skill folder holds a {SKILL_FILE}, "
            "or is a folder of skill folders)"
        )
    return inner


def read_skill(folder: Path) -> Skill:
    """The skill in ``folder`` (see :func:`load_skills`)."""
    path = folder / SKILL_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"{path}: cannot read it: {exc}") from exc
    match = _FRONT_MATTER.match(text)
    if match is None:
        raise SkillError(f"{path}: no YAML front matter (it starts with a line '---')")
    try:
        meta: Any = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise SkillError(f"{path}: bad YAML front matter: {' '.join(str(exc).split())}") from exc
    if not isinstance(meta, dict):
        raise SkillError(f"{path}: the front matter must be a mapping with name and description")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name:
        raise SkillError(f"{path}: the front matter has no name")
    if len(name) > _MAX_NAME or not _NAME.fullmatch(name):
        raise SkillError(
            f"{path}: name {name!r} must be 1-{_MAX_NAME} lowercase letters, digits and "
            "single hyphens, not at either end"
        )
    if name != folder.name:
        raise SkillError(f"{path}: name {name!r} must match its folder's name {folder.name!r}")
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"{path}: the front matter has no description")
    if len(description) > _MAX_DESCRIPTION:
        raise SkillError(f"{path}: the description is longer than {_MAX_DESCRIPTION} characters")
    body = text[match.end() :].strip()
    return Skill(name, " ".join(description.split()), body, folder)


def skills_section(skills: Sequence[Skill]) -> str:
    """The actor prompt's list of skills: names and descriptions only."""
    if not skills:
        return ""
    lines = "".join(f"\n- {skill.name}: {skill.description}" for skill in skills)
    return (
        "\nSkills (call load_skill with a skill's name for its instructions before "
        f"following it):{lines}"
    )


def skills_description(skills: Sequence[Skill]) -> str:
    """The skills bundle as the planner sees it: what it is for, and the skills' names."""
    names = ", ".join(skill.name for skill in skills)
    return f"Agent skills (instructions and scripts for specialised work): {names}."


def skill_sandbox(sandbox: Sandbox, skills: Sequence[Skill]) -> Sandbox:
    """``sandbox`` with each skill's folder read-only at ``/skills/<name>`` in every job,
    where it can mount folders; else ``sandbox`` itself (an unconfined one reaches the
    folders at their host paths, which ``load_skill`` gives)."""
    if not skills or not mounts_read_only(sandbox):
        return sandbox
    return MountedSandbox(sandbox, tuple((_sandbox_path(s), s.root) for s in skills))


def _sandbox_path(skill: Skill) -> str:
    return f"{SKILLS_ROOT}/{skill.name}"


class _LoadSkillInput(BaseModel):
    name: str = Field(description="The skill's name, as the list of skills gives it.")


class _ReadSkillFileInput(BaseModel):
    name: str = Field(description="The skill's name.")
    path: str = Field(description="A file's path inside the skill's folder, e.g. reference.md.")


def make_skill_tools(skills: Sequence[Skill], *, sandbox: Sandbox) -> list[BaseTool]:
    """``load_skill`` and ``read_skill_file`` over ``skills``; the paths they give are
    where the code tools find the files in ``sandbox``."""
    by_name = {skill.name: skill for skill in skills}
    mounted = mounts_read_only(sandbox)
    # Unconfined code reaches the folders at their host paths; a confined sandbox
    # that mounts nothing reaches them nowhere.
    unconfined = sandbox.name == "none"

    def installed(name: str) -> Skill:
        if name not in by_name:
            raise ToolException(f"no skill named {name!r}; installed: {', '.join(by_name)}")
        return by_name[name]

    def load_skill(name: str) -> str:
        skill = installed(name)
        files = sorted(
            str(path.relative_to(skill.root))
            for path in skill.root.rglob("*")
            if path.is_file() and path.name != SKILL_FILE
        )
        listed = ", ".join(files[:_MAX_LISTED_FILES]) + (
            " ..." if len(files) > _MAX_LISTED_FILES else ""
        )
        if mounted or unconfined:
            where = _sandbox_path(skill) if mounted else str(skill.root)
            return (
                f"{skill.body}\n\n[skill {skill.name}: its files are at {where} (read-only; "
                f"run its scripts from there with the python or shell tool): {listed or 'none'}]"
            )
        return (
            f"{skill.body}\n\n[skill {skill.name}: its files ({listed or 'none'}) are not in "
            f"the {sandbox.name} sandbox, which cannot mount them: read them with "
            "read_skill_file; its scripts cannot run here]"
        )

    def read_skill_file(name: str, path: str) -> str:
        skill = installed(name)
        target = (skill.root / path).resolve()
        if not target.is_relative_to(skill.root) or not target.is_file():
            raise ToolException(f"skill {name!r} has no file {path!r}")
        try:
            text = target.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ToolException(f"{path!r} is not a text file; run it or open it in code") from exc
        cut = f"\n[... cut at {_MAX_FILE_CHARS} characters]" if len(text) > _MAX_FILE_CHARS else ""
        return text[:_MAX_FILE_CHARS] + cut

    return [
        StructuredTool.from_function(
            func=load_skill,
            name="load_skill",
            description="Load an installed skill's instructions and the list of its files. "
            "Call it before following a skill.",
            args_schema=_LoadSkillInput,
        ),
        StructuredTool.from_function(
            func=read_skill_file,
            name="read_skill_file",
            description="Read a text file of an installed skill (a reference, a template).",
            args_schema=_ReadSkillFileInput,
        ),
    ]
