"""Mutation score of the core: mutmut over core/ with per-module test selection.

``make mutation`` runs this. For each module below, mutmut mutates that one file
and runs only that module's test files (one worker, so it can share the machine),
then this prints killed / total / score per module. Survivors that no input can
tell apart from the original are listed, with the reason, in
``tools/equivalent_mutants.yaml``; they are reported in their own column and left
out of the score's denominator. A listed entry that matches no survivor any more
is reported as stale.

Each module gets its own mutmut project under ``mutants/<module>/`` (mutmut reads
its settings from the working directory's pyproject.toml and keeps its cache in
``./mutants``), so the test selection of one module never invalidates another's
cache. The project root's src/, tests/ and the files the tests read are linked in.

Usage::

    python tools/mutation.py                     # every module, from scratch
    python tools/mutation.py mig config          # some modules
    python tools/mutation.py config --survivors  # re-test last run's survivors (not those listed as equivalent) and unchecked mutants
    python tools/mutation.py reclaim --resume    # continue an interrupted run (mutants without a result)
    python tools/mutation.py config --only 'x__number*'   # test a subset of mutants by name (fnmatch)
    python tools/mutation.py reclaim --sample 7  # a tenth of the mutants, spread over every function
    python tools/mutation.py config --report     # print the score of the last run, run nothing
    python tools/mutation.py config --show       # print each unlisted survivor's diff
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "mutants"
EQUIVALENTS = ROOT / "tools" / "equivalent_mutants.yaml"
PACKAGE = "cdk_gpu_share"

# module -> the test files that own its behaviour (globs, relative to the project root).
# Construct and stack tests are left out on purpose: they synthesize through jsii, take
# seconds each, and a construct test that kills a core mutant means a core test is missing.
RECLAIM_TESTS = [
    "tests/core/test_reclaim_planner.py",
    "tests/core/test_reclaim_state.py",
    "tests/core/test_reclaim_problems.py",
    "tests/core/test_reclaim_scenarios.py",
    "tests/core/test_reclaim_properties.py",
    "tests/cli/test_reclaim_cli.py",
]
MODULES: dict[str, list[str]] = {
    "config": ["tests/core/test_config*.py"],
    "config_fields": ["tests/core/test_config*.py"],
    "config_model": ["tests/core/test_config*.py"],
    "mig": ["tests/core/test_mig_catalog.py", "tests/inference/test_cli.py", "tests/core/test_mig_rules.py"],
    **{name: RECLAIM_TESTS for name in ("reclaim", "reclaim_state", "reclaim_view")},
}
# Environment per module. The reclaim property tests draw thousands of random states
# (about 70 s a run); the mutation profile (tests/conftest.py) draws a twentieth of them,
# derandomized, and runs property tests after the example tests, so a killed mutant
# costs about a second and a survivor a few. ``make test`` keeps the full profile.
MODULE_ENV: dict[str, dict[str, str]] = {
    name: {"HYPOTHESIS_PROFILE": "mutation"} for name in ("reclaim", "reclaim_state", "reclaim_view")
}
# Extra [tool.mutmut] settings per module. mutmut stops a mutant after
# (estimated time of its tests + 1 s) * timeout_multiplier of wall time (default 15).
# The reclaim planner's loops make hanging mutants (a `pos += 1` turned into `pos = 1`):
# at 15 each cost a minute; at 5 they cost 20 s, still four times what a surviving
# mutant takes on the loaded machine, so a slow run is not mistaken for a hang.
MODULE_MUTMUT: dict[str, dict[str, float]] = {
    name: {"timeout_multiplier": 5.0} for name in ("reclaim", "reclaim_state", "reclaim_view")
}
# Tests that run the CLI in a child process are left out: the child imports the code on
# disk, never the mutant, so they cannot notice one and only cost time. Their in-process
# twins (tests/cli/test_config_cli.py, tests/inference/test_cli.py, tests/cli/test_reclaim_cli.py) run.
SUBPROCESS_TESTS = [
    "test_cli_",  # tests/core/test_config_validation.py: gpu-share validate/plan via python -m
    "test_subprocess_",  # tests/cli/test_reclaim_cli.py
    "test_non_utf8_file_is_a_config_error",
    "test_module_entry_point_runs_check_end_to_end",
    "test_core_module_imports_no_cdk_or_boto3",
]
# Files and folders the selected tests read relative to the project root.
ALSO_COPY = ["platform.yaml", "examples"]
LINKS = ["src", "tests", *ALSO_COPY]

KILLED = {1, 3}  # a test failed, or pytest hit an internal error
TIMEOUT = {36, -24, 24, 152, 255}  # the mutant made the tests hang: noticed
CRASHED = {-11, -9}  # the mutant crashed the worker: noticed
NOT_TESTED = {5, 33}  # no selected test runs this function: a survivor
SURVIVED = {0}


# Where each module lives in core/'s domain packages (the config model is three modules and the
# planner three since the split; the names stay those of equivalent_mutants.yaml and the docs).
PATHS = {
    "config": "configuration/parse", "config_fields": "configuration/fields", "config_model": "configuration/model",
    "mig": "catalog/mig",
    "reclaim": "policy/reclaim", "reclaim_state": "policy/reclaim_state", "reclaim_view": "policy/reclaim_view",
}


def _source(module: str) -> str:
    return f"src/{PACKAGE}/core/{PATHS[module]}.py"


def _test_files(module: str, globs: list[str] | None = None) -> list[str]:
    globs = globs or MODULES[module]
    files = sorted({str(p.relative_to(ROOT)) for g in globs for p in ROOT.glob(g)})
    if not files:
        sys.exit(f"no test files match {globs} for {_source(module)}")
    return files


def _pyproject(module: str, tests: list[str]) -> str:
    """The project's pyproject.toml with a [tool.mutmut] section for one module."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    text = re.sub(r"(?ms)^\[tool\.mutmut\].*?(?=^\[|\Z)", "", text)
    deselect = " and ".join(f"not {name}" for name in SUBPROCESS_TESTS)
    pytest_args = ["-p", "no:randomly", "-p", "no:cacheprovider", "--hypothesis-seed=0", "-x", "-k", deselect]
    lines = [
        "",
        "[tool.mutmut]",
        'source_paths = ["src"]',
        f'only_mutate = ["{_source(module)}"]',
        f"also_copy = {json.dumps(ALSO_COPY)}",
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        # Deterministic runs: no random order, the same Hypothesis examples for every mutant.
        f"pytest_add_cli_args = {json.dumps(pytest_args)}",
        'on_dependency_change = "ignore"',
        *(f"{key} = {json.dumps(value)}" for key, value in MODULE_MUTMUT.get(module, {}).items()),
        "",
    ]
    return text.rstrip() + "\n" + "\n".join(lines)


def _prepare(module: str, fresh: bool, tests: list[str]) -> Path:
    work = WORK / module
    if fresh and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    for name in LINKS:
        link = work / name
        if not link.is_symlink():
            link.symlink_to(os.path.relpath(ROOT / name, work))
    (work / "pyproject.toml").write_text(_pyproject(module, tests), encoding="utf-8")
    return work


def _mutmut(module: str, work: Path, names: list[str], log) -> int:
    cmd = [sys.executable, "-c", "from mutmut.__main__ import cli; cli()", "run", "--max-children", "1", *names]
    env = dict(os.environ, PYTHONHASHSEED="0", **MODULE_ENV.get(module, {}))
    return subprocess.run(cmd, cwd=work, stdout=log, stderr=subprocess.STDOUT, env=env).returncode


def _exit_codes(module: str) -> dict[str, int | None]:
    meta = WORK / module / "mutants" / (_source(module) + ".meta")
    if not meta.exists():
        return {}
    return json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]


def _diffs(module: str, names: list[str]) -> dict[str, str]:
    """Diffs of many mutants in one process (``mutmut show`` costs a second each)."""
    if not names:
        return {}
    code = (
        "import json, sys\n"
        "from mutmut.mutation.diff_apply import get_diff_for_mutant\n"
        f"path = {_source(module)!r}\n"
        "names = json.load(sys.stdin)\n"
        "print(json.dumps({n: get_diff_for_mutant(n, path=path) for n in names}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=WORK / module, input=json.dumps(names), capture_output=True, text=True
    )
    if out.returncode != 0:
        sys.exit(f"reading survivor diffs of {_source(module)} failed:\n{out.stderr}")
    return json.loads(out.stdout)


def function_of(name: str) -> str:
    """``pkg.core.config.x__number__mutmut_3`` -> ``_number``; methods as ``Class.method``."""
    mangled = name.rsplit(".", 1)[-1].rsplit("__mutmut_", 1)[0]
    if mangled.startswith("xǁ"):
        return ".".join(mangled[2:].split("ǁ"))
    return mangled[2:] if mangled.startswith("x_") else mangled


def mutated_lines(diff: str) -> list[str]:
    """The added lines of a mutant's diff, stripped: what an equivalence entry matches."""
    return [line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]


def load_equivalents(module: str) -> list[dict]:
    if not EQUIVALENTS.exists():
        return []
    data = yaml.safe_load(EQUIVALENTS.read_text(encoding="utf-8")) or {}
    entries = data.get(module) or []
    for e in entries:
        missing = {"function", "line", "reason"} - set(e)
        if missing:
            sys.exit(f"{EQUIVALENTS.name}: an entry of {module} lacks {', '.join(sorted(missing))}: {e}")
    return entries


@dataclass
class Score:
    module: str
    total: int = 0
    killed: int = 0  # includes timeouts and crashes: the tests noticed
    timeout: int = 0
    survived: list[str] = field(default_factory=list)  # includes "no tests"
    equivalent: list[tuple[str, dict]] = field(default_factory=list)
    unchecked: int = 0
    stale: list[dict] = field(default_factory=list)

    @property
    def scored(self) -> int:
        return self.total - len(self.equivalent) - self.unchecked

    @property
    def percent(self) -> float:
        return 100.0 * self.killed / self.scored if self.scored else 0.0


def score(module: str) -> Score:
    s = Score(module)
    codes = _exit_codes(module)
    s.total = len(codes)
    survivors = []
    for name, code in codes.items():
        if code is None:
            s.unchecked += 1
        elif code in KILLED or code in TIMEOUT or code in CRASHED or code == 37:
            s.killed += 1
            s.timeout += code in TIMEOUT
        else:  # survived, no tests, suspicious
            survivors.append(name)
    entries = load_equivalents(module)
    used = set()
    diffs = _diffs(module, survivors)
    for name in survivors:
        lines = mutated_lines(diffs.get(name, ""))
        match = next(
            (
                i
                for i, e in enumerate(entries)
                if e["function"] == function_of(name)
                and e["line"].strip() in lines
                and e.get("context", "") in diffs.get(name, "")  # for a line as common as `break`
            ),
            None,
        )
        if match is None:
            s.survived.append(name)
        else:
            used.add(match)
            s.equivalent.append((name, entries[match]))
    s.stale = [e for i, e in enumerate(entries) if i not in used]
    s._diffs = diffs  # type: ignore[attr-defined]
    return s


def print_table(scores: list[Score], elapsed: dict[str, float]) -> None:
    header = f"{'module':<22} {'mutants':>7} {'equiv.':>6} {'killed':>6} {'survived':>8} {'score':>7} {'time':>7}"
    print()
    print(header)
    print("-" * len(header))
    for s in scores:
        t = f"{elapsed[s.module]:.0f}s" if s.module in elapsed else "-"
        print(
            f"{PATHS[s.module] + '.py':<30} {s.total:>7} {len(s.equivalent):>6} {s.killed:>6} "
            f"{len(s.survived):>8} {s.percent:>6.1f}% {t:>7}"
        )
        if s.unchecked:
            print(f"    {s.unchecked} mutants not checked (a sampled or interrupted run); left out of the score")
        for e in s.stale:
            print(f"    stale equivalence entry (matches no survivor): {e['function']}: {e['line']}")
    print()
    print("score = killed / (mutants - equivalent); killed includes timeouts. Equivalent mutants:", EQUIVALENTS.relative_to(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("modules", nargs="*", help=f"core modules: {', '.join(MODULES)} (default: all)")
    ap.add_argument(
        "--survivors", action="store_true",
        help="re-test only the last run's survivors (not those listed as equivalent) and unchecked mutants",
    )
    ap.add_argument(
        "--resume", action="store_true",
        help="continue an interrupted run: test only the mutants that have no result yet",
    )
    ap.add_argument("--only", action="append", default=[], metavar="GLOB", help="re-test mutants whose name matches")
    ap.add_argument(
        "--sample",
        metavar="DIGITS",
        help="test only mutants whose number ends in one of DIGITS (e.g. 7: about a tenth, spread over every function)",
    )
    ap.add_argument("--report", action="store_true", help="print the last run's score; run nothing")
    ap.add_argument("--show", action="store_true", help="print the diff of every unlisted survivor")
    ap.add_argument("--tests", action="append", metavar="GLOB", help="test files instead of the module's own")
    args = ap.parse_args(argv)
    modules = args.modules or list(MODULES)
    unknown = [m for m in modules if m not in MODULES]
    if unknown:
        ap.error(f"unknown module {', '.join(unknown)}; choose from {', '.join(MODULES)}")
    incremental = args.survivors or args.resume or bool(args.only) or bool(args.sample)
    elapsed: dict[str, float] = {}
    for module in modules:
        if args.report:
            continue
        names: list[str] = []
        if args.survivors:
            # survivors, and mutants never checked (new, or of a function that changed since);
            # not the survivors listed as equivalent: no test can kill them, and each costs
            # a whole run of the module's tests (mutmut resets the result of a mutant whose
            # function changed, so a listed mutant of changed code is re-tested).
            listed = {n for n, _ in score(module).equivalent}
            names += [
                n for n, c in _exit_codes(module).items()
                if c is None or (c in SURVIVED | NOT_TESTED and n not in listed)
            ]
        if args.only:
            # mutmut matches these itself (fnmatch), also on a first run that has no mutants yet
            names += [f"*{g}" for g in args.only]
        if args.sample:
            names.append(f"*__mutmut_*[{args.sample}]")
        if incremental and not names and not (args.survivors or args.resume):
            print(f"{_source(module)}: nothing to re-test")
            continue
        tests = _test_files(module, args.tests)
        work = _prepare(module, fresh=not incremental, tests=tests)
        print(f"{_source(module)}: mutating against {' '.join(tests)}", flush=True)
        start = time.monotonic()
        with open(work / "mutmut.log", "w") as log:
            # A full run passes no names (mutmut then tests every mutant); an incremental
            # one with nothing named only takes the --survivors pass below.
            rc = _mutmut(module, work, names, log) if names or not incremental else 0
            if (args.survivors or args.resume) and rc == 0:
                # Without names mutmut tests only the mutants it has no result for: those of
                # functions changed since the last run, and any never checked.
                rc = _mutmut(module, work, [], log)
        elapsed[module] = time.monotonic() - start
        if rc != 0 and not _exit_codes(module):
            print((work / "mutmut.log").read_text()[-3000:])
            return rc
    scores = [score(m) for m in modules]
    print_table(scores, elapsed)
    if args.show:
        for s in scores:
            for name in s.survived:
                print(f"\n# {name}  ({function_of(name)})")
                print(s._diffs.get(name, ""))  # type: ignore[attr-defined]
    if elapsed:
        print(f"total time: {sum(elapsed.values()):.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
