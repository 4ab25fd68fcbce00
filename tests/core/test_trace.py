"""The Alibaba OpenB -> simulator trace converter (the rule of docs/simulator.md) and
`gpu-share trace convert`; the tests that replay the real trace need GPU_SHARE_TRACE_DIR (tests/data.py)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from cdk_gpu_share.cli import main
from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.records import trace
from tests.data import alibaba_trace

ROOT = Path(__file__).resolve().parents[2]
#: The trace's four QoS classes as four teams on 32 GPUs (guarantees 16, 8, 4 and 4).
OPENB_CONFIG = ROOT / "examples" / "alibaba-openb.yaml"

HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"


def convert_text(body: str):
    return trace.convert_openb(io.StringIO(HEADER + body))


def test_the_rule_on_hand_made_rows():
    jobs = convert_text(
        "p0,1000,1,1,460,,LS,Running,10,110,20\n"  # kept: fractional GPU
        "p1,1000,1,8,1000,,BE,Running,0,500,100\n"  # kept: 8 whole GPUs
        "p2,1000,1,0,0,,LS,Running,0,100,0\n"  # no GPU: dropped
        "p3,1000,1,1,1000,,Burstable,Pending,0,100,\n"  # never scheduled: dropped
        "p4,1000,1,1,1000,,Guaranteed,Failed,0,50,50\n"  # deletion == scheduled: dropped
        "p5,1000,1,2,1000,,Guaranteed,Running,7,9,8\n"  # kept
        "p6,1000,1,1,1000,,Burstable,Running,3,4,3\n"  # kept
    )
    assert [j.as_row() for j in jobs] == [
        ["p0", "ls", "10", "90", "0.46", "2"],
        ["p1", "be", "0", "400", "8", "0"],
        ["p5", "guaranteed", "7", "1", "2", "3"],
        ["p6", "burstable", "3", "1", "1", "1"],
    ]


def test_output_is_a_trace_the_simulator_reads():
    text = trace.trace_text(convert_text("p0,1,1,1,460,,LS,Running,10,110,20\n"))
    assert text.splitlines()[0] == "job_id,team,submit_time,duration_s,gpus,priority"
    sc = sim.parse_scenario({"capacity": {"gpu": 1}, "teams": [{"name": "ls", "guarantee": {"gpu": 1}}]})
    (job,) = sim.parse_jobs(io.StringIO(text), sc)
    assert (job.id, job.team, job.submit_time, job.duration_s, job.gpus, job.priority) == (
        "p0", "ls", 10.0, 90.0, 0.46, 2)


def test_missing_column_is_named():
    with pytest.raises(ConfigError, match="qos"):
        trace.convert_openb(io.StringIO("name,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n"))


def test_non_numeric_value_names_the_line():
    with pytest.raises(ConfigError, match=r"line 3 \(deletion_time\)"):
        convert_text("p0,1,1,1,460,,LS,Running,10,110,20\np1,1,1,1,460,,LS,Running,10,soon,20\n")


def test_unknown_qos_names_the_line():
    with pytest.raises(ConfigError, match=r"line 2 \(qos\).*Premium"):
        convert_text("p0,1,1,1,460,,Premium,Running,10,110,20\n")


def test_cli_unknown_format_and_missing_file_exit_2(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["trace", "convert", "--from", "google", str(tmp_path / "x.csv")])
    assert exc.value.code == 2
    capsys.readouterr()
    assert main(["trace", "convert", "--from", "alibaba-openb", str(tmp_path / "nope.csv")]) == 2
    err = capsys.readouterr().err
    assert "nope.csv" in err and "Traceback" not in err


def test_cli_writes_stdout_or_file(capsys, tmp_path):
    src = tmp_path / "pods.csv"
    src.write_text(HEADER + "p0,1,1,1,460,,LS,Running,10,110,20\n")
    assert main(["trace", "convert", "--from", "alibaba-openb", str(src)]) == 0
    assert capsys.readouterr().out == "job_id,team,submit_time,duration_s,gpus,priority\np0,ls,10,90,0.46,2\n"
    out = tmp_path / "jobs.csv"
    assert main(["trace", "convert", "--from", "alibaba-openb", str(src), "-o", str(out)]) == 0
    assert "wrote 1 jobs" in capsys.readouterr().err
    assert out.read_text().endswith("p0,ls,10,90,0.46,2\n")


def test_cli_output_is_never_the_input_and_a_link_is_replaced_not_followed(capsys, tmp_path):
    src = tmp_path / "pods.csv"
    src.write_text(HEADER + "p0,1,1,1,460,,LS,Running,10,110,20\n")
    assert main(["trace", "convert", "--from", "alibaba-openb", str(src), "-o", str(src)]) == 2
    err = capsys.readouterr().err
    assert f"-o: is the input {src}" in err and len(err.strip().splitlines()) == 1
    assert src.read_text().startswith(HEADER)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "jobs.csv"
    link.symlink_to(victim)
    assert main(["trace", "convert", "--from", "alibaba-openb", str(src), "-o", str(link)]) == 0
    capsys.readouterr()
    assert victim.read_text() == "keep me" and not link.is_symlink()
    assert link.read_text().endswith("p0,ls,10,90,0.46,2\n")


def test_alibaba_trace_converts_to_6203_jobs(tmp_path, capsys):
    openb = alibaba_trace()
    out = tmp_path / "openb.csv"
    assert main(["trace", "convert", "--from", "alibaba-openb", str(openb), "-o", str(out)]) == 0
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 6203
    assert {r["team"] for r in rows} == {"ls", "be", "burstable", "guaranteed"}
    assert len({r["job_id"] for r in rows}) == 6203


def test_alibaba_trace_replays_against_its_example_config(tmp_path, capsys):
    openb = alibaba_trace()
    out = tmp_path / "openb.csv"
    assert main(["trace", "convert", "--from", "alibaba-openb", str(openb), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["simulate", "--config", str(OPENB_CONFIG), "--trace", str(out), "--mode", "share", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["jobs"] == d["completed"] == 6203
    assert 0 < d["utilization"] <= 1


@pytest.mark.parametrize("checkpoint, lost_gpu_hours, preemptions", [(600, 25.8, 1212), (1800, 60.8, 1203)])
def test_the_checkpoint_orders_alibaba_figures_hold_with_its_cap(tmp_path, capsys, checkpoint, lost_gpu_hours,
                                                                 preemptions):
    # Every job saves every C <= 3600 s: the cap (default max_checkpoint_seconds 3600) changes
    # nothing, and the figures docs/simulator.md publishes stay as they were.
    openb = alibaba_trace()
    out = tmp_path / "openb.csv"
    assert main(["trace", "convert", "--from", "alibaba-openb", str(openb), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["simulate", "--config", str(OPENB_CONFIG), "--trace", str(out), "--mode", "share+reclaim",
                 "--checkpoint-seconds", str(checkpoint), "--victim-order", "checkpoint", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert round(d["lost_gpu_seconds"] / 3600, 1) == lost_gpu_hours and d["preemptions"] == preemptions
