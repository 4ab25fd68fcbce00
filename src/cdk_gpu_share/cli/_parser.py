"""The argument parser of every ``gpu-share`` command.

:class:`Parser` is argparse's parser with three additions, the same for every subcommand
(argparse makes each subcommand's parser of its parent's class):

- a mistyped option or subcommand gets a suggestion (``--compre``: did you mean
  ``--compare``?), named by the parser of the subcommand it was given to;
- a platform config is taken both as a positional argument and as ``--config``
  (:func:`add_config_argument`), in every command that reads one;
- bad usage still exits 2 with argparse's usage line and one-line message.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from cdk_gpu_share.core.errors import ConfigError, Problem

#: Namespace attribute naming the innermost parser that parsed the command line (removed before
#: the namespace is returned).
_INNERMOST = "_gpu_share_parser"
#: Namespace attribute of the positional spelling of the config.
CONFIG_POSITIONAL = "config_positional"


def did_you_mean(word: str, candidates: Iterable[Any]) -> str | None:
    """The candidate closest to ``word``, or None when none is close."""
    names = [str(c) for c in candidates]
    match = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    return match[0] if match and match[0] != word else None


class Parser(argparse.ArgumentParser):
    """argparse's parser with suggestions and the two spellings of the config (module docstring)."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        ns, extras = super().parse_known_args(args, namespace)
        # A subcommand's parser returns first; its namespace is copied into its parent's.
        if not hasattr(ns, _INNERMOST):
            setattr(ns, _INNERMOST, self)
        return ns, extras

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        ns, extras = self.parse_known_args(args, namespace)
        parser = vars(ns).pop(_INNERMOST, self)
        if not isinstance(parser, Parser):
            parser = self
        if extras:
            parser.error(parser._unrecognized(extras, root=self))
        parser._resolve_config(ns)
        return ns

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            hint = did_you_mean(value, action.choices or ()) if isinstance(value, str) else None
            if hint is None:
                raise
            raise argparse.ArgumentError(action, f"{exc.message}; did you mean {hint!r}?") from None

    def _options(self) -> list[str]:
        return [s for action in self._actions for s in action.option_strings]

    def _unrecognized(self, extras: list[str], *, root: Parser) -> str:
        message = f"unrecognized arguments: {' '.join(extras)}"
        hints = []
        for word in extras:
            if not word.startswith("-") or word == "-" or word == "--":
                continue
            name = word.split("=", 1)[0]
            long = name.startswith("--")
            options = [o for o in self._options() if o.startswith("--") == long]
            hint = did_you_mean(name, options)
            if hint is None and root is not self:
                hint = did_you_mean(name, [o for o in root._options() if o.startswith("--") == long])
            if hint is not None:
                hints.append((name, hint))
        if len(hints) == 1 and len([w for w in extras if w.startswith("-")]) == 1:
            return f"{message} (did you mean {hints[0][1]}?)"
        if hints:
            return message + " (" + "; ".join(f"{name}: did you mean {hint}?" for name, hint in hints) + ")"
        return message

    def _resolve_config(self, ns: argparse.Namespace) -> None:
        spec = getattr(self, "_config_spec", None)
        if spec is None:
            return
        required, metavar, alternative = spec
        positional = vars(ns).pop(CONFIG_POSITIONAL, None)
        if positional is not None:
            if ns.config is not None and ns.config != positional:
                self.error(f"argument --config: the config is given twice ({positional} and --config "
                           f"{ns.config}); give it once")
            if alternative is not None and getattr(ns, alternative[2:].replace("-", "_"), None) is not None:
                self.error(f"argument {metavar}: not allowed with argument {alternative}")
            ns.config = positional
        if ns.config is None and required:
            if alternative is None:
                self.error(f"the following arguments are required: {metavar} (or --config {metavar})")
            if getattr(ns, alternative[2:].replace("-", "_"), None) is None:
                self.error(f"one of the arguments {metavar}, --config {metavar} or {alternative} is required")


def add_config_argument(parser: argparse.ArgumentParser, *, help: str, required: bool = True,
                        metavar: str = "CONFIG", group: Any = None, alternative: str | None = None,
                        option_help: str | None = None) -> None:
    """Take the platform config as ``CONFIG`` or ``--config CONFIG`` (either; both if they agree).

    The command then reads it as ``args.config`` (None when optional and not given).
    ``alternative`` names an option that may replace the config (``--scenario``): ``group`` is
    then the mutually exclusive group both options are in, not required, and the parser
    requires one of them itself.
    """
    parser.add_argument(CONFIG_POSITIONAL, nargs="?", metavar=metavar, default=None,
                        help=f"{help}; or --config {metavar}")
    (group if group is not None else parser).add_argument(
        "--config", metavar=metavar, default=None, help=option_help or f"the same as {metavar}")
    parser._config_spec = (required, metavar, alternative)  # type: ignore[attr-defined]


def parse_day(flag: str, text: str) -> datetime:
    """A ``--from``/``--to`` day (``YYYY-MM-DD``) as midnight UTC; anything else is refused in
    one line naming ``flag``."""
    try:
        return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=timezone.utc)
    except ValueError:
        raise ConfigError(Problem(flag, text, "is not a day", "write the day as YYYY-MM-DD, such as 2026-12-01")) from None
