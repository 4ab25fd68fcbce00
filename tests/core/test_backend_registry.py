"""A backend is one spec in the registry: a toy backend registered by this module, and nothing
else changed, is validated, planned, described by the schema and simulated like a built-in one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from aws_cdk.assertions import Template
from constructs import Construct

from cdk_gpu_share.cli import main
from cdk_gpu_share.core.configuration import backends
from cdk_gpu_share.core.configuration import parse as C
from cdk_gpu_share.core.configuration.backends import Backend, SectionCheck
from cdk_gpu_share.core.configuration.schema import platform_schema
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.plan import fleet_plan, format_plan
from cdk_gpu_share.core.scenario import poll_seconds_of, scenario_from_config
from cdk_gpu_share.stacks.app import build_platform


@dataclass(frozen=True)
class ToyConfig:
    capacity: dict[str, int]
    poll_minutes: int = 2


def _at_most_two_teams(c: SectionCheck) -> Iterator[Problem]:
    if len(c.members) > 2:
        yield Problem("toy", f"{len(c.members)} teams", "a toy fleet takes at most 2 teams", "remove a team")


class ToyConstruct(Construct):
    """The toy backend's construct: a queue in the platform stack and a parameter per team."""

    def __init__(self, scope: Construct, id: str, *, config: ToyConfig) -> None:
        super().__init__(scope, id)
        self.config = config
        self.queue = sqs.CfnQueue(self, "Queue")

    @classmethod
    def for_platform(cls, scope: Construct, config: C.PlatformConfig) -> ToyConstruct:
        return cls(scope, "Toy", config=config.backend("toy"))

    def add_team_to(self, team: C.TeamConfig, stack: Any) -> None:
        if team.guarantee_for(self.config.capacity):
            ssm.CfnParameter(stack, "ToyShare", type="String", value=team.name)
            stack.output("ToyQueueName", self.queue.attr_queue_name, "the toy queue")


class ToyBackend(Backend):
    key = "toy"
    strategy = "a toy scheduler"
    capacity_hint = "toy (EC2 types)"
    default_borrow_percent = 25
    construct = "tests.core.test_backend_registry:ToyConstruct"
    section_keys = {"toy": frozenset({"capacity", "poll_minutes"})}
    rules = (_at_most_two_teams,)

    def parse(self, raw: Any, problems: C.V.Problems) -> ToyConfig | None:
        data = C.read_mapping(raw, "toy", problems)
        if data is None:
            return None
        C.check_keys(data, {"capacity", "poll_minutes"}, "toy", problems)
        capacity = C.read_capacity(data.get("capacity", C.MISSING), "toy.capacity", problems, ml=False)
        minutes = C.read_int(data.get("poll_minutes", 2), "toy.poll_minutes", problems, minimum=1, maximum=60)
        return ToyConfig(capacity=capacity, poll_minutes=minutes or 2)

    def schema(self) -> dict[str, Any]:
        return {"type": "object", "description": "A toy backend.", "additionalProperties": False,
                "properties": {"capacity": {"type": "object"}, "poll_minutes": {"type": "integer", "minimum": 1}}}

    def idle_costs(self, config: Any, section: ToyConfig) -> list[dict[str, str]]:
        return [{"backend": "toy", "resource": "toy poller", "what": f"a poller every {section.poll_minutes} min"}]

    def poll_seconds(self, section: ToyConfig) -> float | None:
        return section.poll_minutes * 60.0

    resource_labels = (("AWS::SSM::Parameter", "toy shares"),)

    def describe_resource(self, resource: Any) -> list[str]:
        if resource["Type"] != "AWS::SSM::Parameter":
            return []
        return [f"{resource['Properties']['Value']}: toy share"]


@pytest.fixture
def toy() -> Iterator[ToyBackend]:
    spec = backends.register(ToyBackend())
    yield spec
    backends.unregister("toy")


def toy_config(teams: int = 2) -> dict[str, Any]:
    return {
        "platform": {"name": "gpu-share"},
        "teams": [{"name": f"team-{i}", "guarantee": {"g5.xlarge": 1}} for i in range(teams)],
        "toy": {"capacity": {"g5.xlarge": 3}, "poll_minutes": 5},
    }


def test_without_registration_the_section_is_an_unknown_key():
    with pytest.raises(ConfigError) as err:
        C.parse_config(toy_config())
    assert any(p.field == "toy" and "unknown" in p.message for p in err.value.problems), err.value.problems


def test_a_registered_backend_is_parsed_and_its_teams_found(toy):
    config = C.parse_config(toy_config())
    assert config.backend("toy") == ToyConfig(capacity={"g5.xlarge": 3}, poll_minutes=5)
    assert [t.name for t in config.teams_for("toy")] == ["team-0", "team-1"]
    assert config.backends_of(config.teams[0]) == ["toy"]
    assert "toy" in C.BACKENDS


def test_its_rules_and_the_shared_capacity_rule_run(toy):
    raw = toy_config(teams=4)
    with pytest.raises(ConfigError) as err:
        C.parse_config(raw)
    found = {(p.field, p.message) for p in err.value.problems}
    assert ("toy", "a toy fleet takes at most 2 teams") in found
    assert ("toy.capacity.g5.xlarge",
            "the teams' guarantees sum to 4 instances of g5.xlarge, above the 3 the capacity declares") in found


def test_its_section_is_checked_and_its_hint_names_it(toy):
    raw = toy_config()
    raw["toy"]["poll_minutes"] = 0
    raw["teams"][0]["guarantee"] = {"g4dn.xlarge": 1}
    with pytest.raises(ConfigError) as err:
        C.parse_config(raw)
    by_field = {p.field: p for p in err.value.problems}
    assert "toy.poll_minutes" in by_field
    fix = by_field["teams[0] (team-0).guarantee.g4dn.xlarge"].fix
    assert "fairshare (EC2 types), " in fix and fix.endswith(" or toy (EC2 types)")


def test_an_instance_type_of_two_backends_is_refused(toy):
    raw = toy_config()
    raw["fairshare"] = {"capacity": {"g5.xlarge": 3}}
    with pytest.raises(ConfigError) as err:
        C.parse_config(raw)
    assert ("toy.capacity.g5.xlarge", "is declared by fairshare too; a guarantee must map to one fleet") in {
        (p.field, p.message) for p in err.value.problems}


def test_plan_shows_its_rows_strategy_default_borrow_and_idle_costs(toy):
    plan = fleet_plan(C.parse_config(toy_config()))
    toy_plan = plan["backends"]["toy"]
    assert toy_plan["strategy"] == "a toy scheduler"
    assert [(r["team"], r["guarantee"], r["borrow_cap"]) for r in toy_plan["teams"]] == [
        ("team-0", 1.0, 0.25), ("team-1", 1.0, 0.25)]
    assert {"backend": "toy", "resource": "toy poller", "what": "a poller every 5 min"} in plan["idle_costs"]
    assert "toy: a toy scheduler" in format_plan(plan)


def test_the_schema_describes_its_section(toy):
    schema = platform_schema()
    assert schema["properties"]["toy"]["properties"]["poll_minutes"] == {"type": "integer", "minimum": 1}


def test_the_simulator_builds_its_scenario(toy):
    config = C.parse_config(toy_config())
    scenario = scenario_from_config(config, "toy")
    assert scenario["capacity"] == {"gpu": 3}
    assert [t["borrow_limit_percent"] for t in scenario["teams"]] == [25, 25]
    assert poll_seconds_of(config, "toy") == 300.0


def test_validate_plan_and_simulate_from_the_command_line(toy, tmp_path, capsys):
    path = tmp_path / "toy.yaml"
    path.write_text(json.dumps(toy_config()))
    assert main(["validate", str(path)]) == 0
    assert "toy: 2 teams on 3 g5.xlarge" in capsys.readouterr().out
    assert main(["plan", str(path), "--json"]) == 0
    assert "toy" in json.loads(capsys.readouterr().out)["backends"]
    trace = tmp_path / "trace.csv"
    trace.write_text("job_id,team,submit_time,duration_s,gpus\nj1,team-0,0,60,1\nj2,team-1,0,60,1\n")
    assert main(["simulate", "--config", str(path), "--backend", "toy", "--trace", str(trace),
                 "--mode", "share+reclaim", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)


def test_synth_builds_its_construct_and_each_team_its_part_and_summary_lists_them(toy, tmp_path, capsys):
    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    platform = build_platform(app, C.parse_config(toy_config()), checks=False)
    assert isinstance(platform.platform.parts["toy"], ToyConstruct)
    Template.from_stack(platform.platform).resource_count_is("AWS::SQS::Queue", 1)
    for name, stack in platform.teams.items():
        team = Template.from_stack(stack)
        team.has_resource_properties("AWS::SSM::Parameter", {"Value": name})
        assert "ToyQueueName" in team.to_json()["Outputs"]
    app.synth()
    assert main(["summary", str(tmp_path / "cdk.out")]) == 0
    out = capsys.readouterr().out
    assert "2 toy shares" in out
    assert "team-0: toy share" in out and "team-1: toy share" in out


def test_a_key_already_taken_is_refused():
    with pytest.raises(ValueError, match="'fairshare' is taken"):
        backends.register(type("Dup", (ToyBackend,), {"key": "fairshare"})())
    with pytest.raises(ValueError, match="'inference' is taken"):
        backends.register(type("Inf", (ToyBackend,), {"key": "inference"})())


def test_a_spec_that_lacks_a_member_is_refused_naming_it():
    class Half:
        key = "half"
        strategy = "half a backend"

    with pytest.raises(ValueError, match=r"Half lacks .*construct.*parse.*schema.* subclass cdk_gpu_share.core.configuration.backends.Backend"):
        backends.register(Half())  # type: ignore[arg-type]
    assert "half" not in backends.keys()


def test_register_checks_every_member_of_the_protocol():
    members = {n for n in vars(backends.BackendSpec) if not n.startswith("_")} | set(backends.BackendSpec.__annotations__)
    assert set(backends._MEMBERS) == members
    assert all(hasattr(spec, name) for spec in backends.registered() for name in members)
