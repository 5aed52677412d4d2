"""Progress bars with an ETA (tqdm) for long-running work, written to stderr.

One default everywhere: the API shows none unless asked (``progress=True``), the command line
shows them unless ``--no-progress``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TextIO

from tqdm import tqdm

__all__ = ["progress", "step"]

# "label: done/total |bar| [elapsed<remaining, rate]": the count comes first, as users grep it.
_FORMAT = "{desc}: {n_fmt}/{total_fmt} |{bar}| [{elapsed}<{remaining}, {rate_fmt}]"


def progress[T](
    items: Iterable[T],
    *,
    total: int,
    label: str,
    enabled: bool = True,
    stream: TextIO | None = None,
    min_interval: float = 0.2,
    size: Callable[[T], int] | None = None,
) -> Iterator[T]:
    """Yield ``items``, showing a bar ``label: done/total`` with an ETA when ``enabled``.

    Each item counts one towards ``total``, or ``size(item)`` (an item that is a batch).
    """
    with tqdm(
        total=total,
        desc=label,
        disable=not enabled,
        file=stream or sys.stderr,
        mininterval=min_interval,
        bar_format=_FORMAT,
        unit="file",
    ) as bar:
        for item in items:
            yield item
            bar.update(1 if size is None else size(item))


@contextmanager
def step(label: str, *, enabled: bool = True, stream: TextIO | None = None) -> Iterator[None]:
    """Show ``label: 0/1`` while the block runs and ``label: 1/1`` with its duration after."""
    with tqdm(
        total=1,
        desc=label,
        disable=not enabled,
        file=stream or sys.stderr,
        bar_format=_FORMAT,
        unit="step",
    ) as bar:
        yield
        bar.update(1)
