"""Whether new items can extend a published store, and encoding their coordinates like it.

A published store grows along one dimension (``time``): everything else must be the same grid,
the same variables, and the new steps must come after the published ones, since a store can
only be appended to. Checking this before writing is what keeps a republish from producing a
store whose coordinates describe only part of its data.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from virtualstac.errors import IncompatibleArraysError
from virtualstac.manifests.metadata import CF_ENCODING_ATTRS, same_value
from virtualstac.xarray.time_encoding import holds_datetimes

__all__ = [
    "DEFAULT_TIME_ENCODING",
    "check_appendable",
    "encode_like",
    "ordered_like",
    "with_time_encoding",
]

#: How a datetime coordinate without an encoding of its own is stored: exact to the
#: microsecond (STAC datetimes have fractional seconds) and the same for every append.
DEFAULT_TIME_ENCODING: dict[str, Any] = {
    "units": "microseconds since 1970-01-01T00:00:00",
    "calendar": "proleptic_gregorian",
    "dtype": np.dtype("int64"),
}
_IGNORED_ATTRS = frozenset({*CF_ENCODING_ATTRS, "coordinates", "missing_value"})


def check_appendable(existing: xr.Dataset, new: xr.Dataset, dim: str, where: str) -> None:
    """Raise unless ``new`` can be appended to ``existing`` along ``dim``.

    Both must have the same variables with the same dimensions; variables without ``dim`` the
    same shape and attributes, and index coordinates (the grid) the same values; variables
    with ``dim`` the same shape along every other dimension. ``new`` must start after
    ``existing`` ends along ``dim``. ``where`` names the store in messages.

    Raises
    ------
    IncompatibleArraysError
        Naming the first difference found.
    """
    missing = sorted(map(str, set(existing.variables) - set(new.variables)))
    extra = sorted(map(str, set(new.variables) - set(existing.variables)))
    if missing or extra:
        raise IncompatibleArraysError(
            f"the new items do not fit the store at {where}: "
            + "; ".join(
                part
                for part in (
                    f"they lack {', '.join(missing)}" if missing else "",
                    f"they add {', '.join(extra)}" if extra else "",
                )
                if part
            )
            + ". Publish items with the same assets, or publish them to a new target."
        )
    # Grid coordinates first: a different grid is the most telling difference to report.
    for name in sorted(new.variables, key=lambda n: (n not in new.indexes, str(n))):
        variable = new.variables[name]
        published = existing.variables[name]
        if published.dims != variable.dims:
            raise IncompatibleArraysError(
                f"the new items do not fit the store at {where}: {name!r} has dimensions "
                f"{variable.dims}, the store has {published.dims}"
            )
        if dim in variable.dims:
            axis = variable.dims.index(dim)
            if _without(variable.shape, axis) != _without(published.shape, axis):
                raise IncompatibleArraysError(
                    f"the new items do not fit the store at {where}: {name!r} has shape "
                    f"{variable.shape}, the store has {published.shape} (only {dim!r} may grow)"
                )
            continue
        _check_fixed(name, published, variable, where, indexed=name in existing.indexes)
    _check_order(existing, new, dim, where)


def ordered_like(dataset: xr.Dataset, existing: xr.Dataset) -> xr.Dataset:
    """``dataset`` with each variable's dimensions in the order the store has them.

    Kerchunk stores a pixel-interleaved raster in its stored ``(y, x, band)`` order (see
    :mod:`virtualstac.writers.zarr_v2`); new items, opened ``(band, y, x)``, are transposed to
    it, which moves references only.
    """
    changed = {
        name: variable.transpose(*existing.variables[name].dims)
        for name, variable in dataset.variables.items()
        if name in existing.variables
        and variable.dims != existing.variables[name].dims
        and set(variable.dims) == set(existing.variables[name].dims)
    }
    return dataset.assign(changed) if changed else dataset


def _without(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return shape[:axis] + shape[axis + 1 :]


def _check_fixed(
    name: Any, published: xr.Variable, variable: xr.Variable, where: str, *, indexed: bool
) -> None:
    if published.shape != variable.shape:
        raise IncompatibleArraysError(
            f"the new items do not fit the store at {where}: {name!r} has shape "
            f"{variable.shape}, the store has {published.shape}; they lie on another grid"
        )
    if indexed and not np.array_equal(published.values, variable.values):
        raise IncompatibleArraysError(
            f"the new items do not fit the store at {where}: their {name!r} coordinate differs "
            "from the store's; they lie on another grid, which references cannot resample"
        )
    mine = {k: v for k, v in variable.attrs.items() if k not in _IGNORED_ATTRS}
    theirs = {k: v for k, v in published.attrs.items() if k not in _IGNORED_ATTRS}
    differing = sorted(
        str(k) for k in set(mine) | set(theirs) if not same_value(mine.get(k), theirs.get(k))
    )
    if differing:
        raise IncompatibleArraysError(
            f"the new items do not fit the store at {where}: {name!r} differs in its "
            f"attributes {', '.join(differing)} (for example another CRS)"
        )


def _check_order(existing: xr.Dataset, new: xr.Dataset, dim: str, where: str) -> None:
    if dim not in existing.indexes or dim not in new.indexes:
        return
    last = np.asarray(existing.indexes[dim]).max()
    first = np.asarray(new.indexes[dim]).min()
    if not first > last:
        raise IncompatibleArraysError(
            f"the new items start at {dim}={first}, not after the end of the store at {where} "
            f"({dim}={last}); a published store can only be appended to. Publish them to a new "
            "target, or republish everything there."
        )


def with_time_encoding(dataset: xr.Dataset, dim: str) -> xr.Dataset:
    """Give a datetime ``dim`` coordinate without units :data:`DEFAULT_TIME_ENCODING`."""
    if dim not in dataset.coords or not np.issubdtype(dataset[dim].dtype, np.datetime64):
        return dataset
    if "units" in dataset[dim].encoding:
        return dataset
    dataset = dataset.copy()
    dataset[dim].encoding = dict(DEFAULT_TIME_ENCODING)
    return dataset


def encode_like(dataset: xr.Dataset, existing: xr.Dataset, dim: str) -> xr.Dataset:
    """Encode the ``dim`` coordinate of ``dataset`` as the store's (units, calendar, type).

    Appended values must mean the same as the stored ones; if they cannot be written exactly
    in the store's units, the writer refuses the differing units instead.
    """
    if dim not in dataset.coords or dim not in existing.coords:
        return dataset
    stored = existing[dim].encoding
    keys = ("units", "calendar", "dtype")
    if not holds_datetimes(dataset[dim].variable) or "units" not in stored:
        return dataset
    dataset = dataset.copy()
    dataset[dim].encoding = {k: stored[k] for k in keys if k in stored}
    return dataset
