"""The tag guard: a service control policy (or permissions boundary) for the account a platform runs in.

IAM cannot express everything the platform's isolation needs (README, *Security model*).
This policy closes two gaps account-wide. Attach it as an SCP to the account (or OU), or
as the permissions boundary of every principal of the account (a principal without the
boundary is not held by it).

    gpu-share guard platform.yaml          # the guard for a config, as one compact SCP
    gpu-share guard platform.yaml -o scps  # as several SCPs when it is longer than one may be

    from cdk_gpu_share.core.policy.guard import guard_policy, split_guard
    for part in split_guard(guard_policy(load_config("platform.yaml"))):
        print(part.name, part.text)  # each at most 5,120 characters: one SCP

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

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cdk_gpu_share.core.errors import ConfigError, Problem

if TYPE_CHECKING:
    from cdk_gpu_share.core.configuration.parse import PlatformConfig

TAG_QUEUE = "gpu-share:queue"
TAG_TEAM = "gpu-share:team"

#: AWS Organizations: the most characters of one service control policy. Saved through the API
#: or the CLI a document counts as given, whitespace included (the console strips whitespace
#: outside quotes first), so the guard is measured and printed compact.
SCP_MAX_CHARACTERS = 5120
#: AWS Organizations attaches at most 5 SCPs to a root, OU or account; one of them is the allow
#: (FullAWSAccess or your own), so the guard may take at most 4.
SCP_MAX_GUARD_POLICIES = 4
#: The name of the guard's SCP (with ``-1``, ``-2`` ... when it takes several).
GUARD_NAME = "gpu-share-guard"

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


def compact(policy: dict) -> str:
    """``policy`` as JSON without a character of whitespace outside strings: the form whose length
    AWS Organizations counts against :data:`SCP_MAX_CHARACTERS` whatever tool saves it."""
    return json.dumps(policy, separators=(",", ":"))


@dataclass(frozen=True)
class GuardPart:
    """One SCP of the guard: its name and its document."""

    name: str
    document: dict

    @property
    def text(self) -> str:
        """The document as saved: :func:`compact`."""
        return compact(self.document)


def split_guard(policy: dict, limit: int = SCP_MAX_CHARACTERS) -> list[GuardPart]:
    """The guard as SCPs of at most ``limit`` characters each (compact), its statements kept whole
    and in order: one part named :data:`GUARD_NAME` when it fits, else ``gpu-share-guard-1``, ...

    The guard only denies, and AWS denies a request that any statement of any SCP attached to the
    account (or above it) denies: attached together, the parts deny exactly what the whole did.
    A statement is never cut in two: its ``ArnNotLike`` list of administrators exempts a principal
    that matches *any* pattern, so half the list in each of two statements would deny every
    administrator in one half or the other.

    Raises :class:`ConfigError` when one statement alone is above ``limit`` or more than
    :data:`SCP_MAX_GUARD_POLICIES` parts would be needed.
    """
    version = policy.get("Version", "2012-10-17")
    groups: list[list[dict]] = []
    for statement in policy["Statement"]:
        alone = len(compact({"Version": version, "Statement": [statement]}))
        if alone > limit:
            raise ConfigError(Problem(
                "security.administrators", f"{alone:,} characters",
                f"make the guard's statement {statement.get('Sid', '')} alone longer than the {limit:,} characters"
                " of an SCP, and a statement cannot be split without denying some administrators",
                "give the administrators' roles a common path or name prefix and write fewer, wider patterns, such"
                " as arn:aws:iam::111122223333:role/admins/*"))
        if groups and len(compact({"Version": version, "Statement": [*groups[-1], statement]})) <= limit:
            groups[-1].append(statement)
        else:
            groups.append([statement])
    if len(groups) > SCP_MAX_GUARD_POLICIES:
        raise ConfigError(Problem(
            "security.administrators", f"{len(compact(policy)):,} characters",
            f"make the guard {len(groups)} SCPs of at most {limit:,} characters, more than the"
            f" {SCP_MAX_GUARD_POLICIES} that fit beside the allow policy (5 SCPs per root, OU or account)",
            "write fewer, wider administrator patterns (a common path such as"
            " arn:aws:iam::111122223333:role/admins/*) or fewer distinct principal_tag keys"))
    if len(groups) == 1:
        return [GuardPart(GUARD_NAME, {"Version": version, "Statement": groups[0]})]
    return [GuardPart(f"{GUARD_NAME}-{i}", {"Version": version, "Statement": g}) for i, g in enumerate(groups, 1)]


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
    """What ``plan`` says of the teams without ``assumed_by``, whose identity is a principal tag.

    When no team names who assumes its role (a fresh starter config), one line says it as the
    next step; when some teams do, each team that does not looks forgotten: one warning each."""
    missing = [team for team in config.teams if not team.assumed_by]
    if not missing:
        return []
    guard = f"attach the tag guard (`gpu-share guard {config_path}`) as an SCP so that only security.administrators" \
            " can set that tag"
    if len(missing) == len(config.teams):
        tags = sorted({team.principal_tag for team in missing})
        tagged = f"{tags[0]}=<team>" if len(tags) == 1 else "the team's principal tag"
        return [f"next: who submits for each team: set assumed_by (the role ARNs of its members or CI) on"
                f" {', '.join(team.name for team in missing)}. Until then any principal of the account tagged {tagged}"
                f" may assume the team's SubmitRole: {guard}."]
    return [
        f"warning: team {team.name} has no assumed_by, so any principal of the account tagged"
        f" {team.principal_tag}={team.name} may assume its SubmitRole. Prefer assumed_by (the role ARNs of"
        f" its members or CI); otherwise {guard}."
        for team in missing
    ]


def _unique_ignoring_case(keys: Iterable[str]) -> list[str]:
    out: list[str] = []
    for key in keys:
        if key.lower() not in {k.lower() for k in out}:
            out.append(key)
    return out
