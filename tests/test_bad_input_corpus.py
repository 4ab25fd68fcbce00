"""The bad-input corpus: every input a user can get wrong is refused cleanly.

Each case feeds one bad input to `gpu-share validate`, the synth path (app.py),
`reclaim plan`, `simulate`, `trace convert`, `mig check` or the Python API, and asserts:
exit 2 (or ConfigError), no traceback, the field or row named in the message, a
bounded message, and a bounded time. The time bound is generous (tests must not be
timing-flaky on a shared machine): it catches a hang or a quadratic blow-up, not a
slow run. Most cases call ``main(argv)`` in process (fast, and visible to mutation
testing); a handful run the real command end to end.
"""

from __future__ import annotations

import copy
import json
import os
import runpy
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdk_gpu_share.cli import main
from cdk_gpu_share.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
# Time bounds catch a hang or a quadratic check, never a slow run on a loaded machine: in
# process the CPU time of this process is measured (a load of 15 on 2 cores tripled the wall
# time of the 5,000-team case, not its CPU time); where the work runs in a child process (the
# jsii kernel of a synth, a real command) only wall time exists, so that bound is wider.
SECONDS = 20.0  # CPU seconds, in process
WALL_SECONDS = 120.0  # wall seconds, child processes involved
MAX_MESSAGE = 20_000  # characters: a message is read by a person

PLATFORM = yaml.safe_load((ROOT / "platform.yaml").read_text())
HYPERPOD = yaml.safe_load((ROOT / "examples" / "hyperpod.yaml").read_text())
INFERENCE = yaml.safe_load((ROOT / "examples" / "inference.yaml").read_text())


def edited(base: dict, fn: Callable[[dict], Any]) -> str:
    raw = copy.deepcopy(base)
    fn(raw)
    return yaml.safe_dump(raw, sort_keys=False)


def setter(path: str, value: Any) -> Callable[[dict], None]:
    """An edit that sets ``a.b[0].c`` (list indexes as numbers) to ``value``."""

    def fn(raw: dict) -> None:
        parts = [int(p) if p.isdigit() else p for p in path.split("/")]
        target = raw
        for p in parts[:-1]:
            target = target[p]
        target[parts[-1]] = value

    return fn


def deleter(path: str) -> Callable[[dict], None]:
    def fn(raw: dict) -> None:
        parts = [int(p) if p.isdigit() else p for p in path.split("/")]
        target = raw
        for p in parts[:-1]:
            target = target[p]
        del target[parts[-1]]

    return fn


def run_cli(capsys, argv: list[str]) -> tuple[int, str, float]:
    start = time.process_time()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    elapsed = time.process_time() - start
    out, err = capsys.readouterr()
    return code, err, elapsed


def assert_refused(code: int, err: str, elapsed: float, needle: str, limit: float = SECONDS) -> None:
    assert code == 2, err
    assert "Traceback" not in err, err
    assert needle in err, f"{needle!r} not in {err[:2000]!r}"
    assert len(err) < MAX_MESSAGE, len(err)
    assert elapsed < limit, elapsed


# ---------------------------------------------------------------------------
# validate: YAML files (text) -> the field or line named

T = PLATFORM  # shorter case lines
#: A fair-share queue name that leaves a 63-character team too little room in its job definition names.
LONG_QUEUE = {**PLATFORM, "fairshare": {**PLATFORM["fairshare"], "queue_name": "q" * 70}}


def deep(n: int) -> str:
    return "teams: " + "[" * n + "]" * n + "\n"


def alias_bomb() -> str:
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    prev = "a"
    for c in "bcdefghi":
        text += f"{c}: &{c} [" + ",".join([f"*{prev}"] * 9) + "]\n"
        prev = c
    return text + "teams: *i\n"


BASE_TEXT = (ROOT / "platform.yaml").read_text()

VALIDATE_TEXT: list[tuple[str, str, str]] = [
    # (id, file text, needle in the message)
    ("empty file", "", "the file is empty"),
    ("only comments", "# nothing here\n", "the file is empty"),
    ("only a document marker", "---\n", "config"),
    ("yaml syntax: bad indent", "teams:\n  - name: a\n   guarantee: {}\n", "line 3, column 4"),
    ("yaml syntax: unclosed flow", "teams: [\n", "line 2"),
    ("yaml syntax: unclosed quote", 'platform: {name: "abc}\n', "line 1"),
    ("yaml syntax: tab indent", "teams:\n\t- name: a\n", "line 2"),
    ("two documents", BASE_TEXT + "---\nteams: []\n", "more than one YAML document"),
    ("a list, not a mapping", "- a\n- b\n", "config"),
    ("a scalar, not a mapping", "hello\n", "config"),
    ("deep flow nesting (5000)", deep(5000), "nested more than 64 levels"),
    ("deep block nesting (300)", "".join("  " * i + "k:\n" for i in range(300)), "nested more than 64 levels"),
    ("deep nesting at 65", deep(65), "nested more than 64"),
    ("alias bomb", alias_bomb(), "expands to more than"),
    ("duplicate top-level teams", "teams:\n  - {name: x, guarantee: {g5.xlarge: 1}}\n" + BASE_TEXT, "repeats the key 'teams'"),
    ("duplicate sharing in a team", BASE_TEXT.replace("    sharing: lend_and_borrow\n", "    sharing: lend_and_borrow\n    sharing: reserve\n", 1),
     "repeats the key 'sharing'"),
    ("duplicate capacity type", BASE_TEXT.replace("    ml.g5.xlarge: 3\n", "    ml.g5.xlarge: 3\n    ml.g5.xlarge: 4\n"),
     "repeats the key 'ml.g5.xlarge'"),
    ("duplicate key in flow mapping", "platform: {name: a, name: b}\nteams: []\n", "repeats the key 'name'"),
    ("5001-digit guarantee", BASE_TEXT.replace("ml.g5.xlarge: 1\n", "ml.g5.xlarge: " + "1" * 5001 + "\n", 1),
     "teams[0] (team-a).guarantee.ml.g5.xlarge"),
    ("401-digit capacity", BASE_TEXT.replace("ml.g5.xlarge: 3", "ml.g5.xlarge: " + "9" * 401), "batch_quota.capacity.ml.g5.xlarge"),
    ("1e999999999 guarantee", BASE_TEXT.replace("ml.g5.xlarge: 1\n", "ml.g5.xlarge: 1.0e999999999\n", 1),
     "teams[0] (team-a).guarantee.ml.g5.xlarge"),
    (".inf guarantee", BASE_TEXT.replace("ml.g5.xlarge: 1\n", "ml.g5.xlarge: .inf\n", 1), "finite"),
    (".nan guarantee", BASE_TEXT.replace("ml.g5.xlarge: 1\n", "ml.g5.xlarge: .nan\n", 1), "NaN"),
    ("null guarantee", BASE_TEXT.replace("ml.g5.xlarge: 1\n", "ml.g5.xlarge:\n", 1), "teams[0] (team-a).guarantee.ml.g5.xlarge: is empty"),
    ("huge string value", BASE_TEXT.replace("description: Research", "description: " + "x" * 200_000), "teams[0] (team-a).description"),
    ("oversized file", "teams:\n" + "".join(f"  - name: t{i}\n    guarantee: {{g5.xlarge: 1}}\n" for i in range(100_000)),
     "bytes, above the"),
    ("binary junk", "\x00\x01\x02", "line 1"),
    ("merge key to a scalar", "a: &a 1\nteams:\n  - <<: *a\n", "line"),
    ("unknown tag", "teams: !!python/object:os.system echo\n", "line 1"),
    ("key that is a list", "? [a, b]\n: 1\nteams: []\n", "config"),
]


@pytest.mark.parametrize(("case", "text", "needle"), VALIDATE_TEXT, ids=[c[0] for c in VALIDATE_TEXT])
def test_validate_refuses_bad_yaml_text(capsys, tmp_path, case, text, needle):
    path = tmp_path / "platform.yaml"
    path.write_text(text, encoding="utf-8")
    assert_refused(*run_cli(capsys, ["validate", str(path)]), needle)


def test_validate_refuses_a_file_that_is_not_utf8(capsys, tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("platform: {name: caf\xe9}\n".encode("latin-1"))
    assert_refused(*run_cli(capsys, ["validate", str(path)]), "not UTF-8")


def test_validate_refuses_a_missing_file_and_a_folder(capsys, tmp_path):
    assert_refused(*run_cli(capsys, ["validate", str(tmp_path / "nope.yaml")]), "file not found")
    assert_refused(*run_cli(capsys, ["validate", str(tmp_path)]), "cannot be read")


# validate: structured edits of the shipped configs -> the field named

VALIDATE_EDITS: list[tuple[str, dict, Callable[[dict], Any], str]] = [
    # team names every derived name must hold
    ("team_b underscore", T, setter("teams/1/name", "team_b"), "teams[1] (team_b).name"),
    ("Team_A underscore", T, setter("teams/0/name", "Team_A"), "teams[0] (Team_A).name"),
    ("name with space", T, setter("teams/0/name", "team a"), "teams[0] (team a).name"),
    ("name with dot", T, setter("teams/0/name", "team.a"), "teams[0] (team.a).name"),
    ("name with slash", T, setter("teams/0/name", "team/a"), "teams[0] (team/a).name"),
    ("name with unicode", T, setter("teams/0/name", "t\u00e9am"), "teams[0] (t\u00e9am).name"),
    ("128-char name", T, setter("teams/0/name", "a" * 128), "DNS-1123 label"),
    ("64-char name", T, setter("teams/0/name", "a" * 64), "at most 63 characters"),
    ("upper-case name", T, setter("teams/0/name", "TeamD"), "write 'teamd'"),
    ("name too long for job definitions", LONG_QUEUE, setter("teams/0/name", "a" * 63), "job definition names"),
    ("empty name", T, setter("teams/0/name", ""), "teams[0].name"),
    ("numeric name", T, setter("teams/0/name", 7), "teams[0].name"),
    ("missing name", T, deleter("teams/0/name"), "teams[0].name"),
    ("duplicate name", T, setter("teams/1/name", "team-a"), "teams[1] (team-a).name"),
    ("share identifiers collide", T, setter("teams/1/name", "teama"), "fair-share identifier"),
    ("hyperpod upper case", HYPERPOD, setter("teams/0/name", "Research"), "Kubernetes namespace"),
    ("hyperpod 52 chars", HYPERPOD, setter("teams/0/name", "r" * 52), "hyperpod-ns-"),
    ("hyperpod trailing hyphen", HYPERPOD, setter("teams/0/name", "research-"), "teams[0] (research-).name"),
    # guarantees
    ("guarantee string", T, setter("teams/0/guarantee/ml.g5.xlarge", "one"), "teams[0] (team-a).guarantee.ml.g5.xlarge"),
    ("guarantee negative", T, setter("teams/0/guarantee/ml.g5.xlarge", -1), "must be at least 0"),
    ("guarantee fraction", T, setter("teams/0/guarantee/ml.g5.xlarge", 0.5), "whole number"),
    ("guarantee bool", T, setter("teams/0/guarantee/ml.g5.xlarge", True), "whole number"),
    ("guarantee list", T, setter("teams/0/guarantee/ml.g5.xlarge", [1]), "teams[0] (team-a).guarantee.ml.g5.xlarge"),
    ("guarantee {x: null}", T, setter("teams/0/guarantee", {"ml.g5.xlarge": None}), "is empty"),
    ("guarantee not a mapping", T, setter("teams/0/guarantee", [1, 2]), "teams[0] (team-a).guarantee"),
    ("guarantee empty", T, setter("teams/0/guarantee", {}), "teams[0] (team-a).guarantee"),
    ("guarantee missing", T, deleter("teams/0/guarantee"), "teams[0] (team-a).guarantee"),
    ("guarantee undeclared type", T, setter("teams/0/guarantee/ml.p5.48xlarge", 1), "no backend declares"),
    ("guarantee unknown amount key", HYPERPOD, setter("teams/1/guarantee/ml.p5.48xlarge/gpus", 1), "unknown key"),
    ("guarantee 10**400 vcpu", HYPERPOD, setter("teams/1/guarantee/ml.p5.48xlarge/vcpu", 10**400), "vcpu: is too large"),
    ("guarantee inf memory", HYPERPOD, setter("teams/1/guarantee/ml.p5.48xlarge/memory_gib", float("inf")), "memory_gib"),
    ("guarantee nan vcpu", HYPERPOD, setter("teams/1/guarantee/ml.p5.48xlarge/vcpu", float("nan")), "NaN"),
    ("mig unknown profile", HYPERPOD, setter("teams/2/guarantee/ml.p4d.24xlarge/mig", {"mig-9g.1gb": 1}), "mig.mig-9g.1gb"),
    ("mig count huge", HYPERPOD, setter("teams/2/guarantee/ml.p4d.24xlarge/mig", {"mig-3g.20gb": 10**30}), "too large"),
    ("mig not a mapping", HYPERPOD, setter("teams/2/guarantee/ml.p4d.24xlarge/mig", ["mig-3g.20gb"]), "mig: must be a mapping"),
    ("batch accelerators", T, setter("teams/0/guarantee/ml.g5.xlarge", {"accelerators": 1}), "whole instances"),
    ("batch zero instances", T, setter("teams/0/guarantee/ml.g5.xlarge", 0), "at least 1 instance"),
    # over-commit per resource kind
    ("batch over capacity", T, setter("batch_quota/capacity/ml.g5.xlarge", 2), "batch_quota.capacity.ml.g5.xlarge"),
    ("fairshare over capacity", T, setter("fairshare/capacity/g5.xlarge", 2), "fairshare.capacity.g5.xlarge"),
    ("hyperpod 8+9 accelerators on 2 p5",
     {"teams": [{"name": "a", "guarantee": {"ml.p5.48xlarge": {"accelerators": 8}}},
                {"name": "b", "guarantee": {"ml.p5.48xlarge": {"accelerators": 9}}}],
      "hyperpod": {"cluster_arn": HYPERPOD["hyperpod"]["cluster_arn"], "capacity": {"ml.p5.48xlarge": 2}}},
     lambda r: None, "17 accelerators"),
    ("hyperpod 1 instance + 9 accelerators on 2 p5",
     {"teams": [{"name": "a", "guarantee": {"ml.p5.48xlarge": 1}},
                {"name": "b", "guarantee": {"ml.p5.48xlarge": {"accelerators": 9}}}],
      "hyperpod": {"cluster_arn": HYPERPOD["hyperpod"]["cluster_arn"], "capacity": {"ml.p5.48xlarge": 2}}},
     lambda r: None, "17 accelerators"),
    ("hyperpod vcpu over", HYPERPOD, setter("teams/1/guarantee/ml.p5.48xlarge/vcpu", 10_000), "vcpu"),
    ("hyperpod memory over", HYPERPOD, setter("teams/1/guarantee/ml.p5.48xlarge/memory_gib", 100_000), "memory_gib"),
    ("hyperpod mig slices over", HYPERPOD, setter("teams/2/guarantee/ml.p4d.24xlarge/mig", {"mig-7g.40gb": 9}), "mig slices"),
    # sharing and borrowing
    ("sharing unknown", T, setter("teams/0/sharing", "borrow"), "teams[0] (team-a).sharing"),
    ("sharing a list", T, setter("teams/0/sharing", ["lend"]), "teams[0] (team-a).sharing"),
    ("sharing null", T, setter("teams/0/sharing", None), "teams[0] (team-a).sharing"),
    ("borrow percent -5", T, setter("teams/0/borrow_limit_percent", -5), "borrow_limit_percent"),
    ("borrow percent string", T, setter("teams/0/borrow_limit_percent", "50%"), "borrow_limit_percent"),
    ("borrow percent huge", T, setter("teams/0/borrow_limit_percent", 10**20), "borrow_limit_percent"),
    ("borrow with reserve", T, lambda r: r["teams"][0].update(sharing="reserve"), "never borrows"),
    ("hyperpod percent -1", HYPERPOD, setter("teams/0/borrow_limit_percent", -1), "no -1"),
    ("hyperpod percent 501", HYPERPOD, setter("teams/0/borrow_limit_percent", 501), "500"),
    ("borrow_limit on batch", T, setter("teams/0/borrow_limit", {"ml.g5.xlarge": 1}), "percentage borrow limit"),
    ("borrow_limit undeclared", HYPERPOD, setter("teams/0/borrow_limit", {"ml.p4de.24xlarge": 1}), "borrow_limit.ml.p4de.24xlarge"),
    ("borrow_limit not mapping", HYPERPOD, setter("teams/0/borrow_limit", 8), "teams[0] (research).borrow_limit"),
    ("weight 300", HYPERPOD, setter("teams/0/fair_share_weight", 300), "fair_share_weight"),
    ("weight -1", HYPERPOD, setter("teams/0/fair_share_weight", -1), "fair_share_weight"),
    ("weight float", HYPERPOD, setter("teams/0/fair_share_weight", 1.5), "fair_share_weight"),
    ("preemption string", T, setter("teams/0/in_team_preemption", "yes please"), "in_team_preemption"),
    ("description list", T, setter("teams/0/description", ["a"]), "description"),
    ("description multiline", T, setter("teams/0/description", "a\nb"), "description"),
    ("description 2000 chars", T, setter("teams/0/description", "d" * 2000), "description"),
    ("unknown team key", T, setter("teams/0/sharin", "lend"), "did you mean 'sharing'"),
    ("team not a mapping", T, setter("teams/0", "team-a"), "teams[0]"),
    ("team null", T, setter("teams/0", None), "teams[0]"),
    # top level and sections
    ("teams empty", T, setter("teams", []), "teams"),
    ("teams a mapping", T, setter("teams", {"team-a": {}}), "teams"),
    ("unknown top key", T, setter("fairshar", {}), "did you mean 'fairshare'"),
    ("no backend", T, lambda r: [r.pop(k) for k in ("batch_quota", "fairshare")], "declares no backend"),
    ("platform name bad", T, setter("platform/name", "9lives"), "platform.name"),
    ("platform name long", T, setter("platform/name", "p" * 41), "platform.name"),
    ("platform a list", T, setter("platform", ["x"]), "platform"),
    ("batch capacity zero", T, setter("batch_quota/capacity/ml.g5.xlarge", 0), "batch_quota.capacity.ml.g5.xlarge"),
    ("batch capacity ec2 type", T, setter("batch_quota/capacity", {"g5.xlarge": 3}), "batch_quota.capacity.g5.xlarge"),
    ("batch capacity missing", T, deleter("batch_quota/capacity"), "batch_quota.capacity"),
    ("batch capacity empty", T, setter("batch_quota/capacity", {}), "batch_quota.capacity"),
    ("batch queue name bad", T, setter("batch_quota/queue_name", "my queue"), "batch_quota.queue_name"),
    ("batch priority 1001", T, setter("batch_quota/priority", 1001), "batch_quota.priority"),
    ("batch 21 teams",
     {"teams": [{"name": f"t{i}", "guarantee": {"ml.g5.xlarge": 1}} for i in range(21)],
      "batch_quota": {"capacity": {"ml.g5.xlarge": 21}}}, lambda r: None, "at most 20 quota shares"),
    ("fairshare ml type", T, setter("fairshare/capacity", {"ml.g5.xlarge": 3}), "fairshare.capacity.ml.g5.xlarge"),
    ("fairshare unknown type", T, setter("fairshare/capacity", {"g9.xlarge": 3}), "fairshare.capacity.g9.xlarge"),
    ("fairshare decay huge", T, setter("fairshare/share_decay_seconds", 10**9), "share_decay_seconds"),
    ("fairshare strategy", T, setter("fairshare/allocation_strategy", "CHEAPEST"), "allocation_strategy"),
    ("fairshare spot best fit", T, lambda r: r["fairshare"].update(spot=True, allocation_strategy="BEST_FIT_PROGRESSIVE"),
     "Spot allocation strategy"),
    ("fairshare job attempts 0", T, setter("fairshare/job_attempts", 0), "job_attempts"),
    ("reclaim schedule 0", T, setter("fairshare/reclaim/schedule_minutes", 0), "reclaim.schedule_minutes"),
    ("reclaim schedule float", T, setter("fairshare/reclaim/schedule_minutes", 1.5), "reclaim.schedule_minutes"),
    ("reclaim dry_run string", T, setter("fairshare/reclaim/dry_run", "no"), "reclaim.dry_run"),
    ("reclaim unknown key", T, setter("fairshare/reclaim/enable", True), "did you mean 'enabled'"),
    ("reclaim a list", T, setter("fairshare/reclaim", [1]), "fairshare.reclaim"),
    ("hyperpod arn bad", HYPERPOD, setter("hyperpod/cluster_arn", "arn:aws:sagemaker:us-east-1:123:cluster/x"), "cluster_arn"),
    ("hyperpod arn trailing newline", HYPERPOD, setter("hyperpod/cluster_arn", HYPERPOD["hyperpod"]["cluster_arn"] + "\n"), "cluster_arn"),
    ("hyperpod type unknown", HYPERPOD, setter("hyperpod/capacity/ml.p9.48xlarge", 1), "hyperpod.capacity.ml.p9.48xlarge"),
    ("hyperpod classes not list", HYPERPOD, setter("hyperpod/priority_classes", {"a": 1}), "priority_classes"),
    ("hyperpod class weight 101", HYPERPOD, setter("hyperpod/priority_classes/0/weight", 101), "priority_classes[0].weight"),
    ("hyperpod class duplicate", HYPERPOD, setter("hyperpod/priority_classes/1/name", "inference"), "priority_classes[1].name"),
    ("hyperpod 11 classes", HYPERPOD, setter("hyperpod/priority_classes", [{"name": f"c{i}", "weight": 1} for i in range(11)]),
     "at most 10 priority classes"),
    ("hyperpod fair_share string", HYPERPOD, setter("hyperpod/fair_share", "on"), "hyperpod.fair_share"),
    # inference
    ("invocations .inf", INFERENCE, setter("inference/endpoints/0/models/0/invocations_per_copy", float("inf")),
     "invocations_per_copy"),
    ("invocations 0", INFERENCE, setter("inference/endpoints/0/models/0/invocations_per_copy", 0), "invocations_per_copy"),
    ("invocations huge int", INFERENCE, setter("inference/endpoints/0/models/0/invocations_per_copy", 10**400),
     "invocations_per_copy"),
    ("memory_mb 4001 digits", INFERENCE, setter("inference/endpoints/0/models/0/memory_mb", 10**4000), "memory_mb"),
    ("memory_mb too small", INFERENCE, setter("inference/endpoints/0/models/0/memory_mb", 1), "memory_mb"),
    ("cpus nan", INFERENCE, setter("inference/endpoints/0/models/0/cpus", float("nan")), "cpus"),
    ("copies 0", INFERENCE, setter("inference/endpoints/0/models/0/copies", 0), "copies"),
    ("copies huge", INFERENCE, setter("inference/endpoints/0/models/0/copies", {"max": 10**40}), "copies.max"),
    ("model profile unknown", INFERENCE, setter("inference/endpoints/0/models/0/profile", "mig-9g.1gb"), "models[0]"),
    ("model bad image", INFERENCE, setter("inference/endpoints/0/models/0/image", "not an image"), "image"),
    ("model unknown team", INFERENCE, setter("inference/endpoints/0/models/0/team", "nobody"), "team"),
    ("environment bool", INFERENCE, setter("inference/endpoints/0/models/0/environment", {"X": True}), "environment.X"),
    ("endpoint name upper", INFERENCE, setter("inference/endpoints/0/name", "Small"), "inference.endpoints[0].name"),
    ("endpoint layout missing", INFERENCE, deleter("inference/endpoints/0/layout"), "layout"),
    ("endpoint count 0", INFERENCE, setter("inference/endpoints/0/instance_count", 0), "instance_count"),
    ("endpoints empty", INFERENCE, setter("inference/endpoints", []), "inference.endpoints"),
    ("vpc bad subnets", INFERENCE, setter("inference/vpc", {"subnet_ids": ["x"], "security_group_ids": ["sg-1"]}), "subnet_ids"),
]


@pytest.mark.parametrize(("case", "base", "edit", "needle"), VALIDATE_EDITS, ids=[c[0] for c in VALIDATE_EDITS])
def test_validate_refuses_bad_fields(capsys, tmp_path, case, base, edit, needle):
    path = tmp_path / "platform.yaml"
    path.write_text(edited(base, edit))
    assert_refused(*run_cli(capsys, ["validate", str(path)]), needle)


def test_every_team_name_validate_accepts_synthesizes(tmp_path):
    """The other side of "refuse exactly": the longest and oddest names validate takes do synth."""
    import aws_cdk as cdk

    from cdk_gpu_share.core.configuration.parse import parse_config
    from cdk_gpu_share.stacks.app import build_platform

    raw = copy.deepcopy(PLATFORM)
    raw["teams"][0]["name"] = "team-a0"
    raw["teams"][1]["name"] = "0b"
    raw["teams"][2]["name"] = "c" * 63  # the longest a team name may be
    config = parse_config(raw)
    app = cdk.App(outdir=str(tmp_path / "out"))
    platform = build_platform(app, config, checks=False)
    assembly = app.synth()
    names = [s.stack_name for s in assembly.stacks]
    assert all(len(n) <= 128 for n in names) and len(names) == 4
    assert platform.teams["team-a0"].stack_name == "gpu-share-team-team-a0"


def test_a_huge_config_within_the_size_limit_is_checked_in_bounded_time(capsys, tmp_path):
    """Every check is linear: a config at the size limit (thousands of teams) is answered quickly."""
    teams = "".join(f"  - name: t{i}\n    guarantee: {{g5.xlarge: 1}}\n" for i in range(5000))
    path = tmp_path / "big.yaml"
    path.write_text("fairshare:\n  capacity: {g5.xlarge: 3}\nteams:\n" + teams)
    code, err, elapsed = run_cli(capsys, ["validate", str(path)])
    assert_refused(code, err, elapsed, "fairshare.capacity.g5.xlarge")


# ---------------------------------------------------------------------------
# synth: app.py refuses the same inputs (no jsii traceback)

SYNTH_CASES = [
    ("team_b", setter("teams/1/name", "team_b"), "teams[1] (team_b).name"),
    ("Team_A", setter("teams/0/name", "Team_A"), "teams[0] (Team_A).name"),
    ("128-char name", setter("teams/0/name", "a" * 128), "DNS-1123 label"),
    ("null guarantee", setter("teams/0/guarantee", {"ml.g5.xlarge": None, "g5.xlarge": 1}), "is empty"),
    ("duplicate name", setter("teams/1/name", "team-a"), "teams[1] (team-a).name"),
    ("huge capacity", setter("fairshare/capacity/g5.xlarge", 10**4000), "fairshare.capacity.g5.xlarge"),
]


def run_app(monkeypatch, capsys, config: Path) -> tuple[int, str, float]:
    """Run app.py in process, as `cdk synth -c config=...` does (the jsii kernel reads its
    environment once, so the context is given to the App directly). Wall time: the jsii
    kernel is a child process."""
    import aws_cdk

    real_app = aws_cdk.App
    monkeypatch.setattr(aws_cdk, "App", lambda **kw: real_app(
        context={"config": str(config)}, outdir=str(config.parent / "cdk.out"), **kw))
    start = time.perf_counter()
    with pytest.raises(SystemExit) as exc:
        runpy.run_path(str(ROOT / "app.py"), run_name="__main__")
    _, err = capsys.readouterr()
    return exc.value.code, err, time.perf_counter() - start


@pytest.mark.parametrize(("case", "edit", "needle"), SYNTH_CASES, ids=[c[0] for c in SYNTH_CASES])
def test_synth_refuses_what_validate_refuses(monkeypatch, capsys, tmp_path, case, edit, needle):
    path = tmp_path / "platform.yaml"
    path.write_text(edited(PLATFORM, edit))
    assert_refused(*run_app(monkeypatch, capsys, path), needle, WALL_SECONDS)


@pytest.mark.parametrize(
    ("case", "text", "needle"),
    [("deep nesting", deep(5000), "nested"), ("alias bomb", alias_bomb(), "expands"), ("empty", "", "empty"),
     ("invocations .inf", edited(INFERENCE, setter("inference/endpoints/0/models/0/invocations_per_copy", float("inf"))),
      "invocations_per_copy"),
     ("hyperpod over capacity", edited(HYPERPOD, setter("hyperpod/capacity/ml.p5.48xlarge", 2)), "hyperpod.capacity.ml.p5.48xlarge")],
)
def test_synth_refuses_bad_files(monkeypatch, capsys, tmp_path, case, text, needle):
    path = tmp_path / "platform.yaml"
    path.write_text(text)
    assert_refused(*run_app(monkeypatch, capsys, path), needle, WALL_SECONDS)


@pytest.mark.slow
def test_a_failing_make_synth_keeps_the_previous_cdk_out(tmp_path):
    out = tmp_path / "cdk.out"
    out.mkdir()
    (out / "manifest.json").write_text("{}")  # the previous good synth
    bad = tmp_path / "bad.yaml"
    bad.write_text(edited(PLATFORM, setter("teams/1/name", "team_b")))
    # -o install-runtime: the tests run in an installed environment, and this one checks what a
    # failing synth leaves behind, not the install (which would rewrite the environment's own install).
    result = subprocess.run(
        ["make", "--no-print-directory", "-o", "install-runtime", "synth", f"CONFIG={bad}", f"OUT={out}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode != 0
    assert "teams[1] (team_b).name" in result.stderr and "Traceback" not in result.stderr
    assert (out / "manifest.json").read_text() == "{}", "the previous cdk.out was touched"
    assert not (tmp_path / "cdk.out.new").exists()


# ---------------------------------------------------------------------------
# reclaim plan: JSON states

STATE = {
    "now": 1000,
    "capacity": {"gpu": 8},
    "settings": {"reclaim_after_seconds": 0, "min_runtime_seconds": 0},
    "teams": [{"name": "a", "guarantee": {"gpu": 4}}, {"name": "b", "guarantee": {"gpu": 4}}],
    "jobs": [
        {"id": "j1", "team": "a", "state": "running", "demand": {"gpu": 2}, "since": 0},
        {"id": "j2", "team": "b", "state": "pending", "demand": {"gpu": 1}, "since": 10},
    ],
}


def state_text(fn: Callable[[dict], Any]) -> str:
    raw = copy.deepcopy(STATE)
    fn(raw)
    return json.dumps(raw)


RECLAIM_CASES: list[tuple[str, str, str]] = [
    ("now 5001 digits", json.dumps(STATE).replace('"now": 1000', '"now": ' + "1" * 5001), "now"),
    ("capacity 401 digits", json.dumps(STATE).replace('"capacity": {"gpu": 8}', '"capacity": {"gpu": ' + "9" * 401 + "}"),
     "capacity.gpu"),
    ("capacity 1e400", json.dumps(STATE).replace('"capacity": {"gpu": 8}', '"capacity": {"gpu": 1e400}'), "capacity.gpu"),
    ("capacity NaN", json.dumps(STATE).replace('"capacity": {"gpu": 8}', '"capacity": {"gpu": NaN}'), "capacity.gpu"),
    ("since Infinity", json.dumps(STATE).replace('"since": 0', '"since": Infinity'), "jobs[0].since"),
    ("demand -Infinity", json.dumps(STATE).replace('"demand": {"gpu": 2}', '"demand": {"gpu": -Infinity}'), "jobs[0].demand.gpu"),
    ("priority 5001 digits", json.dumps(STATE).replace('"since": 10', '"since": 10, "priority": ' + "7" * 5001), "jobs[1].priority"),
    ("guarantee 30 digits", json.dumps(STATE).replace('"guarantee": {"gpu": 4}', '"guarantee": {"gpu": ' + "4" * 30 + "}", 1),
     "teams[0].guarantee.gpu"),
    ("deep nesting", '{"now": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ("duplicate key", json.dumps(STATE).replace('"now": 1000', '"now": 1000, "now": 5'), "repeats the key 'now'"),
    ("syntax error", '{"now": 1,}', "line 1, column"),
    ("empty", "", "is empty"),
    ("whitespace", "   \n", "is empty"),
    ("a list", "[1, 2]", "state"),
    ("a string", '"state"', "state"),
    ("now missing", state_text(lambda s: s.pop("now")), "now"),
    ("now string", state_text(lambda s: s.update(now="soon")), "now"),
    ("capacity missing", state_text(lambda s: s.pop("capacity")), "capacity"),
    ("capacity list", state_text(lambda s: s.update(capacity=[8])), "capacity"),
    ("capacity negative", state_text(lambda s: s["capacity"].update(gpu=-1)), "capacity.gpu"),
    ("settings list", state_text(lambda s: s.update(settings=[])), "settings"),
    ("settings negative", state_text(lambda s: s["settings"].update(reclaim_after_seconds=-1)), "settings.reclaim_after_seconds"),
    ("teams missing", state_text(lambda s: s.pop("teams")), "teams"),
    ("team not object", state_text(lambda s: s["teams"].append("c")), "teams[2]"),
    ("team name missing", state_text(lambda s: s["teams"][0].pop("name")), "teams[0].name"),
    ("team duplicate", state_text(lambda s: s["teams"][1].update(name="a")), "teams[1].name"),
    ("team sharing bad", state_text(lambda s: s["teams"][0].update(sharing="share")), "teams[0].sharing"),
    ("team percent -2", state_text(lambda s: s["teams"][0].update(borrow_limit_percent=-2)), "teams[0].borrow_limit_percent"),
    ("team unknown resource", state_text(lambda s: s["teams"][0].update(guarantee={"tpu": 1})), "teams[0].guarantee.tpu"),
    ("guarantees over capacity", state_text(lambda s: s["teams"][0].update(guarantee={"gpu": 5})), "guarantee.gpu"),
    ("jobs missing", state_text(lambda s: s.pop("jobs")), "jobs"),
    ("job not object", state_text(lambda s: s["jobs"].append(3)), "jobs[2]"),
    ("job id duplicate", state_text(lambda s: s["jobs"][1].update(id="j1")), "jobs[1].id"),
    ("job unknown team", state_text(lambda s: s["jobs"][0].update(team="z")), "jobs[0].team"),
    ("job state bad", state_text(lambda s: s["jobs"][0].update(state="RUNNING")), "jobs[0].state"),
    ("job demand missing", state_text(lambda s: s["jobs"][0].pop("demand")), "jobs[0].demand"),
    ("job priority float", state_text(lambda s: s["jobs"][0].update(priority=1.5)), "jobs[0].priority"),
    ("job terminating string", state_text(lambda s: s["jobs"][0].update(terminating="no")), "jobs[0].terminating"),
]


@pytest.mark.parametrize(("case", "text", "needle"), RECLAIM_CASES, ids=[c[0] for c in RECLAIM_CASES])
def test_reclaim_plan_refuses_bad_states(capsys, tmp_path, case, text, needle):
    path = tmp_path / "state.json"
    path.write_text(text)
    code, err, elapsed = run_cli(capsys, ["reclaim", "plan", str(path)])
    assert_refused(code, err, elapsed, needle)
    assert "invalid reclaim state" in err


def test_reclaim_plan_refuses_a_missing_file(capsys, tmp_path):
    assert_refused(*run_cli(capsys, ["reclaim", "plan", str(tmp_path / "none.json")]), "cannot read")


# ---------------------------------------------------------------------------
# simulate: scenario JSON and trace CSV

SCENARIO = {
    "capacity": {"gpu": 8},
    "settings": {"reclaim_after_seconds": 0, "min_runtime_seconds": 0},
    "teams": [{"name": "a", "guarantee": {"gpu": 4}}, {"name": "b", "guarantee": {"gpu": 4}}],
}
HEADER = "job_id,team,submit_time,duration_s,gpus,priority\n"
GOOD_ROW = "j0,a,0,10,1,0\n"

SIMULATE_TRACES: list[tuple[str, str, str]] = [
    ("cell 1e999999999", HEADER + "j1,a,1e999999999,10,1,0\n", "submit_time"),
    ("cell 5001 digits", HEADER + "j1,a,0," + "9" * 5001 + ",1,0\n", "duration_s"),
    ("gpus 1e-999999999", HEADER + "j1,a,0,10,1e-999999999,0\n", "gpus"),
    ("gpus nan", HEADER + "j1,a,0,10,nan,0\n", "gpus"),
    ("gpus inf", HEADER + "j1,a,0,10,inf,0\n", "gpus"),
    ("gpus fraction text", HEADER + "j1,a,0,10,1/2,0\n", "gpus"),
    ("gpus zero", HEADER + "j1,a,0,10,0,0\n", "gpus"),
    ("gpus above pool", HEADER + "j1,a,0,10,9,0\n", "gpus"),
    ("submit negative", HEADER + "j1,a,-1,10,1,0\n", "submit_time"),
    ("duration negative", HEADER + "j1,a,0,-10,1,0\n", "duration_s"),
    ("priority 5001 digits", HEADER + "j1,a,0,10,1," + "1" * 5001 + "\n", "priority"),
    ("priority float", HEADER + "j1,a,0,10,1,1.5\n", "priority"),
    ("unknown team", HEADER + "j1,zzz,0,10,1,0\n", "team"),
    ("duplicate id", HEADER + GOOD_ROW + GOOD_ROW, "job_id"),
    ("empty cell", HEADER + "j1,a,,10,1,0\n", "submit_time"),
    ("short row", HEADER + "j1,a\n", "line 2"),
    ("missing column", "job_id,team,submit_time,gpus\nj1,a,0,1\n", "line 1 (header)"),
    ("empty file", "", "line 1 (header)"),
    ("oversized cell", HEADER + "j1,a,0,10,1,\"" + "x" * 200_000 + "\"\n", "line 2"),
    ("row named in a long file", HEADER + GOOD_ROW.replace("j0", "j9") + "".join(
        f"j{i + 10},a,{i},10,1,0\n" for i in range(2000)) + "bad,a,0,10,x,0\n", "line 2003"),
]


@pytest.mark.parametrize(("case", "trace", "needle"), SIMULATE_TRACES, ids=[c[0] for c in SIMULATE_TRACES])
def test_simulate_refuses_bad_trace_rows(capsys, tmp_path, case, trace, needle):
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps(SCENARIO))
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(trace)
    argv = ["simulate", "--scenario", str(scenario), "--trace", str(jobs), "--mode", "share"]
    assert_refused(*run_cli(capsys, argv), needle)


SIMULATE_SCENARIOS: list[tuple[str, str, str]] = [
    ("capacity 401 digits", json.dumps(SCENARIO).replace('"gpu": 8', '"gpu": ' + "9" * 401), "capacity.gpu"),
    ("capacity NaN", json.dumps(SCENARIO).replace('"gpu": 8', '"gpu": NaN'), "capacity.gpu"),
    ("no gpu", json.dumps({**SCENARIO, "capacity": {"tpu": 8}}), "capacity"),
    ("now given", json.dumps({**SCENARIO, "now": 5}), "now"),
    ("teams empty", json.dumps({**SCENARIO, "teams": []}), "teams"),
    ("syntax", "{", "line 1, column 2"),
    ("duplicate key", json.dumps(SCENARIO).replace('"capacity"', '"capacity": {}, "capacity"', 1), "repeats the key"),
    ("deep", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
]


@pytest.mark.parametrize(("case", "text", "needle"), SIMULATE_SCENARIOS, ids=[c[0] for c in SIMULATE_SCENARIOS])
def test_simulate_refuses_bad_scenarios(capsys, tmp_path, case, text, needle):
    scenario = tmp_path / "scenario.json"
    scenario.write_text(text)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(HEADER + GOOD_ROW)
    argv = ["simulate", "--scenario", str(scenario), "--trace", str(jobs), "--mode", "share"]
    assert_refused(*run_cli(capsys, argv), needle)


@pytest.mark.parametrize(
    ("case", "extra", "needle"),
    [("poll 0", ["--poll-seconds", "0"], "--poll-seconds"), ("poll text", ["--poll-seconds", "x"], "--poll-seconds"),
     ("mode unknown", ["--mode", "fast"], "mode"), ("missing trace", ["--trace", "/nonexistent.csv"], "--trace")],
)
def test_simulate_refuses_bad_arguments_as_arguments(capsys, tmp_path, case, extra, needle):
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps(SCENARIO))
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(HEADER + GOOD_ROW)
    argv = ["simulate", "--scenario", str(scenario), "--trace", str(jobs), "--mode", "share", *extra]
    code, err, elapsed = run_cli(capsys, argv)
    assert_refused(code, err, elapsed, needle)
    assert "invalid configuration" not in err


def test_trace_convert_refuses_a_bad_openb_cell(capsys, tmp_path):
    src = tmp_path / "openb.csv"
    src.write_text("name,num_gpu,gpu_milli,qos,creation_time,deletion_time,scheduled_time\n"
                   "p1,1e999999999,1000,LS,0,10,1\n")
    assert_refused(*run_cli(capsys, ["trace", "convert", "--from", "alibaba-openb", str(src), "-o",
                                     str(tmp_path / "out.csv")]), "num_gpu")


# ---------------------------------------------------------------------------
# mig check: arguments

MIG_CASES = [
    ("unknown gpu", ["--gpu", "H100", "mig-3g.40gb"], "'H100'"),
    ("unknown instance type", ["--instance-type", "ml.g5.48xlarge", "mig-3g.40gb"], "ml.g5.48xlarge"),
    ("profile of another gpu", ["--gpu", "H100-80GB", "mig-3g.20gb"], "mig-3g.20gb"),
    ("unknown profile", ["--gpu", "A100-40GB", "mig-9g.99gb"], "mig-9g.99gb"),
    ("huge profile text", ["--gpu", "A100-40GB", "mig-" + "9" * 5001 + "g.1gb"], "mig-"),
    ("empty profile", ["--gpu", "A100-40GB", ""], "profile"),
    ("no target", ["mig-3g.20gb"], "--gpu"),
    ("both targets", ["--gpu", "A100-40GB", "--instance-type", "ml.p4d.24xlarge", "mig-3g.20gb"], "--instance-type"),
]


@pytest.mark.parametrize(("case", "argv", "needle"), MIG_CASES, ids=[c[0] for c in MIG_CASES])
def test_mig_check_refuses_bad_arguments(capsys, case, argv, needle):
    code, err, elapsed = run_cli(capsys, ["mig", "check", *argv])
    assert_refused(code, err, elapsed, needle)
    assert "invalid configuration" not in err


def test_mig_layouts_refuses_an_unknown_gpu(capsys):
    assert_refused(*run_cli(capsys, ["mig", "layouts", "--gpu", "V100"]), "V100")


def test_summary_on_a_missing_folder_says_so(capsys, tmp_path):
    code, err, elapsed = run_cli(capsys, ["summary", str(tmp_path / "cdk.out")])
    assert_refused(code, err, elapsed, "does not exist")
    assert "invalid configuration" not in err and "make synth" in err


# ---------------------------------------------------------------------------
# The Python API: the shorthand the YAML takes, or a ConfigError naming the field


def _team(**kw):
    from cdk_gpu_share.core.configuration.parse import TeamConfig

    return TeamConfig(**{"name": "team-a", "guarantee": {"ml.g5.xlarge": 1}, **kw})


def _amount(**kw):
    from cdk_gpu_share.core.configuration.parse import Amount

    return Amount(**kw)


def _parse(raw):
    from cdk_gpu_share.core.configuration.parse import parse_config

    return parse_config(raw)


def _plan(state):
    from cdk_gpu_share.core.policy import reclaim

    return reclaim.plan(state)


def _quota(team):
    import aws_cdk as cdk

    from cdk_gpu_share import BatchQuotaConfig, SharedGpuQuota

    app = cdk.App()
    stack = cdk.Stack(app, "S")
    return SharedGpuQuota(stack, "Q", teams=[team()], batch_quota=BatchQuotaConfig(capacity={"ml.g5.xlarge": 3}))


API_CASES: list[tuple[str, Callable[[], Any], str]] = [
    ("guarantee string", lambda: _team(guarantee={"ml.g5.xlarge": "two"}), "guarantee['ml.g5.xlarge']"),
    ("guarantee negative", lambda: _team(guarantee={"ml.g5.xlarge": -2}), "guarantee['ml.g5.xlarge']"),
    ("guarantee bool", lambda: _team(guarantee={"ml.g5.xlarge": True}), "guarantee['ml.g5.xlarge']"),
    ("guarantee unknown key", lambda: _team(guarantee={"ml.g5.xlarge": {"gpus": 1}}), "guarantee['ml.g5.xlarge']"),
    ("guarantee a list", lambda: _team(guarantee=[("ml.g5.xlarge", 1)]), "TeamConfig('team-a').guarantee"),
    ("guarantee None value", lambda: _team(guarantee={"ml.g5.xlarge": None}), "guarantee['ml.g5.xlarge']"),
    ("guarantee 10**5000", lambda: _team(guarantee={"ml.g5.xlarge": 10**5000}), "too large"),
    ("sharing unknown", lambda: _team(sharing="borrow"), "TeamConfig('team-a').sharing"),
    ("sharing int", lambda: _team(sharing=3), "TeamConfig('team-a').sharing"),
    ("name None", lambda: _team(name=None), "TeamConfig.name"),
    ("percent string", lambda: _team(borrow_limit_percent="50"), "borrow_limit_percent"),
    ("weight 300", lambda: _team(fair_share_weight=300), "fair_share_weight"),
    ("preemption string", lambda: _team(in_team_preemption="yes"), "in_team_preemption"),
    ("amount mig list", lambda: _amount(mig=["mig-3g.20gb"]), "Amount.mig"),
    ("amount mig count string", lambda: _amount(mig={"mig-3g.20gb": "8"}), "Amount.mig.mig-3g.20gb"),
    ("amount instances float", lambda: _amount(instances=1.5), "Amount.instances"),
    ("amount vcpu inf", lambda: _amount(vcpu=float("inf")), "Amount.vcpu"),
    ("parse_config 10**5000", lambda: _parse({**copy.deepcopy(PLATFORM), "batch_quota": {"capacity": {"ml.g5.xlarge": 10**5000}}}),
     "batch_quota.capacity.ml.g5.xlarge"),
    ("parse_config not a mapping", lambda: _parse([1]), "config"),
    ("reclaim.plan capacity 10**400", lambda: _plan({**STATE, "capacity": {"gpu": 10**400}}), "capacity.gpu"),
    ("reclaim.plan now 1e308*10", lambda: _plan({**STATE, "now": float("inf")}), "now"),
    ("reclaim.plan not a mapping", lambda: _plan([STATE]), "state"),
    ("SharedGpuQuota bad team name", lambda: _quota(lambda: _team(name="team a")), "team a"),
]


@pytest.mark.parametrize(("case", "call", "needle"), API_CASES, ids=[c[0] for c in API_CASES])
def test_python_api_raises_config_error_naming_the_field(case, call, needle):
    start = time.process_time()
    with pytest.raises(ConfigError) as info:
        call()
    text = str(info.value)
    assert needle in text, text
    assert len(text) < MAX_MESSAGE
    assert time.process_time() - start < SECONDS
    # No YAML advice in the Python API.
    if case.startswith(("guarantee", "sharing", "name", "percent", "weight", "preemption", "amount")):
        assert "key: value" not in text and "YAML" not in text and "quote it" not in text, text


def test_python_api_takes_the_yaml_shorthand():
    from cdk_gpu_share.core.configuration.parse import Amount, Sharing, TeamConfig

    team = TeamConfig(name="team-a", guarantee={"ml.g5.xlarge": 2, "ml.p5.48xlarge": {"accelerators": 4}}, sharing="lend")
    assert team.guarantee["ml.g5.xlarge"] == Amount(instances=2)
    assert team.guarantee["ml.p5.48xlarge"] == Amount(accelerators=4)
    assert team.sharing is Sharing.LEND
    assert Amount(mig={"mig-3g.20gb": 8, "mig-1g.5gb": 2}).mig == (("mig-1g.5gb", 2), ("mig-3g.20gb", 8))


# ---------------------------------------------------------------------------
# End to end: the installed command (a handful; the rest run in process)


@pytest.mark.parametrize(
    ("argv", "text", "needle"),
    [
        (["validate"], deep(5000), "nested more than 64"),
        (["validate"], "teams:\n  - {name: x, guarantee: {g5.xlarge: 1}}\n" + BASE_TEXT, "repeats the key 'teams'"),
        (["reclaim", "plan"], json.dumps(STATE).replace('"now": 1000', '"now": ' + "1" * 5001), "now"),
    ],
)
def test_end_to_end_exit_2_without_traceback(tmp_path, argv, text, needle):
    path = tmp_path / "input"
    path.write_text(text)
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "cdk_gpu_share.cli", *argv, str(path)],
                            capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONUTF8": "1"})
    assert_refused(result.returncode, result.stderr, time.perf_counter() - start, needle, WALL_SECONDS)


def test_corpus_has_at_least_150_cases():
    count = (len(VALIDATE_TEXT) + len(VALIDATE_EDITS) + len(SYNTH_CASES) + 5 + len(RECLAIM_CASES)
             + len(SIMULATE_TRACES) + len(SIMULATE_SCENARIOS) + 4 + len(MIG_CASES) + len(API_CASES) + 3 + 8)
    assert count >= 150, count
