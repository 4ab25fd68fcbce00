#!/usr/bin/env python3
"""Quotas that follow the clock against static quotas, both advised, at the same fleet.

    .venv/bin/python benchmarks/windows.py [--data DIR] [--cases alibaba,sample] [--first-day N] [--days N]
                                           [--workers N]

For each case:

1. the best static advice: ``advise --fleet size`` on the teams and their objectives (no
   windows): the least capacity where every objective holds, and there the least regret;
2. windows from the trace's hours of peak demand per team (:func:`peak_windows`, in UTC);
3. the best windowed advice at that same capacity: ``advise --fleet fixed`` on the static
   advice with those windows declared (``--windows``: all of them), each team's entitlement
   the one it had before either advice. Its first phase searches the static values again from
   the static advice (and may find better ones: printed as "static, searched again"; the ratio
   is against the better of the two static advices that meet every objective);
4. both replayed in full (``share+reclaim``): queued GPU-hours (``wait_gpu_hours``), GPU-hours
   thrown away by stops, each team's wait p95 and the worst owed wait (the largest
   ``reclaim_wait_p99_s`` of any team), whether every objective holds, and the ratio of the
   windowed queued GPU-hours to the static.

Cases: ``alibaba``: ``--days`` days (default 7) of the Alibaba GPU trace from ``--first-day``
(default 110; ``--data``, default ``$GPU_SHARE_TRACE_DIR``; see benchmarks/alibaba_trace.py),
its four QoS classes as four teams guaranteed 8, 4, 2 and 2 GPUs; ``sample``: the shipped
sample trace (``gpu-share trace sample``: three teams busy in staggered halves of every 12 hours).
The trace's second 0 is read as a Monday 00:00 UTC (:data:`ORIGIN`): the windows are daily, so
only the hour of the day matters.

Measured, never asserted: whatever the ratio is, it is printed. CPU seconds (this process and its
workers) and the load average beside the wall time: the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import advise as advise_bench  # noqa: E402
import alibaba_trace  # noqa: E402

#: The clock time of each trace's second 0 (a Monday; the windows open every day).
ORIGIN = datetime(2026, 1, 5, tzinfo=timezone.utc)
#: Hours of the day are grouped in blocks of this many: a team's demand is read per block.
BLOCK_HOURS = 4
EVERY_DAY = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
#: What every team is owed on top of its own objectives: its jobs that fit its entitlement wait at
#: most an hour at p99 while its entitlement has room for them.
OWED = {"guarantee_wait_p99_minutes": 60}
#: The Alibaba case's objectives (a day at p95 for every class, ``guaranteed`` never stopped).
ALIBABA_OBJECTIVES = {name: {**o, **OWED} for name, o in advise_bench.GRID_SIZE_OBJECTIVES.items()}
SAMPLE_OBJECTIVES = {name: {**o, **OWED} for name, o in advise_bench.SAMPLE_OBJECTIVES.items()}


def peak_windows(jobs: Sequence[Any], teams: Sequence[str], block_hours: int = BLOCK_HOURS) -> list[dict]:
    """Daily windows (UTC) from each team's hours of peak demand.

    A team's demand in a block of ``block_hours`` hours of the day is the GPU-seconds of the
    jobs it submits then (summed over the trace); the block is one of its peaks when that is
    above its mean over the day's blocks. A block that is a peak of several teams goes to the one
    furthest above its mean (windows never overlap); consecutive blocks of one team, the last
    and the first of the day included, make one window, named after the team and its opening
    hour. Blocks that are no team's peak are the base."""
    blocks = 24 // block_hours
    demand = {t: [0.0] * blocks for t in teams}
    for j in jobs:
        demand[j.team][int(j.submit_time // 3600) % 24 // block_hours] += j.gpus * j.duration_s
    owner: list[str | None] = []
    for b in range(blocks):
        best: tuple[float, str] | None = None
        for t in teams:
            mean = sum(demand[t]) / blocks
            if mean > 0 and demand[t][b] > mean and (best is None or demand[t][b] / mean > best[0]):
                best = (demand[t][b] / mean, t)
        owner.append(None if best is None else best[1])
    if len(set(owner)) == 1:  # one owner all day (or none): no boundary to speak of
        return []
    first = next(b for b in range(blocks) if owner[b] != owner[b - 1])  # a block where an owner begins
    windows = []
    b = first
    while b < first + blocks:
        team, start = owner[b % blocks], b
        while b < first + blocks and owner[b % blocks] == team:
            b += 1
        if team is not None:
            opens, closes = start % blocks * block_hours, b % blocks * block_hours
            windows.append({"name": f"{team}-{opens:02d}h", "days": EVERY_DAY, "start": f"{opens:02d}:00",
                            "end": f"{closes:02d}:00", "timezone": "UTC"})
    return windows


def figures(scenario: Mapping[str, Any], jobs: Sequence[Any], origin: datetime | None) -> dict[str, Any]:
    """The full replay of ``scenario``: queued and lost GPU-hours, each team's wait p95 (minutes),
    the worst owed wait (minutes), and whether every objective holds."""
    from cdk_gpu_share.core import simulate as sim

    parsed = sim.parse_scenario(dict(scenario))
    result = sim.simulate(parsed, jobs, sim.RECLAIM, origin=origin)
    judged = sim.evaluate_run(parsed, jobs, result, poll_seconds=60.0)
    teams = result.to_dict()["teams"]
    return {
        "queued": result.wait_gpu_hours,
        "lost": result.lost_gpu_seconds / 3600.0,
        "p95": {n: t["wait_p95_s"] / 60.0 for n, t in teams.items()},
        "owed": max(t["reclaim_wait_p99_s"] for t in teams.values()) / 60.0,
        "met": all(e["met"] for per in judged.values() for e in per.values()),
    }


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def executor(study: Any, workers: int) -> Any:
    from cdk_gpu_share.core.advise import executors
    from cdk_gpu_share.core.advise.search import InProcess

    return InProcess(study) if workers == 1 else executors.Processes(study, workers)


def advised(raw: Mapping[str, Any], jobs: Sequence[Any], *, step: float, fleet: str, workers: int,
            origin: datetime | None = None) -> tuple[Any, dict[str, Any], Any]:
    """(the advice, its scenario as ``-o`` writes it, the study)."""
    from cdk_gpu_share.core import advise as adv

    study = adv.study_of(raw, jobs, poll=60.0, origin=origin)
    space = adv.space_of(study, step=step, fleet=fleet)
    pool = executor(study, workers)
    try:
        advice = adv.advise(study, space, pool)
    finally:
        close = getattr(pool, "close", None)
        if close is not None:
            close()
    return advice, adv.advised_scenario(study, advice.best.candidate), study


def compare(label: str, raw: dict, jobs: Sequence[Any], *, step: float, workers: int) -> None:
    started, cpu = time.perf_counter(), cpu_seconds()
    names = [t["name"] for t in raw["teams"]]
    from cdk_gpu_share.core import advise as adv

    static, static_scenario, _ = advised(raw, jobs, step=step, fleet="size", workers=workers)
    capacity = static.best.candidate.capacity
    windows = peak_windows(jobs, names)
    windowed_input = {**static_scenario, "windows": windows}
    windowed, windowed_scenario, study = advised(windowed_input, jobs, step=step, fleet="fixed", workers=workers,
                                                 origin=ORIGIN)
    # The windowed search's own first phase: the best static advice it found from the first one
    # (its local search may find a better one; then that is the static advice to beat).
    again = adv.advised_scenario(study, windowed.static.candidate)
    s, s2, w = figures(static_scenario, jobs, None), figures(again, jobs, ORIGIN), figures(windowed_scenario, jobs, ORIGIN)
    wall, cpu = time.perf_counter() - started, cpu_seconds() - cpu
    print(f"\n{label}: {len(jobs):,} jobs, {len(names)} teams; objectives: "
          + "; ".join(f"{t['name']} {t.get('objectives', {})}" for t in raw["teams"]))
    print(f"{label}: windows from peak demand (UTC, every day): "
          + (", ".join(f"{x['name']} {x['start']}-{x['end']}" for x in windows) or "none"))
    header = ["advice", "GPUs", "all met", "queued GPU-h", "lost GPU-h",
              *(f"p95 {n} (min)" for n in names), "worst owed p99 (min)", "simulations"]
    rows = []
    for name, f, sims in (("static", s, f"{static.simulations}"), ("static, searched again", s2, "-"),
                          ("windowed", w, f"{windowed.simulations}")):
        rows.append([name, f"{capacity:g}", "yes" if f["met"] else "NO", f"{f['queued']:,.1f}", f"{f['lost']:,.1f}",
                     *(f"{f['p95'][n]:,.1f}" for n in names), f"{f['owed']:,.1f}", sims])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.rjust(wd) for h, wd in zip(header, widths)))
    for r in rows:
        print("  ".join(c.rjust(wd) for c, wd in zip(r, widths)))
    best = min((x for x in (s, s2) if x["met"]), key=lambda x: x["queued"] + x["lost"], default=s)
    ratio = w["queued"] / best["queued"] if best["queued"] > 0 else float("nan")
    print(f"{label}: windowed / best static queued GPU-hours = {ratio:.3f}; static advice: "
          + ", ".join(f"{t['name']} {t['guarantee']['gpu']:g} {t['sharing']}" for t in static_scenario["teams"])
          + "; searched again: " + ", ".join(f"{t['name']} {t['guarantee']['gpu']:g}" for t in again["teams"]))
    print(f"{label}: windowed advice per window: "
          + "; ".join(f"{x['name']}: " + ", ".join(
              f"{t['name']} {t.get('windows', {}).get(x['name'], {}).get('guarantee', t['guarantee'])['gpu']:g}"
              for t in windowed_scenario["teams"]) for x in windows)
          + "; base: " + ", ".join(f"{t['name']} {t['guarantee']['gpu']:g}" for t in windowed_scenario["teams"]))
    print(f"{label}: wall {wall:.0f} s, CPU {cpu:.0f} s (this process and its workers), load "
          + " ".join(f"{x:.1f}" for x in os.getloadavg()))


def alibaba_case(data: Path, first_day: int, days: int) -> tuple[dict, list]:
    from dataclasses import replace

    import simulate_scale

    scenario, jobs = simulate_scale.base(data)
    start, end = first_day * 86400.0, (first_day + days) * 86400.0
    window = [replace(j, submit_time=j.submit_time - start) for j in jobs if start <= j.submit_time < end]
    teams = [{k: v for k, v in t.items() if k != "objectives"} | {"guarantee": {"gpu": advise_bench.GRID_GUARANTEES[t["name"]]},
                                                                   "objectives": ALIBABA_OBJECTIVES[t["name"]]}
             for t in scenario["teams"]]
    return {**scenario, "capacity": {"gpu": advise_bench.GRID_CAPACITY}, "teams": teams}, window


def sample_case() -> tuple[dict, list]:
    raw, jobs = advise_bench.sample_grid_case()
    teams = [{**t, "objectives": SAMPLE_OBJECTIVES[t["name"]]} for t in raw["teams"]]
    return {**raw, "teams": teams}, jobs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    alibaba_trace.add_data_argument(ap)
    ap.add_argument("--cases", default="alibaba,sample")
    ap.add_argument("--first-day", type=int, default=110)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    print(f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())} at the start; {os.cpu_count()} cores")
    for case in args.cases.split(","):
        if case == "alibaba":
            why = alibaba_trace.missing(args.data)
            if why:
                print(f"alibaba: {why}")
                continue
            raw, jobs = alibaba_case(args.data, args.first_day, args.days)
            compare(f"alibaba days {args.first_day}-{args.first_day + args.days}", raw, jobs,
                    step=float(advise_bench.GRID_STEP), workers=args.workers)
        elif case == "sample":
            raw, jobs = sample_case()
            compare("sample", raw, jobs, step=1.0, workers=args.workers)
        else:
            print(f"unknown case {case!r}: use alibaba, sample")
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
