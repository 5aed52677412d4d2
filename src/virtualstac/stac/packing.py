"""Items whose assets pack their values differently: one datacube of values, decoded per packing.

Providers change how they pack values: Sentinel-2 L2A scenes processed with baseline 04.00 or
later (from January 2022) carry an offset of -0.1 (``BOA_ADD_OFFSET`` -1000), earlier ones 0,
and Earth Search records each Item's in its ``raster:bands``. One array of references has one
``scale_factor``, ``add_offset`` and ``_FillValue``, so Items packed differently cannot share
one: a time series across the change is opened as one cube per packing, each decoded with its
own, and the decoded values joined along ``time`` (lazily, by dask). The joined variables keep
no packing in their ``encoding``, since no single one is right for all of their values.

What cannot be joined this way is refused with :class:`PackingError`: references
(``references=True``, publishing), undecoded values (``mask_and_scale=False``: raw counts
of different meanings in one array), and Items of one time
step packed differently (tiles of one mosaic).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pystac
import xarray as xr

from virtualstac.errors import IncompatibleArraysError
from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.attribute_types import TYPES_KEY, decoding_record
from virtualstac.manifests.metadata import CF_ENCODING_ATTRS
from virtualstac.stac.grouping import AssignedGroups

__all__ = ["PackingError", "join_decoded", "packing_runs"]

#: What decoding undoes item by item; the other attributes of CF_ENCODING_ATTRS (units,
#: calendar) must agree.
_PACKING = ("scale_factor", "add_offset", "_FillValue", "missing_value", "_Unsigned", TYPES_KEY)
_MEANING = tuple(attr for attr in CF_ENCODING_ATTRS if attr not in _PACKING)
#: The encoding xarray keeps of a decoded variable's packing (written back by ``to_zarr``).
_PACKING_ENCODING = ("scale_factor", "add_offset", "_FillValue", "missing_value", "dtype")


class PackingError(IncompatibleArraysError):
    """Items pack a variable differently (scale, offset, nodata) where one packing is needed."""


def packing_runs(
    items: Sequence[pystac.Item], grouped: Mapping[str, Mapping[Any, xr.Dataset]]
) -> list[list[pystac.Item]]:
    """``items`` split by how their variables are packed, in the order first met: one list
    when they all agree, or when they differ in more than packing (other variables, other
    grids), which combining refuses, or groups by grid, as ever. ``grouped`` holds each
    Item's datasets of references by grid."""
    runs: dict[str, list[pystac.Item]] = {}
    meanings = set()
    for item in items:
        packed = _attributes(grouped[item.id], _PACKING)
        # Units or calendars that differ are other quantities, not other packings.
        meanings.add(json.dumps(_attributes(grouped[item.id], _MEANING), sort_keys=True))
        runs.setdefault(json.dumps(packed, sort_keys=True, default=str), []).append(item)
    # Each run must cover the same grids (the same tiles, or the same resolutions).
    grids = [{grid for item in run for grid in grouped[item.id]} for run in runs.values()]
    if len(meanings) > 1 or any(found != grids[0] for found in grids[1:]):
        return [list(items)]
    return list(runs.values())


def _attributes(datasets: Mapping[Any, xr.Dataset], names: tuple[str, ...]) -> dict[str, Any]:
    """The attributes ``names`` of each variable of references in ``datasets``, by name."""
    found = {}
    for dataset in datasets.values():
        for name, variable in dataset.variables.items():
            if isinstance(variable.data, ManifestArray):
                attributes = variable.data.metadata.attributes
                found[str(name)] = [
                    decoding_record(attributes) if attr == TYPES_KEY else attributes.get(attr)
                    for attr in names
                ]
    safe: dict[str, Any] = json.loads(json.dumps(found, default=str))
    return safe


def check_joinable(
    runs: list[list[pystac.Item]],
    grouped: Mapping[str, Mapping[Any, xr.Dataset]],
    steps: AssignedGroups,
    *,
    references: bool,
    decoded: bool,
) -> None:
    """Refuse what differently packed ``runs`` cannot become (see the module docstring)."""
    first, other = runs[0][0], runs[1][0]
    differences = _differences(grouped[first.id], grouped[other.id])
    said = (
        f"items {first.id!r} and {other.id!r} pack their values differently ({differences}; "
        "as Sentinel-2 scenes do before and after processing baseline 04.00)"
    )
    if references:
        raise PackingError(
            f"{said}, and one array of references has one packing: open values (drop "
            "references=True), which decodes each item with its own, or open (or publish) the "
            "items of each packing separately"
        )
    if not decoded:
        raise PackingError(
            f"{said}, so their raw counts mean different things and cannot share one array's "
            "scale_factor/add_offset/_FillValue: keep mask_and_scale on, which "
            "decodes each item with its own, or open the items of each packing separately"
        )
    run_of = {item.id: n for n, run in enumerate(runs) for item in run}
    members: dict[Any, list[pystac.Item]] = {}
    for run in runs:
        for item in run:
            members.setdefault(steps(item), []).append(item)
    for step in members.values():
        found = sorted({run_of[item.id] for item in step})
        if len(found) > 1:
            a, b = (next(i for i in step if run_of[i.id] == n) for n in found[:2])
            raise PackingError(
                f"items {a.id!r} and {b.id!r} form one time step but pack their values "
                f"differently ({_differences(grouped[a.id], grouped[b.id])}), and a mosaic of "
                "references has one packing; open them separately (groupby='id', or filter "
                "the items)"
            )


def _differences(a: Mapping[Any, xr.Dataset], b: Mapping[Any, xr.Dataset]) -> str:
    """How the first variable packed differently in ``a`` and ``b`` differs: its attributes."""
    for grid, dataset in a.items():
        for name, variable in dataset.variables.items():
            other = b.get(grid, xr.Dataset()).variables.get(name)
            if not (isinstance(variable.data, ManifestArray) and other is not None):
                continue
            if not isinstance(other.data, ManifestArray):
                continue
            mine, theirs = variable.data.metadata.attributes, other.data.metadata.attributes
            changed = [
                f"{attr} {mine.get(attr)!r} vs {theirs.get(attr)!r}"
                for attr in _PACKING
                if json.dumps(mine.get(attr), default=str)
                != json.dumps(theirs.get(attr), default=str)
            ]
            if changed:
                return f"{name!r}: {', '.join(changed)}"
    return "their variables differ"


def join_decoded(parts: list[xr.Dataset], dim: str = "time") -> xr.Dataset:
    """Decoded datacubes of differently packed Items joined along ``dim``, in its order.

    A variable whose parts were packed differently keeps no packing in its encoding: writing
    it back with one of them would wrap or clip the others' values."""
    joined = xr.concat(
        parts,
        dim=dim,
        data_vars="all",
        coords="minimal",
        compat="override",
        join="exact",
        combine_attrs="drop_conflicts",
    )
    if dim in joined.indexes:
        joined = joined.isel({dim: np.argsort(joined.indexes[dim].values, kind="stable")})
    for name, variable in joined.variables.items():
        encodings = [part.variables[name].encoding for part in parts if name in part.variables]
        if any(_packed(e) != _packed(encodings[0]) for e in encodings[1:]):
            for key in _PACKING_ENCODING:
                variable.encoding.pop(key, None)
    return joined


def _packed(encoding: Mapping[str, Any]) -> str:
    return json.dumps([encoding.get(key) for key in _PACKING_ENCODING], default=str)
