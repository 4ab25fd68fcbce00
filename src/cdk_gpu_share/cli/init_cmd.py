"""``gpu-share init``: a starter project for one backend, as ``cdk init`` writes one.

    gpu-share init                          # batch_quota, in the current folder
    gpu-share init --backend kueue my-gpus  # another backend, in a new folder
    gpu-share init --example alibaba-openb  # one of the examples the documentation builds on
    gpu-share init --example list           # their names, each with what it shows

It writes ``platform.yaml`` (a commented config for the backend, validated before anything is
written), ``app.py`` (the app that turns it into stacks), ``cdk.json`` (how ``cdk`` runs the app,
with the feature flags the library is tested with) and a ``.gitignore``. The files come from
the package's ``init_templates`` folder, so the command works from an installed wheel. It never
overwrites a file: when any of them exists, it writes none.

``--example NAME`` writes one file of the package's ``examples`` folder instead (the configs, the
models and the cluster state the documentation's commands read), under its own name.
"""

from __future__ import annotations

import argparse
import difflib
import os
from importlib import resources
from pathlib import Path

from cdk_gpu_share.core.errors import ConfigError, Problem

__all__ = ["BACKENDS", "DEFAULT_BACKEND", "EXAMPLES", "FILES", "example_text", "init_project", "register",
           "template_text", "write_example"]

#: The backends ``init`` has a starter config for, in the order ``--help`` lists them.
BACKENDS = ("batch_quota", "fairshare", "hyperpod", "kueue")
DEFAULT_BACKEND = "batch_quota"
#: Each file ``init`` writes, from the template of that name in ``init_templates``
#: (``{backend}`` is the chosen backend).
FILES = {
    "platform.yaml": "platform-{backend}.yaml",
    "app.py": "app.py.tmpl",
    "cdk.json": "cdk.json",
    ".gitignore": "gitignore.tmpl",
}
#: The files ``init --example NAME`` writes: each name, its file in the package's ``examples``
#: folder (written under the file's own name) and what it shows, in the order ``--example list``
#: prints them.
EXAMPLES: dict[str, tuple[str, str]] = {
    "alibaba-openb": ("alibaba-openb.yaml", "the Alibaba GPU trace's four QoS classes as four teams on a fair-share "
                      "fleet of 32 GPUs"),
    "organisation": ("organisation.yaml", "a tree of quotas: two divisions, five teams, one division with a pool of "
                     "its own (on Kueue)"),
    "organisation-hyperpod": ("organisation-hyperpod.yaml", "the same tree on a SageMaker HyperPod cluster, which "
                              "deploys a flat compilation of it"),
    "hyperpod": ("hyperpod.yaml", "three teams' compute quotas on a SageMaker HyperPod cluster"),
    "windows": ("windows.yaml", "quotas that follow the clock: weekday nights in Berlin and Sunday afternoons in "
                "New York, on Batch quota management and HyperPod"),
    "kueue": ("kueue.yaml", "three teams' ClusterQueues in one Cohort on an Amazon EKS cluster of your own"),
    "inference": ("inference.yaml", "two teams' models on MIG partitions of one shared ml.p4d.24xlarge"),
    "mig-models": ("mig/models.yaml", "models to size with gpu-share mig fit"),
    "state": ("state.json", "a cluster state for gpu-share reclaim plan"),
    "submit-training-job": ("submit_training_job.py", "submits a SageMaker training job into a team's quota share"),
}
#: The first line of a shipped YAML file names the repository's schema file for editors; the
#: copy in a user's folder has no such file beside it, so the line is left out.
_SCHEMA_LINE = "# yaml-language-server: $schema=../platform.schema.json\n"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "init", help="write a starter project: platform.yaml, app.py, cdk.json and .gitignore",
        description="Write a starter project for one backend into DIR: a commented platform.yaml, the app.py that "
                    "synthesizes it, a cdk.json with the library's feature flags and a .gitignore. Then: "
                    "gpu-share validate platform.yaml, and cdk synth. With --example NAME, one of the shipped examples the "
                    "documentation builds on instead (--example list names them). Refuses to overwrite any file.")
    p.add_argument("--backend", default=None, choices=BACKENDS, metavar="NAME",
                   help=f"the backend of the starter config: {', '.join(BACKENDS)} (default: {DEFAULT_BACKEND})")
    p.add_argument("--example", metavar="NAME",
                   help="write one of the shipped examples the documentation builds on (a config, models for mig "
                        "fit, a cluster state) into DIR instead of a project; 'list' names them")
    p.add_argument("dir", nargs="?", default=".", metavar="DIR",
                   help="the folder to write into, created if missing (default: the current folder)")
    p.set_defaults(func=_init)


def template_text(name: str) -> str:
    """The text of one file of the package's ``init_templates`` folder."""
    return resources.files("cdk_gpu_share.cli").joinpath("init_templates").joinpath(name).read_text(encoding="utf-8")


def init_project(folder: str | Path, backend: str = DEFAULT_BACKEND) -> list[Path]:
    """Write the starter project into ``folder``; the paths written, in :data:`FILES` order.

    The config is validated first, and every target is checked before the first is written,
    so a refusal leaves the folder as it was.
    """
    from cdk_gpu_share.core import validation as V
    from cdk_gpu_share.core.configuration.parse import parse_config

    if backend not in BACKENDS:
        raise ConfigError(Problem("--backend", backend, "has no starter config", f"use one of {', '.join(BACKENDS)}"))
    root = Path(folder)
    if root.exists() and not root.is_dir():
        raise ConfigError(Problem("DIR", str(root), "is a file, not a folder", "pass a folder (it is created if missing)"))
    texts = {name: template_text(template.format(backend=backend)) for name, template in FILES.items()}
    # The shipped template must pass the loader every other command uses.
    parse_config(V.load_yaml(texts["platform.yaml"], source=f"init template for {backend}"),
                 source=f"init template for {backend}")
    # lexists: a link of that name counts even when it points nowhere ("x" below would refuse it
    # after the first files were written).
    taken = [root / name for name in FILES if os.path.lexists(root / name)]
    if taken:
        more = f" (and {', '.join(p.name for p in taken[1:])})" if len(taken) > 1 else ""
        raise ConfigError(Problem(
            str(taken[0]), None, f"already exists{more}; init never overwrites a file",
            f"run gpu-share init in an empty folder (gpu-share init --backend {backend} NEW_DIR), or move "
            f"{', '.join(p.name for p in taken)} away"))
    if root.is_dir() and not os.access(root, os.W_OK | os.X_OK):
        raise ConfigError(Problem("DIR", str(root), "cannot be written", "run gpu-share init in a folder you may write"))
    root.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    try:
        for name, text in texts.items():
            path = root / name
            with path.open("x", encoding="utf-8") as fh:  # "x": never replace a file created meanwhile
                written.append(path)
                fh.write(text)
    except OSError as exc:
        for path in written:  # all or nothing, as the refusals above
            path.unlink(missing_ok=True)
        raise ConfigError(Problem(str(root / name), None, f"cannot be written ({exc.strerror or exc}); nothing was "
                                  "written", "run gpu-share init in an empty folder you may write")) from None
    return written


def _example_path(name: str) -> str:
    """The file of a shipped example in the package's ``examples`` folder; an unknown name is one
    problem naming the closest ones."""
    if name not in EXAMPLES:
        close = difflib.get_close_matches(name, EXAMPLES, n=3, cutoff=0.5)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise ConfigError(Problem("--example", name, "is not a shipped example",
                                  f"{hint}gpu-share init --example list names them all"))
    return EXAMPLES[name][0]


def example_text(name: str) -> str:
    """The text ``init --example NAME`` writes: the shipped file, without its editor-schema line."""
    path = resources.files("cdk_gpu_share").joinpath("examples", *_example_path(name).split("/"))
    return path.read_text(encoding="utf-8").removeprefix(_SCHEMA_LINE)


def write_example(name: str, folder: str | Path = ".") -> Path:
    """Write the shipped example ``name`` into ``folder`` under its file's name; never over a file."""
    text = example_text(name)
    root = Path(folder)
    if root.exists() and not root.is_dir():
        raise ConfigError(Problem("DIR", str(root), "is a file, not a folder", "pass a folder (it is created if missing)"))
    target = root / Path(EXAMPLES[name][0]).name
    if os.path.lexists(target):
        raise ConfigError(Problem(str(target), None, "already exists; init never overwrites a file",
                                  f"run gpu-share init --example {name} in another folder, or move {target.name} away"))
    try:
        root.mkdir(parents=True, exist_ok=True)
        with target.open("x", encoding="utf-8") as fh:  # "x": never replace a file created meanwhile
            fh.write(text)
    except OSError as exc:
        raise ConfigError(Problem(str(target), None, f"cannot be written ({exc.strerror or exc})",
                                  "run gpu-share init --example in a folder you may write")) from None
    return target


def _list_examples() -> int:
    width = max(map(len, EXAMPLES))
    for name, (file, what) in EXAMPLES.items():
        print(f"{name:<{width}}  {what} ({Path(file).name})")
    return 0


def _init(args: argparse.Namespace) -> int:
    if args.example is not None:
        if args.backend is not None:
            raise ConfigError(Problem("--backend", args.backend, "does not go with --example, which writes one file",
                                      "drop one of them"))
        if args.example == "list":
            return _list_examples()
        path = write_example(args.example, args.dir)
        print(f"wrote {path}")
        return 0
    backend = args.backend or DEFAULT_BACKEND
    written = init_project(args.dir, backend)
    for path in written:
        print(f"wrote {path}")
    where = "" if Path(args.dir) == Path(".") else f"cd {args.dir} && "
    print(f"next: {where}gpu-share validate platform.yaml && gpu-share plan platform.yaml && cdk synth")
    return 0
