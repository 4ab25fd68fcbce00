"""Bounded quoting: how a message shows a value the user wrote, whatever its size.

:func:`quote` shows at most :data:`QUOTE_LIMIT` characters of a value (a 5,000-digit
number, a megabyte string, an alias bomb) without building its full ``repr``;
:class:`OutOfRange` is a number read from text that is too long or too large to use.
Both the errors (:mod:`cdk_gpu_share.core.errors`, a problem's text) and the validation
toolkit (:mod:`cdk_gpu_share.core.validation`) need them, so they live below both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["QUOTE_LIMIT", "OutOfRange", "quote", "short_text"]

#: Most characters of a value that a message quotes.
QUOTE_LIMIT = 160


class OutOfRange(float):
    """A number read from text that is too long or too large to use.

    It is a float (infinite, so every finiteness check refuses it) that remembers
    the text, so that messages can quote what the user wrote.
    """

    text: str

    def __new__(cls, text: str) -> OutOfRange:
        obj = super().__new__(cls, -math.inf if text.lstrip().startswith("-") else math.inf)
        obj.text = text
        return obj

    def __repr__(self) -> str:
        return _short_number(self.text)

    __str__ = __repr__


def short_text(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[: limit - 20]}...({len(text):,} characters)"


def _short_number(text: str) -> str:
    text = text.strip()
    if len(text) <= 24:
        return text
    return f"{text[:12]}...({len(text):,} characters)"


def _int_repr(value: int) -> str:
    if value.bit_length() <= 200:
        return repr(value)
    digits = int(value.bit_length() * math.log10(2)) + 1
    return f"{'-' if value < 0 else ''}<a number of about {digits:,} digits>"


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` cut to about ``limit`` characters, without building the full repr.

    Containers show their first items; long strings and huge numbers are shortened
    and say how long they were.
    """
    out: list[str] = []
    _quote_into(value, out, [limit], 0)
    return "".join(out)


def _quote_into(value: object, out: list[str], budget: list[int], depth: int) -> None:
    if budget[0] <= 0:
        out.append("...")
        return
    if isinstance(value, OutOfRange):
        text = repr(value)
    elif isinstance(value, bool) or value is None:
        text = repr(value)
    elif isinstance(value, int):
        text = _int_repr(value)
    elif isinstance(value, float):
        text = repr(value)
    elif isinstance(value, str):
        if len(value) <= max(budget[0], 40):
            text = repr(value)
        else:  # head and tail: the end of a path or a name says as much as its start
            keep = max(budget[0] - 30, 20)
            text = repr(value[: keep * 2 // 3] + "..." + value[-(keep // 3):]) + f" ({len(value):,} characters)"
    elif isinstance(value, Mapping) or isinstance(value, (list, tuple, set, frozenset)):
        is_map = isinstance(value, Mapping)
        opener, closer = ("{", "}") if is_map else ("[", "]") if isinstance(value, list) else ("(", ")")
        if depth >= 3:
            out.append(opener + "..." + closer)
            budget[0] -= 5
            return
        out.append(opener)
        budget[0] -= 2
        for n, entry in enumerate(value.items() if isinstance(value, Mapping) else value):
            if n:
                out.append(", ")
                budget[0] -= 2
            if budget[0] <= 0:
                out.append(f"... ({len(value):,} entries)")
                break
            if is_map:
                _quote_into(entry[0], out, budget, depth + 1)
                out.append(": ")
                _quote_into(entry[1], out, budget, depth + 1)
            else:
                _quote_into(entry, out, budget, depth + 1)
        out.append(closer)
        return
    else:
        try:
            text = repr(value)
        except Exception:  # pragma: no cover - a repr that fails is still not a traceback
            text = f"<{type(value).__name__}>"
        text = short_text(text, max(budget[0], 20))
    out.append(text)
    budget[0] -= len(text)
