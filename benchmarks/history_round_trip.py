#!/usr/bin/env python3
"""A simulated month through the job archive and back: how close the simulator is.

    .venv/bin/python benchmarks/history_round_trip.py [--jobs 1250] [--startup 120]

A fair-share cluster (tests/history_model.py: it decides with the reclaim planner, as the
simulator does) runs a month of the sample trace (``gpu-share trace sample``'s generator, three
teams on 4 GPUs, about 1,250 jobs over 30 days) under a known config; its Batch events are
written as the archive's Firehose objects into an in-memory S3 behind a real boto3 client;
``gpu-share trace export`` reads them back and ``gpu-share simulate --fidelity`` replays the
export. Prints the jobs exported, how many equal the trace that ran (job for job, to the
second), and the error per team and metric; then the same month with a start-up delay of
``--startup`` seconds on every run (the GPUs are held, the container runs later), whose error
is the start-up time and what it costs the other jobs; then the same month as service jobs of a
quota-management queue (Batch preempts them itself: preemption events, preempted runs named only
in the preemption summary, a details record per job), with every fifth event delivered again under
a new event id and every eleventh a day late. Target (measured, not asserted): every job equal and
every error 0 without the delay, service jobs and redeliveries included.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

CONFIG = """\
platform: {name: gpu-share}
teams:
  - {name: team-a, guarantee: {g5.xlarge: 2}}
  - {name: team-b, guarantee: {g5.xlarge: 1}, checkpoint_seconds: 600}
  - {name: team-c, guarantee: {g5.xlarge: 1}}
fairshare:
  capacity: {g5.xlarge: 4}
"""
ORIGIN = datetime(2026, 11, 1, tzinfo=timezone.utc).timestamp()
BUCKET = "gpu-share-history"


def run(jobs: int, startup: float, workdir: Path, *, service: bool = False) -> dict:
    import dataclasses

    from tests.history_model import (
        QUOTA_CONFIG,
        FairshareCluster,
        S3Model,
        ServiceJobCluster,
        firehose_objects,
        redelivered,
    )

    from cdk_gpu_share.cli import main
    from cdk_gpu_share.cli import trace_export_cmd as tx
    from cdk_gpu_share.core import scenario as sc
    from cdk_gpu_share.core import simulate as sim
    from cdk_gpu_share.core.configuration.parse import load_config
    from cdk_gpu_share.core.records import history
    from cdk_gpu_share.core.records.trace import sample_jobs, trace_text

    backend = "batch_quota" if service else "fairshare"
    path = workdir / "platform.yaml"
    path.write_text(QUOTA_CONFIG if service else CONFIG)
    config = load_config(path)
    scenario_raw = sc.scenario_from_config(config, backend)
    rows = sample_jobs([(t["name"], float(t["guarantee"]["gpu"])) for t in scenario_raw["teams"]], jobs=jobs, seed=3,
                       capacity=4)
    if service:  # a service job takes whole instances of one GPU
        rows = [dataclasses.replace(r, gpus=str(max(1, int(float(r.gpus))))) for r in rows]
    scenario = sim.parse_scenario(scenario_raw)
    trace = sim.parse_jobs(io.StringIO(trace_text(rows)), scenario)
    began = time.perf_counter()
    cluster = (ServiceJobCluster if service else FairshareCluster)(ORIGIN, startup_s=startup)
    ran = cluster.run(scenario, trace, poll_seconds=sc.poll_seconds_of(config, backend) or 60)
    events, arrivals = redelivered(cluster.events) if service else (cluster.events, None)
    s3 = S3Model()
    s3.buckets[BUCKET] = firehose_objects(events, config=history.policy_hash(config), arrivals=arrivals)
    tx.make_client = lambda service, region: s3.client  # type: ignore[assignment]
    tx.default_region = lambda: "us-east-1"  # type: ignore[assignment]
    out = workdir / "export.csv"
    last = datetime.fromtimestamp(ORIGIN + max(float(r.submit_time) for r in rows), timezone.utc)
    with contextlib.redirect_stderr(io.StringIO()):
        code = main(["trace", "export", str(path), "--from", "2026-11-01", "--to", last.strftime("%Y-%m-%d"),
                     "--bucket", BUCKET, "-o", str(out)])
    assert code == 0
    exported = list(csv.DictReader(line for line in out.read_text().splitlines() if not line.startswith("#")))
    want = {r.job_id: r.as_row() for r in rows}
    equal = sum(1 for r in exported if [r[c] for c in history.EXPORT_COLUMNS[:6]] == want.get(r["job_id"]))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["simulate", "--config", str(path), "--backend", backend, "--trace", str(out), "--fidelity",
                     "--json"])
    assert code == 0
    report = json.loads(buf.getvalue())
    outcome = {o.id: o.stops for o in ran.outcomes}
    preempted_equal = sum(1 for r in exported if int(r["preemptions"]) == outcome.get(r["job_id"]))
    return {"jobs": len(rows), "exported": len(exported), "equal": equal, "events": len(events),
            "again": len(events) - len(cluster.events), "preempted_equal": preempted_equal,
            "objects": len(s3.buckets[BUCKET]), "preemptions": ran.preemptions, "fidelity": report["fidelity"],
            "seconds": time.perf_counter() - began}


def show(label: str, r: dict) -> None:
    print(f"{label}: {r['jobs']} jobs ran ({r['preemptions']} preemptions, {r['events']} events, {r['again']} of them"
          f" delivered again, in {r['objects']} objects); exported {r['exported']}, equal to the trace {r['equal']},"
          f" preemptions equal {r['preempted_equal']}; {r['seconds']:.1f} s")
    for team, metrics in r["fidelity"].items():
        cells = ", ".join(f"{key} {m['real']:g}/{m['simulated']:g} ({m['error']:+g})" for key, m in metrics.items())
        print(f"  {team}: real/simulated (error): {cells}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1250, help="jobs of the month (default 1250: about 30 days)")
    ap.add_argument("--startup", type=float, default=120.0, help="start-up seconds of the second run (default 120)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        show("month, the model's own policy", run(args.jobs, 0.0, Path(tmp)))
        show(f"month, {args.startup:g} s start-up on every run", run(args.jobs, args.startup, Path(tmp)))
        show("month as service jobs, redelivered and late", run(args.jobs, 0.0, Path(tmp), service=True))
    print("target: every job equal and every error 0 for the model's own policy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
