"""`gpu-share init --example NAME`: the files the documentation's commands read ship in the package
(the repository's `examples/` is that same folder) and one command writes each into a folder; it
never overwrites a file, `list` names them, and a mistyped name is one line with the closest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cdk_gpu_share.cli import init_cmd, main
from tests.helpers import ROOT

SHIPPED = ROOT / "src" / "cdk_gpu_share" / "examples"


def _init(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["init", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_repository_s_examples_folder_is_the_package_s():
    """One copy, so the files a clone's commands read and those the wheel ships cannot differ."""
    assert (ROOT / "examples").resolve() == SHIPPED.resolve()
    assert (ROOT / "examples").is_symlink()


def test_every_shipped_example_has_a_name_and_every_name_a_file():
    files = sorted(str(p.relative_to(SHIPPED)) for p in SHIPPED.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts)
    assert sorted(file for file, _ in init_cmd.EXAMPLES.values()) == files
    written_as = [Path(file).name for file, _ in init_cmd.EXAMPLES.values()]
    assert len(set(written_as)) == len(written_as)  # two examples never write the same file


@pytest.mark.parametrize("name", init_cmd.EXAMPLES)
def test_init_example_writes_the_shipped_file_into_the_folder(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, err = _init(capsys, "--example", name)
    file = init_cmd.EXAMPLES[name][0]
    written = tmp_path / Path(file).name
    assert (code, err, out) == (0, "", f"wrote {written.name}\n")
    assert [p.name for p in tmp_path.iterdir()] == [written.name]
    shipped = (SHIPPED / file).read_text()
    text = written.read_text()
    assert text in shipped and shipped.endswith(text) and len(shipped) - len(text) in (0, len(init_cmd._SCHEMA_LINE))
    assert "$schema=../" not in text  # names a file of the repository, not of the user's folder


@pytest.mark.parametrize("name", [n for n, (file, _) in init_cmd.EXAMPLES.items()
                                  if file.endswith(".yaml") and "models:" not in (SHIPPED / file).read_text()])
def test_a_written_config_validates_where_it_is_written(name, tmp_path, capsys):
    assert _init(capsys, "--example", name, str(tmp_path / "new"))[0] == 0
    assert main(["validate", str(tmp_path / "new" / f"{name}.yaml")]) == 0
    assert "valid" in capsys.readouterr().out


def test_the_written_models_and_state_read_as_their_commands_expect(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _init(capsys, "--example", "mig-models")[0] == 0
    assert yaml.safe_load((tmp_path / "models.yaml").read_text())["models"]
    assert _init(capsys, "--example", "state")[0] == 0
    assert json.loads((tmp_path / "state.json").read_text())["teams"]
    capsys.readouterr()
    assert main(["reclaim", "plan", "state.json"]) == 0


def test_list_names_every_example_with_a_line_of_what_it_shows(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, err = _init(capsys, "--example", "list")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == list(init_cmd.EXAMPLES)
    for line, (file, what) in zip(lines, init_cmd.EXAMPLES.values()):
        assert line.endswith(f"{what} ({Path(file).name})")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("typed,closest", [("alibaba", "did you mean alibaba-openb?"),
                                            ("organization", "did you mean organisation"),
                                            ("xyz", None)])
def test_an_unknown_name_is_one_line_with_the_closest_names(typed, closest, tmp_path, capsys):
    code, out, err = _init(capsys, "--example", typed, str(tmp_path))
    assert (code, out) == (2, "") and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"gpu-share init: invalid argument: --example: is not a shipped example (got '{typed}'); ")
    assert err.rstrip().endswith("gpu-share init --example list names them all")
    assert (closest in err) if closest else "did you mean" not in err
    assert list(tmp_path.iterdir()) == []


def test_init_example_never_overwrites_a_file(tmp_path, capsys):
    (tmp_path / "kueue.yaml").write_text("mine\n")
    code, out, err = _init(capsys, "--example", "kueue", str(tmp_path))
    assert (code, out) == (2, "")
    assert err == (f"gpu-share init: invalid configuration: {tmp_path / 'kueue.yaml'}: already exists; init never "
                   "overwrites a file; run gpu-share init --example kueue in another folder, or move kueue.yaml away\n")
    assert (tmp_path / "kueue.yaml").read_text() == "mine\n"


def test_an_example_beside_a_project_is_welcome(tmp_path, capsys):
    """A project's files and an example's never share a name: both go into one folder."""
    assert _init(capsys, str(tmp_path))[0] == 0
    assert _init(capsys, "--example", "alibaba-openb", str(tmp_path))[0] == 0
    assert (tmp_path / "platform.yaml").is_file() and (tmp_path / "alibaba-openb.yaml").is_file()


def test_backend_and_example_together_are_refused(tmp_path, capsys):
    code, out, err = _init(capsys, "--example", "kueue", "--backend", "kueue", str(tmp_path))
    assert (code, out) == (2, "") and len(err.splitlines()) == 1
    assert "--backend: does not go with --example, which writes one file" in err
    assert list(tmp_path.iterdir()) == []


def test_the_hyperpod_organisation_is_the_kueue_one_on_hyperpod_s_instance_types():
    """Two examples of one organisation: the same groups and teams, `ml.` instance types."""
    def tree(name: str, prefix: str) -> tuple[list, list]:
        raw = yaml.safe_load((SHIPPED / name).read_text())
        for node in (*raw["groups"], *raw["teams"]):
            for key in ("guarantee", "borrow_limit"):
                if key in node:
                    node[key] = {k.removeprefix(prefix): v for k, v in node[key].items()}
        return raw["groups"], raw["teams"]

    assert tree("organisation-hyperpod.yaml", "ml.") == tree("organisation.yaml", "")
    assert yaml.safe_load((SHIPPED / "organisation-hyperpod.yaml").read_text())["hyperpod"]["capacity"] == \
        {"ml." + k: v for k, v in yaml.safe_load((SHIPPED / "organisation.yaml").read_text())["kueue"]["capacity"].items()}
