"""`gpu-share init`: a starter project for each backend that validates and synthesizes as written,
with the feature flags the library is tested with; it never overwrites a file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cdk_gpu_share.cli import init_cmd, main
from cdk_gpu_share.core.configuration import backends
from cdk_gpu_share.core.configuration.parse import load_config

ROOT = Path(__file__).resolve().parents[2]
CDK = ROOT / "node_modules" / ".bin" / "cdk"


def _init(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["init", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_registered_backend_has_a_starter_config():
    assert set(init_cmd.BACKENDS) == set(backends.keys())


@pytest.mark.parametrize("backend", init_cmd.BACKENDS)
def test_init_writes_a_project_whose_config_validates(backend, tmp_path, capsys):
    code, out, err = _init(capsys, "--backend", backend, str(tmp_path / "gpus"))
    assert (code, err) == (0, "")
    folder = tmp_path / "gpus"
    assert sorted(p.name for p in folder.iterdir()) == [".gitignore", "app.py", "cdk.json", "platform.yaml"]
    assert out.splitlines()[:4] == [f"wrote {folder / name}" for name in init_cmd.FILES]
    config = load_config(folder / "platform.yaml")
    declared = [key for key in backends.keys() if config.backend(key) is not None]
    assert declared == [backend]
    assert main(["validate", str(folder / "platform.yaml")]) == 0
    assert "valid" in capsys.readouterr().out


def test_the_config_is_commented_for_a_reader(tmp_path):
    init_cmd.init_project(tmp_path, "fairshare")
    text = (tmp_path / "platform.yaml").read_text()
    assert text.startswith("# A shared GPU platform")
    assert "gpu-share validate platform.yaml" in text and "cdk synth" in text
    assert "make synth" not in text  # a pip user has no Makefile


def test_cdk_json_runs_the_app_in_the_users_folder_with_the_shipped_feature_flags(tmp_path):
    init_cmd.init_project(tmp_path)
    written = json.loads((tmp_path / "cdk.json").read_text())
    shipped = json.loads((ROOT / "cdk.json").read_text())
    assert written["app"] == "python3 app.py"  # no .venv/bin/python: the user's own environment
    assert written["context"] == shipped["context"]
    assert sum(k.startswith("@aws-cdk") for k in written["context"]) > 80


def test_app_py_is_the_shipped_app(tmp_path):
    """The same program as the repository's app.py, with its own docstring."""
    init_cmd.init_project(tmp_path)

    def code(path: Path) -> str:
        text = path.read_text()
        return text[text.index('"""', text.index('"""') + 3) + 3:]

    assert code(tmp_path / "app.py") == code(ROOT / "app.py")


def test_gitignore_keeps_outputs_and_tools_out(tmp_path):
    init_cmd.init_project(tmp_path)
    lines = (tmp_path / ".gitignore").read_text().splitlines()
    for entry in ("cdk.out/", ".venv/", "node_modules/", "jobs.csv", "report.html", "kueue-manifests/"):
        assert entry in lines


def _warnings(outdir: Path) -> list[str]:
    """Every construct warning of a cloud assembly (each stack's metadata, inline or in its
    ``additionalMetadataFile``)."""
    manifest = json.loads((outdir / "manifest.json").read_text())
    out = []
    for artifact in manifest["artifacts"].values():
        metadata = dict(artifact.get("metadata", {}))
        if "additionalMetadataFile" in artifact:
            metadata.update(json.loads((outdir / artifact["additionalMetadataFile"]).read_text()))
        out += [f"{path}: {entry['data']}" for path, entries in metadata.items()
                for entry in entries if entry["type"] == "aws:cdk:warning"]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("backend", init_cmd.BACKENDS)
def test_the_written_app_synthesizes_without_warnings(backend, tmp_path):
    """The written app.py, run as `cdk synth` runs it (its own process: jsii's Node reads the
    context and output folder from the environment it starts with), with the written cdk.json's
    context and cdk-nag on. No construct warning (a missing feature flag shows as one)."""
    init_cmd.init_project(tmp_path, backend)
    context = json.loads((tmp_path / "cdk.json").read_text())["context"]
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps(context), "CDK_OUTDIR": str(tmp_path / "cdk.out"),
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "app.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    stacks = sorted(p.name for p in (tmp_path / "cdk.out").glob("*.template.json") if ".nested." not in p.name)
    assert stacks[0].endswith("-platform.template.json") and len(stacks) == 3  # platform + 2 teams
    assert _warnings(tmp_path / "cdk.out") == []


@pytest.mark.slow
@pytest.mark.skipif(not CDK.exists(), reason="the CDK CLI is not installed (node_modules/.bin/cdk: make install)")
def test_cdk_synth_in_the_written_folder_prints_no_warning(tmp_path):
    """The real CDK CLI in the written folder, with `python3` the test's own interpreter: no
    "feature flags are not configured" notice, no warning."""
    init_cmd.init_project(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    env = {**os.environ, "PATH": os.pathsep.join([str(bin_dir), str(CDK.parent), os.environ["PATH"]])}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run([str(CDK), "synth", "--quiet", "--no-notices"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "feature flags are not configured" not in output
    assert "warning" not in output.lower(), output[-3000:]
    assert (tmp_path / "cdk.out" / "gpu-share-platform.template.json").exists()


def test_init_never_overwrites_and_writes_nothing_when_one_file_exists(tmp_path, capsys):
    (tmp_path / "cdk.json").write_text("{}")
    code, out, err = _init(capsys, str(tmp_path))
    assert (code, out) == (2, "")
    assert err == (f"gpu-share init: invalid configuration: {tmp_path / 'cdk.json'}: already exists; init never "
                   "overwrites a file; run gpu-share init in an empty folder (gpu-share init --backend batch_quota "
                   "NEW_DIR), or move cdk.json away\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cdk.json"]
    assert (tmp_path / "cdk.json").read_text() == "{}"


def test_a_dangling_link_named_like_a_file_is_refused_before_anything_is_written(tmp_path, capsys):
    (tmp_path / "app.py").symlink_to(tmp_path / "nowhere")
    code, out, err = _init(capsys, str(tmp_path))
    assert (code, out) == (2, "") and len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"{tmp_path / 'app.py'}: already exists" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.py"] and not (tmp_path / "nowhere").exists()


def test_a_second_init_names_every_file_it_would_overwrite(tmp_path, capsys):
    assert _init(capsys, str(tmp_path))[0] == 0
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    code, _, err = _init(capsys, "--backend", "kueue", str(tmp_path))
    assert code == 2 and len(err.splitlines()) == 1
    assert "(and app.py, cdk.json, .gitignore)" in err and "Traceback" not in err
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before


def test_a_mistyped_backend_gets_a_suggestion(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["init", "--backend", "kueu", str(tmp_path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "argument --backend: invalid choice: 'kueu'" in err and "did you mean 'kueue'?" in err
    assert list(tmp_path.iterdir()) == []


def test_dir_that_is_a_file_is_refused(tmp_path, capsys):
    target = tmp_path / "taken"
    target.write_text("")
    code, _, err = _init(capsys, str(target))
    assert code == 2
    assert err == (f"gpu-share init: invalid argument: DIR: is a file, not a folder (got {str(target)!r}); "
                   "pass a folder (it is created if missing)\n")


def test_init_writes_into_the_current_folder_by_default(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, _ = _init(capsys)
    assert code == 0
    assert (tmp_path / "platform.yaml").exists()
    assert out.splitlines()[-1] == "next: gpu-share validate platform.yaml && gpu-share plan platform.yaml && cdk synth"


def test_every_starter_config_links_the_configuration_reference():
    """The link a user of the wheel follows: the repository's committed reference page."""
    import re

    from cdk_gpu_share.cli.init_cmd import BACKENDS, template_text

    (repository,) = re.findall(r'^Repository = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    link = f"{repository}/blob/main/docs/configuration.md"
    assert (ROOT / "docs" / "configuration.md").read_text().count("<!-- end generated: config -->") == 1
    for backend in BACKENDS:
        assert link in template_text(f"platform-{backend}.yaml").split("\nplatform:")[0], backend
