"""What a platform config promises each team: `gpu-share plan` and `validate`'s summary.

Every backend of the config is covered: Batch quota shares, HyperPod compute quotas,
fair-share queue shares and the inference endpoints; and so is what costs money
while nothing runs (:func:`idle_costs`).

Amounts carry units. The JSON keeps ``guarantee``, ``borrow_cap`` and ``max_usage``
in instances of each type (a HyperPod guarantee given in accelerators, vCPU, memory or
MIG partitions is the fraction of an instance it stands for, the largest of its
dimensions) and adds the same in GPUs (``*_gpus``, MIG partitions counted as the
fraction of a GPU they are, see :mod:`cdk_gpu_share.core.scenario`); the text shows
whole instances as instances and anything else in GPUs.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, time, timedelta, timezone
from typing import Any

from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.configuration import backends
from cdk_gpu_share.core.configuration.archive import archive_of, monthly_cost
from cdk_gpu_share.core.configuration.objectives import target_text
from cdk_gpu_share.core.configuration.parse import (
    Amount,
    PlatformConfig,
    TeamConfig,
    deploy_problems,
    group_tree,
    team_in_window,
)
from cdk_gpu_share.core.configuration.windows import boundaries, window_mapping
from cdk_gpu_share.core.policy.borrowing import borrow_cap, instance_equivalent
from cdk_gpu_share.core.policy.organisation import compilation, compile_flat
from cdk_gpu_share.core.scenario import amount_gpus
from cdk_gpu_share.core.text import format_table
from cdk_gpu_share.inference.config import endpoint_layout


def fleet_plan(config: PlatformConfig, *, now: datetime | None = None) -> dict[str, Any]:
    """Per backend: each team's guarantee, strategy, borrow cap and most it could use.

    On a backend that deploys a flat compilation of the organisation's tree (HyperPod, Batch
    quota management), the rows and the fleet line are what it deploys (the compiled shares,
    what each deployed limit lets a team borrow), each with the tree's figure beside
    (``tree_*`` keys): what ``gpu-share summary`` reads back from the synthesized templates.
    """
    out: dict[str, Any] = {"platform": config.name, "backends": {}}
    for spec in backends.registered():
        backend, section = spec.key, config.backend(spec.key)
        if section is None:
            continue
        teams = config.teams_for(backend)
        compiled = compile_flat(config, backend) if compilation(backend) == "approximate" else None
        deployed = {t.name: t for t in compiled.config.teams} if compiled is not None else {t.name: t for t in teams}
        rows = _team_rows(section, [deployed[t.name] for t in teams], backend)
        totals = _totals(section, rows)
        if compiled is not None and compiled.changes is not None and config.groups:
            tree_rows = {(r["team"], r["instance_type"]): r for r in _team_rows(section, teams, backend)}
            for r in rows:
                tree = tree_rows[r["team"], r["instance_type"]]
                r.update({"tree_guarantee": tree["guarantee"], "tree_borrow_cap": tree["borrow_cap"],
                          "tree_max_usage": tree["max_usage"]})
            pools = _pools(config, section)
            for it, t in totals.items():
                t["tree_guaranteed"] = sum(tree_rows[k]["guarantee"] for k in tree_rows if k[1] == it) + pools.get(it, 0.0)
                t["unassigned"] = float(compiled.unassigned.get(it, 0.0))
                t["tree_guaranteed_gpus"] = t["tree_guaranteed"] * _gpus_per_instance(it)
        out["backends"][backend] = {"teams": rows, "totals": totals, "strategy": spec.strategy,
                                    **spec.plan_extras(section), **spec.plan_team_extras(section, teams)}
        if config.groups and teams:
            tree = tree_plan(config, backend, _team_rows(section, teams, backend))
            by_row = {(r["team"], r["instance_type"]): r for r in rows}
            most = {(n["name"], it): t["max_usage"] for n in tree["nodes"] if n["kind"] == "team"
                    for it, t in n["types"].items()}
            for r in rows:  # the most a team could use in the tree counts its groups' bounds
                if "tree_max_usage" in r:
                    r["tree_max_usage"] = most[r["team"], r["instance_type"]]
            for c in tree["changes"]:  # what the table says the team may borrow, deployed and in the tree
                row = by_row[c["team"], c["instance_type"]]
                c["borrow_cap"], c["tree_borrow_cap"] = row["borrow_cap"], row.get("tree_borrow_cap")
            out["backends"][backend]["tree"] = tree
    out["inference"] = inference_plan(config)
    out["idle_costs"] = idle_costs(config)
    if config.windows:
        out["windows"] = windows_plan(config, now or datetime.now(timezone.utc))
    return out


def windows_plan(config: PlatformConfig, now: datetime) -> dict[str, Any]:
    """The windows' week: when each opens and closes in the week (Monday 00:00 UTC) that holds
    ``now``, and per window (and the base) each team's guarantee and borrow cap per backend
    with the sum of the guarantees; which backends deploy the windows."""
    monday = datetime.combine((now.astimezone(timezone.utc) - timedelta(days=now.astimezone(timezone.utc).weekday())
                               ).date(), time(0), tzinfo=timezone.utc)
    timeline = [{"at": t.isoformat(), "window": w.name if w is not None else None}
                for t, w in boundaries(config.windows, monday, monday + timedelta(days=7))]
    base = dataclasses.replace(config, windows=())
    periods = []
    for window in (None, *config.windows):
        described: dict[str, Any] = ({"name": None} if window is None
                                     else {**window_mapping(window), "timezone": window.timezone})
        teams = tuple(team_in_window(t, window.name if window else None) for t in config.teams)
        inner = fleet_plan(dataclasses.replace(base, teams=teams))
        described["backends"] = {
            b: {"teams": [{k: r[k] for k in ("team", "instance_type", "guarantee", "guarantee_gpus", "borrow_cap")}
                          for r in d["teams"]],
                # With groups on a backend that compiles the tree: the window's compilation, and
                # beside it the tree's quota in the window and what its compilation left unassigned.
                "guaranteed": {it: {"instances": t["guaranteed"], "capacity": t["capacity"],
                                    **{k: t[k] for k in ("tree_guaranteed", "unassigned") if k in t}}
                               for it, t in d["totals"].items()}}
            for b, d in inner["backends"].items()}
        periods.append(described)
    deployment = {key: lines for key in backends.keys() if config.backend(key) is not None
                  and (lines := backends.spec(key).window_deployment(config.backend(key), config.windows))}
    return {"week_from": monday.isoformat(), "timeline": timeline, "base": periods[0], "windows": periods[1:],
            "not_deployed_on": [p.value for p in deploy_problems(config)], "deployment": deployment}


def _compiled_sum(total: dict[str, Any]) -> str:
    """After a window's sum of guarantees on a compiled tree: that it is the compilation's, beside
    the tree's quota in the window (and what no team could take)."""
    if "tree_guaranteed" not in total:
        return ""
    left = f", {_num(total['unassigned'])} unassigned" if total.get("unassigned") else ""
    return f" as deployed (the tree's quota {_num(total['tree_guaranteed'])}{left})"


def _windows_lines(data: dict[str, Any]) -> list[str]:
    """The windows' week and each window's values, as ``plan`` prints them."""
    week = datetime.fromisoformat(data["week_from"])
    lines = ["", f"windows, the week from {week:%a %Y-%m-%d} (UTC):"]
    for entry in data["timeline"]:
        at = datetime.fromisoformat(entry["at"])
        lines.append(f"  {at:%a %H:%M}  {entry['window'] or 'base'}")
    for period in (data["base"], *data["windows"]):
        if period["name"] is None:
            lines.append("  base (outside every window):")
        else:
            lines.append(f"  window {period['name']}: {', '.join(period['days'])} {period['start']}-{period['end']} "
                         f"{period['timezone']}:")
        for backend, d in period["backends"].items():
            values = ", ".join(f"{r['team']} {amount_text(r['guarantee'], r['instance_type'])}"
                               f" (may borrow {amount_text(r['borrow_cap'], r['instance_type'])})" for r in d["teams"])
            sums = ", ".join(f"{it} {_num(t['instances'])} of {_num(t['capacity'])}{_compiled_sum(t)}"
                             for it, t in d["guaranteed"].items())
            lines.append(f"    {backend}: {values}; guaranteed {sums}")
    for backend, how in data.get("deployment", {}).items():
        lines.append(f"  deployed on {backend}:")
        lines += [f"    {line}" for line in how]
    if data["not_deployed_on"]:
        lines.append(f"  deployed: not yet on {', '.join(data['not_deployed_on'])} (validate and synth refuse"
                     " windows there)")
    return lines


def _pools(config: PlatformConfig, section: Any) -> dict[str, float]:
    """The groups' own pools on the section's instance types, in instances."""
    out: dict[str, float] = {}
    for g in config.groups:
        for it, amount in g.guarantee.items():
            if it in section.capacity:
                out[it] = out.get(it, 0.0) + instance_equivalent(it, amount)
    return out


def _team_rows(section: Any, teams: list[TeamConfig], backend: str) -> list[dict[str, Any]]:
    """One row per team and instance type of ``section``: guarantee, borrow cap, most it could use."""
    rows = []
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
            per = _gpus_per_instance(it)
            rows.append(
                {
                    "team": team.name,
                    "instance_type": it,
                    "guarantee": g,
                    "guarantee_text": amount.describe(),
                    "guarantee_gpus": _gpus_of(it, amount),
                    "sharing": team.sharing.value,
                    "borrow_cap": cap,
                    "borrow_cap_gpus": None if cap is None else cap * per,
                    "max_usage": max(g, most),
                    "max_usage_gpus": max(g, most) * per,
                    "in_team_preemption": team.in_team_preemption,
                    "in_team_preemption_text": in_team_preemption_text(team, backend),
                    "checkpoint_seconds": team.checkpoint_seconds,
                    "preemption_retries": team.preemption_retries,
                    "objectives": dict(team.objectives.targets),
                    **_entitlement_of(team, it),
                }
            )
    return rows


def _totals(section: Any, rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per instance type: the capacity, what the rows guarantee, and the rest."""
    totals: dict[str, dict[str, float]] = {it: {"capacity": n, "guaranteed": 0.0} for it, n in section.capacity.items()}
    for r in rows:
        totals[r["instance_type"]]["guaranteed"] += r["guarantee"]
    for it, t in totals.items():
        t["unguaranteed"] = t["capacity"] - t["guaranteed"]
        per = _gpus_per_instance(it)
        t["capacity_gpus"] = t["capacity"] * per
        t["guaranteed_gpus"] = t["guaranteed"] * per
        t["unguaranteed_gpus"] = t["unguaranteed"] * per
    return totals


def _entitlement_of(team: TeamConfig, instance_type: str) -> dict[str, Any]:
    """``{"entitlement": instances}`` when the team was promised an entitlement of the type (what
    simulate and advise judge its promises against), else nothing."""
    n = (team.objectives.entitlement or {}).get(instance_type)
    return {} if n is None else {"entitlement": n}


def _gpus_per_instance(instance_type: str) -> int:
    info = instances.lookup(instance_type)
    return info.gpus if info is not None else 0


def _gpus_of(instance_type: str, amount: Amount) -> float:
    return float(amount_gpus(instance_type, amount))


def _plural(n: float, word: str) -> str:
    text = _num(n)
    return f"{text} {word}" + ("" if text == "1" else "s")


def amount_text(instances_: float | None, instance_type: str) -> str:
    """``3 instances (3 GPUs)`` for whole instances; ``4.57 GPUs`` for a part of an instance."""
    if instances_ is None:
        return "unlimited"
    if math.isclose(instances_, 0, abs_tol=1e-9):
        return "nothing"
    gpus = instances_ * _gpus_per_instance(instance_type)
    if math.isclose(instances_, round(instances_), abs_tol=1e-9):
        return f"{_plural(round(instances_), 'instance')} ({_plural(gpus, 'GPU')})"
    return _plural(round(gpus, 2), "GPU")


def _guarantee_text(row: dict[str, Any]) -> str:
    """The guarantee in words, and the entitlement beside it when the team was promised another."""
    text = _amount_words(row)
    e = row.get("entitlement")
    if e is not None and not math.isclose(e, row["guarantee"], abs_tol=1e-9):
        text += f", entitled to {amount_text(e, row['instance_type'])}"
    return text


def _tree_beside(row: dict[str, Any], key: str) -> str:
    """``; tree 2 instances (2 GPUs)`` when the tree's figure differs from the deployed one, else nothing."""
    tree = row.get(f"tree_{key}", row[key])
    same = tree == row[key] or (tree is not None and row[key] is not None and math.isclose(tree, row[key], abs_tol=1e-9))
    return "" if same else f"; tree {amount_text(tree, row['instance_type'])}"


def _fleet_tree_text(totals: dict[str, Any], instance_type: str) -> str:
    """What the fleet line adds on a compiled tree: the tree's total quota and what stays unassigned."""
    if "tree_guaranteed" not in totals:
        return ""
    text = f" as deployed (the tree's quota {amount_text(totals['tree_guaranteed'], instance_type)}"
    if totals["unassigned"]:
        text += f", of which {amount_text(totals['unassigned'], instance_type)} unassigned"
    return text + ")"


def _amount_words(row: dict[str, Any]) -> str:
    text = row["guarantee_text"]
    if text.endswith(("instance", "instances")):
        return text
    extra = []
    if "mig-" in text:
        partitions = sum(int(part.split("x ", 1)[0]) for part in text.split(", ") if "x mig-" in part)
        extra.append(_plural(partitions, "MIG partition"))
    extra.append(_plural(round(row["guarantee_gpus"], 2), "GPU"))
    return f"{text} ({', '.join(extra)})"


def inference_plan(config: PlatformConfig) -> list[dict[str, Any]]:
    """Each inference endpoint: instances, GPUs, its MIG layout and partitions, and its models."""
    if config.inference is None:
        return []

    out = []
    for e in config.inference.endpoints:
        layout = endpoint_layout(e)
        gpus = _gpus_per_instance(e.instance_type) * e.instance_count
        models = []
        for m in e.models:
            models.append({
                "model": m.name,
                "team": m.team,
                "per_copy": m.profile if m.profile else f"{m.gpus} whole GPU" + ("" if m.gpus == 1 else "s"),
                "copies": {"initial": m.copies.initial, "min": m.copies.min, "max": m.copies.max},
            })
        entry: dict[str, Any] = {
            "endpoint": e.name,
            "instance_type": e.instance_type,
            "instances": e.instance_count,
            "gpus": gpus,
            "layout": list(layout),
            "mig_partitions": len(layout) * gpus,
            "models": models,
        }
        if e.whole_gpu is not None:
            entry["whole_gpu"] = {"instance_type": e.whole_gpu.instance_type, "instances": e.whole_gpu.instance_count,
                                  "gpus": _gpus_per_instance(e.whole_gpu.instance_type) * e.whole_gpu.instance_count}
        out.append(entry)
    return out


#: The demand the archive's cost is quoted for (docs/history.md).
ARCHIVE_QUOTE_JOBS_PER_DAY = 10_000


def archive_costs(config: PlatformConfig) -> list[dict[str, str]]:
    """The job archive (``history``): its key every month, and what its jobs add."""
    archive = archive_of(config)
    if archive is None:
        return []
    cost = monthly_cost(ARCHIVE_QUOTE_JOBS_PER_DAY, retention_days=archive.retention_days,
                        service_jobs=any(spec.service_jobs for spec in backends.registered()
                                         if config.backend(spec.key) is not None))
    return [{"backend": "history", "resource": "job archive",
             "what": f"the job archive: a customer-managed KMS key (${cost['KMS key']:.2f} a month) and, per job,"
                     f" its events through Firehose into S3 (kept {_plural(archive.retention_days, 'day')}): about"
                     f" ${sum(cost.values()):.2f} a month in all at {ARCHIVE_QUOTE_JOBS_PER_DAY:,} jobs a day"
                     " (set history.enabled: false to go without)"}]


def idle_costs(config: PlatformConfig) -> list[dict[str, str]]:
    """What the config's platform costs while no job runs: one entry per billed resource."""
    out: list[dict[str, str]] = []
    for spec in backends.registered():
        section = config.backend(spec.key)
        if section is not None:
            out += spec.idle_costs(config, section)
    out += archive_costs(config)
    for e in inference_plan(config):
        out.append({
            "backend": "inference",
            "resource": "always-on endpoint",
            "what": f"endpoint {e['endpoint']}: {_plural(e['instances'], 'instance')} of {e['instance_type']} "
                    f"({_plural(e['gpus'], 'GPU')}) billed every hour, whether or not a model gets requests",
        })
        if "whole_gpu" in e:
            w = e["whole_gpu"]
            out.append({
                "backend": "inference",
                "resource": "always-on endpoint",
                "what": f"endpoint {e['endpoint']}-whole: {_plural(w['instances'], 'instance')} of "
                        f"{w['instance_type']} ({_plural(w['gpus'], 'GPU')}) billed every hour",
            })
    alerts = getattr(config, "alerts", None)
    if alerts is not None and not alerts.topic_arn:
        out.append({"backend": "alerts", "resource": "KMS key",
                    "what": "1 customer-managed KMS key encrypting the alarm topic (billed monthly)"})
    return out


def in_team_preemption_text(team: TeamConfig, backend: str) -> str:
    """What a team's own higher-priority jobs may do to its lower ones, and whose default that is."""
    return backends.spec(backend).in_team_preemption_text(team)


def _num(x: float | None) -> str:
    if x is None:
        return "unlimited"
    return f"{x:g}" if not math.isclose(x, round(x), abs_tol=1e-9) else str(int(round(x)))


#: The keys of a backend's plan that every backend has (the rest come from its plan_extras).
_PLAN_KEYS = frozenset({"teams", "totals", "strategy", "tree"})


def tree_plan(config: PlatformConfig, backend: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The organisation's tree on ``backend``: each node's quota Q, borrow limit B and the most it
    could use (the least Q + B above it, the fleet's capacity, a team's own bound), per instance
    type in instances; and, for a backend that deploys a flat compilation, what it changed."""

    section = config.backend(backend)
    tree = group_tree(config, backend)
    team_most = {(r["team"], r["instance_type"]): r["max_usage"] for r in rows}
    nodes = []
    for depth, name in tree.depth_first():
        group = tree.is_group(name)
        path = ((name,) if group else ()) + (tree.path(name) if not group else _ancestors(tree, name))
        per_type = {}
        for it, capacity in section.capacity.items():
            bound = min([float(capacity)] + [tree.bound(g, it) for g in path])
            if not group:
                bound = min(bound, team_most.get((name, it), 0.0))
            per_type[it] = {"quota": tree.quota(name).get(it, 0.0),
                            "borrow_limit": tree.borrow_limit(name, it) if group else None, "max_usage": bound}
        nodes.append({"depth": depth, "name": name, "kind": "group" if group else "team", "types": per_type})
    compiled = compile_flat(config, backend)
    return {"compilation": compilation(backend), "nodes": nodes,
            "changes": [dict(vars(c)) for c in compiled.changes], "unassigned": dict(compiled.unassigned)}


def _ancestors(tree: Any, group: str) -> tuple[str, ...]:
    out = []
    parent = tree.groups[group].parent
    while parent is not None:
        out.append(parent)
        parent = tree.groups[parent].parent
    return tuple(out)


def _tree_lines(tree: dict[str, Any]) -> list[str]:
    lines = [f"  tree ({tree['compilation']}): quota Q, borrow limit B, most it could use"]
    for node in tree["nodes"]:
        parts = []
        for it, t in node["types"].items():
            b = "" if node["kind"] == "team" else (
                ", B unlimited" if t["borrow_limit"] is None else f", B {amount_text(t['borrow_limit'], it)}")
            parts.append(f"{it} Q {amount_text(t['quota'], it)}{b}, at most {amount_text(t['max_usage'], it)}")
        label = node["name"] + ("/" if node["kind"] == "group" else "")
        lines.append(f"  {'  ' * (node['depth'] + 1)}{label}: " + "; ".join(parts))
    for c in tree["changes"]:
        it = c["instance_type"]
        borrow = f"may borrow {amount_text(c['tree_borrow_cap'], it)} -> {amount_text(c['borrow_cap'], it)}"
        if c["compiled_borrow_percent"] is not None:
            borrow += f" ({c['compiled_borrow_percent']} % of the compiled guarantee)"
        bound = "none" if c["bound"] is None else amount_text(c["bound"], it)
        lines.append(f"  compiled {c['team']} on {it}: guarantee {amount_text(c['guarantee'], it)} -> "
                     f"{amount_text(c['compiled_guarantee'], it)}, {borrow} (its groups' least bound {bound})")
    for it, left in tree.get("unassigned", {}).items():
        lines.append(f"  unassigned on {it}: {amount_text(left, it)} of the groups' pools, which no team below"
                     " them may use under its own borrow cap or its groups' borrow limits")
    return lines


def format_plan(plan: dict[str, Any]) -> str:
    """The plan as tables a person can read (the CLI's one table printer)."""
    lines = [f"platform {plan['platform']}"]
    headers = ["team", "instance type", "guarantee", "sharing", "may borrow", "most it could use"]
    for backend, data in plan["backends"].items():
        lines += ["", f"{backend}: {data.get('strategy', backend)}"]
        rows = [
            [
                r["team"],
                r["instance_type"],
                _guarantee_text(r) + _tree_beside(r, "guarantee"),
                r["sharing"],
                amount_text(r["borrow_cap"], r["instance_type"]) + _tree_beside(r, "borrow_cap"),
                amount_text(r["max_usage"], r["instance_type"]) + _tree_beside(r, "max_usage"),
            ]
            for r in data["teams"]
        ]
        if any("tree_guarantee" in r for r in data["teams"]):
            lines.append("  as deployed (the compiled shares), the tree's figure beside where it differs:")
        lines += format_table(headers, rows, right=set(), indent="  ")
        if "tree" in data:
            lines += _tree_lines(data["tree"])
        for it, t in data["totals"].items():
            lines.append(
                f"  fleet {it}: capacity {amount_text(t['capacity'], it)}, guaranteed {amount_text(t['guaranteed'], it)}"
                f"{_fleet_tree_text(t, it)}, unguaranteed {amount_text(t['unguaranteed'], it)}"
            )
        # What a backend adds (BackendSpec.plan_extras): a line each, a sentence or an object's "text".
        for key, extra in data.items():
            if key in _PLAN_KEYS:
                continue
            text = extra.get("text") if isinstance(extra, dict) else extra
            if isinstance(text, str):
                lines.append(f"  {key}: {text}")
        checkpoints = _checkpoints_text(data)
        if checkpoints:
            lines.append(f"  checkpoints: {checkpoints}")
        retries = _retries_text(backend, data)
        if retries:
            lines.append(f"  preemption retries: {retries}")
        objectives = _objectives_text(data)
        if objectives:
            lines.append(f"  objectives: {objectives}")
        preemption = {r["team"]: r["in_team_preemption_text"] for r in data["teams"]}
        if preemption:
            lines.append("  in-team preemption: " + ", ".join(f"{t} {text}" for t, text in preemption.items()))
    for e in plan.get("inference", []):
        lines += ["", f"inference endpoint {e['endpoint']}: {_plural(e['instances'], 'instance')} of {e['instance_type']} "
                      f"({_plural(e['gpus'], 'GPU')}), every GPU split {' + '.join(e['layout'])} = "
                      f"{_plural(e['mig_partitions'], 'MIG partition')}"]
        if "whole_gpu" in e:
            w = e["whole_gpu"]
            lines.append(f"  whole-GPU variant: {_plural(w['instances'], 'instance')} of {w['instance_type']} "
                         f"({_plural(w['gpus'], 'GPU')})")
        rows = [[m["model"], m["team"] or "-", m["per_copy"],
                 str(m["copies"]["initial"]) if m["copies"]["min"] == m["copies"]["max"]
                 else f"{m['copies']['min']}..{m['copies']['max']} (starts {m['copies']['initial']})"]
                for m in e["models"]]
        lines += format_table(["model", "team", "each copy on", "copies"], rows, right=set(), indent="  ")
    if plan.get("windows"):
        lines += _windows_lines(plan["windows"])
    costs = plan.get("idle_costs", [])
    lines += ["", "costs money while idle:" if costs else "costs money while idle: nothing"]
    lines += [f"  - {c['what']}" for c in costs]
    return "\n".join(lines)


def _objectives_text(data: dict[str, Any]) -> str:
    """Each team's objectives in words (the teams that have any), as simulate and advise judge them."""
    said: dict[str, str] = {}
    for r in data["teams"]:
        if r.get("objectives") and r["team"] not in said:
            said[r["team"]] = ", ".join(target_text(k, v) for k, v in r["objectives"].items())
    return "; ".join(f"{team} {text}" for team, text in said.items())


def _retries_text(backend: str, data: dict[str, Any]) -> str:
    """Batch quota management: how often each team's preempted jobs are queued again, when one says."""
    said = {r["team"]: r.get("preemption_retries") for r in data["teams"]}
    if backend != "batch_quota" or all(v is None for v in said.values()):
        return ""
    parts = [f"{t} {v} (then the job fails)" if v else f"{t} 0 (fails on its first preemption)"
             for t, v in said.items() if v is not None]
    rest = [t for t, v in said.items() if v is None]
    if rest:
        parts.append(f"{', '.join(rest)} every time (Batch's default)")
    return "; ".join(parts)


def _checkpoints_text(data: dict[str, Any]) -> str:
    """Each team's declared checkpoint interval, on a backend whose reclaimer this library runs,
    when one is declared or the reclaimer reads them (elsewhere the service picks its victims)."""
    if "reclaim" not in data:
        return ""
    declared: dict[str, Any] = {}
    for r in data["teams"]:
        declared.setdefault(r["team"], r.get("checkpoint_seconds"))
    reads = data.get("reclaim", {}).get("victim_order") == "checkpoint"
    if not reads and all(v is None for v in declared.values()):
        return ""
    # The checkpoint order believes no interval above its cap: say so where it applies.
    cap = data["reclaim"].get("max_checkpoint_seconds") if reads else None
    believed = f" (ordered as every {cap:g} s)" if cap else ""
    said = [f"{t} every {v:g} s" + (believed if cap and v > cap else "") if v else f"{t} never{believed}"
            for t, v in declared.items() if v is not None]
    silent = [t for t, v in declared.items() if v is None]
    if silent:
        said.append(f"{', '.join(silent)} not declared (never, unless a job tags gpu-share:checkpoint-seconds"
                    + (f"; ordered as every {cap:g} s)" if cap else ")"))
    return "; ".join(said)


def summarize(config: PlatformConfig) -> str:
    """One line: what the config declares."""
    parts = [f"platform {config.name}", f"{len(config.teams)} team{'s' if len(config.teams) != 1 else ''}"]
    for backend in backends.keys():
        section = config.backend(backend)
        if section is None:
            continue
        cap = ", ".join(f"{n} {it}" for it, n in section.capacity.items())
        parts.append(f"{backend}: {len(config.teams_for(backend))} teams on {cap}")
    if config.inference is not None:
        parts.append("inference")
    where = f"{config.source}: " if config.source else ""
    return f"{where}valid: " + "; ".join(parts)
