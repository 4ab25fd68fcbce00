"""``gpu-share status`` with time windows: the window in force, and per team whether the values
deployed are that window's.

The window in force is the config's reading at the command's clock
(:func:`~cdk_gpu_share.core.configuration.windows.window_at`), with the instant it ends (the next
boundary). Then per backend of the config:

* **Batch quota management**: each team's quota share (``ListQuotaShares`` of the config's queue
  finds it by name, ``DescribeQuotaShare`` reads it) against what the switcher writes for the
  window (``share_values`` of the team's values in force; with groups, of the tree's compilation
  in force);
* **HyperPod**: each team's compute quota (``ListComputeQuotas`` of the config's cluster finds it
  by team, ``DescribeComputeQuota`` reads it) against ``quota_values`` of the values in force;
* **fair share**: nothing to read: the reclaim Lambda reads the values in force at every cycle;
* **Kueue**: not checked: ``status`` has no access to the cluster.

A difference is named by team and field, with the value deployed and the value expected. A
backend that cannot be read is one line with the error; the rest of the report stands.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from cdk_gpu_share.cli._aws import batch_quota_queue
from cdk_gpu_share.core.configuration.model import team_in_window
from cdk_gpu_share.core.configuration.windows import boundaries, window_at

__all__ = ["MISMATCH_FIX", "format_windows", "windows_report"]

#: What to do when a team's deployed values are not those of the window in force.
MISMATCH_FIX = ("the quota window switcher has not applied the window in force: see its alarm \"quota window not"
                " applied\" and its log line switch_failed, fix the cause, then run the switcher again (a deploy"
                " runs it too)")
FAIRSHARE_NOTE = "the reclaim Lambda reads the values in force at every cycle: they match by construction"
KUEUE_NOTE = ("not checked: status has no access to the cluster; compare the ClusterQueues' nominalQuota and"
              " borrowingLimit with gpu-share plan")
#: How far ahead the end of the window in force is looked for (a week, and a day for daylight saving).
_AHEAD = timedelta(days=8)


def windows_report(config: Any, now: float, clients: Callable[[str], Any]) -> dict[str, Any]:
    """The window in force at ``now`` and, per backend of ``config``, whether each team's
    deployed values are that window's. ``clients(service)``: a boto3 client of ``batch`` or
    ``sagemaker``."""
    t = datetime.fromtimestamp(now, timezone.utc)
    window = window_at(config.windows, t)
    name = window.name if window is not None else None
    ahead = boundaries(config.windows, t, t + _AHEAD)
    out: dict[str, Any] = {"window": name or "base", "until": ahead[1][0].isoformat() if len(ahead) > 1 else None,
                           "backends": {}}
    checks: dict[str, Callable[[], dict[str, Any]]] = {
        "batch_quota": lambda: _batch_quota(config, name, clients("batch")),
        "hyperpod": lambda: _hyperpod(config, name, clients("sagemaker")),
        "fairshare": lambda: {"state": "by_construction", "note": FAIRSHARE_NOTE},
        "kueue": lambda: {"state": "not_checked", "note": KUEUE_NOTE},
    }
    for key, check in checks.items():
        if config.backend(key) is None:
            continue
        try:
            out["backends"][key] = check()
        except Exception as exc:  # noqa: BLE001 - one backend unread; the report stands
            out["backends"][key] = {"state": "unread", "note": f"could not be read: {type(exc).__name__}: {exc}"}
    return out


def _teams_result(teams: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    matched = all(not diffs for diffs in teams.values())
    result: dict[str, Any] = {"state": "match" if matched else "mismatch",
                              "teams": {team: {"match": not diffs, "differences": diffs} for team, diffs in teams.items()}}
    if not matched:
        result["fix"] = MISMATCH_FIX
    return result


def _differences(deployed: Mapping[str, Any], expected: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each field whose deployed value is not the expected one."""
    return [{"field": field, "deployed": deployed.get(field), "expected": value}
            for field, value in expected.items() if deployed.get(field) != value] + [
        {"field": field, "deployed": value, "expected": None}
        for field, value in deployed.items() if field not in expected]


def _deployed(config: Any, backend: str) -> Any:
    """The teams ``backend`` deploys: with groups, the tree's compilation (each window's its own)."""
    from cdk_gpu_share.core.policy.organisation import compile_flat

    return compile_flat(config, backend).config.teams_for(backend)


# -- Batch quota management -------------------------------------------------------------------


def _batch_fields(values: Mapping[str, Any], sharing_keys: Any = None) -> dict[str, Any]:
    """A quota share's values as fields: each instance type's instances (0 left out) and the
    sharing fields (those of ``sharing_keys``, when given)."""
    out: dict[str, Any] = {f"capacityLimits.{c['capacityUnit']}": c["maxCapacity"]
                           for c in values.get("capacityLimits") or () if c.get("maxCapacity")}
    sharing = values.get("resourceSharingConfiguration") or {}
    for key in sharing_keys if sharing_keys is not None else sharing:
        default = -1 if key == "borrowLimit" else None
        out[f"resourceSharingConfiguration.{key}"] = sharing.get(key, default)
    return out


def _batch_quota(config: Any, window: str | None, client: Any) -> dict[str, Any]:
    from cdk_gpu_share.aws import quota_reader
    from cdk_gpu_share.backends.batch_quota import share_values

    section = config.batch_quota
    queue = batch_quota_queue(config)
    arns = {s.get("quotaShareName"): s.get("quotaShareArn") for s in quota_reader._list_shares(client, queue)}
    teams: dict[str, list[dict[str, Any]]] = {}
    for team in _deployed(config, "batch_quota"):
        expected = share_values(team_in_window(team, window), section.capacity)
        want = _batch_fields(expected)
        if arns.get(team.name) is None:
            teams[team.name] = [{"field": "quota share", "deployed": None, "expected": team.name}]
            continue
        have = client.describe_quota_share(quotaShareArn=arns[team.name])
        teams[team.name] = _differences(
            _batch_fields(have, sharing_keys=list(expected["resourceSharingConfiguration"])), want)
    return _teams_result(teams)


# -- HyperPod ---------------------------------------------------------------------------------


_RESOURCE_FIELDS = ("Count", "Accelerators", "VCpu", "MemoryInGiB")


def _resource_fields(prefix: str, resources: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in resources or ():
        for f in _RESOURCE_FIELDS:
            if r.get(f):
                out[f"{prefix}.{r['InstanceType']}.{f}"] = r[f]
        partition = r.get("AcceleratorPartition")
        if partition and partition.get("Count"):
            out[f"{prefix}.{r['InstanceType']}.{partition['Type']}"] = partition["Count"]
    return out


def _hyperpod_fields(config: Mapping[str, Any], like: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A compute quota's configuration as fields: the resources (0 left out), the sharing and the
    preemption (only the keys ``like`` gives, when given)."""
    keys = like if like is not None else config
    out = _resource_fields("ComputeQuotaResources", config.get("ComputeQuotaResources"))
    if "ResourceSharingConfig" in keys:
        sharing = config.get("ResourceSharingConfig") or {}
        for key in (keys.get("ResourceSharingConfig") or {}):
            if key != "AbsoluteBorrowLimits":
                out[f"ResourceSharingConfig.{key}"] = sharing.get(key)
        out.update(_resource_fields("ResourceSharingConfig.AbsoluteBorrowLimits", sharing.get("AbsoluteBorrowLimits")))
    if "PreemptTeamTasks" in keys:
        out["PreemptTeamTasks"] = config.get("PreemptTeamTasks")
    return out


def _hyperpod(config: Any, window: str | None, client: Any) -> dict[str, Any]:
    from cdk_gpu_share.backends.hyperpod import quota_values

    section = config.hyperpod
    ids: dict[str, str] = {}
    for page in client.get_paginator("list_compute_quotas").paginate(ClusterArn=section.cluster_arn):
        for q in page.get("ComputeQuotaSummaries") or ():
            team = (q.get("ComputeQuotaTarget") or {}).get("TeamName")
            if team and q.get("ComputeQuotaId"):
                ids.setdefault(team, q["ComputeQuotaId"])
    teams: dict[str, list[dict[str, Any]]] = {}
    for team in _deployed(config, "hyperpod"):
        expected = quota_values(team_in_window(team, window), section.capacity)["ComputeQuotaConfig"]
        if team.name not in ids:
            teams[team.name] = [{"field": "compute quota", "deployed": None, "expected": team.name}]
            continue
        have = client.describe_compute_quota(ComputeQuotaId=ids[team.name]).get("ComputeQuotaConfig") or {}
        teams[team.name] = _differences(_hyperpod_fields(have, like=expected), _hyperpod_fields(expected))
    return _teams_result(teams)


# -- the text ---------------------------------------------------------------------------------


def _value(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def format_windows(report: Mapping[str, Any]) -> list[str]:
    """The lines of the windows part of the status."""
    until = report.get("until")
    when = f" until {datetime.fromisoformat(until):%a %Y-%m-%d %H:%M} UTC" if until else ""
    lines = [f"Window in force: {report['window']}{when}"]
    for key, result in report["backends"].items():
        if "teams" not in result:
            lines.append(f"  {key}: {result['note']}")
            continue
        lines.append(f"  {key}: " + ("every team's deployed values are the window's" if result["state"] == "match"
                                     else "some teams' deployed values are not the window's"))
        for team, check in result["teams"].items():
            if check["match"]:
                lines.append(f"    {team}: match")
            for d in check["differences"]:
                lines.append(f"    {team}: {d['field']} deployed {_value(d['deployed'])}, expected {_value(d['expected'])}")
        if result.get("fix"):
            lines.append(f"    fix: {result['fix']}")
    return lines
