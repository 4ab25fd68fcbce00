"""The tag guard protects whichever principal tag keys the teams use, decided by the IAM policy
evaluator (tests/auth/evaluate.mjs) with the guard as an SCP beside FullAWSAccess."""

from __future__ import annotations

import json
import subprocess

from cdk_gpu_share.core.configuration.parse import parse_config
from cdk_gpu_share.core.policy.guard import guard_policy
from tests.auth.resolve import ACCOUNT, ROOT
from tests.auth.test_authorization import EVALUATOR, NODE

ADMIN = f"arn:aws:iam::{ACCOUNT}:role/platform-admin"
MALLORY = f"arn:aws:iam::{ACCOUNT}:role/mallory"
TOOLS = f"arn:aws:iam::{ACCOUNT}:role/team-tools"
EVERYTHING = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["iam:*", "sts:*"], "Resource": "*"}]}
TOOLS_TRUST = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
                                                       "Action": ["sts:AssumeRole", "sts:TagSession"]}]}


def _guard() -> dict:
    raw = {"platform": {"name": "p"}, "fairshare": {"capacity": {"g5.xlarge": 2}}, "security": {"administrators": [ADMIN]},
           "teams": [{"name": "team-a", "guarantee": {"g5.xlarge": 1}, "principal_tag": "department"},
                     {"name": "team-b", "guarantee": {"g5.xlarge": 1}}]}
    return guard_policy(parse_config(raw))


def _tags(**kv: str) -> dict:
    return {**{f"aws:RequestTag/{k}": v for k, v in kv.items()}, "aws:TagKeys": list(kv)}


def _decide(cases: list[tuple], scps: list[dict]) -> list[dict]:
    requests = []
    for i, (who, action, resource, context) in enumerate(cases):
        requests.append({
            "id": str(i), "principal_arn": who, "action": action, "resources": [resource],
            "context": {"aws:PrincipalArn": who, **context}, "scps": scps,
            "policies": [{"name": "iam-and-sts", "policy": EVERYTHING}],
            **({"resource_policy": TOOLS_TRUST} if action == "sts:TagSession" else {}),
        })
    proc = subprocess.run([str(NODE), str(EVALUATOR)], input=json.dumps({"requests": requests}), capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["results"]


def test_a_custom_principal_tag_is_guarded_like_the_default():
    denied = [
        (MALLORY, "iam:TagRole", MALLORY, _tags(department="team-a")),
        (MALLORY, "iam:TagRole", MALLORY, _tags(DEPARTMENT="team-a")),
        (MALLORY, "iam:TagRole", MALLORY, _tags(**{"gpu-share:team": "team-b"})),
        (MALLORY, "iam:UntagRole", MALLORY, {"aws:TagKeys": ["department"]}),
        (MALLORY, "iam:CreateRole", f"arn:aws:iam::{ACCOUNT}:role/sleeper", _tags(department="team-a")),
        (MALLORY, "sts:TagSession", TOOLS, _tags(department="team-a")),
        (MALLORY, "iam:UpdateAssumeRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/team-a-ci",
         {"aws:ResourceTag/department": "team-a"}),
    ]
    allowed = [
        (MALLORY, "iam:TagRole", MALLORY, _tags(**{"cost-center": "4711"})),
        (MALLORY, "sts:TagSession", TOOLS, _tags(project="x")),
        (ADMIN, "iam:TagUser", f"arn:aws:iam::{ACCOUNT}:user/bob", _tags(department="team-a")),
        (ADMIN, "sts:TagSession", TOOLS, _tags(department="team-a")),
    ]
    guarded = _decide(denied + allowed, [_guard()])
    for result in guarded:
        assert all(r["ignored"] == [] and not r.get("unsafe") for r in result["resources"]), result
    assert [r["decision"] for r in guarded] == ["ExplicitlyDenied"] * len(denied) + ["Allowed"] * len(allowed)
    # Without the guard every one of them is allowed: the denials are the guard's.
    assert {r["decision"] for r in _decide(denied, [])} == {"Allowed"}


def test_a_guard_split_into_several_scps_decides_every_request_as_the_whole():
    """20 administrator patterns too long for one SCP: `gpu-share guard -o` writes the guard as
    several; attached together they deny and allow exactly what the single policy did."""
    from cdk_gpu_share.core.policy.guard import SCP_MAX_CHARACTERS, split_guard

    sso = f"arn:aws:iam::{ACCOUNT}:role/aws-reserved/sso.amazonaws.com/eu-west-1/AWSReservedSSO_PlatformAdmin"
    raw = {"platform": {"name": "p"}, "fairshare": {"capacity": {"g5.xlarge": 2}},
           "security": {"administrators": [f"{sso}{i:02d}_*" for i in range(20)]},
           "teams": [{"name": "team-a", "guarantee": {"g5.xlarge": 1}, "principal_tag": "department"},
                     {"name": "team-b", "guarantee": {"g5.xlarge": 1}}]}
    whole = guard_policy(parse_config(raw))
    parts = [p.document for p in split_guard(whole)]
    assert len(parts) > 1 and all(len(json.dumps(p, separators=(",", ":"))) <= SCP_MAX_CHARACTERS for p in parts)
    admin, other_admin = f"{sso}07_0123456789abcdef", f"{sso}19_fedcba9876543210"
    cases = []
    for who in (MALLORY, admin, other_admin):
        cases += [
            (who, "iam:TagRole", MALLORY, _tags(department="team-a")),
            (who, "iam:TagUser", f"arn:aws:iam::{ACCOUNT}:user/bob", _tags(**{"gpu-share:team": "team-b"})),
            (who, "iam:UntagRole", MALLORY, {"aws:TagKeys": ["department"]}),
            (who, "iam:CreateRole", f"arn:aws:iam::{ACCOUNT}:role/sleeper", _tags(department="team-a")),
            (who, "sts:TagSession", TOOLS, _tags(department="team-a")),
            (who, "iam:UpdateAssumeRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/team-a-ci",
             {"aws:ResourceTag/department": "team-a"}),
            (who, "iam:UpdateAssumeRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/team-b-ci",
             {"aws:ResourceTag/gpu-share:team": "team-b"}),
            (who, "iam:TagRole", MALLORY, _tags(**{"cost-center": "4711"})),
        ]
    as_whole = [r["decision"] for r in _decide(cases, [whole])]
    as_parts = [r["decision"] for r in _decide(cases, parts)]
    assert as_parts == as_whole
    # Mallory is denied the seven identity changes (not the unrelated tag); two administrators,
    # matching different patterns, are allowed every one.
    assert as_whole == (["ExplicitlyDenied"] * 7 + ["Allowed"]) + ["Allowed"] * 16
