"""The tag guard: a service control policy (or permissions boundary) for the account a platform runs in.

IAM cannot express everything the platform's isolation needs (README, *Security model*):
AWS Batch has no condition key that tells tagging a job at creation from re-tagging it
later, and ``CancelJob``/``TerminateJob``/``TerminateServiceJob`` authorize only on the
job's tags. The teams' own grants never re-tag a job that carries a ``gpu-share`` tag of
another team or queue, but a job *without* those tags (submitted by someone outside the
platform) could be tagged by a team and then stopped by it. This policy closes that
gap account-wide: no Batch job or service job can be created without the platform's tags,
and nobody can remove them. Attach it as an SCP to the account (or OU), or as the
permissions boundary of every principal that may use Batch there.

    from cdk_gpu_share.core.guard import tag_guard_policy
    print(json.dumps(tag_guard_policy(), indent=2))

It denies only; it grants nothing. Other Batch users of the account keep working if
they tag their jobs ``gpu-share:queue=<their queue>`` (containers) or
``gpu-share:team=<their team>`` (service jobs).
"""

from __future__ import annotations

TAG_QUEUE = "gpu-share:queue"
TAG_TEAM = "gpu-share:team"


def tag_guard_policy(partition: str = "aws") -> dict:
    """The guard as an IAM policy document (valid as an SCP and as a permissions boundary).

    Permissions boundaries and SCPs need an Allow as well; as an SCP, AWS's default
    ``FullAWSAccess`` provides it; as a boundary, add your own allow statements.
    """
    jobs = f"arn:{partition}:batch:*:*:job/*"
    service_jobs = f"arn:{partition}:batch:*:*:service-job/*"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "GpuShareEveryJobCarriesItsQueue",
                "Effect": "Deny",
                "Action": "batch:SubmitJob",
                "Resource": jobs,
                "Condition": {"Null": {f"aws:RequestTag/{TAG_QUEUE}": "true"}},
            },
            {
                "Sid": "GpuShareEveryServiceJobCarriesItsTeam",
                "Effect": "Deny",
                "Action": "batch:SubmitServiceJob",
                "Resource": service_jobs,
                "Condition": {"Null": {f"aws:RequestTag/{TAG_TEAM}": "true"}},
            },
            {
                "Sid": "GpuShareTagsAreNeverRemoved",
                "Effect": "Deny",
                "Action": "batch:UntagResource",
                "Resource": [jobs, service_jobs],
                "Condition": {"ForAnyValue:StringLike": {"aws:TagKeys": ["gpu-share:*"]}},
            },
        ],
    }
