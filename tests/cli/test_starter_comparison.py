"""The first comparison a new user runs (the README's quick start): `gpu-share init`, `trace
sample`, `simulate --compare`. Reclaim exists to give a lender its guarantee back: with it, no
team waits longer for its own guarantee than without it."""

from __future__ import annotations

import json

from cdk_gpu_share.cli import main


def test_with_reclaim_no_starter_team_waits_longer_for_its_own_guarantee(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["init"]) == 0
    assert main(["trace", "sample", "-o", "jobs.csv"]) == 0
    capsys.readouterr()
    assert main(["simulate", "platform.yaml", "--trace", "jobs.csv", "--compare", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    share, reclaim = results["share"], results["share+reclaim"]
    assert reclaim["preemptions"] > 0  # reclaim did stop borrowed work on this trace
    assert set(share["teams"]) == set(reclaim["teams"]) and len(share["teams"]) >= 2
    for name, team in share["teams"].items():
        assert reclaim["teams"][name]["reclaim_wait_p99_s"] <= team["reclaim_wait_p99_s"], name
    # With reclaim, what a team is owed comes back within a few planner periods (60 s each).
    assert all(t["reclaim_wait_p99_s"] <= 180 for t in reclaim["teams"].values())
