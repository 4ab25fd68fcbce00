"""Where candidates are simulated: this process, local processes, or a Ray cluster.

Each executor takes a batch of tasks and returns their evaluations in the order of the
batch, whatever order the workers finish in: the search's decisions, and so its answer,
are the same byte for byte with any executor and any number of workers. ``each(tasks)``
gives the results one at a time in the same order, every task handed out at once (the wait
predictor's backtest, whose tasks do not depend on each other's results).

- :class:`~cdk_gpu_share.core.advise.search.InProcess`: one process (``--workers 1``);
- :class:`Processes`: a :class:`concurrent.futures.ProcessPoolExecutor`; the study (the
  parsed trace above all) is handed to each worker once, by its initializer;
- :class:`RayTasks`: one Ray task per candidate; the study is put once in Ray's object
  store and each worker process reads it once (``pip install 'cdk-gpu-share[ray]'``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from cdk_gpu_share.core.advise.evaluate import run_task
from cdk_gpu_share.core.advise.search import Task
from cdk_gpu_share.core.errors import ConfigError, GpuShareError, Problem

__all__ = ["MAX_WORKERS_PER_CORE", "Processes", "RayTasks", "checked_workers", "default_workers"]

_STUDY: Any = None  # a worker's study, installed once
_RUNNER: Callable[[Any, Any], Any] = run_task  # what a worker does with a task: run_task(study, task)
#: Local processes beyond this many per core only share the same cores (and each holds the trace).
MAX_WORKERS_PER_CORE = 4


def default_workers() -> int:
    """The machine's cores (those this process may run on)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def checked_workers(workers: int) -> int:
    """``workers``, refused (naming ``--workers``) when above :data:`MAX_WORKERS_PER_CORE` per core."""
    cores = default_workers()
    most = MAX_WORKERS_PER_CORE * cores
    if workers > most:
        raise ConfigError(Problem(field="--workers", value=workers,
                                  message=f"is more than {MAX_WORKERS_PER_CORE} processes for each of this machine's "
                                          f"{cores} cores",
                                  fix=f"give at most {most}, or leave --workers out to use one per core"))
    return workers


def _install(study: Any, runner: Callable[[Any, Any], Any]) -> None:
    global _STUDY, _RUNNER
    _STUDY = study
    _RUNNER = runner


def _run(task: Task) -> Any:
    assert _STUDY is not None, "the worker's initializer installs the study"
    return _RUNNER(_STUDY, task)


class Processes:
    """``workers`` local processes, each given the study once. ``runner(study, task)`` is the
    work of one task (a module-level function, so that it pickles): by default the advisor's."""

    def __init__(self, study: Any, workers: int, runner: Callable[[Any, Any], Any] = run_task):
        self.pool = ProcessPoolExecutor(max_workers=workers, initializer=_install, initargs=(study, runner))

    def run(self, tasks: Sequence[Task]) -> list[Any]:
        return list(self.pool.map(_run, tasks))  # results in the batch's order

    def each(self, tasks: Sequence[Task]) -> Iterator[Any]:
        """The results one at a time, in the order of ``tasks``; every task is handed out at once,
        so a worker takes the next one as soon as it is free, never waiting for a batch's slowest."""
        return self.pool.map(_run, tasks)

    def close(self) -> None:
        self.pool.shutdown(cancel_futures=True)


_RAY_STUDIES: dict[str, Any] = {}


def _ray_run(holder: list, task: Task, runner: Callable[[Any, Any], Any] = run_task) -> Any:
    """A Ray task: the study is read from the object store once per worker process."""
    import ray

    ref = holder[0]
    key = ref.hex()
    study = _RAY_STUDIES.get(key)
    if study is None:
        study = _RAY_STUDIES[key] = ray.get(ref)
    return runner(study, task)


class RayTasks:
    """One Ray task per candidate on the cluster at ``address`` (``auto``: the one this machine
    runs, or a new local one). The study goes once into the object store. ``runner(study, task)``
    is the work of one task (a module-level function): by default the advisor's."""

    def __init__(self, study: Any, address: str, runner: Callable[[Any, Any], Any] = run_task):
        self.runner = runner
        try:
            import ray
        except ImportError:
            raise GpuShareError("--ray needs Ray: install it with  pip install 'cdk-gpu-share[ray]'") from None
        self.ray = ray
        self.started = False
        if not ray.is_initialized():
            try:
                ray.init(address=None if address == "auto" else address, include_dashboard=False,
                         log_to_driver=False, configure_logging=False)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise ConfigError(Problem(field="--ray", value=address, message=f"cannot connect ({exc})",
                                          fix="give a running cluster's address (ray://HOST:10001 or HOST:6379), "
                                              "or auto")) from None
            self.started = True
        self.ref = ray.put(study)
        self.task: Any = ray.remote(_ray_run)

    def run(self, tasks: Sequence[Task]) -> list[Any]:
        futures = [self.task.remote([self.ref], t, self.runner) for t in tasks]
        return list(self.ray.get(futures))  # in the batch's order

    def each(self, tasks: Sequence[Task]) -> Iterator[Any]:
        """The results one at a time, in the order of ``tasks``, every task submitted at once."""
        futures = [self.task.remote([self.ref], t, self.runner) for t in tasks]
        return (self.ray.get(f) for f in futures)

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()
