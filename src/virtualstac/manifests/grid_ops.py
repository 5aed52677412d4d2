"""Joining and reshaping chunk manifests: concatenation, new axes, broadcasting.

These rewrite the grids of valid manifests, so they build results from the parts directly
instead of validating entries again. Source stamps travel with the paths they describe.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from virtualstac.errors import IncompatibleArraysError, InvalidManifestError
from virtualstac.manifests.manifest import ChunkManifest
from virtualstac.manifests.path_table import merge_tables
from virtualstac.manifests.sources import SourceStamp

__all__ = ["broadcast_manifest", "concatenate_manifests", "expand_manifest"]


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
