"""``gpu-share status --queue NAME [--config CONFIG] [--json] [--region R]``: a live, read-only view.

Reads a running AWS Batch job queue and prints, per team, the capacity it uses, its
guarantee, what it borrows and the jobs waiting:

* a **classic** (fair-share) queue is read with the same reader as the reclaim Lambda
  (:mod:`cdk_gpu_share.aws.batch_reader`); the teams' guarantees come from the platform
  config (``--config``), and the numbers from the reclaim planner
  (:func:`cdk_gpu_share.core.reclaim.plan`), which also tells what the next reclaim cycle
  would stop and which waiting jobs would then fit. Nothing is stopped: the plan is only printed.
* a **quota-management** queue (``jobQueueType`` ``SAGEMAKER_TRAINING``) is read with
  :mod:`cdk_gpu_share.aws.quota_reader`: each quota share's guarantee
  (``ListQuotaShares``), usage (``GetJobQueueSnapshot``) and waiting service jobs
  (``ListServiceJobs``). ``--config`` is optional: it names the teams expected on the queue.

A table by default; ``--json`` prints one JSON object for scripts. AWS errors (no
credentials, no region, queue not found, access denied, network) exit 2 with one line
naming the queue and the fix.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from cdk_gpu_share.cli._parser import add_config_argument
from cdk_gpu_share.core.errors import GpuShareError

#: IAM actions ``gpu-share status`` needs, per kind of queue (named in access-denied messages).
QUOTA_ACTIONS = ("batch:DescribeJobQueues", "batch:ListQuotaShares", "batch:GetJobQueueSnapshot", "batch:ListServiceJobs")
CLASSIC_ACTIONS = ("batch:DescribeJobQueues", "batch:ListJobs", "batch:DescribeJobs")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "status",
        help="each team's live usage, guarantee, borrowed capacity and waiting jobs on a Batch queue",
        description=(
            "Read a running AWS Batch job queue (read-only) and print each team's usage, guarantee, "
            "borrowed capacity and waiting jobs. A classic fair-share queue needs --config (the "
            "guarantees); a quota-management queue reads them from its quota shares."
        ),
    )
    parser.add_argument("--queue", required=True, metavar="NAME", help="job queue name or ARN")
    add_config_argument(parser, required=False, help="platform config (YAML); required for a classic queue")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--region", metavar="R", help="AWS region of the queue (default: your AWS configuration)")
    parser.set_defaults(func=run_status)


# ---------------------------------------------------------------------------
# AWS client and errors


#: The clock and the pause between retries (tests replace them).
_now: Callable[[], float] = time.time
_sleep: Callable[[float], None] = time.sleep


def make_client(region: str | None) -> Any:
    """The Batch client ``status`` uses (tests replace this function)."""
    import boto3

    return boto3.client("batch", region_name=region)


def region_of_arn(queue: str) -> str | None:
    """The region of a job queue ARN (``arn:aws:batch:REGION:ACCOUNT:job-queue/NAME``), else None."""
    parts = queue.split(":")
    if len(parts) >= 6 and parts[0] == "arn" and parts[2] == "batch" and parts[3]:
        return parts[3]
    return None


def _region_of(client: Any, region: str | None) -> str | None:
    return region or getattr(getattr(client, "meta", None), "region_name", None)


def aws_error(exc: Exception, queue: str, region: str | None, actions: tuple[str, ...] = QUOTA_ACTIONS) -> GpuShareError | None:
    """A one-line :class:`GpuShareError` for an AWS/botocore error, or None if ``exc`` is not one."""
    from botocore import exceptions as bx

    where = f" in region {region}" if region else ""
    q = f"job queue {queue!r}"
    if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError, bx.CredentialRetrievalError)):
        return GpuShareError(
            f"no AWS credentials to read {q}{where}; configure them (aws configure, AWS_PROFILE, "
            "or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) and retry"
        )
    if isinstance(exc, bx.NoRegionError):
        return GpuShareError(f"no AWS region to read {q}; pass --region (such as --region us-east-1) or set AWS_REGION")
    if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ReadTimeoutError)):
        return GpuShareError(f"cannot reach AWS Batch{where} to read {q}: {_one_line(str(exc))}; check --region and the network")
    if isinstance(exc, bx.ParamValidationError):
        return GpuShareError(f"{q} was rejected before sending: {_one_line(str(exc))}; pass a queue name or ARN")
    if isinstance(exc, bx.ClientError):
        err = exc.response.get("Error", {})
        code = err.get("Code", "Unknown")
        message = _one_line(err.get("Message", "") or str(exc))
        op = getattr(exc, "operation_name", "") or "the request"
        if code in ("AccessDeniedException", "AccessDenied", "UnauthorizedOperation") or "not authorized" in message.lower():
            return GpuShareError(
                f"access denied reading {q}{where} ({op}); grant your identity {', '.join(actions)}"
            )
        if code in ("ExpiredTokenException", "ExpiredToken", "RequestExpired"):
            return GpuShareError(f"AWS credentials expired while reading {q}; refresh them (aws sso login, new keys) and retry")
        if code in ("UnrecognizedClientException", "InvalidSignatureException", "InvalidClientTokenId"):
            return GpuShareError(f"AWS rejected the credentials used to read {q}{where} ({code}); check your profile or keys")
        if code in ("ThrottlingException", "TooManyRequestsException", "Throttling"):
            return GpuShareError(f"AWS Batch throttled the reads of {q}{where} ({op}); retry in a minute")
        if code == "ClientException":
            return GpuShareError(
                f"AWS Batch rejected {op} for {q}{where}: {message}; check the queue name and --region"
            )
        return GpuShareError(f"AWS error {code} in {op} reading {q}{where}: {message}")
    if isinstance(exc, bx.BotoCoreError):
        return GpuShareError(f"cannot read {q}{where}: {_one_line(str(exc))}")
    return None


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


# ---------------------------------------------------------------------------
# The command


def run_status(args: argparse.Namespace) -> int:
    config = None
    if args.config:
        from cdk_gpu_share.core.config import load_config

        config = load_config(args.config)  # ConfigError: exit 2 before any AWS call
    queue = args.queue
    region = args.region or region_of_arn(queue)
    client = None
    actions: tuple[str, ...] = QUOTA_ACTIONS
    try:
        client = make_client(region)
        from cdk_gpu_share.aws import quota_reader

        detail = quota_reader.describe_queue(client, queue)
        if quota_reader.is_quota_queue(detail):
            report = quota_report(quota_reader.read_quota_queue(client, queue, detail=detail, now=_now()), config)
        else:
            actions = CLASSIC_ACTIONS
            report = classic_report(client, queue, detail, config, now=_now(), sleep=_sleep)
    except GpuShareError:
        raise
    except Exception as exc:  # botocore errors become one line; anything else is a bug
        err = aws_error(exc, queue, _region_of(client, region), actions)
        if err is None:
            raise
        raise err from None
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=False))
    else:
        print(format_report(report))
    return 0


# ---------------------------------------------------------------------------
# Quota-management queues


def quota_report(status: Any, config: Any = None) -> dict[str, Any]:
    """The JSON report of a quota-management queue (``status``: a QuotaQueueStatus)."""
    report = status.to_json()
    report["kind"] = "quota"
    notes: list[str] = []
    if config is not None:
        from cdk_gpu_share.core.config import BATCH

        expected = [t.name for t in config.teams_for(BATCH)]
        listed = [s.name for s in status.shares]
        missing = [t for t in expected if t not in listed]
        extra = [s for s in listed if s not in expected]
        if missing:
            notes.append(
                f"teams in {config.source or 'the config'} without a quota share on this queue: {', '.join(missing)} "
                "(not deployed yet, or another queue)"
            )
        if extra:
            notes.append(f"quota shares not in {config.source or 'the config'}: {', '.join(extra)}")
    if status.unassigned_waiting:
        notes.append(f"{len(status.unassigned_waiting)} waiting job(s) name no listed quota share")
    report["notes"] = notes
    return report


# ---------------------------------------------------------------------------
# Classic queues


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
    from cdk_gpu_share.core import reclaim

    name = detail.get("jobQueueName", queue)
    if config is None:
        raise GpuShareError(
            f"job queue {name!r} is a classic fair-share queue: the teams' guarantees live in the platform "
            "config; pass --config platform.yaml"
        )
    if config.fairshare is None:
        raise GpuShareError(
            f"job queue {name!r} is a classic fair-share queue but {config.source or 'the config'} has no "
            "fairshare section; pass the config that deployed this queue"
        )
    settings = batch_reader.settings_from_config(config, queue=name)
    now = time.time() if now is None else now
    snapshot = batch_reader.read_queue(client, queue, settings, now, sleep=sleep)
    state = snapshot.state
    next_cycle = reclaim.plan(state)
    running = [j for j in state["jobs"] if j["state"] == "running"]
    current_state = {
        **state,
        "settings": {**state.get("settings", {}), "min_runtime_seconds": _PROTECT_ALL},
        "jobs": running,
    }
    current = reclaim.plan(current_state)["teams"]
    specs = {t.name: t for t in reclaim.parse_state(state).teams}

    teams: dict[str, Any] = {}
    for tname, numbers in current.items():
        teams[tname] = {
            **numbers,
            "running_jobs": 0,
            "waiting_jobs": 0,
            "terminating_jobs": 0,
            "oldest_wait_seconds": None,
            "lender_wait_seconds": None,
            "next_cycle": {"stop": [], "serve": []},
        }
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
            if reclaim.within_guarantee(job["demand"], specs[job["team"]], current[job["team"]]["usage"]):
                row["lender_wait_seconds"] = _max(row["lender_wait_seconds"], age)
    team_of = {j["id"]: j["team"] for j in state["jobs"]}
    for p in next_cycle["preemptions"]:
        teams[p["team"]]["next_cycle"]["stop"].append(p["job"])
    for jid in next_cycle["served"]:
        teams[team_of[jid]]["next_cycle"]["serve"].append(jid)
    for row in teams.values():
        for key in ("oldest_wait_seconds", "lender_wait_seconds"):
            if row[key] is not None:
                row[key] = round(row[key], 3)

    notes: list[str] = []
    reclaim_cfg = config.fairshare.reclaim
    if not reclaim_cfg.enabled:
        notes.append("the reclaimer is disabled (fairshare.reclaim.enabled: false): the next cycle shown never runs")
    elif reclaim_cfg.dry_run:
        notes.append("the reclaimer runs in dry-run mode (fairshare.reclaim.dry_run: true): it logs but stops nothing")
    if not detail.get("schedulingPolicyArn"):
        notes.append("the queue has no fair-share scheduling policy: jobs carry no share identifier")
    if snapshot.unknown_shares:
        notes.append(
            "jobs with share identifiers of no team in the config: "
            + ", ".join(repr(s) for s in snapshot.unknown_shares)
            + " (shown as teams 'share:<id>' with no guarantee)"
        )
    cfg_queue = config.fairshare.queue_name
    if cfg_queue and cfg_queue not in (name, queue):
        notes.append(f"the config's fairshare.queue_name is {cfg_queue!r}, not {name!r}: is this the right config?")
    return {
        "kind": "classic",
        "queue": name,
        "queue_arn": detail.get("jobQueueArn", ""),
        "queue_type": detail.get("jobQueueType", "ECS"),
        "now": round(now, 3),
        "capacity": state["capacity"],
        "settings": state.get("settings", {}),
        "dry_run": bool(reclaim_cfg.dry_run),
        "reclaim_enabled": bool(reclaim_cfg.enabled),
        "teams": teams,
        "next_cycle": next_cycle,
        "api_calls": dict(snapshot.calls),
        "notes": notes,
    }


def _max(a: float | None, b: float) -> float:
    return b if a is None or b > a else a


# ---------------------------------------------------------------------------
# Rendering


def _fmt_num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(int(value)) if isinstance(value, (int, float)) else str(value)


def fmt_duration(seconds: float | None) -> str:
    """``3725`` -> ``1h 2m``; None -> ``-``."""
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {(s % 3600) // 60:02d}m"
    return f"{s // 86400}d {(s % 86400) // 3600:02d}h"


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    from cdk_gpu_share.cli._table import format_table  # the CLI's one table printer

    return format_table(headers, rows, right=right, rule=False)


def _stamp(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def format_report(report: dict[str, Any]) -> str:
    """The readable table of a report (quota or classic)."""
    if report.get("kind") == "quota":
        return _format_quota(report)
    return _format_classic(report)


def _format_quota(report: dict[str, Any]) -> str:
    lines = [f"Queue {report['queue']} (quota management, SageMaker Training service jobs), read {_stamp(report['now'])}"]
    headers = ["TEAM", "INSTANCE TYPE", "USED", "GUARANTEE", "BORROWED", "SHARING", "WAITING", "OLDEST WAIT"]
    rows = []
    for name, share in report["teams"].items():
        units = list(share["guarantee"]) or ["-"]
        for i, unit in enumerate(units):
            first = i == 0
            rows.append(
                [
                    name if first else "",
                    unit,
                    _fmt_num(share["usage"].get(unit, 0)),
                    _fmt_num(share["guarantee"].get(unit, 0)),
                    _fmt_num(share["borrowed"].get(unit, 0)),
                    _sharing(share) if first else "",
                    str(share["waiting_jobs"]) if first else "",
                    fmt_duration(share["oldest_wait_seconds"]) if first else "",
                ]
            )
    if rows:
        lines += _table(headers, rows, right={2, 3, 4, 6, 7})
    else:
        lines.append("no quota share on this queue")
    if report.get("total_usage"):
        used = ", ".join(f"{_fmt_num(v)} x {u}" for u, v in report["total_usage"].items())
        lines.append(f"In use on the queue: {used} (instances; utilization as of {_stamp(report.get('snapshot_at'))})")
    lines += [f"note: {n}" for n in report.get("notes", [])]
    return "\n".join(lines)


def _sharing(share: dict[str, Any]) -> str:
    strategy = (share.get("strategy") or "-").lower()
    limit = share.get("borrow_limit_percent")
    if strategy == "lend_and_borrow" and limit is not None and limit >= 0:
        strategy += f" (cap {limit}%)"
    if share.get("in_share_preemption"):
        strategy += ", in-team preemption"
    return strategy


def _format_classic(report: dict[str, Any]) -> str:
    capacity = report.get("capacity", {})
    cap = ", ".join(f"{_fmt_num(v)} {r.upper()}{'s' if v != 1 else ''}" for r, v in capacity.items())
    lines = [f"Queue {report['queue']} (fair share, {cap} in the config), read {_stamp(report['now'])}"]
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
                    _fmt_num(t["usage"].get(r, 0)),
                    _fmt_num(t["guarantee"].get(r, 0)),
                    _fmt_num(t["borrowed"].get(r, 0)),
                    "unlimited" if cap_r is None else _fmt_num(cap_r),
                    str(t["running_jobs"]) if first else "",
                    str(t["waiting_jobs"]) if first else "",
                    fmt_duration(t["oldest_wait_seconds"]) if first else "",
                    fmt_duration(t["lender_wait_seconds"]) if first else "",
                    _next(t["next_cycle"]) if first else "",
                ]
            )
    lines += _table(headers, rows, right={1, 2, 3, 4, 5, 6, 7, 8})
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


__all__ = ["register", "run_status", "make_client", "aws_error", "quota_report", "classic_report", "format_report"]
