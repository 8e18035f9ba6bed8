"""Team prompts: a member's brief (appended to its task message), the lead's split and
the broadcast merge. The ``<member ...>`` tag lets transcripts and scripted models
tell whose turn it is."""

MEMBER = """
<member name="{member}" turn="{turn}" mode="{mode}">
You are {member}, a member of a team ({team}) working on this task together.
{context}</member>
"""

RESULT = """<result member="{member}" status="{status}">
{summary}
{artifacts}</result>
"""

SEQUENTIAL = """\
The team works in order: {order}. You are step {position} of {count}{round}.
{handover}"""

SEQUENTIAL_FIRST = "You start. Hand over a complete result for the next member to build on.\n"

SEQUENTIAL_HANDOVER = """\
The previous member handed over:
{result}
Build on it: check, improve or complete it. Submit the whole result (not only your
changes), with status "failed" and the reason if it cannot be made right. When the
previous member failed, do its part as well as yours.
"""

SEQUENTIAL_AGAIN = " (round {round}: the last round ended in a failure, shown below)"

JOINT = """\
The team talks in turns ({order}) until a proposal stands that no other member
objects to. The conversation so far:
{conversation}
Take your turn: submit_result with status "completed" and the artifact `stance` set to
"propose" (your full result in the summary), "agree" (the current proposal is right
as it stands) or "object" (say what is wrong in the summary).
"""

JOINT_EMPTY = "(nothing yet: you open the discussion with a proposal)\n"

JOINT_TURN = """<turn member="{member}" stance="{stance}">
{summary}
</turn>
"""

PART = """\
{lead} leads the team and gave you this part of the task:
{instruction}
Do this part only and submit its result.
"""

INTEGRATE = """\
You lead the team. Your members worked on parts of the task:
{results}
Integrate their results into the task's result: check them, do what is missing or
failed yourself, and submit the whole result.
"""

ALONE = """\
You lead the team but could not split the task ({reason}). Do the whole task yourself.
"""

BROADCAST = """\
Every member does this same task on its own; the results are then compared and
voted on. Work independently. Put your final answer, in as few words as possible,
in the artifact `answer`.
"""

LEAD_SYSTEM = """\
# Role: team_lead
You lead a team of agents on one task. Split the task into parts and give each part
to the member best suited to it (at most one part per member; leave out members
you do not need). Each instruction must say exactly what to do and hand back.
You will integrate their results yourself afterwards.

Your members:
{members}
"""

LEAD_TASK = """\
Overall goal (for context): {goal}

<task id="{task_id}">
Title: {title}
Description: {description}
Done when: {criteria}
</task>
{previous}
Write the parts now."""

LEAD_PREVIOUS = """
Parts done so far (give failed parts again, differently, or to another member):
{results}"""

MERGE_SYSTEM = """\
# Role: team_merge
Several team members did the same task independently and did not agree. Merge their
results into the one result that is best supported: prefer what several members
found, check figures against each other, and say in the summary where they differ.
List the members whose results agree with the merged one.
"""

MERGE_TASK = """\
<task id="{task_id}">
Title: {title}
Description: {description}
</task>

The members' results:
{results}
Merge them now."""

SPEAKER_SYSTEM = """\
# Role: team_speaker
You moderate a team's discussion of one task. Name the member who should speak next:
the one whose expertise the discussion needs now, or one who has not yet answered the
latest proposal (the discussion ends when every other member has answered it without
objecting).

The members:
{members}
"""

SPEAKER_TASK = """\
<task id="{task_id}">
Title: {title}
Description: {description}
</task>

The conversation so far:
{conversation}
In turn order, {default} would speak next. Name the next speaker."""
