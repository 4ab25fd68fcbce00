"""The one output writer (cli/_files.py): whole or nothing, links replaced, permissions kept,
and the output checked before the work."""

from __future__ import annotations

import os

import pytest

from cdk_gpu_share.cli._files import check_output, write_output
from cdk_gpu_share.core.errors import ConfigError


def test_a_replaced_file_keeps_its_permissions_and_a_new_one_is_0644(tmp_path):
    private = tmp_path / "private.yaml"
    private.write_text("old")
    private.chmod(0o600)
    write_output(str(private), "new", "-o")
    assert private.read_text() == "new" and private.stat().st_mode & 0o777 == 0o600
    fresh = tmp_path / "fresh.yaml"
    write_output(str(fresh), "x", "-o")
    assert fresh.stat().st_mode & 0o777 == 0o644


def test_a_link_is_replaced_with_a_new_file_and_its_target_untouched(tmp_path):
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
