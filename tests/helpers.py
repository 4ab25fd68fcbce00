"""Shared test helpers: synthesis with every gate on, cfn-lint, snapshots."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import assertions
from cdk_nag import AwsSolutionsChecks

ROOT = Path(__file__).resolve().parents[1]
FEATURE_FLAGS: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text())["context"]


def new_app(**context: Any) -> cdk.App:
    """An App with the project's feature flags (validateAgainstDefaultRules on) and cdk-nag.

    Each App gets its own temporary outdir, so tests never write into cdk.out.
    """
    ctx = {k: v for k, v in FEATURE_FLAGS.items() if k.startswith("@aws-cdk")}
    ctx.update(context)
    app = cdk.App(context=ctx, outdir=tempfile.mkdtemp(prefix="cdk-test-"))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


class ValidationFailure(AssertionError):
    pass


def _report(outdir: str) -> dict:
    path = Path(outdir) / "validation-report.json"
    return json.loads(path.read_text()) if path.exists() else {"pluginReports": []}


def _render(violations: list[dict]) -> str:
    lines = []
    for v in violations:
        for c in v.get("violatingConstructs", []):
            lines.append(f"{v['ruleName']} at {c['constructPath']}: {v.get('description', '')}")
    return "\n".join(lines)


def synth(app: cdk.App) -> dict:
    """Synthesize ``app`` with every policy-validation plugin; fail on any unacknowledged finding.

    Returns the validation report (``pluginReports`` with ``suppressedViolations``).
    """
    try:
        app.synth()
    except Exception as exc:  # jsii raises RuntimeError("ValidationFailed: ...")
        text = str(exc)
        m = re.search(r"found in: (\S+validation-report\.json)", text)
        if m:
            report = json.loads(Path(m.group(1)).read_text())
            violations = [v for r in report["pluginReports"] for v in r.get("violations", [])]
            raise ValidationFailure("unacknowledged findings:\n" + _render(violations)) from None
        raise
    return _report(app.outdir)


def acknowledged(report: dict) -> list[dict]:
    return [v for r in report.get("pluginReports", []) for v in r.get("suppressedViolations", [])]


def assert_nag_clean(report: dict) -> None:
    """No unacknowledged finding, and every acknowledgement carries a real reason."""
    violations = [
        v
        for r in report.get("pluginReports", [])
        for v in r.get("violations", [])
        # Construct annotations of severity warning are advice to the user (asserted by the tests
        # that expect them), not findings of a rule pack.
        if not (r.get("pluginName") == "Construct Annotations" and v.get("severity") == "warning")
    ]
    assert not violations, _render(violations)
    for v in acknowledged(report):
        assert len(v.get("reason", "")) >= 20, f"acknowledgement of {v['ruleName']} has no real reason"


def cfn_lint_findings(template: dict, levels: str = "E") -> list[str]:
    """cfn-lint findings in one template whose rule ids start with one of ``levels``
    (``E`` errors, ``W`` warnings, ``I`` informational)."""
    from cfnlint.api import ManualArgs, lint

    matches = lint(json.dumps(template), config=ManualArgs(regions=["us-east-1"]))
    return [f"{m.rule.id} {m.message} ({'/'.join(map(str, m.path))})" for m in matches if m.rule.id[0] in levels]


def cfn_lint_errors(template: dict) -> list[str]:
    """cfn-lint errors (rule ids starting with E) in one template."""
    return cfn_lint_findings(template, "E")


def assert_cfn_lint_clean(template: dict | assertions.Template) -> None:
    if isinstance(template, assertions.Template):
        template = template.to_json()
    errors = cfn_lint_errors(template)
    assert not errors, "cfn-lint errors:\n" + "\n".join(errors)


_HASH = re.compile(r"[0-9a-f]{64}")


def scrub(value: Any) -> Any:
    """Replace asset hashes (64 hex digits) so snapshots survive code changes."""
    if isinstance(value, dict):
        return {_HASH.sub("ASSET-HASH", k): scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, str):
        return _HASH.sub("ASSET-HASH", value)
    return value
