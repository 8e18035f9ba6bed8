"""How the earlier turns of a conversation appear in a new run's prompts."""

VIEW = """
Earlier in this conversation (oldest first; the request may refer to it):
<conversation>
{turns}
</conversation>
"""

TURN = "User: {question}\nReply: {reply}"

ARTIFACTS = "\nArtifacts: {artifacts}"

LEFT_OPEN = "\nLeft open: {items}"

DIGEST = "In brief, {count} earlier turn(s):\n{lines}"

DIGEST_LINE = "- asked: {question} | replied: {answer}"

OMITTED = "({count} older turn(s) left out)"

NO_QUESTION = "(not recorded)"

NO_ANSWER = "(no reply)"

RUN_OUTCOME = "the run ended {status}: {reason}"
