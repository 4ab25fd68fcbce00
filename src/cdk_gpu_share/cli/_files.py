"""Writing the files a command produces into a folder the user names.

One rule for every command that writes files (``kueue manifests``, ``guard -o``, ``trace export
-o``, ``trace convert -o``, ``trace sample -o``, ``mig fit -o``, ``advise -o``, the reports and
plots of ``simulate`` and ``advise``): a file is written beside its
name and renamed over it, so it appears whole or not at all; a symbolic link of that name is
replaced, never followed (it could point outside the folder); a file it replaces keeps its
permissions (a 0600 file stays 0600), a new one gets what ``open()`` would give it: 0666 less the
umask (0644 under the usual umask 022, 0600 under 077). A command that reads inputs or does long
work checks its output path first (:func:`check_output`), so a path it cannot write, or one
of its inputs, is refused before anything is read. A refusal is one line naming the option.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from cdk_gpu_share.core.errors import ConfigError, Problem

__all__ = ["check_output", "replace_file", "write_output"]

#: The permissions ``open()`` asks for a new file, before the umask takes its part.
NEW_FILE_MODE = 0o666


def _umask() -> int:
    """The process's umask. POSIX reads it only by setting it: it is set back at once."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _mode_of(path: Path) -> int:
    """The permissions the written file gets: those of the regular file it replaces, else those
    ``open()`` gives a new file (:data:`NEW_FILE_MODE` less the umask)."""
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode):
        return stat.S_IMODE(st.st_mode)
    return NEW_FILE_MODE & ~_umask()


def replace_file(path: Path, text: str | bytes) -> None:
    """Write ``text`` (UTF-8, or bytes as they are) to ``path`` through a new file renamed over it
    (atomic; a link is replaced, not followed; a replaced file's permissions are kept). Raises
    :class:`OSError` as the file system does; the caller names its option."""
    mode = _mode_of(path)
    data = text.encode("utf-8") if isinstance(text, str) else text
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_output(path: str, text: str | bytes, option: str) -> None:
    """Write a command's output file whole (:func:`replace_file`); a path that cannot be written
    is a :class:`ConfigError` naming ``option`` (``--report``, ``-o``) and the fix."""
    try:
        replace_file(Path(path), text)
    except OSError as exc:
        raise ConfigError(Problem(field=option, value=path, message=f"cannot be written ({exc.strerror})",
                                  fix="choose a writable path")) from None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def check_output(path: str, option: str, inputs: Iterable[str] = ()) -> None:
    """Refuse, before any reading or long work, an output :func:`write_output` could not write:
    one of the command's ``inputs`` (read, never replaced), a folder, or a path in a folder that
    does not exist or cannot be written."""
    target = Path(path)
    for name in inputs:
        if _same_file(target, Path(name)):
            raise ConfigError(Problem(field=option, value=path, message=f"is the input {name}",
                                      fix="write to another file: the input is read, never replaced"))
    if target.is_dir() and not target.is_symlink():
        raise ConfigError(Problem(field=option, value=path, message="is a folder",
                                  fix=f"name a file in it, such as {target / 'out'}"))
    folder = target.parent
    if not folder.is_dir():
        raise ConfigError(Problem(field=option, value=path, message="names a folder that does not exist",
                                  fix=f"create {folder} first or write the file elsewhere"))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(Problem(field=option, value=path, message=f"cannot be written (the folder {folder} is "
                                  "not writable)", fix="choose a writable path"))
