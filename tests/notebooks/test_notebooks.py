"""Execute every notebook under notebooks/ top to bottom, offline, and fail on any error.

Each notebook runs in a fresh kernel of the interpreter running the tests (a
kernelspec written for the occasion, so a stray ``python3`` kernelspec elsewhere
on the machine cannot pick another Python), with a temporary working directory
and a time limit per cell. The notebooks themselves assert on the results, so a
broken engine fails here, not just a crashing cell.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402
from jupyter_client.manager import AsyncKernelManager  # noqa: E402
from nbclient.exceptions import CellExecutionError  # noqa: E402

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
KERNEL_NAME = "aimegraph-tests"
CELL_TIMEOUT_S = 120

# Runs first in every kernel: the notebook must be executed by this very interpreter
# (the project's venv), with the same strict checkpoint deserialisation as the tests.
PRELUDE = f"""\
import os, sys
assert sys.prefix == {sys.prefix!r}, f"kernel runs {{sys.executable}} (prefix {{sys.prefix}})"
os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")
"""


def test_notebooks_are_present() -> None:
    names = {path.name for path in NOTEBOOKS}
    assert {
        "01_quickstart.ipynb",
        "02_checkpoints.ipynb",
        "03_composition.ipynb",
        "04_tools_and_knowledge.ipynb",
    } <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [
        index
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None)
    ]
    assert not dirty, f"{path.name}: cells {dirty} hold outputs; strip them before committing"


@pytest.fixture(scope="module")
def kernel_dirs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """A kernelspec that launches ipykernel with this interpreter."""
    root = tmp_path_factory.mktemp("kernels")
    spec_dir = root / KERNEL_NAME
    spec_dir.mkdir()
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"aimegraph tests ({sys.executable})",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    return [str(root)]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path: Path, kernel_dirs: list[str], tmp_path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(PRELUDE))
    km = AsyncKernelManager(
        kernel_name=KERNEL_NAME, kernel_spec_manager=KernelSpecManager(kernel_dirs=kernel_dirs)
    )
    client = nbclient.NotebookClient(
        nb,
        km=km,
        timeout=CELL_TIMEOUT_S,
        allow_errors=False,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    try:
        client.execute()
    except CellExecutionError as exc:
        pytest.fail(f"{path.name} failed:\n{exc}", pytrace=False)
    # Every code cell ran (none was skipped by an early error).
    assert all(cell.execution_count is not None for cell in nb.cells if cell.cell_type == "code")
