"""The search: from the teams' objectives to the cheapest configuration that meets them.

The space is far too large to visit (4 teams on 64 GPUs: millions of configurations), so
the search uses its structure (``docs/advisor.md`` states what it guarantees and what it
can miss):

1. **Private sizing.** Each team alone in a private cluster (``static``), its guarantee
   raised step by step until its objectives hold (a bisection: its waits fall as its own
   guarantee rises): ``p(T)``. A team whose work must never be stopped can only reserve
   or lend, and then never runs beyond its guarantee: it needs at least ``p(T)``. Every
   team reserving ``p(T)`` meets every objective (each team is exactly its private
   cluster), so ``sum p(T)`` is a capacity known to suffice. The teams' bisections take at
   most :data:`SIZING_SHARE` of the budgets (with many teams, each step simulates every
   team's jobs): where they stop there, ``p(T)`` is the least guarantee found to suffice.
2. **Capacity bounds** (``--fleet size``): at least the largest job and the guarantees of
   the teams that only reserve or lend; at most ``sum p(T)``. The least capacity is
   bisected between them (its first probe at the fluid bound, the trace's GPU-seconds over
   its submit span), each capacity probed as below; a probe's batch of seeds is filled up to
   :data:`FILL_MULTIPLE` with seeds of the probe that follows either way (:meth:`Search._next_seeds`).
3. **Probe at one capacity.** Seeds (the input, every team reserving ``p(T)``, the teams
   sharing with ``p(T)`` scaled to the capacity, the answer at the next larger capacity
   shrunk), then a local search: from the best configuration so far, every move of one
   step that involves a team with an unmet objective (its guarantee up or down, a step
   moved to it or from it, its sharing, its borrow limit one rung), evaluated as one batch;
   the best of the batch replaces the incumbent when it ranks better, until a feasible one
   is found or no move helps.
4. **Scan up** (``--fleet size``): from the least capacity that may do up to the least
   feasible one the bisection found, the grid (5) at each capacity until a split holds. Where
   the budget leaves the grid coarser than the step and none of its splits holds, a climb
   until feasible from its best few splits and the seeds (3) refines it.
5. **The grid.** With up to :data:`GRID_TEAMS` teams, every split of the capacity into
   guarantees on the least multiple of the step whose splits fit :data:`GRID_SHARE` of the
   budget left (``lend`` for a team never to be stopped, else ``lend_and_borrow`` unlimited).
6. **Regret.** At the chosen capacity, a local search over every team's moves (a guarantee
   jumped, 1, 2 or 4 steps moved between any two teams, sharing, borrow limit) from several
   starts: the grid's :data:`GRID_STARTS` best, the seeds, the demand-proportional split and
   the incumbent, best first, each with an equal share of the budget left, ranked by regret
   among feasible configurations, until no move lowers it.

While bisecting, a candidate that misses an objective by more than twice its target
(:data:`PROBE_CAP`) does not help decide whether a capacity suffices: a capacity where
every seed is beyond that is given up at once.

Every candidate of a batch is simulated with the incumbent's figures as limits: the run
stops as soon as the candidate cannot rank better (an objective already further from its
target than the incumbent's worst, or waits and lost work already above its regret).
Batches are built, and their results combined, in a fixed order, so the answer does not
depend on which worker finished first.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from cdk_gpu_share.core.advise.evaluate import Evaluation, Limits, PrivateRef, Study, run_task
from cdk_gpu_share.core.advise.space import Candidate, Choice, Space, changed_fields

__all__ = ["Advice", "Executor", "Search", "Task", "capacity_bounds", "fluid_bound"]

_TOL = 1e-9
#: Most simulations one advice may run before it confirms its answer (two more: the answer's
#: and the input's full simulations): the search stops there with the best it has and says so.
DEFAULT_BUDGET = 4000
#: Most jobs one advice may simulate, each simulation counting its jobs (the whole trace for a
#: candidate, its own jobs for a team alone): with more teams, and so more jobs, each
#: simulation is longer and the search stops after fewer. 10 million: about 1,600 simulations
#: of a 6,000-job trace, 32 of a 310,000-job one (200 teams: about 10 CPU minutes).
DEFAULT_JOB_BUDGET = 10_000_000
#: The most of the job budget one batch of candidates may take: a batch of moves is cut (in a
#: fixed order, the moves of the teams that miss an objective first) so that later batches
#: still have room.
BATCH_SHARE = 0.125
#: With more teams than TRANSFER_TEAMS, the regret phase stops after this many batches (each
#: a simulation of every single-step move of every team).
REGRET_ROUNDS = 4
#: A worst ratio beyond which a candidate does not help the bisection decide whether a
#: capacity suffices: such candidates are refused as soon as their simulation shows it.
PROBE_CAP = 2.0
#: Teams up to which the regret phase also moves a step between two teams (n*(n-1) moves).
TRANSFER_TEAMS = 6
#: The most of the budget (simulations, and of the job budget) the grid of guarantee splits at
#: one capacity may take: its step is the least multiple of ``--step`` that keeps it within.
GRID_SHARE = 0.25
#: Teams up to which the grid is tried at all (beyond, even one level per team is too many splits).
GRID_TEAMS = 8
#: The most of both budgets private sizing may take: a round of its bisection that would pass
#: this share is not run, and each team whose bisection it leaves open keeps the least guarantee
#: found to suffice (with many teams, each round simulates every team's jobs once).
SIZING_SHARE = 0.5
#: How many of the grid's best splits the local search also starts from.
GRID_STARTS = 3
#: A bisection probe's batch is filled with the seeds of the probe that follows, up to a multiple
#: of this many simulations: on two workers a batch of three leaves one idle while the third runs,
#: and a batch filled beyond the next multiple only adds a round (the seeds of the way not taken
#: are spent). A constant, never the number of workers, so that the answer does not depend on it.
FILL_MULTIPLE = 2
#: The most splits of the grid in one batch: each batch is limited by the best of those before
#: it, so that most simulations stop early.
GRID_BATCH = 64

#: What a worker runs (:func:`~cdk_gpu_share.core.advise.evaluate.run_task`): a candidate's
#: evaluation, a private-cluster reference, or a team alone against its objectives.
Task = tuple


class Executor(Protocol):
    """Runs a batch of tasks and returns their results in the same order."""

    def run(self, tasks: Sequence[Task]) -> list[Any]: ...


class InProcess:
    """Run in this process, one task after the other (``runner(study, task)``: by default the advisor's)."""

    def __init__(self, study: Any, runner: Callable[[Any, Any], Any] = run_task):
        self.study = study
        self.runner = runner

    def run(self, tasks: Sequence[Task]) -> list[Any]:
        return [self.runner(self.study, t) for t in tasks]

    def each(self, tasks: Sequence[Task]) -> Iterator[Any]:
        """The results one at a time, in the order of ``tasks``, each as soon as it is known."""
        return (self.runner(self.study, t) for t in tasks)


@dataclass
class Advice:
    """The search's answer: the best configuration (confirmed by a full simulation), the input's
    figures, the frontier (one best configuration per capacity tried), how many simulations it
    took, and the bounds it used."""

    best: Evaluation
    input: Evaluation
    frontier: list[Evaluation]
    simulations: int
    space: Space
    private_sizing: dict[str, float | None]
    bounds: dict[str, float] = field(default_factory=dict)
    #: Each team's entitlement in GPUs (the study's): what its promises were judged against.
    entitlements: Mapping[str, float] = field(default_factory=dict)
    #: What the administrator should know of this answer, a line each (such as: no team has an
    #: objective, or the search stopped at its budget and shows the best found).
    warnings: tuple[str, ...] = ()
    #: Jobs simulated in all (the job budget's unit).
    jobs_simulated: int = 0


def fluid_bound(study: Study) -> float:
    """The trace's GPU-seconds over its submit span: below this a pool falls behind for good."""
    jobs = study.jobs
    if not jobs:
        return 0.0
    span = max(j.submit_time for j in jobs) - min(j.submit_time for j in jobs)
    work = math.fsum(j.gpus * j.duration_s for j in jobs)
    return work / span if span > 0 else max(j.gpus for j in jobs)


def _peak(jobs: Sequence[Any]) -> float:
    """The most GPUs the jobs would hold at once if each started at its submit time."""
    events = sorted([(j.submit_time, 1, j.gpus) for j in jobs] + [(j.submit_time + j.duration_s, 0, -j.gpus) for j in jobs])
    level = peak = 0.0
    for _, _, g in events:
        level += g
        peak = max(peak, level)
    return peak


def capacity_bounds(study: Study, space: Space, sizing: Mapping[str, float | None],
                    floor: Mapping[str, float] | None = None) -> tuple[float, float]:
    """(least, most) capacity the least feasible one lies between (``--fleet size``): at least
    the largest job, the largest entitlement (a pool smaller than a promise is refused), every
    guarantee at its least and the private sizing of the teams that may only reserve or lend
    (``floor``'s, where given: the least each team's private sizing may be when its bisection
    stopped at the budget); at most every team's private sizing (each team reserving it meets
    every objective)."""
    s = space.step
    floor = floor or {}
    fixed = sum(floor.get(n, sizing[n] or 0.0) for n, ns in zip(space.names, space.never_stopped) if ns)
    least = fixed + space.least * sum(1 for ns in space.never_stopped if not ns)  # every guarantee at its least
    promised = _ceil(max(study.entitlements.values(), default=0.0), s)
    low = max(_ceil(max(space.max_job, default=0.0), s), least, promised, s)
    high = max(low, sum((sizing[n] or 0.0) for n in space.names))
    return low, high


def _ceil(x: float, step: float) -> float:
    return math.ceil(x / step - _TOL) * step


def _floor(x: float, step: float) -> float:
    return math.floor(x / step + _TOL) * step


class Search:
    """One advice: ``run()`` returns an :class:`Advice`."""

    def __init__(self, study: Study, space: Space, executor: Executor, *,
                 progress: Callable[[int, int, str], None] | None = None, budget: int = DEFAULT_BUDGET,
                 job_budget: int = DEFAULT_JOB_BUDGET):
        self.study = study
        self.space = space
        self.executor = executor
        self.progress = progress
        self.budget = budget
        self.job_budget = job_budget
        self.simulations = 0
        self.jobs_simulated = 0
        self.cut = 0  # candidates left out of batches for want of budget
        #: The input's full simulation, which the answer prints beside its own: run with the first
        #: batch of candidates (not at the end, alone with the answer's), kept out of the cache.
        self.input_full: Evaluation | None = None
        self.phase = "private sizing"
        #: The simulation count the current phase may not pass (None: only the budgets bound it).
        self.ceiling: int | None = None
        self.cache: dict[Candidate, Evaluation] = {}
        self.private: dict[tuple[str, float], PrivateRef] = {}
        #: The teams whose private sizing stopped at the budget: the least guarantee that may suffice.
        self.sizing_floor: dict[str, float] = {}
        self.needs_private = tuple(bool(study.objectives.get(n) and study.objectives[n].needs_private)
                                   for n in space.names)

    # -- evaluation ----------------------------------------------------------

    def _batch(self, tasks: list[Task]) -> list[Any]:
        """Run ``tasks`` (each one simulation), counting them and the jobs they simulate."""
        if not tasks:
            return []
        out = self.executor.run(tasks)
        self.simulations += len(tasks)
        self.jobs_simulated += sum(self._jobs_of(t) for t in tasks)
        if self.progress is not None:
            done = max(self.simulations / self.budget, self.jobs_simulated / self.job_budget)
            self.progress(round(done * self.budget), self.budget, self.phase)
        return out

    def _jobs_of(self, task: Task) -> int:
        """The jobs one task simulates: the whole trace, or one team's jobs alone."""
        return len(self.study.jobs) if task[0] == "evaluate" else len(self.study.team_jobs(task[1]))

    def room(self, *, share: bool = True) -> int:
        """How many candidates the next batch may simulate: what both budgets have left, and at
        most :data:`BATCH_SHARE` of the job budget; with ``share``, also no more than the current
        phase's share (:attr:`ceiling`, a number of simulations)."""
        per = max(1, len(self.study.jobs))
        left = min(self.budget - self.simulations, (self.job_budget - self.jobs_simulated) // per,
                   max(1, int(self.job_budget * BATCH_SHARE) // per))
        if share and self.ceiling is not None:
            left = min(left, self.ceiling - self.simulations)
        return max(0, left)

    def affordable(self) -> int:
        """Simulations both budgets have left (whole-trace ones)."""
        per = max(1, len(self.study.jobs))
        return max(0, min(self.budget - self.simulations, (self.job_budget - self.jobs_simulated) // per))

    def _need_privates(self, candidates: Sequence[Candidate]) -> None:
        """The private references the candidates' teams need and the cache lacks, as one batch.
        A team's reference is a private cluster of its entitlement, which no candidate changes:
        one per team, whatever guarantee a candidate gives it."""
        if not candidates:
            return
        missing = self._missing_privates()
        for key, ref in zip(missing, self._batch([("private", n, g) for n, g in missing])):
            self.private[key] = ref

    def _missing_privates(self) -> list[tuple[str, float]]:
        return [(n, self.study.entitlements[n]) for n, need in zip(self.space.names, self.needs_private)
                if need and (n, self.study.entitlements[n]) not in self.private]

    def _privates(self, c: Candidate) -> dict[str, PrivateRef]:
        self._need_privates([c])
        return {n: self.private[(n, self.study.entitlements[n])]
                for n, need in zip(self.space.names, self.needs_private) if need}

    def _unknown(self, candidates: Iterable[Candidate], limits: Limits) -> dict[Candidate, None]:
        """Those of ``candidates`` the cache cannot answer within ``limits``, in order, each once
        (a hash, not a list search)."""
        wanted: dict[Candidate, None] = {}
        for c in candidates:
            known = self.cache.get(c)
            if known is None or not (known.complete or known.limits.covers(limits)):
                wanted[c] = None
        return wanted

    def evaluate(self, candidates: Sequence[Candidate], limits: Limits | None = None,
                 spare: Sequence[Candidate] = ()) -> list[Evaluation]:
        """The evaluations of ``candidates`` (in their order), from the cache when it answers;
        those the budget leaves no room for are left out. ``spare``: candidates a later batch
        is likely to ask for (with the same limits), in their order, only beside some of
        ``candidates``, never counted as cut, and only as many as fill the batch up to a multiple
        of :data:`FILL_MULTIPLE`: work for a worker the batch would leave idle."""
        limits = limits or Limits()
        wanted = self._unknown(candidates, limits)
        todo = list(wanted)
        room = max(0, self.room() - (self.input_full is None))  # the input's simulation goes with the first batch
        if self.input_full is None and self.room() >= 1:
            # A batch share of one simulation (a trace above an eighth of the job budget) would
            # leave the first batch no room beside the input, and every later one none either.
            room = max(room, min(1, self.affordable() - 1))
        if len(todo) > room:  # the budget decides, in the batch's fixed order
            if len(todo) > self.room(share=False) - (self.input_full is None):
                self.cut += len(todo) - room  # the budget itself, not a phase's share of it
            todo = todo[:room]
        if todo and spare:  # up to a multiple of FILL_MULTIPLE simulations, the input's included
            fill = min(room - len(todo), -(len(todo) + (self.input_full is None)) % FILL_MULTIPLE)
            todo += [c for c in self._unknown(spare, limits) if c not in wanted][:max(0, fill)]
        if todo:  # at least one: a batch never holds the input's simulation alone
            self._need_privates(todo)
            tasks = [("evaluate", c, self._privates(c), limits) for c in todo]
            lead: list[Task] = []
            if self.input_full is None:
                given = self.space.input
                lead = [("evaluate", given, self._privates(given), Limits())]
            results = self._batch(lead + tasks)
            if lead:
                self.input_full = results[0]
            for ev in results[len(lead):]:
                old = self.cache.get(ev.candidate)
                if old is None or not old.complete:
                    self.cache[ev.candidate] = ev
        return [self.cache[c] for c in candidates if c in self.cache]

    def rank(self, ev: Evaluation) -> tuple:
        """The documented order (lower first): feasible; least capacity (``--fleet size``); least
        regret; fewest changed fields; the fixed order. Infeasible ones after, by worst ratio
        (then how far beyond their targets the unmet objectives are, the search's guide)."""
        cap = ev.candidate.capacity if self.space.fleet == "size" else 0.0
        tail = (changed_fields(ev.candidate, self.space.input, fleet=self.space.fleet), self.space.order(ev.candidate))
        if ev.feasible:
            return (0, cap, 0.0, 0.0, ev.regret_gpu_hours, *tail)
        return (1, ev.worst_ratio, ev.excess, cap, ev.regret_gpu_hours, *tail)

    def _limits(self, best: Evaluation, cap: float = math.inf) -> Limits:
        """What a candidate must not exceed to rank better than ``best`` (and than ``cap``)."""
        if best.feasible:
            return Limits(worst_ratio=1.0, regret_gpu_hours=best.regret_gpu_hours)
        return Limits(worst_ratio=min(max(1.0, best.worst_ratio), cap))

    # -- private sizing ------------------------------------------------------

    def private_sizing(self) -> dict[str, float | None]:
        """Per team, the least guarantee (a multiple of the step) at which, alone and ``static``,
        all its objectives hold (None: not even with all its jobs running at once). The teams'
        bisections advance together, one batch a step."""
        s = self.space.step
        out: dict[str, float | None] = {}
        bounds: dict[str, list[float]] = {}  # team -> [low, high], high known to suffice
        first: list[tuple[str, float]] = []
        for i, name in enumerate(self.space.names):
            jobs = self.study.team_jobs(name)
            low = max(_ceil(self.space.max_job[i], s), self.space.least)
            objectives = self.study.objectives.get(name)
            if not jobs or objectives is None or not objectives.targets:
                out[name] = low
                continue
            high = max(low, _ceil(_peak(jobs), s))
            bounds[name] = [low, high]
            first.append((name, high))
        # The private references (a cluster of each entitlement, fixed for the whole search) go
        # in the same batch: one fewer batch of a few simulations for the workers to wait on.
        refs = self._missing_privates()
        found = self._batch([("alone", n, g) for n, g in first] + [("private", n, g) for n, g in refs])
        for key, ref in zip(refs, found[len(first):]):
            self.private[key] = ref
        for (name, _), ok in zip(first, found[:len(first)]):
            if not ok:
                out[name] = None
                del bounds[name]
        while True:  # bisection on the multiples of the step
            open_ = [(n, lo + _floor((hi - lo) / 2, s)) for n, (lo, hi) in bounds.items() if hi - lo > _TOL]
            if not open_:
                break
            if not self._sizing_fits(open_):  # each team keeps the guarantee known to suffice
                self.cut += len(open_)
                self.sizing_floor = {n: lo for n, (lo, hi) in bounds.items() if hi - lo > _TOL}
                break
            for (name, mid), ok in zip(open_, self._batch([("alone", n, g) for n, g in open_])):
                if ok:
                    bounds[name][1] = mid
                else:
                    bounds[name][0] = mid + s
        for name, (_, high) in bounds.items():
            out[name] = high
        return {n: out[n] for n in self.space.names}

    def _sizing_fits(self, batch: Sequence[tuple[str, float]]) -> bool:
        """Whether a round of private sizing (``batch``: each team alone at a guarantee) leaves
        the search at least :data:`SIZING_SHARE` of both budgets: with many teams each round is
        a simulation of every team's jobs, and the rounds would otherwise take the budget the
        search needs."""
        jobs = sum(len(self.study.team_jobs(n)) for n, _ in batch)
        return (self.simulations + len(batch) <= SIZING_SHARE * self.budget
                and self.jobs_simulated + jobs <= SIZING_SHARE * self.job_budget)

    # -- seeds and moves -----------------------------------------------------

    def _aligned_input(self, capacity: float) -> Candidate:
        """The input with its guarantees on the step, scaled to ``capacity`` when it differs."""
        was = self.space.input
        scale = capacity / was.capacity if was.capacity > 0 else 1.0
        choices = []
        for i, ch in enumerate(was.choices):
            sharing = ch.sharing
            if self.space.never_stopped[i] and sharing == "lend_and_borrow":
                sharing = "lend"
            choices.append(Choice(max(_floor(ch.guarantee * min(scale, 1.0), self.space.step), self.space.least),
                                  sharing, ch.percent if sharing == "lend_and_borrow" else None))
        return self._shrunk(Candidate(capacity, tuple(choices)), capacity)

    def _seeds(self, capacity: float, sizing: Mapping[str, float | None],
               warm: Sequence[Candidate]) -> list[Candidate]:
        s = self.space.step
        sized = [_ceil(x if x is not None else self.space.max_job[i], s)
                 for i, x in enumerate(sizing[n] for n in self.space.names)]
        seeds = [self._aligned_input(capacity)]
        seeds.append(Candidate(capacity, tuple(Choice(g, "reserve") for g in sized)))
        fixed = sum(g for g, ns in zip(sized, self.space.never_stopped) if ns)
        rest = sum(g for g, ns in zip(sized, self.space.never_stopped) if not ns)
        scale = min(1.0, (capacity - fixed) / rest) if rest > 0 and capacity > fixed else 0.0
        seeds.append(Candidate(capacity, tuple(
            Choice(g, "lend") if ns else Choice(max(_floor(g * scale, s), self.space.least), "lend_and_borrow",
                                                self.space.percents[-1])
            for g, ns in zip(sized, self.space.never_stopped))))
        seeds[-1] = self._shrunk(seeds[-1], capacity)
        for c in warm:
            seeds.append(self._shrunk(c, capacity))
        return [c for c in dict.fromkeys(seeds) if self.space.runnable(c)]

    def _shrunk(self, c: Candidate, capacity: float) -> Candidate:
        """``c`` at ``capacity``: a step taken from the largest guarantee of a team that may
        borrow (then of any team), none below the least, until the guarantees fit."""
        c = replace(c, capacity=capacity)
        floor = self.space.least + self.space.step - _TOL
        while c.total > capacity + _TOL:
            order = sorted(range(self.space.n), key=lambda i: (self.space.never_stopped[i], -c.choices[i].guarantee, i))
            i = next((k for k in order if c.choices[k].guarantee >= floor), None)
            if i is None:
                break
            ch = c.choices[i]
            c = c.with_choice(i, replace(ch, guarantee=ch.guarantee - self.space.step))
        return c

    def _focus(self, ev: Evaluation) -> list[int]:
        """The teams whose moves may help: those with an unmet objective (all when feasible)."""
        if ev.feasible:
            return list(range(self.space.n))
        unmet = [i for i, n in enumerate(self.space.names)
                 if any(not e["met"] for e in ev.objectives.get(n, {}).values())]
        return unmet or list(range(self.space.n))

    def _demand_split(self, capacity: float) -> Candidate:
        """Guarantees in proportion to each team's GPU-seconds in the trace (a team that must
        never be stopped lends, and is given at least its largest job), fitted to ``capacity``."""
        s, space = self.space.step, self.space
        work = [math.fsum(j.gpus * j.duration_s for j in self.study.team_jobs(n)) for n in space.names]
        total = math.fsum(work)
        choices = []
        for i, w in enumerate(work):
            g = max(_floor(capacity * w / total, s) if total > 0 else 0.0, space.least)
            if space.never_stopped[i]:
                g = max(g, _ceil(space.max_job[i], s))
            choices.append(space.grid_sharing(i, g))
        return self._shrunk(Candidate(capacity, tuple(choices)), capacity)

    # -- the grid ------------------------------------------------------------

    def grid_step(self, capacity: float) -> float | None:
        """The grid's step at ``capacity``: the least multiple of ``--step`` whose splits take at
        most :data:`GRID_SHARE` of what the budgets have left (None: none does, or the teams are
        more than :data:`GRID_TEAMS`)."""
        if self.space.n > GRID_TEAMS:
            return None
        allowance = int(GRID_SHARE * self.affordable())
        s = self.space.step
        k = 1
        while k * s <= capacity + _TOL:
            if self.space.grid_count(capacity, k * s) <= allowance:
                return k * s
            k += 1
        return None

    def grid(self, capacity: float, best: Evaluation | None, *, feasible_only: bool = False) -> list[Evaluation]:
        """Every split of the grid at ``capacity`` (see :meth:`Space.grid`), in batches of at most
        :data:`GRID_BATCH`, each limited by the best found so far (``best`` to begin with); the
        complete evaluations, best first. ``feasible_only``: only whether a split meets every
        objective matters, and the grid stops at the first batch that finds one."""
        step = self.grid_step(capacity)
        if step is None:
            return []
        self.phase = f"grid at {capacity:g} GPUs, step {step:g}"
        splits = self.space.grid(capacity, step)
        found: list[Evaluation] = []
        while True:
            chunk = list(itertools.islice(splits, min(GRID_BATCH, self.room())))
            if not chunk:
                break
            # Only whether a split holds matters, but those within PROBE_CAP of their targets are
            # simulated to their end: the best of them are where a refinement starts.
            limits = Limits(worst_ratio=PROBE_CAP) if feasible_only else (self._limits(best) if best else Limits())
            done = [e for e in self.evaluate(chunk, limits) if e.complete]
            found += done
            if done:
                top = min(done, key=self.rank)
                if best is None or self.rank(top) < self.rank(best):
                    best = top
            if feasible_only and best is not None and best.feasible:
                break
        return sorted(found, key=self.rank)

    def best_at(self, capacity: float, sizing: Mapping[str, float | None], warm: Sequence[Candidate] = (),
                incumbent: Evaluation | None = None) -> Evaluation:
        """The least-regret configuration found at ``capacity``: the grid, then a local search from
        each of several starts (the grid's best few, the input, the demand-proportional split, the
        private sizing's proportions, ``warm`` and ``incumbent``), each start given an equal
        share of what the budget has left, the best first."""
        grid = self.grid(capacity, incumbent)
        starts = [e.candidate for e in grid[:GRID_STARTS]] + self._seeds(capacity, sizing, warm)
        starts.append(self._demand_split(capacity))
        if incumbent is not None:
            starts.append(incumbent.candidate)
        starts = [c for c in dict.fromkeys(starts) if self.space.runnable(c)]
        self.phase = f"regret at {capacity:g} GPUs"
        begun = sorted((e for e in self.evaluate(starts) if e.complete), key=self.rank)
        if incumbent is not None and incumbent.complete:
            begun = sorted({e.candidate: e for e in [incumbent, *begun]}.values(), key=self.rank)
        if not begun:
            return incumbent if incumbent is not None else Evaluation(starts[0] if starts else self.space.input,
                                                                       complete=False, reason="no budget left")
        many = self.space.n > TRANSFER_TEAMS
        if many:  # one start: each round of moves of many teams is a large batch
            begun = begun[:1]
        best = begun[0]
        for k, start in enumerate(begun):
            self.ceiling = self.simulations + max(1, self.affordable() // (len(begun) - k))
            try:
                found = self._climb(start, until_feasible=False, rounds=REGRET_ROUNDS if many else None)
            finally:
                self.ceiling = None
            if self.rank(found) < self.rank(best):
                best = found
            if self.room() == 0:
                break
        return best

    # -- local search --------------------------------------------------------

    def _climb(self, best: Evaluation, *, until_feasible: bool, cap: float = math.inf,
               rounds: int | None = None) -> Evaluation:
        """Best-improvement local search from ``best`` (see the module docstring); candidates
        whose worst ratio is above ``cap`` are of no use; at most ``rounds`` batches (None: no limit)."""
        while self.room() > 0 and (rounds is None or rounds > 0):
            rounds = None if rounds is None else rounds - 1
            if until_feasible and best.feasible:
                break
            small = self.space.n <= TRANSFER_TEAMS
            # Generated only as far as the batch has room: never every move of many teams.
            moves = self.space.neighbours(best.candidate, self._focus(best), transfers=not best.feasible or small,
                                          jumps=small, limit=self.room() + len(self.cache))
            evaluations = self.evaluate(moves, self._limits(best, cap))
            if not evaluations:
                break
            challenger = min(evaluations, key=self.rank)
            if self.rank(challenger) >= self.rank(best):
                break
            best = challenger
        return best

    def probe(self, capacity: float, sizing: Mapping[str, float | None],
              warm: Sequence[Candidate] = (), *, cap: float = math.inf, spare: Sequence[Candidate] = ()) -> Evaluation:
        """The best configuration found at ``capacity``, searching until one is feasible.

        ``cap``: a worst ratio beyond which no candidate is of use (the bisection's probes,
        which only ask "is this capacity enough?"). When every seed is beyond it, the capacity
        is given up at once, its frontier figures those of the best of its seeds' full
        simulations. ``spare``: the seeds of the probes that may follow, simulated beside these
        as far as they fill the batch up to a multiple of :data:`FILL_MULTIPLE` (:meth:`evaluate`).
        """
        self.phase = f"capacity {capacity:g}"
        seeds = self._seeds(capacity, sizing, warm)
        if not seeds:
            seeds = self.space.neighbours(self._aligned_input(capacity), range(self.space.n), limit=1)
        if not seeds:
            return Evaluation(Candidate(capacity, self.space.input.choices), complete=False, reason="nothing runs")
        limits = Limits(worst_ratio=cap) if math.isfinite(cap) else None
        found = [e for e in self.evaluate(seeds, limits, spare) if e.complete]
        if not found:  # hopeless here: the seeds' full figures, for the frontier
            full = [e for e in self.evaluate(seeds) if e.complete]
            return min(full, key=self.rank) if full else Evaluation(seeds[0], complete=False, reason="no budget left")
        return self._climb(min(found, key=self.rank), until_feasible=True, cap=cap)

    # -- the whole advice ----------------------------------------------------

    def run(self) -> Advice:
        sizing = self.private_sizing()
        frontier: dict[float, Evaluation] = {}
        bounds: dict[str, float] = {"fluid_gpus": fluid_bound(self.study),
                                    "private_gpus": sum(v for v in sizing.values() if v is not None)}
        if self.space.fleet == "size":
            low, high = capacity_bounds(self.study, self.space, sizing, self.sizing_floor)
            bounds.update(low_gpus=low, high_gpus=high)
            least = low  # the bisection raises low past the capacities its probes gave up
            best = frontier[high] = self.probe(high, sizing)
            hi_best = best
            # The fluid bound is the first guess, not a bound: a percentile objective lets some
            # jobs wait as long as they must, so a pool below the mean demand may still do.
            guess = min(max(_ceil(bounds["fluid_gpus"], self.space.step), low), high - self.space.step)
            while best.feasible and low < high - _TOL and self.room() > 0:
                mid = guess if guess >= low else self._middle(low, high)
                guess = -math.inf
                ev = frontier[mid] = self.probe(mid, sizing, warm=[hi_best.candidate], cap=PROBE_CAP,
                                                spare=self._next_seeds(low, mid, high, sizing, hi_best.candidate))
                if ev.feasible:
                    high, hi_best = mid, ev
                else:
                    low = mid + self.space.step
            hi_best = self._scan_up(hi_best, least, frontier, sizing)
            best = hi_best if hi_best.feasible else min(self._frontier(frontier), key=self.rank)
        else:
            best = self.probe(self.space.input.capacity, sizing)
        best = self.best_at(best.candidate.capacity, sizing, incumbent=best)
        return self._confirm(best, self._frontier(frontier) if self.space.fleet == "size" else [], sizing, bounds)

    def _middle(self, low: float, high: float) -> float:
        """The bisection's next capacity between ``low`` and ``high`` (a multiple of the step)."""
        return low + _floor((high - low) / 2, self.space.step)

    def _next_seeds(self, low: float, mid: float, high: float, sizing: Mapping[str, float | None],
                    warm: Candidate) -> list[Candidate]:
        """The seeds of the bisection's probe after the one at ``mid``, whichever way it goes (at
        the middle of ``low``..``mid`` - step if ``mid`` suffices, with the warm start it will
        find there still unknown; of ``mid`` + step..``high`` if not, with ``warm``), alternately
        one of each: what the probe at ``mid`` may simulate beside its own seeds."""
        s = self.space.step
        branches = []
        if mid - s > low - _TOL:
            branches.append(self._seeds(self._middle(low, mid), sizing, ()))
        if mid + s < high - _TOL:
            branches.append(self._seeds(self._middle(mid + s, high), sizing, [warm]))
        return [c for pair in itertools.zip_longest(*branches) for c in pair if c is not None]

    def _scan_up(self, best: Evaluation, low: float, frontier: dict[float, Evaluation],
                 sizing: Mapping[str, float | None]) -> Evaluation:
        """From the least capacity that may do up to the least feasible one the bisection found,
        the grid at each capacity (stopped at its first feasible split), refined around its best
        splits where it is coarser than the step (:meth:`_refine`): the bisection assumes a larger
        pool never does worse and its probes search near their seeds only, the grid every split,
        so the answer is never larger than the least capacity where a split of the grid meets
        every objective (waits are not monotone in the capacity)."""
        c = low
        top = best.candidate.capacity - (self.space.step if best.feasible else 0.0)  # the found one's, when feasible
        while c <= top + _TOL and self.room() > 0 and self.grid_step(c) is not None:
            step = self.grid_step(c)
            spent, allowance = self.simulations, int(GRID_SHARE * self.affordable())
            grid = self.grid(c, None, feasible_only=True)
            found = next((e for e in grid if e.feasible), None)
            if found is None and step is not None and step > self.space.step + _TOL:
                found = self._refine(c, grid, allowance - (self.simulations - spent), sizing, [best.candidate])
            if found is not None:
                frontier[c] = found
                return found
            c += self.space.step
        return best

    def _refine(self, capacity: float, grid: Sequence[Evaluation], share: int, sizing: Mapping[str, float | None],
                warm: Sequence[Candidate]) -> Evaluation | None:
        """A configuration at ``capacity`` that meets every objective, searched near the best of a
        grid coarser than the step (``grid``: its complete evaluations, best first), which found
        none. The starts: the grid's :data:`GRID_STARTS` best and the probe's seeds (``warm``: a
        feasible configuration at a larger capacity, shrunk); from the best :data:`GRID_STARTS`
        of those within :data:`PROBE_CAP` of their targets, a climb until feasible (every move of
        a team that misses an objective: its guarantee, a step or a few moved to or from any
        other team, its sharing, its borrow limit), the climbs given at most ``share``
        simulations in all, an equal part each. A split of a finer grid is a few steps from one
        of the coarse grid's, and the climb walks there by the objectives it misses. None: none
        found."""
        self.phase = f"refining the grid at {capacity:g} GPUs"
        end = self.simulations + share
        self.ceiling = end
        try:
            seeds = [e for e in self.evaluate(self._seeds(capacity, sizing, warm), Limits(worst_ratio=PROBE_CAP))
                     if e.complete]
        finally:
            self.ceiling = None
        found = next((e for e in seeds if e.feasible), None)
        if found is not None:
            return found
        starts = sorted({e.candidate: e for e in [*grid[:GRID_STARTS], *seeds]}.values(), key=self.rank)[:GRID_STARTS]
        for k, start in enumerate(starts):
            if self.simulations >= end or self.room() == 0:
                break
            self.ceiling = self.simulations + max(1, (end - self.simulations) // (len(starts) - k))
            try:
                found = self._climb(start, until_feasible=True, cap=PROBE_CAP)
            finally:
                self.ceiling = None
            if found.feasible:
                return found
        return None

    def _frontier(self, tried: Mapping[float, Evaluation]) -> list[Evaluation]:
        """Per capacity tried, ascending, the best configuration the whole search simulated to its
        end there (any phase, any probe), not the figures of the probe's first seed."""
        best: dict[float, Evaluation] = {}
        for ev in self.cache.values():
            c = ev.candidate.capacity
            if ev.complete and c in tried and (c not in best or self.rank(ev) < self.rank(best[c])):
                best[c] = ev
        return [best.get(c, tried[c]) for c in sorted(tried)]

    def _confirm(self, best: Evaluation, frontier: list[Evaluation], sizing: dict[str, float | None],
                 bounds: dict[str, float]) -> Advice:
        """The full simulations of the answer and of the input: the figures the advice prints."""
        # Fresh full simulations (never the cache): the answer's, and the input's unless the
        # first batch of candidates ran it.
        self.phase = "confirming"
        pair = [best.candidate] + ([] if self.input_full is not None else [self.space.input])
        self._need_privates(pair)
        spent = self.room() == 0 or self.cut > 0
        confirmed, *rest = self._batch([("evaluate", c, self._privates(c), Limits()) for c in pair])
        given = rest[0] if rest else self.input_full
        assert given is not None
        warnings = (self.budget_line(),) if spent else ()
        return Advice(best=confirmed, input=given, frontier=frontier, simulations=self.simulations, space=self.space,
                      private_sizing=sizing, bounds=bounds, warnings=warnings, jobs_simulated=self.jobs_simulated)

    def budget_line(self) -> str:
        """What the user reads when the budget cut the search short."""
        return (f"the search stopped at its budget ({self.budget:,} simulations or {self.job_budget:,} simulated "
                f"jobs; {len(self.study.jobs):,} jobs a simulation here): the configuration shown is the best found, "
                f"which a longer search might better")
