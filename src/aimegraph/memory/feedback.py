"""A user's verdict on a run: a rating (1 to 5) and a note, kept in the run's store
beside its episodes (namespace ``("aimegraph", <scope>, "feedback")``, one record per
run: the key is its thread and goal, as the run's own episode's is).

A low rating (``LESSON_BELOW``) or a correction (a note on a run rated below 5 that
says what was wrong) also becomes a lesson in the scope's lessons, marked
``source="user"``: the planner of the next similar goal recalls it with the engine's
own lessons and episodes, and :func:`aimegraph.memory.episodes.rank_items` puts it
first, so the user's verdict outranks the engine's for that goal. Rated runs are
also a GEPA trainset (:mod:`aimegraph.eval.trainset`, ``optimize --from-feedback``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

from langgraph.store.base import BaseStore
from pydantic import BaseModel, Field

from aimegraph.memory.episodes import LESSONS, Lesson, episode_key, namespace, run_attempt

__all__ = [
    "FEEDBACK",
    "LESSON_BELOW",
    "Feedback",
    "feedback_lesson",
    "rated_runs",
    "record_feedback",
]

FEEDBACK = "feedback"
LESSON_BELOW = 3
"""A rating at or below this is a lesson even without a note."""
_SCAN = 10_000  # rated runs read per scope for a trainset


class Feedback(BaseModel):
    """A user's verdict on one run of a thread (its goal, how it ended, its answer)."""

    thread_id: str
    goal: str
    rating: int = Field(ge=1, le=5)
    note: str = ""
    status: str = ""
    answer: str = ""
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat())

    @property
    def score(self) -> float:
        """The rating on GEPA's scale: 1 is 0.0, 5 is 1.0."""
        return (self.rating - 1) / 4


def feedback_key(thread_id: str, goal: str) -> str:
    return episode_key(thread_id, FEEDBACK, run_attempt(goal))


def feedback_lesson(feedback: Feedback) -> Lesson | None:
    """The lesson a verdict teaches, or None for a good rating without a correction."""
    correction = feedback.note.strip() if feedback.rating < 5 else ""
    if feedback.rating > LESSON_BELOW and not correction:
        return None
    said = f": {correction}" if correction else " (no note)"
    return Lesson(
        goal=feedback.goal,
        task_id=FEEDBACK,
        title=feedback.goal[:120],
        lesson=f"a user rated this run {feedback.rating}/5{said}",
        thread_id=feedback.thread_id,
        source="user",
        rating=feedback.rating,
    )


def record_feedback(store: BaseStore, scope: str, feedback: Feedback) -> Lesson | None:
    """Store ``feedback`` (replacing an earlier verdict on the same run) and the lesson
    it teaches, if any (an earlier lesson of that run is dropped when it teaches none
    now); returns the lesson."""
    key = feedback_key(feedback.thread_id, feedback.goal)
    store.put(namespace(scope, FEEDBACK), key, feedback.model_dump(mode="json"))
    lesson = feedback_lesson(feedback)
    if lesson is None:
        store.delete(namespace(scope, LESSONS), key)
    else:
        store.put(namespace(scope, LESSONS), key, lesson.model_dump(mode="json"))
    return lesson


def rated_runs(store: BaseStore, scope: str) -> Iterator[Feedback]:
    """Every verdict of ``scope``, oldest first."""
    items = store.search(namespace(scope, FEEDBACK), limit=_SCAN)
    for item in sorted(items, key=lambda i: i.created_at):
        yield Feedback.model_validate(item.value)
