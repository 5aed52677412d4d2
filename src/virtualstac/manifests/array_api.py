"""The subset of the array API that ManifestArray supports, by rewriting references only.

These functions are what ``np.concatenate``, ``np.stack``, ``np.expand_dims`` and
``np.broadcast_to`` (and so ``xr.concat``, ``xr.combine_*`` and broadcasting in xarray) call on
ManifestArrays through ``__array_function__``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from virtualstac.errors import IncompatibleArraysError
from virtualstac.manifests.array import ManifestArray, expand_manifest_array
from virtualstac.manifests.grid_ops import broadcast_manifest, concatenate_manifests
from virtualstac.manifests.manifest import ChunkManifest
from virtualstac.manifests.metadata import (
    check_combinable,
    codecs_with_axis,
    grid_shape,
    replace_metadata,
)

__all__ = [
    "HANDLED_FUNCTIONS",
    "broadcast_to",
    "concatenate",
    "expand_dims",
    "stack",
    "transpose",
]

HANDLED_FUNCTIONS: dict[Callable[..., Any], Callable[..., Any]] = {}

F = TypeVar("F", bound=Callable[..., Any])


def _implements(numpy_function: Callable[..., Any], *positional: str) -> Callable[[F], F]:
    """Register ``func`` as the implementation of ``numpy_function`` for ManifestArrays.

    ``positional`` names the parameters after the first that numpy lets callers pass by
    position (``np.concatenate(arrays, 0)``, ``np.expand_dims(a, 0)``) but that the array API
    signatures here take by keyword only.
    """

    def register(func: F) -> F:
        def call_from_numpy(first: Any, *args: Any, **kwargs: Any) -> Any:
            if len(args) > len(positional):
                raise TypeError(
                    f"{numpy_function.__name__}() on ManifestArrays takes at most "
                    f"{len(positional) + 1} positional arguments, got {len(args) + 1}"
                )
            for name, value in zip(positional, args, strict=False):
                if name in kwargs:
                    raise TypeError(f"{numpy_function.__name__}() got {name!r} twice")
                kwargs[name] = value
            return func(first, **kwargs)

        HANDLED_FUNCTIONS[numpy_function] = call_from_numpy if positional else func
        return func

    return register


def _as_manifest_arrays(arrays: Sequence[Any], what: str) -> list[ManifestArray]:
    arrays = list(arrays)
    if not arrays:
        raise ValueError(f"need at least one array to {what}")
    for i, array in enumerate(arrays):
        if not isinstance(array, ManifestArray):
            raise IncompatibleArraysError(
                f"cannot {what} a ManifestArray with a {type(array).__name__} (array {i}): "
                "virtual and in-memory data cannot share one array; load the virtual variable or "
                "keep the in-memory one separate"
            )
    return arrays


def _normalize_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim


@_implements(np.concatenate, "axis")
def concatenate(arrays: Sequence[ManifestArray], /, *, axis: int | None = 0) -> ManifestArray:
    """Concatenate ManifestArrays by merging their chunk manifests.

    The arrays must agree in data type, codecs, fill value, chunk shape and CF encoding
    attributes, and all but the last must end on a chunk boundary along ``axis``; arrays of
    no length along ``axis`` are left out (unless all are).
    """
    manifest_arrays = _as_manifest_arrays(arrays, "concatenate")
    if axis is None:
        raise IncompatibleArraysError(
            "cannot concatenate ManifestArrays with axis=None (flattening)"
        )
    first = manifest_arrays[0]
    if any(a.ndim != first.ndim for a in manifest_arrays):
        raise IncompatibleArraysError(
            f"cannot concatenate arrays with {sorted({a.ndim for a in manifest_arrays})} dimensions"
        )
    axis = _normalize_axis(axis, first.ndim)
    # Each shape once: a shape is rebuilt from the metadata on every access, and this runs
    # over every file of an archive.
    shapes = [a.shape for a in manifest_arrays]
    others = shapes[0][:axis] + shapes[0][axis + 1 :]
    for i, shape in enumerate(shapes):
        if shape[:axis] + shape[axis + 1 :] != others:
            raise IncompatibleArraysError(
                f"cannot concatenate along axis {axis}: array 0 has shape {shapes[0]}, "
                f"array {i} has shape {shape}"
            )
    # An array of no length along the axis (a file with no time steps yet) adds no chunk: its
    # codecs and chunks (often other ones, or none when inlined) are not those of any value.
    if any(shape[axis] for shape in shapes) and not all(shape[axis] for shape in shapes):
        kept = [i for i, shape in enumerate(shapes) if shape[axis]]
        manifest_arrays = [manifest_arrays[i] for i in kept]
        shapes = [shapes[i] for i in kept]
        first = manifest_arrays[0]
    check_combinable([a.metadata for a in manifest_arrays], what="concatenate")
    chunk = first.chunks[axis]
    for i, shape in enumerate(shapes[:-1]):
        if shape[axis] % chunk:
            raise IncompatibleArraysError(
                "Cannot concatenate arrays with partial chunks because only regular chunk grids "
                f"are currently supported. Concat input {i} has array length {shape[axis]} "
                "along the concatenation axis which is not evenly divisible by chunk length "
                f"{chunk}. Its length is not a multiple of its chunk size, so its last chunk is "
                f"partial and the chunks after it would land at the wrong positions (axis {axis})."
            )
    new_shape = list(shapes[0])
    new_shape[axis] = sum(shape[axis] for shape in shapes)
    manifest = concatenate_manifests([a.manifest for a in manifest_arrays], axis=axis)
    return ManifestArray(replace_metadata(first.metadata, shape=tuple(new_shape)), manifest)


@_implements(np.stack, "axis")
def stack(arrays: Sequence[ManifestArray], /, *, axis: int = 0) -> ManifestArray:
    """Stack ManifestArrays along a new axis by merging their chunk manifests."""
    manifest_arrays = _as_manifest_arrays(arrays, "stack")
    shapes = {a.shape for a in manifest_arrays}
    if len(shapes) > 1:
        raise IncompatibleArraysError(f"cannot stack arrays of different shapes {sorted(shapes)}")
    axis = _normalize_axis(axis, manifest_arrays[0].ndim + 1)
    return concatenate([expand_dims(a, axis=axis) for a in manifest_arrays], axis=axis)


@_implements(np.expand_dims, "axis")
def expand_dims(x: ManifestArray, /, *, axis: int = 0) -> ManifestArray:
    """Insert a new axis of size one (with chunk size one) at ``axis``."""
    return expand_manifest_array(x, _normalize_axis(axis, x.ndim + 1))


@_implements(np.broadcast_to, "shape")
def broadcast_to(x: ManifestArray, /, shape: tuple[int, ...]) -> ManifestArray:
    """Broadcast to ``shape`` by prepending axes and repeating references along size-1 axes.

    Only axes whose chunk size is one can be repeated (each repeat is a whole chunk).
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) < x.ndim:
        raise ValueError(f"cannot broadcast shape {x.shape} to fewer dimensions {shape}")
    lead = len(shape) - x.ndim
    chunks = [1] * lead + list(x.chunks)
    for axis, (old, new) in enumerate(zip(x.shape, shape[lead:], strict=True)):
        if old == new:
            continue
        if old != 1:
            raise ValueError(f"cannot broadcast shape {x.shape} to {shape}")
        if x.chunks[axis] != 1:
            raise IncompatibleArraysError(
                f"cannot broadcast axis {axis}: its chunk size is {x.chunks[axis]}, not 1"
            )
    names = x.metadata.dimension_names
    codecs: list[Any] = list(x.metadata.codecs)
    for ndim in range(x.ndim, x.ndim + lead):
        try:
            codecs = codecs_with_axis(codecs, ndim, inserted=0)
        except ValueError as err:
            raise IncompatibleArraysError(f"cannot broadcast to {shape}: {err}") from err
    metadata = replace_metadata(
        x.metadata,
        shape=shape,
        chunk_shape=tuple(chunks),
        dimension_names=(None,) * lead + tuple(names) if names is not None else None,
        codecs=codecs,
    )
    manifest = broadcast_manifest(x.manifest, grid_shape(shape, chunks))
    return ManifestArray(metadata, manifest)


@_implements(np.transpose, "axes")
def transpose(x: ManifestArray, /, *, axes: Sequence[int] | None = None) -> ManifestArray:
    """Permute the axes by permuting the chunk grid; the chunks' bytes stay as they are.

    The stored layout of a chunk does not change, so a ``transpose`` codec in front of the
    chain (added if there is none, dropped when it becomes the identity) maps the new axes
    to it, and the codecs after it see the chunk they saw before.
    """
    from zarr.codecs import TransposeCodec

    perm = list(range(x.ndim))[::-1] if axes is None else [int(a) for a in axes]
    perm = [_normalize_axis(a, x.ndim) for a in perm]
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"axes {list(axes or [])} are not a permutation of {x.ndim} axes")
    if perm == list(range(x.ndim)):
        return x
    codecs: list[Any] = list(x.metadata.codecs)
    stored = list(range(x.ndim))  # the old axis at each position of the stored chunk
    if codecs and isinstance(codecs[0], TransposeCodec):
        stored = [int(o) for o in codecs.pop(0).order]
    new_axis = {old: new for new, old in enumerate(perm)}
    order = [new_axis[old] for old in stored]
    if order != list(range(x.ndim)):
        codecs.insert(0, TransposeCodec(order=order))
    names = x.metadata.dimension_names
    manifest = x.manifest
    transposed = ChunkManifest.from_arrays(
        paths=manifest.paths.transpose(perm),
        offsets=manifest.offsets.transpose(perm),
        lengths=manifest.lengths.transpose(perm),
        inlined={tuple(k[p] for p in perm): v for k, v in manifest.inlined.items()},
        validate_paths=False,
        separator=manifest.separator,
    ).with_source_stamps(manifest.source_stamps)
    metadata = replace_metadata(
        x.metadata,
        shape=tuple(x.shape[p] for p in perm),
        chunk_shape=tuple(x.chunks[p] for p in perm),
        dimension_names=tuple(names[p] for p in perm) if names is not None else None,
        codecs=[c.to_dict() for c in codecs],
    )
    return ManifestArray(metadata, transposed)


@_implements(np.result_type)
def result_type(*arrays_and_dtypes: Any) -> np.dtype[Any]:
    """The numpy result type, using each ManifestArray's dtype.

    ManifestArrays of different dtypes have none: their bytes cannot be cast to a common
    type without reading them.
    """
    dtypes = {a.dtype for a in arrays_and_dtypes if isinstance(a, ManifestArray)}
    if len(dtypes) > 1:
        raise IncompatibleArraysError(
            f"ManifestArrays with inconsistent dtypes {sorted(map(str, dtypes))} have no common "
            "type: casting them would need their values. Load the variables "
            "(loadable_variables=[...]) to combine them."
        )
    return np.result_type(
        *(a.dtype if isinstance(a, ManifestArray) else a for a in arrays_and_dtypes)
    )
