"""Image pyramids as Zarr groups: the zarr-conventions ``multiscales`` metadata (v0.1).

A multiscales group holds one child group per resolution level, named ``"0"`` (the finest),
``"1"``, ... Its attributes declare the convention in ``zarr_conventions`` and list the levels
under ``multiscales.layout``; every coarser level is derived from ``"0"`` with a
``transform.scale`` per spatial axis ``(y, x)``: how many times larger its pixels are. Levels
share the top-left corner, as GDAL's overviews do, so the ``translation`` is zero. Each level
keeps its own coordinates (and ``spatial_ref``), so readers that ignore the convention still
get a georeferenced dataset per group.

Specification: https://github.com/zarr-conventions/multiscales (tag v0.1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from virtualstac.errors import InvalidManifestError
from virtualstac.manifests.group import ManifestGroup

__all__ = [
    "MULTISCALES_UUID",
    "level_names",
    "multiscales_attributes",
    "multiscales_group",
    "spatial_shape",
]

MULTISCALES_UUID = "d35379db-88df-4056-af3a-620245f8e347"
_TAG = "v0.1"
_CONVENTION = {
    "uuid": MULTISCALES_UUID,
    "schema_url": (
        f"https://raw.githubusercontent.com/zarr-conventions/multiscales/refs/tags/{_TAG}/"
        "schema.json"
    ),
    "spec_url": f"https://github.com/zarr-conventions/multiscales/blob/{_TAG}/README.md",
    "name": "multiscales",
    "description": "Multiscale layout of zarr datasets",
}


def multiscales_attributes(shapes: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """Group attributes of levels ``"0"``, ``"1"``, ... of ``(height, width)`` pixels.

    ``shapes`` lists the levels finest first; the scales are the ratios of the finest level's
    size to each level's (GDAL scales an overview's transform by the same ratios).
    """
    if not shapes:
        raise ValueError("a multiscales group needs at least one level")
    height, width = shapes[0]
    layout: list[dict[str, Any]] = [{"asset": "0", "transform": {"scale": [1.0, 1.0]}}]
    for number, (level_height, level_width) in enumerate(shapes[1:], start=1):
        layout.append(
            {
                "asset": str(number),
                "derived_from": "0",
                "transform": {
                    "scale": [height / level_height, width / level_width],
                    "translation": [0.0, 0.0],
                },
            }
        )
    return {"zarr_conventions": [dict(_CONVENTION)], "multiscales": {"layout": layout}}


def level_names(attributes: Mapping[str, Any]) -> list[str] | None:
    """The level groups a multiscales group lists, finest first; None for any other group."""
    conventions = attributes.get("zarr_conventions")
    declared = isinstance(conventions, list) and any(
        isinstance(c, Mapping)
        and (c.get("uuid") == MULTISCALES_UUID or c.get("name") == "multiscales")
        for c in conventions
    )
    multiscales = attributes.get("multiscales")
    if not declared or not isinstance(multiscales, Mapping):
        return None
    layout = multiscales.get("layout")
    if not isinstance(layout, list) or not layout:
        return None
    names = [entry.get("asset") for entry in layout if isinstance(entry, Mapping)]
    if len(names) != len(layout) or not all(isinstance(n, str) and n for n in names):
        return None
    return [str(name) for name in names]


def spatial_shape(group: ManifestGroup) -> tuple[int, int]:
    """The ``(y, x)`` sizes of a level group, from the arrays that have those dimensions."""
    sizes: dict[str, int] = {}
    for array in group.arrays.values():
        for name, size in zip(array.metadata.dimension_names or (), array.shape, strict=True):
            if name in ("y", "x"):
                sizes.setdefault(name, int(size))
    if set(sizes) != {"y", "x"}:
        raise InvalidManifestError("a multiscales level needs arrays with 'y' and 'x' dimensions")
    return sizes["y"], sizes["x"]


def multiscales_group(
    levels: Sequence[ManifestGroup], attributes: Mapping[str, Any] | None = None
) -> ManifestGroup:
    """A group holding ``levels`` (finest first) as ``"0"``, ``"1"``, ... with their layout.

    ``attributes`` are kept beside the convention's.
    """
    shapes = [spatial_shape(level) for level in levels]
    return ManifestGroup(
        groups={str(number): level for number, level in enumerate(levels)},
        attributes={**(attributes or {}), **multiscales_attributes(shapes)},
    )
