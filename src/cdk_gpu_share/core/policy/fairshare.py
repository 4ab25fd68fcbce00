"""Fair-share identifiers of the classic AWS Batch queue and the reclaim planner's settings of
``fairshare.reclaim``: one rule each, used by the config validation, the FairshareQueue
construct, the reclaim Lambda, the simulator and ``gpu-share status``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cdk_gpu_share.core.configuration.fields import DEFAULT_RECLAIM_MAX_CHECKPOINT_SECONDS
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
    """The reclaim planner's ``settings`` of a :class:`~cdk_gpu_share.core.configuration.parse.ReclaimConfig`,
    for the Lambda and the simulator alike (``victim_order`` and ``max_checkpoint_seconds`` only
    when they are not the default, so a config without them gives the settings it always gave)."""
    settings: dict[str, Any] = {"reclaim_after_seconds": reclaim.reclaim_after_seconds,
                                "min_runtime_seconds": reclaim.min_runtime_seconds}
    if reclaim.victim_order != "youngest":
        settings["victim_order"] = reclaim.victim_order
    cap = getattr(reclaim, "max_checkpoint_seconds", DEFAULT_RECLAIM_MAX_CHECKPOINT_SECONDS)
    if cap != DEFAULT_RECLAIM_MAX_CHECKPOINT_SECONDS:
        settings["max_checkpoint_seconds"] = cap
    return settings


def gpus_of(job: Mapping) -> float:
    """GPUs a job (a ``DescribeJobs`` detail) requires: its containers' ``GPU`` requirements.

    Single-container jobs (``container``), ECS task jobs
    (``ecsProperties.taskProperties[].containers[]``; every ``GPU`` entry counts) and
    multi-node parallel jobs (``nodeProperties``, as overridden at submission: each
    node range's GPUs times the nodes it targets) are counted; EKS jobs count 0.
    """
    def of(requirements: Iterable[Mapping] | None) -> float:
        total = 0.0
        for r in requirements or ():
            if r.get("type") == "GPU":
                try:
                    total += float(r.get("value", 0))
                except (TypeError, ValueError):
                    pass
        return total

    def of_ecs(ecs: Mapping | None) -> float:
        total = 0.0
        for task in (ecs or {}).get("taskProperties") or ():
            for c in task.get("containers") or ():
                total += of(c.get("resourceRequirements"))
        return total

    container = job.get("container")
    if container:
        return of(container.get("resourceRequirements"))
    nodes = job.get("nodeProperties")
    if nodes:
        count = int(nodes.get("numNodes") or 0)
        total = 0.0
        for rng in nodes.get("nodeRangeProperties") or ():
            per_node = of((rng.get("container") or {}).get("resourceRequirements")) + of_ecs(rng.get("ecsProperties"))
            total += per_node * _nodes_in(rng.get("targetNodes", ""), count)
        return total
    return of_ecs(job.get("ecsProperties"))


def _nodes_in(target: str, count: int) -> int:
    """Nodes a ``targetNodes`` range (``"0:3"``, ``"2:"``, ``":1"``, ``"4"``) covers among ``count``."""
    text = str(target).strip()
    try:
        if ":" in text:
            lo, hi = text.split(":", 1)
            first = int(lo) if lo.strip() else 0
            last = int(hi) if hi.strip() else count - 1
        else:
            first = last = int(text)
    except ValueError:
        return 0
    last = min(last, count - 1) if count else last
    return max(0, last - first + 1)
