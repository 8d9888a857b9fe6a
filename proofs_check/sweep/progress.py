"""The sweep's progress display on stderr (done/total, ETA, counts of bad verdicts).

No maintained progress library (tqdm, rich) is a dependency of ncproofs, so this small one is
kept: a rewriting line on a terminal, a plain line every few seconds otherwise (logs, CI)."""

from __future__ import annotations

import math
import sys
import time
from typing import TextIO

from proofs_check.sweep.registry import VERDICT_ORDER


def _fmt_secs(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return "--:--"
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


class SweepProgress:
    """Progress bar with done/total and ETA on stderr: a rewriting line on a terminal, a line
    every few seconds otherwise."""

    WIDTH = 28
    PLAIN_EVERY = 5.0  # seconds between lines when not on a terminal
    TTY_EVERY = 0.1  # seconds between redraws on a terminal (thousands of fast instances)

    def __init__(self, total: int, already: int, stream: TextIO | None = None, enabled: bool = True):
        self.total, self.already = total, already
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = time.perf_counter()
        self.computed = 0
        self.counts = {v: 0 for v in VERDICT_ORDER}
        self._last = 0.0

    def line(self) -> str:
        done = self.already + self.computed
        frac = done / self.total if self.total else 1.0
        fill = int(round(frac * self.WIDTH))
        elapsed = time.perf_counter() - self.t0
        remaining = self.total - done
        eta = (elapsed / self.computed * remaining) if self.computed else None
        if remaining == 0:
            eta = 0.0
        bad = ", ".join(f"{v} {n}" for v, n in self.counts.items() if n and v != "VERIFIED")
        return (f"[{'#' * fill}{'.' * (self.WIDTH - fill)}] {done}/{self.total} {100 * frac:5.1f}%  "
                f"elapsed {_fmt_secs(elapsed)}  ETA {_fmt_secs(eta)}" + (f"  ({bad})" if bad else ""))

    def update(self, verdict: str) -> None:
        self.computed += 1
        self.counts[verdict] = self.counts.get(verdict, 0) + 1
        if not self.enabled:
            return
        now = time.perf_counter()
        last = self.already + self.computed == self.total
        if self.tty:
            if now - self._last >= self.TTY_EVERY or last:
                self._last = now
                self.stream.write("\r\033[K" + self.line())
                self.stream.flush()
        elif now - self._last >= self.PLAIN_EVERY or last:
            self._last = now
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def elsewhere(self, n: int) -> None:
        """``n`` pending instances were stored by another sweep on the same store."""
        self.already += n
        if self.enabled and self.tty:
            self.stream.write("\r\033[K" + self.line())
            self.stream.flush()

    def start(self) -> None:
        if self.enabled:
            msg = f"sweep: {self.total} instances, {self.already} already stored, {self.total - self.already} to compute"
            self.stream.write(msg + "\n")
            self.stream.flush()

    def finish(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()

