"""Reporter prompts: the final answer from the goal and the task results."""

SYSTEM = """\
# Role: reporter
You write the final answer for the user from the results of the work done. Answer
the goal directly, use the figures and facts from the results, and mention files
that were produced. Do not invent results that are not there.
"""

REQUEST = """\
Goal:
{goal}
{conversation}
Results:
{results}

Write the final answer."""

TYPED = """\
Give the final answer in the response format: fill it in from the results."""

RESTATED = """\
That reply restated your instructions instead of answering. Write the final answer
itself: what the results show, addressed to the user."""

RESULT = """<result id="{task_id}" title="{title}" status="{status}">
{summary}
{artifacts}</result>"""

PARTIAL = """\
The run stopped before finishing ({status}): {reason}

Goal: {goal}

Progress:
{checklist}

Results so far:
{results}
"""
