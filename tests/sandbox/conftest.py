"""Fixtures of the sandbox tests: a workspace with a secret beside it, and how code runs
there (the ``bubblewrap`` fixture is in ``tests/conftest.py``)."""

from __future__ import annotations

import secrets
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aimegraph.sandbox import (
    Job,
    Language,
    Limits,
    Outcome,
    Sandbox,
    Workspace,
)


@dataclass
class Host:
    """A workspace and, beside it (outside), a directory holding a secret file."""

    ws: Workspace
    outside: Path
    secret: str

    @property
    def secret_file(self) -> Path:
        return self.outside / "secret.txt"

    def run(
        self, sandbox: Sandbox, code: str, language: Language = "python", **limits: Any
    ) -> Outcome:
        """Run ``code`` in ``sandbox`` with the workspace, under ``Limits(**limits)``."""
        return sandbox.run(Job(language, textwrap.dedent(code), self.ws, Limits(**limits)))

    def loot(self) -> str:
        """What the code copied into ``loot.txt`` in the workspace (its own claims are
        not trusted: the test reads the file it left behind)."""
        path = self.ws.root / "loot.txt"
        return path.read_text(errors="replace") if path.exists() else ""


@pytest.fixture
def host(tmp_path: Path) -> Host:
    outside = tmp_path / "outside"
    outside.mkdir()
    token = f"SECRET-{secrets.token_hex(8)}"
    (outside / "secret.txt").write_text(token)
    return Host(Workspace(tmp_path / "ws"), outside, token)
