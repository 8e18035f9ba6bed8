"""Prompt-optimiser texts: the reflection prompt, how a run is shown to it, its feedback.

``REFLECTION`` is GEPA's instruction-proposal template (``<curr_param>`` is the
component's current text, ``<side_info>`` the reflective dataset) with the rules
an aime component must keep: its ``# Role:`` line and its ``str.format``
placeholders, which the engine fills in.
"""

REFLECTION = """\
I gave an assistant the following instructions (the system prompt of the "{component}" \
role of a multi-agent workflow):
```
<curr_param>
```

Below are runs of the workflow with these instructions: the inputs, what the role \
produced, and feedback on how the run went and what was wrong:
```
<side_info>
```

Write improved instructions for this role. Read the feedback carefully: name the \
mistakes that made runs fail and add precise rules that prevent them; keep what worked. \
Keep the first line `# Role: {component}` unchanged. Keep every placeholder in curly \
braces ({placeholders}) exactly as written, and write no other curly braces.

Give the new instructions within ``` blocks."""

NO_PLACEHOLDERS = "none"

# Feedback lines of one run (the metric's feedback is put in front of them).
STATUS = "Run status: {status}."
REASON = "Why it ended so: {reason}"
VERDICT_ISSUE = "Reviewer issue: {issue}"
VERDICT_REJECTED = "The reviewer rejected the answer: {reasoning}"
TASK_FAILED = "Task {task_id} ({title}) failed: {reason}"
RUN_ERROR = "The run raised {error}"
SUCCEEDED = "The run succeeded and the reviewer accepted the answer."
NO_PLAN = "(no plan was made)"

# A run as the reflection model reads it: GEPA renders each record of the
# reflective dataset as Markdown headings (its keys) over their texts.
PLAN_TASK = "{id}: {title}{after}. {description}"
PLAN_AFTER = " (after {dependencies})"
TASK_OUTCOME = "{id} ({status}, {attempts} attempt(s)): {outcome}"
NOT_VERIFIED = "(not verified)"
VERDICT = "{judgement}: {reasoning}{issues}"
JUDGED_PASSED = "passed"
JUDGED_REJECTED = "rejected"
VERDICT_ISSUE_LINE = "\n- {issue}"
GOAL = "Goal"
TASKS = "Tasks"
FINAL_ANSWER = "Final answer"
TASK_RESULTS = "Task results"
# GEPA's documented record keys (gepa.core.adapter.GEPAAdapter.make_reflective_dataset).
INPUTS = "Inputs"
OUTPUTS = "Generated Outputs"
FEEDBACK = "Feedback"
SCORED_FEEDBACK = "Score {score:g}. {feedback}"
