"""The reclaim Lambda with time windows in its settings (as the config bakes them): every cycle
plans with the values in force at its own clock. Inside the night window a team's raised
guarantee reclaims and the other team's lowered one makes its running jobs victims; outside it,
the same queue stops nothing. ``reclaim_after_seconds`` counts from the later of a job's
submission and the rise of its team's guarantee, and the window follows its zone's daylight
saving."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
import yaml

from cdk_gpu_share.aws import batch_reader as br
from cdk_gpu_share.core.configuration.parse import parse_config
from cdk_gpu_share.lambdas.reclaim import handler as h
from tests.batch_model import BatchModel, lambda_context, reclaim_lambda_model
from tests.builders import FAIRSHARE_NIGHT

CYCLE = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}


def settings(reclaim_after: int = 60, night: dict | None = None) -> dict:
    raw = yaml.safe_load(FAIRSHARE_NIGHT)
    raw["fairshare"]["reclaim"]["reclaim_after_seconds"] = reclaim_after
    if night is not None:
        raw["teams"][0]["windows"]["night"] = night
    return br.settings_from_config(parse_config(raw))


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch):
    monkeypatch.setattr(br.time, "sleep", lambda s: None)


def fleet_full(model: BatchModel, *, submitted: float) -> tuple[str, str]:
    """research runs two GPUs, nightly one, and nightly waits for one more, submitted at
    ``submitted``. Returns research's newest job and nightly's waiting one."""
    now = model.clock()
    model.add_job("research", "RUNNING", started=now - 7200)
    newest = model.add_job("research", "RUNNING", started=now - 5400)["jobId"]
    model.add_job("nightly", "RUNNING", started=now - 9000)
    waiting = model.add_job("nightly", "RUNNABLE", created=submitted)["jobId"]
    return newest, waiting


def cycle(monkeypatch, when: float, *, submitted: float | None = None, **kw) -> tuple[dict, str, str]:
    model = reclaim_lambda_model(monkeypatch, settings(**kw))
    model.clock.t = when
    newest, waiting = fleet_full(model, submitted=when - 600 if submitted is None else submitted)
    return h.handler(CYCLE, lambda_context(clock=model.clock)), newest, waiting


# Monday 2026-01-05, winter: Berlin is UTC+1, the night opens at 19:00 UTC and closes at 07:00 UTC.


def test_outside_the_window_the_base_holds_and_nothing_is_stopped(monkeypatch):
    result, _, _ = cycle(monkeypatch, at("2026-01-05T12:00:00"))
    assert result["planned"] == [] and result["stopped"] == []


def test_inside_the_window_the_raised_guarantee_reclaims_from_the_team_that_now_borrows(monkeypatch):
    result, newest, _ = cycle(monkeypatch, at("2026-01-06T02:00:00"))
    assert result["stopped"] == [newest]


def test_the_plan_log_line_names_the_window_in_force(monkeypatch, capsys):
    cycle(monkeypatch, at("2026-01-06T02:00:00"))
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"event":"plan"' in line]
    assert [line["window"] for line in lines] == ["night"]


def test_at_the_boundary_a_raised_guarantee_reclaims_at_once(monkeypatch):
    before, _, _ = cycle(monkeypatch, at("2026-01-05T18:59:59"), reclaim_after=0)
    assert before["stopped"] == []
    result, newest, _ = cycle(monkeypatch, at("2026-01-05T19:00:00"), reclaim_after=0)
    assert result["stopped"] == [newest]


def test_reclaim_after_counts_from_the_rise_not_from_a_submission_before_it(monkeypatch):
    # Submitted an hour before the night: without the rise it would have waited long enough.
    early = at("2026-01-05T18:00:00")
    for when, stopped in (("2026-01-05T19:00:00", False), ("2026-01-05T19:00:59", False),
                          ("2026-01-05T19:01:00", True)):
        result, newest, _ = cycle(monkeypatch, at(when), submitted=early)
        assert result["stopped"] == ([newest] if stopped else []), when


def test_reclaim_after_counts_from_a_submission_after_the_rise(monkeypatch):
    submitted = at("2026-01-05T21:00:00")
    waited, newest, _ = cycle(monkeypatch, submitted + 59, submitted=submitted)
    assert waited["stopped"] == []
    result, newest, _ = cycle(monkeypatch, submitted + 60, submitted=submitted)
    assert result["stopped"] == [newest]


def test_at_the_boundary_a_lowered_guarantee_makes_running_jobs_victims(monkeypatch):
    # At night research keeps one GPU and may borrow none: its second running job goes at once,
    # although nobody waits for it.
    night = {"guarantee": {"g5.xlarge": 1}, "borrow_limit_percent": 0}
    for when, stopped in (("2026-01-05T18:59:59", False), ("2026-01-05T19:00:00", True)):
        model = reclaim_lambda_model(monkeypatch, settings(night=night))
        model.clock.t = at(when)
        model.add_job("research", "RUNNING", started=model.clock() - 7200)
        newest = model.add_job("research", "RUNNING", started=model.clock() - 5400)["jobId"]
        result = h.handler(CYCLE, lambda_context(clock=model.clock))
        assert result["stopped"] == ([newest] if stopped else []), when


def test_the_base_comes_back_when_the_window_closes(monkeypatch):
    # Tuesday 07:00 UTC is 08:00 in Berlin: the night is over.
    before, newest, _ = cycle(monkeypatch, at("2026-01-06T06:59:59"))
    assert before["stopped"] == [newest]
    after, _, _ = cycle(monkeypatch, at("2026-01-06T07:00:00"))
    assert after["stopped"] == []


def test_the_window_follows_daylight_saving_in_its_zone(monkeypatch):
    # Berlin moves to summer time on Sunday 2026-03-29: the next Monday's night opens at 18:00
    # UTC, an hour earlier than the Monday before.
    winter, _, _ = cycle(monkeypatch, at("2026-03-23T18:30:00"), reclaim_after=0)
    assert winter["stopped"] == []
    summer, newest, _ = cycle(monkeypatch, at("2026-03-30T18:30:00"), reclaim_after=0)
    assert summer["stopped"] == [newest]


def test_across_daylight_saving_reclaim_after_counts_from_the_summer_rise(monkeypatch):
    early = at("2026-03-30T17:00:00")
    waiting, _, _ = cycle(monkeypatch, at("2026-03-30T18:00:59"), submitted=early)
    assert waiting["stopped"] == []
    result, newest, _ = cycle(monkeypatch, at("2026-03-30T18:01:00"), submitted=early)
    assert result["stopped"] == [newest]


def test_in_force_reads_the_window_and_the_rise_at_its_clock():
    s = settings()
    night = br.in_force(s, at("2026-01-06T02:00:00"))
    assert night.window == "night"
    assert {t["name"]: t["guarantee"]["gpu"] for t in night.settings["teams"]} == {"research": 1, "nightly": 2}
    # research's last rise: when Friday's night closed, Saturday 08:00 in Berlin.
    assert night.rises == {"nightly": at("2026-01-05T19:00:00"), "research": at("2026-01-03T07:00:00")}
    day = br.in_force(s, at("2026-01-06T12:00:00"))
    assert day.window is None
    assert {t["name"]: t["guarantee"]["gpu"] for t in day.settings["teams"]} == {"research": 2, "nightly": 1}
    # research's guarantee rose when the night closed at 07:00 UTC.
    assert day.rises == {"nightly": at("2026-01-05T19:00:00"), "research": at("2026-01-06T07:00:00")}
    assert all("windows" not in t for t in day.settings["teams"]) and "windows" not in day.settings


def test_settings_without_windows_are_read_as_they_are():
    raw = yaml.safe_load(FAIRSHARE_NIGHT)
    del raw["windows"]
    for team in raw["teams"]:
        del team["windows"]
    s = br.settings_from_config(parse_config(raw))
    assert "windows" not in s and all("windows" not in t for t in s["teams"])
    force = br.in_force(s, at("2026-01-06T02:00:00"))
    assert force.settings == s and force.window is None and force.rises == {}


def test_with_groups_a_groups_quota_is_the_sum_of_its_teams_guarantees_in_force(monkeypatch):
    # research alone in a group that may not borrow: by day the group's quota is research's 2 GPUs,
    # at night its 1, so the second of research's running jobs goes, though research itself may
    # still borrow one GPU.
    raw = yaml.safe_load(FAIRSHARE_NIGHT)
    raw["groups"] = [{"name": "science", "borrow_limit": {"g5.xlarge": 0}}, {"name": "product"}]
    raw["teams"][0]["group"], raw["teams"][1]["group"] = "science", "product"
    tree = br.settings_from_config(parse_config(raw))
    for when, stopped in (("2026-01-05T18:59:59", False), ("2026-01-05T19:00:00", True)):
        model = reclaim_lambda_model(monkeypatch, tree)
        model.clock.t = at(when)
        model.add_job("research", "RUNNING", started=model.clock() - 7200)
        newest = model.add_job("research", "RUNNING", started=model.clock() - 5400)["jobId"]
        result = h.handler(CYCLE, lambda_context(clock=model.clock))
        assert result["stopped"] == ([newest] if stopped else []), when
