"""When will my job start: a measured band for a waiting job's wait.

Documentation: ``docs/eta.md``. Two concerns, one module each:

- :mod:`~cdk_gpu_share.core.eta.predictor`: :func:`predict` (the band: p10, p50, p90 of the
  wait, from a :class:`~cdk_gpu_share.core.simulate.resume.QueueState`, a :class:`History`
  of finished jobs, a number of samples and a seed) and :func:`baseline_wait` (one replay
  with median durations);
- :mod:`~cdk_gpu_share.core.eta.backtest`: :func:`backtest` measures both on a trace whose
  outcome is known (``gpu-share eta --backtest``).

The state type has no duration field for running or pending jobs: a prediction cannot read
what was not known when it was made.

May import: the simulator and the base modules of :mod:`cdk_gpu_share.core`; the live
readers of ``gpu-share status`` import it.
"""

from __future__ import annotations

from cdk_gpu_share.core.eta.backtest import Backtest, EtaStudy, backtest, run_backtest, run_eta_task, select_jobs
from cdk_gpu_share.core.eta.live import LiveJob, history_of, live_estimate, live_state, sentence
from cdk_gpu_share.core.eta.predictor import (
    ARRIVAL_WINDOW_S,
    DEFAULT_SAMPLES,
    MAX_SAMPLES,
    Band,
    FinishedJob,
    History,
    baseline_wait,
    predict,
)
from cdk_gpu_share.core.simulate.resume import (
    Arrivals,
    PendingJob,
    QueueState,
    RunningJob,
    capture_states,
    replay_start,
)

__all__ = [
    # the state a prediction starts from
    "QueueState", "RunningJob", "PendingJob",
    # the predictor
    "History", "FinishedJob", "Band", "predict", "baseline_wait", "DEFAULT_SAMPLES", "MAX_SAMPLES", "ARRIVAL_WINDOW_S",
    # replays of the policy
    "replay_start", "capture_states", "Arrivals",
    # a live queue's waiting job
    "LiveJob", "live_state", "history_of", "live_estimate", "sentence",
    # the backtest
    "backtest", "run_backtest", "Backtest", "EtaStudy", "run_eta_task", "select_jobs",
]
