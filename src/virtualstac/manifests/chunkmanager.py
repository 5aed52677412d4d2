"""xarray chunk manager for ManifestArray.

xarray counts any duck array with a ``.chunks`` attribute as a chunked array and looks for a
chunk manager to compute it. ManifestArray exposes ``.chunks`` (its Zarr chunk shape), so this
manager is registered under the ``xarray.chunkmanagers`` entry point: xarray then finds it, and
every attempt to compute virtual data ends in one clear error instead of
"Could not find a Chunk Manager" or a bare ``NotImplementedError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from xarray.namedarray.parallelcompat import ChunkManagerEntrypoint

from virtualstac.errors import UnsupportedOperationError
from virtualstac.manifests.array import _COMBINE_ADVICE, _LOAD_ADVICE, ManifestArray

__all__ = ["ManifestChunkManager"]

_RECHUNK_ADVICE = "virtual arrays cannot be rechunked: their chunks are the source files' chunks"


def _refuse_values() -> NoReturn:
    raise UnsupportedOperationError(f"{_LOAD_ADVICE} {_COMBINE_ADVICE}")


# Parametrised with Any: ManifestArray deliberately lacks the rechunk() and compute() methods of
# xarray's ChunkedArrayMixinProtocol, since neither can be done without the values.
class ManifestChunkManager(ChunkManagerEntrypoint[Any]):
    """Recognises ManifestArrays for xarray; refuses to compute, store or rechunk them."""

    available = True

    def __init__(self) -> None:
        """Declare ManifestArray as the chunked array type this manager handles."""
        self.array_cls = ManifestArray

    def is_chunked_array(self, data: Any) -> bool:
        """Whether ``data`` is a ManifestArray."""
        return isinstance(data, ManifestArray)

    def chunks(self, data: ManifestArray) -> tuple[tuple[int, ...], ...]:
        """Block sizes along each axis, in dask's normalised form."""
        return tuple(
            tuple([c] * (s // c) + ([s % c] if s % c else [])) if c else ()
            for s, c in zip(data.shape, data.chunks, strict=True)
        )

    def normalize_chunks(self, *args: Any, **kwargs: Any) -> Any:
        """Refuse: virtual arrays keep the chunking of their source files."""
        raise UnsupportedOperationError(_RECHUNK_ADVICE)

    def rechunk(self, *args: Any, **kwargs: Any) -> Any:
        """Refuse: virtual arrays keep the chunking of their source files."""
        raise UnsupportedOperationError(_RECHUNK_ADVICE)

    def unify_chunks(self, *args: Any, **kwargs: Any) -> Any:
        """Refuse: unifying chunks would mean rechunking virtual arrays."""
        raise UnsupportedOperationError(_RECHUNK_ADVICE)

    def from_array(self, data: Any, chunks: Any, **kwargs: Any) -> ManifestArray:
        """Refuse: in-memory data cannot become references."""
        raise UnsupportedOperationError(
            "virtualstac does not chunk in-memory arrays; use dask (set "
            "xarray.set_options(chunk_manager='dask')) for ordinary chunking"
        )

    def compute(self, *data: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Refuse: computing would need the values of virtual chunks."""
        _refuse_values()

    def persist(self, *data: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Refuse: persisting would need the values of virtual chunks."""
        _refuse_values()

    def store(self, *args: Any, **kwargs: Any) -> Any:
        """Refuse: writing values (``to_netcdf``, ``to_zarr``) needs the values of the chunks.

        Virtual datasets are written as references with ``ds.virtual.to_icechunk`` or
        ``ds.virtual.to_kerchunk`` instead.
        """
        _refuse_values()

    def apply_gufunc(
        self, func: Callable[..., Any], signature: str, *args: Any, **kwargs: Any
    ) -> Any:
        """Refuse: functions over values need loaded data."""
        _refuse_values()

    def map_blocks(self, *args: Any, **kwargs: Any) -> Any:
        """Refuse: functions over values need loaded data."""
        _refuse_values()

    def blockwise(self, *args: Any, **kwargs: Any) -> Any:
        """Refuse: functions over values need loaded data."""
        _refuse_values()

    def reduction(self, *args: Any, **kwargs: Any) -> Any:
        """Refuse: reductions need loaded data."""
        _refuse_values()

    def scan(self, *args: Any, **kwargs: Any) -> Any:
        """Refuse: cumulative functions need loaded data."""
        _refuse_values()

    def shuffle(self, *args: Any, **kwargs: Any) -> Any:
        """Refuse: reordering elements needs loaded data."""
        _refuse_values()

    @property
    def array_api(self) -> Any:
        """The functions ManifestArray supports (concatenate, stack, expand_dims, broadcast_to)."""
        from virtualstac.manifests import array_api

        return array_api
