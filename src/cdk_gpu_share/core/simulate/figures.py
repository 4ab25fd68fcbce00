"""A team's figures in a simulated run, and the percentile every figure of the product uses.

The run's state (:mod:`~cdk_gpu_share.core.simulate.state`) fills a :class:`TeamResult` as
events happen and the accounting (:mod:`~cdk_gpu_share.core.simulate.accounting`) reports it:
both import it from here, below them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cdk_gpu_share.core.configuration.objectives import FIT_WAIT_KEYS, PERCENTILES
from cdk_gpu_share.core.simulate.inputs import _num

__all__ = ["TeamResult", "nearest_rank"]


def nearest_rank(values: Sequence[float], percent: int) -> float:
    """The nearest-rank percentile: the value at 1-based position ceil(percent/100 * n)
    of the values in ascending order; 0 when there are none."""
    n = len(values)
    if n == 0:
        return 0
    ordered = sorted(values)
    rank = max(1, -(-percent * n // 100))
    return ordered[rank - 1]


@dataclass
class TeamResult:
    """One team's figures in a run; :meth:`to_dict` is its entry under ``teams`` in the JSON."""

    name: str
    guarantee: float
    #: E, when the team was promised other than its guarantee (None: E = G).
    entitlement: float | None = None
    jobs: int = 0
    waits: list[float] = field(default_factory=list)
    #: The owed waits (:mod:`~cdk_gpu_share.core.simulate.owed`) of the jobs that were owed at all.
    reclaim_waits: list[float] = field(default_factory=list)
    gpu_seconds: float = 0.0
    borrowed_gpu_seconds: float = 0.0
    preempted: int = 0
    #: GPU-seconds of work the team's jobs threw away when stopped.
    lost_gpu_seconds: float = 0.0
    #: The waits of the team's jobs that fit its entitlement (gpus <= E), for the
    #: ``no_worse_than_private`` objective.
    fit_waits: list[float] = field(default_factory=list)

    def fit_wait_percentiles(self) -> dict[str, float | int]:
        """``{"p50", "p95", "p99"}``: nearest-rank percentiles of :attr:`fit_waits` (0 when none)."""
        return {q: _num(nearest_rank(self.fit_waits, int(q[1:]))) for q in PERCENTILES}

    def figures(self) -> dict[str, Any]:
        """:meth:`to_dict` and the percentiles of the waits of the jobs that fit the
        entitlement (``fit_wait_p50_s`` ...): what :func:`cdk_gpu_share.core.configuration.objectives.evaluate` reads."""
        fit = self.fit_wait_percentiles()
        return {**self.to_dict(), **{FIT_WAIT_KEYS[q]: fit[q] for q in PERCENTILES}}

    def to_dict(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "wait_p50_s": _num(nearest_rank(self.waits, 50)),
            "wait_p95_s": _num(nearest_rank(self.waits, 95)),
            "wait_p99_s": _num(nearest_rank(self.waits, 99)),
            # GPU-seconds are JSON floats (1.0e6 in the documented example), waits and counts ints.
            "gpu_seconds": float(self.gpu_seconds),
            "borrowed_gpu_seconds": float(self.borrowed_gpu_seconds),
            "preempted": self.preempted,
            "lost_gpu_seconds": float(self.lost_gpu_seconds),
            "reclaim_wait_p99_s": _num(nearest_rank(self.reclaim_waits, 99)),
        }
