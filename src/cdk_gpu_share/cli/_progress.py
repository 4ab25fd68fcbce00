"""The one progress bar of the commands whose work takes more than a few seconds.

It draws on standard error, only when that is a terminal, and only once the work has taken
half a second (a quick run prints nothing); :meth:`ProgressBar.close` erases it, so what
follows starts on a clean line and redirected output never holds it.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["ProgressBar"]

WIDTH = 30


class ProgressBar:
    """``label [#####.....] detail`` redrawn in place on ``stream``."""

    def __init__(self, stream: Any, label: str, *, delay: float = 0.5):
        try:
            self.on = bool(stream.isatty())
        except (AttributeError, ValueError):  # no isatty, or a closed stream
            self.on = False
        self.stream = stream
        self.label = label
        self.delay = delay
        self.started = time.monotonic()
        self.width = 0  # of the longest line drawn, to erase it

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def show(self, fraction: float, detail: str = "") -> None:
        if not self.on or self.elapsed < self.delay:
            return
        filled = int(round(WIDTH * min(1.0, max(0.0, fraction))))
        line = f"{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {detail}".rstrip()
        self.width = max(self.width, len(line))
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()

    def close(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0
