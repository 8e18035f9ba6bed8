"""The statistics of a report: pass@k, pass^k, intervals and the paired test.

- **pass@k** (Chen et al., 2021): the chance that at least one of k rollouts of a
  task passes, estimated without bias from n >= k rollouts of which c passed:
  ``1 - C(n-c, k) / C(n, k)``.
- **pass^k** (Yao et al., tau-bench, 2024): the chance that all k pass:
  ``C(c, k) / C(n, k)``. pass@1 = pass^1 = c / n.
- A suite's score is the mean over its tasks. Rollouts of one task are not
  independent samples, the tasks are: the 95% interval is the Wilson score
  interval of that mean over the number of tasks (exact for one rollout per task,
  a close and never degenerate approximation for fractions; an interval on 5
  tasks is wide, as it should be).
- Two systems on the same tasks are compared pairwise: the mean per-task
  difference with a normal interval, and the exact two-sided sign test over the
  tasks where they differ (McNemar's test when each task is one rollout).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["PairedResult", "pass_at_k", "pass_hat_k", "mean", "paired", "wilson"]

Z95 = 1.959963984540054


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``c`` passes in ``n`` rollouts (``n >= k``)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: the chance that k rollouts drawn from the n all pass."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass^k needs 0 <= c <= n and 1 <= k <= n; got n={n} c={c} k={k}")
    return math.comb(c, k) / math.comb(n, k)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def wilson(p: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``p`` measured on ``n`` samples."""
    if n <= 0:
        return 0.0, 1.0
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class PairedResult:
    """A against B on the tasks both ran: mean of (A - B) per task with its 95%
    interval, how many tasks A did better, worse and the same on, and the sign
    test's two-sided p-value."""

    tasks: int
    mean_difference: float
    interval: tuple[float, float]
    a_better: int
    b_better: int
    ties: int
    p_value: float


def paired(a: Sequence[float], b: Sequence[float]) -> PairedResult:
    """Compare per-task scores ``a`` and ``b`` (same tasks, same order)."""
    if len(a) != len(b):
        raise ValueError("paired scores need the same tasks")
    differences = [x - y for x, y in zip(a, b, strict=True)]
    n = len(differences)
    centre = mean(differences)
    if n > 1:
        variance = sum((d - centre) ** 2 for d in differences) / (n - 1)
        half = Z95 * math.sqrt(variance / n)
    else:
        half = math.inf if n else 0.0
    better = sum(d > 0 for d in differences)
    worse = sum(d < 0 for d in differences)
    return PairedResult(
        tasks=n,
        mean_difference=centre,
        interval=(centre - half, centre + half),
        a_better=better,
        b_better=worse,
        ties=n - better - worse,
        p_value=sign_test(better, worse),
    )


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided sign test: how likely a split at least this uneven is when
    either side is equally likely to win each task."""
    trials = wins + losses
    if trials == 0:
        return 1.0
    tail = sum(math.comb(trials, i) for i in range(min(wins, losses) + 1)) / 2**trials
    return min(1.0, 2 * tail)
