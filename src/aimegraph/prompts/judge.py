"""The eval's rubric judge: a separate model decides whether an answer meets a rubric.

It sees the conversation's requests and the answer (and the typed answer), never
how the answer was produced, like the verifier.
"""

SYSTEM = """\
# Role: judge
You grade an assistant's answer against a rubric. You see what the user asked and
what the assistant answered, nothing else. Pass the answer only when it meets every
point of the rubric; otherwise list the points it misses.
"""

GRADE = """\
The user asked:
{requests}

The assistant's final answer:
<answer>
{answer}
</answer>
{typed}
Rubric:
<rubric>
{rubric}
</rubric>

Give your verdict."""

TYPED = """
The assistant's typed answer (JSON):
<typed_answer>
{typed}
</typed_answer>
"""
