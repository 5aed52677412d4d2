"""Publishing Kerchunk parquet references on a dask.distributed cluster: the workers write them.

The items are split into batches along the concat dimension, in time order, as for Icechunk
(:mod:`virtualstac.stac.publish_distributed`). Each worker parses its batches and keeps them;
the client receives each batch's :class:`~virtualstac.writers.icechunk_regions.Layout`, its
loaded coordinates along the dimension (a few values per step) and its sources' versions, so
its memory does not grow with the number of chunks. The client stacks the layouts, creates the
reference set in a staging directory beside the target, writes ``.zmetadata`` and the loaded
coordinates (one chunk each, as a publish in one process writes them); each worker writes the
record files that lie wholly in its batch, and its rows of the records it shares with its
neighbours as pieces beside them, which the client joins and writes one record at a time
(:mod:`virtualstac.writers.kerchunk_records`). Then the directory is swapped in whole
(:mod:`virtualstac.writers.staging`): a worker lost on the way fails the publish
(:class:`~virtualstac.errors.WorkerLostError`) before the swap, so the target and the catalog
stay as they were, and publishing again completes. The target must be a directory the workers
see (a local path or a shared filesystem).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pystac
import xarray as xr
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualstac.errors import IncompatibleArraysError, WorkerLostError
from virtualstac.manifests import ChunkManifest, ManifestArray, ManifestGroup
from virtualstac.manifests.metadata import chunk_shape_of
from virtualstac.stac.levels import pyramid_group
from virtualstac.stac.publish_distributed import (
    BATCHES_PER_WORKER,
    Opening,
    batched,
    documents_of,
    item_of,
)
from virtualstac.writers.icechunk_regions import Layout, stack_layouts
from virtualstac.writers.kerchunk import (
    nodes_metadata,
    source_stamps,
    write_parquet_index,
)
from virtualstac.writers.kerchunk_records import (
    Piece,
    Rows,
    reference_path,
    write_array_records,
    write_pieces,
    write_region_records,
)
from virtualstac.writers.zarr_v2 import in_v2_layout
from virtualstac.xarray.convert import dataset_to_group

__all__ = ["ReferenceBatches"]


@dataclass(frozen=True)
class _Part:
    """One batch as its worker keeps it: the group it writes (in v2 layout, without the loaded
    coordinates along the dimension) and those coordinates, by level path."""

    group: ManifestGroup
    loaded: Mapping[str, xr.Dataset]
    description: xr.Dataset


@dataclass(frozen=True)
class _Summary:
    """What the client receives of a batch: small whatever its number of chunks."""

    layout: Layout
    loaded: Mapping[str, xr.Dataset]
    complete: Mapping[str, bool]
    stamps: Mapping[str, Any]
    description: xr.Dataset
    virtual: Mapping[str, tuple[tuple[str, ...], tuple[int, ...], Any, dict[str, Any], bool]]


@dataclass(frozen=True)
class _Parse:
    """What a worker does with its batch: open it, and set its loaded coordinates apart."""

    opening: Opening

    def __call__(self, documents: list[dict[str, Any]]) -> _Part:
        items = [item_of(document) for document in documents]
        levels = self.opening(items, parallel=False, progress=False)
        dim = self.opening.concat_dim
        loaded: dict[str, xr.Dataset] = {}
        described: list[xr.Dataset] = []

        def without_loaded(path: str, level: xr.Dataset) -> ManifestGroup:
            names = _loaded_along(level, dim)
            loaded[path] = level[names]
            described.append(level)
            group = dataset_to_group(level)
            arrays = {n: a for n, a in group.arrays.items() if n not in names}
            return ManifestGroup(arrays, group.groups, group.metadata.attributes)

        group = in_v2_layout(pyramid_group(levels, without_loaded))
        return _Part(group, loaded, described[0])


def _loaded_along(dataset: xr.Dataset, dim: str) -> list[str]:
    """Variables along ``dim`` held in memory: written as one chunk over every batch."""
    return [
        str(name)
        for name, variable in dataset.variables.items()
        if dim in variable.dims and not isinstance(variable.data, ManifestArray)
    ]


def _summary(part: _Part) -> _Summary:
    complete: dict[str, bool] = {}
    for path, node in part.group.walk():
        if isinstance(node, ManifestArray):
            manifest = node.manifest
            complete[path] = len(manifest) == math.prod(manifest.shape_chunk_grid)
    level = part.description
    virtual = {
        str(name): (
            tuple(str(d) for d in variable.dims),
            variable.shape,
            variable.dtype,
            dict(variable.attrs),
            name in level.coords,
        )
        for name, variable in level.variables.items()
        if isinstance(variable.data, ManifestArray)
    }
    return _Summary(
        Layout.of(part.group),
        part.loaded,
        complete,
        source_stamps(part.group, None),
        level.drop_vars(list(virtual)),
        virtual,
    )


def _write(
    part: _Part,
    directory: Path,
    places: dict[str, tuple[int, int]],
    dim: str,
    first: bool,
    record_size: int,
) -> list[Piece]:
    return write_region_records(
        part.group, directory, dim=dim, places=places, first=first, record_size=record_size
    )


class ReferenceBatches:
    """Items parsed on a cluster's workers, which write their records of the reference set."""

    def __init__(
        self, client: Any, items: Sequence[pystac.Item], opening: Opening, *, where: str
    ) -> None:
        """Open ``items`` (in time order) on the workers of ``client``, batch by batch.

        Raises
        ------
        WorkerLostError
            If a worker died while parsing.
        IncompatibleArraysError
            If the batches do not fit together, or an array grows along another axis than its
            first (its batches would not be runs of records).
        """
        self._client = client
        self._dim = dim = opening.concat_dim
        self._token = uuid.uuid4().hex[:12]
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        size = math.ceil(len(items) / (workers * BATCHES_PER_WORKER))
        self._parts = [
            client.submit(_Parse(opening), documents_of(batch), key=self._key("parse", n))
            for n, batch in enumerate(batched(items, size, opening.groups))
        ]
        summaries: list[_Summary] = self._gather(
            [
                client.submit(_summary, part, key=self._key("layout", n))
                for n, part in enumerate(self._parts)
            ]
        )
        try:
            self._layout, starts = stack_layouts([s.layout for s in summaries], dim, where)
            self._places = [self._places_of(start, where) for start in starts]
        except IncompatibleArraysError:
            self.release()
            raise
        self._loaded = {
            path: _concat([s.loaded[path] for s in summaries], dim) for path in summaries[0].loaded
        }
        self._complete = {
            path: all(s.complete[path] for s in summaries) for path in summaries[0].complete
        }
        self._stamps = {url: stamp for s in summaries for url, stamp in s.stamps.items()}
        self.dataset = self._described(summaries)

    def _key(self, step: str, number: int) -> str:
        return f"virtualstac-{step}-{number}-{self._token}"

    def _places_of(self, start: int, where: str) -> dict[str, tuple[int, int]]:
        """Where the batch starting at ``start`` along the dimension begins in each growing
        array's C-order chunk positions, and each such array's number of chunks."""
        places: dict[str, tuple[int, int]] = {}
        for path, metadata in self._layout.nodes.items():
            if not isinstance(metadata, ArrayV3Metadata):
                continue
            names = list(metadata.dimension_names or ())
            if self._dim not in names:
                continue
            if names.index(self._dim) != 0:
                raise IncompatibleArraysError(
                    f"{path!r} does not grow along its first axis {self._dim!r}, so the batches "
                    f"of the references at {where} are not runs of records; publish without a "
                    "cluster"
                )
            chunks = chunk_shape_of(metadata)
            grid = [math.ceil(n / c) for n, c in zip(metadata.shape, chunks, strict=True)]
            places[path] = (start // chunks[0] * math.prod(grid[1:]), math.prod(grid))
        return places

    def _gather(self, futures: list[Any], *, settle: bool = False) -> list[Any]:
        """The futures' results; on a failure, with ``settle`` the others are waited for (the
        other batches' writers must be done before their directory is removed)."""
        from distributed import KilledWorker

        try:
            return cast(list[Any], self._client.gather(futures))
        except BaseException as err:
            if settle:
                self._client.gather(futures, errors="skip")
            self.release()
            if isinstance(err, KilledWorker):
                raise WorkerLostError(
                    f"a dask worker died while publishing ({err}); nothing was written: "
                    "publish again to complete"
                ) from err
            raise

    def sources(self) -> Iterable[str]:
        """Every object the batches reference."""
        return set().union(*self._layout.sources.values())

    def write(self, directory: Path, *, record_size: int, notes: Mapping[str, Any]) -> None:
        """Write the reference set into the new ``directory``: the index and the loaded
        coordinates here, each batch's records on its worker, the shared records here."""
        loaded = {
            f"{level}/{name}" if level else name: array
            for level, dataset in self._loaded.items()
            for name, array in in_v2_layout(dataset_to_group(dataset)).arrays.items()
            if name in _loaded_along(dataset, self._dim)
        }
        nodes = {**self._layout.nodes, **{path: a.metadata for path, a in loaded.items()}}
        complete = {**self._complete, **{path: True for path in loaded}}
        directory.mkdir()
        for path in complete:
            (directory / path).mkdir(parents=True)
        section = {**notes, **({"sources": self._stamps} if self._stamps else {})}
        write_parquet_index(directory, nodes_metadata(nodes, complete), record_size, section)
        for path, array in loaded.items():
            rows = Rows.of(array, [reference_path(url) for url in array.manifest.path_table])
            write_array_records(rows, directory / path, record_size)
        writes = [
            self._client.submit(
                _write,
                part,
                directory,
                places,
                self._dim,
                n == 0,
                record_size,
                key=self._key("write", n),
            )
            for n, (part, places) in enumerate(zip(self._parts, self._places, strict=True))
        ]
        pieces = self._gather(writes, settle=True)
        self.release()
        write_pieces([piece for batch in pieces for piece in batch], directory, record_size)

    def release(self) -> None:
        """Let the workers drop the parsed batches."""
        self._client.cancel(self._parts)

    def _described(self, summaries: Sequence[_Summary]) -> xr.Dataset:
        """The published dataset as the catalog describes it: dimensions, attributes and the
        loaded coordinates' values; the virtual variables are never read."""
        dataset = _concat([s.description for s in summaries], self._dim)
        level = "0/" if any(path.startswith("0/") for path in self._layout.nodes) else ""
        for name, (dims, shape, dtype, attrs, coordinate) in summaries[0].virtual.items():
            if name in dims:  # a dimension coordinate not in memory: no values to describe
                metadata = self._layout.nodes[level + name]
                assert isinstance(metadata, ArrayV3Metadata)
                variable = xr.Variable(dims, _unread(metadata), attrs)
            else:
                if self._dim in dims:
                    axis = dims.index(self._dim)
                    length = sum(s.virtual[name][1][axis] for s in summaries)
                    shape = (*shape[:axis], length, *shape[axis + 1 :])
                variable = xr.Variable(dims, np.broadcast_to(np.zeros((), dtype), shape), attrs)
            if coordinate:
                dataset = dataset.assign_coords(xr.Coordinates({name: variable}, indexes={}))
            else:
                dataset[name] = variable
        return dataset


def _unread(metadata: ArrayV3Metadata) -> ManifestArray:
    """An array of ``metadata`` with no chunk: the catalog reads no values from it."""
    chunks = chunk_shape_of(metadata)
    grid = tuple(math.ceil(n / c) for n, c in zip(metadata.shape, chunks, strict=True))
    manifest = ChunkManifest.from_arrays(
        paths=np.full(grid, "", dtype=np.dtypes.StringDType()),
        offsets=np.zeros(grid, dtype=np.uint64),
        lengths=np.zeros(grid, dtype=np.uint64),
    )
    return ManifestArray(metadata, manifest)


def _concat(parts: Sequence[xr.Dataset], dim: str) -> xr.Dataset:
    """The batches' in-memory variables joined along ``dim`` (the others as in the first)."""
    if not any(dim in variable.dims for variable in parts[0].variables.values()):
        return parts[0]
    return xr.concat(
        list(parts),
        dim,
        data_vars="minimal",
        coords="minimal",
        compat="override",
        join="override",
        combine_attrs="override",
    )
