"""The pages a newcomer follows first run as written from the wheel: every command of their ```sh
blocks, in order, in an empty folder, with nothing but the installed wheel (and the CDK CLI of the
project's node_modules for `cdk synth`). A page that needs an example writes it with `gpu-share init
--example NAME`, and one that needs a trace makes it with `gpu-share trace sample`: a file the wheel
does not ship fails the run. The commands the test cannot run are listed below, each with why."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from tests.helpers import ROOT
from tests.test_package import _wheel_env, built, wheel, wheel_bin  # noqa: F401 (the wheel's fixtures)

#: The pages whose commands run, and a file each run must leave (relative to its folder).
PAGES = {
    "docs/getting-started.md": ["my-gpus/platform.yaml", "my-gpus/jobs.csv", "my-gpus/report.html",
                                "my-gpus/cdk.out/gpu-share-platform.template.json"],
    "docs/hierarchy.md": ["organisation.yaml"],
    "docs/simulator.md": ["alibaba-openb.yaml", "jobs.csv", "report.html"],
}

#: Commands the test does not run, by how they start, and why.
NOT_RUN = {
    "pip install ": "installs the package: the wheel is installed already, and a test installs nothing",
    "npm install ": "downloads the CDK CLI: the project's node_modules/.bin is on PATH instead",
    "cdk bootstrap": "needs an AWS account and credentials",
    "cdk deploy ": "needs an AWS account and credentials",
    "cdk destroy ": "needs an AWS account and credentials",
    "gpu-share trace convert ": "reads the public Alibaba trace, downloaded by hand",
}
#: Blocks the test does not run, by how their first command starts, and why.
BLOCKS_NOT_RUN = {
    "git clone ": "the path from a clone: `make test` itself runs there",
    "make synth": "the path from a clone: it needs the repository and its Makefile",
}

CDK_BIN = ROOT / "node_modules" / ".bin"


def sh_blocks(markdown: str) -> list[str]:
    """The ```sh blocks of a page (those indented in a list included), in order."""
    return [re.sub(r"^ {0,4}", "", b, flags=re.M) for b in re.findall(r"^ {0,4}```sh\n(.*?)^ {0,4}```", markdown,
                                                                          re.S | re.M)]


def commands(block: str) -> list[str]:
    """The commands of a block, a line continued with a backslash joined to the next."""
    joined = re.sub(r"\s*\\\n\s*", " ", block)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def _why_not(command: str, table: dict[str, str]) -> str | None:
    return next((why for start, why in table.items() if command.startswith(start)), None)


def runnable(page: str) -> tuple[list[str], set[str]]:
    """The commands of a page the test runs, and the starts of NOT_RUN and BLOCKS_NOT_RUN it used."""
    run, used = [], set()
    for block in sh_blocks((ROOT / page).read_text()):
        cmds = commands(block)
        skip = next((start for start in BLOCKS_NOT_RUN if cmds and cmds[0].startswith(start)), None)
        if skip:
            used.add(skip)
            continue
        for command in cmds:
            start = next((s for s in NOT_RUN if command.startswith(s)), None)
            if start:
                used.add(start)
            else:
                run.append(command)
    return run, used


def test_every_reason_not_to_run_a_command_is_used():
    used = set().union(*(runnable(page)[1] for page in PAGES))
    assert used == set(NOT_RUN) | set(BLOCKS_NOT_RUN), "remove the reasons no page needs: " \
        f"{(set(NOT_RUN) | set(BLOCKS_NOT_RUN)) - used}"


@pytest.mark.parametrize("page", PAGES)
def test_every_file_a_command_reads_is_made_by_an_earlier_one(page):
    """A config other than the one `gpu-share init` writes comes from `init --example`, a trace
    from `trace sample` (or `trace convert`, which the page says to download for)."""
    made = {"platform.yaml"}
    for command in runnable(page)[0]:
        for name in re.findall(r"--(?:config|trace)[ =](\S+)", command):
            assert name in made, f"{page}: `{command}` reads {name}, which no earlier command writes"
        if m := re.match(r"gpu-share init --example (\S+)", command):
            from cdk_gpu_share.cli.init_cmd import EXAMPLES

            made.add(EXAMPLES[m.group(1)][0].rpartition("/")[2])
        made.update(re.findall(r"(?:^gpu-share trace (?:sample|convert) .*)-o (\S+)", command))
    assert runnable(page)[0]


@pytest.mark.slow
@pytest.mark.skipif(not (CDK_BIN / "cdk").exists(), reason="the CDK CLI is not installed (node_modules: make install)")
@pytest.mark.parametrize("page", PAGES)
def test_the_page_s_commands_run_from_the_wheel_in_an_empty_folder(page, wheel_bin, tmp_path):  # noqa: F811
    run, _ = runnable(page)
    # Each command announced on stderr first, so that a failure names it.
    script = "\n".join(["set -euo pipefail", *(f"echo '>>> '{_quote(c)} >&2\n{c}" for c in run)])
    env = _wheel_env(wheel_bin)
    env["PATH"] = f"{wheel_bin}{os.pathsep}{CDK_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    env["CDK_DISABLE_CLI_TELEMETRY"] = "true"
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=2400)
    ran = [line[4:] for line in done.stderr.splitlines() if line.startswith(">>> ")]
    assert done.returncode == 0, f"{page}: `{ran[-1] if ran else '?'}` failed:\n{(done.stdout + done.stderr)[-3000:]}"
    assert ran == run
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    for name in PAGES[page]:
        assert (tmp_path / name).is_file(), f"{page}: no {name} after its commands"


def _quote(command: str) -> str:
    return "'" + command.replace("'", "'\\''") + "'"


def test_commands_join_continued_lines_and_drop_comments():
    assert commands("a \\\n    b --c\n# note\n\nd  # why\n") == ["a b --c", "d  # why"]


def test_sh_blocks_finds_indented_blocks_and_leaves_other_languages():
    page = "```sh\none\n```\n\n1. step\n\n    ```sh\n    two\n    ```\n\n```console\n$ three\n```\n"
    assert sh_blocks(page) == ["one\n", "two\n"]
