"""xarray chunk manager for ManifestArray.

xarray counts any duck array with a ``.chunks`` attribute as a chunked array and looks for a
chunk manager to compute it. ManifestArray exposes ``.chunks`` (its Zarr chunk shape), so this
manager is registered under the ``xarray.chunkmanagers`` entry point: xarray then finds it, and
every attempt to compute virtual data ends in one clear error instead of
"Could not find a Chunk Manager".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xarray.namedarray.parallelcompat import ChunkManagerEntrypoint

from virtualstac.errors import UnsupportedOperationError
from virtualstac.manifests.array import _LOAD_ADVICE, ManifestArray

__all__ = ["ManifestChunkManager"]


class ManifestChunkManager(ChunkManagerEntrypoint[ManifestArray]):
    """Recognises ManifestArrays for xarray; refuses to compute or create them."""

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

    def normalize_chunks(self, chunks: Any, *args: Any, **kwargs: Any) -> Any:
        """Refuse: virtual arrays keep the chunking of their source files."""
        raise UnsupportedOperationError(
            "virtual arrays cannot be rechunked: their chunks are the source files' chunks"
        )

    def from_array(self, data: Any, chunks: Any, **kwargs: Any) -> ManifestArray:
        """Refuse: in-memory data cannot become references."""
        raise UnsupportedOperationError(
            "virtualstac does not chunk in-memory arrays; use dask (set "
            "xarray.set_options(chunk_manager='dask')) for ordinary chunking"
        )

    def compute(self, *data: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Refuse: computing would need the values of virtual chunks."""
        raise UnsupportedOperationError(_LOAD_ADVICE)

    def apply_gufunc(
        self, func: Callable[..., Any], signature: str, *args: Any, **kwargs: Any
    ) -> Any:
        """Refuse: functions over values need loaded data."""
        raise UnsupportedOperationError(_LOAD_ADVICE)

    @property
    def array_api(self) -> Any:
        """The functions ManifestArray supports (concatenate, stack, expand_dims, broadcast_to)."""
        from virtualstac.manifests import array_api

        return array_api
