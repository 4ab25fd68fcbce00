#!/usr/bin/env python3
"""Synth time of the default platform and of a 50-team platform, relative to an empty CDK app.

Each app runs in a fresh process, as `cdk synth` runs it (jsii's Node runtime starts
every time); each is run REPEAT times, interleaved, and the medians are compared, so
that the ratios are measured in one run on this shared, noisy machine.

Targets (printed, never asserted): default platform <= 1.5x the empty app,
50 teams <= 2.5x.

Where the time goes (a Node CPU profile of the default platform, NODE_OPTIONS=--cpu-prof):
every app, the empty one included, pays 1.3-1.9 s to start CloudFormation's rule engine
(WebAssembly) that @aws-cdk/core:validateAgainstDefaultRules turns on. Beyond that, the
default platform spends ~1.2 s in Node loading the aws-cdk-lib modules it uses (batch, ec2,
lambda, events, cloudwatch, sqs, logs, iam...), ~0.6 s running the rules on its templates,
and the Python side of building ~100 constructs over jsii; cdk-nag adds ~0.6 s
(`-c nag=false` skips it at synth; the tests always run it).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
REPEAT = int(os.environ.get("REPEAT", "3"))

EMPTY_APP = "import aws_cdk as cdk\napp = cdk.App()\napp.synth()\n"


def fifty_teams() -> dict:
    teams = [
        {
            "name": f"team-{i:02d}",
            "guarantee": {"ml.p5.48xlarge": 1, "g5.xlarge": 1},
            "sharing": "lend_and_borrow",
            "borrow_limit_percent": 100,
            "fair_share_weight": 2,
        }
        for i in range(50)
    ]
    return {
        "platform": {"name": "fifty"},
        "teams": teams,
        "hyperpod": {
            "cluster_arn": "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456",
            "capacity": {"ml.p5.48xlarge": 50},
        },
        "fairshare": {"capacity": {"g5.xlarge": 50}},
    }


def run(cmd: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="bench-synth-"))
    (work / "empty.py").write_text(EMPTY_APP)
    (work / "fifty.yaml").write_text(yaml.safe_dump(fifty_teams()))
    # The default platform without its classic fair-share fleet: the quota-management part alone.
    quota_only = yaml.safe_load((ROOT / "platform.yaml").read_text())
    quota_only.pop("fairshare")
    for team in quota_only["teams"]:
        team["guarantee"] = {k: v for k, v in team["guarantee"].items() if k.startswith("ml.")}
    (work / "quota-only.yaml").write_text(yaml.safe_dump(quota_only))
    node_bin = ROOT / "node_modules" / ".bin"
    base_env = dict(os.environ, PATH=f"{node_bin}{os.pathsep}{os.environ['PATH']}")
    # The context `cdk synth` would pass: cdk.json's feature flags, for every app alike.
    flags = {k: v for k, v in json.loads((ROOT / "cdk.json").read_text())["context"].items() if k.startswith("@")}
    cases = {
        "empty app": ([sys.executable, str(work / "empty.py")], None),
        "default platform (3 teams)": ([sys.executable, "app.py"], str(ROOT / "platform.yaml")),
        "default, quota shares only": ([sys.executable, "app.py"], str(work / "quota-only.yaml")),
        "default, cdk-nag off": ([sys.executable, "app.py"], str(ROOT / "platform.yaml")),
        "50-team platform": ([sys.executable, "app.py"], str(work / "fifty.yaml")),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(REPEAT):
        for name, (cmd, config) in cases.items():
            env = dict(base_env, CDK_OUTDIR=str(work / f"out-{i}-{len(times[name])}-{abs(hash(name))}"))
            extra = {"nag": "false"} if "nag off" in name else {}
            env["CDK_CONTEXT_JSON"] = json.dumps({**flags, **extra, **({"config": config} if config else {})})
            times[name].append(run(cmd, env))
    empty = statistics.median(times["empty app"])
    print(f"synth, median of {REPEAT} fresh processes each (interleaved):")
    targets = {"default platform (3 teams)": 1.5, "default, quota shares only": 1.5, "50-team platform": 2.5}
    for name, samples in times.items():
        med = statistics.median(samples)
        ratio = med / empty
        target = targets.get(name)
        note = f"  target <= {target}x: {'met' if ratio <= target else 'MISSED'}" if target else ""
        print(f"  {name:<28} {med:6.2f} s   {ratio:4.2f}x empty{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
