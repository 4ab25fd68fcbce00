"""The fault suite: the real reclaim handler, cycle after cycle, against an in-memory Batch
queue and the requeue ledger in moto's DynamoDB (:mod:`tests.batch_model`), behind real
boto3 clients, under seeded random faults.

Each schedule (one seed) draws a queue (page size, listing lag up to the ledger's
allowance, time a stop takes) and fault rates: throttling (DynamoDB's own codes for the
ledger), 5xx before and after the change is applied, lost answers, refused connections,
repeated pages, jobs ending mid-cycle, vanished jobs, outages of 5-40 s of Batch or
DynamoDB, and the Lambda killed before or after any request of a requeue, or raising after
one. Backoff lets simulated time pass, and a request sent after the invocation's deadline
kills it, as Lambda would. Cycles run every minute (some in dry run, some on a cold start,
some triggered by late RUNNABLE events); each FAILED event of a stopped job is delivered
once, twice, late, or without its tags, and a failed invocation is retried as Lambda does
(+60 s, +120 s, then the on-failure queue). After every cycle:

* every stop equals the planner's plan on the state read (no stop outside it; every
  planned victim stopped, ended, or named as not stopped in a log line);
* the state read is the queue's: every job listed this cycle with that status, its
  GPUs, team and priority those it was submitted with, terminating exactly when a stop
  was requested;
* no job stopped twice, nor without its record in the requeue ledger; no non-borrower
  stopped; dry run stops nothing;
* every failure logged (a cycle that raised wrote an ERROR line; only a killed Lambda is silent).

Then the faults stop and clean cycles run. At the end of each schedule every job the
reclaimer stopped is resubmitted exactly once with the same share, tags, definition,
priority and overrides, and no other job is; no event is left in the on-failure queue
(nothing needs a redrive); the ledger holds no open or refused record.

``python -m tests.backends.fairshare.test_reclaim_fault_suite [schedules] [--seed-base N] [--every-requeue-faulted]``
prints the counts.
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
from cdk_gpu_share.core.policy import reclaim
from cdk_gpu_share.lambdas.reclaim import handler as h
from tests.batch_model import QUEUE, BatchModel, Clock, Faults, Killed, add_fault, lambda_context

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
#: Lambda's asynchronous retries: after a failed invocation, +60 s, then +120 s; then the
#: event goes to the on-failure destination.
LAMBDA_RETRY_DELAYS = (60, 120)
LAMBDA_TIMEOUT_SECONDS = 120
#: A fault for the first invocation of each event, when every requeue is to be faulted.
REQUEUE_FAULTS = (
    ("PutItem", ["kill_after"]), ("PutItem", ["error_after"]), ("PutItem", ["throttle"] * 3),
    ("SubmitJob", ["error_after"]), ("SubmitJob", ["timeout_after"]), ("SubmitJob", ["raise_after"]),
    ("SubmitJob", ["kill_before"]), ("SubmitJob", ["kill_after"]), ("SubmitJob", ["throttle"] * 6),
    ("UpdateItem", ["throttle"] * 6), ("UpdateItem", ["error_after"]), ("UpdateItem", ["kill_before"]),
    ("DescribeJobs", ["error"] * 6), ("ListJobs", ["error"] * 6),
)


@dataclass
class Counts:
    schedules: int = 0
    cycles: int = 0
    stops: int = 0
    requeues: int = 0
    faults: int = 0
    raised: int = 0
    killed: int = 0
    retried: int = 0
    dead_letters: int = 0
    reconciled: int = 0
    violations: list = field(default_factory=list)


class Run:
    """One schedule: a model, the handler's module state, and the checks."""

    def __init__(self, seed: int, counts: Counts, *, every_requeue_faulted: bool = False) -> None:
        self.seed = seed
        self.counts = counts
        self.every_requeue_faulted = every_requeue_faulted
        rng = self.rng = random.Random(seed)
        faulty = rng.random() < 0.85
        self.model = BatchModel(
            clock=Clock(), seed=seed, page_limit=rng.choice((2, 3, 5, 1000)),
            listing_lag=(0.0, rng.choice((0.0, 5.0, 40.0, float(h.LISTING_SETTLE_SECONDS)))),
            stop_delay=(0.0, rng.choice((0.0, 30.0, 150.0))),
            end_rate=rng.choice((0.0, 0.02, 0.05)), capacity=CAPACITY,
            faults=Faults(random.Random(seed + 1), throttle=0.04 * faulty, error=0.03 * faulty,
                          error_after=0.04 * faulty, timeout_after=0.03 * faulty, connect=0.02 * faulty,
                          repeat_page=0.3 * faulty, kill=0.03 * faulty, raise_after=0.02 * faulty),
        )
        start = self.model.clock()
        for _ in range(rng.choice((0, 1, 2)) * faulty):  # outages of 5-40 s within the schedule
            at = start + rng.uniform(0, CYCLES_PER_SCHEDULE * 60)
            self.model.outages.append((rng.choice(("batch", "dynamodb")), at, at + rng.uniform(5, 40),
                                       rng.choice(("error", "throttle", "connect"))))
        self.events: list[tuple[float, dict, int]] = []  # (deliver at, event, attempts so far)
        self.first_seen: set[str] = set()
        self.dead_letters: list[tuple[str, BaseException]] = []
        #: At the very end, cycles run in dry run: they finish requeues but start no new stops.
        self.no_more_stops = False
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
        # A job ages out of Batch's listing days after it ends; here a running one vanishes at
        # once, which is harsher. A resubmission is spared: the requeue relies on finding it
        # for a few minutes, and Batch keeps every job far longer than that.
        originals = [jid for jid in active if br.TAG_REQUEUED_FROM not in m.jobs[jid]["tags"]]
        if originals and self.rng.random() < 0.1:
            m.vanish(self.rng.choice(originals))
        self.submit(self.rng.randint(0, 3))

    def violate(self, cycle: int, text: str) -> None:
        self.violations.append(f"seed {self.seed} cycle {cycle}: {text}")

    # ------------------------------------------------------------------ one invocation

    def invoke(self, event: dict, *, dry: bool) -> tuple[dict | None, BaseException | None, list[dict]]:
        out = io.StringIO()
        result: dict | None = None
        error: BaseException | None = None
        m = self.model
        m.deadline = m.clock() + LAMBDA_TIMEOUT_SECONDS
        with contextlib.redirect_stdout(out):
            try:
                import os
                os.environ["GPU_SHARE_DRY_RUN"] = "true" if dry else "false"
                result = h.handler(event, lambda_context(LAMBDA_TIMEOUT_SECONDS, clock=m.clock))
            except Killed as exc:  # the process died: Lambda reports the invocation failed
                error = exc
                self.counts.killed += 1
            except Exception as exc:  # noqa: BLE001 - the harness records every failure
                error = exc
            finally:
                m.deadline = None
        lines = []
        for line in out.getvalue().splitlines():
            record = json.loads(line)
            if "event" in record:
                lines.append(record)
        return result, error, lines

    # ------------------------------------------------------------------ a cycle and its checks

    def cycle(self, k: int) -> None:
        m = self.model
        dry = self.rng.random() < 0.15 or self.no_more_stops
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
            if not isinstance(error, Killed) and not any(r["level"] == "ERROR" for r in lines):
                self.violate(k, f"the cycle raised {error!r} without an ERROR log line")
        for r in lines:
            if r["event"] == "reconciled":
                self.counts.reconciled += len(r["requeued"]) + len(r["found"])
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
        recorded = m.table
        for jid in applied:
            if jid not in recorded:
                self.violate(k, f"stopped {jid} without a record in the requeue ledger")
        if not dry and not isinstance(error, Killed):  # a killed Lambda logs nothing more
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
            if r["by_name"]:  # the requeue's look-up of a resubmission, not the cycle's read
                continue
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
        for jid in listed:
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
            self.events.append((when, event, 0))
            if self.rng.random() < 0.25:  # delivered twice
                self.events.append((when + self.rng.choice((0, 5, 90)), event, 0))
        m.events.clear()

    def deliver(self, until: float) -> None:
        """Invoke every event due by ``until``; a failed invocation is retried as Lambda does."""
        m = self.model
        while True:
            due = sorted((e for e in self.events if e[0] <= until), key=lambda e: e[0])
            if not due:
                return
            self.events.remove(due[0])
            when, event, attempts = due[0]
            m.clock.t = max(m.clock.t, when)
            job = event["detail"]["jobId"]
            if self.every_requeue_faulted and job not in self.first_seen:
                op, kinds = self.rng.choice(REQUEUE_FAULTS)
                add_fault(m, op, *kinds)
            self.first_seen.add(job)
            result, error, lines = self.invoke(event, dry=self.rng.random() < 0.15)
            if error is None:
                continue
            self.counts.raised += 1
            if not isinstance(error, Killed) and not any(r["level"] in ("ERROR", "WARNING") for r in lines):
                self.violate(-1, f"requeue raised {error!r} without a log line")
            if attempts < len(LAMBDA_RETRY_DELAYS):
                self.counts.retried += 1
                self.events.append((m.clock() + LAMBDA_RETRY_DELAYS[attempts], event, attempts + 1))
            else:  # a redrive is needed only if the cycle never finishes the job (checked at the end)
                self.counts.dead_letters += 1
                self.dead_letters.append((job, error))

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

    def check_ledger(self) -> None:
        for job_id, item in sorted(self.model.table.items()):
            status = item["status"]["S"]
            if status in ("stopping", "claimed", "refused"):
                self.violate(-1, f"the ledger's record of {job_id} is still {status}")

    def minute(self, k: int | None) -> None:
        """One minute: a cycle (the schedule), then events as they come."""
        m = self.model
        if k is not None:
            self.cycle(k)
        for _ in range(2):
            m.tick(30)
            self.queue_events()
            self.deliver(m.clock())

    def run(self) -> None:
        m = self.model
        h._client, h._dynamodb, h._now = m.batch, m.dynamodb, m.clock
        h._cache = br.DescribeCache()
        h._last_cycle_started = 0.0
        br.time.sleep = m.clock.sleep  # a backoff lets simulated time pass
        for share in sorted(GUARANTEE):  # a full pool, unevenly used
            for _ in range(self.rng.randint(0, 5)):
                m.add_job(share, "RUNNING", gpus=self.rng.choice((1, 2)), priority=self.rng.randint(0, 2),
                          started=m.clock() - self.rng.uniform(100, 5000))
        self.submit(self.rng.randint(1, 6))
        for k in range(CYCLES_PER_SCHEDULE):
            self.minute(k)
            self.churn()
        # The faults stop; clean cycles run every minute until every stop has taken effect,
        # every event was handled and the ledger has nothing open.
        m.faults = Faults(random.Random(self.seed + 2))
        m.outages.clear()
        m.end_rate = 0.0
        for k in range(CYCLES_PER_SCHEDULE, CYCLES_PER_SCHEDULE + 50):
            self.no_more_stops = k >= CYCLES_PER_SCHEDULE + 30  # reclaim may go on for a while
            self.minute(k)
            if not self.events and not m.fail_at and not self.open_records():
                break
        for _ in range(2):  # and a few more
            self.minute(None)
        if self.events or m.fail_at:
            self.violate(-1, f"{len(self.events)} events never processed")
        self.check_requeues()
        self.check_ledger()
        for job, error in self.dead_letters:
            if len(m.requeued_from(job)) != 1:
                self.violate(-1, f"the event of {job} went to the on-failure queue ({error!r}): it needs a redrive")
        self.counts.schedules += 1
        self.counts.violations += self.violations

    def open_records(self) -> bool:
        return any(i["status"]["S"] in ("stopping", "claimed") for i in self.model.table.values())


def run_schedules(seeds, *, every_requeue_faulted: bool = False) -> Counts:
    counts = Counts()
    saved = (h._client, h._dynamodb, h._now, h._cache, h._last_cycle_started, br.time.sleep)
    try:
        for seed in seeds:
            Run(seed, counts, every_requeue_faulted=every_requeue_faulted).run()
    finally:
        h._client, h._dynamodb, h._now, h._cache, h._last_cycle_started, br.time.sleep = saved
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
    print(summary(counts))
    assert counts.violations == []
    assert counts.cycles >= len(seeds) * CYCLES_PER_SCHEDULE
    # The suite exercises what it claims to: stops, requeues, faults, kills, Lambda's
    # retries and the cycle's reconciliation all happen.
    assert counts.stops > 0 and counts.requeues > 0 and counts.faults > 0 and counts.raised > 0
    assert counts.killed > 0 and counts.retried > 0 and counts.reconciled > 0


def test_every_requeue_faulted_needs_no_redrive():
    counts = run_schedules(range(100, 112), every_requeue_faulted=True)
    print(summary(counts))
    assert counts.violations == [] and counts.dead_letters == 0
    assert counts.requeues > 0 and counts.reconciled > 0


def test_fault_cycles_keep_every_invariant_with_the_checkpoint_order(monkeypatch):
    """The same invariants while each cycle also records new runs (TagResource under the same faults)."""
    settings = {**SETTINGS, "settings": {**SETTINGS["settings"], "victim_order": "checkpoint"},
                "teams": [{**t, "checkpoint_seconds": 300} for t in TEAMS]}
    monkeypatch.setenv("GPU_SHARE_SETTINGS", br.encode_settings(settings))
    tagged: list[tuple[str, dict]] = []
    real_tag = BatchModel._TagResource

    def spy(self, p):
        out = real_tag(self, p)
        tagged.append((p["resourceArn"], dict(p["tags"])))
        return out

    monkeypatch.setattr(BatchModel, "_TagResource", spy)
    counts = run_schedules(range(200, 212))
    print(summary(counts))
    assert counts.violations == []
    assert counts.stops > 0 and counts.requeues > 0 and counts.faults > 0
    assert tagged and all(set(tags) == {br.TAG_BORROWED} for _, tags in tagged)


def summary(counts: Counts) -> str:
    return (f"fault cycles: {counts.cycles} ({counts.schedules} schedules), faults injected {counts.faults},"
            f" stops {counts.stops}, requeues {counts.requeues} (finished by the cycle {counts.reconciled}),"
            f" invocations raised {counts.raised} (killed {counts.killed}), Lambda retries {counts.retried},"
            f" events to the on-failure queue {counts.dead_letters}, invariant violations {len(counts.violations)}")


def test_the_checks_catch_a_handler_that_resubmits_twice(monkeypatch):
    """The suite can fail: a requeue that ignores the ledger's verdict (takes every record for
    its own, open and held by it) is caught."""
    from cdk_gpu_share.lambdas.reclaim import requeue as rq

    real = rq.Requeue.drive

    def forgetful(self, job_id, record, attempt):
        return real(self, job_id, {**record, "status": "claimed", "attempt": attempt}, attempt)

    monkeypatch.setattr(rq.Requeue, "drive", forgetful)
    counts = run_schedules(range(3))
    assert any("resubmitted 2 times" in v or "resubmitted 3 times" in v for v in counts.violations)


def test_the_checks_catch_a_stop_retried_without_a_re_read(monkeypatch):
    real = br.call_with_retry

    def blind(client, operation, **kw):
        kw.pop("before_retry", None)
        return real(client, operation, **kw)

    monkeypatch.setattr(br, "call_with_retry", blind)
    counts = run_schedules(range(12))
    assert any("stopped 2 times" in v for v in counts.violations)


def test_the_checks_catch_an_unknown_submit_taken_for_one_not_applied(monkeypatch):
    """The suite can fail: a requeue that treats a SubmitJob of unknown outcome as never
    applied (and so lets the next attempt submit at once) is caught resubmitting twice."""
    from cdk_gpu_share.lambdas.reclaim import requeue as rq

    real = rq.submit_once

    def hopeful(*args, **kwargs):
        outcome, value = real(*args, **kwargs)
        return ("not_applied" if outcome == "unknown" else outcome), value

    monkeypatch.setattr(rq, "submit_once", hopeful)
    counts = run_schedules(range(115, 125), every_requeue_faulted=True)
    assert any("resubmitted 2 times" in v for v in counts.violations)


def test_the_checks_catch_a_requeue_left_to_its_event(monkeypatch):
    """The suite can fail: without the cycle's reconciliation, faulted requeues end in the
    on-failure queue or are never finished."""
    monkeypatch.setattr(h, "reconcile", lambda *a, **k: {"requeued": [], "found": [], "deferred": [],
                                                         "errors": [], "oldest_open_seconds": 0.0})
    counts = run_schedules(range(100, 104), every_requeue_faulted=True)
    assert any("still claimed" in v or "resubmitted 0 times" in v for v in counts.violations)


def main(argv=None) -> int:
    import argparse
    import os
    import time

    parser = argparse.ArgumentParser(description="Run the reclaim fault suite for many schedules.")
    parser.add_argument("schedules", nargs="?", type=int, default=SCHEDULES)
    parser.add_argument("--seed-base", type=int, default=0)
    parser.add_argument("--every-requeue-faulted", action="store_true",
                        help="give the first invocation of every FAILED event a fault of its requeue")
    args = parser.parse_args(argv)
    os.environ.update({"GPU_SHARE_QUEUE": QUEUE, "GPU_SHARE_SETTINGS": br.encode_settings(SETTINGS),
                       h.REQUEUE_TABLE_ENV: "gpu-share-requeue"})
    started = time.process_time()
    counts = run_schedules(range(args.seed_base, args.seed_base + args.schedules),
                           every_requeue_faulted=args.every_requeue_faulted)
    print(summary(counts) + f"; {time.process_time() - started:.1f} s CPU")
    for v in counts.violations[:20]:
        print("  " + v)
    return 1 if counts.violations else 0


if __name__ == "__main__":
    sys.exit(main())
