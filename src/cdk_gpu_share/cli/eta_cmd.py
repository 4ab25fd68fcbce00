"""``gpu-share eta --backtest``: how good "when will my job start?" answers are on a trace.

    gpu-share eta ([--config] PLATFORM.yaml [--backend B] | --scenario S.json) --trace JOBS.csv
                  [--origin ISO-8601] --backtest [--jobs N] [--samples K] [--seed N]
                  [--workers N | --ray ADDRESS] [--json] [--report OUT.html]

The predictor and the backtest live in :mod:`cdk_gpu_share.core.eta`; this module parses the
arguments, picks the executor (the quota advisor's), draws the progress bar and renders the
summary; ``--report`` writes the page of :mod:`cdk_gpu_share.cli.eta_report`. Exit 0; 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cdk_gpu_share.cli._parser import add_config_argument
from cdk_gpu_share.cli._progress import ProgressBar
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.text import format_table
from cdk_gpu_share.core.text import seconds_words as _s

__all__ = ["register", "render_backtest", "run_eta"]

#: The seed unless --seed says otherwise.
DEFAULT_SEED = 1


def register(subparsers: argparse._SubParsersAction) -> None:
    from cdk_gpu_share.cli.simulate_cmd import _backend_names
    from cdk_gpu_share.core.eta import DEFAULT_SAMPLES, MAX_SAMPLES

    p = subparsers.add_parser(
        "eta",
        help="measure the predicted start of waiting jobs against a trace (--backtest)",
        description=(
            "Replay a job trace under the platform config (--config) or a scenario (--scenario) and, for each "
            "job that had to wait, predict its wait from what was known when it was submitted (the running and "
            "pending jobs, the finished jobs' durations) as a band p10-p50-p90; print how often the band held "
            "the wait the job got and how far p50 was, beside a one-replay baseline with median durations."
        ),
    )
    source = p.add_mutually_exclusive_group()
    add_config_argument(p, metavar="PLATFORM.yaml", group=source, alternative="--scenario",
                        help="the platform config", option_help="the platform config (one backend)")
    source.add_argument("--scenario", metavar="SCENARIO.json",
                        help="capacity, settings and teams of a reclaim-plan input")
    p.add_argument("--backend", metavar="BACKEND",
                   help=f"with --config: {_backend_names()} (default: the config's only backend)")
    p.add_argument("--trace", required=True, metavar="JOBS.csv",
                   help="job_id,team,submit_time,duration_s,gpus[,priority]; times in seconds")
    p.add_argument("--origin", default=None, metavar="ISO-8601",
                   help="the clock time of the trace's second 0 (no offset: UTC), which a config or scenario with "
                        "time windows needs. Default: the origin in the header `trace export` writes")
    p.add_argument("--backtest", action="store_true",
                   help="measure the predictions on the trace (the only mode of this command)")
    p.add_argument("--jobs", default=None, metavar="N",
                   help="predict N of the jobs that waited, chosen by a hash of (seed, job id) (default: all)")
    p.add_argument("--samples", default=None, metavar="K",
                   help=f"replays per prediction, 1 to {MAX_SAMPLES:,} (default: {DEFAULT_SAMPLES})")
    p.add_argument("--seed", default=None, metavar="N",
                   help=f"seed of the random draws and of the --jobs choice (default: {DEFAULT_SEED})")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", default=None, metavar="N",
                       help="predict in N local processes (default: the machine's cores); the answer is the same")
    where.add_argument("--ray", default=None, metavar="ADDRESS",
                       help="predict as tasks on a Ray cluster (auto: the one this machine runs, else a new local "
                            "one; needs pip install 'cdk-gpu-share[ray]'); the answer is the same")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.add_argument("--report", metavar="OUT.html",
                   help="also write one self-contained HTML page: per team, each predicted band against the "
                        "actual wait, and the figures beside the baseline")
    p.set_defaults(func=run_eta, poll_seconds=None)


def _seed(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_SEED
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(Problem(field="--seed", value=raw, message="is not a whole number",
                                  fix="give an integer, e.g. --seed 1")) from None


def _samples(raw: str | None) -> int | None:
    """``--samples``: a whole number of replays from 1 to :data:`~cdk_gpu_share.core.eta.MAX_SAMPLES`."""
    from cdk_gpu_share.core.eta import MAX_SAMPLES

    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_SAMPLES:
        raise ConfigError(Problem(field="--samples", value=raw, message=f"must be a whole number from 1 to {MAX_SAMPLES:,}",
                                  fix="give the replays per prediction, e.g. --samples 32 (more narrows the band's "
                                      "noise, at the cost of time)"))
    return value


def run_eta(args: argparse.Namespace) -> int:
    from cdk_gpu_share.cli.advise_cmd import _positive_int
    from cdk_gpu_share.cli.simulate_cmd import _check_not_raw_trace, _load_scenario, _with_origin
    from cdk_gpu_share.core import eta
    from cdk_gpu_share.core import simulate as sim
    from cdk_gpu_share.core.advise import executors
    from cdk_gpu_share.core.advise.search import InProcess

    if not args.backtest:
        raise ConfigError(Problem(field="--backtest", value=None, message="is missing",
                                  fix="add --backtest to measure the predictions on the trace "
                                      "(a live job's estimate: gpu-share status --job ID)"))
    n_jobs = _positive_int("--jobs", args.jobs, "give how many waiting jobs to predict, e.g. --jobs 1000")
    samples = _samples(args.samples)
    workers = _positive_int("--workers", args.workers, "give the number of local processes, e.g. --workers 2")
    seed = _seed(args.seed)
    if args.report:
        from cdk_gpu_share.cli.simulate_report import _check_target

        # Before any input is read: a path that cannot be written fails now, not after minutes of work.
        _check_target("--report", args.report, ".html")
    _check_not_raw_trace(args.trace)
    scenario, poll, described = _load_scenario(args)
    jobs = sim.load_jobs(args.trace, scenario)
    sim.check_jobs(scenario, jobs, sim.RECLAIM, source=args.trace)
    scenario = _with_origin(scenario, args.origin, args.trace)

    workers = executors.checked_workers(workers) if workers else executors.default_workers()
    bar = ProgressBar(sys.stderr, "predicting")

    def progress(done: int, total: int) -> None:
        bar.show(done / total if total else 1.0, f"{done}/{total} jobs, {bar.elapsed:.0f} s")

    def executor_of(study: Any) -> Any:
        if args.ray is not None:
            return executors.RayTasks(study, args.ray, eta.run_eta_task)
        if workers == 1:
            return InProcess(study, eta.run_eta_task)
        return executors.Processes(study, workers, eta.run_eta_task)

    try:
        result = eta.run_backtest(scenario, jobs, samples=samples or eta.DEFAULT_SAMPLES, seed=seed,
                                  poll_seconds=poll, n_jobs=n_jobs, executor_of=executor_of, progress=progress)
    finally:
        bar.close()
    doc = result.doc
    if args.report:
        from cdk_gpu_share.cli._files import write_output
        from cdk_gpu_share.cli.eta_report import render_eta_report

        write_output(args.report, render_eta_report(doc, result.baseline_per_team, described=described,
                                                    trace=args.trace), "--report")
        print(f"report written to {args.report}", file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(doc))
    else:
        print(render_backtest(doc, described=described, trace=args.trace))
    return 0




def render_backtest(doc: dict[str, Any], *, described: str = "", trace: str = "") -> str:
    """The backtest's summary as a table: per team and overall, the band beside the baseline."""
    s = doc["summary"]
    lines = []
    if described:
        lines.append(f"input      {described}")
    if trace:
        lines.append(f"trace      {trace}")
    lines.append(f"predicted  {s['sampled']} waiting jobs, {doc['samples']} replays each, seed {doc['seed']}"
                 + (f"; {s['no_history']} left out (no finished job to learn from yet)" if s["no_history"] else ""))
    lines.append("")
    rows = [[name, str(t["sampled"]), f"{t['coverage_p10_p90']:.2f}", _s(t["mdae_p50_s"]),
             f"{t['baseline']['coverage_p10_p90']:.2f}", _s(t["baseline"]["mdae_p50_s"])]
            for name, t in s["per_team"].items()]
    rows.append(["overall", str(s["sampled"]), f"{s['coverage_p10_p90']:.2f}", _s(s["mdae_p50_s"]),
                 f"{s['baseline']['coverage_p10_p90']:.2f}", _s(s["baseline"]["mdae_p50_s"])])
    lines += format_table(["team", "jobs", "in p10-p90", "p50 error (median)", "baseline in band", "baseline error"],
                          rows, right={1, 2, 3, 4, 5})
    lines.append("")
    lines.append(f"median actual wait {_s(s['median_actual_wait_s'])}. A calibrated band holds about 0.80 of the "
                 "waits; the baseline is one replay with median durations (its band is a single point).")
    return "\n".join(lines)
