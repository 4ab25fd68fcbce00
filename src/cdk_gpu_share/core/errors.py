"""Errors raised by the core. Every message names the field, the value and the fix."""

from __future__ import annotations

from dataclasses import dataclass

from cdk_gpu_share.core.quoting import quote


@dataclass(frozen=True)
class Problem:
    """One problem found in user input.

    ``field`` is a dotted path into the input (``teams[1].borrow_limit_percent``),
    ``value`` the offending value as the user wrote it, ``fix`` what to do instead.
    """

    field: str
    value: object
    message: str
    fix: str = ""

    def __str__(self) -> str:
        text = f"{self.field}: {self.message}"
        if self.value is not None:
            text += f" (got {quote(self.value)})"  # bounded, never the whole value
        if self.fix:
            text += f"; {self.fix}"
        return text


class GpuShareError(Exception):
    """Base class of every error this library raises on purpose."""


#: Most problems a message lists (all are kept in ``ConfigError.problems``).
MAX_LISTED_PROBLEMS = 100


class ConfigError(GpuShareError, ValueError):
    """Invalid input, with every problem found (not only the first).

    ``label`` heads the message: ``invalid configuration`` by default, ``invalid
    argument`` when every problem names a command-line option (``--trace``) or a
    positional argument in capitals (``FILE``), or
    what the caller passes (``invalid reclaim state``).
    """

    def __init__(
        self,
        problems: list[Problem] | Problem | str,
        *,
        source: str | None = None,
        label: str | None = None,
    ):
        if isinstance(problems, str):
            problems = [Problem(field="input", value=None, message=problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: list[Problem] = list(problems)
        self.source = source
        if label is None:
            # Command-line options (--trace) and positional arguments (FILE) are arguments.
            options = self.problems and all(p.field.startswith("-") or p.field.isupper() for p in self.problems)
            label = "invalid argument" if options else "invalid configuration"
        self.label = label
        super().__init__(self._render())

    def _render(self) -> str:
        where = f" in {self.source}" if self.source else ""
        if len(self.problems) == 1:
            return f"{self.label}{where}: {self.problems[0]}"
        lines = [f"{self.label}{where}: {len(self.problems)} problems"]
        lines += [f"  - {p}" for p in self.problems[:MAX_LISTED_PROBLEMS]]
        if len(self.problems) > MAX_LISTED_PROBLEMS:
            lines.append(f"  ... and {len(self.problems) - MAX_LISTED_PROBLEMS} more; fix these and run again")
        return "\n".join(lines)
