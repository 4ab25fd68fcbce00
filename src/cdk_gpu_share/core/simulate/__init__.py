"""The what-if simulator: replay a job trace against a quota policy.

Documentation: ``docs/simulator.md``. The simulator answers "how much would
borrowing buy us, how often would our jobs be interrupted?" for three modes:

- ``static``: a team never runs beyond its guarantee;
- ``share``: teams borrow idle capacity within their caps; nothing is preempted;
- ``share+reclaim``: as ``share``, and the reclaim planner
  (:func:`cdk_gpu_share.core.policy.reclaim.plan_state`, the same function the Lambda
  calls) runs every ``poll_seconds``; the jobs it chooses go back to the queue.

Whether a job *fits* and what a team's borrow cap is come from
:mod:`cdk_gpu_share.core.policy.reclaim` (:func:`~cdk_gpu_share.core.policy.reclaim.fits`,
:func:`~cdk_gpu_share.core.policy.reclaim.borrow_cap`): there is no second copy of those
rules here.

Entry points: :func:`load_scenario` / :func:`parse_scenario`, :func:`load_jobs` /
:func:`parse_jobs`, :func:`simulate` (returns a :class:`SimResult`, whose
:meth:`SimResult.to_dict` is the documented JSON), :func:`demand_excess` (the fluid
limits the benchmark prints).

A job that could never start (larger than the pool, or than what its team may hold in
an empty pool in the mode simulated) is rejected up front, naming its row, so every
simulation ends with every job completed.

The package, one concern a module, each importing only modules listed before it:

- :mod:`~cdk_gpu_share.core.simulate.inputs`: the scenario, the job trace and the
  checks that reject a job that could never start;
- :mod:`~cdk_gpu_share.core.simulate.state`: the per-job and per-team state of a run;
- :mod:`~cdk_gpu_share.core.simulate.accounting`: the metrics of a run
  (:class:`SimResult`, its JSON, the per-job waits) and the fluid limits;
- :mod:`~cdk_gpu_share.core.simulate.dispatch`: the dispatch index, which pending job
  starts next;
- :mod:`~cdk_gpu_share.core.simulate.planner_view`: the reclaim planner's input, kept
  up to date between ticks;
- :mod:`~cdk_gpu_share.core.simulate.watch`: limits that end a run as soon as one is
  broken (the quota advisor's early refusal of a candidate);
- :mod:`~cdk_gpu_share.core.simulate.engine`: the event loop and :func:`simulate`;
- :mod:`~cdk_gpu_share.core.simulate.verdict`: a run against the teams' objectives
  (:func:`evaluate_run`) and the private-cluster reference (:func:`private_fit_waits`).

May import: the policy (the reclaim planner it replays), the configuration, the catalog
and the base modules of :mod:`cdk_gpu_share.core`; never the records or the advisor, which
import it.
"""

from __future__ import annotations

from cdk_gpu_share.core.policy import reclaim as reclaim  # the rules the simulator applies (tests read it here)
from cdk_gpu_share.core.simulate.accounting import (
    JobOutcome,
    SimResult,
    TeamResult,
    demand_excess,
    nearest_rank,
    result_json,
)
from cdk_gpu_share.core.simulate.engine import _replace_position as _replace_position  # for the tests
from cdk_gpu_share.core.simulate.engine import _Sim as _Sim  # its class-level switches, for the tests
from cdk_gpu_share.core.simulate.engine import check_mode, simulate, with_victim_order
from cdk_gpu_share.core.simulate.inputs import (
    DEFAULT_POLL_SECONDS,
    MODES,
    OPTIONAL_COLUMNS,
    RECLAIM,
    REQUIRED_COLUMNS,
    RESOURCE,
    SHARE,
    STATIC,
    TOL,
    Job,
    Scenario,
    check_jobs,
    load_jobs,
    load_scenario,
    load_scenario_data,
    parse_jobs,
    parse_scenario,
    trace_from_rows,
)
from cdk_gpu_share.core.simulate.verdict import evaluate_run, objective_slack, private_fit_waits, trace_days_of
from cdk_gpu_share.core.simulate.watch import Broken, WaitLimit, Watch

# The public names, by concern: a trace and a scenario in, a run, a result out.
__all__ = [
    # inputs
    "Scenario", "Job", "parse_scenario", "load_scenario", "load_scenario_data", "parse_jobs", "load_jobs", "trace_from_rows", "check_jobs",
    "MODES", "STATIC", "SHARE", "RECLAIM", "RESOURCE", "REQUIRED_COLUMNS", "OPTIONAL_COLUMNS",
    "DEFAULT_POLL_SECONDS", "TOL",
    # engine
    "simulate", "check_mode", "with_victim_order",
    # watch
    "Watch", "WaitLimit", "Broken",
    # accounting
    "SimResult", "TeamResult", "JobOutcome", "nearest_rank", "result_json", "demand_excess",
    # objectives
    "evaluate_run", "private_fit_waits", "objective_slack", "trace_days_of",
]

# The public classes carry this module's name, the one users import them from: a pickle
# of a Scenario or a list of Jobs (benchmarks/simulate_instructions.py hands one from a
# checkout to another) then loads in every version of the package, and the reprs and
# the API documentation name the public path.
for _cls in (Scenario, Job, TeamResult, JobOutcome, SimResult):
    _cls.__module__ = __name__
del _cls

