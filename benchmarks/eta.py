#!/usr/bin/env python3
"""The wait predictor's backtest: coverage of its band, error of its p50, and what it costs.

    .venv/bin/python benchmarks/eta.py [--data DIR] [--jobs 1000] [--samples 32] [--workers 2]
                                       [--cases sample,alibaba]

Cases:

- ``sample``: the shipped sample trace (``gpu-share trace sample``: 300 jobs, the three teams of
  ``platform.yaml``) under the ``fairshare`` backend of ``platform.yaml``;
- ``alibaba``: the Alibaba GPU trace (``--data``, default ``$GPU_SHARE_TRACE_DIR``; see
  benchmarks/alibaba_trace.py) under ``examples/alibaba-openb.yaml``, ``--jobs`` of its jobs
  that waited.

Each line: jobs predicted, coverage of [p10, p90] overall and per team with at least 50
predicted jobs (and before the band's calibration), median absolute error of p50 beside the baseline's, and the time: wall and
CPU seconds of the whole backtest (the truth replays included), with the load average, since
wall time on a shared machine says little. The figures are the same whatever the workers.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import alibaba_trace  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def sample_case():
    from cdk_gpu_share.core import scenario as sc
    from cdk_gpu_share.core import simulate as sim
    from cdk_gpu_share.core.configuration.parse import load_config
    from cdk_gpu_share.core.records import trace

    config = load_config(ROOT / "platform.yaml")
    scenario = sim.parse_scenario(sc.scenario_from_config(config, "fairshare"))
    text = trace.trace_text(trace.sample_jobs())
    jobs = sim.parse_jobs(io.StringIO(text), scenario)
    return scenario, jobs, sc.poll_seconds_of(config, "fairshare") or sim.DEFAULT_POLL_SECONDS


def alibaba_case(data: Path):
    from cdk_gpu_share.core import scenario as sc
    from cdk_gpu_share.core import simulate as sim
    from cdk_gpu_share.core.configuration.parse import load_config
    from cdk_gpu_share.core.records import trace

    config = load_config(alibaba_trace.CONFIG)
    backend = sc.choose_backend(config, None)
    scenario = sim.parse_scenario(sc.scenario_from_config(config, backend))
    text = trace.trace_text(trace.convert("alibaba-openb", str(data / alibaba_trace.POD_LIST)))
    jobs = sim.parse_jobs(io.StringIO(text), scenario)
    return scenario, jobs, sc.poll_seconds_of(config, backend) or sim.DEFAULT_POLL_SECONDS


def run(label: str, scenario, jobs, poll: float, *, n_jobs: int | None, samples: int, workers: int) -> None:
    from cdk_gpu_share.core import eta
    from cdk_gpu_share.core.advise.executors import Processes
    from cdk_gpu_share.core.advise.search import InProcess

    def executor_of(study):
        return InProcess(study, eta.run_eta_task) if workers == 1 else Processes(study, workers, eta.run_eta_task)

    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    children = os.times()
    result = eta.run_backtest(scenario, jobs, samples=samples, seed=1, poll_seconds=poll, n_jobs=n_jobs,
                              executor_of=executor_of)
    doc, raw = result.doc, result.uncalibrated
    after = os.times()
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu + (after.children_user - children.children_user) \
        + (after.children_system - children.children_system)
    s = doc["summary"]
    teams = ", ".join(f"{n} {t['coverage_p10_p90']:.2f} ({t['sampled']} jobs; before calibration {raw[n]:.2f})"
                      for n, t in s["per_team"].items() if t["sampled"] >= 50) or "none with 50 jobs"
    print(f"{label}: {s['sampled']} jobs predicted ({s['no_history']} without history), {samples} replays each; "
          f"coverage {s['coverage_p10_p90']:.2f} (before calibration {raw['overall']:.2f}, "
          f"baseline {s['baseline']['coverage_p10_p90']:.2f}); "
          f"per team {teams}; p50 error median {s['mdae_p50_s']:.0f} s (baseline {s['baseline']['mdae_p50_s']:.0f} s, "
          f"ratio {s['mdae_p50_s'] / max(s['baseline']['mdae_p50_s'], 1e-9):.2f}); median actual wait "
          f"{s['median_actual_wait_s']:.0f} s; {wall:.0f} s wall, {cpu:.0f} CPU s "
          f"({cpu / max(1, s['sampled'] + s['no_history']):.2f} CPU s a job), {workers} workers, "
          f"load {load:.1f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    alibaba_trace.add_data_argument(ap)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cases", default="sample,alibaba")
    args = ap.parse_args(argv)
    cases = args.cases.split(",")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores", flush=True)
    if "sample" in cases:
        run("sample", *sample_case(), n_jobs=None, samples=args.samples, workers=args.workers)
    if "alibaba" in cases:
        why = alibaba_trace.missing(args.data)
        if why:
            print(why, file=sys.stderr)
        else:
            run("alibaba", *alibaba_case(args.data), n_jobs=args.jobs, samples=args.samples, workers=args.workers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
