"""ManifestArray: one virtual Zarr array, as a duck array xarray can wrap."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualstac.errors import (
    IncompatibleArraysError,
    InvalidManifestError,
    UnsupportedOperationError,
)
from virtualstac.manifests.grid_ops import expand_manifest, pad_manifest, subset_manifest
from virtualstac.manifests.manifest import MISSING_CHUNK_PATH, ChunkManifest
from virtualstac.manifests.metadata import (
    chunk_shape_of,
    codecs_with_axis,
    grid_shape,
    metadata_for_variable,
    parse_metadata,
    replace_metadata,
    same_value,
)
from virtualstac.manifests.sources import SourceStamp

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["ManifestArray"]

_LOAD_ADVICE = (
    "this variable holds references to chunks in archival files (a ManifestArray), not values, "
    "so it cannot be loaded, computed or plotted. For values, open it without "
    "references=True: open_stac(...), .to_xarray() or xr.open_dataset(..., "
    "engine='virtualstac') return lazy values; or read these references through their store: "
    "xr.open_zarr(ds.virtual.to_store(registry)); or read a small variable into memory while "
    "parsing: open_virtual_dataset(..., loadable_variables=[name])."
)

#: xarray's combining functions compare variables by loading them, or with numpy functions
#: ManifestArray cannot support.
_COMBINE_ADVICE = (
    "xr.concat, xr.merge and xr.combine_* compare variables by their values: combine datasets "
    "of values (open_stac(...) without references=True, or "
    "xr.open_zarr(ds.virtual.to_store(registry))); to assemble references, open all the Items "
    "at once with open_stac(items, references=True), or the files with "
    "open_virtual_mfdataset(...)."
)


class ManifestArray:
    """Virtualized representation of the chunk data of a single Zarr array.

    It pairs Zarr v3 array metadata (shape, data type, chunk grid, codecs, attributes) with a
    :class:`ChunkManifest`. It implements enough of the array API for xarray to wrap it and to
    concatenate, stack, broadcast and index it along chunk boundaries, all without reading data.
    """

    __slots__ = ("_manifest", "_metadata")

    _metadata: ArrayV3Metadata
    _manifest: ChunkManifest

    def __init__(
        self,
        metadata: ArrayV3Metadata | Mapping[str, Any],
        chunkmanifest: ChunkManifest | Mapping[str, Any],
    ) -> None:
        """Create a ManifestArray from Zarr v3 array metadata and a chunk manifest.

        Parameters
        ----------
        metadata
            ``ArrayV3Metadata``, or its JSON dict (as in ``zarr.json``).
        chunkmanifest
            A :class:`ChunkManifest`, or a dict of chunk keys to entries. A manifest whose grid
            (inferred from its keys) is smaller than the array's is extended with missing
            chunks, which read as the fill value.
        """
        metadata = parse_metadata(metadata)
        chunks = chunk_shape_of(metadata)
        expected = grid_shape(metadata.shape, chunks)
        if not isinstance(chunkmanifest, ChunkManifest):
            chunkmanifest = ChunkManifest(entries=dict(chunkmanifest), shape=expected)
        if chunkmanifest.shape_chunk_grid != expected:
            if expected == () and chunkmanifest.shape_chunk_grid == (1,):
                # A scalar's single chunk is keyed "0" in Kerchunk and VirtualiZarr manifests.
                chunkmanifest = subset_manifest(chunkmanifest, (0,))
            elif len(expected) == chunkmanifest.ndim_chunk_grid and all(
                have <= want
                for have, want in zip(chunkmanifest.shape_chunk_grid, expected, strict=True)
            ):
                chunkmanifest = pad_manifest(chunkmanifest, expected)
            else:
                raise InvalidManifestError(
                    f"manifest chunk grid {chunkmanifest.shape_chunk_grid} does not match array "
                    f"shape {metadata.shape} with chunks {chunks}: expected grid {expected}"
                )
        self._metadata = metadata
        self._manifest = chunkmanifest

    # -- description ----------------------------------------------------------------------

    @property
    def metadata(self) -> ArrayV3Metadata:
        """The Zarr v3 array metadata."""
        return self._metadata

    @property
    def manifest(self) -> ChunkManifest:
        """The chunk manifest."""
        return self._manifest

    @property
    def shape(self) -> tuple[int, ...]:
        """Array shape by number of elements along each dimension."""
        return tuple(int(s) for s in self._metadata.shape)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self._metadata.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy data type of the decoded array."""
        return np.dtype(self._metadata.data_type.to_native_dtype())

    @property
    def chunks(self) -> tuple[int, ...]:
        """The chunk shape: number of elements of one chunk along each dimension.

        xarray treats arrays with ``.chunks`` as chunked arrays; virtualstac registers a chunk
        manager for ManifestArray so that xarray operations keep working and loading fails with
        an explanation instead of a missing-chunk-manager error.
        """
        return chunk_shape_of(self._metadata)

    @property
    def fill_value(self) -> Any:
        """The fill value that missing chunks read as."""
        return self._metadata.fill_value

    @property
    def nbytes(self) -> int:
        """Size of the array's values if loaded, in bytes."""
        return self.size * self.dtype.itemsize

    @property
    def nbytes_virtual(self) -> int:
        """Memory used by the references of this array, in bytes."""
        return self._manifest.nbytes

    def __repr__(self) -> str:
        return f"ManifestArray<shape={self.shape}, dtype={self.dtype}, chunks={self.chunks}>"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d ManifestArray")
        return self.shape[0]

    # -- what cannot be done --------------------------------------------------------------

    def __array__(self, dtype: npt.DTypeLike | None = None, copy: bool | None = None) -> Any:
        """Refuse conversion to numpy: the values are not in memory."""
        raise UnsupportedOperationError(f"{_LOAD_ADVICE} {_COMBINE_ADVICE}")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """Refuse ufuncs, except ``isnan``, which xarray's equality checks call.

        ``isnan`` answers False everywhere: equality of manifest arrays compares references,
        and equal references hold equal values whether or not they are NaN.
        """
        if ufunc is np.isnan and method == "__call__":
            return np.zeros(self.shape, dtype=bool)
        raise UnsupportedOperationError(f"cannot apply {ufunc.__name__}: {_LOAD_ADVICE}")

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """Route numpy functions to :mod:`virtualstac.manifests.array_api`."""
        from virtualstac.manifests import array_api

        implementation = array_api.HANDLED_FUNCTIONS.get(func)
        if implementation is None:
            raise UnsupportedOperationError(
                f"numpy.{func.__name__} is not supported on ManifestArray; supported: "
                f"{', '.join(sorted(f.__name__ for f in array_api.HANDLED_FUNCTIONS))}. "
                f"{_COMBINE_ADVICE}"
            )
        if not all(issubclass(t, ManifestArray | np.ndarray) for t in types):
            return NotImplemented
        return implementation(*args, **kwargs)

    def astype(self, dtype: npt.DTypeLike, /, *, copy: bool = True) -> ManifestArray:
        """Return self if ``dtype`` holds every value unchanged; other casts are refused.

        That is the array's own dtype, or for fixed-length strings and bytes a wider (or
        unsized, ``"<U"``) type of the same kind, which xarray asks for when it aligns string
        variables: the values are the same, so the stored width is kept and no data is read.
        """
        target = np.dtype(dtype)
        mine = self.dtype
        if target == mine or (
            target.kind == mine.kind
            and mine.kind in "SU"
            and (target.itemsize == 0 or target.itemsize >= mine.itemsize)
        ):
            return self
        raise UnsupportedOperationError(
            f"cannot cast a ManifestArray from {mine} to {target}: the referenced bytes are "
            "fixed, and only a wider string or bytes type holds every value unchanged"
        )

    def with_fill_value_only(self, fill_value: Any) -> ManifestArray:
        """An array of this shape, chunking and codecs with no chunks: it reads as ``fill_value``.

        A placeholder for a variable that some files of a collection lack, so that it can be
        concatenated with theirs.
        """
        metadata = replace_metadata(self._metadata, fill_value=fill_value)
        return ManifestArray(metadata, ChunkManifest({}, shape=self._manifest.shape_chunk_grid))

    def transpose(self, *axes: Any) -> ManifestArray:
        """Permute the axes (all reversed without ``axes``), as ``numpy.ndarray.transpose``."""
        from virtualstac.manifests import array_api

        if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], int)):
            axes = () if axes[0] is None else tuple(axes[0])
        return array_api.transpose(self, axes=axes or None)

    # -- comparison -----------------------------------------------------------------------

    def __eq__(self, other: object) -> npt.NDArray[np.bool_]:  # type: ignore[override]
        """Element-wise equality: True where both arrays reference identical chunks.

        Comparing with anything but a ManifestArray gives False everywhere, because the values
        of a ManifestArray are unknown. Missing chunks are equal only if the fill values are.
        """
        if not isinstance(other, ManifestArray) or other.shape != self.shape:
            return np.zeros(self.shape, dtype=bool)
        if self._metadata.to_dict()["codecs"] != other._metadata.to_dict()["codecs"] or (
            self.dtype != other.dtype or self.chunks != other.chunks
        ):
            return np.zeros(self.shape, dtype=bool)
        chunk_equal = self._manifest.elementwise_eq(other._manifest)
        if not same_value(self.fill_value, other.fill_value):
            chunk_equal &= self._manifest.paths != MISSING_CHUNK_PATH
        for axis, chunk in enumerate(self.chunks):
            chunk_equal = np.repeat(chunk_equal, chunk, axis=axis)
        return chunk_equal[tuple(slice(0, s) for s in self.shape)]

    __hash__ = None  # type: ignore[assignment]

    # -- derived arrays -------------------------------------------------------------------

    def rename_paths(self, new: str | Callable[[str], str]) -> ManifestArray:
        """Return an array whose chunks point at renamed paths (see ChunkManifest.rename_paths).

        Examples
        --------
        >>> def local_to_s3(old: str) -> str:
        ...     return "s3://my-bucket/" + old.rsplit("/", 1)[-1]
        >>> marr.rename_paths(local_to_s3)  # doctest: +SKIP
        """
        return ManifestArray(self._metadata, self._manifest.rename_paths(new))

    def with_source_stamps(self, stamps: Mapping[str, SourceStamp]) -> ManifestArray:
        """Return an array whose manifest also records the versions of its source objects."""
        manifest = self._manifest.with_source_stamps(stamps)
        return self if manifest is self._manifest else ManifestArray(self._metadata, manifest)

    def to_virtual_variable(self) -> xr.Variable:
        """Wrap this array in an ``xarray.Variable`` with its dimension names and attributes."""
        import xarray as xr

        names = self._metadata.dimension_names
        if names is None and self.ndim == 0:
            names = ()  # how zarr and xarray write scalars (a CRS's spatial_ref) to Zarr v3
        if names is None or any(n is None for n in names):
            raise InvalidManifestError(
                f"array metadata needs a name for each of its {self.ndim} dimensions to become an "
                f"xarray variable, got {names!r}"
            )
        # The variable holds the names and attributes, where xarray changes them; the array keeps
        # what concatenation compares.
        data = ManifestArray(metadata_for_variable(self._metadata), self._manifest)
        return xr.Variable(dims=tuple(names), data=data, attrs=dict(self._metadata.attributes))

    def __getitem__(self, key: Any) -> ManifestArray:
        """Index without reading data (see :mod:`virtualstac.manifests.indexing`).

        Supported: no-ops (``...``, ``slice(None)``), ``None`` (new axes), slices with step 1
        whose ends fall on chunk boundaries (or the array end), integers along axes whose chunk
        size is 1, and, in uncompressed arrays, slices within one chunk along the axis that
        varies slowest in the stored chunk. Anything that would split chunks raises.
        """
        from virtualstac.manifests.indexing import index_array

        return index_array(self, key)


def expand_manifest_array(array: ManifestArray, axis: int) -> ManifestArray:
    """Insert an axis of length one (chunk size one) at ``axis``."""
    names = array.metadata.dimension_names
    shape = list(array.shape)
    chunks = list(array.chunks)
    shape.insert(axis, 1)
    chunks.insert(axis, 1)
    new_names = None
    if names is not None:
        new_names = list(names)
        new_names.insert(axis, None)
    try:
        codecs = codecs_with_axis(array.metadata.codecs, array.ndim, inserted=axis)
    except ValueError as err:
        raise IncompatibleArraysError(f"cannot insert axis {axis}: {err}") from err
    metadata = replace_metadata(
        array.metadata,
        shape=tuple(shape),
        chunk_shape=tuple(chunks),
        dimension_names=tuple(new_names) if new_names is not None else None,
        codecs=codecs,
    )
    return ManifestArray(metadata, expand_manifest(array.manifest, axis))
