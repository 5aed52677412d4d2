"""Nearby byte ranges of one object fetched with one request, then cut apart again.

obstore's ``get_ranges`` merges ranges closer than ``coalesce`` bytes by itself; reads that
obstore cannot merge for us (those of :class:`~virtualstac.storage.http.HttpStore`, and
conditional reads, which take ``GetOptions`` per request) merge them here the same way.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

__all__ = ["DEFAULT_COALESCE", "merge_ranges", "split_ranges"]

#: Ranges closer than this are fetched by one request, as obstore's ``get_ranges`` merges them.
DEFAULT_COALESCE = 1024 * 1024


def merge_ranges(
    starts: Sequence[int], ends: Sequence[int], coalesce: int
) -> list[tuple[int, int]]:
    """The ranges to fetch: the sorted ranges, those less than ``coalesce`` apart joined."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(zip(starts, ends, strict=True)):
        if merged and start <= merged[-1][1] + coalesce:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def split_ranges(
    starts: Sequence[int],
    ends: Sequence[int],
    merged: Sequence[tuple[int, int]],
    fetched: Sequence[Any],
) -> list[bytes | memoryview]:
    """Each asked range cut out of the merged range holding it (shorter past the end): a
    view, not a copy, unless it is the whole of what was fetched."""
    result: list[bytes | memoryview] = []
    firsts = [start for start, _ in merged]
    views = [memoryview(data) for data in fetched]
    for start, end in zip(starts, ends, strict=True):
        index = bisect.bisect_right(firsts, start) - 1
        offset = start - firsts[index]
        if offset == 0 and end - start >= len(fetched[index]):
            result.append(fetched[index])
        else:
            result.append(views[index][offset : offset + end - start])
    return result
