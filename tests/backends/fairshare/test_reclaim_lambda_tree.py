"""The reclaim Lambda with the organisation's tree in its settings (as the construct bakes it):
it holds a division to its bound, which the same queue without the tree does not."""

from __future__ import annotations

import copy

import pytest

from cdk_gpu_share.aws import batch_reader as br
from cdk_gpu_share.lambdas.reclaim import handler as h
from tests.batch_model import BatchModel, lambda_context, reclaim_lambda_model

#: Two divisions of two teams, one GPU guaranteed each, on four GPUs.
FLAT = {
    "queue": "gpu-share-fairshare",
    "capacity": {"gpu": 4},
    "settings": {"reclaim_after_seconds": 0, "min_runtime_seconds": 0},
    "teams": [{"name": name, "share_identifier": name.replace("-", ""), "guarantee": {"gpu": 1}}
              for name in ("sci-a", "sci-b", "prod-c", "prod-d")],
}
TREE = copy.deepcopy(FLAT)
TREE["groups"] = [{"name": "science"}, {"name": "product", "borrow_limit": {"gpu": 0}}]
for team in TREE["teams"]:
    team["group"] = "science" if team["name"].startswith("sci") else "product"

CYCLE = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch):
    monkeypatch.setattr(br.time, "sleep", lambda s: None)


def division_over_its_cap(model: BatchModel) -> str:
    """prod-c runs three jobs (two borrowed), sci-a one; nobody waits. product's borrow limit is 0
    in the tree, so its three GPUs are one above its bound of two. Returns prod-c's newest job."""
    now = model.clock()
    model.add_job("scia", "RUNNING", started=now - 4000)
    model.add_job("prodc", "RUNNING", started=now - 3900)
    model.add_job("prodc", "RUNNING", started=now - 3000)
    return model.add_job("prodc", "RUNNING", started=now - 1000)["jobId"]


def test_with_the_tree_the_lambda_holds_a_division_to_its_bound(monkeypatch):
    model = reclaim_lambda_model(monkeypatch, TREE)
    newest = division_over_its_cap(model)
    result = h.handler(CYCLE, lambda_context(clock=model.clock))
    assert result["stopped"] == [newest]


def test_without_the_tree_the_same_queue_stops_nothing(monkeypatch):
    model = reclaim_lambda_model(monkeypatch, FLAT)
    division_over_its_cap(model)
    result = h.handler(CYCLE, lambda_context(clock=model.clock))
    assert result["stopped"] == []
