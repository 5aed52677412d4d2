"""Combining many files a batch at a time, where the batch was parsed.

``open_virtual_mfdataset`` over tens of thousands of files would otherwise send every file's
virtual dataset back to the caller and keep them all until the last one arrives. When the
files are alike along the dimension they are joined on (see
:func:`~virtualstac.xarray.combine.concat_along_existing`), each batch is joined where it was
parsed into one :class:`Partial`, and the caller joins the partials: it receives and keeps one
dataset per batch, not one per file. The result is the one joining every file at once gives:
concatenation is associative, and the attributes ``combine_attrs="drop_conflicts"`` drops
within a batch are carried with its partial, so that no later batch brings them back.

``combine="by_coords"`` is joined the same way when the files differ along one dimension
coordinate that increases in every file: a batch is put in the order of its files' first
coordinate values (as ``xr.combine_by_coords`` orders them), then the partials in the order of
theirs. If the joined coordinate does not strictly increase (batches that interleave, equal
values), the files are combined one by one by xarray instead.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd
import xarray as xr

from virtualstac.gc_pause import gc_paused
from virtualstac.manifests import ManifestArray
from virtualstac.storage.failures import redact
from virtualstac.xarray.combine import (
    check_time_encodings_agree,
    concat_along_existing,
    explaining_combine_errors,
)
from virtualstac.xarray.grid_mappings import check_grid_mappings_agree

__all__ = [
    "MAX_BATCH_FILES",
    "Partial",
    "as_partial",
    "by_coords_order",
    "combine_batch",
    "join_by_coords",
    "join_partials",
    "open_batch",
]

#: Files per batch at most: a worker holds a batch's virtual datasets (about 20 kB each for a
#: small netCDF4 file) until it joins them, and the progress bar moves a batch at a time.
MAX_BATCH_FILES = 1000


@dataclass(frozen=True)
class Partial:
    """Consecutive files' virtual datasets joined along ``dim`` (None for a single file, which
    joins along the dimension the other batches were joined on).

    ``dropped_attrs`` names the dataset's attributes dropped because two of the files disagree
    on them, and ``dropped`` the same per variable joined along ``dim``. ``label`` names the
    files in errors (see :func:`as_partial`).
    """

    dataset: xr.Dataset
    dim: Hashable | None
    files: int
    dropped_attrs: frozenset[Hashable] = frozenset()
    dropped: Mapping[Hashable, frozenset[Hashable]] = field(default_factory=dict)
    label: str = ""


def combine_batch(
    datasets: Sequence[xr.Dataset], dim: Hashable, options: Mapping[str, Any]
) -> Partial | None:
    """``datasets`` joined as :func:`concat_along_existing` joins them, or None when they are
    not alike or fewer than two (the caller then combines them one by one, with xarray)."""
    joined = concat_along_existing(datasets, dim, options)
    if joined is None:
        return None
    if options.get("combine_attrs") != "drop_conflicts":
        return Partial(joined, dim, len(datasets))
    attrs = _lost([dataset.attrs for dataset in datasets], joined.attrs)
    dropped = {
        name: lost
        for name, variable in joined.variables.items()
        if dim in variable.dims
        and (lost := _lost([d.variables[name].attrs for d in datasets], variable.attrs))
    }
    return Partial(joined, dim, len(datasets), attrs, dropped)


def _lost(
    given: Sequence[Mapping[Hashable, Any]], kept: Mapping[Hashable, Any]
) -> frozenset[Hashable]:
    """The attributes some of ``given`` have and ``kept`` has not."""
    return frozenset(key for attrs in given for key in attrs if key not in kept)


def as_partial(urls: Sequence[str], result: Partial | list[xr.Dataset]) -> Partial | None:
    """What :func:`open_batch` returned for the files ``urls`` as a partial to join (one file
    counts as one), labelled by its files; or None for the datasets of several files that
    could not be joined."""
    # Small variables are inlined in the references, so their arrays do not name their files:
    # the label does.
    first, last = redact(urls[0]), redact(urls[-1])
    label = first if len(urls) == 1 else f"the files {first} to {last}"
    if isinstance(result, Partial):
        return replace(result, label=label)
    return Partial(result[0], None, 1, label=label) if len(result) == 1 else None


def join_partials(
    partials: Sequence[Partial], dim: Hashable, options: Mapping[str, Any]
) -> xr.Dataset | None:
    """The partials joined along ``dim`` in order: what joining all their files at once gives,
    or None when the partials are not alike (the caller then needs the files one by one)."""
    if not partials or any(p.dim not in (dim, None) for p in partials):
        return None
    if len(partials) == 1:
        return partials[0].dataset
    datasets = [p.dataset for p in partials]
    labels = [p.label or _files_of(p.dataset) for p in partials]
    check_time_encodings_agree(datasets, labels)
    check_grid_mappings_agree(datasets, labels)
    with explaining_combine_errors(datasets, labels, along=(dim,), advise=True):
        joined = concat_along_existing(datasets, dim, options)
    if joined is None:
        return None
    # Only attributes this join created (the dataset's, those of variables along dim) change.
    for partial in partials:
        for key in partial.dropped_attrs:
            joined.attrs.pop(key, None)
        for name, keys in partial.dropped.items():
            for key in keys:
                joined.variables[name].attrs.pop(key, None)
    return joined


def by_coords_order(datasets: Sequence[xr.Dataset]) -> tuple[Hashable, list[int]] | None:
    """The one dimension coordinate ``datasets`` differ along, and their order by its first
    values, as ``xr.combine_by_coords`` orders them; None unless they have the same data
    variables, differ along exactly one indexed dimension, and it increases in each."""
    if len(datasets) < 2:
        return None
    first = datasets[0]
    names = set(first.data_vars)
    if any(set(dataset.data_vars) != names for dataset in datasets[1:]):
        return None
    differing: list[tuple[Hashable, list[pd.Index]]] = []
    for dim in first.dims:
        if dim not in first.variables:
            continue
        found = [dataset.xindexes.get(dim) for dataset in datasets]
        if any(index is None for index in found):
            return None
        indexes = [index.to_pandas_index() for index in found if index is not None]
        if not all(index.equals(indexes[0]) for index in indexes[1:]):
            differing.append((dim, indexes))
    if len(differing) != 1:
        return None
    dim, indexes = differing[0]
    if not all(index.size and index.is_monotonic_increasing for index in indexes):
        return None
    try:
        firsts = pd.Index([index[0] for index in indexes])
        if not firsts.is_unique:
            return None
        return dim, [int(i) for i in firsts.argsort()]
    except TypeError:  # values that do not compare (mixed calendars): xarray explains
        return None


def join_by_coords(partials: Sequence[Partial], options: Mapping[str, Any]) -> xr.Dataset | None:
    """The partials of ``combine="by_coords"`` joined in the order of their coordinates, as
    ``xr.combine_by_coords`` joins their files; None when they cannot be joined here."""
    if len(partials) == 1:
        if partials[0].dim is None:
            return None
        ordered, dim = list(partials), partials[0].dim
    else:
        order = by_coords_order([p.dataset for p in partials])
        if order is None:
            return None
        dim, positions = order
        ordered = [partials[i] for i in positions]
    joined = join_partials(ordered, dim, options)
    if joined is None or not _strictly_increasing(joined, dim):
        return None
    # xr.combine_by_coords merges what it concatenated, which keeps no dataset encoding.
    joined.encoding = {}
    return joined


def _files_of(dataset: xr.Dataset) -> str:
    """The files a partial's virtual variables reference, as errors name them."""
    for variable in dataset.variables.values():
        if isinstance(variable.data, ManifestArray) and (
            paths := variable.data.manifest.path_table
        ):
            shown = paths[0] if len(paths) == 1 else f"{paths[0]} to {paths[-1]}"
            return f"the files {shown}"
    return "a batch of files"


def _strictly_increasing(dataset: xr.Dataset, dim: Hashable) -> bool:
    index = dataset.xindexes[dim].to_pandas_index()
    return bool(index.is_monotonic_increasing and index.is_unique)


# Without collections while the batch is built: each would rescan every long-lived object
# (the libraries' and the batch's datasets so far), about a tenth of a small file's cost, to
# free a few cyclic objects per file (about 1 kB).
@gc_paused()
def open_batch(
    urls: Sequence[str],
    *,
    virtualize: Callable[[str], xr.Dataset],
    dim: Hashable | None,
    options: Mapping[str, Any],
) -> Partial | list[xr.Dataset]:
    """A batch of files opened by ``virtualize`` and joined along ``dim`` (None: along the
    dimension coordinate they differ by, in its order) when they are alike, else the virtual
    datasets one per file (a batch of one file: its dataset)."""
    datasets = [virtualize(url) for url in urls]
    if len(datasets) == 1:
        return datasets
    by_coords, positions = dim is None, list(range(len(datasets)))
    if by_coords:
        order = by_coords_order(datasets)
        if order is None:
            return datasets
        dim, positions = order
    ordered = [datasets[i] for i in positions]
    labels = [redact(urls[i]) for i in positions]
    check_time_encodings_agree(ordered, labels)
    check_grid_mappings_agree(ordered, labels)
    with explaining_combine_errors(ordered, labels, along=(dim,), advise=True):
        partial = combine_batch(ordered, dim, options)
    if partial is None or (by_coords and not _strictly_increasing(partial.dataset, dim)):
        return datasets
    return partial
