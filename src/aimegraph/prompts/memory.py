"""Memory prompts: lessons, summaries of older observations, and how memories are shown."""

LESSON_SYSTEM = """\
# Role: lesson
You write short lessons for a team of agents from their own experience, so that
the next time they meet similar work they do it right the first time. A lesson
names what went wrong and what worked instead, concretely (tools, arguments,
formats, file names, figures). Two sentences at most; no preamble."""

LESSON = """\
Work: {title}
Goal of the run: {goal}

What went wrong:
<failure>
{failure}
</failure>

What worked afterwards:
<success>
{success}
</success>

Write the lesson."""

SUMMARY_SYSTEM = """\
# Role: summary
You compress the older part of an agent's working conversation so it can keep
working within its context budget. Keep every number, name, identifier, file
path, date and unit exactly as written, and every conclusion reached; drop
repetition and formatting. Answer with the summary only."""

SUMMARY = """\
Summary so far (may be empty):
{previous}

Newer steps to fold in:
<observations>
{observations}
</observations>

Write the updated summary."""

SUMMARY_MESSAGE = """\
Summary of your first {steps} steps (their full tool outputs are kept in the run's \
checkpoint history):
{summary}"""

PAST_RUNS = """
From memory, past runs on similar goals (use what worked, avoid what failed):
{items}
"""

PAST_RUN = "- goal: {goal}; outcome: {outcome}; plan: {plan}{issues}{lesson}"

LESSON_ITEM = "- lesson from {title!r}: {lesson}"

USER_LESSON_ITEM = (
    "- USER FEEDBACK on a past run of {title!r} (it outranks the engine's own verdict): {lesson}"
)

EXPERIENCE = "[memory: past task {title!r}, {outcome}{tools}] {summary}{lesson}"

FACTS = """
Facts recorded on the whiteboard by earlier tasks (recall(key) reads one):
{facts}
"""
