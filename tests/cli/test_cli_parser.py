"""The `gpu-share` parser, the same for every subcommand: --version, the config as a positional
argument or as --config, and a suggestion for a mistyped option or subcommand."""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys

import pytest

import cdk_gpu_share
from cdk_gpu_share import cli
from cdk_gpu_share.cli import build_parser, main
from tests.helpers import ROOT

PLATFORM = str(ROOT / "platform.yaml")


def _usage_error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    return err


# ---------------------------------------------------------------------------
# --version


def test_version_prints_the_installed_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"gpu-share {importlib.metadata.version('cdk-gpu-share')}\n"


def test_version_is_the_package_version_and_the_project_version():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert cdk_gpu_share.__version__ == project["version"] == "0.1.0"
    assert cli.package_version() == "0.1.0"


def test_version_falls_back_to_the_package_when_it_is_not_installed(capsys, monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    monkeypatch.setattr(cdk_gpu_share, "__version__", "9.8.7")
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out == "gpu-share 9.8.7\n"


def test_version_from_the_command_line():
    result = subprocess.run([sys.executable, "-m", "cdk_gpu_share.cli", "--version"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0
    assert result.stdout == "gpu-share 0.1.0\n"


# ---------------------------------------------------------------------------
# the config: positional or --config


@pytest.mark.parametrize("command", ["validate", "plan"])
@pytest.mark.parametrize("spelling", [[PLATFORM], ["--config", PLATFORM], [PLATFORM, "--config", PLATFORM]])
def test_validate_and_plan_take_the_config_either_way(command, spelling, capsys):
    assert main([command, *spelling]) == 0
    out = capsys.readouterr().out
    assert ("valid: platform gpu-share" if command == "validate" else "platform gpu-share") in out


def test_validate_json_with_config_flag(capsys):
    assert main(["validate", "--json", "--config", PLATFORM]) == 0
    assert '"valid": true' in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["simulate", PLATFORM, "--trace", "t.csv", "--mode", "share"],
    ["simulate", "--config", PLATFORM, "--trace", "t.csv", "--mode", "share"],
    ["status", PLATFORM, "--queue", "q"],
    ["status", "--config", PLATFORM, "--queue", "q"],
    ["trace", "sample", PLATFORM],
    ["trace", "sample", "--config", PLATFORM],
    ["guard", PLATFORM],
    ["guard", "--config", PLATFORM],
])
def test_every_command_reading_a_config_takes_both_spellings(argv):
    args = build_parser().parse_args(argv)
    assert args.config == PLATFORM
    assert "config_positional" not in vars(args)
    assert not any(k.startswith("_") for k in vars(args))


def test_an_optional_config_may_be_left_out():
    assert build_parser().parse_args(["status", "--queue", "q"]).config is None
    assert build_parser().parse_args(["trace", "sample"]).config is None


@pytest.mark.parametrize("argv, message", [
    (["validate"], "the following arguments are required: CONFIG (or --config CONFIG)"),
    (["plan", "a.yaml", "--config", "b.yaml"], "the config is given twice (a.yaml and --config b.yaml)"),
    (["simulate", "--trace", "t.csv", "--compare"],
     "one of the arguments PLATFORM.yaml, --config PLATFORM.yaml or --scenario is required"),
    (["simulate", "p.yaml", "--scenario", "s.json", "--trace", "t.csv"],
     "argument PLATFORM.yaml: not allowed with argument --scenario"),
    (["simulate", "--config", "p.yaml", "--scenario", "s.json", "--trace", "t.csv"],
     "not allowed with argument"),
])
def test_config_usage_errors_exit_2(argv, message, capsys):
    err = _usage_error(argv, capsys)
    assert message in err
    assert err.startswith(f"usage: gpu-share {argv[0]}")


# ---------------------------------------------------------------------------
# did you mean


def _leaves(parser: argparse.ArgumentParser, path=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(path)
        return
    for name, child in subs[0].choices.items():
        yield from _leaves(child, (*path, name))


#: Per subcommand: a command line that parses, with one long option mistyped, and the option meant.
MISTYPED = {
    "init": (["init", "--backend", "kueue", "--bakend", "kueue"], "--backend"),
    "validate": (["validate", PLATFORM, "--jsno"], "--json"),
    "plan": (["plan", PLATFORM, "--jsno"], "--json"),
    "guard": (["guard", PLATFORM, "--partiton", "aws"], "--partition"),
    "schema": (["schema", "--hepl"], "--help"),
    "summary": (["summary", "cdk.out", "--hlep"], "--help"),
    "reclaim plan": (["reclaim", "plan", "s.json", "--compcat"], "--compact"),
    "mig check": (["mig", "check", "--gpu", "H100-80GB", "--gpuu", "mig-1g.10gb"], "--gpu"),
    "mig layouts": (["mig", "layouts", "--gpu", "H100-80GB", "--jsno"], "--json"),
    "mig fit": (["mig", "fit", "examples/mig/models.yaml", "--isolate-tems"], "--isolate-teams"),
    "simulate": (["simulate", "--config", PLATFORM, "--trace", "t.csv", "--compre"], "--compare"),
    "advise": (["advise", "--config", PLATFORM, "--trace", "t.csv", "--fleeet", "size"], "--fleet"),
    "eta": (["eta", "--config", PLATFORM, "--trace", "t.csv", "--backtest", "--sampels", "4"], "--samples"),
    "trace convert": (["trace", "convert", "--from", "alibaba-openb", "f.csv", "--ouptut", "o.csv"], "--output"),
    "trace sample": (["trace", "sample", "--sede", "3"], "--seed"),
    "trace export": (["trace", "export", PLATFORM, "--from", "2026-12-01", "--to", "2026-12-02", "--bucekt", "b"],
                     "--bucket"),
    "status": (["status", "--queue", "q", "--regoin", "us-east-1"], "--region"),
    "usage": (["usage", PLATFORM, "--from", "2026-12-01", "--to", "2026-12-02", "--qeueu", "q"], "--queue"),
    "kueue manifests": (["kueue", "manifests", PLATFORM, "-o", "out", "--ouptut", "o"], "--output"),
}


def test_every_subcommand_is_covered():
    assert set(_leaves(build_parser())) == set(MISTYPED)


@pytest.mark.parametrize("command", sorted(MISTYPED))
def test_a_mistyped_option_gets_a_suggestion_in_every_subcommand(command, capsys):
    argv, meant = MISTYPED[command]
    err = _usage_error(argv, capsys)
    assert err.startswith(f"usage: gpu-share {command} ")  # the usage of the subcommand it was given to
    last = err.splitlines()[-1]  # the message is one line, after the usage
    assert last.startswith(f"gpu-share {command}: error: unrecognized arguments:")
    assert last.endswith(f"(did you mean {meant}?)")


def test_an_option_with_its_value_after_equals_gets_a_suggestion(capsys):
    err = _usage_error(["simulate", "--config", PLATFORM, "--trace", "t.csv", "--mdoe=share"], capsys)
    assert "unrecognized arguments: --mdoe=share (did you mean --mode?)" in err


def test_several_mistyped_options_each_get_a_suggestion(capsys):
    err = _usage_error(["simulate", "--config", PLATFORM, "--trace", "t.csv", "--compre", "--jsno", "--zzz"], capsys)
    assert ("unrecognized arguments: --compre --jsno --zzz "
            "(--compre: did you mean --compare?; --jsno: did you mean --json?)") in err


def test_nothing_close_gets_no_suggestion(capsys):
    err = _usage_error(["validate", PLATFORM, "--frobnicate"], capsys)
    assert err.rstrip().endswith("unrecognized arguments: --frobnicate")
    err = _usage_error(["validate", PLATFORM, "extra.yaml"], capsys)
    assert err.rstrip().endswith("unrecognized arguments: extra.yaml")


@pytest.mark.parametrize("argv, meant", [
    (["simulte"], "simulate"),
    (["reclaim", "plam"], "plan"),
    (["mig", "layots", "--gpu", "A100"], "layouts"),
    (["trace", "sampel"], "sample"),
    (["trace", "covnert"], "convert"),
    (["trace", "convert", "--from", "alibaba-openbb", "f.csv"], "alibaba-openb"),
])
def test_a_mistyped_subcommand_or_choice_gets_a_suggestion(argv, meant, capsys):
    err = _usage_error(argv, capsys)
    assert "invalid choice:" in err
    assert f"did you mean {meant!r}?" in err


def test_a_choice_far_from_every_one_gets_none(capsys):
    err = _usage_error(["frobnicate"], capsys)
    assert "invalid choice: 'frobnicate'" in err and "did you mean" not in err


def _commands(parser: argparse.ArgumentParser, path: str = "gpu-share"):
    """(path, parser) of every command and subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{path} {name}", sub
                yield from _commands(sub, f"{path} {name}")


def test_every_command_s_help_has_a_description():
    """--help of every command says what it does, beyond the one line of the command list."""
    missing = [path for path, sub in _commands(build_parser()) if not (sub.description or "").strip()]
    assert not missing, missing
