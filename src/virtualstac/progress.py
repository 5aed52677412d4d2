"""A minimal progress line for long-running work, written to stderr."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TextIO

__all__ = ["progress"]


def progress[T](
    items: Iterable[T],
    *,
    total: int,
    label: str,
    enabled: bool = True,
    stream: TextIO | None = None,
    min_interval: float = 0.2,
) -> Iterator[T]:
    """Yield ``items``, printing ``label: done/total (rate/s)`` at most every ``min_interval``."""
    out = stream or sys.stderr
    started = last = time.perf_counter()
    done = 0
    for item in items:
        yield item
        done += 1
        now = time.perf_counter()
        if enabled and (now - last >= min_interval or done == total):
            rate = done / max(now - started, 1e-9)
            out.write(f"\r{label}: {done}/{total} ({rate:.1f}/s)")
            out.flush()
            last = now
    if enabled and done:
        out.write("\n")
        out.flush()
