"""The tag guard for a config: ``security.administrators``, the keys it protects, ``gpu-share guard``
and the warning of ``gpu-share plan`` for teams whose identity is a principal tag.

The guard's decisions are evaluated by the IAM policy evaluator in tests/auth.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cdk_gpu_share.cli import main
from cdk_gpu_share.core.configuration.parse import load_config, parse_config
from cdk_gpu_share.core.configuration.security import MAX_ADMINISTRATORS
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.policy.guard import (
    SCP_MAX_CHARACTERS,
    compact,
    guard_policy,
    identity_tag_keys,
    identity_warnings,
    split_guard,
    tag_guard_policy,
)
from tests.builders import examples

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "arn:aws:iam::111122223333:role/platform-admin"
DEPLOYER = "arn:aws:iam::111122223333:role/cdk-hnb659fds-cfn-exec-role-111122223333-*"
BASE = {"platform": {"name": "p"}, "fairshare": {"capacity": {"g5.xlarge": 2}},
        "teams": [{"name": "team-a", "guarantee": {"g5.xlarge": 1}}, {"name": "team-b", "guarantee": {"g5.xlarge": 1}}]}


def with_security(security) -> dict:
    raw = copy.deepcopy(BASE)
    raw["security"] = security
    return raw


def problems(raw) -> list:
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    return info.value.problems


def statement(policy: dict, sid: str) -> dict:
    [found] = [s for s in policy["Statement"] if s["Sid"] == sid]
    return found


def test_administrators_parse_and_reach_the_guard():
    config = parse_config(with_security({"administrators": [ADMIN, DEPLOYER]}))
    assert config.security.administrators == (ADMIN, DEPLOYER)
    assert parse_config(with_security({"administrators": ADMIN})).security.administrators == (ADMIN,)
    assert parse_config(copy.deepcopy(BASE)).security is None
    policy = guard_policy(config)
    for sid in ("GpuShareTeamTagOnPrincipalsOnlyByAdministrators", "GpuShareTeamTagInSessionsOnlyByAdministrators",
                "GpuShareTeamRoleTrustOnlyByAdministrators"):
        assert statement(policy, sid)["Condition"]["ArnNotLike"] == {"aws:PrincipalArn": [ADMIN, DEPLOYER]}, sid


def test_without_administrators_nobody_is_exempt():
    policy = guard_policy(parse_config(copy.deepcopy(BASE)))
    identity = [s for s in policy["Statement"] if not s["Sid"].startswith(("GpuShareEvery", "GpuShareTagsAre"))]
    assert len(identity) == 3
    assert all("ArnNotLike" not in s["Condition"] for s in identity)


def test_the_guard_protects_every_principal_tag_the_teams_use():
    raw = copy.deepcopy(BASE)
    raw["teams"][0]["principal_tag"] = "department"
    raw["teams"].append({"name": "team-c", "guarantee": {"g5.xlarge": 0}, "principal_tag": "Department"})
    config = parse_config(raw)
    assert identity_tag_keys(config) == ["department", "gpu-share:team"]  # letter case does not make a new key
    policy = guard_policy(config)
    for sid in ("GpuShareTeamTagOnPrincipalsOnlyByAdministrators", "GpuShareTeamTagInSessionsOnlyByAdministrators"):
        assert statement(policy, sid)["Condition"]["ForAnyValue:StringEqualsIgnoreCase"] == {
            "aws:TagKeys": ["department", "gpu-share:team"]}
    assert statement(policy, "GpuShareTeamRoleTrustOnlyByAdministrators")["Condition"] == {
        "Null": {"aws:ResourceTag/department": "false"}}
    assert statement(policy, "GpuShareTeamRoleTrustOnlyByAdministrators2")["Condition"] == {
        "Null": {"aws:ResourceTag/gpu-share:team": "false"}}


def test_the_batch_statements_are_unchanged():
    batch = [s for s in tag_guard_policy(administrators=[ADMIN])["Statement"]
             if s["Sid"].startswith(("GpuShareEvery", "GpuShareTagsAre"))]
    assert batch == [
        {"Sid": "GpuShareEveryJobCarriesItsQueue", "Effect": "Deny", "Action": "batch:SubmitJob",
         "Resource": "arn:aws:batch:*:*:job/*", "Condition": {"Null": {"aws:RequestTag/gpu-share:queue": "true"}}},
        {"Sid": "GpuShareEveryServiceJobCarriesItsTeam", "Effect": "Deny", "Action": "batch:SubmitServiceJob",
         "Resource": "arn:aws:batch:*:*:service-job/*",
         "Condition": {"Null": {"aws:RequestTag/gpu-share:team": "true"}}},
        {"Sid": "GpuShareTagsAreNeverRemoved", "Effect": "Deny", "Action": "batch:UntagResource",
         "Resource": ["arn:aws:batch:*:*:job/*", "arn:aws:batch:*:*:service-job/*"],
         "Condition": {"ForAnyValue:StringLike": {"aws:TagKeys": ["gpu-share:*"]}}},
    ]


def test_the_guard_fits_an_scp():
    """AWS Organizations takes SCPs of at most 5,120 characters."""
    raw = yaml.safe_load((ROOT / "platform.yaml").read_text())
    raw["security"] = {"administrators": [f"arn:aws:iam::111122223333:role/admin-{i:02d}-*"
                                          for i in range(MAX_ADMINISTRATORS)]}
    policy = guard_policy(parse_config(raw))
    assert len(json.dumps(policy, separators=(",", ":"))) <= 5120


# ---------------------------------------------------------------------------
# Its size: what `guard` prints is one SCP AWS Organizations takes, or several that together
# deny the same


#: 20 administrator roles as IAM Identity Center names them: too long for one SCP together.
SSO_ADMINS = [f"arn:aws:iam::111122223333:role/aws-reserved/sso.amazonaws.com/eu-west-1/AWSReservedSSO_PlatformAdmin{i:02d}_*"
              for i in range(MAX_ADMINISTRATORS)]
#: 20 named roles: one SCP, once printed without whitespace (6,093 characters indented).
NAMED_ADMINS = [f"arn:aws:iam::111122223333:role/platform-admin-{i:02d}" for i in range(MAX_ADMINISTRATORS)]


def config_file(tmp_path, administrators, **team_tags) -> Path:
    raw = yaml.safe_load((ROOT / "platform.yaml").read_text())
    raw["security"] = {"administrators": administrators}
    for team in raw["teams"]:
        if team["name"] in team_tags:
            team["principal_tag"] = team_tags[team["name"]]
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_the_printed_guard_is_compact_and_within_an_scp(tmp_path, capsys):
    path = config_file(tmp_path, NAMED_ADMINS)
    assert len(json.dumps(guard_policy(load_config(path)), indent=2)) > SCP_MAX_CHARACTERS  # as it was printed
    code, out, err = run(capsys, "guard", str(path))
    assert (code, err) == (0, "")
    text = out.rstrip("\n")
    assert len(text) <= SCP_MAX_CHARACTERS and "\n" not in text and ": " not in text and ", " not in text
    assert json.loads(text) == guard_policy(load_config(path))


def test_a_guard_longer_than_an_scp_is_refused_with_its_size_and_the_fix(tmp_path, capsys):
    path = config_file(tmp_path, SSO_ADMINS)
    size = len(compact(guard_policy(load_config(path))))
    assert size > SCP_MAX_CHARACTERS
    code, out, err = run(capsys, "guard", str(path))
    assert (code, out) == (2, "")
    assert err == (f"gpu-share guard: the guard is {size:,} characters, above the 5,120 AWS Organizations allows in"
                   " one SCP; pass -o DIR to write it as 2 SCPs of at most 5,120 characters (gpu-share-guard-1,"
                   " gpu-share-guard-2) and attach them together, or write fewer, wider security.administrators"
                   " patterns (a common path such as arn:aws:iam::111122223333:role/admins/*)\n")


def test_output_dir_writes_named_scps_that_together_hold_exactly_the_guards_statements(tmp_path, capsys):
    path = config_file(tmp_path, SSO_ADMINS, **{"team-a": "department"})
    whole = guard_policy(load_config(path))
    out_dir = tmp_path / "scps"
    out_dir.mkdir()
    code, out, err = run(capsys, "guard", str(path), "-o", str(out_dir))
    assert code == 0 and "attach all 3 to the same root, OU or account" in out
    files = sorted(out_dir.iterdir())
    assert [f.name for f in files] == ["gpu-share-guard-1.json", "gpu-share-guard-2.json", "gpu-share-guard-3.json"]
    parts = [json.loads(f.read_text()) for f in files]
    for f, part in zip(files, parts):
        assert len(f.read_text().rstrip("\n")) <= SCP_MAX_CHARACTERS
        assert part["Version"] == "2012-10-17" and part["Statement"]
        assert f"wrote {f}: SCP {f.stem}, {len(f.read_text().rstrip()):,} characters" in out
    # Deny-only SCPs attached together deny what any of their statements denies: the same
    # statements, each whole and once, deny the same requests.
    assert [st for part in parts for st in part["Statement"]] == whole["Statement"]
    # (The IAM evaluator's decisions on both forms: tests/auth/test_guard_keys.py.)


def test_output_dir_writes_one_scp_when_it_fits_and_notes_stale_parts(tmp_path, capsys):
    path = config_file(tmp_path, NAMED_ADMINS)
    out_dir = tmp_path / "scps"
    out_dir.mkdir()
    (out_dir / "gpu-share-guard-2.json").write_text("{}")
    code, out, err = run(capsys, "guard", str(path), "-o", str(out_dir))
    assert code == 0
    assert json.loads((out_dir / "gpu-share-guard.json").read_text()) == guard_policy(load_config(path))
    assert err.startswith(f"note: {out_dir / 'gpu-share-guard-2.json'} is not part of this guard")


@pytest.mark.parametrize("obstacle", ["folder", "missing dir", "a file"])
def test_output_dir_must_be_a_folder_without_a_folder_named_like_a_part(tmp_path, capsys, obstacle):
    path = config_file(tmp_path, NAMED_ADMINS)
    out_dir = tmp_path / "scps"
    if obstacle == "a file":
        out_dir.write_text("not a folder")
    elif obstacle == "folder":
        out_dir.mkdir()
        (out_dir / "gpu-share-guard.json").mkdir()
    code, out, err = run(capsys, "guard", str(path), "-o", str(out_dir))
    assert code == 2 and "\n" not in err.strip() and "Traceback" not in err
    assert err.startswith(f"gpu-share guard: -o {out_dir}: ")
    assert ("holds a folder named gpu-share-guard.json" if obstacle == "folder" else "is not a folder") in err


def test_output_dir_replaces_a_link_named_like_a_part_and_never_writes_through_it(tmp_path, capsys):
    path = config_file(tmp_path, NAMED_ADMINS)
    out_dir = tmp_path / "scps"
    out_dir.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    (out_dir / "gpu-share-guard.json").symlink_to(outside)
    code, out, err = run(capsys, "guard", str(path), "-o", str(out_dir))
    assert code == 0 and outside.read_text() == "keep me"
    written = out_dir / "gpu-share-guard.json"
    assert not written.is_symlink() and json.loads(written.read_text()) == guard_policy(load_config(path))


def test_a_statement_longer_than_an_scp_or_too_many_scps_is_refused(tmp_path, capsys):
    # A statement is never cut: ArnNotLike exempts a principal matching any pattern of its list.
    long_admins = [f"arn:aws:iam::111122223333:role/{'x' * 230}-{i:02d}" for i in range(MAX_ADMINISTRATORS)]
    code, out, err = run(capsys, "guard", str(config_file(tmp_path, long_admins)))
    assert (code, out) == (2, "")
    assert "security.administrators: make the guard's statement GpuShareTeamTagOnPrincipalsOnlyByAdministrators alone" \
        " longer than the 5,120 characters of an SCP" in err and "fewer, wider patterns" in err
    # Each distinct principal_tag adds a statement with the administrators: with patterns long
    # enough for one such statement a SCP, more SCPs than fit.
    longer = [f"arn:aws:iam::111122223333:role/{'y' * 110}-{i:02d}" for i in range(MAX_ADMINISTRATORS)]
    tags = {"team-a": "department", "team-b": "cost-center", "team-c": "group"}
    code, out, err = run(capsys, "guard", str(config_file(tmp_path, longer, **tags)))
    assert (code, out) == (2, "")
    assert "SCPs of at most 5,120 characters, more than the 4 that fit beside the allow policy" in err


@settings(max_examples=examples(300), deadline=None)
@given(admins=st.integers(0, MAX_ADMINISTRATORS), length=st.integers(20, 120), keys=st.integers(1, 4),
       limit=st.integers(2500, 12000))
def test_split_keeps_every_statement_whole_in_order_and_each_part_within_the_limit(admins, length, keys, limit):
    policy = tag_guard_policy(administrators=[f"arn:aws:iam::111122223333:role/{'a' * length}{i}" for i in range(admins)],
                              team_tag_keys=[f"key-{k}" for k in range(keys)])
    try:
        parts = split_guard(policy, limit)
    except ConfigError as error:
        (problem,) = error.problems
        alone = max(len(compact({"Version": "2012-10-17", "Statement": [st]})) for st in policy["Statement"])
        assert alone > limit or "more than the 4" in problem.message
        return
    assert [st for p in parts for st in p.document["Statement"]] == policy["Statement"]
    assert all(len(p.text) <= limit and p.document["Version"] == "2012-10-17" for p in parts)
    assert [p.name for p in parts] == (["gpu-share-guard"] if len(parts) == 1 else
                                       [f"gpu-share-guard-{i}" for i in range(1, len(parts) + 1)])
    # Greedy: no part could have taken the next part's first statement.
    for a, b in zip(parts, parts[1:]):
        assert len(compact({"Version": "2012-10-17", "Statement": [*a.document["Statement"],
                                                                    b.document["Statement"][0]]})) > limit


@pytest.mark.parametrize("security, field, value, message, fix", [
    ([ADMIN], "security", [ADMIN], "must be a mapping", "write security: {administrators: [" + ADMIN + "]}"),
    ({"administrators": [ADMIN], "admins": [ADMIN]}, "security.admins", "admins", "is not a field of security", "use administrators"),
    ({}, "security", {}, "names no administrators",
     f"write administrators: [{ADMIN}], or remove the section (then nobody may set the team tag)"),
    ({"administrators": []}, "security.administrators", [], "must be a non-empty list of IAM role or user ARN patterns",
     f"write administrators: [{ADMIN}], or remove the section (then nobody may set the team tag)"),
    ({"administrators": ["platform-admin"]}, "security.administrators[0]", "platform-admin",
     "is not an IAM role or user ARN pattern",
     f"write arn:aws:iam::ACCOUNT:role/NAME (* and ? match any characters), such as {ADMIN}"),
    ({"administrators": [ADMIN, 7]}, "security.administrators[1]", 7, "is not an IAM role or user ARN pattern",
     f"write arn:aws:iam::ACCOUNT:role/NAME (* and ? match any characters), such as {ADMIN}"),
    ({"administrators": ["arn:aws:sts::111122223333:assumed-role/platform-admin/alice"]},
     "security.administrators[0]", "arn:aws:sts::111122223333:assumed-role/platform-admin/alice",
     "is a session ARN; aws:PrincipalArn of a session is its role's ARN",
     "write the role: arn:aws:iam::ACCOUNT:role/NAME"),
    ({"administrators": ["arn:aws:iam::*:role/*"]}, "security.administrators[0]", "arn:aws:iam::*:role/*",
     "matches every role or user of the account, so the guard would stop nobody",
     f"name the administrators' roles, such as {ADMIN}"),
    ({"administrators": ["arn:aws:iam::111122223333:user/*/*"]}, "security.administrators[0]",
     "arn:aws:iam::111122223333:user/*/*", "matches every role or user of the account, so the guard would stop nobody",
     f"name the administrators' roles, such as {ADMIN}"),
    ({"administrators": [ADMIN, ADMIN]}, "security.administrators[1]", ADMIN, "is listed twice",
     "list each pattern once"),
    ({"administrators": [f"{ADMIN}-{i}" for i in range(MAX_ADMINISTRATORS + 1)]}, "security.administrators",
     f"{MAX_ADMINISTRATORS + 1} patterns", f"lists more than {MAX_ADMINISTRATORS} patterns",
     "give the administrators' roles a common path or name prefix and write one pattern, such as"
     " arn:aws:iam::111122223333:role/admins/*"),
])
def test_bad_administrators_name_field_value_and_fix(security, field, value, message, fix):
    [p] = problems(with_security(security))
    assert (p.field, p.value, p.message, p.fix) == (field, value, message, fix)


def test_root_and_wildcard_accounts_are_administrator_patterns():
    arns = ["arn:aws:iam::111122223333:root", "arn:aws:iam::*:role/admins/*", "arn:aws-cn:iam::111122223333:user/ops?"]
    assert parse_config(with_security({"administrators": arns})).security.administrators == tuple(arns)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_guard_prints_the_guard_of_the_config(tmp_path, capsys):
    raw = yaml.safe_load((ROOT / "platform.yaml").read_text())
    raw["security"] = {"administrators": [ADMIN]}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(raw))
    code, out, err = run(capsys, "guard", str(path))
    assert (code, err) == (0, "")
    assert json.loads(out) == guard_policy(load_config(path))
    code, out, _ = run(capsys, "guard", str(path), "--partition", "aws-cn")
    assert "arn:aws-cn:batch:*:*:job/*" in out


def test_cli_guard_says_when_nobody_is_an_administrator(capsys):
    code, out, err = run(capsys, "guard", str(ROOT / "platform.yaml"))
    assert code == 0 and json.loads(out) == guard_policy(load_config(ROOT / "platform.yaml"))
    assert err == (f"note: {ROOT / 'platform.yaml'} names no security.administrators, so this guard lets nobody set"
                   " gpu-share:team on a principal or session, not even the role that deploys the team stacks (they"
                   " tag their roles with it); name your administrators and that role in security.administrators\n")


def test_cli_guard_refuses_a_bad_config(tmp_path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(with_security({"administrators": ["arn:aws:iam::*:role/*"]})))
    code, out, err = run(capsys, "guard", str(path))
    assert (code, out) == (2, "")
    assert "security.administrators[0]" in err and "arn:aws:iam::*:role/*" in err and "stop nobody" in err


def test_plan_warns_for_each_team_without_assumed_by(tmp_path, capsys):
    raw = copy.deepcopy(BASE)
    raw["teams"][1]["assumed_by"] = ["arn:aws:iam::111122223333:role/team-b-ci"]
    raw["teams"].append({"name": "team-c", "guarantee": {"g5.xlarge": 0}, "principal_tag": "department"})
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(raw))
    code, out, err = run(capsys, "plan", str(path))
    assert code == 0 and "fairshare:" in out and "warning" not in out
    lines = err.splitlines()
    assert lines == [
        f"warning: team team-a has no assumed_by, so any principal of the account tagged gpu-share:team=team-a may"
        f" assume its SubmitRole. Prefer assumed_by (the role ARNs of its members or CI); otherwise attach the tag"
        f" guard (`gpu-share guard {path}`) as an SCP so that only security.administrators can set that tag.",
        f"warning: team team-c has no assumed_by, so any principal of the account tagged department=team-c may"
        f" assume its SubmitRole. Prefer assumed_by (the role ARNs of its members or CI); otherwise attach the tag"
        f" guard (`gpu-share guard {path}`) as an SCP so that only security.administrators can set that tag.",
    ]
    code, out, err = run(capsys, "plan", str(path), "--json")
    assert code == 0 and json.loads(out)["platform"] == "p"  # standard output stays one JSON document
    assert err.splitlines() == lines


def test_plan_of_a_config_where_no_team_names_its_principals_says_the_next_step_once(capsys):
    """A fresh starter names no principal for any team: one next step, not a warning per team."""
    code, _, err = run(capsys, "plan", str(ROOT / "platform.yaml"))
    assert code == 0
    assert err.splitlines() == [
        "next: who submits for each team: set assumed_by (the role ARNs of its members or CI) on team-a, team-b,"
        " team-c. Until then any principal of the account tagged gpu-share:team=<team> may assume the team's"
        f" SubmitRole: attach the tag guard (`gpu-share guard {ROOT / 'platform.yaml'}`) as an SCP so that only"
        " security.administrators can set that tag."]
    assert identity_warnings(load_config(ROOT / "platform.yaml")) == [
        line.replace(str(ROOT / "platform.yaml"), "platform.yaml") for line in err.splitlines()]
