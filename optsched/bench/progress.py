"""A dependency-free progress bar on stderr for long benchmark runs."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Redraws one line on a terminal; prints a line every 10% otherwise (logs stay short)."""

    def __init__(self, total: int, label: str, *, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.total = max(total, 1)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.done = 0
        self.started = time.perf_counter()
        self._last_draw = 0.0
        self._last_decile = -1
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def update(self, done: int) -> None:
        self.done = done
        if not self.enabled:
            return
        now = time.perf_counter()
        if self._tty:
            if now - self._last_draw >= 0.2 or done >= self.total:
                self._last_draw = now
                self._draw(now, end="\r")
        else:
            decile = 10 * done // self.total
            if decile != self._last_decile:
                self._last_decile = decile
                self._draw(now, end="\n")

    def close(self) -> None:
        if self.enabled:
            self._draw(time.perf_counter(), end="\n" if self._tty else "")
            if not self._tty:
                self.stream.write("\n")
            self.stream.flush()

    def _draw(self, now: float, *, end: str) -> None:
        fraction = min(self.done / self.total, 1.0)
        width = 30
        filled = int(width * fraction)
        bar = "#" * filled + "-" * (width - filled)
        elapsed = now - self.started
        eta = elapsed * (1 - fraction) / fraction if fraction > 0 else 0.0
        line = (
            f"{self.label} [{bar}] {100 * fraction:5.1f}% {self.done}/{self.total}"
            f" {elapsed:6.1f}s eta {eta:5.1f}s"
        )
        self.stream.write(line + (" " * 4) + end if end == "\r" else line + end)
        self.stream.flush()
