"""Systems under test: named aimegraph configurations and the ReAct baselines.

A system is a :class:`SystemSpec`. ``kind`` says what runs the task:

- ``aimegraph``: ``build_aime_graph`` with the spec's ``config`` (``AimeConfig``
  fields), ``models`` per role, ``prompts`` (a prompt-set file or a prompt store,
  pinned to ``prompt_version`` when given), ``agents`` (agent units) and
  ``guardrails`` (your own, beside the built-ins ``config.guardrails`` names);
- ``create_agent``: LangChain's ReAct loop (``langchain.agents.create_agent``,
  extra ``[eval]``), the plain loop a user would write;
- ``deepagents``: ``deepagents.create_deep_agent``, when the package is installed.

The baselines get the same model and the same work tools as aimegraph (the
``files`` and ``compute`` bundles and the application's own tools; deepagents
uses its own file tools over the same workspace) and a short generic system prompt
(:mod:`aimegraph.prompts.baseline`). ``aimegraph eval --systems`` takes built-in
names (``aimegraph``, ``create_agent``, ``deepagents``) and systems files (YAML or
JSON: a list of specs, or a mapping with ``systems``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from aimegraph.config import AimeConfig
from aimegraph.guardrails import Guardrail
from aimegraph.imports import import_object
from aimegraph.models.resolve import ROLES
from aimegraph.yaml_faults import yaml_problem

__all__ = [
    "BUILTIN_SYSTEMS",
    "SystemKind",
    "SystemSpec",
    "SystemsError",
    "load_systems",
    "system_guardrails",
    "unavailable_reason",
]

SystemKind = Literal["aimegraph", "create_agent", "deepagents"]

_AIME_ONLY = ("models", "config", "prompts", "prompt_version", "agents", "guardrails")


class SystemsError(ValueError):
    """A systems file or name is malformed; the message says where and what."""


class SystemSpec(BaseModel):
    """One system under test (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    kind: SystemKind = "aimegraph"
    model: str | None = Field(None, description="model spec; default: the eval's model")
    models: dict[str, str] = Field(default_factory=dict, description="aimegraph: per role")
    config: dict[str, Any] = Field(default_factory=dict, description="aimegraph: AimeConfig")
    prompts: str | None = Field(None, description="aimegraph: prompt-set file or prompt store")
    prompt_version: str | None = Field(None, description="aimegraph: a version of the store")
    agents: str | None = Field(None, description="aimegraph: agent units file or module:attr")
    guardrails: str | None = Field(
        None,
        description="aimegraph: module:attr naming a Guardrail, a list of them, or a function "
        "returning them (called for each rollout)",
    )
    system_prompt: str | None = Field(None, description="baselines: replaces the generic prompt")

    @model_validator(mode="after")
    def _fits_kind(self) -> SystemSpec:
        if self.kind != "aimegraph":
            given = [f for f in _AIME_ONLY if getattr(self, f)]
            if given:
                raise ValueError(f"{', '.join(given)} apply to aimegraph systems only")
        elif self.system_prompt is not None:
            raise ValueError("system_prompt applies to the baselines; aimegraph takes prompts")
        unknown = sorted(set(self.models) - set(ROLES))
        if unknown:
            raise ValueError(f"unknown model role(s) {unknown}; roles: {', '.join(ROLES)}")
        if "workspace" in self.config:
            raise ValueError("config.workspace is the eval's: every rollout gets its own")
        AimeConfig.model_validate(self.config)  # unknown fields and bad values, now
        if self.prompt_version is not None and self.prompts is None:
            raise ValueError("prompt_version needs prompts: the prompt store it is in")
        if self.guardrails is not None:
            _guardrails_object(self.guardrails)  # a name that does not import fails now
        return self

    def digest(self, model: str) -> str:
        """A hash of the spec and the model it runs with (a changed system reruns)."""
        text = json.dumps([self.model_dump(mode="json"), model], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


BUILTIN_SYSTEMS: dict[str, SystemSpec] = {
    "aimegraph": SystemSpec(name="aimegraph", kind="aimegraph"),
    "create_agent": SystemSpec(name="create_agent", kind="create_agent"),
    "deepagents": SystemSpec(name="deepagents", kind="deepagents"),
}
"""The systems ``--systems`` knows by name: aimegraph with its defaults and the two baselines."""


def _guardrails_object(name: str) -> Any:
    return import_object(
        name,
        malformed=f"guardrails takes module:attr; got {name!r}",
        failed="cannot import guardrails",
    )


def system_guardrails(spec: SystemSpec) -> list[Guardrail]:
    """The guardrails ``spec.guardrails`` names, made afresh for one rollout (a
    function is called each time, so a guardrail that keeps state starts clean).

    Raises:
        ValueError: the name does not import, or is not guardrails.
    """
    if spec.guardrails is None:
        return []
    value = _guardrails_object(spec.guardrails)
    if callable(value) and not isinstance(value, Guardrail):
        value = value()
    found = [value] if isinstance(value, Guardrail) else list(value)
    if not all(isinstance(g, Guardrail) for g in found):
        raise ValueError(
            f"{spec.guardrails!r} must name a Guardrail, a list of them or a function "
            "returning them"
        )
    return found


def unavailable_reason(kind: SystemKind) -> str | None:
    """Why a kind of system cannot run in this installation (``None``: it can)."""
    if kind == "create_agent" and _major_version("langchain") < 1:
        return "create_agent needs LangChain v1: pip install 'aimegraph[eval]'"
    if kind == "deepagents" and importlib.util.find_spec("deepagents") is None:
        return "deepagents is not installed (pip install deepagents)"
    return None


def _major_version(distribution: str) -> int:
    """The installed major version of a distribution (0 when it is not installed)."""
    try:
        return int(importlib.metadata.version(distribution).split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return 0


def load_systems(items: Sequence[str | SystemSpec]) -> list[SystemSpec]:
    """The systems ``items`` name: specs, built-in names, or systems files."""
    systems: list[SystemSpec] = []
    for item in items:
        if isinstance(item, SystemSpec):
            systems.append(item)
        elif item in BUILTIN_SYSTEMS:
            systems.append(BUILTIN_SYSTEMS[item])
        elif Path(item).suffix in (".yaml", ".yml", ".json"):
            systems += _read_file(Path(item))
        else:
            raise SystemsError(
                f"unknown system {item!r}: give {', '.join(BUILTIN_SYSTEMS)} or a systems "
                "file (.yaml, .yml, .json)"
            )
    names = [s.name for s in systems]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise SystemsError(f"system names repeat: {', '.join(repeated)}")
    if not systems:
        raise SystemsError("no systems to evaluate")
    return systems


def _read_file(path: Path) -> list[SystemSpec]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SystemsError(f"cannot read systems file {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise SystemsError(f"{path}{yaml_problem(exc)}") from exc
    if isinstance(data, dict) and set(data) == {"systems"}:
        data = data["systems"]
    if not isinstance(data, list):
        raise SystemsError(f"{path}: a systems file is a list of systems or {{systems: [...]}}")
    specs = []
    for index, item in enumerate(data):
        name = item.get("name") if isinstance(item, dict) else None
        try:
            specs.append(SystemSpec.model_validate(item))
        except ValidationError as exc:
            details = "; ".join(
                ".".join(map(str, e["loc"])) + ": " + e["msg"].removeprefix("Value error, ")
                if e["loc"]
                else e["msg"].removeprefix("Value error, ")
                for e in exc.errors()
            )
            where = f"system {name!r}" if name else f"system #{index + 1}"
            raise SystemsError(f"{path}: {where}: {details}") from exc
    # Files the specs name are relative to the systems file.
    return [_relative_to(spec, path.parent) for spec in specs]


def _relative_to(spec: SystemSpec, folder: Path) -> SystemSpec:
    update: dict[str, Any] = {}
    for name in ("prompts", "agents"):
        value = getattr(spec, name)
        if value and ":" not in value and not Path(value).is_absolute():
            update[name] = str(folder / value)
    return spec.model_copy(update=update)
