"""Publishing a virtual dataset as an Icechunk repository: create it, or append new items.

Nothing is committed before everything succeeded: references are written into a session (into
a fork of it, see :func:`virtualstac.writers.write_icechunk`) and committed once; containers
added for new sources are saved to the repository's configuration only after that commit. A
repository created by a publish that then fails is removed again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import icechunk
import numpy as np
import xarray as xr
from zarr.codecs import BytesCodec

from virtualstac.manifests import ChunkManifest, ManifestArray, ManifestGroup
from virtualstac.manifests.metadata import replace_metadata
from virtualstac.stac.appending import check_appendable, encode_like, with_time_encoding
from virtualstac.stac.levels import Levels, check_levels, level_group, pyramid_group
from virtualstac.stac.targets import PublishError, Target
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.writers.icechunk import write_icechunk
from virtualstac.writers.icechunk_containers import ensure_containers, required_containers

__all__ = ["BRANCH", "RepositoryVersion", "one_step_per_chunk", "publish_repository"]

#: The branch publishes commit to.
BRANCH = "main"


@dataclass(frozen=True)
class RepositoryVersion:
    """A committed repository: its snapshot, containers and what it now holds."""

    snapshot: str
    containers: tuple[str, ...]
    dataset: xr.Dataset


def publish_repository(
    dataset: Levels,
    target: Target,
    *,
    base: str | None,
    concat_dim: str,
    registry: ObjectStoreRegistry | None,
    message: str,
    metadata: Mapping[str, Any],
) -> RepositoryVersion:
    """Commit ``dataset`` to the repository at ``target``.

    ``base`` is the snapshot the catalog records; None creates the repository, otherwise the
    dataset is appended along ``concat_dim`` to the branch, which must still be at ``base``.
    A sequence of datasets is an image pyramid (finest first), written and appended level by
    level as a multiscales group (:mod:`virtualstac.stac.levels`).
    """
    storage = target.icechunk_storage()
    if base is None:
        if icechunk.Repository.exists(storage):
            raise PublishError(
                f"{target.href} already holds an Icechunk repository that this collection does "
                "not record; publish to a new target, or delete it first"
            )
        return _create(dataset, target, storage, concat_dim, registry, message, metadata)
    return _append(dataset, target, storage, base, concat_dim, registry, message, metadata)


def _create(
    dataset: Levels,
    target: Target,
    storage: Any,
    concat_dim: str,
    registry: ObjectStoreRegistry | None,
    message: str,
    metadata: Mapping[str, Any],
) -> RepositoryVersion:
    group = pyramid_group(
        dataset,
        lambda _, level: one_step_per_chunk(
            with_time_encoding(level, concat_dim).virtual.to_group(), concat_dim
        ),
    )
    containers = required_containers(group, registry)
    config = ensure_containers(icechunk.RepositoryConfig.default(), containers)
    repository = icechunk.Repository.create(storage, config=config)
    try:
        session = repository.writable_session(BRANCH)
        summary = write_icechunk(group, session.store)
        snapshot = session.commit(message, metadata={**metadata, **summary.as_metadata()})
    except BaseException:
        target.remove_repository()
        raise
    return _version(repository, snapshot)


def _append(
    dataset: Levels,
    target: Target,
    storage: Any,
    base: str,
    concat_dim: str,
    registry: ObjectStoreRegistry | None,
    message: str,
    metadata: Mapping[str, Any],
) -> RepositoryVersion:
    config = icechunk.Repository.fetch_config(storage) or icechunk.RepositoryConfig.default()
    declared = set(config.virtual_chunk_containers or {})
    repository = icechunk.Repository.open(storage)
    head = repository.lookup_branch(BRANCH)
    if head != base:
        raise PublishError(
            f"the repository at {target.href} is at snapshot {head} on {BRANCH!r}, but the "
            f"collection records {base}: someone else published since. Reload the collection "
            "that recorded the newer snapshot and publish again"
        )
    published = repository.readonly_session(snapshot_id=base).store
    check_levels(dataset, published, target.href)

    def appended(path: str, level: xr.Dataset) -> ManifestGroup:
        existing = xr.open_zarr(
            published,
            group=path or None,
            consolidated=False,
            zarr_format=3,
            mask_and_scale=False,
            chunks=None,
        )
        check_appendable(existing, level, concat_dim, target.href)
        return one_step_per_chunk(
            encode_like(level, existing, concat_dim).virtual.to_group(), concat_dim
        )

    group = pyramid_group(dataset, appended)
    ensure_containers(config, required_containers(group, registry))
    grown = set(config.virtual_chunk_containers or {}) != declared
    if grown:
        repository = icechunk.Repository.open(storage, config=config)
    session = repository.writable_session(BRANCH)
    summary = write_icechunk(group, session.store, append_dim=concat_dim)
    snapshot = session.commit(message, metadata={**metadata, **summary.as_metadata()})
    if grown:
        repository.save_config()
    return _version(repository, snapshot)


def _version(repository: Any, snapshot: str) -> RepositoryVersion:
    store = repository.readonly_session(snapshot_id=snapshot).store
    described = xr.open_zarr(
        store,
        group=level_group(store, None, "the repository"),
        consolidated=False,
        zarr_format=3,
        chunks=None,
    )
    return RepositoryVersion(
        snapshot, tuple(sorted(repository.config.virtual_chunk_containers or {})), described
    )


def one_step_per_chunk(group: ManifestGroup, dim: str) -> ManifestGroup:
    """Split loaded (inlined) arrays along ``dim`` into one chunk per step.

    Loaded coordinates are written as one chunk; a ``time`` coordinate in one chunk of N steps
    could not be appended to, since appended chunks must have the same shape. One step per
    chunk lets any number of items be appended later.
    """
    arrays = {
        name: _split(array, dim) if isinstance(array, ManifestArray) else array
        for name, array in group.arrays.items()
    }
    groups = {name: one_step_per_chunk(child, dim) for name, child in group.groups.items()}
    return ManifestGroup(arrays, groups, group.metadata.attributes)


def _split(array: ManifestArray, dim: str) -> ManifestArray:
    metadata = array.metadata
    names = list(metadata.dimension_names or ())
    manifest = array.manifest
    codecs = metadata.codecs
    if (
        dim not in names
        or len(manifest.inlined) != 1
        or any(n != 1 for n in manifest.shape_chunk_grid)
        or len(codecs) != 1
        or not isinstance(codecs[0], BytesCodec)
    ):
        return array
    axis = names.index(dim)
    steps = metadata.shape[axis]
    native = metadata.data_type.to_native_dtype()
    dtype = native.newbyteorder(">" if codecs[0].endian == "big" else "<")
    values = np.frombuffer(next(iter(manifest.inlined.values())), dtype=dtype)
    values = values.reshape(metadata.shape)
    grid = tuple(steps if d == axis else 1 for d in range(values.ndim))
    chunks = {
        tuple(i if d == axis else 0 for d in range(values.ndim)): np.ascontiguousarray(
            np.take(values, [i], axis=axis)
        ).tobytes()
        for i in range(steps)
    }
    split = ChunkManifest.from_arrays(
        paths=np.full(grid, "", dtype=np.dtypes.StringDType()),
        offsets=np.zeros(grid, dtype=np.uint64),
        lengths=np.full(grid, len(chunks[next(iter(chunks))]), dtype=np.uint64),
        inlined=chunks,
    )
    shape = list(metadata.shape)
    shape[axis] = 1
    return ManifestArray(replace_metadata(metadata, chunk_shape=shape), split)
