"""Replay the Alibaba OpenB trace against its 4-team scenario in every mode.

    .venv/bin/python benchmarks/policy.py [--data DIR] [--poll-seconds 60]
                                          [--checkpoint-seconds 600]

Prints, side by side for static / share / share+reclaim (and share+reclaim with
checkpoints): utilization, waits p50/p95/p99 per team, wait GPU-hours, preemptions,
lost GPU-hours and simulation time; then the fluid limits (GPU-hours of demand above
capacity with a perfectly shared pool, and with strict partitions) and the targets.
Figures, not assertions.

Data: Alibaba cluster-trace-gpu-v2023 (Weng et al., "Beware of Fragmentation:
Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC 2023),
converted by :mod:`cdk_gpu_share.core.records.trace` (6,203 jobs); ``--data`` and the scenario:
``alibaba_trace.py``.
"""

from __future__ import annotations

import argparse
import io
import sys
import time

import alibaba_trace

from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.records import trace


def hours(s: float) -> str:
    return f"{s / 3600:,.1f}h"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    alibaba_trace.add_data_argument(ap)
    ap.add_argument("--poll-seconds", type=float, default=60.0)
    ap.add_argument("--checkpoint-seconds", type=float, default=600.0)
    args = ap.parse_args(argv)

    why = alibaba_trace.missing(args.data)
    if why:
        print(why)
        return 0
    pods = args.data / alibaba_trace.POD_LIST

    t0 = time.perf_counter()
    converted = trace.convert_openb(pods)
    scenario = sim.parse_scenario(alibaba_trace.scenario(), source=str(alibaba_trace.CONFIG))
    jobs = sim.parse_jobs(io.StringIO(trace.trace_text(converted)), scenario, source=str(pods))
    t_convert = time.perf_counter() - t0
    reclaim_after = scenario.state.settings.reclaim_after_seconds
    print(f"trace: {pods} -> {len(jobs)} jobs (converted and parsed in {t_convert:.2f}s)")
    print(f"scenario: {alibaba_trace.CONFIG.name}: pool {scenario.capacity:g} GPUs; "
          + ", ".join(f"{t.name} {scenario.guarantee(t.name):g} ({t.sharing})" for t in scenario.teams)
          + f"; reclaim after {reclaim_after:g}s; poll {args.poll_seconds:g}s")
    print()

    runs = []
    for label, mode, ckpt in [
        ("static", "static", None),
        ("share", "share", None),
        ("share+reclaim", "share+reclaim", None),
        (f"+ckpt {args.checkpoint_seconds:g}s", "share+reclaim", args.checkpoint_seconds),
    ]:
        r = sim.simulate(scenario, jobs, mode, poll_seconds=args.poll_seconds, checkpoint_seconds=ckpt)
        runs.append((label, r, r.to_dict()))

    labels = [label for label, _, _ in runs]
    rows: list[tuple[str, ...]] = [("", *labels)]
    rows.append(("completed", *(f"{d['completed']}/{d['jobs']}" for _, _, d in runs)))
    rows.append(("utilization", *(f"{d['utilization'] * 100:.1f}%" for _, _, d in runs)))
    rows.append(("wait GPU-hours", *(f"{d['wait_gpu_hours']:,.0f}" for _, _, d in runs)))
    rows.append(("preemptions", *(str(d["preemptions"]) for _, _, d in runs)))
    rows.append(("lost GPU-hours", *(f"{d['lost_gpu_seconds'] / 3600:,.1f}" for _, _, d in runs)))
    rows.append(("window", *(f"{(d['window_s'][1] - d['window_s'][0]) / 86400:.1f}d" for _, _, d in runs)))
    rows.append(("planner calls", *(str(r.planner_calls) for _, r, _ in runs)))
    rows.append(("sim time", *(f"{d['sim_seconds']:.2f}s" for _, _, d in runs)))
    for name in scenario.team_names:
        rows.append((f"{name} wait p50/p95/p99", *(
            "/".join(hours(d["teams"][name][k]) for k in ("wait_p50_s", "wait_p95_s", "wait_p99_s"))
            for _, _, d in runs)))
    for name in scenario.team_names:
        rows.append((f"{name} reclaim wait p99", *(f"{d['teams'][name]['reclaim_wait_p99_s']:,.0f}s"
                                                   for _, _, d in runs)))
    for name in scenario.team_names:
        rows.append((f"{name} preempted", *(str(d["teams"][name]["preempted"]) for _, _, d in runs)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for k, row in enumerate(rows):
        print("  ".join([row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]))
        if k == 0:
            print("  ".join("-" * w for w in widths))

    ex = sim.demand_excess(scenario, jobs)
    print()
    print("limits (fluid model: every job runs from its submit time, nothing queues):")
    print(f"  demand above capacity, perfectly shared pool: {ex['shared_gpu_hours']:,.0f} GPU-hours")
    print(f"  demand above guarantee, strict partitions:    {ex['partitioned_gpu_hours']:,.0f} GPU-hours ("
          + ", ".join(f"{n} {v:,.0f}" for n, v in ex["partitioned_by_team_gpu_hours"].items()) + ")")

    print()
    print("targets (printed, not asserted):")
    for label, _, d in runs:
        ok = d["sim_seconds"] < 10
        print(f"  [{'ok' if ok else 'MISS'}] {label}: simulated in {d['sim_seconds']:.2f}s (< 10s)")
    bound = args.poll_seconds + reclaim_after + 60
    share_d = runs[1][2]
    reclaim_d = runs[2][2]
    for name in scenario.team_names:
        w = reclaim_d["teams"][name]["reclaim_wait_p99_s"]
        print(f"  [{'ok' if w <= bound else 'MISS'}] {name}: reclaim wait p99 {w:,.0f}s in share+reclaim "
              f"(share: {share_d['teams'][name]['reclaim_wait_p99_s']:,.0f}s), bound poll + reclaim_after + 60 = {bound:g}s")
    st, sh = runs[0][2]["wait_gpu_hours"], share_d["wait_gpu_hours"]
    print(f"  [{'ok' if sh < st else 'MISS'}] share waits {sh:,.0f} GPU-hours, static {st:,.0f} "
          f"(x{st / sh if sh else float('inf'):.1f} less)")
    lost, lost_ck = reclaim_d["lost_gpu_seconds"], runs[3][2]["lost_gpu_seconds"]
    print(f"  [{'ok' if lost_ck < lost else 'MISS'}] checkpoints every {args.checkpoint_seconds:g}s: lost "
          f"{lost_ck:,.0f} GPU-seconds instead of {lost:,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
