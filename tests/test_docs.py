"""The documentation: the API reference covers the public names and each has a docstring;
no file of the repository narrates the project's history; the Python examples of the README
and the docs run.

The site itself is built by `make docs` (`mkdocs build --strict`, in CI after `make test`),
which fails on a broken link, a missing page or an undocumented config field or CLI flag.
"""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
from pathlib import Path

import pytest

import cdk_gpu_share

ROOT = Path(__file__).resolve().parents[1]
API_PAGES = sorted((ROOT / "docs" / "api").glob("*.md"))
DIRECTIVE = re.compile(r"^::: ([\w.]+)\s*$", re.M)


def _documented() -> dict[str, object]:
    """Every object an API page renders (`::: dotted.path`), by path."""
    out: dict[str, object] = {}
    for page in API_PAGES:
        for path in DIRECTIVE.findall(page.read_text()):
            module, _, name = path.rpartition(".")
            try:
                out[path] = getattr(importlib.import_module(module), name)
            except (ImportError, AttributeError):
                out[path] = importlib.import_module(path)
    return out


def _public_members(cls: type) -> list[tuple[str, object]]:
    """Methods and properties a class defines itself (inherited ones are CDK's or the stdlib's)."""
    members = []
    for key, value in vars(cls).items():
        if key.startswith("_"):
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property) or inspect.isfunction(value):
            members.append((key, value))
    return members


def test_api_pages_exist():
    assert API_PAGES and _documented()


def test_every_exported_name_is_in_the_api_reference():
    documented = {id(obj) for obj in _documented().values()}
    missing = [name for name in cdk_gpu_share.__all__ if id(getattr(cdk_gpu_share, name)) not in documented]
    assert not missing, f"add these to a page of docs/api/: {missing}"


def test_every_documented_name_has_a_docstring():
    missing = []
    for path, obj in _documented().items():
        if not (inspect.getdoc(obj) or "").strip():
            missing.append(path)
        if inspect.isclass(obj):
            missing += [f"{path}.{key}" for key, member in _public_members(obj) if not (member.__doc__ or "").strip()]
    assert not missing, f"public names without a docstring (the API reference would omit them): {missing}"


# --------------------------------------------------------------------------- narration

#: What a reader must not find: the project's internal history (its sessions, steps, issues and
#: findings by number) and paths outside the repository.
NARRATION = re.compile(
    r"\bsessions? \d|\bsteps? \d|\bissues? #?\d+|\bfindings? #?\d+|\.\./shared|\bshared/(contracts|data)\b|/work/"
    r"|\bcontract `*[\w-]+\.md",
    re.I,
)

#: This file holds examples of what the pattern catches.
_SELF = Path(__file__).resolve().relative_to(ROOT)


def _tracked_text_files() -> list[Path]:
    """Every file git tracks (every file of the source tree outside a clone), but this one,
    read as UTF-8 text; binary files are left out."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        names = [Path(n) for n in listed.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = [p.relative_to(ROOT) for p in ROOT.rglob("*") if p.is_file()
                 and not {".git", ".venv", "node_modules", "cdk.out", "site"} & set(p.relative_to(ROOT).parts)]
    return [ROOT / n for n in sorted(names) if n != _SELF and (ROOT / n).is_file()]


def test_no_file_narrates_history():
    hits = []
    files = _tracked_text_files()
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if NARRATION.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert len(files) > 100 and ROOT / "benchmarks" / "policy.py" in files
    assert not hits, ("rewrite these for a reader who was not there (no session, step, issue or finding numbers, "
                      "no ../shared, no machine paths):\n" + "\n".join(hits))


@pytest.mark.parametrize("text", ["Session 7's run", "issue 10", "(finding 10)", "../shared/data/x.csv",
                                  "see shared/contracts/mig.md", "/work/shared", "Step 3 of the plan",
                                  "The rules (contract ``mig.md``)"])
def test_the_narration_pattern_catches(text):
    assert NARRATION.search(text)


@pytest.mark.parametrize("text", ["max_session_duration=4", "findings=['Resource::*']", "a session of boto3",
                                  "shared GPUs", "the issue is"])
def test_the_narration_pattern_lets_through(text):
    assert not NARRATION.search(text)


# --------------------------------------------------------------------------- the README's table

def test_the_readme_table_names_every_backends_construct_and_section():
    """"You want | Use": a row per backend, naming the construct that deploys it and its config section."""
    from cdk_gpu_share.core.configuration import backends

    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| You want | Use |"):]
    table = table[:table.index("\n\n")]
    for spec in backends.registered():
        construct = spec.construct.rpartition(":")[2]
        rows = [row for row in table.splitlines() if f"`{construct}`" in row]
        assert rows, f"the README's table has no row for {construct} ({spec.key})"
        assert construct in cdk_gpu_share.__all__
    assert any("`kueue`" in row and "`KueueQueues`" in row for row in table.splitlines())


def _leaf_parsers(parser, path=()):
    import argparse

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(path), parser
        return
    for name, child in subs[0].choices.items():
        yield from _leaf_parsers(child, (*path, name))


def test_the_readme_command_table_shows_every_command_with_its_required_arguments():
    """Each row is how the command is called: a command that needs a config shows it."""
    from cdk_gpu_share.cli import build_parser

    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| command | what it does |"):]
    table = table[:table.index("\n\n")]
    # Each row's first cell: `gpu-share mig check` / `mig layouts` names two commands.
    calls = [c.removeprefix("gpu-share ") for row in table.splitlines()[2:]
             for c in re.findall(r"`([^`]+)`", row.split("|")[1])]
    for command, parser in _leaf_parsers(build_parser()):
        mine = [c for c in calls if c == command or c.startswith(command + " ")]
        assert mine, f"the README's command table has no row for gpu-share {command}"
        spec = getattr(parser, "_config_spec", None)
        if spec is not None and spec[0] and spec[2] is None:  # required, no alternative to the config
            assert any(spec[1] in c or "CONFIG" in c for c in mine), \
                f"the README shows gpu-share {command} without its {spec[1]}"
        # One row per command (a subcommand shares its group's row: `trace convert` / `trace sample`).
        rows = [row for row in table.splitlines()[2:] if re.match(rf"\| `gpu-share {re.escape(command)}[` ]", row)]
        assert len(rows) <= 1, f"the README's command table lists gpu-share {command} {len(rows)} times"


def test_the_readme_says_what_the_job_archive_keeps_costs_and_leaves():
    """The archive is on by default: the README says so, with the plan's own figure for its cost."""
    from cdk_gpu_share.core.configuration.archive import monthly_cost
    from cdk_gpu_share.core.plan import ARCHIVE_QUOTE_JOBS_PER_DAY

    readme = " ".join((ROOT / "README.md").read_text().split())
    section = readme[readme.index("**The job archive is on by default**"):]
    section = section[:section.index("## ")]
    cost = sum(monthly_cost(ARCHIVE_QUOTE_JOBS_PER_DAY).values())
    assert f"At {ARCHIVE_QUOTE_JOBS_PER_DAY:,} jobs a day it costs about ${cost:.2f} a month" in section
    for said in ("history.retention_days", "history: {enabled: false}", "`cdk destroy` keeps both buckets, the KMS key"
                 " and the log groups", "`gpu-share summary` lists the archive, the share monitor"):
        assert said in section, said


def test_the_readme_starts_with_the_clone_s_two_commands_then_a_pip_quick_start():
    readme = (ROOT / "README.md").read_text()
    first = readme[readme.index("```sh"):]
    assert first.splitlines()[1].startswith("make synth") and first.splitlines()[2].startswith("make test")
    assert readme.index("## Quick start with pip") < readme.index("| You want | Use |")
    assert readme.index("**cdk-gpu-share** is") < readme.index("## Quick start with pip")


def test_what_make_synth_installs_is_what_the_docs_say():
    """`make synth` installs the runtime only (the dev extra comes with `make test`)."""
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^synth: install-runtime$", makefile, re.M)
    for page in (ROOT / "README.md", ROOT / "docs" / "getting-started.md"):
        text = " ".join(page.read_text().split())
        said = re.findall(r"`make synth` installs [^.;]*", text)  # what it installs, not "the Node it installs:"
        assert said and all("runtime" in s and "development tools" not in s for s in said), (page, said)


# --------------------------------------------------------------------------- Node

def test_the_readme_names_the_node_that_make_installs():
    """jsii prints an end-of-life banner at every synth on an older Node: a user's own app should
    run on the Node the project pins in package.json, and the README says which and how."""
    import json

    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]["node"]
    major = re.search(r"\d+", pinned).group()
    readme = (ROOT / "README.md").read_text()
    assert f"Node {major}" in readme and f"node@{major}" in readme
    assert 'export PATH="$PWD/node_modules/.bin:$PATH"' in readme
    assert not re.search(r"Node \d+ or later", readme)


# --------------------------------------------------------------------------- examples

def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), re.S | re.M)


def _runnable_examples() -> list[tuple[str, int, str]]:
    """Every ```python block of the README and the docs, but those that call AWS (boto3)."""
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for i, code in enumerate(_python_blocks(path)):
            if "boto3" not in code:
                out.append((str(path.relative_to(ROOT)), i, code))
    return out


_EXAMPLES = _runnable_examples()


def test_readme_has_python_examples():
    assert len(_python_blocks(ROOT / "README.md")) >= 3


@pytest.mark.slow
@pytest.mark.parametrize("where,index,code", _EXAMPLES, ids=[f"{w}:{i}" for w, i, _ in _EXAMPLES])
def test_python_example_runs(where, index, code, tmp_path, monkeypatch):
    """Each ```python block is a whole program, run from the repository root; one that builds an
    app must synthesize it."""
    from cdk_gpu_share.core.configuration import backends

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path))
    before = backends.keys()
    try:
        exec(compile(code, f"{where} python block {index}", "exec"), {"__name__": "__example__"})
    finally:
        for key in set(backends.keys()) - set(before):  # an example that registers a backend
            backends.unregister(key)


def test_the_generated_reference_pages_are_up_to_date():
    """docs/cli.md and the field tables of docs/configuration.md are committed, so they read without a
    docs build; they must say what the parser and the schema say."""
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    try:
        hooks = importlib.import_module("mkdocs_hooks")
    finally:
        sys.path.remove(str(ROOT / "tools"))
    stale = hooks.stale_pages(ROOT)
    assert not stale, f"{', '.join(stale)} out of date: run `python tools/mkdocs_hooks.py` and commit the result"
    for page in hooks.PAGES:
        text = (ROOT / page).read_text()
        assert "<!-- end generated:" in text and text.count("\n") > 200, f"{page} has no generated block"
