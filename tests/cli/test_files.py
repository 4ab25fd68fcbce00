"""The one output writer (cli/_files.py): whole or nothing, links replaced, permissions kept,
and the output checked before the work."""

from __future__ import annotations

import os

import pytest

from cdk_gpu_share.cli._files import check_output, write_output
from cdk_gpu_share.core.errors import ConfigError


@pytest.fixture
def umask():
    """Set the process's umask for a test (``umask(0o077)``), and the one before back after it."""
    before = os.umask(0o022)
    yield os.umask
    os.umask(before)


def test_a_replaced_file_keeps_its_permissions_and_a_new_one_is_0644_under_umask_022(tmp_path, umask):
    private = tmp_path / "private.yaml"
    private.write_text("old")
    private.chmod(0o600)
    write_output(str(private), "new", "-o")
    assert private.read_text() == "new" and private.stat().st_mode & 0o777 == 0o600
    fresh = tmp_path / "fresh.yaml"
    write_output(str(fresh), "x", "-o")
    assert fresh.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("mask", [0o077, 0o027, 0o002, 0o000])
def test_a_new_file_honours_the_umask_as_open_does(tmp_path, umask, mask):
    umask(mask)
    with open(tmp_path / "by-open", "w") as fh:
        fh.write("x")
    write_output(str(tmp_path / "ours"), "x", "-o")
    assert (tmp_path / "ours").stat().st_mode & 0o777 == (tmp_path / "by-open").stat().st_mode & 0o777 == 0o666 & ~mask
    assert os.umask(mask) == mask, "the umask is left as it was"
    (tmp_path / "ours").chmod(0o640)
    write_output(str(tmp_path / "ours"), "y", "-o")
    assert (tmp_path / "ours").stat().st_mode & 0o777 == 0o640, "a replaced file keeps its mode"


def test_a_trace_export_is_private_under_umask_077(tmp_path, umask, monkeypatch, capsys):
    from cdk_gpu_share.cli import main
    from cdk_gpu_share.cli import trace_export_cmd as tx
    from tests.cli.test_trace_export import BUCKET, _run_cluster

    path, *_, s3 = _run_cluster(tmp_path, jobs=5)
    monkeypatch.setattr(tx, "make_client", lambda service, region: s3.client)
    monkeypatch.setattr(tx, "default_region", lambda: "us-east-1")
    umask(0o077)
    out = tmp_path / "jobs.csv"
    assert main(["trace", "export", str(path), "--from", "2026-11-02", "--to", "2026-11-30", "--bucket",
                 BUCKET, "-o", str(out)]) == 0, capsys.readouterr().err
    assert out.stat().st_mode & 0o777 == 0o600


def test_a_link_is_replaced_with_a_new_file_and_its_target_untouched(tmp_path, umask):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    victim.chmod(0o600)
    link = tmp_path / "out.csv"
    link.symlink_to(victim)
    write_output(str(link), "written", "-o")
    assert victim.read_text() == "keep" and not link.is_symlink() and link.read_text() == "written"
    assert link.stat().st_mode & 0o777 == 0o644, "the link's target's mode is not the new file's"


@pytest.mark.parametrize("name, inputs, message", [
    ("input.yaml", ["input.yaml"], "is the input"),
    ("alias.yaml", ["input.yaml"], "is the input"),  # a link to the input names the input too
    ("folder", [], "is a folder"),
    ("missing/out.csv", [], "names a folder that does not exist"),
])
def test_an_output_that_cannot_or_must_not_be_written_is_refused_first(tmp_path, name, inputs, message):
    (tmp_path / "input.yaml").write_text("x")
    (tmp_path / "alias.yaml").symlink_to(tmp_path / "input.yaml")
    (tmp_path / "folder").mkdir()
    with pytest.raises(ConfigError) as err:
        check_output(str(tmp_path / name), "-o", [str(tmp_path / i) for i in inputs])
    assert message in str(err.value) and "-o" in str(err.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_folder_that_cannot_be_written_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(ConfigError, match="is not writable"):
            check_output(str(locked / "out.csv"), "-o")
    finally:
        locked.chmod(0o700)
