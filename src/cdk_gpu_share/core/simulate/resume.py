"""The policy replayed from one moment's state: what is known at ``now``, nothing after.

:class:`QueueState` is the cluster at one instant as its users could see it: each running
job's team, size, priority, start time, whether it borrowed, its checkpoint interval and
the work it had saved before a stop; each pending job's team, size, priority and submit
time, in the order the policy serves them. It has no field for a running or pending job's
duration: nothing built from a state can read one.

:func:`replay_start` runs the simulator's own engine (dispatch, the reclaim planner's
ticks, stops and restarts) from such a state, given a duration for each of its jobs and,
optionally, jobs that arrive later: the answer is when one of the pending jobs starts.
:func:`capture_states` takes the states of a replay of a whole trace at the arrival of
chosen jobs (the backtest's "what was known then").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from cdk_gpu_share.core import frozen
from cdk_gpu_share.core.simulate import collector
from cdk_gpu_share.core.simulate.engine import _Clock, _clocked, _interval, _numbered, _Sim
from cdk_gpu_share.core.simulate.inputs import Job, Scenario
from cdk_gpu_share.core.simulate.owed import OwedClock
from cdk_gpu_share.core.simulate.state import Run

__all__ = ["Arrivals", "PendingJob", "QueueState", "RunningJob", "TraceReplay", "capture_states", "replay_start"]

# Job(...) made without the frozen dataclass's __init__ (core.frozen): a replay makes one per job.
_new_job = frozen.maker(Job)


@dataclass(frozen=True)
class RunningJob:
    """A job running at the state's moment. ``progress_s``: the work it had saved before
    its last stop (0 unless it was stopped and restarted), in seconds of its running time."""

    id: str
    team: str
    gpus: float
    priority: int
    submit: float
    start: float
    borrowed: bool
    checkpoint_seconds: float = 0.0
    progress_s: float = 0.0
    gpus_exact: Fraction | None = None

    def worked(self, now: float) -> float:
        """The seconds of work the job has done by ``now``: a duration is at least this."""
        return self.progress_s + max(0.0, now - self.start)


@dataclass(frozen=True)
class PendingJob:
    """A job waiting at the state's moment (for a first start, or again after a stop).
    ``since``: from when the planner counts its ``reclaim_after_seconds`` when that is later
    than its submit (its team's guarantee rose at a time window's boundary while it waited);
    None: its submit."""

    id: str
    team: str
    gpus: float
    priority: int
    submit: float
    checkpoint_seconds: float = 0.0
    progress_s: float = 0.0
    gpus_exact: Fraction | None = None
    since: float | None = None


@dataclass(frozen=True)
class QueueState:
    """The cluster at ``now``: running jobs (by start time) and pending jobs (in the order the
    policy serves them: priority descending, submit time, then trace order). No durations."""

    now: float
    running: tuple[RunningJob, ...]
    pending: tuple[PendingJob, ...]

    def pending_job(self, job_id: str) -> PendingJob | None:
        return next((p for p in self.pending if p.id == job_id), None)


class _Reached(Exception):
    """The replay reached the target job's start (raised to end the run there)."""

    def __init__(self, start: float):
        self.start = start


@dataclass(frozen=True)
class Arrivals:
    """Jobs submitted after a state's moment, drawn and made only as a replay reaches them: a
    replay that ends at its target's start need not draw, nor build, those after it.

    ``stream()``: a new iterator over them in submit order (at equal times, in the order they
    arrive), each an item whose first element is its submit time; ``make(item, position)``: the
    job of one item, ``position`` its place among the replay's jobs; ``sizes``: every (GPUs, exact
    GPUs) the jobs may have. Each replay opens its own stream: one ``Arrivals`` serves many."""

    stream: Callable[[], Iterator[tuple[Any, ...]]]
    make: Callable[[Any, int], Job]
    sizes: Collection[tuple[float, Fraction]]

    @classmethod
    def of(cls, jobs: Sequence[Job]) -> Arrivals:
        """Given jobs, by submit time (stable)."""
        ordered = sorted(jobs, key=lambda j: j.submit_time)
        return cls(stream=lambda: ((j.submit_time, j) for j in ordered),
                   make=lambda item, position: _placed(item[1], position),
                   sizes={(j.gpus, j.exact_gpus) for j in ordered})


def _placed(job: Job, position: int) -> Job:
    return job if job.position == position else replace(job, position=position)


class _Later(Sequence[Run]):
    """The engine's arrivals of a resumed replay, drawn from their stream as the replay reaches
    them: the i-th made (and registered) when the engine takes it, and the next one drawn then,
    so that ``times`` (the engine's arrival times) holds the time of the one it reads next (inf
    once the stream has ended)."""

    def __init__(self, engine: _Resumed, arrivals: Arrivals):
        self.engine = engine
        self.make = arrivals.make
        self.items = arrivals.stream()
        self.made: list[Run] = []
        self.times: list[float] = []
        self.next: tuple[Any, ...] | None = None
        self._draw()

    def _draw(self) -> None:
        self.next = item = next(self.items, None)
        self.times.append(math.inf if item is None else item[0])

    def __len__(self) -> int:  # those drawn so far
        return len(self.made) + (self.next is not None)

    def __getitem__(self, i: int) -> Run:  # type: ignore[override]  # the engine reads one index at a time, in order
        made = self.made
        if i == len(made) and self.next is not None:
            made.append(self.engine._make_later(self.make(self.next, self.engine.first_later + i)))
            self._draw()
        return made[i]


# Whether a flat replay from a state keeps the owed-wait clocks (True only to check that leaving them
# out changes no start: the replay answers when a job starts, never how long jobs were owed).
KEEP_OWED_CLOCKS = False
# Whether the flat replays given one ``shared`` dict share dispatch's answers to the rules (each
# team's thresholds at each usage, the sizes that fit in each free capacity: pure functions of those
# and of the job sizes), rather than each finding them again (False only to check they change nothing).
SHARE_RULE_ANSWERS = True
# Whether the flat replays given one ``shared`` dict take the planner's view of the starting state
# (every running and pending job's spec, the running index, the pending groups: nothing a duration
# changes) as the first of them built it, copied, rather than each building it again at its first
# planner call (False only to check that taking it changes nothing).
SHARE_START_VIEW = True
# Whether the replays given one ``shared`` dict share the state's job objects, made once with no
# duration (each replay's runs carry theirs), rather than each making them with its durations (False
# only to check that sharing them changes nothing).
SHARE_START_JOBS = True


class _NoOwedClock:
    """The owed-wait clocks of a replay that never reads them: nothing kept, every reading 0."""

    dirty = False

    def update(self, ti: int, t: float) -> None:
        pass

    def changed(self, ti: int, t: float) -> None:
        pass

    def settle(self, t: float) -> None:
        pass

    def reading(self, ti: int, k: int, t: float) -> float:
        return 0.0


class _Resumed(_Sim):
    """The engine started from a :class:`QueueState`: the running jobs started at their own
    start times, the pending jobs queued at ``now``, later jobs arriving at their submit times
    (each made when the replay reaches it)."""

    def __init__(self, scenario: Scenario, jobs: Sequence[Job], mode: str, poll: float, state: QueueState,
                 target: int, final: bool, arrivals: Arrivals, shared: dict | None = None,
                 works: Sequence[float] | None = None):
        self.arrivals = arrivals
        super().__init__(scenario, jobs, mode, poll, None, None)
        if works is not None:  # the state's jobs' durations in this replay (the jobs may hold none)
            for r, work in zip(self.runs, works, strict=True):
                r.duration = work
        if shared is not None and SHARE_RULE_ANSWERS and self.tree is None:
            # The replays of one state see the same policy: with the same job sizes, the same answers.
            thresholds, room = shared.setdefault(tuple(self.index.sizes), ([{} for _ in self.teams], {}))
            for team, known in zip(self.teams, thresholds):
                team.thresholds = known
            self.index.room_cache = room
        self.target: Run | None = None
        self.final = final
        self.now = state.now
        self.first_later = len(jobs)
        self.units: dict[tuple[float, int], int] = {}  # a size's units, see _make_later
        self.by_team = {t.name: t for t in self.teams}
        n_run, n_pend = len(state.running), len(state.pending)
        for r, rj in zip(self.runs[:n_run], state.running):
            r.arrived = True
            self.live[r.job.position] = r
            r.progress = rj.progress_s
            self._start(r, rj.start)
            r.borrowed = rj.borrowed  # as it was decided at its real start
        # Every pending job is queued before anything else happens: none of them fit at
        # ``now`` (dispatch had run), and room freed later goes to the first in order.
        for r, pj in zip(self.runs[n_run:n_run + n_pend], state.pending):
            r.progress = pj.progress_s
            if pj.since is not None:
                r.since = pj.since
            r.arrived = True
            self.live[r.job.position] = r
            self._push_pending(r)
        if shared is not None and SHARE_START_VIEW and self.reclaiming and self.tree is None:
            self._share_start_view(shared, self.runs[:n_run + n_pend])
        self.target = self.runs[target]

    def _share_start_view(self, shared: dict, runs: list[Run]) -> None:
        """The planner's view of the starting state: the first replay of a state builds it and
        keeps a copy in ``shared``; the next ones take that copy. Each replay's jobs of the state
        are numbered alike, started or queued at ``now`` with the same fields (only their
        durations differ, which no spec holds), so each would build the same view."""
        key = ("start view", tuple(self.index.sizes))
        copy = shared.get(key)
        if copy is None:
            shared[key] = self.view.copy(runs)
        else:
            self.view.take(copy, runs)

    def _later_sizes(self) -> Collection[tuple[float, Fraction]]:
        return self.arrivals.sizes

    def _owed_clock(self) -> OwedClock:
        if KEEP_OWED_CLOCKS or self.tree is not None:  # a tree's clocks share its levels: kept
            return super()._owed_clock()
        return _NoOwedClock()  # type: ignore[return-value]  # the clocks' protocol

    def _arrivals(self) -> tuple[Sequence[Run], Sequence[float]]:
        later = _Later(self, self.arrivals)
        return later, later.times

    def _make_later(self, job: Job) -> Run:
        """The run of a later job, as :class:`_Sim` makes each given job's."""
        if job.id in self.by_id:
            _numbered([r.job for r in self.runs] + [job], "state")  # names the repeat
        r = Run(job, self.by_team[job.team])
        # By the size and the identity of its exact value (which the job keeps alive; None: the
        # size alone says it): a Fraction is slow to hash.
        key = (job.gpus, id(job.gpus_exact))
        q = self.units.get(key)
        if q is None:
            q = self.units[key] = int(job.exact_gpus * self.scale)
        r.q = q
        r.interval = _interval(r, None)
        self.runs.append(r)
        self.by_id[job.id] = r
        return r

    def _start(self, r: Run, t: float) -> None:
        super()._start(r, t)
        if r is self.target and not self.final:
            raise _Reached(t)

    def _complete(self, r: Run, t: float) -> None:
        super()._complete(r, t)
        if r is self.target:
            raise _Reached(r.start)


def replay_start(scenario: Scenario, mode: str, state: QueueState, target: str, durations: Mapping[str, float], *,
                 arrivals: Sequence[Job] | Arrivals = (), poll_seconds: float, final: bool = True,
                 shared: dict | None = None) -> float:
    """When the pending job ``target`` starts, replaying the policy from ``state``.

    ``durations``: the work, in seconds, of every running and pending job of the state (a
    running job's is raised to the work it has done by ``now``: it then ends at ``now``).
    ``arrivals``: jobs submitted after ``now`` (ids unique, sorted by submit time or not), or
    an :class:`Arrivals` that draws and makes each when the replay reaches it.
    ``final``: the start after which the job ran to its end (a job stopped by the planner
    starts again); False: its first start, a shorter replay.
    ``shared``: a dict the replays from one ``state`` (and one scenario and mode) are all given,
    where they keep what they find of the rules for the next ones (default: none kept).
    """
    now = state.now
    works = [max(durations[rj.id], rj.worked(now)) for rj in state.running]
    works += [max(durations[pj.id], pj.progress_s) for pj in state.pending]
    if shared is not None and SHARE_START_JOBS:
        # Every replay of the state makes the same jobs but for their durations, which its runs carry.
        made = shared.get(("start jobs", target))
        if made is None:
            made = shared[("start jobs", target)] = _start_jobs(state, target, None)
        jobs, index = made
    else:
        jobs, index = _start_jobs(state, target, works)
    later = arrivals if isinstance(arrivals, Arrivals) else Arrivals.of(arrivals)
    # The values in force at ``now`` and the boundaries after it (the state's times are trace seconds).
    in_force, clock = _clocked(scenario, scenario.origin, state.now)
    # A replay makes many short-lived objects: the cyclic collector is off while it runs. Its
    # engine is released at its end, so that refcounting frees it (the collector would walk every
    # object of the replay to find them); the collection afterwards finds little.
    with collector.paused():
        return _replayed(_Resumed(in_force, jobs, mode, float(poll_seconds), state, index, final, later, shared,
                                  works), clock)


def _start_jobs(state: QueueState, target: str, works: Sequence[float] | None) -> tuple[list[Job], int]:
    """The jobs of ``state`` (running, then pending, each numbered by its place) and the place of
    ``target``. ``works``: their durations, in that order; None: none (NaN), every replay's runs
    carrying their own."""
    jobs: list[Job] = []
    new_job = _new_job if frozen.FAST else Job
    work = iter(works if works is not None else [math.nan] * (len(state.running) + len(state.pending)))
    for rj in state.running:
        jobs.append(new_job(id=rj.id, team=rj.team, submit_time=rj.submit, duration_s=next(work), gpus=rj.gpus,
                            priority=rj.priority, gpus_exact=rj.gpus_exact, checkpoint_seconds=rj.checkpoint_seconds,
                            position=len(jobs)))
    index = len(jobs)
    for pj in state.pending:
        if pj.id == target:
            index = len(jobs)
        jobs.append(new_job(id=pj.id, team=pj.team, submit_time=pj.submit, duration_s=next(work), gpus=pj.gpus,
                            priority=pj.priority, gpus_exact=pj.gpus_exact, checkpoint_seconds=pj.checkpoint_seconds,
                            position=len(jobs)))
    if state.pending_job(target) is None:
        raise ValueError(f"job {target!r} is not pending in the state")
    if len({j.id for j in jobs}) < len(jobs):
        _numbered(jobs, "state")  # names the repeat
    return jobs, index


def _replayed(engine: _Resumed, clock: _Clock | None) -> float:
    """:func:`replay_start`'s answer from its engine."""
    engine.clock = clock
    try:
        engine.run()
    except _Reached as reached:
        return reached.start
    finally:
        engine.release()
    raise AssertionError("every replay ends with every job completed")  # pragma: no cover


class _Capture(_Sim):
    """A replay of a whole trace that takes the state at the arrival of each wanted job."""

    def __init__(self, scenario: Scenario, jobs: Sequence[Job], mode: str, poll: float, wanted: Collection[str]):
        super().__init__(scenario, jobs, mode, poll, None, None)
        self.wanted = set(wanted)
        self.states: dict[str, QueueState] = {}

    def _arrive(self, r: Run) -> bool:
        go = super()._arrive(r)
        if r.job.id in self.wanted:
            self.states[r.job.id] = self.snapshot()
        return go

    def snapshot(self) -> QueueState:
        running = sorted(self.running.values(), key=lambda r: (r.start, r.job.position))
        pending = sorted((r for p, r in self.live.items() if p not in self.running), key=lambda r: r.key)
        return QueueState(
            now=self.now,
            running=tuple(RunningJob(id=r.job.id, team=r.job.team, gpus=r.g, priority=r.job.priority,
                                     submit=r.job.submit_time, start=r.start, borrowed=r.borrowed,
                                     checkpoint_seconds=r.interval, progress_s=r.progress,
                                     gpus_exact=r.job.gpus_exact) for r in running),
            pending=tuple(PendingJob(id=r.job.id, team=r.job.team, gpus=r.g, priority=r.job.priority,
                                     submit=r.job.submit_time, checkpoint_seconds=r.interval,
                                     progress_s=r.progress, gpus_exact=r.job.gpus_exact,
                                     since=r.since if r.since != r.job.submit_time else None) for r in pending),
        )


@dataclass
class TraceReplay:
    """A replay of a whole trace: the states taken at the wanted arrivals and, per job id, its
    first start, its final start (after which it ran to its end) and its completion."""

    states: dict[str, QueueState]
    first_start: dict[str, float]
    final_start: dict[str, float]
    completion: dict[str, float]


def capture_states(scenario: Scenario, jobs: Sequence[Job], mode: str, wanted: Collection[str], *,
                   poll_seconds: float) -> TraceReplay:
    """Replay ``jobs`` (as :func:`~cdk_gpu_share.core.simulate.simulate` does) and take the state at
    the arrival of each job of ``wanted`` (by id): after the events before it at the same instant,
    the job itself pending (queued, not yet dispatched). A scenario with time windows is replayed
    with the clock from its ``origin`` (refused in one line without one)."""
    in_force, clock = _clocked(scenario, scenario.origin)
    engine = _Capture(in_force, _numbered(jobs, "trace"), mode, float(poll_seconds), wanted)
    engine.clock = clock
    with collector.paused(collect=False):  # as simulate runs a trace
        engine.run()
    runs = engine.runs
    return TraceReplay(states=engine.states,
                       first_start={r.job.id: r.first_start for r in runs if r.first_start is not None},
                       final_start={r.job.id: r.start for r in runs if r.done},
                       completion={r.job.id: r.completion for r in runs if r.done})
