"""The ``security`` section of the platform config: who administers team identity.

    security:
      administrators:                      # aws:PrincipalArn patterns (* and ? wildcards)
        - arn:aws:iam::111122223333:role/platform-admin
        - arn:aws:iam::111122223333:role/cdk-hnb659fds-cfn-exec-role-111122223333-*

A team without ``assumed_by`` is every principal tagged ``<principal_tag>=<team>``. The tag
guard (:mod:`cdk_gpu_share.core.policy.guard`, ``gpu-share guard``) lets only these principals set
or remove that tag on users, roles and sessions. The team stacks tag their own roles with
it, so the principal that deploys them (for CDK, its ``cfn-exec-role``) belongs here. An
assumed-role session matches through its role's ARN (``aws:PrincipalArn``), so name roles,
not ``arn:aws:sts::...:assumed-role/...``. Without this section the guard lets nobody set
the tag.

Registered in :data:`cdk_gpu_share.core.configuration.parse.EXTRA_SECTIONS`; problems are recorded with
the config's ``add_problem(field, value, message, fix)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: An IAM role, user or root ARN as aws:PrincipalArn carries it; * and ? match any characters.
ADMINISTRATOR_ARN_PATTERN = re.compile(
    r"^arn:aws[a-z-]*:iam::(\d{12}|\*):(root|(role|user)/[A-Za-z0-9+=,.@_/*?-]{1,512})$"
)
MAX_ADMINISTRATORS = 20  # beyond that, a role path (role/admins/*) or a name pattern says it better
_KEYS = ("administrators",)
_EXAMPLE = "arn:aws:iam::111122223333:role/platform-admin"

AddProblem = Callable[[str, object, str, str], None]


@dataclass(frozen=True)
class SecurityConfig:
    """Who may set the team identity tags: ``administrators``, ARN patterns of principals."""

    administrators: tuple[str, ...] = ()


def parse_security(raw: Any, teams: Sequence[Any], add_problem: AddProblem) -> SecurityConfig | None:
    """Parse ``security``; record every problem with ``add_problem``. None when unusable."""
    problems: list[None] = []

    def add(field: str, value: object, message: str, fix: str) -> None:
        problems.append(None)
        add_problem(field, value, message, fix)

    if not isinstance(raw, Mapping):
        add("security", raw, "must be a mapping", f"write security: {{administrators: [{_EXAMPLE}]}}")
        return None
    for key in raw:
        if key not in _KEYS:
            add(f"security.{key}", key, "is not a field of security", "use administrators")
    where = "security.administrators"
    items = raw.get("administrators")
    if items is None:
        add("security", dict(raw), "names no administrators",
            f"write administrators: [{_EXAMPLE}], or remove the section (then nobody may set the team tag)")
        return None
    if isinstance(items, str):
        items = [items]  # one pattern written without a list
    if not isinstance(items, list) or not items:
        add(where, items, "must be a non-empty list of IAM role or user ARN patterns",
            f"write administrators: [{_EXAMPLE}], or remove the section (then nobody may set the team tag)")
        return None
    if len(items) > MAX_ADMINISTRATORS:
        add(where, f"{len(items)} patterns", f"lists more than {MAX_ADMINISTRATORS} patterns",
            "give the administrators' roles a common path or name prefix and write one pattern, such as"
            " arn:aws:iam::111122223333:role/admins/*")
    administrators: list[str] = []
    for i, arn in enumerate(items):
        field = f"{where}[{i}]"
        if isinstance(arn, str) and arn.startswith("arn:aws") and ":sts::" in arn:
            add(field, arn, "is a session ARN; aws:PrincipalArn of a session is its role's ARN",
                "write the role: arn:aws:iam::ACCOUNT:role/NAME")
        elif not isinstance(arn, str) or not ADMINISTRATOR_ARN_PATTERN.match(arn):
            add(field, arn, "is not an IAM role or user ARN pattern",
                f"write arn:aws:iam::ACCOUNT:role/NAME (* and ? match any characters), such as {_EXAMPLE}")
        elif _matches_every_principal(arn):
            add(field, arn, "matches every role or user of the account, so the guard would stop nobody",
                f"name the administrators' roles, such as {_EXAMPLE}")
        elif arn in administrators:
            add(field, arn, "is listed twice", "list each pattern once")
        else:
            administrators.append(arn)
    if problems:
        return None
    return SecurityConfig(administrators=tuple(administrators))


def _matches_every_principal(arn: str) -> bool:
    _, _, name = arn.rsplit(":", 1)[1].partition("/")
    return bool(name) and set(name) <= {"*", "?", "/"}
