"""Writing one group from several processes: its layout first, then each batch's region of it.

A group too big for one process is built in batches along one dimension (``time``), each in
the process that parsed it. That process describes its batch as a :class:`Layout` (metadata,
sources, a fingerprint of each array the dimension does not cross), which is small whatever the
number of chunks. The coordinating process stacks the layouts (:func:`stack_layouts`), writes
the stacked metadata into an Icechunk session (:func:`write_layout`) and forks the session once
per batch; each batch's process writes its references into its fork at its place along the
dimension (:func:`write_region`); the coordinator merges the forks and commits once. Nothing
reaches the branch before that commit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from zarr.core.group import GroupMetadata
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualstac.errors import IncompatibleArraysError
from virtualstac.manifests import ManifestArray, ManifestGroup
from virtualstac.manifests.metadata import check_combinable, chunk_shape_of, replace_metadata
from virtualstac.manifests.sources import LocalFileStamp
from virtualstac.writers.icechunk import (
    WriteSummary,
    _exists,
    _key,
    _metadata_json_from,
    _set,
    _write_refs,
    grow_array,
)

__all__ = ["Layout", "stack_layouts", "write_layout", "write_region"]

Metadata = ArrayV3Metadata | GroupMetadata


@dataclass(frozen=True)
class Layout:
    """A group without its references: what the coordinator needs to write its metadata.

    ``nodes`` holds every group's and array's metadata by path (parents first);
    ``fingerprints`` a digest of each array's references and inlined chunks, which tells
    whether batches agree on the arrays that do not grow; ``sources`` the objects each array
    references; ``counts`` each array's references and referenced bytes; ``local_files`` the
    stamps of the local sources (see :class:`~virtualstac.writers.icechunk.WriteSummary`).
    """

    nodes: Mapping[str, Metadata]
    fingerprints: Mapping[str, str]
    sources: Mapping[str, frozenset[str]]
    counts: Mapping[str, tuple[int, int]]
    local_files: Mapping[str, LocalFileStamp]

    @classmethod
    def of(cls, group: ManifestGroup) -> Layout:
        """The layout of ``group`` (stamping its local sources)."""
        nodes: dict[str, Metadata] = {}
        fingerprints: dict[str, str] = {}
        sources: dict[str, frozenset[str]] = {}
        counts: dict[str, tuple[int, int]] = {}
        for path, node in group.walk():
            nodes[path] = node.metadata
            if isinstance(node, ManifestArray):
                manifest = node.manifest
                fingerprints[path] = _fingerprint(node)
                sources[path] = frozenset(manifest.path_table)
                virtual = manifest.path_codes >= 0
                counts[path] = (int(virtual.sum()), int(manifest.lengths[virtual].sum()))
        every = sorted(set().union(*sources.values())) if sources else []
        return cls(nodes, fingerprints, sources, counts, LocalFileStamp.of_all(every))

    def summary(self) -> WriteSummary:
        """What writing every batch puts into the repository."""
        every = set().union(*self.sources.values()) if self.sources else set()
        references = sum(count for count, _ in self.counts.values())
        referenced = sum(size for _, size in self.counts.values())
        return WriteSummary(
            len(every), references, referenced, len(self.counts), dict(self.local_files)
        )


def _fingerprint(array: ManifestArray) -> str:
    manifest = array.manifest
    digest = hashlib.sha256(_metadata_json_from(array.metadata))
    digest.update("\0".join(manifest.path_table).encode())
    for values in (manifest.path_codes, manifest.offsets, manifest.lengths):
        digest.update(np.ascontiguousarray(values).tobytes())
    for index, data in sorted(manifest.inlined.items()):
        digest.update(repr(index).encode())
        digest.update(data)
    return digest.hexdigest()


def _axis(metadata: Metadata, dim: str) -> int | None:
    if not isinstance(metadata, ArrayV3Metadata):
        return None
    names = list(metadata.dimension_names or ())
    return names.index(dim) if dim in names else None


def _length(layout: Layout, dim: str) -> int:
    for metadata in layout.nodes.values():
        axis = _axis(metadata, dim)
        if axis is not None and isinstance(metadata, ArrayV3Metadata):
            return int(metadata.shape[axis])
    return 0


def stack_layouts(layouts: Sequence[Layout], dim: str, where: str) -> tuple[Layout, list[int]]:
    """The layout of the batches joined along ``dim``, and where each batch starts along it.

    Arrays with ``dim`` grow by each batch's length; all others must be the same in every
    batch (same metadata, references and inlined chunks). ``where`` names the store in errors.

    Raises
    ------
    IncompatibleArraysError
        If the batches hold other arrays or groups, arrays that cannot join (codecs, shapes
        outside ``dim``), differing arrays without ``dim``, or a batch that does not end on a
        chunk boundary (the next batch's chunks would land at the wrong positions).
    """
    first = layouts[0]
    starts: list[int] = []
    total = 0
    for number, layout in enumerate(layouts):
        if set(layout.nodes) != set(first.nodes):
            raise IncompatibleArraysError(
                f"the items cannot be stacked into the store at {where}: batch {number} holds "
                f"{sorted(layout.nodes)}, batch 0 {sorted(first.nodes)}"
            )
        starts.append(total)
        total += _length(layout, dim)
    nodes: dict[str, Metadata] = {}
    for path, metadata in first.nodes.items():
        axis = _axis(metadata, dim)
        if axis is None or not isinstance(metadata, ArrayV3Metadata):
            _check_same(path, layouts, where)
            nodes[path] = metadata
            continue
        arrays = [cast(ArrayV3Metadata, layout.nodes[path]) for layout in layouts]
        check_combinable(arrays, what=f"stack {path!r} along {dim!r} for the store at {where}")
        _check_alike(path, arrays, axis, dim, where)
        shape = list(metadata.shape)
        shape[axis] = total
        nodes[path] = replace_metadata(metadata, shape=tuple(shape))
    stacked = Layout(
        nodes,
        first.fingerprints,
        {path: _union(layout.sources[path] for layout in layouts) for path in first.sources},
        {path: _counted(path, layouts, dim) for path in first.counts},
        {url: stamp for layout in layouts for url, stamp in layout.local_files.items()},
    )
    return stacked, starts


def _union(sets: Iterable[frozenset[str]]) -> frozenset[str]:
    return frozenset().union(*sets)


def _counted(path: str, layouts: Sequence[Layout], dim: str) -> tuple[int, int]:
    """An array's references and bytes once written: every batch's if it grows, else one's."""
    if _axis(layouts[0].nodes[path], dim) is None:
        return layouts[0].counts[path]
    return (
        sum(layout.counts[path][0] for layout in layouts),
        sum(layout.counts[path][1] for layout in layouts),
    )


def _check_same(path: str, layouts: Sequence[Layout], where: str) -> None:
    first = layouts[0]
    for number, layout in enumerate(layouts[1:], start=1):
        same_metadata = layout.nodes[path].to_dict() == first.nodes[path].to_dict()
        if not same_metadata or layout.fingerprints.get(path) != first.fingerprints.get(path):
            raise IncompatibleArraysError(
                f"the items cannot be stacked into the store at {where}: {path or 'the root'!r} "
                f"differs between batch 0 and batch {number} (another grid, or other attributes)"
            )


def _check_alike(path: str, arrays: Sequence[Metadata], axis: int, dim: str, where: str) -> None:
    """Batches of an array must differ in their length along ``dim`` only, and all but the last
    end on a chunk boundary."""
    first = arrays[0]
    assert isinstance(first, ArrayV3Metadata)
    for number, metadata in enumerate(arrays):
        assert isinstance(metadata, ArrayV3Metadata)
        if replace_metadata(metadata, shape=first.shape).to_dict() != first.to_dict():
            raise IncompatibleArraysError(
                f"the items cannot be stacked into the store at {where}: batch {number} of "
                f"{path!r} differs from batch 0 in more than its length along {dim!r} (for "
                "example the units its values are encoded in); publish without a cluster"
            )
        chunk = chunk_shape_of(metadata)[axis]
        if number < len(arrays) - 1 and metadata.shape[axis] % chunk:
            raise IncompatibleArraysError(
                f"the items cannot be stacked into the store at {where}: batch {number} of "
                f"{path!r} holds {metadata.shape[axis]} steps along {dim!r}, not a multiple of "
                f"its chunk size {chunk}"
            )


def write_layout(
    layout: Layout, store: Any, *, append_dim: str | None = None
) -> dict[str, tuple[int, ...] | None]:
    """Write ``layout``'s metadata into an Icechunk session's store, before its regions.

    With ``append_dim``, arrays already in the repository are lengthened along it (see
    :func:`~virtualstac.writers.icechunk.grow_array`) and groups already there are kept.

    Returns
    -------
    Where each array's first batch goes in its chunk grid; None for arrays already in the
    repository that do not grow, which no region writes again.
    """
    places: dict[str, tuple[int, ...] | None] = {}
    for path, metadata in layout.nodes.items():
        key = _key(path, "zarr.json")
        there = append_dim is not None and _exists(store, key)
        if isinstance(metadata, GroupMetadata):
            if not there:
                _set(store, key, _metadata_json_from(metadata))
            continue
        if there:
            assert append_dim is not None
            places[path] = grow_array(store, path, metadata, set(layout.sources[path]), append_dim)
        else:
            _set(store, key, _metadata_json_from(metadata))
            places[path] = (0,) * len(metadata.shape)
    return places


def write_region(
    group: ManifestGroup,
    store: Any,
    *,
    dim: str,
    places: Mapping[str, tuple[int, ...] | None],
    start: int,
    first: bool,
    validate_containers: bool = True,
    locations: Callable[[str], str] | None = None,
) -> None:
    """Write one batch's references and inlined chunks into a fork of the session.

    ``places`` is what :func:`write_layout` returned, ``start`` where the batch starts along
    ``dim`` (from :func:`stack_layouts`). Arrays without ``dim`` are written by the ``first``
    batch only: every batch holds the same ones. ``locations`` is the location Icechunk stores
    for each source URL (see :func:`~virtualstac.writers.icechunk.write_icechunk`).
    """
    for path, node in group.walk():
        if not isinstance(node, ManifestArray):
            continue
        place = places[path]
        axis = _axis(node.metadata, dim)
        if place is None or (axis is None and not first):
            continue
        offset = list(place)
        if axis is not None:
            offset[axis] += start // chunk_shape_of(node.metadata)[axis]
        _write_refs(store, path, node, tuple(offset), validate_containers, locations)
