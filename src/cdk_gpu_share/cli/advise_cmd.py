"""``gpu-share advise``: the quota advisor.

    gpu-share advise ([--config] PLATFORM.yaml [--backend B] | --scenario S.json) --trace JOBS.csv
                     [--fleet fixed|size] [--step N] [--workers N | --ray ADDRESS] [-o OUT] [--json]

The search lives in :mod:`cdk_gpu_share.core.advise`; this module parses arguments, picks
the executor, renders the answer and writes ``-o``. Exit 0: every objective holds; 1: no
configuration in the search space meets them all (the closest is printed and written);
2: bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import Any

from cdk_gpu_share.cli._parser import add_config_argument
from cdk_gpu_share.cli._progress import ProgressBar
from cdk_gpu_share.cli.advise_report import entitled_differs
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.text import format_table

__all__ = ["register", "render_advice", "run_advise"]


def register(subparsers: argparse._SubParsersAction) -> None:
    from cdk_gpu_share.cli.simulate_cmd import _backend_names

    p = subparsers.add_parser(
        "advise",
        help="recommend each team's guarantee, sharing and borrow limit from its objectives and a job trace",
        description=(
            "From each team's objectives (waits, preemptions, lost work, no worse than a private cluster) and "
            "a job trace, find the configuration that meets them all at the least cost: least capacity "
            "(--fleet size), then least regret (GPU-hours spent waiting or thrown away), then fewest changes. "
            "Exit 0: every objective holds; 1: none of the configurations does (the closest is printed)."
        ),
    )
    source = p.add_mutually_exclusive_group()
    add_config_argument(p, metavar="PLATFORM.yaml", group=source, alternative="--scenario",
                        help="the platform config",
                        option_help="advise on the platform config's teams (one backend, one instance type)")
    source.add_argument("--scenario", metavar="SCENARIO.json",
                        help="capacity, settings and teams (with their objectives) of a reclaim-plan input")
    p.add_argument("--backend", metavar="BACKEND",
                   help=f"with --config: {_backend_names()} (default: the config's only backend)")
    p.add_argument("--trace", required=True, metavar="JOBS.csv",
                   help="job_id,team,submit_time,duration_s,gpus[,priority]; times in seconds")
    p.add_argument("--fleet", default="fixed", metavar="fixed|size",
                   help="fixed (default): keep the capacity; size: choose the least capacity too")
    p.add_argument("--hierarchy", metavar="MODE", default=None,
                   help="with a config that has groups: evaluate the tree's own rules (tree) or the flat "
                        "configuration HyperPod or Batch deploys (compiled), as simulate --hierarchy does. Default: "
                        "what the backend enforces, the reading simulate replays by default")
    p.add_argument("--windows", default=None, metavar="NAME,...",
                   help="with time windows in the input: the windows the advice may give teams values in "
                        "(default: every window of the input); the others keep the teams' own values")
    p.add_argument("--origin", default=None, metavar="ISO-8601",
                   help="the clock time of the trace's second 0 (UTC unless it gives an offset), which an input "
                        "with time windows needs. Default: the origin in the header `trace export` writes")
    p.add_argument("--step", default=None, metavar="N",
                   help="GPUs guarantees and capacity move by (default: with --config the GPUs of one instance "
                        "of the backend's type; else 1)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", default=None, metavar="N",
                       help="simulate candidates in N local processes (default: the machine's cores; at most 4 per core)")
    where.add_argument("--ray", default=None, metavar="ADDRESS",
                       help="simulate candidates as tasks on a Ray cluster (auto: the one this machine runs, else "
                            "a new local one; needs pip install 'cdk-gpu-share[ray]')")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="write the advised config (YAML, comments kept) or scenario (JSON) here")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.add_argument("--report", metavar="OUT.html",
                   help="write the advice as one self-contained HTML page: each team before and after, each "
                        "objective's target and value, the regret, with --fleet size the frontier plot, and the "
                        "simulate report of the advised configuration (needs matplotlib)")
    p.set_defaults(func=run_advise)


def _window_names(raw: str | None) -> list[str] | None:
    """``--windows a,b``: the names, each once (None: not given)."""
    if raw is None:
        return None
    names = [n.strip() for n in raw.split(",") if n.strip()]
    if not names:
        raise ConfigError(Problem(field="--windows", value=raw, message="names no window",
                                  fix="give window names separated by commas, such as --windows night,weekend"))
    return list(dict.fromkeys(names))


def _positive_int(flag: str, raw: str | None, fix: str) -> int | None:
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(Problem(field=flag, value=raw, message="must be a positive whole number", fix=fix))
    return value


def _inputs(args: argparse.Namespace) -> tuple[dict[str, Any], Any, float, float | None, str]:
    """(scenario data, the config or None, planner period, default step, described)."""
    from cdk_gpu_share.core import simulate as sim

    if args.config is None:
        if args.backend is not None:
            raise ConfigError(Problem(field="--backend", value=args.backend, message="needs --config",
                                      fix="drop --backend, or pass --config PLATFORM.yaml instead of --scenario"))
        if args.hierarchy == "compiled":
            raise ConfigError(Problem(field="--hierarchy", value="compiled", message="needs --config",
                                      fix="pass --config PLATFORM.yaml: a compilation is in whole instances"))
        from cdk_gpu_share.core.policy.organisation import check_hierarchy

        data = sim.load_scenario_data(args.scenario)
        scenario = sim.parse_scenario(data, source=args.scenario)  # refuses what simulate refuses
        check_hierarchy(args.hierarchy, bool(scenario.state.groups), args.scenario)
        return data, None, sim.DEFAULT_POLL_SECONDS, None, args.scenario
    from cdk_gpu_share.core import scenario as sc
    from cdk_gpu_share.core.advise.config_file import instance_of
    from cdk_gpu_share.core.configuration.parse import load_config
    from cdk_gpu_share.core.policy.organisation import as_replayed, reading, reading_text

    config = load_config(args.config)
    backend = sc.choose_backend(config, args.backend)
    _, per = instance_of(config, backend)
    # The reading simulate replays (by default what the backend enforces), so that the input's
    # figures are simulate's on the same config.
    data = sc.scenario_from_config(as_replayed(config, backend, args.hierarchy), backend)
    sim.parse_scenario(data, source=f"{args.config} ({backend})")
    poll = sc.poll_seconds_of(config, backend) or sim.DEFAULT_POLL_SECONDS
    args.backend = backend
    described = f"{args.config}, backend {backend}"
    if config.groups:
        args.hierarchy = reading(config, backend, args.hierarchy)
        described += f"; the tree {reading_text(backend, args.hierarchy)}"
        if args.output and args.hierarchy == "compiled":
            raise ConfigError(Problem(
                field="-o", value=args.output,
                message=f"cannot hold an advice on the flat shares {backend} deploys: the config's groups would be"
                        " compiled into them a second time",
                fix="pass --hierarchy tree to advise on the tree and write it, or leave -o out"))
    return data, config, poll, float(per), described


def _executor(args: argparse.Namespace, study: Any) -> Any:
    from cdk_gpu_share.core.advise import executors
    from cdk_gpu_share.core.advise.search import InProcess

    if args.ray is not None:
        return executors.RayTasks(study, args.ray)
    workers = _positive_int("--workers", args.workers, "give the number of local processes, e.g. --workers 2")
    if workers is None:
        workers = executors.default_workers()
    return InProcess(study) if workers == 1 else executors.Processes(study, workers)


def run_advise(args: argparse.Namespace) -> int:
    from cdk_gpu_share.cli.simulate_cmd import _check_not_raw_trace, _with_origin
    from cdk_gpu_share.core import advise as adv
    from cdk_gpu_share.core import simulate as sim

    if args.fleet not in adv.FLEETS:
        raise ConfigError(Problem(field="--fleet", value=args.fleet, message="is not a fleet choice",
                                  fix="use fixed (keep the capacity) or size (choose it too)"))
    step_arg = _positive_int("--step", args.step, "give the GPUs that guarantees and capacity move by, such as 8")
    workers = _positive_int("--workers", args.workers, "give the number of local processes, e.g. --workers 2")
    if workers is not None:
        from cdk_gpu_share.core.advise.executors import checked_workers

        checked_workers(workers)
    if args.output and args.config is None and not args.output.lower().endswith(".json"):
        raise ConfigError(Problem(field="-o", value=args.output, message="is not a .json file name",
                                  fix="with --scenario, -o writes the advised scenario: give a path ending in .json"))
    if args.output:
        from cdk_gpu_share.cli._files import check_output

        # Before the search: a path that cannot be written fails now, not after minutes of work.
        check_output(args.output, "-o", [args.trace])
    _check_not_raw_trace(args.trace)
    if args.report:
        from cdk_gpu_share.cli.simulate_report import _check_target

        _check_target("--report", args.report, ".html")
    data, config, poll, per, described = _inputs(args)
    step = float(step_arg) if step_arg is not None else (per or 1.0)
    if per is not None and step_arg is not None and step_arg % per:
        raise ConfigError(Problem(field="--step", value=args.step,
                                  message=f"is not a whole number of instances ({per:g} GPUs each)",
                                  fix=f"give a multiple of {per:g}, or leave --step out"))
    scenario = sim.parse_scenario(data, source=described)
    jobs = sim.load_jobs(args.trace, scenario)
    sim.check_jobs(scenario, jobs, sim.RECLAIM, source=args.trace)
    windows = _window_names(args.windows)
    origin = _with_origin(scenario, args.origin, args.trace).origin if scenario.windows or args.origin else None
    study = adv.study_of(data, jobs, poll=poll, source=args.trace, origin=origin)
    if windows is not None:
        adv.allowed_windows([w.name for w in scenario.windows], windows)  # before the search: a bad name is refused now
    percents, least = adv.PERCENTS, 0.0
    if config is not None:
        from cdk_gpu_share.core import validation as V
        from cdk_gpu_share.core.advise.config_file import accepted_percents, least_guarantee

        raw = V.load_yaml(V.read_text(args.config), source=args.config)
        percents = accepted_percents(raw, args.backend, data["teams"][0]["name"], adv.PERCENTS)
        least = least_guarantee(config, args.backend)
    space = adv.space_of(study, step=step, fleet=args.fleet, percents=percents, least=least)

    executor = _executor(args, study)
    bar = ProgressBar(sys.stderr, "advising")

    def progress(done: int, budget: int, phase: str) -> None:
        bar.show(done / budget if budget else 0.0, f"{done} simulations, {bar.elapsed:.0f} s, {phase[:30]}")

    try:
        advice = adv.advise(study, space, executor, progress=progress if bar.on else None, windows=windows)
    finally:
        bar.close()
        close = getattr(executor, "close", None)
        if close is not None:
            close()
    doc = adv.advice_json(advice)
    if config is not None and config.groups:
        doc["hierarchy"] = args.hierarchy  # which reading of the tree the figures are
    for line in doc["warnings"]:
        print(f"warning: {line}", file=sys.stderr)
    if args.json:
        print(json.dumps(doc))
    else:
        print(render_advice(doc, described=described, trace=args.trace))
    if args.output:
        _write(args, advice, study, config)
        print(f"advice written to {args.output}", file=sys.stderr if args.json else sys.stdout)
    if args.report:
        from cdk_gpu_share.cli.advise_report import advised_simulate_report, render_advice_report, write_advice_report

        simulated = advised_simulate_report(adv.advised_scenario(study, advice.best.candidate), jobs, poll=poll,
                                            described=f"advised configuration of {described}", trace=args.trace,
                                            origin=study.origin)
        write_advice_report(args.report, render_advice_report(doc, simulated, described=described, trace=args.trace))
        print(f"report written to {args.report}", file=sys.stderr if args.json else sys.stdout)
    if not doc["feasible"]:
        print("gpu-share advise: no configuration meets every objective; the closest misses "
              + "; ".join(unmet_lines(doc)), file=sys.stderr)
        return 1
    return 0


def _write(args: argparse.Namespace, advice: Any, study: Any, config: Any) -> None:
    """-o: the advised scenario (JSON), or the config with its comments and other fields kept."""
    from cdk_gpu_share.cli._files import write_output
    from cdk_gpu_share.core import advise as adv
    from cdk_gpu_share.core.advise.config_file import checked_config_text

    if config is None:
        text = json.dumps(adv.advised_scenario(study, advice.best.candidate), indent=2) + "\n"
    else:
        text = checked_config_text(args.output, args.config, config, args.backend, advice.best.candidate,
                                   advice.space.input, advice.space.names, fleet=advice.space.fleet,
                                   entitlements=study.entitlements)
    write_output(args.output, text, "-o")


# ---------------------------------------------------------------------------
# rendering


def _gpus(x: Any) -> str:
    return f"{x:g}"


def _sharing(d: dict[str, Any]) -> str:
    s = d["sharing"]
    if s != "lend_and_borrow":
        return s
    percent = d.get("borrow_limit_percent", -1)
    return f"{s} ({'unlimited' if percent == -1 else f'{percent}%'})"


def _value(key: str, e: dict[str, Any]) -> str:
    v = e["value"]
    if key == "no_worse_than_private":
        return f"{v:+,.0f} s"
    return f"{v:,.2f}" if isinstance(v, float) and not float(v).is_integer() else f"{v:,.0f}"


def unmet_lines(doc: dict[str, Any]) -> list[str]:
    """``team KEY value V (target T)`` for each objective the advice does not meet."""
    out = []
    for name, team in doc["teams"].items():
        for key, e in team["objectives"].items():
            if not e["met"]:
                target = "<= 0 s" if key == "no_worse_than_private" else f"{e['target']:g}"
                out.append(f"team {name} {key} {_value(key, e)} (target {target})")
    return out


def _limit(d: dict[str, Any]) -> str:
    percent = d.get("borrow_limit_percent")
    return "-" if percent is None else "unlimited" if percent == -1 else f"{percent}%"


def _when(w: dict[str, Any]) -> str:
    days = ",".join(w["days"])
    return f"{days} {w['start']}-{w['end']} {w.get('timezone', 'UTC')}"


def _windows_lines(doc: dict[str, Any]) -> list[str]:
    """An advice with windows: a row per window (and the base) and team, the week's timeline, and
    the best static advice beside."""
    static = doc["static"]
    lines = [f"windows      the trace's second 0 is {doc['origin']}; the advice gives values in "
             + (", ".join(w["name"] for w in doc["windows"] if w["advised"]) or "none"),
             f"static       the best advice without window values: regret {static['regret_gpu_hours']:,.1f} GPU-hours, "
             + ("every objective holds" if static["feasible"] else "not every objective holds"), ""]
    rows: list[tuple[str, ...]] = []
    for name, t in doc["teams"].items():
        rows.append(("base", "outside every window", name, _gpus(t["was"]["guarantee"]["gpu"]),
                     _gpus(t["guarantee"]["gpu"]), _limit(t)))
    for w in doc["windows"]:
        for name, t in doc["teams"].items():
            now, was = t["windows"][w["name"]], t["was"]["windows"][w["name"]]
            rows.append((w["name"], _when(w), name, _gpus(was["guarantee"]["gpu"]), _gpus(now["guarantee"]["gpu"]),
                         _limit(now)))
    lines += format_table(("window", "when", "team", "guarantee was", "guarantee", "borrow limit"), rows)
    week = ", ".join(f"{datetime.fromisoformat(e['at']):%a %H:%M} {e['window'] or 'base'}" for e in doc["timeline"])
    lines += ["", f"the week (UTC): {week}"]
    return lines


def render_advice(doc: dict[str, Any], *, described: str = "", trace: str = "") -> str:
    """The advice as tables a person can read."""
    inp = doc["input"]
    worst = "-" if inp["worst_ratio"] is None else f"{inp['worst_ratio']:.2f}"
    lines = []
    if described:
        lines.append(f"input        {described}")
    if trace:
        lines.append(f"trace        {trace}")
    lines += [
        "advice       " + ("every objective holds" if doc["feasible"]
                           else "no configuration meets every objective; the closest found"),
        f"capacity     {_gpus(doc['capacity']['gpu'])} GPUs ({doc['fleet']} fleet)",
        f"regret       {doc['regret_gpu_hours']:,.1f} GPU-hours waited or thrown away "
        f"(input: {inp['regret_gpu_hours']:,.1f}, {'feasible' if inp['feasible'] else 'not feasible'}, "
        f"worst ratio {worst})",
        f"simulations  {doc['simulations']}",
        "",
    ]
    rows: list[tuple[str, ...]] = []
    # The entitlement (what a team's promises are judged against) is shown once some team's differs.
    promised = any(entitled_differs(t) for t in doc["teams"].values())
    for name, t in doc["teams"].items():
        was = t["was"]
        rows.append((name, _gpus(was["guarantee"]["gpu"]), _sharing(was), _gpus(t["guarantee"]["gpu"]), _sharing(t),
                     *((_gpus(t["entitlement"]["gpu"]),) if promised else ())))
    lines += format_table(("team", "guarantee was", "sharing was", "guarantee", "sharing",
                           *(("entitled",) if promised else ())), rows)
    if "windows" in doc:
        lines += ["", *_windows_lines(doc)]
    rows = []
    for name, t in doc["teams"].items():
        for key, e in t["objectives"].items():
            target = "private + slack" if key == "no_worse_than_private" else f"{e['target']:g}"
            rows.append((name, key, target, _value(key, e), "yes" if e["met"] else "NO"))
    if rows:
        lines += ["", *format_table(("team", "objective", "target", "value", "met"), rows)]
    if doc["frontier"]:
        rows = [(_gpus(f["capacity"]["gpu"]), "yes" if f["feasible"] else "no",
                 "-" if f["worst_ratio"] is None else f"{f['worst_ratio']:.2f}", f"{f['regret_gpu_hours']:,.1f}")
                for f in doc["frontier"]]
        lines += ["", "frontier: the best configuration found at each capacity tried",
                  *format_table(("capacity", "feasible", "worst ratio", "regret GPU-hours"), rows)]
    return "\n".join(lines)
