"""The backtest: how good the predicted bands were on a trace whose outcome is known.

The trace is replayed once under the scenario (the truth). The sampled jobs are those that
did not start at their arrival, all of them or the ``n_jobs`` with the smallest hash of
(seed, job id), so a job's selection depends on its id and the seed alone. For each, the
state is taken at its arrival (its own job pending), with the history of the jobs that had
completed by then, and both the band (:func:`~cdk_gpu_share.core.eta.predictor.predict`) and
the baseline (:func:`~cdk_gpu_share.core.eta.predictor.baseline_wait`) are compared with the
wait the job got in the truth: from submit to its final start.

Each prediction is one task (:func:`run_eta_task`), so any executor of the quota advisor runs
them (this process, local processes, Ray) with the same answer: results come back in the
order of the tasks.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdk_gpu_share.core.eta.calibrate import Outcome, calibrate
from cdk_gpu_share.core.eta.predictor import Band, FinishedJob, History, baseline_wait, predict
from cdk_gpu_share.core.simulate.accounting import nearest_rank
from cdk_gpu_share.core.simulate.inputs import RECLAIM, Job, Scenario, check_jobs
from cdk_gpu_share.core.simulate.resume import QueueState, capture_states

__all__ = ["Backtest", "EtaStudy", "backtest", "run_backtest", "run_eta_task", "select_jobs"]



@dataclass(frozen=True)
class EtaStudy:
    """What every prediction of a backtest shares (handed to each worker once): the policy, the
    finished jobs by completion time, the number of replays and the seed."""

    scenario: Scenario
    mode: str
    poll_seconds: float
    completions: tuple[float, ...]
    finished: tuple[FinishedJob, ...]
    samples: int
    seed: int


def run_eta_task(study: EtaStudy, task: tuple[str, QueueState]) -> tuple[Band | None, float | None]:
    """One sampled job: (its band, its baseline wait), both None without any finished job."""
    job_id, state = task
    history = History(study.finished[:bisect_right(study.completions, state.now)])
    band = predict(study.scenario, state, job_id, history, samples=study.samples, seed=study.seed,
                   poll_seconds=study.poll_seconds, mode=study.mode)
    base = baseline_wait(study.scenario, state, job_id, history, poll_seconds=study.poll_seconds, mode=study.mode)
    return band, base


def _rank(seed: int, job_id: str) -> bytes:
    return hashlib.sha256(f"{seed}:{job_id}".encode()).digest()


def select_jobs(ids: Sequence[str], seed: int, n_jobs: int | None) -> set[str]:
    """All of ``ids``, or the ``n_jobs`` of them with the smallest hash of (seed, id)."""
    if n_jobs is None or n_jobs >= len(ids):
        return set(ids)
    return set(sorted(ids, key=lambda i: _rank(seed, i))[:n_jobs])


def _coverage(rows: Sequence[tuple[float, float, float, float]]) -> float:
    """The share of (p10, p50, p90, actual) with p10 <= actual <= p90."""
    if not rows:
        return 0.0
    inside = sum(1 for p10, _, p90, actual in rows if p10 - 1e-9 <= actual <= p90 + 1e-9)
    return round(inside / len(rows), 4)


def _mdae(rows: Sequence[tuple[float, float, float, float]]) -> float:
    """The nearest-rank median of |p50 - actual|."""
    return float(nearest_rank([abs(p50 - actual) for _, p50, _, actual in rows], 50))


def _figures(rows: Sequence[tuple[float, float, float, float]]) -> dict[str, Any]:
    return {"sampled": len(rows), "coverage_p10_p90": _coverage(rows), "mdae_p50_s": _mdae(rows)}


@dataclass(frozen=True)
class Backtest:
    """A backtest's answer: ``doc``, the JSON document, whose ``summary.per_team`` entries carry
    the team's ``baseline`` beside its band, as the summary carries the overall one; and
    ``uncalibrated``, the coverage of the replays' bands before calibration (``overall`` and
    per team), for comparison."""

    doc: dict[str, Any]
    uncalibrated: dict[str, float] = field(default_factory=dict)

    @property
    def baseline_per_team(self) -> dict[str, dict[str, Any]]:
        """Each team's baseline figures (``sampled``, ``coverage_p10_p90``, ``mdae_p50_s``), as the report reads them."""
        return {name: {"sampled": t["sampled"], **t["baseline"]} for name, t in self.doc["summary"]["per_team"].items()}


def backtest(scenario: Scenario, jobs: Sequence[Job], *, samples: int, seed: int, poll_seconds: float,
             n_jobs: int | None = None, mode: str = RECLAIM, executor_of: Callable[[EtaStudy], Any] | None = None,
             progress: Callable[[int, int], None] | None = None, calibrated: bool = True) -> dict[str, Any]:
    """The backtest's JSON document (``samples``, ``seed``, ``jobs``, ``summary``; see docs/eta.md);
    the arguments are :func:`run_backtest`'s."""
    return run_backtest(scenario, jobs, samples=samples, seed=seed, poll_seconds=poll_seconds, n_jobs=n_jobs,
                        mode=mode, executor_of=executor_of, progress=progress, calibrated=calibrated).doc


def run_backtest(scenario: Scenario, jobs: Sequence[Job], *, samples: int, seed: int, poll_seconds: float,
                 n_jobs: int | None = None, mode: str = RECLAIM, executor_of: Callable[[EtaStudy], Any] | None = None,
                 progress: Callable[[int, int], None] | None = None, calibrated: bool = True) -> Backtest:
    """The backtest (:class:`Backtest`: its JSON document and each team's baseline figures).

    ``calibrated``: each band widened or narrowed by its team's earlier errors
    (:mod:`~cdk_gpu_share.core.eta.calibrate`); False: the replays' bands as they are.

    ``executor_of(study)``: an executor (the quota advisor's: ``each(tasks)`` gives the results
    of :func:`run_eta_task` one at a time in the tasks' order, or else ``run(tasks)`` all of them;
    ``close()``, when it has one, is called at the end); default: this process.
    ``progress(done, total)`` is called after each prediction.
    """
    check_jobs(scenario, jobs, mode)  # a job that could never start has no wait to predict
    truth = capture_states(scenario, jobs, mode, (), poll_seconds=poll_seconds)
    waited = [j.id for j in jobs if truth.first_start[j.id] > j.submit_time]
    chosen = select_jobs(waited, seed, n_jobs)
    truth = capture_states(scenario, jobs, mode, chosen, poll_seconds=poll_seconds)
    order = sorted(truth.completion, key=lambda i: truth.completion[i])
    by_id = {j.id: j for j in jobs}
    study = EtaStudy(
        scenario=scenario, mode=mode, poll_seconds=float(poll_seconds),
        completions=tuple(truth.completion[i] for i in order),
        finished=tuple(FinishedJob(team=by_id[i].team, submit=by_id[i].submit_time, duration_s=by_id[i].duration_s,
                                   gpus=by_id[i].gpus, priority=by_id[i].priority, gpus_exact=by_id[i].gpus_exact)
                       for i in order),
        samples=samples, seed=seed)
    sampled = [j for j in jobs if j.id in chosen]  # trace order
    tasks = [(j.id, truth.states[j.id]) for j in sampled]
    executor = executor_of(study) if executor_of is not None else None
    results: list[tuple[Band | None, float | None]] = []
    try:
        # Every prediction is handed out at once: a worker never waits for another's slowest.
        for result in _each(executor, study, tasks):
            results.append(result)
            if progress is not None:
                progress(len(results), len(tasks))
    finally:
        close = getattr(executor, "close", None)
        if close is not None:
            close()
    return _document(scenario, study, sampled, results, truth.final_start, calibrated)


def _each(executor: Any, study: EtaStudy, tasks: Sequence[tuple[str, QueueState]]) -> Iterable[Any]:
    """The tasks' results in their order: from the executor's ``each``, else its ``run`` (all at once),
    else this process."""
    if executor is None:
        return (run_eta_task(study, t) for t in tasks)
    each = getattr(executor, "each", None)
    return each(tasks) if each is not None else executor.run(tasks)


def _bands(sampled: Sequence[Job], results: Sequence[tuple[Band | None, float | None]],
           final_start: dict[str, float], calibrated: bool) -> list[tuple[float, float, float] | None]:
    """Each sampled job's band (p10, p50, p90), calibrated on the earlier outcomes of its team when asked."""
    raw = [None if band is None else (band.wait_p10_s, band.wait_p50_s, band.wait_p90_s) for band, _ in results]
    if not calibrated:
        return raw
    return calibrate([Outcome(team=j.team, at=j.submit_time, band=b, known_at=final_start[j.id],
                              actual=final_start[j.id] - j.submit_time) for j, b in zip(sampled, raw)])


def _document(scenario: Scenario, study: EtaStudy, sampled: Sequence[Job],
              results: Sequence[tuple[Band | None, float | None]], final_start: dict[str, float],
              calibrated: bool) -> Backtest:
    bands = _bands(sampled, results, final_start, calibrated)
    raw_rows: dict[str, list[tuple[float, float, float, float]]] = {}
    entries = []
    rows: dict[str, list[tuple[float, float, float, float]]] = {}
    base_rows: dict[str, list[tuple[float, float, float, float]]] = {}
    no_history = 0
    for job, (band, base), cal in zip(sampled, results, bands):
        if band is None or base is None or cal is None:
            no_history += 1
            continue
        actual = final_start[job.id] - job.submit_time
        p10, p50, p90 = cal
        entries.append({"job_id": job.id, "team": job.team, "submit": float(job.submit_time),
                        "wait_p10_s": p10, "wait_p50_s": p50, "wait_p90_s": p90,
                        "actual_wait_s": float(actual)})
        rows.setdefault(job.team, []).append((p10, p50, p90, actual))
        raw_rows.setdefault(job.team, []).append((band.wait_p10_s, band.wait_p50_s, band.wait_p90_s, actual))
        base_rows.setdefault(job.team, []).append((base, base, base, actual))
    every = [r for team_rows in rows.values() for r in team_rows]
    base_every = [r for team_rows in base_rows.values() for r in team_rows]
    overall = _figures(every)
    summary = {
        **overall,
        "median_actual_wait_s": float(nearest_rank([r[3] for r in every], 50)),
        "no_history": no_history,
        "baseline": {"coverage_p10_p90": _coverage(base_every), "mdae_p50_s": _mdae(base_every)},
        "per_team": {name: {**_figures(rows[name]),
                            "baseline": {"coverage_p10_p90": _coverage(base_rows[name]),
                                         "mdae_p50_s": _mdae(base_rows[name])}}
                     for name in scenario.team_names if name in rows},
    }
    uncalibrated = {"overall": _coverage([r for team_rows in raw_rows.values() for r in team_rows]),
                    **{name: _coverage(team_rows) for name, team_rows in raw_rows.items()}}
    return Backtest(doc={"samples": study.samples, "seed": study.seed, "jobs": entries, "summary": summary},
                    uncalibrated=uncalibrated)
