#!/usr/bin/env python3
"""The wait predictor's backtest: coverage of its band, error of its p50, and what it costs.

    .venv/bin/python benchmarks/eta.py [--data DIR] [--jobs 1000] [--samples 32] [--workers 2]
                                       [--cases sample,alibaba]
    .venv/bin/python benchmarks/eta.py --instructions [SRC ...] [--data DIR] [--jobs 6] [--samples 8]

Cases:

- ``sample``: the shipped sample trace (``gpu-share trace sample``: 300 jobs, the three teams of
  ``platform.yaml``) under the ``fairshare`` backend of ``platform.yaml``;
- ``alibaba``: the Alibaba GPU trace (``--data``, default ``$GPU_SHARE_TRACE_DIR``; see
  benchmarks/alibaba_trace.py) under ``examples/alibaba-openb.yaml``, ``--jobs`` of its jobs
  that waited.

With ``--instructions [SRC ...]``: instead, the instructions the Alibaba backtest of ``--jobs`` jobs
at ``--samples`` replays executes in one process, counted by valgrind as ``simulate_instructions.py``
counts them (a figure the machine's load does not move), for each checkout SRC (default: this
one), with its ratio to the first. There ``--jobs`` and ``--samples`` default to 6 and 8: valgrind
runs Python about 50 times slower.

Each line: jobs predicted, coverage of [p10, p90] overall and per team with at least 50
predicted jobs (and before the band's calibration), median absolute error of p50 beside the baseline's, and the time: wall and
CPU seconds of the whole backtest (the truth replays included), with the load average, since
wall time on a shared machine says little. The figures are the same whatever the workers.
"""

from __future__ import annotations

import argparse
import io
import os
import re
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


CHILD = '''
import sys
from pathlib import Path
src, data, n, samples = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sys.path[:0] = [src + "/src", src + "/benchmarks"]
import eta
from cdk_gpu_share.core import eta as predictor
from cdk_gpu_share.core.advise.search import InProcess
assert predictor.__file__.startswith(src + "/"), predictor.__file__
scenario, jobs, poll = eta.alibaba_case(data)
if n:
    predictor.run_backtest(scenario, jobs, samples=samples, seed=1, poll_seconds=poll, n_jobs=n,
                           executor_of=lambda study: InProcess(study, predictor.run_eta_task))
'''


def instructions(srcs: list[Path], data: Path, n_jobs: int, samples: int) -> None:
    """Print the backtest's instructions for each checkout: valgrind's count with ``n_jobs`` jobs
    less its count with none (the imports and the trace, the same in both)."""
    import shutil
    import subprocess
    import tempfile

    if shutil.which("valgrind") is None:
        print("skipped: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return

    def count(src: Path, n: int, child: Path) -> int:
        done = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
             sys.executable, str(child), str(src), str(data), str(n), str(samples)],
            capture_output=True, text=True, check=True)
        found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
        if not found:
            raise RuntimeError(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
        return int(found.group(1).replace(",", ""))

    print(f"alibaba backtest, {n_jobs} jobs at {samples} replays, one process (valgrind Ir)", flush=True)
    first = None
    with tempfile.TemporaryDirectory() as tmp:
        child = Path(tmp) / "child.py"
        child.write_text(CHILD)
        for src in srcs:
            src = src.resolve()
            total = count(src, n_jobs, child) - count(src, 0, child)
            first = total if first is None else first
            print(f"{total / 1e9:8.2f} G instructions  {total / n_jobs / 1e9:6.3f} G a job  "
                  f"{total / first:5.3f}x  {src}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    alibaba_trace.add_data_argument(ap)
    ap.add_argument("--jobs", type=int, default=None, help="jobs predicted (default: 1000; with --instructions, 6)")
    ap.add_argument("--samples", type=int, default=None, help="replays a job (default: 32; with --instructions, 8)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cases", default="sample,alibaba")
    ap.add_argument("--instructions", nargs="*", type=Path, metavar="SRC",
                    help="count the Alibaba backtest's instructions for each checkout (default: this one)")
    args = ap.parse_args(argv)
    counting = args.instructions is not None
    # Under valgrind Python runs about 50 times slower: a few jobs and replays are the default there.
    args.jobs = args.jobs if args.jobs is not None else 6 if counting else 1000
    args.samples = args.samples if args.samples is not None else 8 if counting else 32
    if args.jobs < 1 or args.samples < 1:
        ap.error("--jobs and --samples take a positive number")
    if counting:
        why = alibaba_trace.missing(args.data)
        if why:
            print(why, file=sys.stderr)
            return 0
        instructions(args.instructions or [ROOT], args.data, args.jobs, args.samples)
        return 0
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
