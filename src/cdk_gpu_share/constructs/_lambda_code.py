"""The code of this library's Lambda functions: the parts of ``cdk_gpu_share`` a handler imports,
copied into the asset under the package's own name. No Docker, no pip: the handlers need only the
standard library and the runtime's boto3."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

#: The installed package's folder: this module is ``cdk_gpu_share/constructs/_lambda_code.py``. (Not
#: ``cdk_gpu_share.__file__``: importing the package's root from here would close a circle through it.)
PACKAGE_DIR = Path(__file__).resolve().parents[1]


@jsii.implements(cdk.ILocalBundling)
class PackageBundler:
    """Copies ``parts`` (folders of the package, such as ``core`` and ``lambdas/reclaim``) and
    ``aws_files`` (modules of ``aws``: a handler's readers, not the CLI's) into the asset."""

    def __init__(self, parts: Sequence[str], aws_files: Sequence[str], packages: Sequence[str] = ()) -> None:
        self.parts = tuple(parts)
        self.aws_files = ("__init__.py", *aws_files)
        self.packages = tuple(packages)

    def try_bundle(self, output_dir: str, *, image: Any = None, **_: Any) -> bool:
        src = PACKAGE_DIR
        dst = Path(output_dir) / "cdk_gpu_share"
        dst.mkdir(parents=True, exist_ok=True)
        for name in ("__init__.py", "_version.py"):  # the package root imports its version
            shutil.copyfile(src / name, dst / name)
        (dst / "lambdas").mkdir(exist_ok=True)
        shutil.copyfile(src / "lambdas" / "__init__.py", dst / "lambdas" / "__init__.py")
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo")
        for part in self.parts:
            target = dst / part
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(src / part, target, ignore=ignore)
        (dst / "aws").mkdir(exist_ok=True)
        for name in self.aws_files:
            shutil.copyfile(src / "aws" / name, dst / "aws" / name)
        for package in self.packages:
            # An installed pure-data or pure-Python package, copied beside cdk_gpu_share.
            found = importlib.util.find_spec(package)
            if found is None or not found.submodule_search_locations:
                raise RuntimeError(f"the Lambda code needs the package {package!r}: pip install {package}")
            target = Path(output_dir) / package
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(list(found.submodule_search_locations)[0], target, ignore=ignore)
        return True


def package_code(handler_dir: str, parts: Sequence[str], aws_files: Sequence[str],
                 packages: Sequence[str] = ()) -> lambda_.Code:
    """A Lambda's code: ``parts`` and ``aws_files`` of the package, and the installed ``packages``
    (such as ``tzdata``), locally bundled and hashed by their output (never Docker).
    ``handler_dir``: the handler's folder under the package."""
    return lambda_.Code.from_asset(
        str(PACKAGE_DIR / handler_dir),
        asset_hash_type=cdk.AssetHashType.OUTPUT,
        bundling=cdk.BundlingOptions(
            image=cdk.DockerImage.from_registry("local-bundling-only-docker-is-never-used"),
            local=PackageBundler(parts, aws_files, packages),
        ),
    )
