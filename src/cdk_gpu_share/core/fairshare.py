"""Fair-share identifiers of the classic AWS Batch queue and the reclaim planner's settings of
``fairshare.reclaim``: one rule each, used by the config validation, the FairshareQueue
construct, the reclaim Lambda, the simulator and ``gpu-share status``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

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


def reclaim_settings(reclaim: Any) -> dict[str, Any]:
    """The reclaim planner's ``settings`` of a :class:`~cdk_gpu_share.core.config.ReclaimConfig`,
    for the Lambda and the simulator alike (``victim_order`` only when it is not the default,
    so a config without it gives the settings it always gave)."""
    settings: dict[str, Any] = {"reclaim_after_seconds": reclaim.reclaim_after_seconds,
                                "min_runtime_seconds": reclaim.min_runtime_seconds}
    if reclaim.victim_order != "youngest":
        settings["victim_order"] = reclaim.victim_order
    return settings
