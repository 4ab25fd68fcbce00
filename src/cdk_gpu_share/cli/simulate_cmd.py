"""``gpu-share simulate`` and ``gpu-share trace convert``.

    gpu-share simulate --scenario S.json --trace JOBS.csv --mode static|share|share+reclaim
                       [--poll-seconds 60] [--checkpoint-seconds N] [--json] [--plot OUT.png]
    gpu-share trace convert --from alibaba-openb FILE [-o OUT.csv]

The rules live in :mod:`cdk_gpu_share.core.simulate` and :mod:`cdk_gpu_share.core.trace`;
this module only parses arguments and renders results.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any

from cdk_gpu_share.core.errors import ConfigError, GpuShareError, Problem


def register(subparsers: Any) -> None:
    # core.simulate is imported when the command runs, so that --help and the other
    # subcommands never pay for (or depend on) the simulator and the planner.
    from cdk_gpu_share.core.trace import SOURCES

    p = subparsers.add_parser(
        "simulate",
        help="replay a job trace against the quota policy (what-if)",
        description=(
            "Replay a job trace against a scenario's quotas in one of three modes: static "
            "(no lending), share (borrow idle capacity, never preempt) or share+reclaim "
            "(the reclaim planner stops borrowers every --poll-seconds). Prints waits, "
            "utilization, preemptions and lost work."
        ),
    )
    p.add_argument("--scenario", required=True, metavar="SCENARIO.json",
                   help="capacity, settings and teams of a reclaim-plan input (no now, no jobs)")
    p.add_argument("--trace", required=True, metavar="JOBS.csv",
                   help="job_id,team,submit_time,duration_s,gpus[,priority]; times in seconds")
    p.add_argument("--mode", required=True, metavar="MODE",
                   help="static, share or share+reclaim")
    p.add_argument("--poll-seconds", type=float, default=60.0, metavar="S",
                   help="reclaim planner period in share+reclaim (default: %(default)g)")
    p.add_argument("--checkpoint-seconds", type=float, default=None, metavar="N",
                   help="a stopped job restarts from its last N-second checkpoint (default: from zero)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--plot", metavar="OUT.png",
                   help="write a PNG of each team's usage against its guarantee (needs matplotlib)")
    p.set_defaults(func=run_simulate)

    t = subparsers.add_parser(
        "trace",
        help="convert public cluster traces to the simulator's job trace",
        description="Convert public GPU cluster traces into the simulator's job trace CSV.",
    )
    tsub = t.add_subparsers(dest="trace_command", metavar="ACTION")
    tsub.required = True
    c = tsub.add_parser(
        "convert",
        help="convert a trace (Alibaba OpenB) to job_id,team,submit_time,duration_s,gpus,priority",
        description=(
            "Convert an Alibaba OpenB pod list (cluster-trace-gpu-v2023) to the simulator's job "
            "trace. Keeps tasks with num_gpu > 0 that were scheduled and ran; team = qos in lower "
            "case; priority guaranteed 3, ls 2, burstable 1, be 0."
        ),
    )
    c.add_argument("--from", dest="source_format", required=True, choices=SOURCES, help="format of FILE")
    c.add_argument("file", metavar="FILE", help="the trace file to convert")
    c.add_argument("-o", "--output", metavar="OUT", help="write the CSV here (default: standard output)")
    c.set_defaults(func=run_convert)


# ---------------------------------------------------------------------------
# simulate


class _ProgressBar:
    """A progress bar on standard error, shown only for runs longer than half a second."""

    def __init__(self, stream: Any, label: str):
        self.stream = stream
        self.label = label
        self.started = time.monotonic()
        self.shown = False

    def __call__(self, fraction: float) -> None:
        if time.monotonic() - self.started < 0.5:
            return
        width = 30
        filled = int(round(width * min(1.0, max(0.0, fraction))))
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {fraction * 100:5.1f}%")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r" + " " * 60 + "\r")
            self.stream.flush()


def run_simulate(args: argparse.Namespace) -> int:
    from cdk_gpu_share.core import simulate as sim

    sim.check_mode(args.mode)
    if not (math.isfinite(args.poll_seconds) and args.poll_seconds > 0):
        raise ConfigError(Problem(field="--poll-seconds", value=args.poll_seconds, message="must be above 0",
                                  fix="give the planner's period in seconds, e.g. 60"))
    if args.checkpoint_seconds is not None and not (
        math.isfinite(args.checkpoint_seconds) and args.checkpoint_seconds > 0
    ):
        raise ConfigError(Problem(field="--checkpoint-seconds", value=args.checkpoint_seconds,
                                  message="must be above 0",
                                  fix="give the checkpoint period in seconds, or leave it out for no checkpoints"))
    if args.plot:
        _check_plot_target(args.plot)
    scenario = sim.load_scenario(args.scenario)
    jobs = sim.load_jobs(args.trace, scenario)
    bar = _ProgressBar(sys.stderr, f"simulating {args.mode}") if _isatty(sys.stderr) else None
    try:
        result = sim.simulate(scenario, jobs, args.mode, poll_seconds=args.poll_seconds,
                              checkpoint_seconds=args.checkpoint_seconds, progress=bar, source=args.trace)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print(render_table(result.to_dict(), poll_seconds=args.poll_seconds,
                           checkpoint_seconds=args.checkpoint_seconds))
    if args.plot:
        write_plot(result, args.plot)
        if not args.json:
            print(f"plot written to {args.plot}")
    return 0


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def human_seconds(s: float) -> str:
    """Compact duration: 0s, 45s, 12m, 3.4h, 2.1d."""
    s = float(s)
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{s / 60:.0f}m"
    if s < 86400:
        return f"{s / 3600:.1f}h"
    return f"{s / 86400:.1f}d"


def render_table(d: dict[str, Any], *, poll_seconds: float | None = None,
                 checkpoint_seconds: float | None = None) -> str:
    """The result of :func:`~cdk_gpu_share.core.simulate.SimResult.to_dict` as text."""
    w0, w1 = d["window_s"]
    lines = [
        f"mode                {d['mode']}"
        + (f" (poll {poll_seconds:g}s)" if d["mode"] == "share+reclaim" and poll_seconds else "")
        + (f", checkpoints every {checkpoint_seconds:g}s" if checkpoint_seconds else ""),
        f"jobs                {d['completed']} of {d['jobs']} completed",
        f"window              {w0:,.0f}s .. {w1:,.0f}s ({human_seconds(w1 - w0)})",
        f"utilization         {d['utilization'] * 100:.1f}%",
        f"wait                {d['wait_gpu_hours']:,.1f} GPU-hours",
        f"preemptions         {d['preemptions']}",
        f"lost work           {d['lost_gpu_seconds']:,.0f} GPU-seconds",
        f"simulation time     {d['sim_seconds']:.2f}s",
        "",
    ]
    header = ("team", "jobs", "wait p50", "p95", "p99", "GPU-hours", "borrowed", "preempted", "reclaim p99")
    rows = [header]
    for name, t in d["teams"].items():
        rows.append((
            name,
            str(t["jobs"]),
            human_seconds(t["wait_p50_s"]),
            human_seconds(t["wait_p95_s"]),
            human_seconds(t["wait_p99_s"]),
            f"{t['gpu_seconds'] / 3600:,.0f}",
            f"{t['borrowed_gpu_seconds'] / 3600:,.0f}",
            str(t["preempted"]),
            human_seconds(t["reclaim_wait_p99_s"]),
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for k, r in enumerate(rows):
        cells = [r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in range(1, len(r))]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _check_plot_target(path: str) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ConfigError(Problem(field="--plot", value=path, message="names a folder that does not exist",
                                  fix=f"create {parent} first or write the PNG elsewhere"))
    if not path.lower().endswith(".png"):
        raise ConfigError(Problem(field="--plot", value=path, message="is not a .png file name",
                                  fix="give a path ending in .png"))


def write_plot(result: Any, path: str) -> None:
    """A PNG of each team's usage against its guarantee over time, plus pool utilization.

    matplotlib is imported here, with the Agg backend, so the CLI does not need it otherwise.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise GpuShareError(
            "--plot needs matplotlib: install it with  pip install 'cdk-gpu-share[plot]'"
        ) from None
    names = result.team_names
    n = len(names)
    times = list(result.series_t)
    usage = list(result.series_usage)
    w0, w1 = result.window
    if not times:
        times, usage = [w0], [tuple(0.0 for _ in names)]
    if times[-1] < w1:
        times.append(w1)
        usage.append(usage[-1])
    days = [t / 86400.0 for t in times]
    fig, axes = plt.subplots(n + 1, 1, sharex=True, figsize=(10, 1.8 * (n + 1) + 0.6), squeeze=False)
    for k, name in enumerate(names):
        ax = axes[k][0]
        ax.step(days, [u[k] for u in usage], where="post", linewidth=0.8, label="usage")
        ax.axhline(result.guarantees[k], color="tab:red", linestyle="--", linewidth=0.9, label="guarantee")
        ax.set_ylabel(f"{name}\nGPUs")
        ax.set_ylim(bottom=0)
        if k == 0:
            ax.legend(loc="upper right", fontsize="small")
    ax = axes[n][0]
    ax.step(days, [100.0 * sum(u) / result.capacity if result.capacity else 0.0 for u in usage],
            where="post", linewidth=0.8, color="tab:green")
    ax.set_ylabel("pool\n% busy")
    ax.set_ylim(0, 105)
    ax.set_xlabel("days since the first submit" if w0 == 0 else "days")
    fig.suptitle(f"gpu-share simulate --mode {result.mode}: utilization {result.utilization * 100:.1f}%, "
                 f"wait {result.wait_gpu_hours:,.0f} GPU-h, {result.preemptions} preemptions", fontsize="medium")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise ConfigError(Problem(field="--plot", value=path, message=f"cannot be written ({exc.strerror})",
                                  fix="choose a writable path")) from None
    finally:
        plt.close(fig)


# ---------------------------------------------------------------------------
# trace convert


def run_convert(args: argparse.Namespace) -> int:
    from cdk_gpu_share.core.trace import convert, write_trace

    jobs = convert(args.source_format, args.file)
    if args.output:
        tmp = f"{args.output}.tmp-{os.getpid()}"
        try:
            with open(tmp, "w", newline="", encoding="utf-8") as out:
                write_trace(jobs, out)
            os.replace(tmp, args.output)
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise ConfigError(Problem(field="-o", value=args.output,
                                      message=f"cannot be written ({exc.strerror})",
                                      fix="choose a writable path")) from None
        print(f"wrote {len(jobs)} jobs to {args.output}", file=sys.stderr)
    else:
        write_trace(jobs, sys.stdout)
    return 0

