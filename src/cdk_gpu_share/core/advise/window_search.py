"""The search of an advice with time windows: the best static advice, then per window.

1. **Static.** The search of :mod:`~cdk_gpu_share.core.advise.search` on the teams' own values
   (every window holding them), with :data:`STATIC_SHARE` of the budgets: the capacity, each
   team's sharing and its values at every hour.
2. **Per window.** From that answer, a local search over the values of each window the advice
   may use and over the teams' own values (the rest of the week): a team's guarantee a step up
   or down, 1, 2 or 4 steps moved between two teams in one window, a borrow limit one rung
   (:func:`~cdk_gpu_share.core.advise.windows.window_moves`); each batch of moves simulated in
   full (the replay reads the values in force at each instant, and judges the owed wait against
   the entitlement), the best replacing the incumbent when it ranks better, until none does or
   the budget is spent. The teams with an unmet objective are moved first.

Candidates rank as in the static search, the fields changed counting each window's values too,
the last tie-break ordering the windows by name: the answer is the same with any executor.
The static answer's figures are kept (:attr:`WindowAdvice.static`), to show what the windows
bring.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cdk_gpu_share.core.advise.evaluate import Evaluation
from cdk_gpu_share.core.advise.search import Advice, Search
from cdk_gpu_share.core.advise.windows import WindowedCandidate, lifted, window_changes, window_moves, window_order

__all__ = ["STATIC_SHARE", "WindowAdvice", "WindowSearch"]

#: The share of the budgets (simulations and jobs) the static search may take; the windows' local
#: search has the rest.
STATIC_SHARE = 0.5


@dataclass
class WindowAdvice(Advice):
    """An :class:`~cdk_gpu_share.core.advise.search.Advice` with windows: also the static answer's
    full simulation and the windows' names (all of the scenario's, and those the advice may use)."""

    static: Evaluation | None = None
    window_names: tuple[str, ...] = ()
    allowed: tuple[str, ...] = ()
    #: The windows as the scenario declares them (``name``, ``days``, ``start``, ``end``, ``timezone``).
    declared: tuple[Mapping[str, Any], ...] = ()
    #: The clock time of the trace's second 0 (ISO-8601).
    origin: str = ""
    #: The week (from the Monday 00:00 UTC before the origin): each instant a window opens or the
    #: base comes back, ``{"at": ISO-8601, "window": name or None}``.
    timeline: tuple[Mapping[str, Any], ...] = ()


class WindowSearch(Search):
    """One advice with windows: ``run()`` returns a :class:`WindowAdvice`. ``window_names``: the
    scenario's windows in order; ``allowed``: the indices of those the advice may give values in."""

    def __init__(self, *args: Any, window_names: Sequence[str], allowed: Sequence[int], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.window_names = tuple(window_names)
        self.allowed = tuple(allowed)

    def rank(self, ev: Evaluation) -> tuple:
        """The static rank with each window's changed values counted, the windows ordered last."""
        head = super().rank(ev)
        extra = window_changes(ev.candidate, self.space.input)
        return (*head[:-2], head[-2] + extra, head[-1],
                window_order(ev.candidate, self.window_names, self.space.names, len(self.window_names)))

    def run(self) -> WindowAdvice:
        budget, job_budget = self.budget, self.job_budget
        self.budget, self.job_budget = int(budget * STATIC_SHARE), int(job_budget * STATIC_SHARE)
        try:
            static = super().run()
        finally:
            self.budget, self.job_budget = budget, job_budget
        self.cut = 0  # the static share's end is not the advice's
        start = lifted(static.best.candidate, len(self.window_names))
        self.cache[start] = replace(static.best, candidate=start)  # the same scenario: the same replay
        best = self.climb_windows(self.cache[start])
        done = self._confirm(best, static.frontier, static.private_sizing, static.bounds)
        return WindowAdvice(**{**vars(done), "simulations": self.simulations, "jobs_simulated": self.jobs_simulated},
                            static=static.best, window_names=self.window_names,
                            allowed=tuple(self.window_names[k] for k in self.allowed))

    def climb_windows(self, best: Evaluation) -> Evaluation:
        """Best-improvement local search over the windows' and the base's values from ``best``."""
        slots: list[int | None] = [*self.allowed, None]
        while self.room() > 0:
            self.phase = "windows"
            candidate = best.candidate
            assert isinstance(candidate, WindowedCandidate)
            moves = window_moves(self.space, candidate, slots, self._focus(best), limit=self.room() + len(self.cache))
            evaluations = self.evaluate(moves, self._limits(best))
            if not evaluations:
                break
            challenger = min(evaluations, key=self.rank)
            if self.rank(challenger) >= self.rank(best):
                break
            best = challenger
        return best
