"""`gpu-share schema`: a JSON Schema of platform.yaml, from the validator's own model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from cdk_gpu_share.cli import main
from cdk_gpu_share.core.configuration import schema as config_schema
from cdk_gpu_share.core.configuration.parse import load_config

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = [ROOT / "platform.yaml", *sorted((ROOT / "examples").glob("*.yaml"))]


def schema() -> dict:
    return config_schema.platform_schema()


def test_cli_prints_the_shipped_schema_file(capsys):
    assert main(["schema"]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed) == schema()
    assert (ROOT / "platform.schema.json").read_text() == printed, "run `gpu-share schema > platform.schema.json`"


def test_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(schema())


def test_every_key_the_validator_takes_is_described_and_nothing_else():
    for section, keys in config_schema.validator_keys().items():
        assert set(config_schema.descriptions()[section]) == keys, section


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_yaml_names_the_schema_and_passes_it(path):
    first = path.read_text().splitlines()[0]
    match = re.fullmatch(r"# yaml-language-server: \$schema=(\S+)", first)
    assert match, first
    # The examples are the package's folder (examples/ links to it) and the schema ships beside
    # them in the package (platform.schema.json at the root links to it): either path finds it.
    assert (path.parent / match.group(1)).resolve() == (ROOT / "platform.schema.json").resolve()
    jsonschema.validate(yaml.safe_load(path.read_text()), schema())
    load_config(path)  # and the validator agrees


def _errors(doc: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema())
    return [e.message for e in validator.iter_errors(doc)]


BASE = {"teams": [{"name": "team-a", "guarantee": {"g5.xlarge": 1}}], "fairshare": {"capacity": {"g5.xlarge": 1}}}


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d["teams"][0].update(sharin="lend"), "sharin"),
        (lambda d: d["teams"][0].update(sharing="borrow"), "borrow"),
        (lambda d: d["teams"][0].update(name="team_b"), "team_b"),
        (lambda d: d["fairshare"].update(job_attempts=11), "11"),
        (lambda d: d["teams"][0]["guarantee"].update({"g5.xlarge": {"gpus": 1}}), "gpus"),
        (lambda d: d["fairshare"]["capacity"].update({"ml.g5.xlarge": 1}), "ml.g5.xlarge"),
    ],
)
def test_schema_underlines_what_the_validator_refuses(edit, needle):
    import copy

    doc = copy.deepcopy(BASE)
    assert _errors(doc) == []
    edit(doc)
    errors = _errors(doc)
    assert any(needle in e for e in errors), errors


def test_schema_shows_the_shorthand_and_the_ranges():
    s = schema()
    team = s["$defs"]["team"]["properties"]
    assert team["sharing"]["enum"] == ["reserve", "lend", "lend_and_borrow"]
    assert team["fair_share_weight"]["maximum"] == 100
    forms = s["$defs"]["amountOrCount"]["oneOf"]
    assert forms[0]["type"] == "integer" and "shorthand" in forms[0]["description"]
    assert all(p.get("description") for p in team.values())
