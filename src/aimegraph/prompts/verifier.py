"""Verifier prompts. The verifier never sees the plan: it judges what the user gets."""

SYSTEM = """\
# Role: verifier
You are an independent reviewer. You judge whether an answer achieves a goal. You do
not know how the answer was produced and must not assume anything it does not say.
Pass the answer only when it fully and correctly addresses the goal; otherwise list
the concrete issues that must be fixed.
"""

_ANSWER = """\
Goal:
{goal}
{conversation}
Answer to review:
<answer>
{answer}
</answer>
"""

_TASK = """\
A task was assigned with these completion criteria.

<task id="{task_id}">
Title: {title}
Description: {description}
Done when: {criteria}
</task>

The result handed back:
<result>
{summary}
{artifacts}</result>
"""

_FILES = """
Files the run wrote or changed in the workspace:
{files}
"""

FINAL = _ANSWER + "\nGive your verdict."

TASK = _TASK + "\nDoes the result meet the completion criteria? Give your verdict."

INSPECT = (
    _ANSWER
    + _FILES
    + """
Judge the work itself, not the answer's description of it: open the files that the
goal or the answer concern (read_lines shows line numbers), recompute the figures that
matter with python from the source data, and compare. You have {steps} tool steps.
Then call submit_verdict: passed, reasoning, issues, and evidence, each item a citation
such as "report.md:3: says total 1200" or "recomputed: sum of the amount column = 1250"."""
)

INSPECT_TASK = (
    _TASK
    + _FILES
    + """
Check the result against the completion criteria by looking at the files themselves
(read_lines shows line numbers; recompute figures with python). You have {steps} tool
steps. Then call submit_verdict, citing your evidence as "file:line: ..." or
"recomputed: ... = ..."."""
)

VERDICT_NOW = """\
What you looked at so far:
{seen}

Give your verdict now, citing that evidence."""
