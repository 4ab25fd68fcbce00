"""The one progress bar of the long commands (simulate, advise, trace export)."""

from __future__ import annotations

import io

from cdk_gpu_share.cli._progress import ProgressBar


class Terminal(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_it_draws_only_on_a_terminal_and_erases_what_it_drew():
    for tty in (True, False):
        out = Terminal(tty)
        bar = ProgressBar(out, "working", delay=0)
        bar.show(0.5, "3 of 6")
        bar.show(1.0)
        bar.close()
        text = out.getvalue()
        assert ("working [###############...............] 3 of 6" in text) is tty
        assert ("working [##############################]" in text) is tty
        # the last write blanks the longest line drawn and returns to its start
        assert text == "" or text.endswith("\r" + " " * len("working [" + "#" * 15 + "." * 15 + "] 3 of 6") + "\r")


def test_a_quick_run_prints_nothing_and_a_closed_stream_is_no_terminal():
    out = Terminal(True)
    bar = ProgressBar(out, "working")  # the default delay: half a second
    bar.show(1.0)
    bar.close()
    assert out.getvalue() == ""
    closed = io.StringIO()
    closed.close()
    assert ProgressBar(closed, "working").on is False
