"""``xr.open_zarr`` for virtual stores, their values read past zarr's per-chunk walk.

xarray reads a Zarr variable by indexing the ``zarr.Array`` it opened. For the arrays of a
:class:`~virtualstac.manifests.store.ManifestStore` or a published store read through
virtualstac, :class:`VirtualChunksZarrStore` hands xarray
:class:`~virtualstac.manifests.selection_reads.VirtualChunksArray`\\ s instead, whose basic
selections (what ``.values``, ``.load()`` and every dask task ask for) go straight to the
decoding pool. Everything else (metadata, attributes, encodings, dask chunks, CF decoding) is
xarray's zarr backend, unchanged.
"""

from __future__ import annotations

from typing import Any

import xarray as xr
import zarr
from xarray.backends.zarr import ZarrStore
from xarray.namedarray.parallelcompat import guess_chunkmanager

from virtualstac.manifests.selection_reads import VirtualChunksArray, reads_virtual_chunks

__all__ = ["VirtualChunksZarrStore", "open_zarr_dataset"]

#: ``xr.open_zarr``'s arguments that open the Zarr group (the rest are ``open_dataset``'s).
_GROUP_OPTIONS = ("consolidated", "storage_options", "zarr_format")


class VirtualChunksZarrStore(ZarrStore):
    """xarray's Zarr data store whose arrays of a virtual store are
    :class:`~virtualstac.manifests.selection_reads.VirtualChunksArray`\\ s."""

    def _fetch_members(self) -> dict[str, Any]:
        members: dict[str, Any] = super()._fetch_members()
        return {
            name: VirtualChunksArray.of(node)
            if isinstance(node, zarr.Array) and reads_virtual_chunks(node.store)
            else node
            for name, node in members.items()
        }


def open_zarr_dataset(store: Any, **options: Any) -> xr.Dataset:
    """``xr.open_zarr(store, **options)``; the arrays of a virtual store
    (:func:`~virtualstac.manifests.selection_reads.reads_virtual_chunks`) read through
    :class:`VirtualChunksZarrStore`."""
    if not reads_virtual_chunks(store):
        opened: xr.Dataset = xr.open_zarr(store, **options)
        return opened
    group_options = {name: options.pop(name) for name in _GROUP_OPTIONS if name in options}
    if "chunks" not in options:
        options["chunks"] = _default_chunks(options.get("chunked_array_type"))
    data_store = VirtualChunksZarrStore.open_group(
        store,
        group=options.get("group"),
        mode="r",
        consolidated=group_options.get("consolidated"),
        consolidate_on_close=False,
        storage_options=group_options.get("storage_options"),
        use_zarr_fill_value_as_mask=None,  # as xarray opens it: the option is open_dataset's
        zarr_format=group_options.get("zarr_format"),
    )
    dataset: xr.Dataset = xr.open_dataset(store, engine="zarr", store=data_store, **options)
    return dataset


def _default_chunks(chunked_array_type: str | None) -> dict[str, Any] | None:
    """``xr.open_zarr``'s default ``chunks``: the store's own where a chunk manager (dask) is
    installed, else none."""
    try:
        guess_chunkmanager(chunked_array_type)
    except (ValueError, ImportError):
        return None
    return {}
