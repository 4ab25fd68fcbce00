"""What a platform config promises each team: `gpu-share plan` and `validate`'s summary.

Amounts are in instances of each type. A HyperPod guarantee given in
accelerators, vCPU, memory or MIG partitions is converted to the fraction of an
instance it stands for (the largest of its dimensions), using the instance
catalog.
"""

from __future__ import annotations

import math
from typing import Any

from cdk_gpu_share.core import instances
from cdk_gpu_share.core.config import BACKENDS, HYPERPOD, Amount, PlatformConfig, TeamConfig

UNLIMITED = None
#: A HyperPod compute quota without BorrowLimit gets the service default of 50 percent.
HYPERPOD_DEFAULT_BORROW_PERCENT = 50


def instance_equivalent(instance_type: str, amount: Amount) -> float:
    """How many instances of ``instance_type`` ``amount`` stands for."""
    if amount.is_instances_only:
        return float(amount.instances or 0)
    info = instances.lookup(instance_type)
    parts = [float(amount.instances or 0)]
    if info is not None:
        if amount.accelerators is not None:
            parts.append(amount.accelerators / info.gpus)
        if amount.vcpu is not None:
            parts.append(amount.vcpu / info.vcpus)
        if amount.memory_gib is not None:
            parts.append(amount.memory_gib / info.memory_gib)
        if amount.mig:
            slices = sum(int(p.split("-")[1].split("g")[0]) * n for p, n in amount.mig)
            parts.append(slices / (7 * info.gpus))
    return max(parts)


def borrow_cap(team: TeamConfig, instance_type: str, guarantee: float, backend: str | None = None) -> float | None:
    """The most ``team`` may borrow on ``instance_type`` (None: unbounded).

    On HyperPod a team without ``borrow_limit_percent`` gets the service default (50).
    """
    if not team.sharing.borrows:
        return 0.0
    caps = []
    pct = team.borrow_limit_percent
    if pct is None and backend == HYPERPOD:
        pct = HYPERPOD_DEFAULT_BORROW_PERCENT
    if pct is not None and pct >= 0:
        caps.append(guarantee * pct / 100)
    if instance_type in team.borrow_limit:
        caps.append(instance_equivalent(instance_type, team.borrow_limit[instance_type]))
    return min(caps) if caps else UNLIMITED


def fleet_plan(config: PlatformConfig) -> dict[str, Any]:
    """Per backend: each team's guarantee, strategy, borrow cap and most it could use."""
    out: dict[str, Any] = {"platform": config.name, "backends": {}}
    for backend in BACKENDS:
        section = config.backend(backend)
        if section is None:
            continue
        rows = []
        totals = {it: {"capacity": n, "guaranteed": 0.0} for it, n in section.capacity.items()}
        teams = config.teams_for(backend)
        for team in teams:
            for it, amount in sorted(team.guarantee_for(section.capacity).items()):
                totals[it]["guaranteed"] += instance_equivalent(it, amount)
        for team in teams:
            for it, amount in sorted(team.guarantee_for(section.capacity).items()):
                g = instance_equivalent(it, amount)
                cap = borrow_cap(team, it, g, backend)
                # Reserved idle guarantees of other teams are never lent.
                reserved = sum(
                    instance_equivalent(it, o.guarantee[it])
                    for o in teams
                    if o is not team and not o.sharing.lends and it in o.guarantee
                )
                pool = section.capacity[it] - reserved
                most = min(pool, g + cap) if cap is not None else pool
                rows.append(
                    {
                        "team": team.name,
                        "instance_type": it,
                        "guarantee": g,
                        "guarantee_text": amount.describe(),
                        "sharing": team.sharing.value,
                        "borrow_cap": cap,
                        "max_usage": max(g, most),
                        "in_team_preemption": team.in_team_preemption,
                        "in_team_preemption_text": in_team_preemption_text(team, backend),
                    }
                )
        for t in totals.values():
            t["unguaranteed"] = t["capacity"] - t["guaranteed"]
        out["backends"][backend] = {"teams": rows, "totals": totals}
    return out


def in_team_preemption_text(team: TeamConfig, backend: str) -> str:
    """What a team's own higher-priority jobs may do to its lower ones, and whose default that is."""
    if backend == HYPERPOD:
        if team.in_team_preemption is None:
            return "LowerPriority (HyperPod default)"
        return "LowerPriority" if team.in_team_preemption else "Never"
    return "enabled" if team.in_team_preemption else "disabled" + (" (default)" if team.in_team_preemption is None else "")


def _num(x: float | None) -> str:
    if x is None:
        return "unlimited"
    return f"{x:g}" if not math.isclose(x, round(x), abs_tol=1e-9) else str(int(round(x)))


def format_plan(plan: dict[str, Any]) -> str:
    """The plan as tables a person can read."""
    lines = [f"platform {plan['platform']}"]
    headers = ["team", "instance type", "guarantee", "sharing", "may borrow", "most it could use"]
    for backend, data in plan["backends"].items():
        lines.append("")
        lines.append(f"{backend}:")
        rows = [
            [
                r["team"],
                r["instance_type"],
                r["guarantee_text"],
                r["sharing"],
                _num(r["borrow_cap"]),
                _num(r["max_usage"]),
            ]
            for r in data["teams"]
        ]
        widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(headers)]
        lines.append("  " + "  ".join(h.ljust(w) for h, w in zip(headers, widths)))
        lines.append("  " + "  ".join("-" * w for w in widths))
        for row in rows:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)))
        for it, t in data["totals"].items():
            lines.append(
                f"  fleet {it}: capacity {_num(t['capacity'])}, guaranteed {_num(t['guaranteed'])},"
                f" unguaranteed {_num(t['unguaranteed'])}"
            )
        preemption = {r["team"]: r["in_team_preemption_text"] for r in data["teams"]}
        if preemption:
            lines.append("  in-team preemption: " + ", ".join(f"{t} {text}" for t, text in preemption.items()))
    return "\n".join(lines)


def summarize(config: PlatformConfig) -> str:
    """One line: what the config declares."""
    parts = [f"platform {config.name}", f"{len(config.teams)} team{'s' if len(config.teams) != 1 else ''}"]
    for backend in BACKENDS:
        section = config.backend(backend)
        if section is None:
            continue
        cap = ", ".join(f"{n} {it}" for it, n in section.capacity.items())
        parts.append(f"{backend}: {len(config.teams_for(backend))} teams on {cap}")
    if config.inference is not None:
        parts.append("inference")
    where = f"{config.source}: " if config.source else ""
    return f"{where}valid: " + "; ".join(parts)
