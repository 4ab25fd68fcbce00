"""``gpu-share simulate``, ``gpu-share trace convert`` and ``gpu-share trace sample``.

    gpu-share simulate ([--config] PLATFORM.yaml [--backend B] | --scenario S.json) --trace JOBS.csv
                       (--mode static|share|share+reclaim | --compare) [--poll-seconds S]
                       [--checkpoint-seconds N] [--json] [--plot OUT.png] [--report OUT.html]
    gpu-share trace convert --from alibaba-openb FILE [-o OUT.csv]
    gpu-share trace sample [[--config] PLATFORM.yaml [--backend B]] [--jobs N] [--seed S] [-o OUT.csv]

The rules live in :mod:`cdk_gpu_share.core.simulate` and :mod:`cdk_gpu_share.core.records.trace`;
this module only parses arguments and renders results.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import shlex
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdk_gpu_share.cli._parser import add_config_argument
from cdk_gpu_share.core.configuration.windows import read_origin
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.records import history
from cdk_gpu_share.core.text import format_table

if TYPE_CHECKING:

    from cdk_gpu_share.core.configuration.parse import PlatformConfig
from cdk_gpu_share.cli.simulate_report import (
    GAP_MODE,
    _check_target,
    _pyplot,
    human_seconds,
    render_compare,
    render_gap,
    write_plot,
    write_report,
)


def _backend_names() -> str:
    """``batch_quota, hyperpod or fairshare``: the backends ``--backend`` may name."""
    from cdk_gpu_share.core.configuration import backends

    keys = backends.keys()
    return ", ".join(keys[:-1]) + " or " + keys[-1] if len(keys) > 1 else keys[0]


def register(subparsers: argparse._SubParsersAction) -> None:
    # core.simulate is imported when the command runs, so that --help and the other
    # subcommands never pay for (or depend on) the simulator and the planner.
    _add_simulate(subparsers)
    _add_trace(subparsers)


def _add_simulate(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="replay a job trace against the quota policy (what-if)",
        description=(
            "Replay a job trace against the platform config's quotas (--config) or a scenario JSON "
            "(--scenario) in one mode (--mode static, share or share+reclaim), or in all of them side by "
            "side (--compare). Prints waits, utilization, preemptions and lost work; --report writes the "
            "comparison as one HTML page with usage plots."
        ),
    )
    # The config or a scenario, one of them: the parser requires it (the config has two spellings).
    source = p.add_mutually_exclusive_group()
    add_config_argument(p, metavar="PLATFORM.yaml", group=source, alternative="--scenario",
                        help="the platform config",
                        option_help="build the scenario from the platform config (teams, guarantees, sharing, limits)")
    source.add_argument("--scenario", metavar="SCENARIO.json",
                        help="capacity, settings and teams of a reclaim-plan input (no now, no jobs)")
    p.add_argument("--backend", metavar="BACKEND",
                   help=f"with --config: {_backend_names()} (default: the config's only backend)")
    p.add_argument("--trace", required=True, metavar="JOBS.csv",
                   help="job_id,team,submit_time,duration_s,gpus[,priority]; times in seconds "
                        "(a small sample for the config's teams: `gpu-share trace sample`; public traces: "
                        "`gpu-share trace convert`; your own jobs: `gpu-share trace export`)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--mode", metavar="MODE", help="static, share or share+reclaim")
    what.add_argument("--compare", action="store_true",
                      help="run static, share and share+reclaim (and, with --checkpoint-seconds, share+reclaim "
                           "with checkpoints; with them, or with --victim-order checkpoint or a config that sets it, "
                           "the checkpoint-aware victim order too) and print one table per team, best value per "
                           "row marked (*); with a config that has groups, also share+reclaim under the tree and "
                           "under its flat compilation, per team and per group (the compilation gap; JSON: "
                           "hierarchy)")
    p.add_argument("--poll-seconds", type=float, default=None, metavar="S",
                   help="reclaim planner period in share+reclaim (default: with --config, the backend's reclaim "
                        "schedule, such as fairshare.reclaim.schedule_minutes; else 60)")
    p.add_argument("--checkpoint-seconds", type=float, default=None, metavar="N",
                   help="a stopped job restarts from its last N-second checkpoint (default: from zero); a job's "
                        "own interval (the trace's checkpoint_seconds column) and its team's come first")
    p.add_argument("--origin", default=None, metavar="ISO-8601",
                   help="the clock time of the trace's second 0 (without an offset: UTC), which a config or "
                        "scenario with time windows needs. Default: the origin in the header `trace export` writes")
    p.add_argument("--victim-order", default=None, metavar="ORDER",
                   help="the jobs the planner stops first: youngest (lowest priority, then the most recent "
                        "start) or checkpoint (runs started on borrowed capacity, then the least work lost since "
                        "the last checkpoint). Default: the scenario's, else youngest. With --compare, "
                        "checkpoint adds its own column")
    p.add_argument("--fidelity", action="store_true",
                   help="with --config and a trace from `gpu-share trace export`: replay the jobs under the config "
                        "deployed over that period (default --mode share+reclaim) and compare, per team, the "
                        "simulated wait p50/p95/p99, preemptions and borrowed GPU-hours with what really happened "
                        "(JSON: fidelity)")
    p.add_argument("--hierarchy", metavar="MODE", default=None,
                   help="with a config that has groups: tree (the tree's own rules) or compiled (the flat"
                        " configuration HyperPod or Batch deploys: pools split to the teams, borrow limits from the"
                        " groups' bounds). Default: what the backend enforces")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--plot", metavar="OUT.png",
                   help="write a PNG of each team's usage, waiting demand and preemptions (needs matplotlib); "
                        "with --compare one file per mode, OUT-<mode>.png")
    p.add_argument("--report", metavar="OUT.html",
                   help="write the comparison as one self-contained HTML page with the usage plots "
                        "(implies --compare unless --mode is given; needs matplotlib)")
    p.set_defaults(func=run_simulate)


def _add_trace(subparsers: argparse._SubParsersAction) -> None:
    t = subparsers.add_parser(
        "trace",
        help="convert public cluster traces to the simulator's job trace, write a sample one, or export your own",
        description="Convert public GPU cluster traces into the simulator's job trace CSV, write a "
                    "small sample trace to try the simulator with, or export the jobs your teams ran.",
    )
    tsub = t.add_subparsers(dest="trace_command", metavar="ACTION")
    tsub.required = True
    _add_trace_convert(tsub)
    _add_trace_sample(tsub)
    from cdk_gpu_share.cli import trace_export_cmd

    trace_export_cmd.add_parser(tsub)


def _add_trace_convert(tsub: argparse._SubParsersAction) -> None:
    from cdk_gpu_share.core.records.trace import SOURCES

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


def _add_trace_sample(tsub: argparse._SubParsersAction) -> None:
    from cdk_gpu_share.core.records.trace import SAMPLE_JOBS, SAMPLE_SEED

    s = tsub.add_parser(
        "sample",
        help="write a small deterministic job trace for the teams of a config (no data needed)",
        description=(
            "Write a small synthetic job trace, the same bytes for the same arguments: each team is busy "
            "half of every 12 hours and then asks for about twice its guarantee, so teams lend, borrow "
            "and reclaim. Jobs take a quarter, half or all of their team's guarantee for 5 minutes to 8 "
            "hours, in whole GPUs (in quarters of a GPU when the fleet partitions its GPUs: MIG-capable "
            "instances on HyperPod); it says which on standard error. "
            "Without --config: the teams of ./platform.yaml when the folder has one (the first of its "
            "backends unless --backend names one), else three sample teams (team-a, team-b, team-c, one GPU each). "
            "With -o, it prints the simulate command that replays the sample."
        ),
    )
    add_config_argument(s, required=False, metavar="PLATFORM.yaml",
                        help="take the teams and their guarantees from this platform config")
    s.add_argument("--backend", metavar="BACKEND",
                   help=f"with a config: {_backend_names()} (default: the config's only backend)")
    s.add_argument("--jobs", type=int, default=SAMPLE_JOBS, metavar="N",
                   help=f"number of jobs (default: {SAMPLE_JOBS})")
    s.add_argument("--seed", type=int, default=SAMPLE_SEED, metavar="S",
                   help=f"seed of the generator; another seed, another trace (default: {SAMPLE_SEED})")
    s.add_argument("-o", "--output", metavar="OUT", help="write the CSV here (default: standard output)")
    s.set_defaults(func=run_sample)


# ---------------------------------------------------------------------------
# simulate


def _check_period(flag: str, value: float | None, fix: str) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ConfigError(Problem(field=flag, value=value, message="must be above 0", fix=fix))


#: Columns of the pod lists of Alibaba's cluster-trace-gpu-v2023 that a job trace never has.
_ALIBABA_COLUMNS = {"num_gpu", "gpu_milli", "qos", "creation_time"}


def _check_not_raw_trace(path: str) -> None:
    """A raw public trace given as --trace gets the command that converts it, not a missing-column error."""
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            header = fh.readline()
    except (OSError, UnicodeDecodeError):
        return  # load_jobs reports it
    columns = {c.strip().lower() for c in header.split(",")}
    if _ALIBABA_COLUMNS <= columns:
        raise ConfigError(Problem(
            field="--trace", value=path,
            message="is an Alibaba OpenB pod list, not a job trace (job_id,team,submit_time,duration_s,gpus)",
            fix=f"convert it first: gpu-share trace convert --from alibaba-openb {path} -o jobs.csv, "
                "then pass --trace jobs.csv"))


#: Where the description of a config with groups says how its tree is read.
_TREE = "; the tree "


def _load_scenario(args: argparse.Namespace) -> tuple[Any, float, str]:
    """The scenario, the planner period and a one-line description of where it came from."""
    from cdk_gpu_share.core import simulate as sim

    poll = args.poll_seconds
    if args.config is None:
        if args.backend is not None:
            raise ConfigError(Problem(field="--backend", value=args.backend, message="needs --config",
                                      fix="drop --backend, or pass --config PLATFORM.yaml instead of --scenario"))
        if getattr(args, "hierarchy", None) == "compiled":
            raise ConfigError(Problem(field="--hierarchy", value="compiled", message="needs --config",
                                      fix="pass --config PLATFORM.yaml: a compilation is in whole instances"))
        from cdk_gpu_share.core.policy.organisation import check_hierarchy

        scenario = sim.load_scenario(args.scenario)
        check_hierarchy(getattr(args, "hierarchy", None), bool(scenario.state.groups), args.scenario)
        return scenario, poll or sim.DEFAULT_POLL_SECONDS, args.scenario
    from cdk_gpu_share.core import scenario as sc
    from cdk_gpu_share.core.configuration.parse import load_config
    from cdk_gpu_share.core.policy.organisation import as_replayed, reading, reading_text

    config = load_config(args.config)
    backend = sc.choose_backend(config, args.backend)
    replayed = as_replayed(config, backend, getattr(args, "hierarchy", None))
    scenario = sim.parse_scenario(sc.scenario_from_config(replayed, backend), source=f"{args.config} ({backend})")
    if poll is None:
        poll = sc.poll_seconds_of(config, backend) or sim.DEFAULT_POLL_SECONDS
    tree = f"{_TREE}{reading_text(backend, reading(config, backend, args.hierarchy))}" if config.groups else ""
    return scenario, poll, f"{args.config}, backend {backend} ({scenario.capacity:g} GPUs){tree}"


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in label).strip("-")


def run_simulate(args: argparse.Namespace) -> int:
    from cdk_gpu_share.core import simulate as sim

    if args.fidelity:
        return run_fidelity(args)
    compare = args.compare or (args.report is not None and args.mode is None)
    if not compare and args.mode is None:
        raise ConfigError(Problem(field="--mode", value=None, message="is missing",
                                  fix=f"give --mode {' | '.join(sim.MODES)}, or --compare to run them all"))
    if args.mode is not None:
        sim.check_mode(args.mode)
    _check_period("--poll-seconds", args.poll_seconds, "give the planner's period in seconds, e.g. 60")
    _check_period("--checkpoint-seconds", args.checkpoint_seconds,
                  "give the checkpoint period in seconds, or leave it out for no checkpoints")
    if args.plot:
        _check_target("--plot", args.plot, ".png")
        _pyplot("--plot")  # refused before the simulation runs, not after
    if args.report:
        _check_target("--report", args.report, ".html")
        _pyplot("--report")
    _check_not_raw_trace(args.trace)
    scenario, poll, described = _load_scenario(args)
    sim.with_victim_order(scenario, args.victim_order)  # refuses an unknown order before any run
    jobs = sim.load_jobs(args.trace, scenario)
    scenario = _with_origin(scenario, args.origin, args.trace)
    for line in objective_warnings(scenario):
        print(line, file=sys.stderr)

    if not compare:
        scenario = sim.with_victim_order(scenario, args.victim_order)
        result = _run_one(scenario, jobs, args.mode, poll, args.checkpoint_seconds, args.trace)
        judge_objectives(scenario, jobs, result, poll)
        if args.json:
            print(json.dumps(result.to_dict()))
        else:
            print(render_table(result.to_dict(), poll_seconds=poll, checkpoint_seconds=args.checkpoint_seconds,
                               tree=described.partition(_TREE)[2]))
        runs = [(args.mode, result)]
        notes: list[str] = []
        gap = {}
    else:
        runs, notes, verdict = _run_compare(scenario, jobs, poll, args.checkpoint_seconds, args.trace,
                                            args.victim_order)
        gap = _run_gap(args, jobs, poll)
        from cdk_gpu_share.core.simulate.compare import compare as build

        cmp = build(runs, jobs, notes=notes)
        cmp.victim_order = verdict
        if args.json:
            print(json.dumps({"scenario": described, "trace": args.trace, "poll_seconds": poll,
                              "comparison": cmp.to_dict(),
                              "results": {label: (r.to_dict() if r else None) for label, r in runs},
                              **({"hierarchy": gap} if gap else {})}))
        else:
            print(render_compare(cmp, described=described, trace=args.trace))
            if gap:
                print("\n" + render_gap(gap))
    written = []
    if args.plot:
        ran = [(label, r) for label, r in runs if r is not None]
        for label, r in ran:
            path = args.plot if len(ran) == 1 else f"{args.plot[:-4]}-{_slug(label)}.png"
            write_plot(r, path, jobs=jobs, label=label)
            written.append(f"plot written to {path}")
    if args.report:
        from cdk_gpu_share.core.simulate.compare import compare as build

        cmp = build(runs, jobs, notes=notes)
        if compare:
            cmp.victim_order = verdict
        write_report(cmp, runs, jobs, args.report, described=described, trace=args.trace, poll_seconds=poll,
                     gap=gap)
        written.append(f"report written to {args.report}")
    for line in written:
        print(line, file=sys.stderr if args.json else sys.stdout)
    return 0


def run_fidelity(args: argparse.Namespace) -> int:
    """``--fidelity``: the simulator's error against the export's real figures, per team."""
    from cdk_gpu_share.core import simulate as sim
    from cdk_gpu_share.core.configuration.parse import load_config
    from cdk_gpu_share.core.records import fidelity
    from cdk_gpu_share.core.records.history import policy_hash

    if args.config is None:
        raise ConfigError(Problem("--fidelity", None, "needs --config",
                                  "pass the platform config that was deployed over the exported period"))
    for flag, value in (("--compare", args.compare), ("--report", args.report), ("--plot", args.plot)):
        if value:
            raise ConfigError(Problem(flag, value, "does not go with --fidelity", f"drop {flag}"))
    mode = args.mode or sim.RECLAIM
    sim.check_mode(mode)
    _check_period("--poll-seconds", args.poll_seconds, "give the planner's period in seconds, e.g. 60")
    _check_period("--checkpoint-seconds", args.checkpoint_seconds,
                  "give the checkpoint period in seconds, or leave it out for no checkpoints")
    try:
        with open(args.trace, encoding="utf-8", newline="") as fh:
            real = fidelity.read_real(fh, source=args.trace)
    except (FileNotFoundError, IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise ConfigError(Problem("--trace", args.trace, f"cannot be read ({exc.__class__.__name__})",
                                  "pass the CSV gpu-share trace export wrote")) from None
    _check_deployed(real, policy_hash(load_config(args.config)), args.config)
    scenario, poll, described = _load_scenario(args)
    scenario = sim.with_victim_order(scenario, args.victim_order)
    jobs = sim.load_jobs(args.trace, scenario)
    result = _run_one(scenario, jobs, mode, poll, args.checkpoint_seconds, args.trace)
    out = result.to_dict()
    out["fidelity"] = fidelity.compare(real, out["teams"])
    if args.json:
        print(json.dumps(out))
    else:
        print(render_table(result.to_dict(), poll_seconds=poll, checkpoint_seconds=args.checkpoint_seconds))
        print()
        print(render_fidelity(out["fidelity"], described=described))
    return 0


def _check_deployed(real: Any, deployed: str, config: str) -> None:
    """The export's archive names the configs it saw; the one replayed must be the one deployed."""
    seen = [c for c in (real.header or {}).get("configs", [])]
    if not seen:
        return  # an export without config records (not from the archive): nothing to check
    if len(seen) > 1:
        changes = ", ".join(f"{h} from {first}" for h, first, _ in seen)
        raise ConfigError(Problem("--trace", changes, "spans more than one deployed config",
                                  "export each period between two deployments on its own (--from, --to) and replay "
                                  "each under its config"))
    if seen[0][0] != deployed:
        raise ConfigError(Problem("--config", config,
                                  f"is not the config deployed over the period (its teams and backends hash to "
                                  f"{deployed}; the archive recorded {seen[0][0]})",
                                  "pass the config as it was deployed then (from your version control)"))


def render_fidelity(table: dict[str, dict[str, dict[str, float]]], *, described: str = "") -> str:
    """The fidelity table: per team and metric, real, simulated and their difference."""
    from cdk_gpu_share.core.records.fidelity import METRICS

    lines = [f"Fidelity: simulated against real, per team ({described}); error = simulated - real"]
    rows = []
    for team, metrics in table.items():
        for key, label, unit in METRICS:
            m = metrics[key]
            rows.append([team, label, _fig(m["real"], unit), _fig(m["simulated"], unit), _fig(m["error"], unit, sign=True)])
    lines += format_table(["team", "metric", "real", "simulated", "error"], rows, right={2, 3, 4}, indent="  ")
    return "\n".join(lines)


def _fig(x: float, unit: str, *, sign: bool = False) -> str:
    text = f"{x:+.3f}" if sign else f"{x:.3f}"
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return f"{text} {unit}".rstrip() if text not in ("+0", "-0") else "0"


def _run_one(scenario: Any, jobs: Any, mode: str, poll: float, checkpoint: float | None, source: str,
             label: str | None = None) -> Any:
    from cdk_gpu_share.cli._progress import ProgressBar
    from cdk_gpu_share.core import simulate as sim

    bar = ProgressBar(sys.stderr, f"simulating {label or mode}")
    try:
        return sim.simulate(scenario, jobs, mode, poll_seconds=poll, checkpoint_seconds=checkpoint,
                            progress=bar.show if bar.on else None, source=source)
    finally:
        bar.close()


#: The column label of the checkpoint-aware victim order in ``--compare``.
CHECKPOINT_ORDER_LABEL = "share+reclaim, checkpoint order"


def compare_modes(checkpoint_seconds: float | None,
                  checkpoint_order: bool = False) -> list[tuple[str, str, float | None, str]]:
    """(column label, mode, checkpoint period, victim order) of ``--compare``, in column
    order: the checkpoint-aware order last, with the same checkpoints as the column before it."""
    modes: list[tuple[str, str, float | None, str]] = [
        ("static", "static", None, "youngest"), ("share", "share", None, "youngest"),
        ("share+reclaim", "share+reclaim", None, "youngest"),
    ]
    if checkpoint_seconds:
        modes.append((f"share+reclaim, checkpoints {human_seconds(checkpoint_seconds)}", "share+reclaim",
                      checkpoint_seconds, "youngest"))
    if checkpoint_order:
        label = CHECKPOINT_ORDER_LABEL + (f", checkpoints {human_seconds(checkpoint_seconds)}"
                                          if checkpoint_seconds else "")
        modes.append((label, "share+reclaim", checkpoint_seconds, "checkpoint"))
    return modes


def wants_checkpoint_order(scenario: Any, jobs: Any, checkpoint: float | None, victim_order: str | None) -> bool:
    """Whether ``--compare`` runs the checkpoint-aware order too: when asked for (``--victim-order
    checkpoint``, or the scenario's settings, as a config with ``fairshare.reclaim.victim_order:
    checkpoint`` gives), or, unless ``--victim-order youngest``, with ``--checkpoint-seconds``.
    Teams' and jobs' own intervals alone do not add it: they are how work restarts on any
    backend, while the order is the fair-share reclaimer's."""
    if victim_order is not None:
        return victim_order == "checkpoint"
    return scenario.state.settings.victim_order == "checkpoint" or bool(checkpoint)


def _run_compare(scenario: Any, jobs: Any, poll: float, checkpoint: float | None, source: str,
                 victim_order: str | None = None) -> tuple[list[tuple[str, Any]], list[str], dict | None]:
    """The runs of ``--compare``, the notes under its tables, and which victim order won
    (:func:`~cdk_gpu_share.core.simulate.compare.order_verdict`; None without the checkpoint-aware column)."""
    from cdk_gpu_share.core import simulate as sim
    from cdk_gpu_share.core.simulate.compare import order_verdict, verdict_lines

    # A job no sharing mode could run is bad input for the whole comparison: say so first.
    sim.check_jobs(scenario, jobs, "share", source=source)
    runs: list[tuple[str, Any]] = []
    notes: list[str] = []
    columns = compare_modes(checkpoint, wants_checkpoint_order(scenario, jobs, checkpoint, victim_order))
    private: dict[str, dict[str, float]] = {}  # the private-cluster reference, the same for every mode
    for label, mode, ckpt, order in columns:
        try:
            result = _run_one(sim.with_victim_order(scenario, order), jobs, mode, poll, ckpt, source, label)
            judge_objectives(scenario, jobs, result, poll, private)
            runs.append((label, result))
        except ConfigError as exc:
            if mode != "static":
                raise
            # static cannot run a job larger than its team's guarantee: that is an answer too.
            runs.append((label, None))
            notes.append(f"static: not possible, {exc}")
    notes.append(f"share+reclaim: the reclaim planner runs every {poll:g} s")
    verdict = None
    if columns[-1][3] == "checkpoint":
        # Against youngest-first with the same checkpoints: the column before it.
        bound = poll + scenario.state.settings.reclaim_after_seconds + 60
        verdict = order_verdict(runs[-2][1], runs[-1][1], bound_seconds=bound)
        notes += verdict_lines(verdict, human_seconds)
    return runs, notes, verdict


def _run_gap(args: argparse.Namespace, jobs: Any, poll: float) -> dict[str, dict[str, Any]]:
    """With a config that has groups, :data:`GAP_MODE` replayed under the tree and under its flat
    compilation: ``{"tree": {...}, "compiled": {...}}``, each the run's pool figures, ``teams``
    and ``groups`` (the compiled run's groups over the same teams as the tree's). Else ``{}``."""
    from cdk_gpu_share.core import simulate as sim
    from cdk_gpu_share.core.configuration.parse import load_config
    from cdk_gpu_share.core.policy.organisation import HIERARCHY_MODES

    if args.config is None or not load_config(args.config).groups:
        return {}
    results = {}
    for mode in HIERARCHY_MODES:
        scenario, _, _ = _load_scenario(argparse.Namespace(**{**vars(args), "hierarchy": mode}))
        scenario = sim.with_victim_order(_with_origin(scenario, args.origin, args.trace), args.victim_order)
        results[mode] = _run_one(scenario, jobs, GAP_MODE, poll, args.checkpoint_seconds, args.trace,
                                 f"{GAP_MODE}, {mode}")
    # The compilation has no groups: its figures per group are over the tree's teams.
    results["compiled"].group_members = results["tree"].group_members
    keys = ("mode", "preemptions", "lost_gpu_seconds", "wait_gpu_hours", "teams", "groups")
    return {mode: {k: v for k, v in r.to_dict().items() if k in keys} for mode, r in results.items()}


def _with_origin(scenario: Any, origin: str | None, trace: str) -> Any:
    """``scenario`` with the clock time of the trace's second 0: ``--origin``, else the trace's
    header (``trace export`` writes one), else none (refused by the replay when it has windows)."""
    if origin is not None:
        return dataclasses.replace(scenario, origin=read_origin(origin))
    if not scenario.windows:
        return scenario
    with open(trace, encoding="utf-8", newline="") as fh:
        header = history.read_header(fh.readline())
    try:
        seconds = history.origin_seconds(header)
    except ValueError as exc:
        raise ConfigError(Problem("--origin", None, f"is not given and {exc}",
                                  "give --origin 2026-01-05T00:00:00Z")) from None
    if seconds is None:
        return scenario
    return dataclasses.replace(scenario, origin=datetime.fromtimestamp(seconds, timezone.utc))


def objective_warnings(scenario: Any) -> list[str]:
    """One ``warning:`` line per team of the scenario whose objectives its sharing cannot meet."""
    from cdk_gpu_share.core.configuration.objectives import never_stopped_conflict

    out = []
    for name, targets in scenario.objectives.items():
        why = never_stopped_conflict(targets, scenario.team(name).sharing)
        if why is not None:
            out.append(f"warning: team {name}: {why}")
    return out


def judge_objectives(scenario: Any, jobs: Any, result: Any, poll: float,
                     private: dict[str, dict[str, float]] | None = None) -> None:
    """Judge ``result`` against the teams' objectives (kept on it, in its JSON); ``private``
    caches each team's private-cluster reference across the runs of one scenario."""
    from cdk_gpu_share.core import simulate as sim

    if not scenario.objectives:
        return
    private = {} if private is None else private
    for name, targets in scenario.objectives.items():
        if targets.needs_private and name not in private:
            private[name] = sim.private_fit_waits(scenario, jobs, name)
    sim.evaluate_run(scenario, jobs, result, poll_seconds=poll, private_waits=private)


def render_table(d: dict[str, Any], *, poll_seconds: float | None = None,
                 checkpoint_seconds: float | None = None, tree: str = "") -> str:
    """The result of :func:`~cdk_gpu_share.core.simulate.SimResult.to_dict` as text; ``tree``: how a
    config's groups were read (``compiled, as hyperpod deploys it ...``), a line of its own when given."""
    w0, w1 = d["window_s"]
    lines = [
        f"mode                {d['mode']}"
        + (f" (poll {poll_seconds:g}s)" if d["mode"] == "share+reclaim" and poll_seconds else "")
        + (f", checkpoints every {checkpoint_seconds:g}s" if checkpoint_seconds else ""),
        *([f"tree                {tree}"] if tree else []),
        f"jobs                {d['completed']} of {d['jobs']} completed",
        f"window              {w0:,.0f}s .. {w1:,.0f}s ({human_seconds(w1 - w0)})",
        f"utilization         {d['utilization'] * 100:.1f}%",
        f"wait                {d['wait_gpu_hours']:,.1f} GPU-hours",
        f"preemptions         {d['preemptions']}",
        f"lost work           {d['lost_gpu_seconds'] / 3600:,.1f} GPU-hours",  # as --compare; seconds in --json
        f"simulation time     {d['sim_seconds']:.2f}s",
        "",
    ]
    header: tuple[str, ...] = ("team", "jobs", "wait p50", "p95", "p99", "GPU-hours", "borrowed", "preempted",
                               "reclaim p99")
    judged = any("objectives" in t for t in d["teams"].values())
    if judged:
        header += ("objectives",)
    rows = []
    named = list(d["teams"].items()) + [(f"{g}/", t) for g, t in d.get("groups", {}).items()]
    for name, t in named:
        verdicts = (objectives_cell(t.get("objectives", {})),) if judged else ()
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
            *verdicts,
        ))
    lines += format_table(header, rows, right=set(range(1, len(header) - (1 if judged else 0))))
    if "groups" in d:
        lines.append("group/: over the jobs of every team below the group")
    return "\n".join(lines)


def objectives_cell(evaluations: dict[str, Any]) -> str:
    """A team's objectives in one cell: each one's value, target and verdict (``-``: none)."""
    from cdk_gpu_share.core.configuration.objectives import verdict_text

    return ", ".join(verdict_text(k, e) for k, e in evaluations.items()) or "-"


# ---------------------------------------------------------------------------
# trace convert


def run_convert(args: argparse.Namespace) -> int:
    from cdk_gpu_share.core.records.trace import convert

    if args.output:
        from cdk_gpu_share.cli._files import check_output

        check_output(args.output, "-o", [args.file])  # never over the trace being converted
    _write_jobs(convert(args.source_format, args.file), args.output)
    return 0


#: Most jobs ``trace sample --jobs`` writes.
MAX_SAMPLE_JOBS = 1_000_000


#: The config ``trace sample`` reads without ``--config``, when the current folder has one.
DEFAULT_CONFIG = "platform.yaml"


def run_sample(args: argparse.Namespace) -> int:
    from cdk_gpu_share.core.records import trace

    if not 1 <= args.jobs <= MAX_SAMPLE_JOBS:
        raise ConfigError(Problem(field="--jobs", value=args.jobs, message=f"must be 1 to {MAX_SAMPLE_JOBS:,}",
                                  fix="give the number of jobs to write, e.g. --jobs 300"))
    # A folder made by `gpu-share init` has its platform.yaml: sample its teams, as simulate will read them.
    config = args.config or (DEFAULT_CONFIG if Path(DEFAULT_CONFIG).is_file() else None)
    if config is None:
        if args.backend is not None:
            raise ConfigError(Problem(field="--backend", value=args.backend, message="needs a config",
                                      fix="add --config PLATFORM.yaml, or drop --backend"))
        jobs = trace.sample_jobs(trace.SAMPLE_TEAMS, jobs=args.jobs, seed=args.seed)
        _write_jobs(jobs, args.output)
        print("jobs of whole GPUs: the sample teams' fleet is not partitioned", file=sys.stderr)
        if args.output:
            print(f"these jobs belong to the sample teams {', '.join(n for n, _ in trace.SAMPLE_TEAMS)}; for your own"
                  f" teams: gpu-share init, then"
                  f" {shlex.join(['gpu-share', 'trace', 'sample', '--config', DEFAULT_CONFIG, '-o', args.output])}",
                  file=sys.stderr)
        return 0
    from cdk_gpu_share.core import scenario as sc
    from cdk_gpu_share.core.catalog.instances import GPU_RESOURCE
    from cdk_gpu_share.core.configuration.parse import load_config

    platform = load_config(config)
    present = sc.simulated_backends(platform)
    # The folder's own config with several backends: the first, named in the hint.
    backend = sc.choose_backend(platform, args.backend or (present[0] if not args.config and present else None))
    data = sc.scenario_from_config(platform, backend)
    teams = [(t["name"], t["guarantee"][GPU_RESOURCE]) for t in data["teams"]]
    partitioned = sc.partitioned_types(platform, backend)
    jobs = trace.sample_jobs(teams, jobs=args.jobs, seed=args.seed, capacity=data["capacity"][GPU_RESOURCE],
                             partitioned=bool(partitioned))
    _write_jobs(jobs, args.output)
    print(_sizes_line(platform, backend, partitioned), file=sys.stderr)
    if args.output:
        print(f"try: {shlex.join(simulate_hint(config, backend if len(present) > 1 else None, args.output))}",
              file=sys.stderr)
    return 0


def _sizes_line(platform: PlatformConfig, backend: str, partitioned: Sequence[str]) -> str:
    """What the sample's job sizes are, and why: the fleet partitions its GPUs, or it does not."""
    if partitioned:
        return (f"jobs in quarters of a GPU: {backend} partitions the GPUs of {', '.join(partitioned)} with MIG")
    section = platform.backend(backend)
    fleet = ", ".join(section.capacity) if section is not None else "its fleet"
    if backend == "hyperpod":
        return f"jobs of whole GPUs: {fleet} has no MIG-capable GPU to partition"
    return f"jobs of whole GPUs: {backend} does not partition the GPUs of {fleet}; only HyperPod hands out MIG partitions"


def simulate_hint(config: str, backend: str | None, trace_path: str) -> list[str]:
    """The ``simulate`` command that replays a sample written for ``config``: every mode side by side, and the
    HTML report when matplotlib is installed (without it, ``--report`` would be refused)."""
    argv = ["gpu-share", "simulate", "--config", config, *(["--backend", backend] if backend else []),
            "--trace", trace_path, "--compare"]
    if importlib.util.find_spec("matplotlib") is not None:
        argv += ["--report", "report.html"]
    return argv


def _write_jobs(jobs: Any, output: str | None) -> None:
    """The trace CSV to ``output`` (through the one output writer), or to standard output."""
    import io

    from cdk_gpu_share.cli._files import write_output
    from cdk_gpu_share.core.records.trace import write_trace

    if not output:
        write_trace(jobs, sys.stdout)
        return
    text = io.StringIO(newline="")
    write_trace(jobs, text)
    write_output(output, text.getvalue(), "-o")
    print(f"wrote {len(jobs)} jobs to {output}", file=sys.stderr)
