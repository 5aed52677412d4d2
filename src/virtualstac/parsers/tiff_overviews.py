"""COG overviews: which IFDs are overviews, in GDAL's order, and choosing a level.

GDAL (so rasterio's and rioxarray's ``overview_level``) numbers the overviews of a TIFF's first
image from 0, in the order it finds them: the image's SubIFDs, then the IFDs after it whose
NewSubfileType says "reduced-resolution" but not "mask", with as many samples per pixel as the
image. It does not sort them by size, so an overview added later to a file keeps its place at
the end. Masks (bit 4 of NewSubfileType, GDAL's internal ``.msk``-like IFDs) are never
overviews. :class:`~virtualstac.parsers.TIFFParser` exposes overview ``n`` as the group
``overview_<n + 1>``; this module maps levels to those groups and builds the multiscales
layout of a parsed file.

Overviews in a separate file (GDAL's external ``name.tif.ovr``, which rasterio finds beside
the image) are not read: a parsed file holds references to itself only.

One difference: the scan stops at the next full-resolution image (a multi-page TIFF's next
page), where GDAL goes on and would count reduced IFDs of later pages too; reading every IFD
of a long multi-page file would cost a request per page.
"""

from __future__ import annotations

from typing import Any

import tifffile

from virtualstac.errors import OverviewNotFoundError
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.multiscales import multiscales_group

__all__ = [
    "overview_count",
    "overview_group",
    "overview_group_name",
    "overview_pages",
    "overviews_as_multiscales",
    "subfile_pages",
]

_FILETYPE_REDUCED = 1
_FILETYPE_MASK = 4
# GDAL stops collecting overviews at 30 (a guard against crafted files); so do we.
_MAX_OVERVIEWS = 30


def overview_group_name(level: int) -> str:
    """The group :class:`TIFFParser` gives overview ``level`` (0: the largest overview)."""
    return f"overview_{level + 1}"


def overview_pages(tif: tifffile.TiffFile, main: tifffile.TiffPage) -> list[tifffile.TiffPage]:
    """The overviews of ``main`` in GDAL's order: its SubIFDs, then the reduced IFDs after it.

    Masks and reduced images with another number of samples per pixel are skipped.
    """
    samples = main.samplesperpixel
    candidates: list[Any] = [*(main.pages or ()), *subfile_pages(tif, main)]
    overviews = [
        page
        for page in candidates
        if isinstance(page, tifffile.TiffPage)
        and page.subfiletype & _FILETYPE_REDUCED
        and not page.subfiletype & _FILETYPE_MASK
        and page.samplesperpixel == samples
    ]
    return overviews[:_MAX_OVERVIEWS]


def subfile_pages(tif: tifffile.TiffFile, main: tifffile.TiffPage) -> list[tifffile.TiffPage]:
    """The IFDs after ``main`` that belong to it (reduced images and masks, by their
    NewSubfileType), up to the next full-resolution image of a multi-page file."""
    pages: list[tifffile.TiffPage] = []
    start = main.index + 1 if isinstance(main.index, int) else 1
    for index in range(start, len(tif.pages)):
        page = tif.pages[index]
        if not isinstance(page, tifffile.TiffPage):
            break
        if not page.subfiletype & (_FILETYPE_REDUCED | _FILETYPE_MASK):
            break
        pages.append(page)
    return pages


def overview_count(group: ManifestGroup) -> int:
    """How many overview groups a parsed TIFF has (``overview_1`` ... without gaps)."""
    count = 0
    while overview_group_name(count) in group.groups:
        count += 1
    return count


def overview_group(group: ManifestGroup, level: int, url: str) -> str:
    """The group of overview ``level`` of the file at ``url``, or a clear error.

    Raises
    ------
    OverviewNotFoundError
        If the file has no such overview (or none at all).
    """
    count = overview_count(group)
    if isinstance(level, bool) or not isinstance(level, int):
        raise TypeError(f"overview_level must be an integer, got {level!r}")
    if 0 <= level < count:
        return overview_group_name(level)
    if count == 0:
        raise OverviewNotFoundError(
            f"{url} has no overviews, so overview_level={level} does not exist (only TIFF "
            "files have overviews, and only those inside the file are read: not GDAL's "
            "external .ovr files; overview_level=None opens the full resolution)"
        )
    raise OverviewNotFoundError(
        f"{url} has {count} overview level{'s' if count > 1 else ''} "
        f"(overview_level 0 to {count - 1}, 0 the largest), so overview_level={level} does "
        "not exist; overview_level=None opens the full resolution"
    )


def overviews_as_multiscales(group: ManifestGroup) -> ManifestGroup:
    """A parsed TIFF as a multiscales group: ``"0"`` the full resolution, ``"n"`` overview n-1.

    Each level keeps its own ``x``/``y`` and ``spatial_ref``; the group attributes describe
    the pyramid (:mod:`virtualstac.manifests.multiscales`).
    """
    overview_names = [overview_group_name(level) for level in range(overview_count(group))]
    others = sorted(set(group.groups) - set(overview_names))
    if others:
        raise ValueError(f"not a parsed TIFF: unexpected groups {others}")
    levels = [ManifestGroup(arrays=group.arrays)]
    levels += [group.groups[name] for name in overview_names]
    return multiscales_group(levels, group.metadata.attributes)
