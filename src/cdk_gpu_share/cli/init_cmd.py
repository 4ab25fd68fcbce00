"""``gpu-share init``: a starter project for one backend, as ``cdk init`` writes one.

    gpu-share init                          # batch_quota, in the current folder
    gpu-share init --backend kueue my-gpus  # another backend, in a new folder

It writes ``platform.yaml`` (a commented config for the backend, validated before anything is
written), ``app.py`` (the app that turns it into stacks), ``cdk.json`` (how ``cdk`` runs the app,
with the feature flags the library is tested with) and a ``.gitignore``. The files come from
the package's ``init_templates`` folder, so the command works from an installed wheel. It never
overwrites a file: when any of them exists, it writes none.
"""

from __future__ import annotations

import argparse
import os
from importlib import resources
from pathlib import Path

from cdk_gpu_share.core.errors import ConfigError, Problem

__all__ = ["BACKENDS", "DEFAULT_BACKEND", "FILES", "init_project", "register", "template_text"]

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


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "init", help="write a starter project: platform.yaml, app.py, cdk.json and .gitignore",
        description="Write a starter project for one backend into DIR: a commented platform.yaml, the app.py that "
                    "synthesizes it, a cdk.json with the library's feature flags and a .gitignore. Then: "
                    "gpu-share validate platform.yaml, and cdk synth. Refuses to overwrite any file.")
    p.add_argument("--backend", default=DEFAULT_BACKEND, choices=BACKENDS, metavar="NAME",
                   help=f"the backend of the starter config: {', '.join(BACKENDS)} (default: {DEFAULT_BACKEND})")
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
    from cdk_gpu_share.core.config import parse_config

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


def _init(args: argparse.Namespace) -> int:
    written = init_project(args.dir, args.backend)
    for path in written:
        print(f"wrote {path}")
    where = "" if Path(args.dir) == Path(".") else f"cd {args.dir} && "
    print(f"next: {where}gpu-share validate platform.yaml && gpu-share plan platform.yaml && cdk synth")
    return 0
