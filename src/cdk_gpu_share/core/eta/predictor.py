"""When will a waiting job start: a band of its wait, from the state and the finished jobs.

Inputs, all of them known at the moment ``state.now``:

- the scenario (capacity, teams, guarantees, sharing, limits, settings) and the planner's
  period: the policy;
- a :class:`~cdk_gpu_share.core.simulate.resume.QueueState`: the running jobs (team, GPUs,
  priority, start, borrowed or not, checkpoint interval) and the pending jobs (team, GPUs,
  priority, submit time), in the order the policy serves them. The type has no duration
  field, so no prediction can read how long a running or pending job will take;
- a :class:`History`: the jobs that finished before ``now``, with their durations;
- ``samples`` and ``seed``.

:func:`predict` replays the policy (the simulator's own engine, from the state) ``samples``
times. In each replay every unknown duration is drawn from the job's team's finished
durations longer than the work the job has already done (a team without finished jobs
draws from every team's; when none is longer, ``worked / u`` with u uniform in (0, 1]),
and later arrivals are drawn from the history: each team's jobs arrive at the rate it
submitted over the last :data:`ARRIVAL_WINDOW_S` (a Poisson stream), each a copy of one
of its finished jobs (size, priority, duration). A replay draws them as it reaches them,
for as long as it runs (until the job has run to its end: a later arrival may stop it), up to :data:`_ARRIVAL_HORIZON_S`
past ``now`` and :data:`_MAX_ARRIVALS` jobs. The band is the
nearest-rank 10th, 50th and 90th percentiles of the job's wait in those replays.

:func:`baseline_wait` is the answer without a band: one replay in which every unknown
duration is a median (nearest-rank) and nothing else arrives.

The answer depends only on the inputs and on (``seed``, the job's id), never on the order
predictions are made in or on which process makes them: each replay's streams are keyed by
(``seed``, the job's id, the replay's number, the team).
"""

from __future__ import annotations

import heapq
import math
import random
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import islice

from cdk_gpu_share.core import frozen
from cdk_gpu_share.core.simulate.accounting import nearest_rank
from cdk_gpu_share.core.simulate.inputs import RECLAIM, Job, Scenario
from cdk_gpu_share.core.simulate.resume import Arrivals, QueueState, replay_start

__all__ = ["ARRIVAL_WINDOW_S", "DEFAULT_SAMPLES", "MAX_SAMPLES", "Band", "FinishedJob", "History", "baseline_wait", "predict"]

# Job(...) made without the frozen dataclass's __init__ (core.frozen): a replay makes one per job.
_new_job = frozen.maker(Job)

#: Replays per prediction unless told otherwise.
DEFAULT_SAMPLES = 32
#: Replays per prediction at most: 1,000 place the p10 and p90 within a tenth of a percent of
#: the replays, and each replay costs as much as the first (1,000 take 31 times the default).
MAX_SAMPLES = 1_000
#: Arrival rates are measured over at most this much of the past (seconds): a week.
ARRIVAL_WINDOW_S = 7 * 86400.0
#: Later arrivals are drawn up to this far past ``now`` (seconds): a year. A replay whose job
#: has not run to its end by then goes on without more arrivals (it ends: every job fits an
#: empty pool).
_ARRIVAL_HORIZON_S = 365 * 86400.0
#: A replay draws at most this many later arrivals, the first in time order (across the teams):
#: a job starved by a stream of others still gets a start.
_MAX_ARRIVALS = 5000
# Whether arrivals are drawn by :func:`_stream_inline` (False only to check that it draws what the
# generator's own methods draw).
INLINE_DRAWS = True


@dataclass(frozen=True)
class FinishedJob:
    """A job that finished before the moment of a prediction: its team, submit time, the work
    it took (seconds), its size and priority."""

    team: str
    submit: float
    duration_s: float
    gpus: float
    priority: int = 0
    gpus_exact: Fraction | None = None


@dataclass
class History:
    """The finished jobs known at a moment, indexed for sampling: each team's durations
    sorted, every team's durations sorted, each team's jobs in submit order."""

    jobs: Sequence[FinishedJob]
    by_team: dict[str, list[float]] = field(init=False)
    every: list[float] = field(init=False)
    templates: dict[str, list[FinishedJob]] = field(init=False)
    _sizes: dict[tuple[str, ...], list[tuple[float, Fraction]]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        by_team: dict[str, list[float]] = {}
        templates: dict[str, list[FinishedJob]] = {}
        for j in self.jobs:
            by_team.setdefault(j.team, []).append(j.duration_s)
            templates.setdefault(j.team, []).append(j)
        for durations in by_team.values():
            durations.sort()
        for team_jobs in templates.values():
            # a canonical order: the same history given in another order samples the same
            team_jobs.sort(key=lambda j: (j.submit, j.duration_s, j.gpus, j.priority))
        self.by_team = by_team
        self.every = sorted(d for ds in by_team.values() for d in ds)
        self.templates = templates

    def __len__(self) -> int:
        return len(self.every)

    def durations(self, team: str) -> list[float]:
        """The durations a job of ``team`` is drawn from: its team's, else every team's."""
        return self.by_team.get(team) or self.every

    def sizes(self, teams: Iterable[str]) -> list[tuple[float, Fraction]]:
        """Every (GPUs, exact GPUs) among the finished jobs of ``teams``, once per exact value
        object (a Fraction is slow to hash; a repeat of an equal value does no harm)."""
        key = tuple(teams)
        found = self._sizes.get(key)
        if found is None:
            found = self._sizes[key] = list({
                (m.gpus, id(m.gpus_exact)): (m.gpus, m.gpus_exact if m.gpus_exact is not None else Fraction(m.gpus))
                for team in key for m in self.templates.get(team, ())}.values())
        return found

    def count(self, team: str) -> int:
        """The finished jobs of ``team``."""
        return len(self.by_team.get(team, ()))


@dataclass(frozen=True)
class Band:
    """A predicted wait from the job's submit time: three quantiles (seconds), and what it was
    based on: the finished jobs of the job's team (0: every team's were used)."""

    wait_p10_s: float
    wait_p50_s: float
    wait_p90_s: float
    team_history: int
    history: int


def _draw(durations: list[float], worked: float, rng: random.Random) -> float:
    """A duration longer than ``worked`` from the sorted ``durations``. None longer: nothing is known
    but that it has run ``worked``; a duration ``worked / u``, u uniform in (0, 1] (the chance it
    runs past ``t`` is then ``worked / t``: as likely to run as long again as not)."""
    i = bisect_right(durations, worked)
    if i >= len(durations):
        return worked / (1.0 - rng.random())
    return durations[rng.randrange(i, len(durations))]


def _median_longer(durations: list[float], worked: float) -> float:
    """The nearest-rank median of the ``durations`` longer than ``worked`` (none: ``worked``)."""
    i = bisect_right(durations, worked)
    rest = durations[i:]
    return float(nearest_rank(rest, 50)) if rest else worked


def _rates(state: QueueState, history: History) -> dict[str, float]:
    """Each team's submissions per second over the last :data:`ARRIVAL_WINDOW_S` (or all the
    past, when shorter), counting every job known at ``now``: finished, running and pending."""
    now = state.now
    submits = [(j.team, j.submit) for j in history.jobs]
    submits += [(j.team, j.submit) for j in state.running]
    submits += [(j.team, j.submit) for j in state.pending]
    if not submits:
        return {}
    window = min(ARRIVAL_WINDOW_S, now - min(s for _, s in submits))
    if window <= 0:
        return {}
    counts: dict[str, int] = {}
    for team, submit in submits:
        if submit > now - window:
            counts[team] = counts.get(team, 0) + 1
    return {team: n / window for team, n in sorted(counts.items())}


def _arrivals(state: QueueState, history: History, rates: dict[str, float], key: str) -> Arrivals:
    """Jobs arriving after ``now``: per team a Poisson stream at its rate, each a copy of one of the
    team's finished jobs, from its own random generator (keyed by ``key`` and the team); merged in
    time order (at equal times: by team name, then in the order drawn), up to
    :data:`_ARRIVAL_HORIZON_S` past ``now`` and :data:`_MAX_ARRIVALS` in all. Each replay draws them
    as it reaches them and makes the jobs it takes."""
    now = state.now
    until = now + _ARRIVAL_HORIZON_S
    teams = [(team, rate, history.templates[team]) for team, rate in rates.items()
             if rate > 0 and history.templates.get(team)]
    draw = _stream_inline if INLINE_DRAWS else _stream

    def stream() -> Iterator[tuple[float, str, int, FinishedJob]]:
        # One generator per team: whatever the other teams draw, a team's arrivals are the same.
        streams = [draw(random.Random(f"{key}:{team}"), rate, now, until, team, templates)
                   for team, rate, templates in teams]
        return islice(streams[0] if len(streams) == 1 else heapq.merge(*streams), _MAX_ARRIVALS)  # no team: merge() is empty

    def make(item: tuple[float, str, int, FinishedJob], position: int) -> Job:
        t, team, n, model = item
        return (_new_job if frozen.FAST else Job)(id=f"~{team}~{n}", team=team, submit_time=t, duration_s=model.duration_s,
                                                  gpus=model.gpus, priority=model.priority, gpus_exact=model.gpus_exact,
                                                  position=position)

    # The sizes of every job the streams may copy (more than those drawn: the replay's answer does not
    # depend on the sizes it indexes, and replays of one state that index the same sizes share what
    # they find of the rules).
    return Arrivals(stream=stream, make=make, sizes=history.sizes(rates))


def _stream(rng: random.Random, rate: float, now: float, until: float, team: str,
            templates: list[FinishedJob]) -> Iterator[tuple[float, str, int, FinishedJob]]:
    """One team's arrivals in (now, until], as they are drawn: a Poisson stream at ``rate``, each a
    copy of one of ``templates``; items (submit time, team, number in the stream, model), in order
    (the merge compares them: the time, then the team, then the number, unique in a replay)."""
    t = now
    n = 0
    while True:
        t += rng.expovariate(rate)
        if t > until:
            return
        yield (t, team, n, templates[rng.randrange(len(templates))])
        n += 1


def _stream_inline(rng: random.Random, rate: float, now: float, until: float, team: str,
                   templates: list[FinishedJob]) -> Iterator[tuple[float, str, int, FinishedJob]]:
    """:func:`_stream`, the same draws from the same generator: ``expovariate`` and ``randrange``
    written out as CPython computes them (-log(1 - random()) / rate; getrandbits of the bit length
    until below n), without their calls' overhead."""
    rand, bits, log = rng.random, rng.getrandbits, math.log
    size = len(templates)
    k = size.bit_length()
    t = now
    n = 0
    while True:
        t += -log(1.0 - rand()) / rate
        if t > until:
            return
        i = bits(k)
        while i >= size:
            i = bits(k)
        yield (t, team, n, templates[i])
        n += 1


def _check(state: QueueState, job_id: str) -> float:
    job = state.pending_job(job_id)
    if job is None:
        raise ValueError(f"job {job_id!r} is not pending in the state")
    return job.submit


def predict(scenario: Scenario, state: QueueState, job_id: str, history: History, *, samples: int = DEFAULT_SAMPLES,
            seed: int = 0, poll_seconds: float, mode: str = RECLAIM, arrivals: bool = True) -> Band | None:
    """The band of the wait of the pending job ``job_id`` (from its submit time), or None when the
    history holds no finished job at all (nothing to draw a duration from).

    ``samples`` replays of the policy (``mode``, the planner every ``poll_seconds``) from
    ``state``, each with its own draw of the unknown durations and (``arrivals``) of later
    arrivals; the random streams are keyed by (``seed``, ``job_id``, replay number).
    """
    submit = _check(state, job_id)
    if not len(history) or samples < 1:
        return None
    rates = _rates(state, history) if arrivals else {}
    waits = []
    shared: dict = {}  # what the replays from this state find of the rules, for the next ones
    for k in range(samples):
        key = f"{seed}:{job_id}:{k}"
        rng = random.Random(key)
        durations = {j.id: _draw(history.durations(j.team), j.worked(state.now), rng) for j in state.running}
        durations.update({j.id: _draw(history.durations(j.team), j.progress_s, rng) for j in state.pending})
        start = replay_start(scenario, mode, state, job_id, durations, arrivals=_arrivals(state, history, rates, key),
                             poll_seconds=poll_seconds, shared=shared)
        waits.append(start - submit)
    team = next(p.team for p in state.pending if p.id == job_id)
    return Band(wait_p10_s=float(nearest_rank(waits, 10)), wait_p50_s=float(nearest_rank(waits, 50)),
                wait_p90_s=float(nearest_rank(waits, 90)), team_history=history.count(team), history=len(history))


def baseline_wait(scenario: Scenario, state: QueueState, job_id: str, history: History, *, poll_seconds: float,
                  mode: str = RECLAIM) -> float | None:
    """The wait of ``job_id`` in one replay where every unknown duration is a median of its team's
    finished durations (a pending job's: of all of them; a running job's: of those longer than the
    work it has done, and when none is longer it ends now) and nothing else arrives; None without any finished job."""
    submit = _check(state, job_id)
    if not len(history):
        return None
    durations = {j.id: _median_longer(history.durations(j.team), j.worked(state.now)) for j in state.running}
    durations.update({j.id: float(nearest_rank(history.durations(j.team), 50)) for j in state.pending})
    return replay_start(scenario, mode, state, job_id, durations, poll_seconds=poll_seconds) - submit

