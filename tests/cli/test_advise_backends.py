"""`gpu-share advise -o` on the starter config of every backend `gpu-share init` writes: the
advised config passes `gpu-share validate` and synthesizes, whatever the backend's least
guarantee (one instance on batch_quota)."""

from __future__ import annotations

import json

import pytest

from cdk_gpu_share.cli import init_cmd
from cdk_gpu_share.core.advise.config_file import instance_of, least_guarantee
from cdk_gpu_share.core.configuration import backends
from cdk_gpu_share.core.configuration.parse import load_config
from tests.cli.test_advise_cli import run, write_trace

#: What the first team of each starter config asks; the second asks nothing and sends little
#: work, so that without a lower bound the advice would take its guarantee away.
OBJECTIVES = "    objectives: {wait_p95_minutes: 1440}\n"


def starter_with_objectives(backend: str, folder) -> str:
    """The starter config of ``backend`` with objectives under its first team."""
    init_cmd.init_project(folder, backend)
    path = folder / "platform.yaml"
    lines = path.read_text().splitlines(keepends=True)
    first = next(k for k, line in enumerate(lines) if line.startswith("  - name: "))
    end = next(k for k in range(first + 1, len(lines)) if lines[k].startswith("  - name: "))
    path.write_text("".join(lines[:end]) + OBJECTIVES + "".join(lines[end:]))
    return str(path)


def busy_first_team(names: list[str], gpus: int) -> list[tuple]:
    """The first team runs two long jobs at once, the second one short job late: lending the
    second team's guarantee to the first and taking it back would throw away hours of work, so
    the least regret is the whole fleet to the first team, when the backend allows it."""
    return [("a0", names[0], 0, 10_000, gpus, 0), ("a1", names[0], 0, 10_000, gpus, 0),
            ("b0", names[1], 9_000, 60, gpus, 0)]


def test_the_least_guarantee_is_the_backends():
    assert backends.spec("batch_quota").least_guarantee_instances == 1
    assert {b.key: b.least_guarantee_instances for b in backends.registered() if b.key != "batch_quota"} \
        == {"hyperpod": 0, "fairshare": 0, "kueue": 0}


@pytest.mark.slow
@pytest.mark.parametrize("fleet", ["fixed", "size"])
@pytest.mark.parametrize("backend", init_cmd.BACKENDS)
def test_advise_o_on_every_starter_config_validates_and_synthesizes(capsys, tmp_path, backend, fleet):
    from cdk_gpu_share.stacks.app import build_platform
    from tests.helpers import new_app, synth

    config_path = starter_with_objectives(backend, tmp_path)
    config = load_config(config_path)
    names = [t.name for t in config.teams]
    _, per = instance_of(config, backend)
    trace = write_trace(tmp_path / "jobs.csv", busy_first_team(names, max(1, per // 2)))
    out_path = tmp_path / "advised.yaml"
    code, out, err = run(capsys, ["advise", config_path, "--trace", trace, "--fleet", fleet, "--workers", "1",
                                  "--json", "-o", str(out_path)])
    assert code == 0, err
    doc = json.loads(out)
    least = least_guarantee(config, backend)
    assert all(t["guarantee"]["gpu"] >= least for t in doc["teams"].values()), doc["teams"]
    code, _, err = run(capsys, ["validate", str(out_path)])
    assert code == 0, err
    app = new_app()
    build_platform(app, load_config(out_path), checks=False)
    synth(app)
