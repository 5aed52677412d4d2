"""Joining and reshaping chunk manifests: concatenation, new axes, broadcasting.

These rewrite the grids of valid manifests, so they build results from the parts directly
instead of validating entries again. Source stamps travel with the paths they describe.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from virtualstac.errors import IncompatibleArraysError, InvalidManifestError
from virtualstac.manifests.manifest import ChunkManifest
from virtualstac.manifests.path_table import INLINED_CODE, MISSING_CODE, merge_tables
from virtualstac.manifests.sources import SourceStamp

__all__ = [
    "broadcast_manifest",
    "concatenate_manifests",
    "expand_manifest",
    "narrow_chunk_bytes",
    "pad_manifest",
    "subset_manifest",
]


def concatenate_manifests(manifests: Sequence[ChunkManifest], axis: int) -> ChunkManifest:
    """Join manifests along an existing grid axis, relabelling chunk keys."""
    if not manifests:
        raise InvalidManifestError("need at least one manifest to concatenate")
    table, codes = merge_tables([m._table for m in manifests], [m._codes for m in manifests])
    inlined: dict[tuple[int, ...], bytes] = {}
    shift = 0
    for m in manifests:
        for index, data in m._inlined.items():
            moved = list(index)
            moved[axis] += shift
            inlined[tuple(moved)] = data
        shift += m.shape_chunk_grid[axis]
    return ChunkManifest._from_parts(
        table,
        np.concatenate(codes, axis=axis),
        np.concatenate([m._offsets for m in manifests], axis=axis),
        np.concatenate([m._lengths for m in manifests], axis=axis),
        inlined,
        manifests[0]._separator,
        stamps=_merge_stamps(manifests),
    )


def _merge_stamps(manifests: Sequence[ChunkManifest]) -> dict[str, SourceStamp]:
    merged: dict[str, SourceStamp] = {}
    for m in manifests:
        for path, stamp in m._stamps.items():
            if merged.setdefault(path, stamp) != stamp:
                raise IncompatibleArraysError(
                    f"{path!r} was referenced in two versions ({merged[path]} and {stamp}); it "
                    "changed between parses, so its references cannot be trusted together"
                )
    return merged


def expand_manifest(manifest: ChunkManifest, axis: int) -> ChunkManifest:
    """Insert a grid axis of length one at ``axis``."""
    inlined = {(*k[:axis], 0, *k[axis:]): v for k, v in manifest._inlined.items()}
    return ChunkManifest._from_parts(
        manifest._table,
        np.expand_dims(manifest._codes, axis),
        np.expand_dims(manifest._offsets, axis),
        np.expand_dims(manifest._lengths, axis),
        inlined,
        manifest._separator,
        stamps=manifest._stamps,
    )


def broadcast_manifest(manifest: ChunkManifest, grid_shape: tuple[int, ...]) -> ChunkManifest:
    """Broadcast the grid to ``grid_shape`` by repeating references (numpy rules)."""
    codes = np.broadcast_to(manifest._codes, grid_shape)
    inlined: dict[tuple[int, ...], bytes] = {}
    if manifest._inlined:
        lead = len(grid_shape) - manifest.ndim_chunk_grid
        for target in np.ndindex(grid_shape):
            source = tuple(
                0 if s == 1 else t
                for t, s in zip(target[lead:], manifest.shape_chunk_grid, strict=True)
            )
            if source in manifest._inlined:
                inlined[target] = manifest._inlined[source]
    return ChunkManifest._from_parts(
        manifest._table,
        np.array(codes),
        np.array(np.broadcast_to(manifest._offsets, grid_shape)),
        np.array(np.broadcast_to(manifest._lengths, grid_shape)),
        inlined,
        manifest._separator,
        stamps=manifest._stamps,
    )


def pad_manifest(manifest: ChunkManifest, grid_shape: tuple[int, ...]) -> ChunkManifest:
    """Extend the grid to ``grid_shape`` (no smaller along any axis) with missing chunks."""
    if manifest.shape_chunk_grid == grid_shape:
        return manifest
    if len(grid_shape) != manifest.ndim_chunk_grid or any(
        old > new for old, new in zip(manifest.shape_chunk_grid, grid_shape, strict=True)
    ):
        raise InvalidManifestError(
            f"a chunk grid of shape {manifest.shape_chunk_grid} does not fit in {grid_shape}"
        )
    widths = [
        (0, new - old) for old, new in zip(manifest.shape_chunk_grid, grid_shape, strict=True)
    ]
    return ChunkManifest._from_parts(
        manifest._table,
        np.pad(manifest._codes, widths, constant_values=MISSING_CODE),
        np.pad(manifest._offsets, widths),
        np.pad(manifest._lengths, widths),
        manifest._inlined,
        manifest._separator,
        stamps=manifest._stamps,
    )


def narrow_chunk_bytes(manifest: ChunkManifest, skip: int, length: int) -> ChunkManifest:
    """Each present chunk's bytes narrowed to ``length`` bytes, ``skip`` bytes into it.

    Virtual chunks get their offsets moved and lengths shortened; inlined chunks are sliced.
    """
    virtual = manifest._codes > INLINED_CODE
    offsets = np.where(virtual, manifest._offsets + np.uint64(skip), manifest._offsets)
    lengths = np.where(manifest._codes != MISSING_CODE, np.uint64(length), manifest._lengths)
    inlined = {index: data[skip : skip + length] for index, data in manifest._inlined.items()}
    return ChunkManifest._from_parts(
        manifest._table,
        manifest._codes,
        offsets.astype(np.uint64),
        lengths.astype(np.uint64),
        inlined,
        manifest._separator,
        stamps=manifest._stamps,
    )


def subset_manifest(manifest: ChunkManifest, index: tuple[slice | int, ...]) -> ChunkManifest:
    """The manifest of a sub-grid selected by slices and integers of grid indices."""
    grid = manifest.shape_chunk_grid
    positions = np.arange(manifest._codes.size).reshape(grid)[index]
    inlined: dict[tuple[int, ...], bytes] = {}
    if manifest._inlined:
        old_to_new = {
            tuple(int(i) for i in np.unravel_index(int(p), grid)): new
            for new, p in zip(np.ndindex(positions.shape), positions.ravel().tolist(), strict=True)
        }
        inlined = {old_to_new[k]: v for k, v in manifest._inlined.items() if k in old_to_new}
    return ChunkManifest._from_parts(
        manifest._table,
        manifest._codes[index],
        manifest._offsets[index],
        manifest._lengths[index],
        inlined,
        manifest._separator,
        stamps=manifest._stamps,
    )
