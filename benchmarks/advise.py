#!/usr/bin/env python3
"""The quota advisor on the Alibaba GPU trace: what it advises, and what that costs.

    .venv/bin/python benchmarks/advise.py [--data DIR] [--cases alibaba,grid,workers,x4,teams20,teams200,teams1000]
                                          [--repeat N] [--speedup]

The trace (``--data``, default ``$GPU_SHARE_TRACE_DIR``; see benchmarks/alibaba_trace.py) is
replayed against ``examples/alibaba-openb.yaml`` (its four QoS classes as four teams on 32
GPUs of g5.12xlarge, so the step is 4 GPUs) with the objectives printed first. Cases:

- ``alibaba``: ``--fleet size`` with 2 local processes: the advised capacity against private
  sizing (each team alone with the least guarantee that meets its own objectives, summed:
  what no sharing costs) and against the fluid bound (GPU-seconds over the submit span);
  wall time and simulations beside the size of the search space.
- ``grid``: every capacity from the least job to private sizing, each searched for a
  feasible configuration (the advisor's probe at that capacity): the least feasible capacity
  of the grid, which the bisection should find within one step.
- ``workers``: the ``--fleet size`` advice in 1 process, 2 processes and a local Ray of 2
  CPUs: wall time and speed-up (the answers must be identical, and are checked).
- ``x4``: the 16-team trace (four rotated copies of the four teams, as
  benchmarks/simulate_scale.py builds it), ``--fleet size`` with 2 processes.
- ``teams200``, ``teams1000``: 50 and 250 rotated copies (200 and 1,000 teams, 310,150 and
  1,550,750 jobs), ``--fleet size`` with 2 processes, with objectives the input misses
  (:data:`SCALE_OBJECTIVES`): the answer, or the line saying the search stopped at its
  budget, the wall and CPU time, the peak memory of this process and of its workers, and the
  simulations of each batch. ``teams20``: 5 copies, with a job budget of 32 simulations of
  its trace (:data:`SCALE_TRACES`), so that its batches are as small as 200 teams'.

``--speedup``: only the worker comparison, quickly: 1 process against 2 processes on the
Alibaba ``--fleet size`` case, medians of ``--repeat`` runs (3 unless given), the load
before and after, the answers compared byte for byte, and the ceiling from each simulation's
CPU time (the lead's check on an idle machine).

Measured, never asserted. The machine is shared: run it with ``nice`` when it is quiet, and
read the medians of ``--repeat`` runs. Targets: advised capacity at least 20 % below private
sizing on the Alibaba trace and within one step of the grid's; Alibaba ``--fleet size``
under 2 minutes, the 16-team trace under 10 minutes and the 200-team one under 15 on 2
cores; 1,000 teams answered or stopped at the budget, saying so; 2 workers (processes, Ray)
at least 1.7x one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import alibaba_trace  # noqa: E402
import simulate_scale  # noqa: E402

STEP = 4.0  # GPUs of one g5.12xlarge
#: The objectives the benchmark advises for (printed with the results).
OBJECTIVES = {
    "ls": {"wait_p95_minutes": 1440, "no_worse_than_private": True},
    "burstable": {"wait_p95_minutes": 1440, "no_worse_than_private": True},
    "be": {"wait_p95_minutes": 120, "no_worse_than_private": True},
    "guaranteed": {"wait_p95_minutes": 30, "guarantee_wait_p99_minutes": 10, "max_preempted_per_day": 0,
                   "no_worse_than_private": True},
}
PRIVATE_TARGET = 0.20
SIZE_SECONDS = {"alibaba": 120.0, "x4": 600.0, "teams20": math.inf, "teams200": 900.0, "teams1000": math.inf}
#: The scale cases' objectives: tighter than :data:`OBJECTIVES` for the two busy classes. The
#: copies on a pool as many times larger share so well that every wait is 0 (measured at 200
#: teams), so the input is also given half that pool and half each guarantee: it then misses
#: them, and the search has work to do.
SCALE_OBJECTIVES = {
    **OBJECTIVES,
    "ls": {"wait_p95_minutes": 60, "no_worse_than_private": True},
    "be": {"wait_p95_minutes": 30, "no_worse_than_private": True},
}
#: Teams of each scale case (rotated copies of the four teams).
SCALE_TEAMS = {"teams20": 20, "teams200": 200, "teams1000": 1000}
#: ``teams20``: a job budget of this many simulations of its trace, so that a batch holds at most
#: 4 candidates, as at 200 teams: how the bisection's batches fill two workers, in a minute.
SCALE_TRACES = {"teams20": 32}
SPEEDUP_TARGET = 1.7


def with_objectives(scenario: dict, objectives: dict = OBJECTIVES) -> dict:
    teams = [{**t, "objectives": objectives[t["name"].split("-")[0]]} for t in scenario["teams"]]
    return {**scenario, "teams": teams}


def alibaba(data: Path):
    scenario, jobs = simulate_scale.base(data)
    return with_objectives(scenario), jobs


def sixteen(data: Path, groups: int = 4, objectives: dict = OBJECTIVES):
    """``groups`` rotated copies of the four teams (4 * groups teams) and their trace."""
    scenario, jobs = simulate_scale.scaled(data, groups)
    raw = {"capacity": {"gpu": scenario.capacity}, "settings": {"reclaim_after_seconds": 60, "min_runtime_seconds": 0},
           "teams": [{"name": t.name, "guarantee": {"gpu": t.guarantee.get("gpu", 0)}, "sharing": t.sharing}
                     for t in scenario.teams]}
    return with_objectives(raw, objectives), jobs


def space_size(space, high: float) -> float:
    """Configurations up to capacity ``high``: guarantee vectors (sum <= C) times sharing choices."""
    choices = 1.0
    for i in range(space.n):
        choices *= len(space.sharings(i)) - 1 + len(space.percents) if not space.never_stopped[i] else 2
    total = 0.0
    capacities = [high] if space.fleet == "fixed" else [k * space.step for k in range(1, int(high / space.step) + 1)]
    for c in capacities:
        levels = int(c / space.step)
        total += math.comb(levels + space.n, space.n) * choices
    return total


def run_advice(study, space, executor, **budget):
    from cdk_gpu_share.core import advise as adv

    started = time.perf_counter()
    try:
        advice = adv.advise(study, space, executor, **budget)
    finally:
        close = getattr(executor, "close", None)
        if close is not None:
            close()
    return advice, time.perf_counter() - started


def sized(label: str, raw: dict, jobs, repeat: int) -> dict:
    from cdk_gpu_share.core import advise as adv
    from cdk_gpu_share.core.advise import executors

    study = adv.study_of(raw, jobs, poll=60.0, source=label)
    space = adv.space_of(study, step=STEP, fleet="size")
    walls, advice = [], None
    for _ in range(repeat):
        advice, wall = run_advice(study, space, executors.Processes(study, 2))
        walls.append(wall)
    assert advice is not None
    private = advice.bounds["private_gpus"]
    advised = advice.best.candidate.capacity
    wall = statistics.median(walls)
    below = 1 - advised / private if private else 0.0
    print(f"{label:<8} teams {space.n:>2}  jobs {len(jobs):>6}  advised {advised:>4.0f} GPUs  private {private:>4.0f}  "
          f"fluid {advice.bounds['fluid_gpus']:6.1f}  below private {below * 100:5.1f}%"
          + (f" (target >= {PRIVATE_TARGET * 100:.0f}%: {'met' if below >= PRIVATE_TARGET - 1e-9 else 'MISSED'})"
             if label == "alibaba" else ""))
    target = SIZE_SECONDS[label]
    print(f"{'':<8} wall {wall:7.1f} s (median of {repeat}; target < {target:.0f} s: "
          f"{'met' if wall < target else 'MISSED'})  simulations {advice.simulations}  "
          f"search space {space_size(space, advice.bounds['high_gpus']):.2e} configurations  feasible "
          f"{advice.best.feasible}")
    print(f"{'':<8} advice: " + ", ".join(f"{n} {ch.guarantee:g} {ch.sharing}"
                                         + ("" if ch.percent is None else f" {ch.percent}")
                                         for n, ch in zip(space.names, advice.best.candidate.choices)))
    return {"advice": advice, "study": study, "space": space}


def scale(label: str, data: Path) -> None:
    """200 or 1,000 teams, ``--fleet size`` with 2 processes: the answer or the budget's line,
    time, and peak memory (max RSS of this process, and of the largest worker)."""
    import resource

    from cdk_gpu_share.core import advise as adv
    from cdk_gpu_share.core.advise import executors

    started = time.perf_counter()
    raw, jobs = sixteen(data, SCALE_TEAMS[label] // 4, SCALE_OBJECTIVES)
    raw = {**raw, "capacity": {"gpu": raw["capacity"]["gpu"] // 2},
           "teams": [{**t, "guarantee": {"gpu": int(t["guarantee"]["gpu"] // 2 // STEP * STEP)}} for t in raw["teams"]]}
    study = adv.study_of(raw, jobs, poll=60.0, source=label)
    space = adv.space_of(study, step=STEP, fleet="size")
    built = time.perf_counter() - started
    cpu = time.process_time()
    pool, batches = executors.Processes(study, 2), []

    class Counted:  # each batch's simulations, in order
        def run(self, tasks):
            batches.append(len(tasks))
            return pool.run(tasks)

        def close(self):
            pool.close()

    budget = {"job_budget": SCALE_TRACES[label] * len(jobs)} if label in SCALE_TRACES else {}
    advice, wall = run_advice(study, space, Counted(), **budget)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = time.process_time() - cpu + children.ru_utime + children.ru_stime
    print(f"{label:<8} objectives: " + "; ".join(f"{n}: {json.dumps(o)}" for n, o in SCALE_OBJECTIVES.items()))
    print(f"{label:<8} teams {space.n}  jobs {len(jobs):,}  input feasible {advice.input.feasible} (worst ratio "
          f"{advice.input.worst_ratio:.2f})  advised {advice.best.candidate.capacity:g} GPUs (input "
          f"{space.input.capacity:g}, private sizing {advice.bounds['private_gpus']:g})  feasible {advice.best.feasible}")
    target = SIZE_SECONDS[label]
    print(f"{'':<8} wall {wall:7.1f} s" + (f" (target < {target:.0f} s: {'met' if wall < target else 'MISSED'})"
                                            if math.isfinite(target) else "")
          + f"  CPU {cpu_s:.0f} s (this process and its workers)  trace built in {built:.0f} s  simulations "
          f"{advice.simulations}  jobs simulated {advice.jobs_simulated:,}")
    print(f"{'':<8} peak memory: this process {own.ru_maxrss / 1024:.0f} MB, largest worker "
          f"{children.ru_maxrss / 1024:.0f} MB; load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'':<8} simulations of each batch: {', '.join(map(str, batches))}")
    for line in advice.warnings:
        print(f"{'':<8} warning: {line}")


def speedup(raw: dict, jobs, repeat: int) -> None:
    """1 process against 2 on the Alibaba ``--fleet size`` case: medians, the load, the answers."""
    from cdk_gpu_share.core import advise as adv
    from cdk_gpu_share.core.advise import executors
    from cdk_gpu_share.core.advise.search import InProcess

    study = adv.study_of(raw, jobs, poll=60.0, source="alibaba")
    space = adv.space_of(study, step=STEP, fleet="size")
    before = os.getloadavg()
    walls: dict[int, list[float]] = {1: [], 2: []}
    answers = set()
    for _ in range(repeat):
        for n in (1, 2):
            advice, wall = run_advice(study, space, InProcess(study) if n == 1 else executors.Processes(study, 2))
            walls[n].append(wall)
            answers.add(json.dumps(adv.advice_json(advice)))
    one, two = statistics.median(walls[1]), statistics.median(walls[2])
    print(f"{'speedup':<8} 1 process {one:.1f} s, 2 processes {two:.1f} s (medians of {repeat}): {one / two:.2f}x "
          f"(target >= {SPEEDUP_TARGET}x: {'met' if one / two >= SPEEDUP_TARGET else 'MISSED'}); answers identical: "
          f"{len(answers) == 1}; load before {before[0]:.1f}, after {os.getloadavg()[0]:.1f}")
    critical_path(study, space)


def grid(found: dict) -> None:
    from cdk_gpu_share.core.advise.search import InProcess, Search, capacity_bounds

    study, space, advice = found["study"], found["space"], found["advice"]
    search = Search(study, space, InProcess(study))
    sizing = search.private_sizing()
    low, high = capacity_bounds(study, space, sizing)
    least = None
    c = low
    started = time.perf_counter()
    while c <= high + 1e-9:
        ev = search.probe(c, sizing)
        print(f"{'grid':<8} capacity {c:>4.0f}  feasible {str(ev.feasible):<5}  worst ratio {ev.worst_ratio:7.2f}  "
              f"regret {ev.regret_gpu_hours:12,.1f} GPU-h")
        if ev.feasible and least is None:
            least = c
        c += space.step
    advised = advice.best.candidate.capacity
    ok = least is not None and advised <= least + space.step + 1e-9
    print(f"{'grid':<8} least feasible {least} GPUs; advised {advised:g} (target within one step: "
          f"{'met' if ok else 'MISSED'}); {search.simulations} simulations, {time.perf_counter() - started:.0f} s")


#: ``--grid``: the 14-day windows of the Alibaba trace (first day of each; the trace's jobs are
#: submitted from day 100 on), the pool and each team's guarantee (half the example's).
GRID_WINDOWS = (110, 122, 135)
GRID_DAYS = 14
GRID_CAPACITY = 16
GRID_GUARANTEES = {"ls": 8, "burstable": 4, "be": 2, "guaranteed": 2}
#: The exhaustive grid's step (GPUs): every split of the pool into guarantees on its multiples.
GRID_STEP = 2
#: The sample's three teams (``gpu-share trace sample``, 300 jobs, on 12 GPUs) and their objectives.
SAMPLE_TEAMS = (("team-a", 4), ("team-b", 4), ("team-c", 4))
SAMPLE_OBJECTIVES = {
    "team-a": {"wait_p95_minutes": 60, "no_worse_than_private": True},
    "team-b": {"wait_p95_minutes": 120},
    "team-c": {"wait_p95_minutes": 240, "max_preempted_per_day": 0},
}
#: The windows' objectives with a fixed pool: only that ``guaranteed``'s work is never stopped, so
#: every split is feasible and the advice is the one of least regret (the grid then gives that
#: team ``lend``).
GRID_FIXED_OBJECTIVES = {"guaranteed": {"max_preempted_per_day": 0}}
#: The windows' objectives with ``--fleet size``: a day at p95 for every team besides.
GRID_SIZE_OBJECTIVES = {"ls": {"wait_p95_minutes": 1440}, "burstable": {"wait_p95_minutes": 1440},
                        "be": {"wait_p95_minutes": 1440},
                        "guaranteed": {"max_preempted_per_day": 0, "wait_p95_minutes": 1440}}
#: Done when the fixed-fleet advice's regret is within this much of the grid's best.
GRID_REGRET_TOLERANCE = 0.10


def window_case(data: Path, first_day: int, objectives: dict):
    """The Alibaba jobs submitted in ``GRID_DAYS`` days from ``first_day`` (submit times from 0)
    on ``GRID_CAPACITY`` GPUs, the four teams guaranteed ``GRID_GUARANTEES``, with ``objectives``."""
    from dataclasses import replace

    scenario, jobs = simulate_scale.base(data)
    start, end = first_day * 86400.0, (first_day + GRID_DAYS) * 86400.0
    window = [replace(j, submit_time=j.submit_time - start) for j in jobs if start <= j.submit_time < end]
    teams = [{**t, "guarantee": {"gpu": GRID_GUARANTEES[t["name"]]}} for t in scenario["teams"]]
    teams = [{k: v for k, v in t.items() if k != "objectives"}
             | ({"objectives": objectives[t["name"]]} if t["name"] in objectives else {}) for t in teams]
    return {**scenario, "capacity": {"gpu": GRID_CAPACITY}, "teams": teams}, window


def sample_grid_case():
    """The shipped sample trace on 12 GPUs (three teams of 4), with :data:`SAMPLE_OBJECTIVES`."""
    import io

    from cdk_gpu_share.core import simulate as sim
    from cdk_gpu_share.core.records import trace

    raw = {"capacity": {"gpu": sum(g for _, g in SAMPLE_TEAMS)},
           "settings": {"reclaim_after_seconds": 60, "min_runtime_seconds": 0},
           "teams": [{"name": n, "guarantee": {"gpu": g}, "sharing": "lend_and_borrow", "objectives": SAMPLE_OBJECTIVES[n]}
                     for n, g in SAMPLE_TEAMS]}
    text = trace.trace_text(trace.sample_jobs(SAMPLE_TEAMS))
    return raw, sim.parse_jobs(io.StringIO(text), sim.parse_scenario(raw))


def exhaustive(study, space, capacity: float, pool, *, feasible_only: bool = False):
    """Every split of ``capacity`` into guarantees on multiples of :data:`GRID_STEP` (``lend`` for a
    team never to be stopped, else ``lend_and_borrow`` unlimited), each simulated to its end (with
    ``feasible_only``, stopped once an objective is missed): (best evaluation or None, simulations)."""
    import itertools

    from cdk_gpu_share.core.advise.evaluate import Limits, private_ref
    from cdk_gpu_share.core.advise.search import InProcess, Search
    from cdk_gpu_share.core.advise.space import Candidate, Choice

    privates = {n: private_ref(study, n, study.entitlements[n]) for n in space.names
                if study.objectives.get(n) and study.objectives[n].needs_private}
    levels = range(0, int(capacity) + 1, GRID_STEP)
    splits = []
    for gs in itertools.product(levels, repeat=space.n):
        if sum(gs) > capacity:
            continue
        c = Candidate(float(capacity), tuple(Choice(float(g), "lend") if space.never_stopped[i]
                                             else Choice(float(g), "lend_and_borrow", -1) for i, g in enumerate(gs)))
        if space.runnable(c):
            splits.append(c)
    rank = Search(study, space, InProcess(study)).rank
    best = None
    for k in range(0, len(splits), 64):  # each batch stopped early where it cannot beat the best before it
        if feasible_only:
            limits = Limits(worst_ratio=1.0)
        elif best is None:
            limits = Limits()
        elif best.feasible:
            limits = Limits(worst_ratio=1.0, regret_gpu_hours=best.regret_gpu_hours)
        else:
            limits = Limits(worst_ratio=max(1.0, best.worst_ratio))
        found = [e for e in pool.run([("evaluate", c, privates, limits) for c in splits[k:k + 64]]) if e.complete]
        best = min([*found, *([best] if best else [])], key=rank, default=None)
        if feasible_only and best is not None and best.feasible:
            break
    return best, len(splits)


def grid_compare(label: str, raw: dict, jobs, fleets: tuple[str, ...] = ("fixed", "size"), *,
                 grid: bool = True) -> list[str]:
    """The exhaustive grid's best beside the advisor's, for each of ``fleets``: table rows (markdown);
    without ``grid``, the advice alone."""
    from cdk_gpu_share.core import advise as adv
    from cdk_gpu_share.core.advise import executors

    study = adv.study_of(raw, jobs, poll=60.0, source=label)
    rows = []
    if not grid:
        return [advice_alone(label, study, fleet) for fleet in fleets]
    pool = executors.Processes(study, 2)
    try:
        if "fixed" in fleets:
            rows += _grid_fixed(label, study, pool)
        if "size" in fleets:
            rows += _grid_size(label, study, pool)
    finally:
        pool.close()
    return rows


def advice_alone(label: str, study, fleet: str) -> str:
    """The advice of one case without the grid: its answer, simulations, wall and CPU seconds
    (this process and its workers) and the load average before and after."""
    import resource

    from cdk_gpu_share.core import advise as adv
    from cdk_gpu_share.core.advise import executors

    def cpu() -> float:
        return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                   for f in ("ru_utime", "ru_stime"))

    space = adv.space_of(study, step=1, fleet=fleet)
    load, before = os.getloadavg()[0], cpu()
    advice, wall = run_advice(study, space, executors.Processes(study, 2))  # its workers ended: counted
    spent, b = cpu() - before, advice.best
    answer = (f"{b.candidate.capacity:g} GPUs" if fleet == "size" else f"{b.regret_gpu_hours:,.0f} GPU-h") \
        + f", {'feasible' if b.feasible else 'infeasible'}"
    print(f"{'advice':<8} {label:<14} {fleet}: {answer}, regret {b.regret_gpu_hours:,.1f}, {advice.simulations} "
          f"simulations, {wall:.0f} s wall, {spent:.0f} CPU s, load average {load:.1f} to {os.getloadavg()[0]:.1f}"
          + (f"; {advice.warnings[0]}" if advice.warnings else ""))
    return f"| {label} | {fleet} | {answer} | {advice.simulations} | {wall:.0f} s ({spent:.0f} CPU s) | | | | |"


def _grid_fixed(label: str, study, pool) -> list[str]:
    from cdk_gpu_share.core import advise as adv
    from cdk_gpu_share.core.advise import executors

    rows = []
    space = adv.space_of(study, step=1, fleet="fixed")
    started = time.perf_counter()
    best, n = exhaustive(study, space, space.input.capacity, pool)
    grid_s = time.perf_counter() - started
    advice, wall = run_advice(study, space, executors.Processes(study, 2))
    a, g = advice.best, best
    ratio = a.regret_gpu_hours / g.regret_gpu_hours if g is not None and g.regret_gpu_hours > 0 else math.nan
    ok = g is not None and (not g.feasible or (a.feasible and a.regret_gpu_hours
                                               <= g.regret_gpu_hours * (1 + GRID_REGRET_TOLERANCE) + 1e-9))
    print(f"{'grid':<8} {label:<14} fixed {space.input.capacity:g} GPUs: advice regret {a.regret_gpu_hours:,.1f} "
          f"(feasible {a.feasible}, {advice.simulations} simulations, {wall:.0f} s); grid best "
          f"{'none' if g is None else f'{g.regret_gpu_hours:,.1f} (feasible {g.feasible})'} ({n} splits, "
          f"{grid_s:.0f} s); advice/grid {ratio:.3f} (target <= {1 + GRID_REGRET_TOLERANCE:.2f}: "
          f"{'met' if ok else 'MISSED'})")
    rows.append(f"| {label} | fixed, {space.input.capacity:g} GPUs | {a.regret_gpu_hours:,.0f} GPU-h, "
                f"{'feasible' if a.feasible else 'infeasible'} | {advice.simulations} | {wall:.0f} s | "
                f"{'none' if g is None else f'{g.regret_gpu_hours:,.0f} GPU-h'}, "
                f"{'feasible' if g is not None and g.feasible else 'infeasible'} | {n} | {grid_s:.0f} s | "
                + (f"{ratio:.2f} ({'met' if ok else 'missed'}) |" if g is not None and g.feasible and a.feasible
                   else f"{'met' if ok else 'missed'} (the grid finds no feasible split) |"))
    return rows


def _grid_size(label: str, study, pool) -> list[str]:
    """The sized advice, and the grid at each capacity below it from the least job up (stopped
    at the first feasible split): is there a smaller capacity the grid finds feasible?"""
    from cdk_gpu_share.core import advise as adv
    from cdk_gpu_share.core.advise import executors

    rows = []
    space = adv.space_of(study, step=1, fleet="size")
    advice, wall = run_advice(study, space, executors.Processes(study, 2))
    low = max(max(space.max_job), max(study.entitlements.values()), 1.0)
    started, sims, least, c = time.perf_counter(), 0, None, math.ceil(low)
    while least is None and c <= advice.best.candidate.capacity:
        found, n = exhaustive(study, space, c, pool, feasible_only=True)
        sims += n
        if found is not None and found.feasible:
            least = c
        c += 1
    grid_s = time.perf_counter() - started
    advised = advice.best.candidate.capacity
    # The grid is searched up to the advice only: finding nothing there, its least lies above.
    ok = advice.best.feasible and (least is None or advised <= least + 1e-9)
    grid_least = f"{least} GPUs" if least is not None else f"none up to {advised:g} GPUs"
    print(f"{'grid':<8} {label:<14} size: advice {advised:g} GPUs (feasible {advice.best.feasible}, regret "
          f"{advice.best.regret_gpu_hours:,.1f}, {advice.simulations} simulations, {wall:.0f} s); grid's least "
          f"feasible {grid_least} ({sims} splits, {grid_s:.0f} s) (target advice <= grid: "
          f"{'met' if ok else 'MISSED'})")
    rows.append(f"| {label} | size | {advised:g} GPUs, {'feasible' if advice.best.feasible else 'infeasible'} | "
                f"{advice.simulations} | {wall:.0f} s | least feasible {grid_least} | {sims} | {grid_s:.0f} s | "
                f"{'met' if ok else 'missed'} |")
    return rows


def grid_cases(data: Path, only: str | None, *, grid: bool = True) -> None:
    """``--grid``: every window and the sample (or the one named by ``only``); without ``grid``
    (``--advice-only``), the advice alone."""
    cases = []
    for d in GRID_WINDOWS:
        cases.append((f"days {d}-{d + GRID_DAYS}", ("fixed",), lambda d=d: window_case(data, d, GRID_FIXED_OBJECTIVES)))
        cases.append((f"days {d}-{d + GRID_DAYS}", ("size",), lambda d=d: window_case(data, d, GRID_SIZE_OBJECTIVES)))
    cases.append(("sample", ("fixed", "size"), sample_grid_case))
    print("| case | fleet | advice | simulations | seconds | grid's best | splits | seconds | advice against the grid |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for label, fleets, make in cases:
        if only and only not in f"{label} {' '.join(fleets)}":
            continue
        raw, jobs = make()
        rows += grid_compare(label, raw, jobs, fleets, grid=grid)
    print("\n".join(rows))
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def workers(raw: dict, jobs, repeat: int) -> None:
    from cdk_gpu_share.core import advise as adv
    from cdk_gpu_share.core.advise import executors
    from cdk_gpu_share.core.advise.search import InProcess

    study = adv.study_of(raw, jobs, poll=60.0, source="alibaba")
    space = adv.space_of(study, step=STEP, fleet="size")
    runs: dict[str, list[float]] = {"1 process": [], "2 processes": [], "Ray, 2 CPUs": []}
    answers = set()
    for _ in range(repeat):
        for name, make in (("1 process", lambda: InProcess(study)),
                           ("2 processes", lambda: executors.Processes(study, 2)),
                           ("Ray, 2 CPUs", lambda: ray_executor(study))):
            executor = make()
            if executor is None:
                continue
            advice, wall = run_advice(study, space, executor)
            runs[name].append(wall)
            answers.add(json.dumps(adv.advice_json(advice)))
    critical_path(study, space)
    one = statistics.median(runs["1 process"])
    for name, walls in runs.items():
        if not walls:
            print(f"{'workers':<8} {name:<12} skipped (Ray is not installed)")
            continue
        wall = statistics.median(walls)
        speedup = one / wall
        target = "" if name == "1 process" else (f"  target >= {SPEEDUP_TARGET}x: "
                                                 f"{'met' if speedup >= SPEEDUP_TARGET else 'MISSED'}")
        print(f"{'workers':<8} {name:<12} wall {wall:7.1f} s  speed-up {speedup:4.2f}x{target}")
    print(f"{'workers':<8} answers identical: {len(answers) == 1}")


def critical_path(study, space) -> None:
    """The speed-up two workers can give this search, from CPU time, whatever the load: every
    task's CPU seconds in one process, each batch then dealt to two workers in order as the
    pool does (the next task to the first free worker); total CPU over the sum of the batches'
    makespans."""
    from cdk_gpu_share.core import advise as adv
    from cdk_gpu_share.core.advise.evaluate import run_task

    batches: list[list[float]] = []

    class Timed:
        def run(self, tasks):
            times, out = [], []
            for t in tasks:
                started = time.process_time()
                out.append(run_task(study, t))
                times.append(time.process_time() - started)
            batches.append(times)
            return out

    adv.advise(study, space, Timed())
    total = sum(sum(b) for b in batches)
    span = 0.0
    for b in batches:
        free = [0.0, 0.0]
        for t in b:
            k = free.index(min(free))
            free[k] += t
        span += max(free)
    each = sorted(t for b in batches for t in b)
    print(f"{'workers':<8} CPU s a simulation: median {statistics.median(each):.2f}, largest {each[-1]:.2f}")
    print(f"{'workers':<8} {len(batches)} batches, {sum(len(b) for b in batches)} simulations, {total:.1f} CPU s: "
          f"two workers can give {total / span:4.2f}x (critical path {span:.1f} s); wall times are "
          f"those of this machine at its load")


def ray_executor(study):
    try:
        import ray
    except ImportError:
        return None
    from cdk_gpu_share.core.advise import executors

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    return executors.RayTasks(study, "auto")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    alibaba_trace.add_data_argument(ap)
    ap.add_argument("--cases", default="alibaba,grid,workers,x4")
    ap.add_argument("--repeat", type=int, default=None, help="runs per timed case; medians are printed")
    ap.add_argument("--speedup", action="store_true",
                    help="only 1 process against 2 on the Alibaba case (medians of --repeat, 3 unless given)")
    ap.add_argument("--grid", nargs="?", const="", default=None, metavar="CASE",
                    help="the exhaustive grid's best beside the advisor's on three 14-day windows of the trace and "
                         "the sample, both fleets (CASE: only the cases whose label holds it, e.g. sample)")
    ap.add_argument("--advice-only", action="store_true",
                    help="with --grid: the advice of each case without the exhaustive grid (its CPU seconds and the "
                         "load printed)")
    args = ap.parse_args(argv)
    why = alibaba_trace.missing(args.data)
    if why and not (args.grid == "sample"):
        print(why, file=sys.stderr)
        return 0
    if args.grid is not None:
        print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
        grid_cases(args.data, args.grid or None, grid=not args.advice_only)
        return 0
    cases = args.cases.split(",")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    print("objectives: " + "; ".join(f"{n}: {json.dumps(o)}" for n, o in OBJECTIVES.items()))
    raw, jobs = alibaba(args.data)
    if args.speedup:
        speedup(raw, jobs, args.repeat or 3)
        return 0
    args.repeat = args.repeat or 1
    found = None
    if "alibaba" in cases or "grid" in cases:
        found = sized("alibaba", raw, jobs, args.repeat)
    if "grid" in cases and found is not None:
        grid(found)
    if "workers" in cases:
        workers(raw, jobs, args.repeat)
    if "x4" in cases:
        big, big_jobs = sixteen(args.data)
        sized("x4", big, big_jobs, args.repeat)
    for label in SCALE_TEAMS:
        if label in cases:
            scale(label, args.data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
