"""The tag guard: a service control policy (or permissions boundary) for the account a platform runs in.

IAM cannot express everything the platform's isolation needs (README, *Security model*).
This policy closes two gaps account-wide. Attach it as an SCP to the account (or OU), or
as the permissions boundary of every principal of the account (a principal without the
boundary is not held by it).

    gpu-share guard platform.yaml          # the guard for a config, as JSON

    from cdk_gpu_share.core.guard import guard_policy
    print(json.dumps(guard_policy(load_config("platform.yaml")), indent=2))

It denies only; it grants nothing.

**Batch job tags.** AWS Batch has no condition key that tells tagging a job at creation
from re-tagging it later, and ``CancelJob``/``TerminateJob``/``TerminateServiceJob``
authorize only on the job's tags. The teams' own grants never re-tag a job that carries a
``gpu-share`` tag of another team or queue, but a job *without* those tags (submitted by
someone outside the platform) could be tagged by a team and then stopped by it. The guard
makes such jobs impossible: no Batch job or service job can be created without the
platform's tags, and nobody can remove them. Other Batch users of the account keep working
if they tag their jobs ``gpu-share:queue=<their queue>`` (containers) or
``gpu-share:team=<their team>`` (service jobs).

**Team identity tags.** A team without ``assumed_by`` trusts every principal of the account
whose principal tag ``principal_tag`` (default ``gpu-share:team``) is the team's name, so
that tag *is* team identity. The guard lets only the administrators
(``security.administrators`` of the config, matched on ``aws:PrincipalArn``) set or remove
it on an IAM user or role (``iam:TagUser``, ``iam:TagRole``, ``iam:UntagUser``,
``iam:UntagRole``), create a user or role that carries it (``iam:CreateUser``,
``iam:CreateRole``), pass it as a session tag (``sts:TagSession``, which ``AssumeRole`` and
``GetFederationToken`` authorize whenever they carry tags), or change the trust policy of a
role that carries it
(``iam:UpdateAssumeRolePolicy``: whoever may rewrite who assumes a team's role acts as the
team). Tag keys are compared ignoring case, as IAM and STS compare them. The team stacks
tag their own roles ``gpu-share:team=<team>``, so while that key is guarded the principal
that deploys them (for CDK, its ``cfn-exec-role``) must be an administrator; anyone who may
deploy with that role then holds team identity too.

What the guard cannot cover:

* Identity providers. Session tags that a SAML or OIDC identity provider asserts
  (``AssumeRoleWithSAML``, ``AssumeRoleWithWebIdentity``, which authorize
  ``sts:TagSession`` too) and IAM Identity Center's attributes for access control come
  from outside IAM; SCPs govern requests of the account's own users and roles, not what an
  identity provider asserts. Whoever administers
  the identity provider, or the attributes it maps to the tag key, effectively holds team
  identity.
* Other accounts. When a role's trust policy here allows ``sts:TagSession`` to principals
  of another account, that account's SCPs decide their requests, not this one's.
* Principals that already carry the tag. The guard keeps the tag from moving; whoever can
  act as a tagged principal (create its access keys or console password, pass it to a
  service that assumes it) acts as its team. Keep those permissions with administrators.

``assumed_by`` (named roles) avoids all of this and is the better choice where it fits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cdk_gpu_share.core.config import PlatformConfig

TAG_QUEUE = "gpu-share:queue"
TAG_TEAM = "gpu-share:team"

#: What sets or removes a tag on an IAM user or role, or creates one with tags.
PRINCIPAL_TAG_ACTIONS = (
    "iam:CreateRole",
    "iam:CreateUser",
    "iam:TagRole",
    "iam:TagUser",
    "iam:UntagRole",
    "iam:UntagUser",
)


def tag_guard_policy(
    partition: str = "aws",
    *,
    team_tag_keys: Iterable[str] = (TAG_TEAM,),
    administrators: Sequence[str] = (),
) -> dict:
    """The guard as an IAM policy document (valid as an SCP and as a permissions boundary).

    :param partition: partition of the Batch ARNs.
    :param team_tag_keys: principal tag keys that stand for team identity (the teams'
        ``principal_tag``; default ``gpu-share:team``).
    :param administrators: ARN patterns (``aws:PrincipalArn``, ``*`` and ``?`` wildcards) of
        the principals that may still set those keys. None: nobody may.

    Permissions boundaries and SCPs need an Allow as well; as an SCP, AWS's default
    ``FullAWSAccess`` provides it; as a boundary, add your own allow statements.
    """
    jobs = f"arn:{partition}:batch:*:*:job/*"
    service_jobs = f"arn:{partition}:batch:*:*:service-job/*"
    keys = _unique_ignoring_case(team_tag_keys)
    statements: list[dict] = [
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
    ]
    if not keys:
        return {"Version": "2012-10-17", "Statement": statements}
    not_admin = {"ArnNotLike": {"aws:PrincipalArn": list(administrators)}} if administrators else {}
    tag_keys = {"ForAnyValue:StringEqualsIgnoreCase": {"aws:TagKeys": keys}}
    statements += [
        {
            "Sid": "GpuShareTeamTagOnPrincipalsOnlyByAdministrators",
            "Effect": "Deny",
            "Action": list(PRINCIPAL_TAG_ACTIONS),
            "Resource": "*",
            "Condition": {**tag_keys, **not_admin},
        },
        {
            "Sid": "GpuShareTeamTagInSessionsOnlyByAdministrators",
            "Effect": "Deny",
            "Action": "sts:TagSession",
            "Resource": "*",
            "Condition": {**tag_keys, **not_admin},
        },
    ]
    # One statement per key: the keys of a Null block must all hold at once.
    for i, key in enumerate(keys):
        statements.append({
            "Sid": "GpuShareTeamRoleTrustOnlyByAdministrators" + (str(i + 1) if i else ""),
            "Effect": "Deny",
            "Action": "iam:UpdateAssumeRolePolicy",
            "Resource": "*",
            "Condition": {"Null": {f"aws:ResourceTag/{key}": "false"}, **not_admin},
        })
    return {"Version": "2012-10-17", "Statement": statements}


def identity_tag_keys(config: PlatformConfig) -> list[str]:
    """The principal tag keys the config's teams use for identity (each team's ``principal_tag``)."""
    return _unique_ignoring_case(team.principal_tag for team in config.teams)


def guard_policy(config: PlatformConfig, partition: str = "aws") -> dict:
    """The guard for ``config``: its teams' tag keys, its ``security.administrators``."""
    security = config.security
    return tag_guard_policy(
        partition,
        team_tag_keys=identity_tag_keys(config),
        administrators=security.administrators if security is not None else (),
    )


def identity_warnings(config: PlatformConfig, config_path: str = "platform.yaml") -> list[str]:
    """One line per team without ``assumed_by``: its identity is a principal tag."""
    return [
        f"warning: team {team.name} has no assumed_by, so any principal of the account tagged"
        f" {team.principal_tag}={team.name} may assume its SubmitRole. Prefer assumed_by (the role ARNs of"
        f" its members or CI); otherwise attach the tag guard (`gpu-share guard {config_path}`) as an SCP so"
        " that only security.administrators can set that tag."
        for team in config.teams
        if not team.assumed_by
    ]


def _unique_ignoring_case(keys: Iterable[str]) -> list[str]:
    out: list[str] = []
    for key in keys:
        if key.lower() not in {k.lower() for k in out}:
            out.append(key)
    return out
