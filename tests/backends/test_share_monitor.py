"""The share monitor of a Batch quota-management queue: figures, EMF, faults, events, a day.

Batch is the in-memory queue of ``tests/quota_model.py`` behind a real boto3 client
(botocore validates every request and retries throttling and 5xx as the Lambda's client does).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from cdk_gpu_share.core.records import metrics
from cdk_gpu_share.core.records import share_monitor as sm
from cdk_gpu_share.lambdas.share_monitor import handler as mon
from tests.batch_model import Clock
from tests.quota_model import QUEUE, QUEUE_NAME, QuotaQueueModel

G5 = "ml.g5.xlarge"  # 1 GPU
G12 = "ml.g5.12xlarge"  # 4 GPUs
SETTINGS = {"queue": QUEUE_NAME, "capacity": {G5: 6, G12: 2}, "teams": {"team-a": "team-a", "team-b": "team-b",
                                                                          "team-c": "team-c"}}


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch):
    import time as _time

    monkeypatch.setattr(_time, "sleep", lambda s: None)  # botocore's retry backoff


class Lines(list):
    def __call__(self, line: str) -> None:
        self.append(line)

    def emf(self) -> list[dict]:
        return [r for r in map(json.loads, self) if "_aws" in r]

    def team(self, name: str, metric: str) -> list[float]:
        return [r[metric] for r in self.emf() if r.get(metrics.DIM_TEAM) == name and metric in r
                and metrics.DIM_CAUSE not in r]


def model(**kw) -> QuotaQueueModel:
    return QuotaQueueModel(shares={"team-a": {G5: 2}, "team-b": {G5: 2, G12: 1}, "team-c": {G5: 1}},
                           clock=Clock(), **kw)


# ---------------------------------------------------------------------------
# The figures


def test_borrowing_is_served_from_the_pool_first_then_lent_in_proportion_to_idle_guarantee():
    # G5: capacity 6, guarantees 2 + 2 + 1 = 5: a pool of 1. team-a uses 5 (borrows 3): 1 from
    # the pool, 2 from the idle guarantees of b (2 idle) and c (1 idle): b lends 4/3, c 2/3.
    readings = [sm.ShareReading("team-a", {G5: 2}, {G5: 5}), sm.ShareReading("team-b", {G5: 2}, {}),
                sm.ShareReading("team-c", {G5: 1}, {})]
    a, b, c = sm.share_figures(readings, {G5: 6}, now=0)
    assert (a.borrowed_gpus, a.lent_gpus) == (3, 0)
    assert b.lent_gpus == pytest.approx(4 / 3) and c.lent_gpus == pytest.approx(2 / 3)
    assert (b.idle_guarantee_gpus, c.idle_guarantee_gpus) == (2, 1)
    totals = sm.totals([a, b, c])
    pool_used = 1
    assert totals["borrowed_gpus"] == pytest.approx(totals["lent_gpus"] + pool_used)


def test_gpus_count_the_catalogue_and_waits_count_only_below_the_guarantee():
    readings = [sm.ShareReading("team-b", {G5: 2, G12: 1}, {G12: 1}, waiting_created=[100, 40]),
                sm.ShareReading("team-a", {G5: 1}, {G5: 1}, waiting_created=[10])]
    b, a = sm.share_figures(readings, {G5: 3, G12: 1}, now=160)
    assert (b.guarantee_gpus, b.used_gpus, b.used_instances) == (6, 4, 1)
    assert (b.oldest_wait_seconds, b.guarantee_wait_seconds) == (120, 120)  # 2 GPUs of its guarantee idle
    assert (a.oldest_wait_seconds, a.guarantee_wait_seconds) == (150, 0)  # at its guarantee: not the promise


def test_the_guarantee_wait_counts_only_jobs_that_would_be_within_the_guarantee():
    """team-b uses 1 of its 2 guaranteed G5 and none of its G12: a 2-G5 job (1 + 2 > 2) and a
    2-G12 job (0 + 2 > 1) can never be within it and do not count, however long they wait; a
    1-G5 job fits exactly (1 + 1 <= 2, the planner's rule) and does."""
    reading = sm.ShareReading("team-b", {G5: 2, G12: 1}, {G5: 1}, waiting_created=[0, 10, 100],
                              waiting_need=[{G5: 2}, {G12: 2}, {G5: 1}])
    (b,) = sm.share_figures([reading], {G5: 3, G12: 1}, now=160)
    assert (b.oldest_wait_seconds, b.guarantee_wait_seconds) == (160, 60)
    too_large = sm.ShareReading("team-b", {G5: 2}, {G5: 1}, waiting_created=[0], waiting_need=[{G5: 2}])
    assert sm.share_figures([too_large], {G5: 3}, now=900)[0].guarantee_wait_seconds == 0
    # A job of unknown size counts while the team is below its guarantee, not at it.
    unknown = sm.ShareReading("team-b", {G5: 2}, {G5: 1}, waiting_created=[0], waiting_need=[None])
    assert sm.share_figures([unknown], {G5: 3}, now=900)[0].guarantee_wait_seconds == 900
    at = sm.ShareReading("team-b", {G5: 2}, {G5: 2}, waiting_created=[0])
    assert sm.share_figures([at], {G5: 3}, now=900)[0].guarantee_wait_seconds == 0


@pytest.mark.parametrize("summary_sizes", [True, False], ids=["size in the listing", "size described"])
def test_a_job_too_large_for_its_guarantee_does_not_page_on_call(summary_sizes):
    """team-b waits with 2 of its G5 guarantee idle, but its only job asks for 3: it can never be
    within the guarantee, and its wait is not the lender's promise. Read from the listing's
    capacityUsage, or, when the listing has none, from DescribeServiceJob's request."""
    m = model(summary_sizes=summary_sizes)
    m.submit("team-b", {G5: 3})
    m.clock.t += 3600
    out = Lines()
    mon.read_and_publish(m.batch, QUEUE, SETTINGS, now=m.clock(), emit=out, clock=m.clock)
    assert out.team("team-b", metrics.OLDEST_WAIT_SECONDS) == [3600]
    assert out.team("team-b", metrics.GUARANTEE_WAIT_SECONDS) == [0]
    described = [p["jobId"] for op, p in m.requests if op == "DescribeServiceJob"]
    assert described == ([] if summary_sizes else ["sj0001"])
    m.submit("team-b", {G5: 2})
    m.clock.t += 60
    out = Lines()
    mon.read_and_publish(m.batch, QUEUE, SETTINGS, now=m.clock(), emit=out, clock=m.clock)
    assert out.team("team-b", metrics.GUARANTEE_WAIT_SECONDS) == [60]


def test_an_instance_type_the_catalogue_lacks_is_named():
    (f,) = sm.share_figures([sm.ShareReading("x", {"ml.future.xlarge": 1}, {})], {}, now=0)
    assert f.unknown_types == ("ml.future.xlarge",) and f.guarantee_gpus == 0


@pytest.mark.parametrize("reason,cause", [
    ("PREEMPTION_IN_PROGRESS: Cross-share preemption triggered to reclaim borrowed capacity", sm.CROSS_SHARE),
    ("PREEMPTION_IN_PROGRESS: In-share preemption triggered by a higher priority job", sm.IN_SHARE),
    ("something new", sm.UNKNOWN_CAUSE), (None, sm.UNKNOWN_CAUSE),
])
def test_the_cause_of_a_preemption_comes_from_its_reason(reason, cause):
    assert sm.preemption_cause(reason) == cause


# ---------------------------------------------------------------------------
# A reading


def test_a_reading_publishes_every_figure_of_every_team_in_emf():
    m = model()
    for _ in range(4):
        m.start(m.submit("team-a", {G5: 1}).job_id)  # a borrows 2
    m.clock.t += 300
    w = m.submit("team-b", {G5: 2})  # b waits with its G5 guarantee idle
    m.clock.t += 90
    out = Lines()
    summary = mon.read_and_publish(m.batch, QUEUE, SETTINGS, now=m.clock(), emit=out)
    assert summary["teams"] == 3 and summary["waiting"] == 1 and summary["skipped"] == 0
    assert out.team("team-a", metrics.USAGE) == [4] and out.team("team-a", metrics.BORROWED) == [2]
    assert out.team("team-b", metrics.GUARANTEE) == [6] and out.team("team-b", metrics.PENDING) == [1]
    assert out.team("team-b", metrics.GUARANTEE_WAIT_SECONDS) == [90] and w.job_id
    # G5: capacity 6, guarantees 5, pool 1: a's 2 borrowed = 1 from the pool + 1 lent by b (2 idle) and c (1).
    assert out.team("team-b", metrics.LENT) == [pytest.approx(2 / 3)]
    assert out.team("team-c", metrics.LENT) == [pytest.approx(1 / 3)]
    record = next(r for r in out.emf() if r.get(metrics.DIM_TEAM) == "team-a")
    directive = record["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "GpuShare" and directive["Dimensions"] == [["Queue", "Team"]]
    assert {d["Name"] for d in directive["Metrics"]} == {
        "UsageGpus", "UsedInstances", "GuaranteeGpus", "BorrowedGpus", "LentGpus", "IdleGuaranteeGpus",
        "PendingJobs", "OldestWaitSeconds", "GuaranteeWaitSeconds"}


def test_a_reading_costs_one_call_per_listing_page_of_each_share():
    m = model()
    for _ in range(1000):
        m.submit("team-a", {G5: 1})
    mon.read_and_publish(m.batch, QUEUE, SETTINGS, now=m.clock(), emit=Lines())
    ops = [op for op, _ in m.requests]
    # 20 shares or 3: one ListQuotaShares page; one snapshot; each share's waiting jobs: one page of 1,000.
    assert ops == ["ListQuotaShares", "GetJobQueueSnapshot"] + ["ListServiceJobs"] * 3
    listings = [p for op, p in m.requests if op == "ListServiceJobs"]
    assert [p["filters"] for p in listings] == [[{"name": "QUOTA_SHARE_NAME", "values": [t]}]
                                                for t in ("team-a", "team-b", "team-c")]
    assert {(p["maxResults"], p["jobStatus"]) for p in listings} == {(1000, "RUNNABLE")}


def test_a_flooded_share_does_not_push_the_reading_past_its_deadline(capsys):
    """team-a floods its share with 20,000 waiting jobs, and every page takes 5 s: its listing
    alone would take 100 s (the function's timeout was 60 s). The reading reads 5 pages of it,
    every other share to the end, and publishes every team; team-a is counted unread."""
    m = model(list_seconds=5)
    for _ in range(20_000):
        m.submit("team-a", {G5: 1})
    m.clock.t += 600
    b = m.submit("team-b", {G5: 1})
    m.clock.t += 60
    start, out = m.clock(), Lines()
    summary = mon.read_and_publish(m.batch, QUEUE, SETTINGS, now=m.clock(), emit=out, clock=m.clock)
    assert m.clock() - start <= mon.READ_SECONDS
    assert summary["unread"] == 1 and "error" not in summary
    assert out.team("team-a", metrics.PENDING) == [mon.MAX_PAGES * mon.PAGE_SIZE]  # what was read
    assert out.team("team-b", metrics.PENDING) == [1] and out.team("team-b", metrics.OLDEST_WAIT_SECONDS) == [60]
    assert out.team("team-c", metrics.PENDING) == [0] and b.job_id
    [queue] = [r for r in out.emf() if metrics.MONITOR_HEARTBEAT in r]
    assert (queue[metrics.MONITOR_HEARTBEAT], queue[metrics.MONITOR_UNREAD], queue[metrics.MONITOR_ERRORS]) == (1, 1, 0)
    [warning] = [r for r in logged(capsys) if r["event"] == "waiting_jobs_unread"]
    assert warning["teams"] == ["team-a"]


def test_a_slow_listing_stops_at_the_deadline_and_publishes_every_team():
    """Every page takes 20 s: the reading asks no page after its deadline, reads each share a
    page in turn (so no share waits behind another's pages), and publishes every team."""
    m = model(list_seconds=20)
    for team in ("team-a", "team-b", "team-c"):
        for _ in range(3000):
            m.submit(team, {G5: 1})
    m.start(m.submit("team-c", {G5: 1}).job_id)
    start, out = m.clock(), Lines()
    summary = mon.read_and_publish(m.batch, QUEUE, SETTINGS, now=m.clock(), emit=out, clock=m.clock)
    # 3 pages asked before the deadline (0, 20, 40 s), one a share; none at 60 s.
    assert m.clock() - start == 60 and summary["unread"] == 3
    assert {t: out.team(t, metrics.PENDING) for t in ("team-a", "team-b", "team-c")} == {
        "team-a": [1000], "team-b": [1000], "team-c": [1000]}
    assert out.team("team-c", metrics.USAGE) == [1]  # the snapshot is read whole


def test_throttling_and_server_errors_are_retried():
    m = model()
    m.start(m.submit("team-a", {G5: 1}).job_id)
    m.script = {"GetJobQueueSnapshot": ["throttle", "error"], "ListServiceJobs": ["throttle"]}
    out = Lines()
    summary = mon.read_and_publish(m.batch, QUEUE, SETTINGS, now=m.clock(), emit=out)
    assert "error" not in summary and out.team("team-a", metrics.USAGE) == [1]
    assert [op for op, _ in m.requests].count("GetJobQueueSnapshot") == 3


def logged(capsys) -> list[dict]:
    return [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]


def test_a_read_that_keeps_failing_is_logged_and_counted_not_raised(capsys):
    m = model()
    m.script = {"ListQuotaShares": ["error"] * 5}
    out = Lines()
    summary = mon.read_and_publish(m.batch, QUEUE, SETTINGS, now=m.clock(), emit=out)
    assert summary["error"].startswith("ServerException") and "reached max retries: 2" in summary["error"]
    [errors] = [r for r in out.emf() if metrics.MONITOR_ERRORS in r]
    assert errors[metrics.MONITOR_ERRORS] == 1 and out.team("team-a", metrics.USAGE) == []
    assert metrics.MONITOR_HEARTBEAT not in errors  # no reading published: no heartbeat
    assert [r["event"] for r in logged(capsys)] == ["read_failed"]


@pytest.mark.parametrize("op", ["ListQuotaShares", "ListServiceJobs", "GetJobQueueSnapshot"])
def test_an_entry_with_a_missing_field_is_logged_and_left_out(op, capsys):
    m = model()
    m.start(m.submit("team-a", {G5: 1}).job_id)
    m.submit("team-b", {G5: 1})
    m.script = {op: [None, "partial"] if op == "ListServiceJobs" else ["partial"]}  # team-b's listing, the second
    out = Lines()
    summary = mon.read_and_publish(m.batch, QUEUE, SETTINGS, now=m.clock(), emit=out)
    assert summary["skipped"] == 1 and summary["teams"] == 3
    [warning] = [r for r in logged(capsys) if r["event"] == "answer_entries_skipped"]
    assert warning["skipped_count"] == 1 and warning["skipped"][0].startswith(op)


# ---------------------------------------------------------------------------
# Events


def preemption(job_id: str, reason: str) -> dict:
    return {"detail-type": mon.PREEMPTION_STARTED, "source": "aws.batch",
            "detail": {"preemptedJobArn": f"arn:aws:batch:us-east-1:111122223333:service-job/{job_id}",
                       "statusReason": reason, "status": "RUNNING"}}


def test_a_preemption_counts_for_the_victims_team_by_cause():
    m = model()
    job = m.submit("team-a", {G5: 1})
    m.start(job.job_id)
    out = Lines()
    result = mon.on_preemption(m.batch, QUEUE, SETTINGS, preemption(job.job_id, "Cross-share preemption")["detail"],
                               emit=out)
    assert result == {"counted": True, "team": "team-a", "cause": "cross_share"}
    by_cause = [r for r in out.emf() if r.get(metrics.DIM_CAUSE) == "cross_share"]
    assert [r[metrics.PREEMPTIONS] for r in by_cause] == [1] and by_cause[0][metrics.DIM_TEAM] == "team-a"
    assert out.team("team-a", metrics.PREEMPTIONS) == [1]


def test_a_preemption_of_another_queues_job_is_not_counted():
    m = model()
    job = m.submit("team-a", {G5: 1}, queue="arn:aws:batch:us-east-1:111122223333:job-queue/other")
    out = Lines()
    assert mon.on_preemption(m.batch, QUEUE, SETTINGS, preemption(job.job_id, "x")["detail"], emit=out)["counted"] is False
    assert out.emf() == []


def test_a_preemption_event_without_a_job_or_with_a_gone_job_is_logged():
    m = model()
    out = Lines()
    assert mon.on_preemption(m.batch, QUEUE, SETTINGS, {}, emit=out) == {"counted": False}
    assert mon.on_preemption(m.batch, QUEUE, SETTINGS, preemption("gone", "x")["detail"], emit=out)["counted"] is False
    assert [r[metrics.MONITOR_ERRORS] for r in out.emf()] == [1]


def test_a_blocked_queue_is_counted_for_the_queue_and_the_team():
    out = Lines()
    assert mon.on_blocked(QUEUE, SETTINGS, {"jobId": "j", "quotaShareName": "team-c", "statusReason": "why"},
                          emit=out) == {"counted": True, "team": "team-c"}
    assert [(r.get(metrics.DIM_TEAM), r[metrics.QUEUE_BLOCKED]) for r in out.emf()] == [(None, 1), ("team-c", 1)]


# ---------------------------------------------------------------------------
# A simulated day: every figure published each minute is what the queue held


GPUS = {G5: 1, G12: 4}


def _truth(m: QuotaQueueModel, name: str, now: float) -> dict[str, float]:
    """What the model knows of one share, in the monitor's terms (lent aside: it needs every share)."""
    g, u = m.shares[name], m.usage(name)
    units = set(g) | set(u)
    used = sum(n * GPUS[t] for t, n in u.items())
    guar = sum(n * GPUS[t] for t, n in g.items())
    waits = [now - j.created for j in m.waiting(name)]
    owed = [now - j.created for j in m.waiting(name) if _within(m, j)]
    return {metrics.USAGE: used, metrics.USED_INSTANCES: sum(u.values()), metrics.GUARANTEE: guar,
            metrics.BORROWED: sum(max(0, u.get(t, 0) - g.get(t, 0)) * GPUS[t] for t in units),
            metrics.IDLE_GUARANTEE: sum(max(0, g.get(t, 0) - u.get(t, 0)) * GPUS[t] for t in units),
            metrics.PENDING: len(waits), metrics.OLDEST_WAIT_SECONDS: max(waits, default=0),
            metrics.GUARANTEE_WAIT_SECONDS: max(owed, default=0)}


def _lent(m: QuotaQueueModel) -> dict[str, float]:
    """The accounting rule, recomputed from the model: per type, borrowing from the pool first."""
    out = {n: 0.0 for n in m.shares}
    for t, cap in SETTINGS["capacity"].items():
        b = sum(max(0, m.usage(n).get(t, 0) - m.shares[n].get(t, 0)) for n in m.shares)
        idle = {n: max(0, m.shares[n].get(t, 0) - m.usage(n).get(t, 0)) for n in m.shares}
        pool = max(0, cap - sum(g.get(t, 0) for g in m.shares.values()))
        rest = b - min(b, pool)
        for n, i in idle.items():
            if rest > 0 and i > 0:
                out[n] += rest * i / sum(idle.values()) * GPUS[t]
    return out


def test_a_simulated_day_publishes_what_the_queue_held_and_usage_reconciles(monkeypatch, tmp_path, capsys):
    """A day of minutes: teams submit, Batch starts what fits (borrowing), preempts borrowers for a
    lender, jobs end, the queue is blocked once. Every figure of every reading is what the model
    held; every event is counted; `gpu-share usage` reads the day back to the GPU-hour."""
    import yaml

    from cdk_gpu_share.cli import main, usage_cmd
    from tests.quota_model import CloudWatchModel

    m = model(seed=7)
    cw = CloudWatchModel(page_points=5000)
    monkeypatch.setattr(mon, "_now", m.clock)
    rng = m.rng
    hours: dict[tuple[str, str], dict[str, float]] = {}
    preempted = {n: 0 for n in m.shares}
    for minute in range(24 * 60):
        m.clock.t += 60
        if rng.random() < 0.3:
            m.submit(rng.choice(["team-a", "team-a", "team-b", "team-c"]), {G5: 1} if rng.random() < 0.8 else {G12: 1})
        out = Lines()
        for job in sorted(m.jobs.values(), key=lambda j: j.created):
            if job.status != "RUNNABLE":
                continue
            if not _fits(m, job) and _within(m, job):
                # Batch takes lent capacity back: preempt a borrower's job of the type, and say so.
                victim = _borrower_job(m, job)
                if victim is not None:
                    m.preempt(victim.job_id)
                    mon.on_preemption(m.batch, QUEUE, SETTINGS, {
                        "preemptedJobArn": f"arn:aws:batch:us-east-1:111122223333:service-job/{victim.job_id}",
                        "statusReason": "PREEMPTION_IN_PROGRESS: Cross-share preemption triggered"}, emit=out)
                    preempted[victim.share] += 1
            if _fits(m, job):
                m.start(job.job_id)
        for job in list(m.jobs.values()):
            if job.status == "RUNNING" and rng.random() < 0.02:
                m.finish(job.job_id)
        if minute == 600:
            mon.on_blocked(QUEUE, SETTINGS, {"jobId": "x", "quotaShareName": "team-c", "statusReason": "why"}, emit=out)
        mon.read_and_publish(m.batch, QUEUE, SETTINGS, now=m.clock(), emit=out)
        lent = _lent(m)
        for name in m.shares:
            truth = _truth(m, name, m.clock())
            for metric, value in truth.items():
                assert out.team(name, metric) == [pytest.approx(value)], (minute, name, metric)
            assert out.team(name, metrics.LENT) == [pytest.approx(lent[name])], (minute, name)
            day = datetime.fromtimestamp(m.clock(), timezone.utc).strftime("%Y-%m-%d")
            h = hours.setdefault((day, name), {"within": 0.0, "borrowed": 0.0, "idle": 0.0, "lent": 0.0})
            h["within"] += (truth[metrics.USAGE] - truth[metrics.BORROWED]) / 60
            h["borrowed"] += truth[metrics.BORROWED] / 60
            h["idle"] += truth[metrics.IDLE_GUARANTEE] / 60
            h["lent"] += lent[name] / 60
        for line in out:
            cw.ingest(line)
    assert sum(preempted.values()) > 0 and any(h["borrowed"] > 1 for h in hours.values())
    assert {n: preemptions_held(cw, n) for n in m.shares} == preempted

    config = {"platform": {"name": "gpu-share"},
              "teams": [{"name": n, "guarantee": {t: int(c) for t, c in g.items()}} for n, g in m.shares.items()],
              "batch_quota": {"capacity": SETTINGS["capacity"], "queue_name": QUEUE_NAME}}
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setattr(usage_cmd, "make_client", lambda region: cw.client)
    monkeypatch.setattr(usage_cmd, "_now", m.clock)
    capsys.readouterr()  # the monitor's own log lines
    assert main(["usage", str(path), "--from", "2027-01-15", "--to", "2027-01-16", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["queues"][QUEUE_NAME]
    rows = {(r["day"], r["team"]): r for r in report["days"]}
    for (day, name), h in hours.items():
        row = rows[(day, name)]
        for key in ("within", "borrowed", "idle", "lent"):
            assert row[f"{key}_gpu_hours"] == pytest.approx(h[key], abs=1e-6), (day, name, key)
    assert sum(r["preemptions"] for r in report["days"]) == sum(preempted.values())
    assert report["check"]["within_plus_idle_is_guarantee"] and report["check"]["borrowed_is_lent_plus_unguaranteed"]


def preemptions_held(cw, team: str) -> float:
    """The team's preemptions (dimensions Queue and Team) the CloudWatch model holds."""
    key = (metrics.PREEMPTIONS, frozenset({(metrics.DIM_QUEUE, QUEUE_NAME), (metrics.DIM_TEAM, team)}))
    return sum(v for _, v in cw.points.get(key, []))


def _within(m: QuotaQueueModel, job) -> bool:
    return all(m.usage(job.share).get(t, 0) + n <= m.shares[job.share].get(t, 0) for t, n in job.instances.items())


def _borrower_job(m: QuotaQueueModel, job):
    for t in job.instances:
        for other in sorted(m.jobs.values(), key=lambda j: -j.created):
            if (other.status == "RUNNING" and other.share != job.share and t in other.instances
                    and m.usage(other.share).get(t, 0) > m.shares[other.share].get(t, 0)):
                return other
    return None


def _fits(m: QuotaQueueModel, job) -> bool:
    for unit, n in job.instances.items():
        used = sum(m.usage(s).get(unit, 0) for s in m.shares)
        if used + n > SETTINGS["capacity"][unit]:
            return False
    return True


# ---------------------------------------------------------------------------
# The construct


@pytest.fixture(scope="module")
def monitored():
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from cdk_gpu_share import SharedGpuQuota
    from cdk_gpu_share.core.configuration.parse import Amount, BatchQuotaConfig, ShareMonitorConfig, TeamConfig
    from tests.helpers import new_app, synth

    app = new_app()
    stack = cdk.Stack(app, "Quota")
    SharedGpuQuota(stack, "Quota", queue_name="ml-training",
                   batch_quota=BatchQuotaConfig(capacity={G5: 3},
                                                monitor=ShareMonitorConfig(schedule_minutes=5,
                                                                           guarantee_wait_alarm_seconds=600)),
                   teams=[TeamConfig(name=n, guarantee={G5: Amount(instances=1)}) for n in ("team-a", "team-b")])
    report = synth(app)
    return Template.from_stack(stack), report


def test_the_monitor_reads_on_its_schedule_and_on_the_queues_events(monitored):
    from aws_cdk.assertions import Match

    template, _ = monitored
    [fn] = [r for r in template.find_resources("AWS::Lambda::Function").values()
            if r["Properties"]["Handler"] == mon.__name__ + ".handler"]
    settings = json.loads(fn["Properties"]["Environment"]["Variables"]["GPU_SHARE_MONITOR"])
    assert settings == {"queue": "ml-training", "capacity": {G5: 3}, "teams": {"team-a": "team-a", "team-b": "team-b"}}
    template.has_resource_properties("AWS::Events::Rule", {"ScheduleExpression": "rate(5 minutes)"})
    template.has_resource_properties("AWS::Events::Rule", {"EventPattern": {
        "source": ["aws.batch"], "detail-type": [mon.PREEMPTION_STARTED]}})
    template.has_resource_properties("AWS::Events::Rule", {"EventPattern": {
        "source": ["aws.batch"], "detail-type": [mon.QUEUE_BLOCKED], "detail": {"jobQueue": [Match.any_value()]}}})


def test_one_guarantee_wait_alarm_per_team_and_the_queue_alarms(monitored):
    template, _ = monitored
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    waits = [a["Properties"] for a in alarms.values() if a["Properties"]["MetricName"] == metrics.GUARANTEE_WAIT_SECONDS]
    assert sorted(next(d["Value"] for d in a["Dimensions"] if d["Name"] == "Team") for a in waits) == ["team-a", "team-b"]
    assert {a["Threshold"] for a in waits} == {600} and {a["Statistic"] for a in waits} == {"Maximum"}
    names = {a["Properties"]["MetricName"] for a in alarms.values()}
    assert {metrics.QUEUE_BLOCKED, metrics.MONITOR_HEARTBEAT, "Errors"} <= names
    assert len(alarms) == 5


def _health_alarms(template) -> tuple[dict, dict]:
    """The synthesized silence (heartbeat) and errors alarms of the monitor."""
    alarms = [a["Properties"] for a in template.find_resources("AWS::CloudWatch::Alarm").values()]
    [silence] = [a for a in alarms if a["MetricName"] == metrics.MONITOR_HEARTBEAT]
    [errors] = [a for a in alarms if a["MetricName"] == "Errors"]
    return silence, errors


def test_the_health_alarms_watch_the_heartbeat_and_the_functions_own_errors(monitored):
    template, _ = monitored
    silence, errors = _health_alarms(template)
    # At a 5-minute schedule: 15 one-minute periods; no heartbeat in any of them (missing breaches).
    assert {k: silence[k] for k in ("Namespace", "Statistic", "Period", "EvaluationPeriods", "DatapointsToAlarm",
                                    "Threshold", "ComparisonOperator", "TreatMissingData")} == {
        "Namespace": "GpuShare", "Statistic": "Sum", "Period": 60, "EvaluationPeriods": 15, "DatapointsToAlarm": 15,
        "Threshold": 1, "ComparisonOperator": "LessThanThreshold", "TreatMissingData": "breaching"}
    assert silence["Dimensions"] == [{"Name": "Queue", "Value": "ml-training"}]
    # The function's own Errors: 2 erroring minutes of 15 (a 5-minute schedule surely runs twice in 15).
    assert {k: errors[k] for k in ("Namespace", "Statistic", "Period", "EvaluationPeriods", "DatapointsToAlarm",
                                   "Threshold", "ComparisonOperator", "TreatMissingData")} == {
        "Namespace": "AWS/Lambda", "Statistic": "Sum", "Period": 60, "EvaluationPeriods": 15, "DatapointsToAlarm": 2,
        "Threshold": 1, "ComparisonOperator": "GreaterThanOrEqualToThreshold", "TreatMissingData": "notBreaching"}
    [fn] = [k for k, r in template.find_resources("AWS::Lambda::Function").items()
            if r["Properties"]["Handler"] == mon.__name__ + ".handler"]
    assert errors["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": fn}}]
    assert template.find_resources("AWS::Lambda::Function")[fn]["Properties"]["Timeout"] == 2 * mon.READ_SECONDS + 30


def _monitor_health_alarms(schedules) -> dict[int, tuple[dict, dict]]:
    """The synthesized health alarms of a monitor at each schedule (one stack each, one app)."""
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from cdk_gpu_share.backends.batch_quota.construct import BatchQuotaBackend
    from cdk_gpu_share.core.configuration.parse import Amount, BatchQuotaConfig, ShareMonitorConfig, TeamConfig
    from tests.helpers import new_app

    app, stacks = new_app(), {}
    for minutes in schedules:
        stacks[minutes] = stack = cdk.Stack(app, f"Monitor{minutes}")
        BatchQuotaBackend(stack, "Queue", queue_name="q", config=BatchQuotaConfig(
            capacity={G5: 1}, monitor=ShareMonitorConfig(schedule_minutes=minutes))).add_team(
            TeamConfig(name="a", guarantee={G5: Amount(instances=1)}))
    return {m: _health_alarms(Template.from_stack(s, skip_cyclical_dependencies_check=True)) for m, s in stacks.items()}


def _runs(schedule: int, hours: int) -> list[float]:
    """Start times (s) of a monitor's runs: every schedule, each late by 0 or 59 s in turn
    (EventBridge's delay and the reading's duration), so periods meet readings at their worst."""
    return [k * schedule * 60 + (59 if k % 2 else 0) for k in range(hours * 60 // schedule)]


def test_at_every_schedule_from_1_to_60_minutes_each_health_alarm_can_fire_and_a_healthy_monitor_never_alarms():
    """CloudWatch's evaluation (tests/quota_model.AlarmModel) of the synthesized alarms: a healthy
    monitor (a heartbeat each run, no error) leaves both alarms OK; from the moment every run
    fails (no heartbeat, an error each), each alarm fires within the promise: 15 minutes of
    silence (a schedule longer than 14 minutes: a schedule and a minute)."""
    from tests.quota_model import AlarmModel

    synthesized = _monitor_health_alarms(range(1, 61))
    for minutes, (silence_props, errors_props) in synthesized.items():
        promise = sm.health_alarms(minutes).window_minutes
        assert promise == (15 if minutes <= 14 else minutes + 1)
        silence, errors = AlarmModel.of(silence_props), AlarmModel.of(errors_props)
        hours = max(6, 3 * promise // 60 + 3)
        runs = _runs(minutes, hours)
        fail_at = runs[len(runs) // 2]
        for t in runs:
            if t < fail_at:
                silence.points.append((t + 1, 1))
                errors.points.append((t + 1, 0))
            else:
                errors.points.append((t + 1, 1))
        last_reading = max(t for t in runs if t < fail_at) + 1
        healthy = [t for t in range(promise * 60 + 120, int(fail_at), 60)]
        assert all(silence.state(t) == "OK" and errors.state(t) == "OK" for t in healthy), minutes
        # Silence: in ALARM once the promise has passed since the last reading (and the minute it
        # fell in has closed), for as long as the monitor stays silent.
        fired = last_reading - last_reading % 60 + 60 + promise * 60
        assert silence.state(fired - 60) == "OK" and silence.state(fired) == "ALARM", minutes
        # Errors: in ALARM within the promise of the first failed run.
        assert any(errors.state(t) == "ALARM" for t in range(int(fail_at), int(fail_at) + promise * 60 + 61, 60)), minutes


def test_the_monitors_role_reads_the_queue_and_nothing_else(monitored):
    template, _ = monitored
    statements = [s for p in template.find_resources("AWS::IAM::Policy").values()
                  for s in p["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") in ("ReadTheQueue",
                                                                                             "ReadServiceJobs")]
    by_sid = {s["Sid"]: s for s in statements}
    assert sorted(by_sid["ReadTheQueue"]["Action"]) == ["batch:GetJobQueueSnapshot", "batch:ListQuotaShares"]
    assert by_sid["ReadTheQueue"]["Resource"] == {"Fn::GetAtt": [next(
        k for k in template.find_resources("AWS::Batch::JobQueue")), "JobQueueArn"]}
    assert sorted(by_sid["ReadServiceJobs"]["Action"]) == ["batch:DescribeServiceJob", "batch:ListServiceJobs"]
    assert "cloudwatch:PutMetricData" not in json.dumps(template.to_json())


def test_the_monitor_is_nag_and_cfn_lint_clean(monitored):
    from tests.helpers import assert_cfn_lint_clean, assert_nag_clean

    template, report = monitored
    assert_nag_clean(report)
    assert_cfn_lint_clean(template.to_json())


def test_a_disabled_monitor_creates_nothing():
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from cdk_gpu_share import SharedGpuQuota
    from cdk_gpu_share.core.configuration.parse import Amount, BatchQuotaConfig, ShareMonitorConfig, TeamConfig
    from tests.helpers import new_app

    stack = cdk.Stack(new_app(), "Quota")
    quota = SharedGpuQuota(stack, "Quota", batch_quota=BatchQuotaConfig(capacity={G5: 1},
                                                                        monitor=ShareMonitorConfig(enabled=False)),
                           teams=[TeamConfig(name="a", guarantee={G5: Amount(instances=1)})])
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::Lambda::Function", 0)
    template.resource_count_is("AWS::CloudWatch::Alarm", 0)
    assert quota.batch is not None and quota.batch.monitor is None


def test_the_dashboard_has_a_row_per_team_from_the_shared_metric_factory(monitored):
    template, _ = monitored
    [dashboard] = template.find_resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for team in ("team-a", "team-b"):
        for title in ("GPUs", "waiting", "preemptions"):
            assert f"{team}: {title}" in body
    for name in (metrics.USAGE, metrics.GUARANTEE, metrics.BORROWED, metrics.LENT, metrics.PENDING,
                 metrics.GUARANTEE_WAIT_SECONDS, metrics.PREEMPTIONS):
        assert name in body
    assert "cross_share" in body and "in_share" in body


def test_a_teams_preemption_retries_are_an_output_of_its_stack():
    import yaml
    from aws_cdk.assertions import Template

    from cdk_gpu_share.core.configuration.parse import parse_config
    from cdk_gpu_share.stacks.app import build_platform
    from tests.helpers import ROOT, new_app

    raw = yaml.safe_load((ROOT / "platform.yaml").read_text())
    raw["teams"][0]["preemption_retries"] = 2
    built = build_platform(new_app(), parse_config(raw), checks=False)
    stacks = {s.stack_name: Template.from_stack(s) for s in built.stacks}
    outputs = stacks["gpu-share-team-team-a"].to_json()["Outputs"]
    assert outputs["PreemptionRetriesBeforeTermination"]["Value"] == "2"
    assert "PreemptionRetriesBeforeTermination" not in stacks["gpu-share-team-team-b"].to_json()["Outputs"]


# ---------------------------------------------------------------------------
# Accounting: `gpu-share usage` reads the published minutes back and reconciles


@pytest.mark.parametrize("argv,field", [
    (["--from", "2027-13-01", "--to", "2027-01-02"], "--from"),
    (["--from", "2027-01-02", "--to", "2027-01-01"], "--to"),
    (["--from", "2027-01-01", "--to", "2027-01-01", "--queue", "nope"], "--queue"),
])
def test_usage_refuses_bad_days_and_queues_naming_the_flag(argv, field, capsys, monkeypatch):
    from cdk_gpu_share.cli import main, usage_cmd
    from tests.helpers import ROOT

    # Days in range: today is 2027-01-02 (a day after today is refused on its own).
    monkeypatch.setattr(usage_cmd, "_now", lambda: datetime(2027, 1, 2, 12, tzinfo=timezone.utc).timestamp())
    assert main(["usage", str(ROOT / "platform.yaml"), *argv]) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err
