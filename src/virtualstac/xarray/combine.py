"""How virtual datasets are combined: options for ``xr.concat`` and ``xr.combine_by_coords``.

References cannot be reindexed, so coordinates must align exactly (``join="exact"``); their
values cannot be compared without reading them, so variables are taken as they come
(``compat="override"``, ``coords="minimal"``) and every data variable is joined.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import xarray as xr

from virtualstac.errors import IncompatibleArraysError
from virtualstac.manifests import ManifestArray
from virtualstac.manifests.metadata import check_combinable

__all__ = ["EXACT_COMBINE", "concat_virtual", "incompatible_variable"]

#: Keyword arguments for ``xr.concat`` and ``xr.combine_by_coords`` over virtual datasets.
EXACT_COMBINE: Mapping[str, Any] = {
    "data_vars": "all",
    "coords": "minimal",
    "compat": "override",
    "join": "exact",
    "combine_attrs": "drop_conflicts",
}


def concat_virtual(
    datasets: Sequence[xr.Dataset], dim: str, *, labels: Sequence[str] | None = None
) -> xr.Dataset:
    """``xr.concat`` of virtual datasets with :data:`EXACT_COMBINE`.

    Raises
    ------
    IncompatibleArraysError
        When two datasets' arrays of one variable cannot become one array (codecs, data type,
        fill value, chunks or CF packing differ): the message names the variable, the
        datasets by their ``labels`` (an item, a file; by default their position) and the
        files their arrays reference.
    """
    try:
        return xr.concat(list(datasets), dim=dim, **EXACT_COMBINE)
    except IncompatibleArraysError as err:
        culprit = incompatible_variable(datasets, labels)
        if culprit is None:
            raise
        raise IncompatibleArraysError(culprit) from err


def incompatible_variable(
    datasets: Sequence[xr.Dataset], labels: Sequence[str] | None = None
) -> str | None:
    """Which variable of ``datasets`` cannot be joined, and in which two of them; or None."""
    names = labels if labels is not None else [f"dataset {i}" for i in range(len(datasets))]
    for name in datasets[0].variables:
        arrays = [
            (label, dataset.variables[name].data)
            for label, dataset in zip(names, datasets, strict=True)
            if name in dataset.variables
        ]
        virtual = [(label, a) for label, a in arrays if isinstance(a, ManifestArray)]
        if len(virtual) < 2:
            continue
        first_label, first = virtual[0]
        for label, array in virtual[1:]:
            try:
                check_combinable([first.metadata, array.metadata], what="join")
            except IncompatibleArraysError as err:
                return (
                    f"variable {str(name)!r} of {label} ({_files(array)}) cannot be joined "
                    f"with that of {first_label} ({_files(first)}), array 0 below: {err}"
                )
    return None


def _files(array: ManifestArray) -> str:
    paths = array.manifest.path_table
    shown = ", ".join(paths[:2]) + (f" and {len(paths) - 2} more" if len(paths) > 2 else "")
    return shown or "no file"
