"""Fair-share identifiers of the classic AWS Batch queue: one rule, used by the config
validation, the FairshareQueue construct, the reclaim Lambda and ``gpu-share status``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cdk_gpu_share.core.errors import Problem

#: Batch: "limited to 255 alphanumeric characters" (ShareAttributes.shareIdentifier).
SHARE_IDENTIFIER_MAX = 255


def share_identifier(team_name: str) -> str:
    """The fair-share identifier of a team: its letters and digits (``team-a`` -> ``teama``).

    Batch documents share identifiers as alphanumeric (optionally ending with ``*``,
    which this library never uses), so hyphens, underscores and dots are dropped.
    """
    return "".join(c for c in team_name if c.isascii() and c.isalnum())[:SHARE_IDENTIFIER_MAX]


def share_identifier_problems(
    team_names: Iterable[str], where: str = "teams", *, paths: Mapping[str, str] | None = None
) -> list[Problem]:
    """Teams whose share identifiers collide or are empty, each naming both teams.

    ``paths`` gives each team's field path (``teams[1] (team-b)``) when known.
    """
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    for name in team_names:
        path = (paths or {}).get(name) or f"{where} ({name})"
        sid = share_identifier(name)
        if not sid:
            problems.append(Problem(
                f"{path}.name", name,
                "has no letter or digit, so it gives an empty fair-share identifier",
                "use a team name with letters or digits, such as team-a",
            ))
            continue
        if sid in seen:
            problems.append(Problem(
                f"{path}.name", name,
                f"gives the fair-share identifier {sid!r}, as team {seen[sid]!r} does"
                " (identifiers keep only letters and digits)",
                f"rename {name!r} or {seen[sid]!r} so that their letters and digits differ",
            ))
            continue
        seen[sid] = name
    return problems
