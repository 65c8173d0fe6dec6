"""Take the terminal's foreground for the length of `make run`.

Ctrl-C sends SIGINT to the terminal's foreground process group. Under `make run` that group
holds make too, which then reports "Interrupt" and exits 130 whatever we do. As its own
foreground group (what a shell does for a job), the runner alone gets Ctrl-C, stops what it
started, and exits 0; make then exits 0 too. A `| tee` stays in the shell's group and keeps
receiving our output. Nothing happens without a terminal, or when we run in the background.
"""

from __future__ import annotations

import os
import signal
import sys
from types import TracebackType


class Foreground:
    """Context manager: our own process group in the terminal's foreground, given back after."""

    def __init__(self) -> None:
        self.previous: int | None = None
        self.fd: int | None = None

    def __enter__(self) -> "Foreground":
        fd = sys.stdin.fileno() if sys.stdin is not None and sys.stdin.isatty() else None
        if fd is None:
            return self
        try:
            if os.tcgetpgrp(fd) != os.getpgrp():
                return self  # started in the background: leave the terminal alone
            previous = os.getpgrp()
            os.setpgid(0, 0)
            self._set_foreground(fd, os.getpgrp())
        except OSError:
            return self
        self.previous, self.fd = previous, fd
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _value: BaseException | None, _tb: TracebackType | None
    ) -> None:
        if self.fd is not None and self.previous is not None:
            try:
                self._set_foreground(self.fd, self.previous)
            except OSError:
                pass

    @staticmethod
    def _set_foreground(fd: int, group: int) -> None:
        # A group that is not in the foreground gets SIGTTOU for tcsetpgrp unless it ignores it.
        handler = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        try:
            os.tcsetpgrp(fd, group)
        finally:
            signal.signal(signal.SIGTTOU, handler)
