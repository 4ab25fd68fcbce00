"""The quota window switcher through real boto3 clients: Batch quota shares answered by
``tests/quota_model.QuotaQueueModel``, HyperPod compute quotas by ``ComputeQuotaModel``.

The platform: a fleet of 8 ml.p4d.24xlarge and 4 ml.g5.12xlarge; two windows in Europe/Berlin
("night", weekdays 20:00 to 08:00, and "lunch", weekdays 12:00 to 13:00). "training" has 2
p4d and the 4 g5 by day, 6 p4d and no g5 at night; "research" the other way round. Each
team's share lowers one type and raises the other at a boundary, so a switch that raised a
share before lowering the other would promise more than the fleet.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from cdk_gpu_share.lambdas.quota_switcher import handler as h
from tests.batch_model import Clock
from tests.quota_model import ComputeQuotaModel, QuotaQueueModel

P4D, G5 = "ml.p4d.24xlarge", "ml.g5.12xlarge"
CAPACITY = {P4D: 8, G5: 4}
WINDOWS = [
    {"name": "night", "days": ["mon", "tue", "wed", "thu", "fri"], "start": "20:00", "end": "08:00",
     "timezone": "Europe/Berlin"},
    {"name": "lunch", "days": ["mon", "tue", "wed", "thu", "fri"], "start": "12:00", "end": "13:00",
     "timezone": "Europe/Berlin"},
]
#: team -> window (None: the base) -> instances per type
VALUES = {
    "training": {None: {P4D: 2, G5: 4}, "night": {P4D: 6, G5: 0}, "lunch": {P4D: 3, G5: 4}},
    "research": {None: {P4D: 6, G5: 0}, "night": {P4D: 2, G5: 4}, "lunch": {P4D: 5, G5: 0}},
}
BORROW = {"training": {None: 50, "night": 100}, "research": {None: 100, "night": 0}}
QUOTA_IDS = {"training": "trainquota01", "research": "researchqt01"}


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch):
    import time as _time

    monkeypatch.setattr(_time, "sleep", lambda s: None)  # botocore's retry backoff


def _utc(*args: int) -> float:
    return datetime(*args, tzinfo=timezone.utc).timestamp()  # type: ignore[misc]


def _batch_values(team: str, window: str | None) -> dict:
    g = VALUES[team][window]
    borrow = BORROW[team].get(window, BORROW[team][None])
    return {"capacityLimits": [{"capacityUnit": u, "maxCapacity": n} for u, n in g.items()],
            "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": borrow}}


def _hyperpod_values(team: str, window: str | None) -> dict:
    g = VALUES[team][window]
    borrow = BORROW[team].get(window, BORROW[team][None])
    return {"ComputeQuotaConfig": {
        "ComputeQuotaResources": [{"InstanceType": u, "Count": n} for u, n in g.items()],
        "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": borrow}}}


def _settings(kind: str, ids: dict[str, str]) -> dict:
    values = _batch_values if kind == "batch" else _hyperpod_values
    return {"windows": WINDOWS, "targets": [
        {"kind": kind, "team": team, "id": ids[team], "base": values(team, None),
         "windows": {w: values(team, w) for w in ("night", "lunch")}} for team in VALUES]}


class Batch:
    """A quota-management queue at the base values, and the switcher's settings for it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, at: float) -> None:
        self.clock = Clock(at)
        self.model = QuotaQueueModel(shares={t: dict(VALUES[t][None]) for t in VALUES}, clock=self.clock,
                                     capacity=dict(CAPACITY), borrow_limits={t: BORROW[t][None] for t in VALUES})
        self.sleeps: list[float] = []
        monkeypatch.setenv(h.SETTINGS_ENV, json.dumps(
            _settings("batch", {t: self.model.share_arn(t) for t in VALUES})))
        monkeypatch.setattr(h, "_client", lambda kind: self.model.batch)
        monkeypatch.setattr(h, "_now", self.clock)
        monkeypatch.setattr(h, "_sleep", self.sleeps.append)

    def run(self, event: dict | None = None) -> dict:
        return h.handler(event if event is not None else {"detail-type": "Scheduled Event"})

    def shares(self) -> dict[str, dict[str, float]]:
        return {t: {u: n for u, n in g.items() if n} for t, g in self.model.shares.items()}

    def updates(self) -> list[str]:
        return [self._team(p["quotaShareArn"]) for op, p in self.model.requests if op == "UpdateQuotaShare"]

    @staticmethod
    def _team(arn: str) -> str:
        return arn.rsplit("/", 1)[-1]


class HyperPod:
    """Two compute quotas at the base values, and the switcher's settings for them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, at: float) -> None:
        self.clock = Clock(at)
        self.model = ComputeQuotaModel(
            quotas={QUOTA_IDS[t]: {**_hyperpod_values(t, None)["ComputeQuotaConfig"], "PreemptTeamTasks": "LowerPriority"}
                    for t in VALUES}, capacity=dict(CAPACITY))
        self.sleeps: list[float] = []
        monkeypatch.setenv(h.SETTINGS_ENV, json.dumps(_settings("hyperpod", QUOTA_IDS)))
        monkeypatch.setattr(h, "_client", lambda kind: self.model.client)
        monkeypatch.setattr(h, "_now", self.clock)
        monkeypatch.setattr(h, "_sleep", self.sleeps.append)

    def run(self, event: dict | None = None) -> dict:
        return h.handler(event if event is not None else {"detail-type": "Scheduled Event"})

    def shares(self) -> dict[str, dict[str, float]]:
        return {t: {u: n for u, n in self.model.counts(QUOTA_IDS[t]).items() if n} for t in VALUES}


def _expected(window: str | None) -> dict[str, dict[str, float]]:
    return {t: {u: n for u, n in VALUES[t][window].items() if n} for t in VALUES}


# Monday 1 March 2027: Berlin is at UTC+1, so the night opens at 19:00 UTC and closes
# on Tuesday at 07:00 UTC; lunch is 11:00 to 12:00 UTC.
NIGHT_OPENS = _utc(2027, 3, 1, 19)


@pytest.mark.parametrize("model", [Batch, HyperPod])
def test_a_boundary_puts_every_share_at_the_window_lowering_before_raising(model, monkeypatch):
    q = model(monkeypatch, NIGHT_OPENS)
    result = q.run()
    assert q.shares() == _expected("night")
    assert result["window"] == "night"
    assert q.model.overcommitted == []  # each team lowers one type and raises the other
    assert sorted(result["lowered"]) == ["research", "training"]
    if model is Batch:
        assert q.model.borrow_limits == {"training": 100, "research": 0}
    else:
        config = q.model.quotas[QUOTA_IDS["training"]]
        assert config["ResourceSharingConfig"]["BorrowLimit"] == 100
        assert config["PreemptTeamTasks"] == "LowerPriority"  # what the window does not set stays as read


@pytest.mark.parametrize("model", [Batch, HyperPod])
def test_the_morning_boundary_puts_the_base_back(model, monkeypatch):
    q = model(monkeypatch, NIGHT_OPENS)
    q.run()
    q.clock.t = _utc(2027, 3, 2, 7)  # Tuesday 08:00 in Berlin
    assert q.run()["window"] == "base"
    assert q.shares() == _expected(None)
    assert q.model.overcommitted == []


@pytest.mark.parametrize("model", [Batch, HyperPod])
def test_a_switch_delivered_twice_changes_nothing_the_second_time(model, monkeypatch):
    q = model(monkeypatch, NIGHT_OPENS)
    q.run()
    writes = [op for op, _ in q.model.requests if op.startswith("Update")]
    second = q.run()
    assert [op for op, _ in q.model.requests if op.startswith("Update")] == writes
    assert second["lowered"] == second["raised"] == []
    assert sorted(second["unchanged"]) == ["research", "training"]
    assert q.shares() == _expected("night")


@pytest.mark.parametrize("model", [Batch, HyperPod])
def test_a_switch_delivered_an_hour_late_applies_the_window_of_its_own_clock(model, monkeypatch):
    # The lunch window's opening (11:00 UTC) is delivered at 12:00 UTC, when lunch has closed:
    # the shares stay at the base, whatever the event says.
    q = model(monkeypatch, _utc(2027, 3, 1, 12))
    result = q.run({"detail-type": "Scheduled Event", "time": "2027-03-01T11:00:00Z",
                    "detail": {"window": "lunch"}})
    assert result["window"] == "base"
    assert [op for op, _ in q.model.requests if op.startswith("Update")] == []
    assert q.shares() == _expected(None)
    # The night's opening an hour late: the night is still open, and applied.
    q.clock.t = NIGHT_OPENS + 3600
    assert q.run({"time": "2027-03-01T19:00:00Z"})["window"] == "night"
    assert q.shares() == _expected("night")


@pytest.mark.parametrize("model", [Batch, HyperPod])
def test_a_deploy_in_the_middle_of_a_window_sets_the_window_in_force(model, monkeypatch):
    # Wednesday 23:30 in Berlin: CloudFormation has just written the base back.
    q = model(monkeypatch, _utc(2027, 3, 3, 22, 30))
    for request in ("Create", "Update"):
        answer = q.run({"RequestType": request, "ResourceProperties": {"Deployed": "1"}})
        assert answer["PhysicalResourceId"] == h.PHYSICAL_ID
        assert answer["Data"] == {"Window": "night"}
        assert q.shares() == _expected("night")
    before = len(q.model.requests)
    assert q.run({"RequestType": "Delete"})["PhysicalResourceId"] == h.PHYSICAL_ID
    assert len(q.model.requests) == before  # the stack and its shares are going away


@pytest.mark.parametrize("model", [Batch, HyperPod])
def test_a_switch_that_fails_half_way_raises_and_a_rerun_ends_right(model, monkeypatch):
    q = model(monkeypatch, NIGHT_OPENS)
    # The first update (training's lowering) goes through; every try of the second fails
    # (botocore's 3 attempts in each of the switcher's tries).
    op = "UpdateQuotaShare" if model is Batch else "UpdateComputeQuota"
    q.model.script[op] = [None] + ["error"] * (3 * h.ATTEMPTS)
    with pytest.raises(h.SwitchFailed, match=r"quota window 'night' not applied for research"):
        q.run()
    assert q.shares() == {"training": {P4D: 2}, "research": {P4D: 6}}  # research's lowering failed: no raise
    assert q.model.overcommitted == []
    assert q.sleeps == [h.BACKOFF_SECONDS * 2 ** k for k in range(h.ATTEMPTS - 1)]
    q.run()  # the retry of the invocation
    assert q.shares() == _expected("night")
    assert q.model.overcommitted == []


def test_an_update_applied_whose_answer_is_lost_is_not_written_again(monkeypatch):
    q = Batch(monkeypatch, NIGHT_OPENS)
    # Training's lowering is applied and its answer lost at each of botocore's 3 attempts.
    q.model.script["UpdateQuotaShare"] = ["error_after"] * 3
    result = q.run()
    assert q.shares() == _expected("night")
    # The switcher's next try reads it done and writes it no more.
    assert q.updates() == ["training"] * 3 + ["research", "training", "research"]
    assert sorted(result["lowered"]) == ["research", "training"]


def test_a_version_conflict_is_read_again_and_retried_at_once(monkeypatch):
    q = HyperPod(monkeypatch, NIGHT_OPENS)
    q.model.script["UpdateComputeQuota"] = ["conflict", None, "conflict"]
    q.run()
    assert q.shares() == _expected("night")
    assert q.sleeps == []  # a conflict is another writer's change: read and retry at once
    reads = {p["ComputeQuotaId"]: 0 for _, p in q.model.requests}
    for op, p in q.model.requests:
        if op == "DescribeComputeQuota":
            reads[p["ComputeQuotaId"]] += 1
    assert sum(reads.values()) == 2 * 2 + 2  # each quota read in each phase, and again after a conflict
    ok = [p for op, p in q.model.requests if op == "UpdateComputeQuota"]
    assert all(isinstance(p["TargetVersion"], int) for p in ok)


@pytest.mark.parametrize("model", [Batch, HyperPod])
def test_when_a_share_cannot_be_switched_the_invocation_fails_and_logs_it(model, monkeypatch, capsys):
    q = model(monkeypatch, NIGHT_OPENS)
    op = "UpdateQuotaShare" if model is Batch else "UpdateComputeQuota"
    q.model.script[op] = ["error"] * 100
    with pytest.raises(h.SwitchFailed) as failure:
        q.run()
    assert "research" in str(failure.value) and "training" in str(failure.value)
    assert q.shares() == _expected(None)  # nothing raised after a lowering failed
    errors = [json.loads(line) for line in capsys.readouterr().out.splitlines()
              if '"level":"ERROR"' in line]
    assert {e["team"] for e in errors} == {"research", "training"}
    assert all(e["event"] == "switch_failed" and e["window"] == "night" for e in errors)


# Daylight saving in Berlin: on Sunday 28 March 2027 clocks go from 02:00 to 03:00 (UTC+1 to
# UTC+2); on Sunday 31 October 2027 from 03:00 back to 02:00.
@pytest.mark.parametrize(("at", "window"), [
    (_utc(2027, 3, 26, 18, 30), None),       # Friday before: 19:30 in Berlin
    (_utc(2027, 3, 26, 19), "night"),        # Friday 20:00 (UTC+1)
    (_utc(2027, 3, 29, 6, 30), None),        # Monday 08:30 (UTC+2): the weekend's base
    (_utc(2027, 3, 29, 18), "night"),        # Monday 20:00 (UTC+2): an hour earlier in UTC
    (_utc(2027, 3, 30, 5, 30), "night"),     # Tuesday 07:30 (UTC+2)
    (_utc(2027, 3, 30, 6), None),            # Tuesday 08:00 (UTC+2)
    (_utc(2027, 3, 30, 10), "lunch"),        # Tuesday 12:00 (UTC+2)
    (_utc(2027, 10, 29, 18, 30), "night"),   # Friday 29 October 20:30 (UTC+2)
    (_utc(2027, 11, 1, 18, 30), None),       # Monday 1 November 19:30 (UTC+1)
    (_utc(2027, 11, 1, 19), "night"),        # Monday 20:00 (UTC+1)
    (_utc(2027, 11, 2, 6, 30), "night"),     # Tuesday 07:30 (UTC+1)
    (_utc(2027, 11, 2, 11, 30), "lunch"),    # Tuesday 12:30 (UTC+1)
])
@pytest.mark.parametrize("model", [Batch, HyperPod])
def test_daylight_saving_moves_the_boundaries_with_berlin(model, at, window, monkeypatch):
    q = model(monkeypatch, at)
    # Start from the other side of the boundary, as the previous switch left it.
    q.run()
    assert q.shares() == _expected(window)
    assert q.model.overcommitted == []


def test_a_week_of_boundaries_across_the_spring_change_ends_right_at_each(monkeypatch):
    from cdk_gpu_share.core.configuration.windows import Window, boundaries

    q = Batch(monkeypatch, _utc(2027, 3, 25))
    windows = [Window(**w) for w in WINDOWS]
    start, end = datetime(2027, 3, 25, tzinfo=timezone.utc), datetime(2027, 4, 1, tzinfo=timezone.utc)
    seen = []
    for t, window in boundaries(windows, start, end):
        q.clock.t = t.timestamp()
        q.run()
        seen.append((t.strftime("%a %H:%M"), window.name if window else None))
        assert q.shares() == _expected(window.name if window else None)
    assert q.model.overcommitted == []
    # The night opens at 19:00 UTC before the change and 18:00 UTC after it.
    assert ("Fri 19:00", "night") in seen and ("Mon 18:00", "night") in seen


def test_settings_of_an_unknown_kind_are_refused_naming_it():
    with pytest.raises(ValueError, match="kind 'kueue' is not one of batch, hyperpod"):
        h.read_settings({"windows": [], "targets": [{"kind": "kueue", "team": "a", "id": "x", "base": {}}]})
