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
The Alibaba trace is not a case here yet.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
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


def main() -> None:
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
