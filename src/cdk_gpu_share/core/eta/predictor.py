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
of its finished jobs (size, priority, duration). The band is the
nearest-rank 10th, 50th and 90th percentiles of the job's wait in those replays.

:func:`baseline_wait` is the answer without a band: one replay in which every unknown
duration is a median (nearest-rank) and nothing else arrives.

The answer depends only on the inputs and on (``seed``, the job's id), never on the order
predictions are made in or on which process makes them.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

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
#: Later arrivals are drawn up to this far past ``now`` for a job's first replay (seconds),
#: and four times further each time a replay's job had not started (for good) by then, up
#: to a year; each later replay of the job begins at the horizon the previous one ended at
#: (a shorter one would only be run again, so only a job stopped after its start, by an
#: arrival between the two horizons, could have started at another time); a replay draws
#: at most :data:`_MAX_ARRIVALS` (a job starved by a stream of others still gets a start).
_FIRST_HORIZON_S = 3600.0
_MAX_HORIZON_S = 365 * 86400.0
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


def _arrivals(state: QueueState, history: History, rates: dict[str, float], horizon: float,
              key: str) -> Arrivals:
    """Jobs arriving in (now, now + horizon]: per team a Poisson stream at its rate, each a copy of
    one of the team's finished jobs. One random stream per team: a longer horizon extends the
    same arrivals. Only their times and models are drawn here: a replay makes the jobs it reaches."""
    drawn: list[tuple[float, str, FinishedJob]] = []  # (submit, team, model), in the order drawn
    for team, rate in rates.items():
        templates = history.templates.get(team)
        if not templates or rate <= 0:
            continue
        draw = _stream_inline if INLINE_DRAWS else _stream
        draw(drawn, random.Random(f"{key}:{team}"), rate, state.now, state.now + horizon, team, templates)
    times = [d[0] for d in drawn]
    order = sorted(range(len(drawn)), key=times.__getitem__)  # stable: the order drawn at equal times

    def make(i: int, position: int) -> Job:
        k = order[i]
        t, team, model = drawn[k]
        return (_new_job if frozen.FAST else Job)(id=f"~{team}~{k}", team=team, submit_time=t, duration_s=model.duration_s, gpus=model.gpus,
                   priority=model.priority, gpus_exact=model.gpus_exact, position=position)

    # The sizes of every job the streams may copy (more than those drawn: the replay's answer does not
    # depend on the sizes it indexes, and replays of one state that index the same sizes share what
    # they find of the rules).
    return Arrivals(times=[times[k] for k in order], sizes=history.sizes(rates), make=make)


def _stream(drawn: list, rng: random.Random, rate: float, now: float, until: float, team: str,
            templates: list[FinishedJob]) -> None:
    """One team's arrivals in (now, until]: a Poisson stream at ``rate``, each a copy of one of
    ``templates``, appended to ``drawn`` up to :data:`_MAX_ARRIVALS` in all."""
    t = now
    while True:
        t += rng.expovariate(rate)
        if t > until or len(drawn) >= _MAX_ARRIVALS:
            break
        drawn.append((t, team, templates[rng.randrange(len(templates))]))


def _stream_inline(drawn: list, rng: random.Random, rate: float, now: float, until: float, team: str,
                   templates: list[FinishedJob]) -> None:
    """:func:`_stream`, the same draws from the same generator: ``expovariate`` and ``randrange``
    written out as CPython computes them (-log(1 - random()) / rate; getrandbits of the bit length
    until below n), without their calls' overhead."""
    rand, bits, log = rng.random, rng.getrandbits, math.log
    n = len(templates)
    k = n.bit_length()
    t = now
    while True:
        t += -log(1.0 - rand()) / rate
        if t > until or len(drawn) >= _MAX_ARRIVALS:
            break
        i = bits(k)
        while i >= n:
            i = bits(k)
        drawn.append((t, team, templates[i]))


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
    # Each replay starts at the horizon the previous one of this job ended with: replays of one
    # job need similar horizons, and a replay at a shorter one would only be run again.
    horizon = _FIRST_HORIZON_S
    shared: dict = {}  # what the replays from this state find of the rules, for the next ones
    for k in range(samples):
        key = f"{seed}:{job_id}:{k}"
        rng = random.Random(key)
        durations = {j.id: _draw(history.durations(j.team), j.worked(state.now), rng) for j in state.running}
        durations.update({j.id: _draw(history.durations(j.team), j.progress_s, rng) for j in state.pending})
        while True:
            later = _arrivals(state, history, rates, horizon, key)
            last = not later.times or horizon >= _MAX_HORIZON_S or len(later.times) >= _MAX_ARRIVALS
            # Unless this is the last horizon, a job not running at its end starts (finally)
            # after it, so it is replayed again with more arrivals: this replay may end there.
            start = replay_start(scenario, mode, state, job_id, durations, arrivals=later, poll_seconds=poll_seconds,
                                 deadline=None if last else state.now + horizon, shared=shared)
            if start is not None and (last or start <= state.now + horizon):
                break
            horizon *= 4
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
    start = replay_start(scenario, mode, state, job_id, durations, poll_seconds=poll_seconds)
    assert start is not None, "a replay without a deadline runs to the job's start"
    return start - submit

