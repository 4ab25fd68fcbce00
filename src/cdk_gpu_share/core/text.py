"""Amounts and tables in words, as every command prints them.

Every command that prints a table (simulate, simulate --compare, plan, status) goes
through :func:`format_table`, so columns line up the same way everywhere: the first
column left-aligned, the others as ``right`` says, a dashed rule under the header.
The HTML report renders the same rows with :func:`html_table`.
"""

from __future__ import annotations

import html
from collections.abc import Collection, Sequence


def seconds_words(x: float) -> str:
    """Seconds as a person reads them: 45 s, 12 min, 3.4 h."""
    if x < 120:
        return f"{x:.0f} s"
    if x < 7200:
        return f"{x / 60:.0f} min"
    return f"{x / 3600:.1f} h"


def plural(n: object, unit: str) -> str:
    """``1 instance``, ``3 instances``, ``2 copies``; units of measure (GiB, vCPU) stay as they are."""
    if unit in ("GiB", "vCPU"):
        return f"{n} {unit}"
    if str(n) == "1":
        return f"{n} {unit}"
    return f"{n} {unit[:-1]}ies" if unit.endswith("y") else f"{n} {unit}s"



def format_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: Collection[int] | None = None,
    indent: str = "",
    rule: bool = True,
) -> list[str]:
    """Lines of a plain-text table.

    :param right: indexes of right-aligned columns. Default: every column but the first.
    :param indent: prefix of every line. Default: none.
    :param rule: a dashed line under the header. Default: True.
    """
    if right is None:
        right = set(range(1, len(headers)))
    widths = [max([len(str(h))] + [len(str(r[i])) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        text = "  ".join(str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
        return (indent + text).rstrip()

    out = [line(headers)]
    if rule:
        out.append((indent + "  ".join("-" * w for w in widths)).rstrip())
    out += [line(r) for r in rows]
    return out


def html_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    best: Collection[tuple[int, int]] = (),
    caption: str | None = None,
) -> str:
    """An HTML ``<table>`` of the same rows; cells at ``best`` (row, column) get class ``best``."""
    parts = ["<table>"]
    if caption:
        parts.append(f"<caption>{html.escape(caption)}</caption>")
    parts.append("<thead><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in headers) + "</tr></thead><tbody>")
    for i, row in enumerate(rows):
        cells = []
        for j, c in enumerate(row):
            tag = "th" if j == 0 else "td"
            cls = ' class="best"' if (i, j) in best else ""
            cells.append(f"<{tag}{cls}>{html.escape(str(c))}</{tag}>")
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


__all__ = ["format_table", "html_table", "plural", "seconds_words"]
