"""Writing the files a command produces into a folder the user names.

One rule for every command that writes files (``kueue manifests``, ``guard -o``, the reports of
``simulate`` and ``advise``): a file is written beside its name and renamed over it, so it appears
whole or not at all, and a symbolic link of that name is replaced, never followed (it could point
outside the folder). A path that cannot be written is refused in one line naming the option.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from cdk_gpu_share.core.errors import ConfigError, Problem

__all__ = ["replace_file", "write_output"]


def replace_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a new file renamed over it (atomic; a link is replaced,
    not followed). Raises :class:`OSError` as the file system does; the caller names its option."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_output(path: str, text: str, option: str) -> None:
    """Write a command's output file whole (:func:`replace_file`); a path that cannot be written
    is a :class:`ConfigError` naming ``option`` (``--report``, ``-o``) and the fix."""
    try:
        replace_file(Path(path), text)
    except OSError as exc:
        raise ConfigError(Problem(field=option, value=path, message=f"cannot be written ({exc.strerror})",
                                  fix="choose a writable path")) from None
