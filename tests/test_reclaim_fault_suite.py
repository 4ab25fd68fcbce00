"""The fault suite: the real reclaim handler, cycle after cycle, against an in-memory Batch
queue (:mod:`tests.batch_model`) behind real boto3 clients, under seeded random faults.

Each schedule (one seed) draws a queue (page size, listing lag, time a stop takes) and
fault rates (throttling, 5xx before and after the change is applied, lost answers,
refused connections, repeated pages, jobs ending mid-cycle, vanished jobs), then runs
cycles (some in dry run, some on a cold start, some triggered by late RUNNABLE events),
delivering each FAILED event of a stopped job once, twice, late, or without its tags,
and redelivering it while the handler raises (Lambda's retries, then an operator
replaying the failure queue). After every cycle:

* every stop equals the planner's plan on the state read (no stop outside it; every
  planned victim stopped, ended, or named as not stopped in a log line);
* the state read is the queue's: every job listed this cycle with that status, its
  GPUs, team and priority those it was submitted with, terminating exactly when a stop
  was requested;
* no job stopped twice; no non-borrower stopped; dry run stops nothing;
* every failure logged (a cycle that raised wrote an ERROR line).

At the end of each schedule, every job the reclaimer stopped is resubmitted exactly once
with the same share, tags, definition, priority and overrides, and no other job is.

``python -m tests.test_reclaim_fault_suite [schedules]`` prints the counts.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone

import pytest

from cdk_gpu_share.aws import batch_reader as br
from cdk_gpu_share.core import reclaim
from cdk_gpu_share.lambdas.reclaim import handler as h
from tests.batch_model import QUEUE, BatchModel, Clock, Faults, lambda_context

TEAMS = [
    {"name": "team-a", "share_identifier": "teama", "guarantee": {"gpu": 3}},
    {"name": "team-b", "share_identifier": "teamb", "guarantee": {"gpu": 3}},
    {"name": "team-c", "share_identifier": "teamc", "guarantee": {"gpu": 2}, "borrow_limit_percent": 100},
]
CAPACITY = 8
SETTINGS = {"queue": "gpu-share-fairshare", "capacity": {"gpu": CAPACITY},
            "settings": {"reclaim_after_seconds": 0, "min_runtime_seconds": 0}, "teams": TEAMS}
GUARANTEE = {t["share_identifier"]: t["guarantee"]["gpu"] for t in TEAMS}
TEAM_OF = {t["name"]: t["share_identifier"] for t in TEAMS}
STATE_OF = {"RUNNABLE": "pending", "STARTING": "running", "RUNNING": "running"}
CYCLES_PER_SCHEDULE = 8
SCHEDULES = 48
BLOCKS = 4


@dataclass
class Counts:
    schedules: int = 0
    cycles: int = 0
    stops: int = 0
    requeues: int = 0
    faults: int = 0
    raised: int = 0
    violations: list = field(default_factory=list)


class Run:
    """One schedule: a model, the handler's module state, and the checks."""

    def __init__(self, seed: int, counts: Counts) -> None:
        self.seed = seed
        self.counts = counts
        rng = self.rng = random.Random(seed)
        faulty = rng.random() < 0.85
        self.model = BatchModel(
            clock=Clock(), seed=seed, page_limit=rng.choice((2, 3, 5, 1000)),
            listing_lag=(0.0, rng.choice((0.0, 5.0, 40.0))), stop_delay=(0.0, rng.choice((0.0, 30.0, 150.0))),
            end_rate=rng.choice((0.0, 0.02, 0.05)), capacity=CAPACITY,
            faults=Faults(random.Random(seed + 1), throttle=0.04 * faulty, error=0.03 * faulty,
                          error_after=0.04 * faulty, timeout_after=0.03 * faulty, connect=0.02 * faulty,
                          repeat_page=0.3 * faulty),
        )
        self.events: list[tuple[float, dict]] = []  # (deliver at, event)
        self.violations: list[str] = []

    # ------------------------------------------------------------------ workload

    def submit(self, n: int) -> None:
        for _ in range(n):
            share = self.rng.choice(sorted(GUARANTEE))
            self.model.add_job(share, "RUNNABLE", gpus=self.rng.choice((1, 1, 2)), priority=self.rng.randint(0, 2),
                               created=self.model.clock() - self.rng.uniform(0, 30))

    def churn(self) -> None:
        m = self.model
        active = sorted(jid for jid, j in m.jobs.items() if j["status"] == "RUNNING" and not j["isTerminated"])
        for jid in active:
            if self.rng.random() < 0.08:
                m.end(jid)
        if active and self.rng.random() < 0.1:
            m.vanish(self.rng.choice(active))
        self.submit(self.rng.randint(0, 3))

    def violate(self, cycle: int, text: str) -> None:
        self.violations.append(f"seed {self.seed} cycle {cycle}: {text}")

    # ------------------------------------------------------------------ one invocation

    def invoke(self, event: dict, *, dry: bool) -> tuple[dict | None, Exception | None, list[dict]]:
        out = io.StringIO()
        result = error = None
        with contextlib.redirect_stdout(out):
            try:
                import os
                os.environ["GPU_SHARE_DRY_RUN"] = "true" if dry else "false"
                result = h.handler(event, lambda_context())
            except Exception as exc:  # noqa: BLE001 - the harness records every failure
                error = exc
        lines = []
        for line in out.getvalue().splitlines():
            record = json.loads(line)
            if "event" in record:
                lines.append(record)
        return result, error, lines

    # ------------------------------------------------------------------ a cycle and its checks

    def cycle(self, k: int) -> None:
        m = self.model
        dry = self.rng.random() < 0.15
        if self.rng.random() < 0.15:
            h._cache = br.DescribeCache()  # a cold start
        terminated_at_start = {jid: j["isTerminated"] for jid, j in m.jobs.items()}
        truth = {jid: dict(j) for jid, j in m.jobs.items()}
        stops_before = dict(m.stops)
        listed_from, described_from = len(m.listed_responses), len(m.described_responses)
        faults_from = len(m.requests)
        captured: list[tuple[dict, dict]] = []
        real_plan = reclaim.plan

        def spy(state):
            result = real_plan(state)
            captured.append((json.loads(json.dumps(state)), result))
            return result

        if self.rng.random() < 0.1:  # a late RUNNABLE event: skipped when a later cycle already ran
            late = datetime.fromtimestamp(m.clock() - 600, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            event = {"source": "aws.batch", "detail-type": "Batch Job State Change", "time": late,
                     "detail": {"status": "RUNNABLE", "jobQueue": QUEUE, "jobId": "late"}}
        else:
            event = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
        reclaim.plan = spy
        try:
            result, error, lines = self.invoke(event, dry=dry)
        finally:
            reclaim.plan = real_plan
        self.counts.cycles += 1
        self.counts.faults += sum(1 for _, _, f in m.requests[faults_from:] if f)
        applied = {j: n - stops_before.get(j, 0) for j, n in m.stops.items() if n != stops_before.get(j, 0)}
        self.counts.stops += len(applied)

        if error is not None:
            self.counts.raised += 1
            if not any(r["level"] == "ERROR" for r in lines):
                self.violate(k, f"the cycle raised {error!r} without an ERROR log line")
        if result == {"skipped": True}:
            if applied:
                self.violate(k, f"a skipped cycle stopped {sorted(applied)}")
            return
        if not captured:
            if applied:
                self.violate(k, f"stopped {sorted(applied)} without a plan")
            if error is None:
                self.violate(k, "no plan and no error")
            return
        state, plan = captured[0]
        victims = {v["job"]: v for v in plan["preemptions"]}
        if dry and applied:
            self.violate(k, f"dry run stopped {sorted(applied)}")
        for jid in applied:
            if jid not in victims:
                self.violate(k, f"stopped {jid}, not in the plan {sorted(victims)}")
        for jid, n in m.stops.items():
            if n > 1:
                self.violate(k, f"{jid} stopped {n} times")
        self.check_state(k, state, truth, terminated_at_start, listed_from, described_from)
        # A borrower, as the contract counts usage (running jobs not terminating, and the
        # pending jobs the plan serves): a team that never exceeds its guarantee lends only.
        served = set(plan["served"])
        usage: dict[str, float] = {}
        for j in state["jobs"]:
            if (j["state"] == "running" and not j["terminating"]) or j["id"] in served:
                usage[j["team"]] = usage.get(j["team"], 0) + j["demand"]["gpu"]
        for jid in applied:
            team = victims[jid]["team"]
            if usage.get(team, 0) <= GUARANTEE[TEAM_OF[team]]:
                self.violate(k, f"stopped {jid} of {team}, not a borrower ({usage.get(team, 0)} GPUs)")
        if not dry:
            named = set()
            for r in lines:
                for entry in r.get("not_stopped") or ():
                    named.add(entry["job"])
            for jid in victims:
                job = m.jobs.get(jid)
                gone = job is None or job["status"] not in STATE_OF or jid in m.ended_by_itself
                if jid not in applied and not gone and jid not in named and not (job or {}).get("isTerminated"):
                    self.violate(k, f"planned victim {jid} neither stopped nor named as not stopped")

    def check_state(self, k: int, state: dict, truth: dict, terminated: dict, listed_from: int,
                    described_from: int) -> None:
        m = self.model
        listed: dict[str, set] = {}
        for r in m.listed_responses[listed_from:]:
            listed.setdefault(r["jobId"], set()).add(STATE_OF.get(r["status"]))
        described = {r["jobId"]: STATE_OF.get(r["status"]) for r in m.described_responses[described_from:]}
        seen = set()
        for j in state["jobs"]:
            jid = j["id"]
            if jid in seen:
                self.violate(k, f"{jid} twice in the state")
            seen.add(jid)
            if jid not in listed:
                self.violate(k, f"{jid} in the state but not listed this cycle")
                continue
            if j["state"] not in listed[jid] | {described.get(jid)}:
                self.violate(k, f"{jid} is {j['state']} in the state; listed {listed[jid]}, described {described.get(jid)}")
            original = m.originals[jid]
            team = TEAMS[[t["share_identifier"] for t in TEAMS].index(original["shareIdentifier"])]["name"]
            if j["team"] != team or j["demand"]["gpu"] != m.gpus(original) \
                    or j["priority"] != original["schedulingPriority"]:
                self.violate(k, f"{jid}: state {j} differs from what it was submitted with")
            if j["terminating"] != terminated.get(jid, False):
                self.violate(k, f"{jid}: terminating {j['terminating']}, Batch says {terminated.get(jid)}")
        for jid, states in listed.items():
            if jid in seen:
                continue
            job = m.jobs.get(jid)
            if job is not None and job["status"] in STATE_OF and jid in described and described[jid] in STATE_OF.values():
                self.violate(k, f"{jid} listed and described active but left out of the state")

    # ------------------------------------------------------------------ events

    def queue_events(self) -> None:
        m = self.model
        for event in m.events:
            when = m.clock() + self.rng.choice((0, 0, 0, 30, 120, 400))  # some late
            if self.rng.random() < 0.3:
                event = json.loads(json.dumps(event))
                event["detail"].pop("tags", None)  # AWS's example event has no tags
            self.events.append((when, event))
            if self.rng.random() < 0.25:  # delivered twice
                self.events.append((when + self.rng.choice((0, 5, 90)), event))
        m.events.clear()

    def deliver(self, until: float) -> None:
        due = sorted((e for e in self.events if e[0] <= until), key=lambda e: e[0])
        self.events = [e for e in self.events if e[0] > until]
        for when, event in due:
            result, error, lines = self.invoke(event, dry=self.rng.random() < 0.15)
            if error is not None:
                self.counts.raised += 1
                if not any(r["level"] in ("ERROR", "WARNING") for r in lines):
                    self.violate(-1, f"requeue raised {error!r} without a log line")
                # Lambda retries after a minute or two; then the failure queue is replayed.
                self.events.append((self.model.clock() + self.rng.choice((60, 120)), event))

    def check_requeues(self) -> None:
        m = self.model
        for jid, job in m.jobs.items():
            stopped = job["status"] == "FAILED" and (job.get("statusReason") or "").startswith(br.RECLAIM_REASON_PREFIX)
            subs = m.requeued_from(jid)
            if not stopped:
                if subs:
                    self.violate(-1, f"{jid} ({job['status']}) resubmitted {len(subs)} times, never stopped by us")
                continue
            if len(subs) != 1:
                self.violate(-1, f"{jid} stopped by the reclaimer, resubmitted {len(subs)} times")
                continue
            self.counts.requeues += 1
            sub, orig = subs[0], m.originals[jid]
            tags = {k: v for k, v in sub["tags"].items() if k != h.TAG_REQUEUE_ATTEMPT}
            want_tags = {**{k: v for k, v in orig["tags"].items() if k != h.TAG_REQUEUE_ATTEMPT},
                         br.TAG_REQUEUED_FROM: jid}
            env = [e for e in orig["container"]["environment"] if not e["name"].startswith("AWS_BATCH")]
            checks = {
                "share": (sub.get("shareIdentifier"), orig["shareIdentifier"]),
                "tags": (tags, want_tags),
                "definition": (sub["jobDefinition"], orig["jobDefinition"]),
                "priority": (sub.get("schedulingPriorityOverride"), orig["schedulingPriority"]),
                "command": (sub["containerOverrides"].get("command"), orig["container"]["command"]),
                "environment": (sub["containerOverrides"].get("environment", []), env),
                "resources": (sub["containerOverrides"].get("resourceRequirements"),
                              orig["container"]["resourceRequirements"]),
                "parameters": (sub.get("parameters", {}), orig.get("parameters", {})),
                "name": (sub["jobName"], orig["jobName"]),
            }
            for what, (got, want) in checks.items():
                if got != want:
                    self.violate(-1, f"{jid} resubmitted with {what} {got!r}, was {want!r}")

    # ------------------------------------------------------------------ the schedule

    def run(self) -> None:
        m = self.model
        h._client, h._dynamodb, h._now = m.batch, m.dynamodb, m.clock
        h._cache = br.DescribeCache()
        h._last_cycle_started = 0.0
        for share in sorted(GUARANTEE):  # a full pool, unevenly used
            for _ in range(self.rng.randint(0, 5)):
                m.add_job(share, "RUNNING", gpus=self.rng.choice((1, 2)), priority=self.rng.randint(0, 2),
                          started=m.clock() - self.rng.uniform(100, 5000))
        self.submit(self.rng.randint(1, 6))
        for k in range(CYCLES_PER_SCHEDULE):
            self.cycle(k)
            m.tick(30)
            self.queue_events()
            self.deliver(m.clock())
            m.tick(30)
            self.queue_events()
            self.deliver(m.clock())
            self.churn()
        # Drain: the remaining stops take effect, every event is delivered (and retried).
        m.faults.script.clear()
        for _ in range(40):
            m.tick(60)
            self.queue_events()
            self.deliver(m.clock())
            if not self.events and not m.fail_at:
                break
        if self.events or m.fail_at:
            self.violate(-1, f"{len(self.events)} events never processed")
        self.check_requeues()
        self.counts.schedules += 1
        self.counts.violations += self.violations


def run_schedules(seeds) -> Counts:
    counts = Counts()
    saved = (h._client, h._dynamodb, h._now, h._cache, h._last_cycle_started)
    try:
        for seed in seeds:
            Run(seed, counts).run()
    finally:
        h._client, h._dynamodb, h._now, h._cache, h._last_cycle_started = saved
    return counts


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setattr(br.time, "sleep", lambda s: None)
    monkeypatch.setenv("GPU_SHARE_QUEUE", QUEUE)
    monkeypatch.setenv("GPU_SHARE_SETTINGS", br.encode_settings(SETTINGS))
    monkeypatch.setenv(h.REQUEUE_TABLE_ENV, "gpu-share-requeue")
    monkeypatch.setenv("GPU_SHARE_DRY_RUN", "false")


@pytest.mark.parametrize("block", range(BLOCKS))
def test_fault_cycles_keep_every_invariant(block):
    seeds = range(block * SCHEDULES // BLOCKS, (block + 1) * SCHEDULES // BLOCKS)
    counts = run_schedules(seeds)
    print(f"fault suite block {block}: {counts.schedules} schedules, {counts.cycles} cycles, {counts.faults} faults"
          f" injected, {counts.stops} stops, {counts.requeues} requeues, {counts.raised} invocations raised,"
          f" {len(counts.violations)} invariant violations")
    assert counts.violations == []
    assert counts.cycles == len(seeds) * CYCLES_PER_SCHEDULE
    # The suite exercises what it claims to: stops, requeues and faults happen.
    assert counts.stops > 0 and counts.requeues > 0 and counts.faults > 0 and counts.raised > 0


def test_the_checks_catch_a_handler_that_resubmits_twice(monkeypatch):
    """The suite can fail: a requeue that ignores the ledger's verdict is caught."""
    real = h.Ledger.claim

    def forgetful(self, job_id, attempt, *, now, settle_after):
        real(self, job_id, attempt, now=now, settle_after=settle_after)
        return {"jobId": job_id, "status": "claimed", "attempt": attempt}

    monkeypatch.setattr(h.Ledger, "claim", forgetful)
    counts = run_schedules(range(3))
    assert any("resubmitted 2 times" in v or "resubmitted 3 times" in v for v in counts.violations)


def test_the_checks_catch_a_stop_retried_without_a_re_read(monkeypatch):
    real = br.call_with_retry

    def blind(client, operation, **kw):
        kw.pop("before_retry", None)
        return real(client, operation, **kw)

    monkeypatch.setattr(br, "call_with_retry", blind)
    counts = run_schedules(range(4))
    assert any("stopped 2 times" in v for v in counts.violations)


def main(argv=None) -> int:
    n = int((argv or sys.argv[1:] or [SCHEDULES])[0])
    import os
    os.environ.update({"GPU_SHARE_QUEUE": QUEUE, "GPU_SHARE_SETTINGS": br.encode_settings(SETTINGS),
                       h.REQUEUE_TABLE_ENV: "gpu-share-requeue"})
    br.time.sleep = lambda s: None
    counts = run_schedules(range(n))
    print(f"fault cycles: {counts.cycles} ({counts.schedules} schedules), faults injected {counts.faults},"
          f" stops {counts.stops}, requeues {counts.requeues}, invocations raised {counts.raised},"
          f" invariant violations {len(counts.violations)}")
    for v in counts.violations[:20]:
        print("  " + v)
    return 1 if counts.violations else 0


if __name__ == "__main__":
    sys.exit(main())
