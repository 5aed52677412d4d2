"""COG overviews in published stores: every level of the items, the group that writes them, and
the level a reader opens.

``publish(..., overviews=True)`` writes an image pyramid as a zarr-conventions multiscales group
(:mod:`virtualstac.manifests.multiscales`): group ``"0"`` holds the items at full resolution,
group ``"n"`` their ``overview_level=n - 1``, each stacked along the concat dimension with its
own ``x``/``y``. Readers that know the convention find the levels in the root's attributes;
:func:`level_group` tells the opener which group to read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import xarray as xr
import zarr

from virtualstac.errors import IncompatibleArraysError, OverviewNotFoundError
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.multiscales import level_names, multiscales_group

__all__ = ["Levels", "check_levels", "level_group", "open_levels", "pyramid_group", "store_levels"]

#: What is published: one dataset, or an image pyramid's datasets, finest first.
type Levels = xr.Dataset | Sequence[xr.Dataset]


def open_levels(open_level: Callable[[int | None], xr.Dataset]) -> list[xr.Dataset]:
    """The full resolution (``open_level(None)``) and every overview level all sources have.

    Levels are opened from 0 until one of the sources lacks the next.
    """
    levels = [open_level(None)]
    while True:
        try:
            levels.append(open_level(len(levels) - 1))
        except OverviewNotFoundError:
            return levels


def pyramid_group(
    levels: Levels, make: Callable[[str, xr.Dataset], ManifestGroup]
) -> ManifestGroup:
    """The group to write: ``make("", dataset)``, or a multiscales group of each level's."""
    if isinstance(levels, xr.Dataset):
        return make("", levels)
    return multiscales_group([make(str(n), level) for n, level in enumerate(levels)])


def store_levels(store: Any) -> list[str] | None:
    """The level groups a published store's root lists (multiscales), or None."""
    return level_names(zarr.open_group(store, mode="r", zarr_format=None).attrs.asdict())


def check_levels(levels: Levels, store: Any, where: str) -> None:
    """Check that ``levels`` append to a published store level by level, as written.

    Raises
    ------
    IncompatibleArraysError
        If the store has overview levels and the new items not (or the other way round), or
        another number of them.
    """
    names = store_levels(store)
    if isinstance(levels, xr.Dataset):
        if names is not None:
            raise IncompatibleArraysError(
                f"the store at {where} holds {len(names)} resolution levels; publish with "
                "overviews=True to append to it"
            )
        return
    if names is None:
        raise IncompatibleArraysError(
            f"the store at {where} holds no overview levels; publish without overviews to "
            "append to it"
        )
    if names != [str(n) for n in range(len(levels))]:
        raise IncompatibleArraysError(
            f"the store at {where} holds the resolution levels {names}, the new items "
            f"{len(levels)}; every item needs the same number of overviews"
        )


def level_group(store: Any, overview_level: int | None, where: str) -> str | None:
    """The group of a published store to open: its root, or the level asked for.

    A multiscales store opens at its first (full-resolution) level by default.

    Raises
    ------
    OverviewNotFoundError
        If ``overview_level`` is given and the store has no such level.
    """
    names = store_levels(store)
    if overview_level is None:
        return None if names is None else names[0]
    overviews = [] if names is None else names[1:]
    if isinstance(overview_level, int) and 0 <= overview_level < len(overviews):
        return overviews[overview_level]
    held = f"{len(overviews)} overview levels" if overviews else "no overview levels"
    raise OverviewNotFoundError(
        f"the published store at {where} holds {held}, so overview_level={overview_level} "
        "does not exist; publish with overviews=True, or pass use_published=False to open the "
        "sources' overviews"
    )
