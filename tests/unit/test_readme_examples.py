"""The README's Python examples run as written, offline (issue 47 point 3): each block
of the sections below, pasted into a fresh module in an empty directory, with no
provider key set. A block that needs what the suite has not says so with a
``# needs: ...`` first line and is skipped with that reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.docs_blocks import CodeBlock, code_blocks, run_block

README = Path(__file__).resolve().parents[2] / "README.md"
SECTIONS = ("Guardrails", "Middleware")
"""The README sections whose every Python block runs in the suite."""

BLOCKS = [block for section in SECTIONS for block in code_blocks(README, section)]


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.where)
def test_the_readme_example_runs_as_written(
    block: CodeBlock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if block.needs:
        pytest.skip(f"{block.where} needs {block.needs}")
    monkeypatch.chdir(tmp_path)
    for name in [name for name in os.environ if name.endswith("_API_KEY")]:
        monkeypatch.delenv(name)  # offline: no example may lean on a key the machine has
    run_block(block)


def test_every_section_has_an_example() -> None:
    assert {block.heading for block in BLOCKS} == set(SECTIONS)


def test_blocks_are_found_by_their_section(tmp_path: Path) -> None:
    document = tmp_path / "doc.md"
    document.write_text(
        "# Doc\n\n## Guardrails\n\n```python\nx = 1\n```\n\n```bash\n# not a heading\nls\n```\n"
        "\n### Deeper\n\n```python\n# needs: a provider key\ny = 2\n```\n\n"
        "## Memory\n\n```python\nz = 3\n```\n"
    )
    found = code_blocks(document, "Guardrails")
    assert [(b.line, b.code, b.needs) for b in found] == [
        (6, "x = 1\n", None),
        (17, "# needs: a provider key\ny = 2\n", "a provider key"),
    ]
    assert [b.code for b in code_blocks(document, "Memory")] == ["z = 3\n"]
    with pytest.raises(LookupError, match="no heading 'Gardrails'"):
        code_blocks(document, "Gardrails")
    failing = code_blocks(document, "Guardrails")[0]
    broken = CodeBlock(failing.document, "Guardrails", 6, "python", "undefined_name\n")
    with pytest.raises(NameError) as raised:
        run_block(broken)
    assert raised.traceback[-1].lineno + 1 == 6  # the document's own line
