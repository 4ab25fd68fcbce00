"""Amounts in words, as every command prints them."""

from __future__ import annotations


def plural(n: object, unit: str) -> str:
    """``1 instance``, ``3 instances``, ``2 copies``; units of measure (GiB, vCPU) stay as they are."""
    if unit in ("GiB", "vCPU"):
        return f"{n} {unit}"
    if str(n) == "1":
        return f"{n} {unit}"
    return f"{n} {unit[:-1]}ies" if unit.endswith("y") else f"{n} {unit}s"


__all__ = ["plural"]
