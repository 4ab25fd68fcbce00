#!/usr/bin/env python3
"""Instructions the simulator executes per job, counted by valgrind: a measure the
machine's load does not move, for comparing two versions of the code.

    .venv/bin/python benchmarks/simulate_instructions.py [--jobs 30000] [--mode share+reclaim]
                                                         [SRC ...]

Each SRC is a checkout (default: this one); its ``src/`` is imported. The trace is the
first ``--jobs`` jobs of ``simulate_scale.py``'s 1M trace (the Alibaba GPU trace's month
repeated; ``--data``: ``alibaba_trace.py``). Each count runs ``valgrind --tool=cachegrind``
once with the jobs and once with none, and prints the difference (the simulation alone: same imports, same trace
building) per job, with the ratio to the first SRC.

Why: on this shared 2-core machine CPU time moves by 15-30% with the other users' load
(two runs of the same code at load 3: 68 s and 86 s on the 1M trace), more than most
changes do; an instruction count repeats to 0.01%. It does not weigh cache misses, so
the CPU seconds of ``simulate_scale.py`` stay the figures against the targets.
Needs valgrind (``apt-get install valgrind``); prints a note and exits 0 without it.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import alibaba_trace

ROOT = Path(__file__).resolve().parents[1]

CHILD = '''
import pickle, sys
src, n, mode, trace = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.path.insert(0, src + "/src")
from cdk_gpu_share.core import simulate as sim
assert sim.__file__.startswith(src), sim.__file__
scenario, jobs = pickle.load(open(trace, "rb"))
if n:
    sim.simulate(scenario, jobs[:n], mode)
'''


def instructions(src: Path, n: int, mode: str, trace: Path, child: Path) -> int:
    done = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         sys.executable, str(child), str(src), str(n), mode, str(trace)],
        capture_output=True, text=True, check=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if not found:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("srcs", nargs="*", type=Path, default=[ROOT])
    ap.add_argument("--jobs", type=int, default=30_000)
    ap.add_argument("--mode", default="share+reclaim")
    alibaba_trace.add_data_argument(ap)
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("skipped: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 0
    why = alibaba_trace.missing(args.data)
    if why:
        print(why, file=sys.stderr)
        return 0
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import pickle

    import simulate_scale

    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.pkl"
        scenario, jobs = simulate_scale.concatenated(args.data)
        with trace.open("wb") as f:
            pickle.dump((scenario, jobs[: args.jobs]), f)
        child = Path(tmp) / "child.py"
        child.write_text(CHILD)
        first = None
        print(f"{args.mode}, first {args.jobs:,} jobs of the 1M trace (valgrind Ir, simulation alone)")
        for src in args.srcs:
            src = src.resolve()
            per_job = (instructions(src, args.jobs, args.mode, trace, child)
                       - instructions(src, 0, args.mode, trace, child)) / args.jobs
            first = per_job if first is None else first
            print(f"{per_job:>12,.0f} instructions/job  {per_job / first:5.3f}x  {src}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
