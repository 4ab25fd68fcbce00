#!/usr/bin/env python3
"""The organisation's tree: the compilation gap per backend, and what the tree costs the simulator.

    .venv/bin/python benchmarks/hierarchy.py

``examples/organisation.yaml`` (two divisions, five teams, one division with a pool of its own)
with its ``kueue`` section swapped for HyperPod's and then Batch quota management's (the same
teams and groups on ``ml.p5.48xlarge``), on the shipped sample (``gpu-share trace sample`` of
those teams, 300 jobs), replayed by ``gpu-share simulate --mode share+reclaim`` three ways:
``--hierarchy tree`` (the tree's rules), ``--hierarchy compiled`` (the flat configuration the
backend deploys) and flat (the same teams without groups). Each row: total wait, the research
team's wait p95 (the team the compilation gives its division's pool), preemptions, lost work and
the CPU seconds of the run, with the load average: wall time on a shared machine says little.

Then the tree's cost against the flat replay of the same jobs: the example as shipped (Kueue)
with ``--hierarchy tree`` and without its groups, ``share+reclaim``, on the sample of its teams
and on the Alibaba GPU trace (``--data DIR``, default ``$GPU_SHARE_TRACE_DIR``; skipped with a
line when absent) converted as ``gpu-share trace convert`` does, its jobs given to the example's
five teams in turn. CPU seconds of the replay alone (trace and scenario parsed beforehand), the
median of ``--runs`` interleaved runs, and the planner calls of the tree's replay. With
``--instructions``, also the instructions each replay executes, counted by valgrind as
``simulate_instructions.py`` counts them: a figure the machine's load does not move.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from alibaba_trace import POD_LIST, add_data_argument, missing  # noqa: E402

EXAMPLE = ROOT / "examples" / "organisation.yaml"
SECTIONS: dict[str, dict[str, Any]] = {
    "hyperpod": {"cluster_arn": "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456",
                 "eks_cluster_arn": "arn:aws:eks:us-east-1:111122223333:cluster/hyperpod-eks",
                 "capacity": {"ml.p5.48xlarge": 8}},
    "batch_quota": {"capacity": {"ml.p5.48xlarge": 8}},
}


def variant(backend: str, grouped: bool = True) -> dict[str, Any]:
    """The example on ``backend`` (SageMaker's ml. types), without its groups unless ``grouped``."""
    raw = copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))
    del raw["kueue"]
    raw[backend] = copy.deepcopy(SECTIONS[backend])
    for node in raw["teams"] + raw["groups"]:
        for key in ("guarantee", "borrow_limit"):
            if key in node:
                node[key] = {f"ml.{it}": v for it, v in node[key].items()}
    if not grouped:
        del raw["groups"]
        for team in raw["teams"]:
            team.pop("group", None)
    return raw


def cli(args: list[str]) -> str:
    from cdk_gpu_share.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(args) == 0, args
    return out.getvalue()


def run(config: Path, trace: Path, hierarchy: str | None) -> tuple[dict[str, Any], float]:
    args = ["simulate", "--config", str(config), "--trace", str(trace), "--mode", "share+reclaim", "--json"]
    if hierarchy:
        args += ["--hierarchy", hierarchy]
    start = time.process_time()
    result = json.loads(cli(args))
    return result, time.process_time() - start


def kueue_example(grouped: bool) -> dict[str, Any]:
    """The example as shipped, without its groups unless ``grouped``."""
    raw = yaml.safe_load(EXAMPLE.read_text())
    if not grouped:
        del raw["groups"]
        for team in raw["teams"]:
            team.pop("group", None)
    return raw


def alibaba_of_teams(data: Path, out: Path, teams: list[str]) -> None:
    """The Alibaba pod list as the simulator's trace, its jobs given to ``teams`` in turn."""
    converted = out.with_suffix(".all.csv")
    cli(["trace", "convert", "--from", "alibaba-openb", str(data / POD_LIST), "-o", str(converted)])
    with converted.open() as f:
        rows = list(csv.DictReader(f))
    for i, row in enumerate(rows):
        row["team"] = teams[i % len(teams)]
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def parsed(config: Path, trace: Path, hierarchy: str | None) -> tuple[Any, Any]:
    """The scenario of ``config`` replayed as ``hierarchy`` says, and the jobs of ``trace``."""
    from cdk_gpu_share.core import scenario as sc
    from cdk_gpu_share.core import simulate as sim
    from cdk_gpu_share.core.configuration.parse import load_config
    from cdk_gpu_share.core.policy.organisation import as_replayed

    loaded = load_config(config)
    backend = sc.choose_backend(loaded, None)
    scenario = sim.parse_scenario(sc.scenario_from_config(as_replayed(loaded, backend, hierarchy), backend))
    return scenario, sim.load_jobs(str(trace), scenario)


def replay_cpu(config: Path, trace: Path, hierarchy: str | None) -> Any:
    """A callable replaying ``trace`` on ``config`` (parsed once), returning (CPU s, planner calls)."""
    from cdk_gpu_share.core import simulate as sim

    scenario, jobs = parsed(config, trace, hierarchy)

    def once() -> tuple[float, int]:
        start = time.process_time()
        result = sim.simulate(scenario, jobs, "share+reclaim")
        return time.process_time() - start, result.planner_calls
    return once


def replay_instructions(config: Path, trace: Path, hierarchy: str | None, tmp: Path) -> int:
    """The instructions of one replay of ``trace`` on ``config`` (valgrind, the replay alone)."""
    import pickle

    from simulate_instructions import CHILD, instructions

    scenario, jobs = parsed(config, trace, hierarchy)
    state = tmp / "replay.pkl"
    with state.open("wb") as f:
        pickle.dump((scenario, jobs), f)
    child = tmp / "child.py"
    child.write_text(CHILD)
    return (instructions(ROOT, len(jobs), "share+reclaim", state, child)
            - instructions(ROOT, 0, "share+reclaim", state, child))


def tree_cost(data: Path | None, runs: int, count: bool = False) -> None:
    """The tree's replay against the flat one of the same jobs (see the module docstring);
    ``count``: with the instructions of each replay (needs valgrind)."""
    if count and shutil.which("valgrind") is None:
        print("instructions not counted: valgrind is not installed (apt-get install valgrind)")
        count = False
    print(f"\nload average {os.getloadavg()[0]:.1f} (2 cores), median of {runs} runs")
    extra = " tree Ginstr | flat Ginstr | tree / flat |" if count else ""
    print(f"| trace | tree CPU s | flat CPU s | tree / flat | planner calls (tree) |{extra}")
    print("|---|---|---|---|---|" + "---|---|---|" * count)
    with tempfile.TemporaryDirectory() as tmp:
        configs = {}
        for grouped in (True, False):
            configs[grouped] = Path(tmp) / f"organisation-{'grouped' if grouped else 'flat'}.yaml"
            configs[grouped].write_text(yaml.safe_dump(kueue_example(grouped)))
        sample = Path(tmp) / "sample.csv"
        cli(["trace", "sample", "--config", str(configs[True]), "-o", str(sample)])
        traces = [("sample (300 jobs)", sample)]
        why = missing(data)
        if why:
            print(why)
        else:
            assert data is not None
            ali = Path(tmp) / "alibaba.csv"
            alibaba_of_teams(data, ali, [t["name"] for t in kueue_example(False)["teams"]])
            traces.append(("Alibaba pod list (6,203 jobs)", ali))
        for label, trace in traces:
            tree, flat = replay_cpu(configs[True], trace, "tree"), replay_cpu(configs[False], trace, None)
            seen: dict[str, list] = {"tree": [], "flat": []}
            for _ in range(runs):  # interleaved: the machine's load falls on both alike
                seen["tree"].append(tree())
                seen["flat"].append(flat())
            t = statistics.median(c for c, _ in seen["tree"])
            f = statistics.median(c for c, _ in seen["flat"])
            row = f"| {label} | {t:.3f} | {f:.3f} | {t / f:.1f}x | {seen['tree'][0][1]:,} |"
            if count:
                ti = replay_instructions(configs[True], trace, "tree", Path(tmp))
                fi = replay_instructions(configs[False], trace, None, Path(tmp))
                row += f" {ti / 1e9:.3f} | {fi / 1e9:.3f} | {ti / fi:.2f}x |"
            print(row, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_argument(ap)
    ap.add_argument("--runs", type=int, default=5, help="runs per replay in the tree's cost (default 5)")
    ap.add_argument("--cost-only", action="store_true", help="only the tree's cost against the flat replay")
    ap.add_argument("--instructions", action="store_true",
                    help="also count the instructions of each replay of the tree's cost (valgrind)")
    args = ap.parse_args()
    if not args.cost_only:
        compilation_gap()
    tree_cost(args.data, args.runs, args.instructions)


def compilation_gap() -> None:
    print(f"load average {os.getloadavg()[0]:.1f} (2 cores)")
    print("| backend | replay | total wait (GPU-h) | research wait p95 | preemptions | lost work (GPU-h) | CPU s |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for backend in SECTIONS:
            paths = {}
            for grouped in (True, False):
                path = Path(tmp) / f"{backend}-{'grouped' if grouped else 'flat'}.yaml"
                path.write_text(yaml.safe_dump(variant(backend, grouped)))
                paths[grouped] = path
            trace = Path(tmp) / f"{backend}.csv"
            cli(["trace", "sample", "--config", str(paths[True]), "-o", str(trace)])
            for label, config, hierarchy in (("tree", paths[True], "tree"), ("compiled", paths[True], "compiled"),
                                             ("flat, no groups", paths[False], None)):
                r, cpu = run(config, trace, hierarchy)
                p95 = r["teams"]["research"]["wait_p95_s"] / 3600
                print(f"| {backend} | {label} | {r['wait_gpu_hours']:,.0f} | {p95:.1f} h | {r['preemptions']} |"
                      f" {r['lost_gpu_seconds'] / 3600:,.1f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()
