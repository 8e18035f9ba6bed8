"""The layering contracts (``[tool.importlinter]`` in pyproject.toml, run first by
``make test``) fail the build on an upward import: a scratch copy of the package that
passes them fails once one module of the bottom layer imports the graphs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import aimegraph

SRC = Path(aimegraph.__file__).parent
PYPROJECT = SRC.parents[1] / "pyproject.toml"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
UPWARD = "\nfrom aimegraph.graphs import build_aime_graph  # an arrow pointing up\n"


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_an_upward_import_breaks_the_layers_contract(tmp_path: Path) -> None:
    copy = tmp_path / "src" / "aimegraph"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__", "demo", "static"))
    shutil.copyfile(PYPROJECT, tmp_path / "pyproject.toml")

    kept = _lint(tmp_path)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "0 broken" in kept.stdout

    with (copy / "state" / "models.py").open("a", encoding="utf-8") as module:
        module.write(UPWARD)
    broken = _lint(tmp_path)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "BROKEN" in broken.stdout
    assert "aimegraph.state.models -> aimegraph.graphs" in broken.stdout
