"""``gpu-share status`` of a classic fair-share queue.

The queue is read with the reclaim Lambda's own reader (:mod:`cdk_gpu_share.aws.batch_reader`);
the teams' guarantees come from the platform config, and the numbers from the reclaim planner
(:func:`cdk_gpu_share.core.policy.reclaim.plan`), which also tells what the next reclaim cycle would
stop and which waiting jobs would then fit. Nothing is stopped: the plan is only printed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from cdk_gpu_share.aws import quota_reader
from cdk_gpu_share.backends.fairshare import KEY, VICTIM_ORDER_TEXT
from cdk_gpu_share.cli.status_cmd import fmt_duration, fmt_num, stamp, table
from cdk_gpu_share.core.errors import GpuShareError

#: The report's kind, and the IAM actions reading the queue needs (named in access-denied messages).
KIND = "classic"
ACTIONS = ("batch:DescribeJobQueues", "batch:ListJobs", "batch:DescribeJobs")


def reads(detail: Mapping[str, Any]) -> bool:
    """Whether the queue ``DescribeJobQueues`` returned is a classic queue (not a quota-management one)."""
    return not quota_reader.is_quota_queue(detail)


def report(client: Any, queue: str, detail: dict[str, Any], config: Any, *, now: float,
           sleep: Callable[[float], None]) -> dict[str, Any]:
    """The JSON report of the queue."""
    return classic_report(client, queue, detail, config, now=now, sleep=sleep)


#: ``min_runtime_seconds`` that protects every running job: planning the running jobs
#: alone with it makes the planner report the teams' usage as it is, stopping nothing.
_PROTECT_ALL = 1e15


def classic_report(
    client: Any,
    queue: str,
    detail: dict[str, Any],
    config: Any,
    *,
    now: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """The JSON report of a classic (fair-share) queue.

    The queue is read with :func:`cdk_gpu_share.aws.batch_reader.read_queue` (the reclaim
    Lambda's reader), with the reclaim settings the config gives the Lambda. Two runs of
    the planner give the numbers, so that no rule is computed twice:

    * **now**: the running jobs alone, every one protected: the planner's ``teams``
      section is each team's usage, guarantee, borrowed GPUs and borrow cap as they are;
    * **next cycle**: the whole state: what the reclaimer would stop at its next
      cycle (only printed; nothing is stopped).
    """
    from cdk_gpu_share.aws import batch_reader
    from cdk_gpu_share.core.policy import reclaim

    name = detail.get("jobQueueName", queue)
    section = _fairshare_section(config, name)
    now = time.time() if now is None else now
    # With time windows, the values in force now, as the reclaim Lambda's next cycle reads them.
    force = batch_reader.in_force(batch_reader.settings_from_config(config, queue=name), now)
    snapshot = batch_reader.read_queue(client, queue, force.settings, now, sleep=sleep)
    state = snapshot.state
    next_cycle = reclaim.plan(batch_reader.with_rises(state, force.rises))
    # Planned with every running job protected, the teams' numbers are their usage as it is.
    running = [j for j in state["jobs"] if j["state"] == "running"]
    current = reclaim.plan({**state, "settings": {**state.get("settings", {}), "min_runtime_seconds": _PROTECT_ALL},
                            "jobs": running})["teams"]
    teams = _team_rows(state, current, now)
    team_of = {j["id"]: j["team"] for j in state["jobs"]}
    for p in next_cycle["preemptions"]:
        teams[p["team"]]["next_cycle"]["stop"].append(p["job"])
    for jid in next_cycle["served"]:
        teams[team_of[jid]]["next_cycle"]["serve"].append(jid)
    return {
        "kind": KIND,
        "queue": name,
        "queue_arn": detail.get("jobQueueArn", ""),
        "queue_type": detail.get("jobQueueType", "ECS"),
        "now": round(now, 3),
        "capacity": state["capacity"],
        "settings": state.get("settings", {}),
        "dry_run": bool(section.reclaim.dry_run),
        "reclaim_enabled": bool(section.reclaim.enabled),
        "victim_order": section.reclaim.victim_order,
        "teams": teams,
        "next_cycle": next_cycle,
        "api_calls": dict(snapshot.calls),
        "notes": _notes(section, detail, snapshot.unknown_shares, name, queue)
        + _record_notes(snapshot.unrecorded, snapshot.bad_checkpoint_tags),
    }


def _record_notes(unrecorded: list[Any], bad_tags: list[tuple[str, str]]) -> list[str]:
    """With the checkpoint-aware order: runs the reclaimer has not recorded yet, and ignored interval tags."""
    notes = []
    if unrecorded:
        notes.append(f"{len(unrecorded)} running job(s) carry no gpu-share:borrowed record yet (the next cycle "
                     "records them); whether they borrowed is derived from the queue as it is now")
    for jid, value in bad_tags:
        notes.append(f"job {jid}: gpu-share:checkpoint-seconds={value!r} is no interval in seconds; its team's "
                     "default applies")
    return notes


def explain(client: Any, queue: str, detail: dict[str, Any], config: Any, job_id: str, *, now: float,
            sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Why job ``job_id`` waits, read as the reclaimer reads the queue, with the planner's definitions."""
    return explain_live(client, queue, detail, config, job_id, now=now, sleep=sleep)[0]


def explain_live(client: Any, queue: str, detail: dict[str, Any], config: Any, job_id: str, *, now: float,
                 sleep: Callable[[float], None] = time.sleep) -> tuple[dict[str, Any], list[Any]]:
    """:func:`explain`, and the queue's running and waiting jobs as the wait predictor takes them
    (:class:`~cdk_gpu_share.core.eta.live.LiveJob`; terminating jobs left out), from the same read."""
    from cdk_gpu_share.aws import batch_reader
    from cdk_gpu_share.core.eta.live import LiveJob
    from cdk_gpu_share.core.policy import reclaim
    from cdk_gpu_share.core.records import waiting

    name = detail.get("jobQueueName", queue)
    section = _fairshare_section(config, name)
    force = batch_reader.in_force(batch_reader.settings_from_config(config, queue=name), now)
    state = batch_reader.read_queue(client, queue, force.settings, now, sleep=sleep).state
    live = [LiveJob(id=j["id"], team=j["team"], gpus=float(sum(j["demand"].values())), priority=int(j["priority"]),
                    since=float(j["since"]), running=j["state"] == "running")
            for j in state["jobs"] if not j["terminating"]]
    job = next((j for j in state["jobs"] if j["id"] == job_id), None)
    out: dict[str, Any] = {"kind": KIND, "queue": name, "job": job_id, "team": job and job["team"],
                           "state": "waiting" if job and job["state"] == "pending" else
                           ("running" if job else _state_elsewhere(client, detail, job_id)), "reasons": []}
    if job is None or job["state"] != "pending" or job["terminating"]:
        out["note"] = ("it has ended" if out["state"] in _ENDED else "it is not waiting for capacity in this queue")
        return out, live
    # A job of a team whose guarantee rose has waited, for the reclaimer, since the later of its
    # submission and the rise.
    parsed = reclaim.parse_state(batch_reader.with_rises(state, force.rises))
    usage: dict[str, dict] = {t.name: {} for t in parsed.teams}
    for j in parsed.jobs:
        if j.state == "running" and not j.terminating:
            for r, d in j.demand.items():
                usage[j.team][r] = usage[j.team].get(r, 0) + d
    views = {r: [waiting.TeamView(t.name, t.guarantee.get(r, 0), usage[t.name].get(r, 0), reclaim.borrow_cap(t, r),
                                  reserve=t.sharing == "reserve") for t in parsed.teams] for r in parsed.capacity}
    spec = next(j for j in parsed.jobs if j.id == job_id)
    ahead = sum(1 for j in parsed.jobs if j.team == spec.team and j.state == "pending" and not j.terminating
                and reclaim.pending_key(j) < reclaim.pending_key(spec))
    waited = max(0.0, now - spec.since)
    left = max(0.0, parsed.settings.reclaim_after_seconds - waited)
    poll = section.reclaim.schedule_minutes * 60
    eta = (f"by the reclaimer within about {left + poll:g} s (its cycle every {poll} s, once the job waited"
           f" {parsed.settings.reclaim_after_seconds:g} s)") if section.reclaim.enabled else \
        "only as the borrowers' jobs end (the reclaimer is disabled)"
    reasons = waiting.explain(spec.team, spec.demand, views, parsed.capacity, ahead=ahead, reclaim_in=eta,
                              unit_label="GPU")
    out["need"] = dict(spec.demand)
    out["reasons"] = [r.to_json() for r in reasons]
    return out, live


_ENDED = ("succeeded", "failed")


def _state_elsewhere(client: Any, detail: dict[str, Any], job_id: str) -> str:
    """The state of a job the queue's listing does not hold (it ended, or has not reached RUNNABLE):
    its own status, lower-case. An id Batch does not know, or a job of another queue, is refused
    in one line."""
    found = client.describe_jobs(jobs=[job_id]).get("jobs") or []
    if not found:
        queue = detail.get("jobQueueName") or detail.get("jobQueueArn")
        raise GpuShareError(f"job {job_id!r} is not a job AWS Batch knows (queue {queue}); check the id: "
                            "gpu-share status lists the waiting jobs")
    quota_reader.check_job_queue(job_id, found[0], detail)
    return str(found[0].get("status", "?")).lower()


def _fairshare_section(config: Any, name: str) -> Any:
    """The config's ``fairshare`` section: a classic queue's guarantees live there."""
    if config is None:
        raise GpuShareError(
            f"job queue {name!r} is a classic fair-share queue: the teams' guarantees live in the platform "
            "config; pass --config platform.yaml"
        )
    section = config.backend(KEY)
    if section is None:
        raise GpuShareError(
            f"job queue {name!r} is a classic fair-share queue but {config.source or 'the config'} has no "
            "fairshare section; pass the config that deployed this queue"
        )
    return section


def _team_rows(state: dict[str, Any], current: dict[str, Any], now: float) -> dict[str, Any]:
    """Each team's numbers now, with its running, waiting and terminating jobs and how long they wait."""
    from cdk_gpu_share.core.policy import reclaim

    specs = {t.name: t for t in reclaim.parse_state(state).teams}
    teams: dict[str, Any] = {}
    for tname, numbers in current.items():
        teams[tname] = {**numbers, "running_jobs": 0, "waiting_jobs": 0, "terminating_jobs": 0,
                        "oldest_wait_seconds": None, "lender_wait_seconds": None, "next_cycle": {"stop": [], "serve": []}}
    for job in state["jobs"]:
        row = teams[job["team"]]
        if job.get("terminating"):
            row["terminating_jobs"] += 1
        elif job["state"] == "running":
            row["running_jobs"] += 1
        else:
            row["waiting_jobs"] += 1
            age = max(0.0, now - job["since"])
            row["oldest_wait_seconds"] = _max(row["oldest_wait_seconds"], age)
            # A job within its team's guarantee waits because capacity is lent: the lender waits.
            if reclaim.within_guarantee(job["demand"], specs[job["team"]], current[job["team"]]["usage"]):
                row["lender_wait_seconds"] = _max(row["lender_wait_seconds"], age)
    for row in teams.values():
        for key in ("oldest_wait_seconds", "lender_wait_seconds"):
            if row[key] is not None:
                row[key] = round(row[key], 3)
    return teams


def _notes(section: Any, detail: Mapping[str, Any], unknown_shares: list[str], name: str, queue: str) -> list[str]:
    """What the reader should know: a reclaimer off or dry, no policy, unknown shares, another queue."""
    notes: list[str] = []
    if not section.reclaim.enabled:
        notes.append("the reclaimer is disabled (fairshare.reclaim.enabled: false): the next cycle shown never runs")
    elif section.reclaim.dry_run:
        notes.append("the reclaimer runs in dry-run mode (fairshare.reclaim.dry_run: true): it logs but stops nothing")
    if not detail.get("schedulingPolicyArn"):
        notes.append("the queue has no fair-share scheduling policy: jobs carry no share identifier")
    if unknown_shares:
        notes.append(
            "jobs with share identifiers of no team in the config: "
            + ", ".join(repr(s) for s in unknown_shares)
            + " (shown as teams 'share:<id>' with no guarantee)"
        )
    if section.queue_name and section.queue_name not in (name, queue):
        notes.append(f"the config's fairshare.queue_name is {section.queue_name!r}, not {name!r}: is this the right config?")
    return notes


def _max(a: float | None, b: float) -> float:
    return b if a is None or b > a else a


def format(report: dict[str, Any]) -> str:
    """The readable table of a report."""
    return _format_classic(report)


def _format_classic(report: dict[str, Any]) -> str:
    capacity = report.get("capacity", {})
    cap = ", ".join(f"{fmt_num(v)} {r.upper()}{'s' if v != 1 else ''}" for r, v in capacity.items())
    lines = [f"Queue {report['queue']} (fair share, {cap} in the config), read {stamp(report['now'])}"]
    headers = ["TEAM", "USED", "GUARANTEE", "BORROWED", "BORROW CAP", "RUNNING", "WAITING", "OLDEST WAIT", "LENDER WAIT", "NEXT CYCLE"]
    rows = []
    resources = list(capacity) or ["gpu"]
    for name, t in report["teams"].items():
        for i, r in enumerate(resources):
            first = i == 0
            cap_r = t.get("borrow_cap", {}).get(r)
            rows.append(
                [
                    name if first else "",
                    fmt_num(t["usage"].get(r, 0)),
                    fmt_num(t["guarantee"].get(r, 0)),
                    fmt_num(t["borrowed"].get(r, 0)),
                    "unlimited" if cap_r is None else fmt_num(cap_r),
                    str(t["running_jobs"]) if first else "",
                    str(t["waiting_jobs"]) if first else "",
                    fmt_duration(t["oldest_wait_seconds"]) if first else "",
                    fmt_duration(t["lender_wait_seconds"]) if first else "",
                    _next(t["next_cycle"]) if first else "",
                ]
            )
    lines += table(headers, rows, right={1, 2, 3, 4, 5, 6, 7, 8})
    order = report.get("victim_order", "youngest")
    lines.append(f"Reclaim stops first {VICTIM_ORDER_TEXT[order]} (victim_order: {order}).")
    lines.append(
        "USED/GUARANTEE/BORROWED/CAP in GPUs; LENDER WAIT: longest wait of a job within its team's guarantee; "
        "NEXT CYCLE: jobs the reclaimer would stop now, and waiting jobs that would then fit (this command stops nothing)."
    )
    lines += [f"note: {n}" for n in report.get("notes", [])]
    return "\n".join(lines)


def _next(cycle: dict[str, list[str]]) -> str:
    parts = []
    if cycle["stop"]:
        parts.append(f"stop {len(cycle['stop'])}")
    if cycle["serve"]:
        parts.append(f"serve {len(cycle['serve'])}")
    return ", ".join(parts) or "-"


__all__ = ["ACTIONS", "KIND", "classic_report", "explain", "format", "reads", "report"]
