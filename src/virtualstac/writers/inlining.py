"""Reading small referenced chunks into a group, as Kerchunk's ``inline_threshold`` does.

A reference to a few bytes costs a reader a whole request; carrying those bytes in the
references instead makes the output larger and opening faster. The chunks are read through a
ManifestStore, so reads are batched per object and a missing or shortened source raises
``ChunkReadError`` as any read does.
"""

from __future__ import annotations

import asyncio
import posixpath
from collections.abc import Callable

import numpy as np
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync

from virtualstac.manifests import ChunkManifest, ManifestArray, ManifestGroup, ManifestStore
from virtualstac.storage.registry import ObjectStoreRegistry

__all__ = ["inline_small_chunks"]


def inline_small_chunks(
    group: ManifestGroup, inline_threshold: int, registry: ObjectStoreRegistry
) -> ManifestGroup:
    """``group`` with every referenced chunk of at most ``inline_threshold`` bytes inlined.

    The chunks are read through ``registry``, the allow-list of what may be read.
    """
    if inline_threshold < 0:
        raise ValueError(f"inline_threshold must not be negative, got {inline_threshold}")
    wanted: list[tuple[str, tuple[int, ...]]] = []
    keys: list[str] = []
    for path, node in group.walk():
        if isinstance(node, ManifestArray):
            manifest = node.manifest
            small = (manifest.path_codes >= 0) & (manifest.lengths <= inline_threshold)
            for position in np.argwhere(small):
                index = tuple(int(i) for i in position)
                wanted.append((path, index))
                keys.append(posixpath.join(path, node.metadata.encode_chunk_key(index)))
    if not wanted:
        return group
    store = ManifestStore(group, registry=registry)
    prototype = default_buffer_prototype()

    async def fetch() -> list[bytes]:
        buffers = await asyncio.gather(*(store.get(key, prototype) for key in keys))
        return [buffer.to_bytes() for buffer in buffers if buffer is not None]

    read = sync(fetch())
    by_array: dict[str, dict[tuple[int, ...], bytes]] = {}
    for (path, index), data in zip(wanted, read, strict=True):
        by_array.setdefault(path, {})[index] = data
    return _rebuild(group, "", lambda path, array: _with_inlined(array, by_array.get(path, {})))


def _with_inlined(array: ManifestArray, chunks: dict[tuple[int, ...], bytes]) -> ManifestArray:
    if not chunks:
        return array
    manifest = array.manifest
    paths = manifest.paths.astype(object)
    for index in chunks:
        paths[index] = ""
    inlined = ChunkManifest.from_arrays(
        paths=paths,
        offsets=manifest.offsets,
        lengths=manifest.lengths,
        inlined={**manifest.inlined, **chunks},
        validate_paths=False,
        separator=manifest.separator,
    ).with_source_stamps(manifest.source_stamps)
    return ManifestArray(array.metadata, inlined)


def _rebuild(
    group: ManifestGroup, prefix: str, change: Callable[[str, ManifestArray], ManifestArray]
) -> ManifestGroup:
    return ManifestGroup(
        arrays={
            name: change(posixpath.join(prefix, name), array)
            for name, array in group.arrays.items()
        },
        groups={
            name: _rebuild(child, posixpath.join(prefix, name), change)
            for name, child in group.groups.items()
        },
        attributes=group.metadata.attributes,
    )
