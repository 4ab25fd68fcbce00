"""Errors raised by the core. Every message names the field, the value and the fix."""

from __future__ import annotations

from dataclasses import dataclass


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
            text += f" (got {self.value!r})"
        if self.fix:
            text += f"; {self.fix}"
        return text


class GpuShareError(Exception):
    """Base class of every error this library raises on purpose."""


class ConfigError(GpuShareError, ValueError):
    """Invalid input, with every problem found (not only the first)."""

    def __init__(self, problems: list[Problem] | Problem | str, *, source: str | None = None):
        if isinstance(problems, str):
            problems = [Problem(field="input", value=None, message=problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: list[Problem] = list(problems)
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        where = f" in {self.source}" if self.source else ""
        if len(self.problems) == 1:
            return f"invalid configuration{where}: {self.problems[0]}"
        lines = [f"invalid configuration{where}: {len(self.problems)} problems"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)
