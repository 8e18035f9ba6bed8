"""The repository's documents as text: no merge leftovers, and every "architecture: X"
reference names a section of docs/architecture.md (issue 38, point 4)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("docs", "README.md", "src")
# git writes exactly these at the start of a line; a Markdown setext heading or a table
# rule made of "=" has no seven-character run followed by the end or a space
CONFLICT = re.compile(r"^(<<<<<<<|>>>>>>>)( |$)|^=======$", re.MULTILINE)
REFERENCE = re.compile(r"architecture: ([A-Z][^).\"\n]*)")


def _tracked_files() -> list[Path]:
    """Tracked files under CHECKED; a copy without git (an sdist) checks what is there."""
    git = shutil.which("git")
    if git is not None and (ROOT / ".git").exists():
        listed = subprocess.run(
            [git, "ls-files", "-z", "--", *CHECKED],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.decode()
        return [ROOT / name for name in listed.split("\0") if name]
    return [
        p
        for name in CHECKED
        for p in ((ROOT / name).rglob("*") if (ROOT / name).is_dir() else [ROOT / name])
    ]


def _texts() -> dict[str, str]:
    texts: dict[str, str] = {}
    for path in _tracked_files():
        if not path.is_file():
            continue
        try:
            texts[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # binary data (a bundled model, an image) has no lines
            continue
    return texts


def test_the_conflict_pattern_finds_git_markers() -> None:
    text = "a\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> main\nheading\n===\n| ======= |\n"
    assert [m.group(0) for m in CONFLICT.finditer(text)] == ["<<<<<<< ", "=======", ">>>>>>> "]


def test_no_document_or_source_file_holds_merge_conflict_markers() -> None:
    texts = _texts()
    assert "README.md" in texts and "docs/architecture.md" in texts
    leftovers = [
        f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0).strip()}"
        for name, text in texts.items()
        for m in CONFLICT.finditer(text)
    ]
    assert leftovers == []


def test_every_architecture_reference_names_one_of_its_sections() -> None:
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    sections = {
        line.lstrip("#").strip() for line in architecture.splitlines() if line.startswith("#")
    }
    references = {
        (name, m.group(1).strip())
        for name, text in _texts().items()
        for m in REFERENCE.finditer(text)
    }
    if not references:
        pytest.fail("no architecture references found: the pattern no longer matches the docs")
    assert [ref for ref in sorted(references) if ref[1] not in sections] == []
