"""The cyclic garbage collector paused while the engine runs.

A run of the engine allocates many small objects (runs, heap entries, planner specs) that
live until it ends. Python's cyclic collector, triggered by allocations, walks the young
ones again and again while they are alive, which costs a tenth or more of a replay's time
and finds nothing until the run is over. :func:`paused` switches it off for a block, as it
was before afterwards, and then collects the youngest generation once: whatever cycles the
block left behind are freed at once, and only the objects made during the block are walked
(a replay releases its engine, so that refcounting frees it and the walk finds little).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused"]


@contextmanager
def paused(*, collect: bool = True) -> Iterator[None]:
    """The block runs with the cyclic collector off (when it was on; it is on again afterwards).
    ``collect``: then collect the youngest generation, where every object made in the block
    that is still tracked is (the collector made no collection meanwhile, so promoted none)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
            if collect:
                gc.collect(0)
