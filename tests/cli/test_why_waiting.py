"""`gpu-share status --job`: each of the five reasons a job waits, on both kinds of queue.

The classic queue is the reclaim Lambda's model (tests/batch_model.py), the quota-management
queue tests/quota_model.py: both real boto3 clients answered at ``before-send``.
"""

from __future__ import annotations

import pytest

from cdk_gpu_share.backends.batch_quota import status as quota_status
from cdk_gpu_share.backends.fairshare import status as fairshare_status
from cdk_gpu_share.core.configuration.parse import parse_config
from tests.batch_model import QUEUE as CLASSIC
from tests.batch_model import BatchModel, Clock
from tests.quota_model import QUEUE as QUOTA
from tests.quota_model import QUEUE_NAME as QUOTA_NAME
from tests.quota_model import QuotaQueueModel

G5 = "g5.xlarge"
ML = "ml.g5.xlarge"


def _config(**team_b):
    return parse_config({
        "platform": {"name": "gpu-share"},
        "teams": [{"name": "team-a", "guarantee": {G5: 2, ML: 2}},
                  {"name": "team-b", "guarantee": {G5: 2, ML: 2}, **team_b}],
        "fairshare": {"capacity": {G5: 5}, "queue_name": "gpu-share-fairshare",
                      "reclaim": {"reclaim_after_seconds": 60}},
        "batch_quota": {"capacity": {ML: 5}, "queue_name": QUOTA_NAME},
    })


def _classic(running_a: int, running_b: int, waiting: list[tuple[str, float]], *, team_b: dict | None = None) -> dict:
    """team-a and team-b (guarantee 2 each) run that many one-GPU jobs on 5 GPUs; ``waiting``:
    (team, GPUs) of the jobs submitted, oldest first; the last one is explained."""
    m = BatchModel(clock=Clock())
    for i in range(running_a):
        m.add_job("teama", "RUNNING", gpus=1, job_id=f"a{i}", started=m.clock() - 900 + i)
    for i in range(running_b):
        m.add_job("teamb", "RUNNING", gpus=1, job_id=f"r{i}", started=m.clock() - 1000 + i)
    for i, (team, gpus) in enumerate(waiting):
        m.add_job(team.replace("-", ""), "RUNNABLE", gpus=gpus, job_id=f"w{i}", created=m.clock() - 300 + i)
    detail = {"jobQueueName": "gpu-share-fairshare", "jobQueueArn": CLASSIC}
    return fairshare_status.explain(m.batch, CLASSIC, detail, _config(**(team_b or {})), f"w{len(waiting) - 1}",
                                    now=m.clock(), sleep=lambda s: None)


def _quota(running_a: int, running_b: int, waiting: list[tuple[str, float]], *, team_b: dict | None = None) -> dict:
    m = QuotaQueueModel(shares={"team-a": {ML: 2}, "team-b": {ML: 2}}, clock=Clock())
    if team_b and team_b.get("sharing") == "lend":
        m.strategies = {"team-b": "LEND"}
    for _ in range(running_a):
        m.start(m.submit("team-a", {ML: 1}).job_id)
    for _ in range(running_b):
        m.start(m.submit("team-b", {ML: 1}).job_id)
    last = None
    for team, n in waiting:
        m.clock.t += 1
        last = m.submit(team, {ML: n})
    detail = {"jobQueueName": QUOTA_NAME, "jobQueueArn": QUOTA, "jobQueueType": "SAGEMAKER_TRAINING"}
    return quota_status.explain(m.batch, QUOTA, detail, _config(**(team_b or {})), last.job_id, now=m.clock(),
                                sleep=lambda s: None)


# (reason, team-a's and team-b's running one-GPU jobs, the waiting jobs (the last is explained), team-b's settings)
CASES = [
    ("too_large", 0, 0, [("team-a", 6)], None),
    ("capped", 0, 2, [("team-b", 1)], {"sharing": "lend"}),
    ("lent_out", 0, 5, [("team-a", 1)], None),
    ("no_idle", 2, 3, [("team-b", 1)], None),
    ("behind", 0, 0, [("team-a", 1), ("team-a", 1)], None),
]


@pytest.mark.parametrize("reason,running_a,running_b,waiting,team_b", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("explain", [_classic, _quota], ids=["fairshare", "batch_quota"])
def test_each_reason_on_each_kind_of_queue(explain, reason, running_a, running_b, waiting, team_b):
    report = explain(running_a, running_b, waiting, team_b=team_b)
    assert [r["code"] for r in report["reasons"]] == [reason], report


OTHER = "arn:aws:batch:us-east-1:111122223333:job-queue/other-team-queue"


def test_a_job_of_another_queue_is_refused_naming_its_queue_on_each_kind_of_queue():
    from cdk_gpu_share.core.errors import GpuShareError

    m = BatchModel(clock=Clock())
    m.add_job("teama", "RUNNABLE", gpus=1, job_id="x0", jobQueue=OTHER)
    detail = {"jobQueueName": "gpu-share-fairshare", "jobQueueArn": CLASSIC}
    with pytest.raises(GpuShareError, match="job 'x0' belongs to the job queue 'other-team-queue', not "
                                            "'gpu-share-fairshare'; pass --queue other-team-queue"):
        fairshare_status.explain(m.batch, CLASSIC, detail, _config(), "x0", now=m.clock(), sleep=lambda s: None)
    q = QuotaQueueModel(shares={"team-a": {ML: 2}, "team-b": {ML: 2}}, clock=Clock())
    job = q.submit("team-a", {ML: 1}, queue=OTHER)
    detail = {"jobQueueName": QUOTA_NAME, "jobQueueArn": QUOTA, "jobQueueType": "SAGEMAKER_TRAINING"}
    for explain in (quota_status.explain, quota_status.explain_live):
        with pytest.raises(GpuShareError, match=f"belongs to the job queue 'other-team-queue', not '{QUOTA_NAME}'"):
            explain(q.batch, QUOTA, detail, _config(), job.job_id, now=q.clock(), sleep=lambda s: None)
