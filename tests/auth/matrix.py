"""The authorization matrix: what each principal of a config may and may not do.

Each :class:`Req` is one API request as AWS authorizes it: one action, every resource
the action authorizes for that request (``SubmitJob``: queue, job definition,
consumable resource, job), the context keys the request carries. ``expect`` is
``Allowed`` for what the product does (a denied legitimate request is a product that
does not work) and ``Denied`` for every cross-team, cross-queue and escalation attempt.
``residual`` marks a request IAM cannot deny (docs/security.md, *Residual risks*: the risk and
its mitigation); it is evaluated and asserted like the rest, so a change either way is
noticed.

``documented`` lists context keys AWS documents for the request that iam-data lists
for fewer resource types: ``batch:ShareIdentifier`` is listed only for ``job``, yet
AWS's own example (Batch user guide, fair-share IAM example) conditions the whole
``SubmitJob`` statement, queue and job definition included, on it, because the key is a
property of the request. The simulator drops it for those resources (reporting it in
``ignoredContextKeys``), which would deny every legitimate submission; the policy keeps
the key where AWS documents it, and the evaluator re-runs exactly those resources with
``runUnsafeSimulation``. Any other ignored key fails the suite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from cdk_gpu_share.core.configuration.parse import parse_config
from cdk_gpu_share.core.policy.guard import guard_policy
from tests.auth.resolve import ACCOUNT, REGION, ROOT, App

ALLOWED = "Allowed"
DENIED = "Denied"
Q, T, R = "gpu-share:queue", "gpu-share:team", "gpu-share:requeued-from"
A = "gpu-share:requeue-attempt"  # the requeue ledger's attempt id on a resubmitted job
C = "gpu-share:checkpoint-seconds"  # a team's checkpoint interval on its job
B = "gpu-share:borrowed"  # the reclaimer's record: the run started on borrowed capacity
SHARE_ID = ["batch:ShareIdentifier"]
#: The administrators of team identity in the guard the matrix evaluates: a named role, and
#: CDK's deployment role (the team stacks tag their roles with the team key).
GUARD_ADMINS = [f"arn:aws:iam::{ACCOUNT}:role/platform-admin", "arn:aws:iam::*:role/cdk-*-cfn-exec-role-*"]
DEPLOYER = f"cdk-hnb659fds-cfn-exec-role-{ACCOUNT}-{REGION}"


def guard_for(config_path: str) -> dict:
    """The guard ``gpu-share guard`` prints for ``config_path`` with :data:`GUARD_ADMINS` as its administrators."""
    raw = yaml.safe_load((ROOT / config_path).read_text())
    raw["security"] = {"administrators": GUARD_ADMINS}
    return guard_policy(parse_config(raw))


@dataclass
class Req:
    id: str
    principal: str  # "<stack>/<logical id>" of the role
    action: str
    resources: list[str]
    expect: str
    context: dict[str, Any] = field(default_factory=dict)
    documented: list[str] = field(default_factory=list)
    residual: str | None = None  # the risk of docs/security.md and why IAM cannot deny it
    scps: list[dict] = field(default_factory=list)
    #: The principal's ARN when it is not one of the app's roles; for sts:AssumeRole, the
    #: principal assuming the role (whose trust policy is the resource policy).
    caller: str | None = None
    resource_policy: dict | None = None  # e.g. the trust policy of a role a session tag is passed to


def arn(service: str, resource: str) -> str:
    return f"arn:aws:{service}:{REGION}:{ACCOUNT}:{resource}"


def job(n: str = "0c1d2e3f-new") -> str:
    return arn("batch", f"job/{n}")


def service_job(n: str = "4a5b6c7d-new") -> str:
    return arn("batch", f"service-job/{n}")


def tags(**kv: str) -> dict:
    ctx: dict[str, Any] = {f"aws:RequestTag/{k}": v for k, v in kv.items()}
    ctx["aws:TagKeys"] = list(kv)
    return ctx


def resource_tags(**kv: str) -> dict:
    return {f"aws:ResourceTag/{k}": v for k, v in kv.items()}


def _kv(**named: str) -> dict:
    """Keyword names cannot hold ':'; map the short names to the platform's tag keys."""
    keys = {"queue": Q, "team": T, "requeued": R, "attempt": A, "checkpoint": C, "borrowed": B}
    return {keys[k]: v for k, v in named.items()}


def req_tags(**named: str) -> dict:
    return tags(**_kv(**named))


def res_tags(**named: str) -> dict:
    return resource_tags(**_kv(**named))


# ---------------------------------------------------------------------------- trust


def trust_requests(app: App, role: str, team: str, other: str) -> list[Req]:
    """Who may assume a team's SubmitRole (default: principals tagged gpu-share:team=<team>)."""
    caller = f"arn:aws:iam::{ACCOUNT}:role/alice"
    target = app.principals[role].arn
    tag = f"aws:PrincipalTag/{T}"
    return [
        Req(f"{team}: a member (tagged {team}) assumes the SubmitRole", role, "sts:AssumeRole", [target], ALLOWED,
            {tag: team}, caller=caller),
        Req(f"{team}: a member of {other} assumes {team}'s SubmitRole", role, "sts:AssumeRole", [target], DENIED,
            {tag: other}, caller=caller),
        Req(f"{team}: an untagged principal of the account assumes the SubmitRole", role, "sts:AssumeRole",
            [target], DENIED, {}, caller=caller),
        Req(f"{team}: a principal of another account, tagged {team}, assumes the SubmitRole", role,
            "sts:AssumeRole", [target], DENIED, {tag: team}, caller="arn:aws:iam::444455556666:role/alice"),
    ]


def service_trust(app: App, role: str, service: str, label: str) -> list[Req]:
    target = app.principals[role].arn
    other = "lambda.amazonaws.com" if service != "lambda.amazonaws.com" else "ec2.amazonaws.com"
    return [
        Req(f"{label}: {service} assumes it", role, "sts:AssumeRole", [target], ALLOWED, caller=service),
        Req(f"{label}: {other} cannot assume it", role, "sts:AssumeRole", [target], DENIED, caller=other),
    ]


# ---------------------------------------------------------------------------- classic fair share


def fairshare_team(app: App, stack: str, team: str, sid: str, other: str, other_sid: str, queue: str,
                   other_queue: str) -> list[Req]:
    role = f"{stack}/{app.resolver.logical_id(stack, 'SubmitRole')}"
    qarn = arn("batch", f"job-queue/{queue}")
    jd = arn("batch", f"job-definition/{queue}-{sid}-gpu1:1")
    jd_other = arn("batch", f"job-definition/{queue}-{other_sid}-gpu1:1")
    cr = arn("batch", f"consumable-resource/{queue}-{sid}-gpus")
    cr_other = arn("batch", f"consumable-resource/{queue}-{other_sid}-gpus")
    ok = {"batch:ShareIdentifier": sid, **req_tags(queue=queue, team=team)}
    mine = res_tags(queue=queue, team=team)
    theirs = res_tags(queue=queue, team=other)
    p = f"{team} (fair share)"
    r = [
        Req(f"{p}: SubmitJob into its share with its definition, resource and tags", role, "batch:SubmitJob",
            [qarn, jd, cr, job()], ALLOWED, ok, SHARE_ID),
        Req(f"{p}: SubmitJob naming its job definition without revision", role, "batch:SubmitJob",
            [qarn, arn("batch", f"job-definition/{queue}-{sid}-gpu1"), cr, job()], ALLOWED, ok, SHARE_ID),
        Req(f"{p}: tags its new job on creation", role, "batch:TagResource", [job()], ALLOWED,
            req_tags(queue=queue, team=team)),
        Req(f"{p}: cancels its own job", role, "batch:CancelJob", [job("own")], ALLOWED, mine),
        Req(f"{p}: terminates its own job", role, "batch:TerminateJob", [job("own")], ALLOWED, mine),
        Req(f"{p}: lists the queue", role, "batch:ListJobs", ["*"], ALLOWED),
        Req(f"{p}: describes jobs", role, "batch:DescribeJobs", ["*"], ALLOWED),
        # cross-team / escalation
        Req(f"{p}: SubmitJob with {other}'s share identifier", role, "batch:SubmitJob", [qarn, jd, cr, job()],
            DENIED, {**ok, "batch:ShareIdentifier": other_sid}, SHARE_ID),
        Req(f"{p}: SubmitJob with {other}'s job definition", role, "batch:SubmitJob", [qarn, jd_other, cr, job()],
            DENIED, ok, SHARE_ID),
        Req(f"{p}: SubmitJob overriding its consumable resource with {other}'s", role,
            "batch:SubmitJob", [qarn, jd, cr_other, job()], DENIED, ok, SHARE_ID),
        Req(f"{p}: SubmitJob tagged as {other}", role, "batch:SubmitJob", [qarn, jd, cr, job()], DENIED,
            {"batch:ShareIdentifier": sid, **req_tags(queue=queue, team=other)}, SHARE_ID),
        Req(f"{p}: SubmitJob without the platform's tags", role, "batch:SubmitJob", [qarn, jd, cr, job()], DENIED,
            {"batch:ShareIdentifier": sid}, SHARE_ID),
        Req(f"{p}: SubmitJob with the reserved tag requeued-from", role, "batch:SubmitJob",
            [qarn, jd, cr, job()], DENIED,
            {"batch:ShareIdentifier": sid, **req_tags(queue=queue, team=team, requeued="decoy")}, SHARE_ID),
        Req(f"{p}: SubmitJob into another queue ({other_queue})", role, "batch:SubmitJob",
            [arn("batch", f"job-queue/{other_queue}"), jd, cr, job()], DENIED, ok, SHARE_ID),
        Req(f"{p}: re-tags {other}'s running job as its own", role, "batch:TagResource",
            [job("theirs")], DENIED, {**req_tags(queue=queue, team=team), **theirs}),
        Req(f"{p}: tags its own job gpu-share:requeued-from=<{other}'s job>", role,
            "batch:TagResource", [job("own")], DENIED, {**tags(**{R: "their-job"}), **mine}),
        Req(f"{p}: re-tags another queue's tagged job into its team", role, "batch:TagResource",
            [job("elsewhere")], DENIED,
            {**req_tags(queue=queue, team=team), **res_tags(queue=other_queue)}),
        Req(f"{p}: cancels {other}'s job", role, "batch:CancelJob", [job("theirs")], DENIED, theirs),
        Req(f"{p}: terminates {other}'s job", role, "batch:TerminateJob", [job("theirs")], DENIED, theirs),
        Req(f"{p}: terminates a job of another queue tagged with its team", role, "batch:TerminateJob",
            [job("elsewhere")], DENIED, res_tags(queue=other_queue, team=team)),
        Req(f"{p}: updates the queue", role, "batch:UpdateJobQueue", [qarn], DENIED),
        Req(f"{p}: untags {other}'s job", role, "batch:UntagResource", [job("theirs")], DENIED,
            {"aws:TagKeys": [T], **theirs}),
        Req(f"{p}: tags a job without gpu-share tags into its team", role, "batch:TagResource",
            [job("untagged")], ALLOWED, req_tags(queue=queue, team=team),
            residual="untagged jobs: Batch has no key that tells tagging on creation from re-tagging; the tag guard"
                     " (core/policy/guard.py) makes untagged jobs impossible in the account"),
    ]
    return r + checkpoint_tags(role, p, queue, team, ok, [qarn, jd, cr, job()], mine, theirs)


def checkpoint_tags(role: str, p: str, queue: str, team: str, ok: dict, submit: list[str], mine: dict,
                    theirs: dict) -> list[Req]:
    """A team may declare its job's checkpoint interval; never the reclaimer's record of a run."""
    interval = req_tags(queue=queue, team=team, checkpoint="600")
    record = req_tags(queue=queue, team=team, borrowed="1800000000000:false")
    return [
        Req(f"{p}: SubmitJob with its checkpoint interval", role, "batch:SubmitJob", submit, ALLOWED,
            {**ok, **interval}, SHARE_ID),
        Req(f"{p}: tags its new job with its checkpoint interval on creation", role, "batch:TagResource",
            [job()], ALLOWED, interval),
        Req(f"{p}: changes its own running job's checkpoint interval", role, "batch:TagResource", [job("own")],
            ALLOWED, {**interval, **mine}),
        Req(f"{p}: SubmitJob carrying the reclaimer's borrowed record", role, "batch:SubmitJob", submit, DENIED,
            {**ok, **record}, SHARE_ID),
        Req(f"{p}: marks its own running job as started within its guarantee", role, "batch:TagResource",
            [job("own")], DENIED, {**record, **mine}),
        Req(f"{p}: writes the borrowed record alone on its own job", role, "batch:TagResource", [job("own")],
            DENIED, {**tags(**{B: "1800000000000:false"}), **mine}),
        Req(f"{p}: sets the checkpoint interval of another team's job", role, "batch:TagResource",
            [job("theirs")], DENIED, {**interval, **theirs}),
        Req(f"{p}: sets the checkpoint interval of its own job in another queue", role, "batch:TagResource",
            [job("elsewhere")], DENIED, {**interval, **res_tags(queue="gpu-share-other", team=team)}),
        Req(f"{p}: tags the checkpoint interval alone, without the queue and team tags", role, "batch:TagResource",
            [job("own")], DENIED, {**tags(**{C: "600"}), **mine}),
    ]


def reclaimer(app: App, stack: str, queue: str, sids: dict[str, str], other_queue: str) -> list[Req]:
    role = f"{stack}/{app.resolver.logical_id(stack, 'FairshareQueueReclaimerRole')}"
    qarn = arn("batch", f"job-queue/{queue}")
    team, sid = next(iter(sids.items()))
    jd = arn("batch", f"job-definition/{queue}-{sid}-gpu1:3")
    cr = arn("batch", f"consumable-resource/{queue}-{sid}-gpus")
    requeue_tags = req_tags(queue=queue, team=team, requeued="0c1d-stopped", attempt="5e6f-attempt")
    requeue = {"batch:ShareIdentifier": sid, **requeue_tags}
    ledger = app.attr(stack, 'FairshareQueueRequeueLedger', 'Arn')
    failures = app.attr(stack, 'FairshareQueueReclaimerFailures', 'Arn')
    p = "reclaimer"
    return [
        Req(f"{p}: lists its queue", role, "batch:ListJobs", ["*"], ALLOWED),
        Req(f"{p}: describes jobs", role, "batch:DescribeJobs", ["*"], ALLOWED),
        Req(f"{p}: terminates a job of its queue", role, "batch:TerminateJob", [job("borrower")], ALLOWED,
            res_tags(queue=queue, team=team)),
        Req(f"{p}: resubmits a stopped job into the team's share (requeue)", role, "batch:SubmitJob",
            [qarn, jd, cr, job()], ALLOWED, requeue, SHARE_ID),
        Req(f"{p}: tags the resubmitted job on creation", role, "batch:TagResource", [job()], ALLOWED, requeue_tags),
        Req(f"{p}: records a job it is about to stop in the requeue ledger", role, "dynamodb:PutItem", [ledger],
            ALLOWED),
        Req(f"{p}: reads a requeue record (is a FAILED job one it stopped?)", role, "dynamodb:GetItem", [ledger],
            ALLOWED),
        Req(f"{p}: takes a requeue over, records the resubmitted job", role, "dynamodb:UpdateItem", [ledger],
            ALLOWED),
        Req(f"{p}: deletes a requeue record", role, "dynamodb:DeleteItem", [ledger], DENIED),
        Req(f"{p}: scans the requeue ledger", role, "dynamodb:Scan", [ledger], DENIED),
        Req(f"{p}: queries the ledger's index of open requeues", role, "dynamodb:Query",
            [f"{ledger}/index/open-by-settle-time"], ALLOWED),
        Req(f"{p}: queries the requeue ledger itself", role, "dynamodb:Query", [ledger], DENIED),
        Req(f"{p}: queries another index of the ledger", role, "dynamodb:Query", [f"{ledger}/index/other"], DENIED),
        Req(f"{p}: writes another table", role, "dynamodb:PutItem", [arn("dynamodb", "table/other")], DENIED),
        Req(f"{p}: puts a requeue that needs a person in its on-failure queue", role, "sqs:SendMessage",
            [failures], ALLOWED),
        Req(f"{p}: sends to another queue", role, "sqs:SendMessage", [arn("sqs", "other")], DENIED),
        Req(f"{p}: resubmits with a tag outside the platform's (so a resubmission carries none)", role,
            "batch:SubmitJob", [qarn, jd, cr, job()], DENIED,
            {"batch:ShareIdentifier": sid, **tags(**{**_kv(queue=queue, team=team, requeued="0c1d-stopped",
                                                             attempt="5e6f-attempt"), "project": "llm"})}, SHARE_ID),
        Req(f"{p}: terminates a job of another queue", role, "batch:TerminateJob", [job("elsewhere")], DENIED,
            res_tags(queue=other_queue, team=team)),
        Req(f"{p}: terminates an untagged job", role, "batch:TerminateJob", [job("untagged")], DENIED),
        Req(f"{p}: resubmits into another queue", role, "batch:SubmitJob",
            [arn("batch", f"job-queue/{other_queue}"), jd, cr, job()], DENIED, requeue, SHARE_ID),
        Req(f"{p}: resubmits into an unknown share", role, "batch:SubmitJob", [qarn, jd, cr, job()], DENIED,
            {**requeue, "batch:ShareIdentifier": "intruder"}, SHARE_ID),
        Req(f"{p}: resubmits with a job definition outside the platform", role, "batch:SubmitJob",
            [qarn, arn("batch", "job-definition/anything:1"), cr, job()], DENIED, requeue, SHARE_ID),
        Req(f"{p}: re-tags another queue's job into its queue", role, "batch:TagResource",
            [job("elsewhere")], DENIED, {**req_tags(queue=queue), **res_tags(queue=other_queue)}),
        Req(f"{p}: cancels a job", role, "batch:CancelJob", [job("borrower")], DENIED,
            res_tags(queue=queue, team=team)),
        Req(f"{p}: submits a service job", role, "batch:SubmitServiceJob",
            [arn("batch", "job-queue/x"), service_job()], DENIED),
        # victim_order: checkpoint -- the record of each run, a tag on the job
        Req(f"{p}: records that a run of its queue started on borrowed capacity", role, "batch:TagResource",
            [job("borrower")], ALLOWED, {**tags(**{B: "1800000000000:true"}), **res_tags(queue=queue, team=team)}),
        Req(f"{p}: records a run of another queue", role, "batch:TagResource", [job("elsewhere")], DENIED,
            {**tags(**{B: "1800000000000:true"}), **res_tags(queue=other_queue, team=team)}),
        Req(f"{p}: records a run of an untagged job", role, "batch:TagResource", [job("untagged")], DENIED,
            tags(**{B: "1800000000000:true"})),
        Req(f"{p}: writes a borrowed record that is neither true nor false", role, "batch:TagResource",
            [job("borrower")], DENIED, {**tags(**{B: "1800000000000:maybe"}), **res_tags(queue=queue, team=team)}),
        Req(f"{p}: moves a job of its queue to another team with the record", role, "batch:TagResource",
            [job("borrower")], DENIED,
            {**tags(**{B: "1800000000000:true", T: "intruder"}), **res_tags(queue=queue, team=team)}),
        Req(f"{p}: resubmits a stopped job with the stopped run's record", role, "batch:SubmitJob",
            [qarn, jd, cr, job()], DENIED,
            {"batch:ShareIdentifier": sid, **tags(**{**_kv(queue=queue, team=team, requeued="0c1d-stopped",
                                                             attempt="5e6f-attempt", borrowed="1:true")})},
            SHARE_ID),
        Req(f"{p}: resubmits a stopped job with its checkpoint interval", role, "batch:SubmitJob",
            [qarn, jd, cr, job()], ALLOWED,
            {"batch:ShareIdentifier": sid, **tags(**{**_kv(queue=queue, team=team, requeued="0c1d-stopped",
                                                             attempt="5e6f-attempt", checkpoint="600")})},
            SHARE_ID),
    ]


# ---------------------------------------------------------------------------- Kueue on EKS


def kueue_team(app: App, stack: str, team: str, cluster: str) -> list[Req]:
    """A team on Kueue reaches the cluster through its EKS access entry (scoped to its namespace in
    the cluster): in IAM it may only describe that cluster, for its kubeconfig."""
    role = f"{stack}/{app.resolver.logical_id(stack, 'SubmitRole')}"
    own = arn("eks", f"cluster/{cluster}")
    p = f"{team} (kueue)"
    return [
        Req(f"{p}: describes its cluster (kubeconfig)", role, "eks:DescribeCluster", [own], ALLOWED),
        Req(f"{p}: describes another cluster", role, "eks:DescribeCluster", [arn("eks", "cluster/other")], DENIED),
        Req(f"{p}: grants itself an access entry", role, "eks:CreateAccessEntry", [own], DENIED),
        Req(f"{p}: associates an access policy", role, "eks:AssociateAccessPolicy",
            [arn("eks", f"access-entry/{cluster}/role/{ACCOUNT}/x/1")], DENIED),
        Req(f"{p}: changes the cluster's configuration", role, "eks:UpdateClusterConfig", [own], DENIED),
        Req(f"{p}: submits a Batch job", role, "batch:SubmitJob", [arn("batch", "job-queue/any"), job()], DENIED),
    ]


# ---------------------------------------------------------------------------- Batch quota management


def share_monitor(app: App, stack: str, queue: str, other_queue: str) -> list[Req]:
    """The share monitor reads its queue and writes its logs (EMF): nothing else."""
    role = f"{stack}/{app.resolver.logical_id(stack, 'SharedGpuQuotaBatchShareMonitorRole')}"
    qarn = arn("batch", f"job-queue/{queue}")
    other = arn("batch", f"job-queue/{other_queue}")
    p = "share monitor"
    return [
        Req(f"{p}: lists its queue's quota shares", role, "batch:ListQuotaShares", [qarn], ALLOWED),
        Req(f"{p}: reads its queue's snapshot", role, "batch:GetJobQueueSnapshot", [qarn], ALLOWED),
        Req(f"{p}: lists service jobs", role, "batch:ListServiceJobs", ["*"], ALLOWED),
        Req(f"{p}: describes a preempted service job", role, "batch:DescribeServiceJob", ["*"], ALLOWED),
        Req(f"{p}: reads another queue's snapshot", role, "batch:GetJobQueueSnapshot", [other], DENIED),
        Req(f"{p}: lists another queue's quota shares", role, "batch:ListQuotaShares", [other], DENIED),
        Req(f"{p}: changes a quota share", role, "batch:UpdateQuotaShare",
            [arn("batch", f"job-queue/{queue}/quota-share/team-a")], DENIED),
        Req(f"{p}: submits a service job", role, "batch:SubmitServiceJob", [qarn, service_job()], DENIED),
        Req(f"{p}: stops a service job", role, "batch:TerminateServiceJob", [service_job("theirs")], DENIED),
        Req(f"{p}: re-prioritizes a service job", role, "batch:UpdateServiceJob", [service_job("theirs")], DENIED),
        Req(f"{p}: writes metrics with PutMetricData (it writes EMF to its logs)", role, "cloudwatch:PutMetricData",
            ["*"], DENIED),
        Req(f"{p}: lists classic jobs", role, "batch:ListJobs", ["*"], DENIED),
    ]


#: The reader of the job archive that platform.yaml names (history.readers), and a broad administrator.
ARCHIVE_READER = f"arn:aws:iam::{ACCOUNT}:role/platform-analyst"
ARCHIVE_ADMIN = f"arn:aws:iam::{ACCOUNT}:role/account-admin"
_EVERYTHING = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:*", "kms:*"], "Resource": "*"}]}


def job_archive(app: App, stack: str, team_roles: list[str], reclaimer: str | None, *, named: bool = True
                ) -> tuple[list[Req], dict[str, list[dict]]]:
    """Only the delivery stream's role writes the archive; only the config's readers read it, even
    against a principal whose identity policy allows every S3 and KMS action. ``named``: the config
    names :data:`ARCHIVE_READER` in ``history.readers`` (otherwise the same role is refused)."""
    bucket_lid = app.resolver.logical_id(stack, "JobHistoryBucket", "AWS::S3::Bucket")
    bucket = app.resolver.resolve(stack, {"Ref": bucket_lid})
    policy_lid = app.resolver.logical_id(stack, "JobHistoryBucketPolicy")
    bucket_policy = app.resolver.resolve(stack, app.templates[stack]["Resources"][policy_lid]["Properties"]["PolicyDocument"])
    key_lid = app.resolver.logical_id(stack, "JobHistoryKey")
    key = app.resolver.resolve(stack, {"Fn::GetAtt": [key_lid, "Arn"]})
    key_policy = app.resolver.resolve(stack, app.templates[stack]["Resources"][key_lid]["Properties"]["KeyPolicy"])
    stream = app.resolver.resolve(stack, {"Fn::GetAtt": [app.resolver.logical_id(stack, "JobHistoryStream"), "Arn"]})
    obj = f"arn:aws:s3:::{bucket}/events/2026/11/02/config=0123456789ab/gpu-share-1-2026-11-02-00-05-00-abc.gz"
    delivery = f"{stack}/{app.resolver.logical_id(stack, 'JobHistoryDeliveryRole')}"
    events_role = f"{stack}/{app.resolver.logical_id(stack, 'JobHistoryEventsRole')}"
    details = f"{stack}/{app.resolver.logical_id(stack, 'JobHistoryDetailsRole')}"
    p = "job archive"
    reqs = [
        Req(f"{p}: the delivery stream's role writes an object", delivery, "s3:PutObject", [obj], ALLOWED,
            resource_policy=bucket_policy),
        Req(f"{p}: the delivery stream's role encrypts through S3", delivery, "kms:GenerateDataKey", [key], ALLOWED,
            {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}, resource_policy=key_policy),
        Req(f"{p}: the delivery stream's role deletes an object", delivery, "s3:DeleteObject", [obj], DENIED,
            resource_policy=bucket_policy),
        Req(f"{p}: EventBridge's role puts a record", events_role, "firehose:PutRecordBatch", [stream], ALLOWED),
        Req(f"{p}: EventBridge's role writes the bucket", events_role, "s3:PutObject", [obj], DENIED,
            resource_policy=bucket_policy),
        Req(f"{p}: the details function puts a record", details, "firehose:PutRecord", [stream], ALLOWED),
        Req(f"{p}: the details function describes a service job", details, "batch:DescribeServiceJob", ["*"], ALLOWED),
        Req(f"{p}: the details function reads the archive", details, "s3:GetObject", [obj], DENIED,
            resource_policy=bucket_policy),
        Req(f"{p}: the details function writes the bucket", details, "s3:PutObject", [obj], DENIED,
            resource_policy=bucket_policy),
        Req(f"{p}: a role {'named' if named else 'not named'} in history.readers reads an object", "archive reader",
            "s3:GetObject", [obj], ALLOWED if named else DENIED, caller=ARCHIVE_READER, resource_policy=bucket_policy),
        Req(f"{p}: that role decrypts it", "archive reader", "kms:Decrypt", [key], ALLOWED if named else DENIED,
            {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}, caller=ARCHIVE_READER, resource_policy=key_policy),
        Req(f"{p}: the reader writes an object", "archive reader", "s3:PutObject", [obj], DENIED,
            caller=ARCHIVE_READER, resource_policy=bucket_policy),
        Req(f"{p}: an administrator allowed s3:* reads an object", "account admin", "s3:GetObject", [obj], DENIED,
            caller=ARCHIVE_ADMIN, resource_policy=bucket_policy),
        Req(f"{p}: an administrator allowed kms:* decrypts with the archive's key", "account admin", "kms:Decrypt",
            [key], DENIED, {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}, caller=ARCHIVE_ADMIN,
            resource_policy=key_policy),
        Req(f"{p}: an administrator allowed s3:* writes an object", "account admin", "s3:PutObject", [obj], DENIED,
            caller=ARCHIVE_ADMIN, resource_policy=bucket_policy),
    ]
    if reclaimer is not None:
        reqs.append(Req(f"{p}: the reclaimer reads the archive", reclaimer, "s3:GetObject", [obj], DENIED,
                        resource_policy=bucket_policy))
    for role in team_roles:
        team = role.split("/")[0].rsplit("-team-", 1)[-1]
        reqs += [
            Req(f"{p}: {team}'s role reads an object", role, "s3:GetObject", [obj], DENIED, resource_policy=bucket_policy),
            Req(f"{p}: {team}'s role writes an object", role, "s3:PutObject", [obj], DENIED, resource_policy=bucket_policy),
            Req(f"{p}: {team}'s role decrypts with the archive's key", role, "kms:Decrypt", [key], DENIED,
                resource_policy=key_policy),
        ]
    reader_policy = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"], "Resource": f"arn:aws:s3:::{bucket}/*"},
        {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": key}]}
    extra = {"archive reader": [{"name": "reader", "policy": reader_policy}],
             "account admin": [{"name": "everything", "policy": _EVERYTHING}]}
    return reqs, extra


def quota_team(app: App, stack: str, team: str, other: str, queue: str, max_priority: int = 100) -> list[Req]:
    role = f"{stack}/{app.resolver.logical_id(stack, 'SubmitRole')}"
    other_stack = stack.replace(f"-team-{team}", f"-team-{other}")
    training = app.principals[f"{stack}/{app.resolver.logical_id(stack, 'TrainingExecutionRole')}"].arn
    other_training = app.principals[f"{other_stack}/{app.resolver.logical_id(other_stack, 'TrainingExecutionRole')}"].arn
    qarn = arn("batch", f"job-queue/{queue}")
    share = f"{qarn}/quota-share/{team}"
    other_share = f"{qarn}/quota-share/{other}"
    own = req_tags(team=team)
    p = f"{team} (Batch quota)"
    return [
        Req(f"{p}: SubmitServiceJob into its share", role, "batch:SubmitServiceJob", [qarn, share, service_job()],
            ALLOWED, own),
        Req(f"{p}: SubmitServiceJob at its max priority {max_priority}", role, "batch:SubmitServiceJob",
            [qarn, share, service_job()], ALLOWED, {**own, "batch:SchedulingPriority": str(max_priority)}),
        Req(f"{p}: tags its new service job on creation", role, "batch:TagResource", [service_job()], ALLOWED, own),
        Req(f"{p}: terminates its own service job", role, "batch:TerminateServiceJob",
            [service_job("own")], ALLOWED, res_tags(team=team)),
        Req(f"{p}: lowers its own service job's priority", role, "batch:UpdateServiceJob", [service_job("own")],
            ALLOWED, {**res_tags(team=team), "batch:SchedulingPriority": "10"}),
        Req(f"{p}: describes service jobs", role, "batch:DescribeServiceJob", ["*"], ALLOWED),
        Req(f"{p}: lists service jobs", role, "batch:ListServiceJobs", ["*"], ALLOWED),
        Req(f"{p}: passes its training role to SageMaker", role, "iam:PassRole", [training], ALLOWED,
            {"iam:PassedToService": "sagemaker.amazonaws.com"}),
        Req(f"{p}: SubmitServiceJob into {other}'s share", role, "batch:SubmitServiceJob",
            [qarn, other_share, service_job()], DENIED, own),
        Req(f"{p}: SubmitServiceJob at priority 9999", role, "batch:SubmitServiceJob",
            [qarn, share, service_job()], DENIED, {**own, "batch:SchedulingPriority": "9999"}),
        Req(f"{p}: SubmitServiceJob tagged as {other}", role, "batch:SubmitServiceJob",
            [qarn, share, service_job()], DENIED, req_tags(team=other)),
        Req(f"{p}: SubmitServiceJob without its team tag", role, "batch:SubmitServiceJob",
            [qarn, share, service_job()], DENIED),
        Req(f"{p}: raises its own service job to 9999", role, "batch:UpdateServiceJob",
            [service_job("own")], DENIED, {**res_tags(team=team), "batch:SchedulingPriority": "9999"}),
        Req(f"{p}: re-prioritizes {other}'s service job", role, "batch:UpdateServiceJob", [service_job("theirs")],
            DENIED, {**res_tags(team=other), "batch:SchedulingPriority": "1"}),
        Req(f"{p}: re-tags {other}'s service job as its own", role, "batch:TagResource", [service_job("theirs")],
            DENIED, {**own, **res_tags(team=other)}),
        Req(f"{p}: terminates {other}'s service job", role, "batch:TerminateServiceJob", [service_job("theirs")],
            DENIED, res_tags(team=other)),
        Req(f"{p}: passes its training role to EC2", role, "iam:PassRole", [training], DENIED,
            {"iam:PassedToService": "ec2.amazonaws.com"}),
        Req(f"{p}: passes {other}'s training role", role, "iam:PassRole", [other_training], DENIED,
            {"iam:PassedToService": "sagemaker.amazonaws.com"}),
        Req(f"{p}: changes its quota share", role, "batch:UpdateQuotaShare", [share], DENIED),
    ]


def training_role(app: App, stack: str, team: str) -> list[Req]:
    role = f"{stack}/{app.resolver.logical_id(stack, 'TrainingExecutionRole')}"
    logs = arn("logs", "log-group:/aws/sagemaker/TrainingJobs:log-stream:job-1/algo-1")
    p = f"{team} training role"
    return [
        Req(f"{p}: writes its training logs", role, "logs:PutLogEvents", [logs], ALLOWED),
        Req(f"{p}: puts SageMaker metrics", role, "cloudwatch:PutMetricData", ["*"], ALLOWED,
            {"cloudwatch:namespace": "/aws/sagemaker/TrainingJobs"}),
        Req(f"{p}: puts metrics into another namespace", role, "cloudwatch:PutMetricData", ["*"], DENIED,
            {"cloudwatch:namespace": "GpuShare"}),
        Req(f"{p}: submits a service job", role, "batch:SubmitServiceJob",
            [arn("batch", "job-queue/q"), service_job()], DENIED),
        Req(f"{p}: passes itself on", role, "iam:PassRole", [app.principals[role].arn], DENIED,
            {"iam:PassedToService": "sagemaker.amazonaws.com"}),
        *service_trust(app, role, "sagemaker.amazonaws.com", p),
    ]


# ---------------------------------------------------------------------------- HyperPod


def hyperpod_team(app: App, stack: str, team: str, other_stack: str, cluster: str, eks_cluster: str) -> list[Req]:
    role = f"{stack}/{app.resolver.logical_id(stack, 'SubmitRole')}"
    own_quota = app.attr(stack, "ComputeQuota")
    other_quota = app.attr(other_stack, "ComputeQuota")
    p = f"{team} (HyperPod)"
    return [
        Req(f"{p}: reads its cluster", role, "sagemaker:DescribeCluster", [cluster], ALLOWED),
        Req(f"{p}: gets a kubeconfig for the EKS cluster", role, "eks:DescribeCluster", [eks_cluster],
            ALLOWED),
        Req(f"{p}: reads its compute quota", role, "sagemaker:DescribeComputeQuota", [own_quota], ALLOWED),
        Req(f"{p}: reads another team's compute quota", role, "sagemaker:DescribeComputeQuota", [other_quota],
            DENIED),
        Req(f"{p}: raises its own compute quota", role, "sagemaker:UpdateComputeQuota", [own_quota], DENIED),
        Req(f"{p}: changes the cluster policy", role, "sagemaker:UpdateClusterSchedulerConfig",
            [arn("sagemaker", "cluster-scheduler-config/abc")], DENIED),
        Req(f"{p}: grants itself cluster access", role, "eks:AssociateAccessPolicy",
            [arn("eks", f"access-entry/{eks_cluster.rsplit('/', 1)[-1]}/role/{ACCOUNT}/x/1")], DENIED),
        Req(f"{p}: reads another EKS cluster", role, "eks:DescribeCluster", [arn("eks", "cluster/other")], DENIED),
    ]


# ---------------------------------------------------------------------------- time windows


def quota_window_switcher(app: App, stack: str, queue: str, other_queue: str, windowed: list[str],
                          fixed: list[str], quotas: dict[str, str], other_quota: str) -> list[Req]:
    """The quota window switcher reads and updates the quota shares and compute quotas of the
    platform's windowed teams, and nothing else; its schedules and its provider only invoke it."""
    role = f"{stack}/{app.resolver.logical_id(stack, 'QuotaWindowsRole')}"
    function = app.attr(stack, "QuotaWindowsFunction", "Arn")
    log_group = app.attr(stack, "QuotaWindowsLogs", "Arn")
    qarn = arn("batch", f"job-queue/{queue}")
    p = "quota window switcher"
    reqs = [Req(f"{p}: writes its log", role, "logs:PutLogEvents", [log_group], ALLOWED)]
    for team in windowed:
        share = f"{qarn}/quota-share/{team}"
        reqs += [
            Req(f"{p}: reads {team}'s quota share", role, "batch:DescribeQuotaShare", [share], ALLOWED),
            Req(f"{p}: switches {team}'s quota share", role, "batch:UpdateQuotaShare", [share], ALLOWED),
            Req(f"{p}: switches {team}'s share on another platform's queue", role, "batch:UpdateQuotaShare",
                [arn("batch", f"job-queue/{other_queue}/quota-share/{team}")], DENIED),
            Req(f"{p}: deletes {team}'s quota share", role, "batch:DeleteQuotaShare", [share], DENIED),
        ]
    for team, quota in quotas.items():
        reqs += [
            Req(f"{p}: reads {team}'s compute quota", role, "sagemaker:DescribeComputeQuota", [quota], ALLOWED),
            Req(f"{p}: switches {team}'s compute quota", role, "sagemaker:UpdateComputeQuota", [quota], ALLOWED),
            Req(f"{p}: deletes {team}'s compute quota", role, "sagemaker:DeleteComputeQuota", [quota], DENIED),
        ]
    for team in fixed:
        reqs.append(Req(f"{p}: changes the share of {team}, which has no windows", role, "batch:UpdateQuotaShare",
                        [f"{qarn}/quota-share/{team}"], DENIED))
    reqs += [
        Req(f"{p}: switches another platform's compute quota", role, "sagemaker:UpdateComputeQuota", [other_quota],
            DENIED),
        Req(f"{p}: creates a quota share", role, "batch:CreateQuotaShare", [qarn, f"{qarn}/quota-share/intruder"],
            DENIED),
        Req(f"{p}: changes the job queue", role, "batch:UpdateJobQueue", [qarn], DENIED),
        Req(f"{p}: changes the cluster policy", role, "sagemaker:UpdateClusterSchedulerConfig",
            [arn("sagemaker", "cluster-scheduler-config/abc")], DENIED),
        Req(f"{p}: submits a service job", role, "batch:SubmitServiceJob", [qarn, service_job()], DENIED),
        *service_trust(app, role, "lambda.amazonaws.com", p),
    ]
    other_fn = arn("lambda", "function:someone-elses")
    share = f"{qarn}/quota-share/{windowed[0]}"
    for prefix, label, service in (("QuotaWindowsSchedulerRole", "window schedules", "scheduler.amazonaws.com"),
                                   ("QuotaWindowsProviderframeworkonEventServiceRole", "window switcher provider",
                                    "lambda.amazonaws.com")):
        invoker = f"{stack}/{app.resolver.logical_id(stack, prefix)}"
        reqs += [
            Req(f"{label}: invoke the switcher", invoker, "lambda:InvokeFunction", [function], ALLOWED),
            Req(f"{label}: invoke another function", invoker, "lambda:InvokeFunction", [other_fn], DENIED),
            Req(f"{label}: switch a quota share themselves", invoker, "batch:UpdateQuotaShare", [share], DENIED),
            *service_trust(app, invoker, service, label),
        ]
    schedules = f"{stack}/{app.resolver.logical_id(stack, 'QuotaWindowsSchedulerRole')}"
    undelivered = app.attr(stack, "QuotaWindowsUndelivered", "Arn")
    reqs += [
        Req("window schedules: put a boundary they cannot deliver in their dead-letter queue", schedules,
            "sqs:SendMessage", [undelivered], ALLOWED),
        Req("window schedules: send to another queue", schedules, "sqs:SendMessage", [arn("sqs", "other")], DENIED),
    ]
    return reqs


# ---------------------------------------------------------------------------- MIG endpoint


def mig(app: App, stack: str, base: str, models: list[str]) -> list[Req]:
    handler = f"{stack}/{app.resolver.logical_id(stack, 'GpuShareMigEndpointProviderHandlerRole')}"
    ex_role = next(k for k in app.principals if k.startswith(f"{stack}/MigEndpoint") and "ExecutionRole" in k)
    ep = arn("sagemaker", f"endpoint/{base}-1a2b3c")
    cfg = arn("sagemaker", f"endpoint-config/{base}-1a2b3c-4d5e6f")
    ic = arn("sagemaker", f"inference-component/{base}-query-rewriter-7a8b9c")
    other_ep = arn("sagemaker", f"endpoint/{base}-v2-1a2b3c")
    own_tag = {"aws:RequestTag/gpu-share:endpoint": base, "aws:TagKeys": ["gpu-share:endpoint"]}
    mine = {"aws:ResourceTag/gpu-share:endpoint": base}
    theirs = {"aws:ResourceTag/gpu-share:endpoint": f"{base}-v2"}
    p = "MIG handler"
    return [
        Req(f"{p}: creates its endpoint config", handler, "sagemaker:CreateEndpointConfig", [cfg], ALLOWED, own_tag),
        Req(f"{p}: creates its endpoint", handler, "sagemaker:CreateEndpoint", [ep, cfg], ALLOWED,
            {**own_tag, **mine}),
        Req(f"{p}: tags its endpoint on creation", handler, "sagemaker:AddTags", [ep], ALLOWED, own_tag),
        Req(f"{p}: creates a component of its own model", handler, "sagemaker:CreateInferenceComponent", [ep, ic],
            ALLOWED, {**own_tag, "sagemaker:ModelArn": models[0]}),
        Req(f"{p}: updates its component's copies", handler, "sagemaker:UpdateInferenceComponentRuntimeConfig",
            [ic], ALLOWED, mine),
        Req(f"{p}: moves its endpoint to a new config", handler, "sagemaker:UpdateEndpoint", [ep, cfg], ALLOWED,
            mine),
        Req(f"{p}: deletes its old endpoint config", handler, "sagemaker:DeleteEndpointConfig", [cfg], ALLOWED, mine),
        Req(f"{p}: deletes its component", handler, "sagemaker:DeleteInferenceComponent", [ic], ALLOWED, mine),
        Req(f"{p}: describes its endpoint", handler, "sagemaker:DescribeEndpoint", [ep], ALLOWED, mine),
        Req(f"{p}: lists inference components", handler, "sagemaker:ListInferenceComponents", ["*"], ALLOWED),
        Req(f"{p}: passes the execution role to SageMaker", handler, "iam:PassRole", [app.principals[ex_role].arn],
            ALLOWED, {"iam:PassedToService": "sagemaker.amazonaws.com"}),
        Req(f"{p}: attaches a model of another endpoint", handler,
            "sagemaker:CreateInferenceComponent", [ep, ic], DENIED,
            {**own_tag, "sagemaker:ModelArn": arn("sagemaker", f"model/{base}-v2-secret-model-abcdef")}),
        Req(f"{p}: deletes endpoint {base}-v2 (another endpoint, same prefix)", handler,
            "sagemaker:DeleteEndpoint", [other_ep], DENIED, theirs),
        Req(f"{p}: updates a component of {base}-v2", handler, "sagemaker:UpdateInferenceComponent",
            [arn("sagemaker", f"inference-component/{base}-v2-x-1a2b3c")], DENIED, theirs),
        Req(f"{p}: deletes an unrelated endpoint", handler, "sagemaker:DeleteEndpoint",
            [arn("sagemaker", "endpoint/prod-search")], DENIED),
        Req(f"{p}: deletes a model", handler, "sagemaker:DeleteModel", [models[0]], DENIED),
        Req(f"{p}: creates an endpoint tagged for another endpoint", handler, "sagemaker:CreateEndpoint", [ep, cfg],
            DENIED, {"aws:RequestTag/gpu-share:endpoint": f"{base}-v2", "aws:TagKeys": ["gpu-share:endpoint"]}),
        Req(f"{p}: passes another role", handler, "iam:PassRole", [f"arn:aws:iam::{ACCOUNT}:role/admin"], DENIED,
            {"iam:PassedToService": "sagemaker.amazonaws.com"}),
        *service_trust(app, handler, "lambda.amazonaws.com", p),
    ]


def mig_execution(app: App, stack: str, bucket_key: str, repo: str) -> list[Req]:
    role = next(k for k in app.principals if k.startswith(f"{stack}/MigEndpoint") and "ExecutionRole" in k)
    p = "MIG execution role"
    return [
        Req(f"{p}: reads the model data", role, "s3:GetObject", [f"arn:aws:s3:::{bucket_key}"], ALLOWED),
        Req(f"{p}: pulls the image", role, "ecr:BatchGetImage", [repo], ALLOWED),
        Req(f"{p}: reads another object", role, "s3:GetObject", ["arn:aws:s3:::other-bucket/secret.tar.gz"], DENIED),
        Req(f"{p}: pulls another repository", role, "ecr:BatchGetImage",
            [arn("ecr", "repository/other")], DENIED),
        Req(f"{p}: creates an endpoint", role, "sagemaker:CreateEndpoint",
            [arn("sagemaker", "endpoint/x"), arn("sagemaker", "endpoint-config/x")], DENIED),
        *service_trust(app, role, "sagemaker.amazonaws.com", p),
    ]


def provider_framework(app: App, stack: str) -> list[Req]:
    """The CDK provider framework's roles: invoke the handler functions, nothing else."""
    out: list[Req] = []
    on_event = app.attr(stack, "GpuShareMigEndpointProviderOnEvent", "Arn")
    is_complete = app.attr(stack, "GpuShareMigEndpointProviderIsComplete", "Arn")
    other_fn = arn("lambda", "function:someone-elses")
    for prefix, target in (("GpuShareMigEndpointProviderframeworkonEventServiceRole", on_event),
                           ("GpuShareMigEndpointProviderframeworkisCompleteServiceRole", is_complete),
                           ("GpuShareMigEndpointProviderframeworkonTimeoutServiceRole", on_event)):
        role = f"{stack}/{app.resolver.logical_id(stack, prefix)}"
        label = prefix.removeprefix("GpuShareMigEndpointProvider")
        out += [
            Req(f"provider {label}: invokes the handler", role, "lambda:InvokeFunction", [target], ALLOWED),
            Req(f"provider {label}: invokes another function", role, "lambda:InvokeFunction", [other_fn], DENIED),
            Req(f"provider {label}: calls SageMaker", role, "sagemaker:DeleteEndpoint",
                [arn("sagemaker", "endpoint/prod")], DENIED),
        ]
    waiter = f"{stack}/{app.resolver.logical_id(stack, 'GpuShareMigEndpointProviderwaiterstatemachineRole')}"
    framework_fn = [k for k, r in app.templates[stack]["Resources"].items()
                    if r["Type"] == "AWS::Lambda::Function" and k.startswith("GpuShareMigEndpointProviderframeworkisComplete")]
    out += [
        Req("provider waiter: invokes the isComplete framework function", waiter, "lambda:InvokeFunction",
            [app.resolver.get_att(stack, framework_fn[0], "Arn")], ALLOWED),
        Req("provider waiter: invokes another function", waiter, "lambda:InvokeFunction", [other_fn], DENIED),
        *service_trust(app, waiter, "states.amazonaws.com", "provider waiter"),
    ]
    return out


# ---------------------------------------------------------------------------- the rest of the fleet


def fleet_roles(app: App, stack: str) -> list[Req]:
    flow = f"{stack}/{app.resolver.logical_id(stack, 'FairshareQueueVpcFlowLogIAMRole')}"
    instance = f"{stack}/{app.resolver.logical_id(stack, 'FairshareQueueComputeEnvironmentInstanceProfileRole')}"
    log_group = app.attr(stack, "FairshareQueueVpcFlowLogLogGroup", "Arn")
    return [
        Req("VPC flow log role: writes its log group", flow, "logs:PutLogEvents", [log_group], ALLOWED),
        Req("VPC flow log role: submits a job", flow, "batch:SubmitJob",
            [arn("batch", "job-queue/q"), job()], DENIED),
        Req("ECS instance role: registers with ECS", instance, "ecs:RegisterContainerInstance",
            [arn("ecs", "cluster/batch")], ALLOWED),
        Req("ECS instance role: terminates a job", instance, "batch:TerminateJob", [job("any")], DENIED),
        Req("ECS instance role: passes a role", instance, "iam:PassRole", [f"arn:aws:iam::{ACCOUNT}:role/admin"], DENIED),
    ]


def guard(app: App, team_role: str, reclaimer_role: str, queue: str, sid: str, team: str,
          other: str) -> tuple[list[Req], dict[str, list[dict]]]:
    """The tag guard (core/policy/guard.py) as SCP beside FullAWSAccess: untagged jobs cannot exist, only the
    administrators move the team identity tag; legitimate work and ordinary tagging still pass."""
    g = guard_for(app.config_path)
    qarn = arn("batch", f"job-queue/{queue}")
    jd = arn("batch", f"job-definition/{queue}-{sid}-gpu1:1")
    cr = arn("batch", f"consumable-resource/{queue}-{sid}-gpus")
    admin = "guard: an account admin (batch:*)"
    admin_policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "batch:*", "Resource": "*"}]}
    batch = [
        Req(f"guard: {team} still submits into its share", team_role, "batch:SubmitJob", [qarn, jd, cr, job()],
            ALLOWED, {"batch:ShareIdentifier": sid, **req_tags(queue=queue, team=team)}, SHARE_ID, scps=[g]),
        Req("guard: the reclaimer still requeues", reclaimer_role, "batch:SubmitJob", [qarn, jd, cr, job()], ALLOWED,
            {"batch:ShareIdentifier": sid, **req_tags(queue=queue, team=team, requeued="x")}, SHARE_ID,
            scps=[g]),
        Req(f"{admin} submits an untagged job (what the untagged-jobs risk needs first)", "admin", "batch:SubmitJob",
            [arn("batch", "job-queue/legacy"), arn("batch", "job-definition/legacy:1"), job()], DENIED,
            scps=[g]),
        Req(f"{admin} submits an untagged service job", "admin", "batch:SubmitServiceJob",
            [arn("batch", "job-queue/legacy"), service_job()], DENIED, scps=[g]),
        Req(f"{admin} removes a job's team tag", "admin", "batch:UntagResource", [job("own")], DENIED,
            {"aws:TagKeys": [T], **res_tags(queue=queue, team=team)}, scps=[g]),
        Req(f"{admin} submits a job tagged with its own queue", "admin", "batch:SubmitJob",
            [arn("batch", "job-queue/legacy"), arn("batch", "job-definition/legacy:1"), job()], ALLOWED,
            req_tags(queue="legacy"), scps=[g]),
        Req("guard: an administrator of team identity still cannot submit an untagged job", "platform-admin",
            "batch:SubmitJob", [arn("batch", "job-queue/legacy"), arn("batch", "job-definition/legacy:1"), job()],
            DENIED, scps=[g]),
    ]
    # Team identity: the tag on principals and sessions.
    everything = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["iam:*", "sts:*"],
                                                          "Resource": "*"}]}
    def iam(kind: str, name: str) -> str:
        return f"arn:aws:iam::{ACCOUNT}:{kind}/{name}"

    mallory, mallory_user = iam("role", "mallory"), iam("user", "mallory")
    tools = iam("role", "team-tools")  # a role whose trust lets the account pass session tags
    tools_trust = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
        "Action": ["sts:AssumeRole", "sts:TagSession"]}]}
    submit_role = app.principals[team_role].arn
    as_team = tags(**{T: team})
    as_other = tags(**{T: other})
    unrelated = tags(**{"cost-center": "4711"})
    p = "guard (team identity)"
    identity = [
        Req(f"{p}: a role tags itself {T}={other}", "mallory", "iam:TagRole", [mallory], DENIED, as_other,
            scps=[g]),
        Req(f"{p}: a user tags itself {T}={other}", "mallory", "iam:TagUser", [mallory_user], DENIED, as_other,
            scps=[g], caller=mallory_user),
        Req(f"{p}: a role tags itself with the key in other letter case (GPU-Share:Team)", "mallory",
            "iam:TagRole", [mallory], DENIED, tags(**{"GPU-Share:Team": other}), scps=[g]),
        Req(f"{p}: a role tags itself with the team key among other tags", "mallory", "iam:TagRole", [mallory],
            DENIED, tags(**{"cost-center": "4711", T: other}), scps=[g]),
        Req(f"{p}: a role removes its own team tag", "mallory", "iam:UntagRole", [mallory], DENIED,
            {"aws:TagKeys": [T]}, scps=[g]),
        Req(f"{p}: a user removes its own team tag", "mallory", "iam:UntagUser", [mallory_user], DENIED,
            {"aws:TagKeys": [T]}, scps=[g], caller=mallory_user),
        Req(f"{p}: creates a role tagged {T}={other} (to assume it)", "mallory", "iam:CreateRole",
            [iam("role", "sleeper")], DENIED, as_other, scps=[g]),
        Req(f"{p}: creates a user tagged {T}={other}", "mallory", "iam:CreateUser", [iam("user", "sleeper")], DENIED,
            as_other, scps=[g]),
        Req(f"{p}: passes session tag {T}={other} (AssumeRole --tags)", "mallory", "sts:TagSession", [tools],
            DENIED, as_other, scps=[g], resource_policy=tools_trust),
        Req(f"{p}: a user passes session tag {T}={other} (GetFederationToken --tags)", "mallory", "sts:TagSession",
            ["*"], DENIED, as_other, scps=[g], caller=mallory_user),
        Req(f"{p}: rewrites the trust policy of {team}'s SubmitRole (tagged {T})", "mallory",
            "iam:UpdateAssumeRolePolicy", [submit_role], DENIED, {f"aws:ResourceTag/{T}": team}, scps=[g]),
        # Ordinary tagging and role management keep working.
        Req(f"{p}: a role tags itself cost-center=4711", "mallory", "iam:TagRole", [mallory], ALLOWED, unrelated,
            scps=[g]),
        Req(f"{p}: a user tags itself cost-center=4711", "mallory", "iam:TagUser", [mallory_user], ALLOWED,
            unrelated, scps=[g], caller=mallory_user),
        Req(f"{p}: a role removes its cost-center tag", "mallory", "iam:UntagRole", [mallory], ALLOWED,
            {"aws:TagKeys": ["cost-center"]}, scps=[g]),
        Req(f"{p}: creates a role tagged cost-center=4711", "mallory", "iam:CreateRole", [iam("role", "app")],
            ALLOWED, unrelated, scps=[g]),
        Req(f"{p}: creates an untagged role", "mallory", "iam:CreateRole", [iam("role", "app")], ALLOWED,
            scps=[g]),
        Req(f"{p}: passes session tag cost-center=4711", "mallory", "sts:TagSession", [tools], ALLOWED, unrelated,
            scps=[g], resource_policy=tools_trust),
        Req(f"{p}: rewrites the trust policy of an untagged role", "mallory", "iam:UpdateAssumeRolePolicy",
            [iam("role", "app")], ALLOWED, scps=[g]),
        # The administrators.
        Req(f"{p}: an administrator tags a user {T}={team}", "platform-admin", "iam:TagUser", [iam("user", "bob")],
            ALLOWED, as_team, scps=[g]),
        Req(f"{p}: an administrator removes a user's team tag", "platform-admin", "iam:UntagUser",
            [iam("user", "bob")], ALLOWED, {"aws:TagKeys": [T]}, scps=[g]),
        Req(f"{p}: an administrator passes session tag {T}={team}", "platform-admin", "sts:TagSession", [tools],
            ALLOWED, as_team, scps=[g], resource_policy=tools_trust),
        Req(f"{p}: the deployment role creates {team}'s SubmitRole with its tag", DEPLOYER, "iam:CreateRole",
            [submit_role], ALLOWED, as_team, scps=[g]),
        Req(f"{p}: the deployment role tags {team}'s SubmitRole", DEPLOYER, "iam:TagRole", [submit_role], ALLOWED,
            as_team, scps=[g]),
        Req(f"{p}: the deployment role updates {team}'s SubmitRole trust", DEPLOYER, "iam:UpdateAssumeRolePolicy",
            [submit_role], ALLOWED, {f"aws:ResourceTag/{T}": team}, scps=[g]),
    ]
    extra = {"admin": [{"name": "batch-admin", "policy": admin_policy}]}
    for name in ("mallory", "platform-admin", DEPLOYER):
        extra[name] = [{"name": "iam-and-sts", "policy": everything}]
    return batch + identity, extra


# ---------------------------------------------------------------------------- per config


def requests_for(app: App) -> tuple[list[Req], dict[str, list[dict]]]:
    """The matrix of ``app`` and extra principals (not in the app: the guard's admin)."""
    stacks = list(app.templates)
    platform = next(s for s in stacks if s.endswith("-platform"))
    name = platform.removesuffix("-platform")
    extra: dict[str, list[dict]] = {}
    reqs: list[Req] = []
    team_stacks = {s.removeprefix(f"{name}-team-"): s for s in stacks if s.startswith(f"{name}-team-")}
    teams = sorted(team_stacks)
    for i, team in enumerate(teams):
        other = teams[(i + 1) % len(teams)]
        stack = team_stacks[team]
        role = f"{stack}/{app.resolver.logical_id(stack, 'SubmitRole')}"
        reqs += trust_requests(app, role, team, other)
    if app.config_path == "platform.yaml":
        sids = {t: t.replace("-", "") for t in teams}
        reqs += fairshare_team(app, team_stacks["team-a"], "team-a", "teama", "team-b", "teamb",
                               "gpu-share-fairshare", "gpu-share-training")
        reqs += fairshare_team(app, team_stacks["team-c"], "team-c", "teamc", "team-a", "teama",
                               "gpu-share-fairshare", "gpu-share-training")
        reqs += reclaimer(app, platform, "gpu-share-fairshare", {"team-b": "teamb"}, "gpu-share-training")
        for team, other in (("team-a", "team-b"), ("team-b", "team-c")):
            reqs += quota_team(app, team_stacks[team], team, other, "gpu-share-training")
        reqs += share_monitor(app, platform, "gpu-share-training", "gpu-share-fairshare")
        for team in teams:
            reqs += training_role(app, team_stacks[team], team)
        reqs += fleet_roles(app, platform)
        reclaimer_role = f"{platform}/{app.resolver.logical_id(platform, 'FairshareQueueReclaimerRole')}"
        guarded, guard_principals = guard(
            app, f"{team_stacks['team-a']}/{app.resolver.logical_id(team_stacks['team-a'], 'SubmitRole')}",
            reclaimer_role, "gpu-share-fairshare", "teama", "team-a", "team-b")
        reqs += guarded
        extra.update(guard_principals)
        archive, archive_principals = job_archive(
            app, platform, [f"{team_stacks[t]}/{app.resolver.logical_id(team_stacks[t], 'SubmitRole')}" for t in teams]
            + [f"{team_stacks[t]}/{app.resolver.logical_id(team_stacks[t], 'TrainingExecutionRole')}" for t in teams],
            reclaimer_role)
        reqs += archive
        extra.update(archive_principals)
        del sids
    elif app.config_path == "examples/hyperpod.yaml":
        cluster = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"
        eks_cluster = "arn:aws:eks:us-east-1:111122223333:cluster/hyperpod-eks"
        for i, team in enumerate(teams):
            other = teams[(i + 1) % len(teams)]
            reqs += hyperpod_team(app, team_stacks[team], team, team_stacks[other], cluster, eks_cluster)
    elif app.config_path == "examples/windows.yaml":
        queue = "windows-share-training"
        cluster = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"
        eks_cluster = "arn:aws:eks:us-east-1:111122223333:cluster/hyperpod-eks"
        for team, other in (("research", "nightly"), ("nightly", "applied"), ("applied", "research")):
            reqs += quota_team(app, team_stacks[team], team, other, queue)
        for team in teams:
            reqs += training_role(app, team_stacks[team], team)
        reqs += share_monitor(app, platform, queue, "gpu-share-training")
        for team, other in (("research", "nightly"), ("nightly", "research")):
            reqs += hyperpod_team(app, team_stacks[team], team, team_stacks[other], cluster, eks_cluster)
        archive, archive_principals = job_archive(
            app, platform, [f"{team_stacks[t]}/{app.resolver.logical_id(team_stacks[t], 'SubmitRole')}" for t in teams],
            None, named=False)
        reqs += archive
        extra.update(archive_principals)
        quotas = {t: app.attr(team_stacks[t], "ComputeQuota") for t in ("research", "nightly")}
        reqs += quota_window_switcher(app, f"{name}-windows", queue, "gpu-share-training", ["research", "nightly"],
                                      ["applied"], quotas, arn("sagemaker", "compute-quota/0therplatfrm"))
    elif app.config_path == "examples/kueue.yaml":
        for team in teams:
            reqs += kueue_team(app, team_stacks[team], team, "gpu-eks")
    elif app.config_path == "examples/inference.yaml":
        models = [app.attr(platform, f"MigEndpointsmallmodelsModel{m}") for m in ("queryrewriter", "tickettriage")]
        reqs += mig(app, platform, "small-models", models)
        reqs += mig_execution(app, platform, "mig-inference-models/query-rewriter/model.tar.gz",
                              arn("ecr", "repository/djl-inference").replace(ACCOUNT, "763104351884"))
        reqs += provider_framework(app, platform)
        reqs += quota_team(app, team_stacks["search"], "search", "support", "mig-inference-training")
        reqs += share_monitor(app, platform, "mig-inference-training", "gpu-share-training")
        reqs += quota_team(app, team_stacks["support"], "support", "search", "mig-inference-training")
        for team in teams:
            reqs += training_role(app, team_stacks[team], team)
        archive, archive_principals = job_archive(
            app, platform, [f"{team_stacks[t]}/{app.resolver.logical_id(team_stacks[t], 'SubmitRole')}" for t in teams],
            None, named=False)
        reqs += archive
        extra.update(archive_principals)
    return reqs, extra
