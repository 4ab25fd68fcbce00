"""``simulate --compare`` with groups: the tree and its flat compilation side by side, per team and
per group, in the table, the JSON and the report (the compilation gap)."""

from __future__ import annotations

import json

import pytest

from cdk_gpu_share.cli import main

ARN = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"
IT = "ml.g5.xlarge"


def organisation(groups: bool = True) -> dict:
    """On 10 GPUs: research (its own pool 2) over nlp (team-a, 2) and team-b (1); team-c (3) at the
    root. Compiled, research's pool goes first to nlp, the larger child, but team-a's own cap
    (HyperPod's default 50 %) lets it use 3 in all: team-a 3, team-b 2."""
    teams = [{"name": "team-a", "group": "nlp", "guarantee": {IT: 2}},
             {"name": "team-b", "group": "research", "guarantee": {IT: 1}, "borrow_limit_percent": 200},
             {"name": "team-c", "guarantee": {IT: 3}, "borrow_limit_percent": 200}]
    raw = {"hyperpod": {"capacity": {IT: 10}, "cluster_arn": ARN}, "teams": teams}
    if groups:
        raw["groups"] = [{"name": "research", "guarantee": {IT: 2}, "borrow_limit": {IT: 2}},
                         {"name": "nlp", "parent": "research"}]
    else:
        for t in teams:
            t.pop("group", None)
    return raw


#: team-c borrows 6 GPUs for 1000 s; at 10 s team-b asks 3. In the tree they are within research's
#: quota (its 1 and the idle pool), so the planner's first pass (60 s) stops team-c's job: team-b waits
#: 50 s, team-c loses 60 s of 9 GPUs. Compiled, team-b's 3 are 1 beyond its guarantee of 2: borrowing, it
#: reclaims nothing and waits for team-c's job to end, 990 s. The split short-changes team-b.
TRACE = "job_id,team,submit_time,duration_s,gpus\nc1,team-c,0,1000,9\nb1,team-b,10,100,3\n"


@pytest.fixture
def files(tmp_path):
    def write(groups: bool = True) -> list[str]:
        config, trace = tmp_path / "org.json", tmp_path / "jobs.csv"
        config.write_text(json.dumps(organisation(groups)))
        trace.write_text(TRACE)
        return ["simulate", "--config", str(config), "--trace", str(trace)]
    return write


def _figures(d: dict, kind: str, name: str) -> tuple:
    f = d[kind][name]
    return f["jobs"], f["wait_p50_s"], f["wait_p99_s"], f["preempted"], f["lost_gpu_seconds"]


def test_compare_runs_the_tree_and_its_compilation(files, capsys):
    assert main([*files(), "--compare", "--json"]) == 0
    gap = json.loads(capsys.readouterr().out)["hierarchy"]
    assert set(gap) == {"tree", "compiled"}
    tree, compiled = gap["tree"], gap["compiled"]
    assert tree["mode"] == compiled["mode"] == "share+reclaim"
    assert _figures(tree, "teams", "team-b") == (1, 50, 50, 0, 0.0)
    assert _figures(compiled, "teams", "team-b") == (1, 990, 990, 0, 0.0)
    assert _figures(tree, "teams", "team-c") == (1, 160, 160, 1, 540.0)
    assert _figures(compiled, "teams", "team-c") == (1, 0, 0, 0, 0.0)
    # The compiled run has no groups of its own: its group figures are over the tree's teams.
    assert _figures(tree, "groups", "research") == (1, 50, 50, 0, 0.0)
    assert _figures(compiled, "groups", "research") == (1, 990, 990, 0, 0.0)
    assert _figures(compiled, "groups", "nlp") == (0, 0, 0, 0, 0.0)
    assert (tree["preemptions"], compiled["preemptions"]) == (1, 0)


def test_the_gap_table_in_text(files, capsys):
    assert main([*files(), "--compare"]) == 0
    out = capsys.readouterr().out
    gap = out[out.index("compilation gap (share+reclaim)"):].splitlines()
    rows = [line.split() for line in gap[3:]]
    assert rows[3:6] == [["team-b", "tree", "50s", "50s", "50s", "0", "0.0"],
                         ["compiled", "16m", "16m", "16m", "0", "0.0"],
                         ["gap", "+16m", "+16m", "+16m", "0", "0.0"]]
    assert rows[6:9] == [["team-c", "tree", "3m", "3m", "3m", "1", "0.1"],
                         ["compiled", "0s", "0s", "0s", "0", "0.0"],
                         ["gap", "-3m", "-3m", "-3m", "-1", "-0.1"]]
    assert rows[9][:3] == ["research/", "tree", "50s"] and rows[12][:3] == ["nlp/", "tree", "0s"]


def test_one_run_shows_the_groups_in_its_table(files, capsys):
    assert main([*files(), "--mode", "share+reclaim", "--hierarchy", "tree"]) == 0
    out = capsys.readouterr().out
    assert "research/     1       50s  50s  50s" in out
    assert out.rstrip().endswith("group/: over the jobs of every team below the group")


def test_without_groups_nothing_changes(files, capsys):
    assert main([*files(groups=False), "--compare", "--json"]) == 0
    assert "hierarchy" not in json.loads(capsys.readouterr().out)
    assert main([*files(groups=False), "--compare"]) == 0
    assert "compilation gap" not in capsys.readouterr().out
    assert main([*files(groups=False), "--mode", "share"]) == 0
    assert "group/" not in capsys.readouterr().out


def test_the_report_shows_the_gap(files, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "report.html"
    assert main([*files(), "--report", str(out)]) == 0
    page = out.read_text()
    section = page[page.index("<h2>Compilation gap</h2>"):page.index("<h2>Usage over time</h2>")]
    assert "<th>team-b</th><td>tree</td><td>50s</td>" in section.replace("\n", "")
    assert "<td>gap</td><td>+16m</td>" in section.replace("\n", "")
    assert 'alt="compilation gap per team: wait p95 and preemptions, tree against compiled"' in section
    assert section.count("data:image/png;base64,") == 1


def test_the_report_without_groups_has_no_gap(files, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "report.html"
    assert main([*files(groups=False), "--report", str(out)]) == 0
    page = out.read_text()
    assert "Compilation gap" not in page and page.count("data:image/png;base64,") == 2  # share and share+reclaim (static cannot run c1)


@pytest.mark.parametrize("command", ["simulate", "advise"])
def test_hierarchy_without_groups_is_refused_in_one_line(files, capsys, command):
    args = files(groups=False)
    args[0] = command
    assert main([*args, "--hierarchy", "tree", *(["--mode", "share"] if command == "simulate" else [])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--hierarchy: needs groups, and" in err[0] and "declares none" in err[0]
    assert "drop --hierarchy" in err[0] and "Traceback" not in err[0]


def test_advise_evaluates_the_reading_simulate_replays(files, capsys):
    """The advisor's "input" figures are simulate's on the same config: by default the flat
    configuration HyperPod deploys (team-b waits 990 s there, 50 s in the tree)."""
    args = files()
    regret = {}
    for mode in (None, "tree"):
        flag = [] if mode is None else ["--hierarchy", mode]
        assert main([*args, "--mode", "share+reclaim", "--json", *flag]) == 0
        run = json.loads(capsys.readouterr().out)
        regret[mode] = run["wait_gpu_hours"] + run["lost_gpu_seconds"] / 3600
        assert main(["advise", *args[1:], "--json", "--workers", "1", *flag]) == 0
        advice = json.loads(capsys.readouterr().out)
        assert advice["input"]["regret_gpu_hours"] == pytest.approx(regret[mode])
        assert advice["hierarchy"] == (mode or "compiled")
    assert regret[None] != regret["tree"]
    assert main(["advise", *args[1:], "--workers", "1"]) == 0
    assert "input        " + args[2] + ", backend hyperpod; the tree compiled, as hyperpod deploys it" \
        " (--hierarchy compiled)" in capsys.readouterr().out


def test_advise_does_not_write_an_advice_on_compiled_shares_into_a_config_with_groups(files, capsys, tmp_path):
    args = files()
    assert main(["advise", *args[1:], "--workers", "1", "-o", str(tmp_path / "out.yaml")]) == 2
    err = capsys.readouterr().err
    assert "-o: cannot hold an advice on the flat shares hyperpod deploys" in err and "--hierarchy tree" in err
    assert not (tmp_path / "out.yaml").exists()


def test_every_table_says_how_the_tree_was_read(files, capsys):
    """One mode's table names the reading as --compare's header does, in words that read as a sentence
    after "the tree"; a platform without groups has no such line."""
    args = files()
    assert main([*args, "--mode", "share"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "tree                compiled, as hyperpod deploys it (--hierarchy compiled)"
    assert main([*args, "--mode", "share", "--hierarchy", "tree"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "tree                by its own rules (--hierarchy tree)"
    kueue = organisation()
    kueue["kueue"] = {"capacity": {"g5.xlarge": 10}, "eks_cluster_name": "gpu-eks",
                      "kubectl_role_arn": "arn:aws:iam::111122223333:role/gpu-eks-kubectl"}
    del kueue["hyperpod"]
    for t in kueue["teams"]:
        t["guarantee"] = {"g5.xlarge": t["guarantee"][IT]}
    kueue["groups"][0] = {"name": "research", "guarantee": {"g5.xlarge": 2}, "borrow_limit": {"g5.xlarge": 2}}
    config = args[2].replace("org.json", "kueue.json")
    with open(config, "w") as f:
        json.dump(kueue, f)
    assert main(["simulate", "--config", config, *args[3:], "--compare"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header.endswith("; the tree by its own rules, as kueue applies them (--hierarchy tree)"), header
    flat = files(groups=False)
    assert main([*flat, "--mode", "share"]) == 0
    assert not any(line.startswith("tree ") for line in capsys.readouterr().out.splitlines())
