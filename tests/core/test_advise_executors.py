"""The advice is the same byte for byte whatever evaluates the candidates: this process, two
local processes, or a real local Ray cluster started here (the study put once in its object
store)."""

from __future__ import annotations

import json

import pytest

from cdk_gpu_share.core import advise as adv
from cdk_gpu_share.core.advise import executors
from cdk_gpu_share.core.advise.search import InProcess
from tests.core.test_advise import bursty_trace, scenario, study_of


@pytest.fixture(scope="module")
def study():
    data = scenario(6, {"a": {"wait_p95_minutes": 15, "no_worse_than_private": True},
                        "b": {"wait_p95_minutes": 30, "max_preempted_per_day": 0},
                        "c": {"wait_p50_minutes": 5, "max_lost_gpu_hours_per_day": 2}},
                    guarantees={"a": 2, "b": 2, "c": 2})
    return study_of(data, bursty_trace(7, ("a", "b", "c"), jobs=36))


def advice_text(study, executor, fleet="size") -> str:
    space = adv.space_of(study, step=1, fleet=fleet)
    try:
        return json.dumps(adv.advice_json(adv.advise(study, space, executor)))
    finally:
        close = getattr(executor, "close", None)
        if close is not None:
            close()


@pytest.fixture(scope="module")
def one_process(study):
    return advice_text(study, InProcess(study))


def test_two_processes_give_the_same_advice_as_one(study, one_process):
    assert json.loads(one_process)["simulations"] > 20  # many batches, each shared by both workers
    assert advice_text(study, executors.Processes(study, 2)) == one_process


def test_a_local_ray_cluster_gives_the_same_advice_as_one_process(study, one_process):
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'cdk-gpu-share[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    try:
        tasks = executors.RayTasks(study, "auto")  # finds the cluster this process runs
        assert not tasks.started
        assert advice_text(study, tasks) == one_process
    finally:
        ray.shutdown()


def test_the_fixed_fleet_advice_too(study):
    assert advice_text(study, executors.Processes(study, 2), "fixed") == advice_text(study, InProcess(study), "fixed")


def test_four_teams_searched_on_the_grid_the_same_with_two_processes():
    """Four teams: the grid, then climbs from several starts, each start's share of the budget
    counted in simulations: the same answer whichever process ran which simulation."""
    from tests.core.test_advise import MANY

    objectives, guarantees, seed = MANY["four"]
    four = study_of(scenario(6, objectives, guarantees=guarantees), bursty_trace(seed, tuple(objectives), jobs=40))
    one = advice_text(four, InProcess(four), "fixed")
    assert json.loads(one)["simulations"] > 64  # more than one batch of the grid
    assert advice_text(four, executors.Processes(four, 2), "fixed") == one


def test_a_bisection_probe_fills_its_batch_with_a_seed_of_the_next_probe(study):
    """The probe at 3 GPUs has one seed left to simulate: beside it, its batch holds a seed of the
    probe that follows (at 6 GPUs, where the bisection goes next), which then simulates two
    seeds, not three: no batch of one or three leaves one of two workers idle. The answer is
    the same with two processes."""
    from tests.core.test_advise import Recording

    executor, phases = Recording(study), []
    search = adv.Search(study, adv.space_of(study, step=1, fleet="size"), executor,
                        progress=lambda done, total, phase: phases.append(phase))
    advice = search.run()
    probes = [(phase, n) for phase, n in zip(phases, executor.candidates) if phase.startswith("capacity")]
    assert probes[:2] == [("capacity 9", 4), ("capacity 3", 2)]  # the first: the input's and three seeds
    assert ("capacity 6", 2) in probes and ("capacity 6", 3) not in probes
    assert advice_text(study, executors.Processes(study, 2)) == json.dumps(adv.advice_json(advice))


def test_the_scans_refinement_gives_the_same_sized_advice_with_two_processes():
    """Four teams and a budget that leaves the scan's grid coarser than the step: the climbs that
    refine it run, and the answer is the same byte for byte with two processes."""
    objectives = {"a": {"wait_p95_minutes": 10}, "b": {"wait_p95_minutes": 10},
                  "c": {"max_preempted_per_day": 0, "wait_p95_minutes": 30}, "d": {"wait_p95_minutes": 10}}
    four = study_of(scenario(8, objectives, guarantees={"a": 2, "b": 2, "c": 2, "d": 2}),
                    bursty_trace(6, tuple(objectives), jobs=48, sizes=(1, 2, 3)))
    space = adv.space_of(four, step=1, fleet="size", percents=(0, -1))
    phases: list[str] = []
    one = json.dumps(adv.advice_json(adv.advise(four, space, InProcess(four), budget=150,
                                                progress=lambda done, total, phase: phases.append(phase))))
    assert any(phase.startswith("refining the grid") for phase in phases)
    pool = executors.Processes(four, 2)
    try:
        assert json.dumps(adv.advice_json(adv.advise(four, space, pool, budget=150))) == one
    finally:
        pool.close()
