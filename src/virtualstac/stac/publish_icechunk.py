"""Publishing a virtual dataset as an Icechunk repository: create it, or append new items.

Nothing is committed before everything succeeded: references are written into a session (into
a fork of it, see :func:`virtualstac.writers.write_icechunk`) and committed once, with a
:class:`~virtualstac.stac.publish_recovery.PublishRecord` in the commit's metadata; containers
added for new sources are saved to the repository's configuration only after that commit (and
restored from the record by the next publish, should this one be killed in between). A new
local repository is created and committed beside the target, then renamed into place; one on an
object store, where nothing can be renamed whole, is created in place and removed again if the
publish fails (if killed, the next publish adopts the empty repository it left).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import icechunk
import numpy as np
import xarray as xr
from zarr.codecs import BytesCodec

from virtualstac.errors import IncompatibleArraysError
from virtualstac.manifests import ChunkManifest, ManifestArray, ManifestGroup
from virtualstac.manifests.metadata import replace_metadata
from virtualstac.stac.appending import check_appendable, encode_like, with_time_encoding
from virtualstac.stac.levels import Levels, check_levels, level_group, pyramid_group
from virtualstac.stac.publish_recovery import BRANCH, RECORD_KEY, PublishRecord
from virtualstac.stac.relocation import NamedLocation, declare_root_container
from virtualstac.stac.targets import PublishError, Target, icechunk_failures
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.writers.icechunk import WriteSummary, write_icechunk
from virtualstac.writers.icechunk_containers import (
    container_for,
    ensure_containers,
    required_containers,
)
from virtualstac.writers.staging import replacing

__all__ = [
    "BRANCH",
    "RepositoryVersion",
    "Writes",
    "appending_group",
    "first_group",
    "one_step_per_chunk",
    "publish_repository",
    "published_store",
]

# What Icechunk writes, under its fixed first snapshot id, before a new repository exists.
_CREATION_FILES = frozenset({"snapshots/1CECHNKREP0F1RSTCMT0", "transactions/1CECHNKREP0F1RSTCMT0"})


@dataclass(frozen=True)
class RepositoryVersion:
    """A committed repository: its snapshot, containers and what it now holds."""

    snapshot: str
    containers: tuple[str, ...]
    dataset: xr.Dataset


@dataclass(frozen=True)
class _Commit:
    """What to commit: the dataset, along which dimension, the message, metadata and record."""

    dataset: Levels | Writes
    concat_dim: str
    registry: ObjectStoreRegistry | None
    message: str
    metadata: Mapping[str, Any]
    record: PublishRecord
    root: str | None = None

    def metadata_with(
        self, containers: Iterable[str], summary: Mapping[str, Any]
    ) -> dict[str, Any]:
        record = replace(self.record, containers=tuple(sorted(containers)))
        return {**self.metadata, **summary, RECORD_KEY: record.to_json()}


class Writes(ABC):
    """References another process writes: the sources they point to, and the writing."""

    @abstractmethod
    def sources(self) -> Iterable[str]:
        """Every object the references point to (for the containers they need)."""

    @abstractmethod
    def write(
        self, session: Any, append_dim: str | None, locations: NamedLocation | None
    ) -> WriteSummary:
        """Write everything into the writable ``session``, appending along ``append_dim``;
        ``locations`` names the sources below a relocatable catalog's directory after its
        container."""


@dataclass(frozen=True)
class _LocalWrites(Writes):
    """A group this process writes."""

    group: ManifestGroup

    def sources(self) -> Iterable[str]:
        return {
            url
            for _, node in self.group.walk()
            if isinstance(node, ManifestArray)
            for url in node.manifest.path_table
        }

    def write(
        self, session: Any, append_dim: str | None, locations: NamedLocation | None
    ) -> WriteSummary:
        return write_icechunk(self.group, session.store, append_dim=append_dim, locations=locations)


def publish_repository(
    dataset: Levels | Writes | None,
    target: Target,
    *,
    base: str | None,
    containers: Sequence[str] = (),
    concat_dim: str,
    registry: ObjectStoreRegistry | None,
    message: str,
    metadata: Mapping[str, Any],
    record: PublishRecord,
    root: str | None = None,
) -> RepositoryVersion:
    """Commit ``dataset`` to the repository at ``target``; describe it if ``dataset`` is None.

    ``base`` is the snapshot the catalog records; None creates the repository, otherwise the
    dataset is appended along ``concat_dim`` to the branch, which must still be at ``base``
    (written as the first data when ``base`` is the repository's initial commit).
    ``containers`` must be declared in the repository (they are, unless a publish was killed
    between its commit and saving them). ``record`` goes into the commit's metadata.
    A sequence of datasets is an image pyramid (finest first), written and appended level by
    level as a multiscales group (:mod:`virtualstac.stac.levels`). ``root``, the local
    directory of a relocatable catalog, makes references below it relative to a named
    container (:mod:`virtualstac.stac.relocation`).
    """
    commit = (
        None
        if dataset is None
        else _Commit(dataset, concat_dim, registry, message, metadata, record, root)
    )
    with icechunk_failures(target.href):
        if base is None:
            if commit is None:
                raise ValueError("a new repository needs a dataset to publish")
            return _create(commit, target)
        return _update(commit, target, base, containers, registry)


def _update(
    commit: _Commit | None,
    target: Target,
    base: str,
    containers: Sequence[str],
    registry: ObjectStoreRegistry | None,
) -> RepositoryVersion:
    """Append to the repository, or describe it (``commit`` None); its branch must be at base."""
    storage = target.icechunk_storage()
    config = icechunk.Repository.fetch_config(storage) or icechunk.RepositoryConfig.default()
    declared = set(config.virtual_chunk_containers or {})
    missing = [prefix for prefix in containers if prefix not in declared]
    repository = icechunk.Repository.open(storage)
    if missing:
        ensure_containers(config, [container_for(prefix, registry) for prefix in missing])
        repository = icechunk.Repository.open(storage, config=config)
        repository.save_config()
    _check_base(target.href, repository.lookup_branch(BRANCH), base)
    if commit is None:
        return _version(repository, base)
    # The branch may move while the items are checked against it: the commit must build on
    # the checked snapshot (and Icechunk's commit refuses a branch moved after that).
    expected = (target.href, base)
    if isinstance(commit.dataset, Writes):  # parsed elsewhere, and checked against the base
        with _appending_to(target.href):
            return _version(
                *_commit(repository, storage, commit.dataset, commit, append=True, on=expected)
            )
    published = published_store(repository, base)
    if published is None:
        group = first_group(commit.dataset, commit.concat_dim)
        return _version(*_commit(repository, storage, group, commit, append=False, on=expected))
    group = appending_group(commit.dataset, published, commit.concat_dim, target.href)
    with _appending_to(target.href):
        return _version(*_commit(repository, storage, group, commit, append=True, on=expected))


def _check_base(where: str, head: str, base: str) -> None:
    """Refuse to build on ``head`` when the collection records ``base``."""
    if head != base:
        raise PublishError(
            f"the repository at {where} is at snapshot {head} on {BRANCH!r}, but the "
            f"collection records {base}: someone else published since. Reload the collection "
            "that recorded the newer snapshot and publish again"
        )


@contextmanager
def _appending_to(where: str) -> Iterator[None]:
    """Name the repository in a refusal of the writer, which knows only its arrays."""
    try:
        yield
    except IncompatibleArraysError as err:
        if where in str(err):
            raise
        message = f"the new items cannot be appended to the repository at {where}: {err}"
        raise type(err)(message) from err


def published_store(repository: Any, base: str) -> Any | None:
    """The store at snapshot ``base``; None if that is the initial (empty) commit."""
    if next(iter(repository.ancestry(snapshot_id=base))).parent_id is None:
        return None
    return repository.readonly_session(snapshot_id=base).store


def appending_group(dataset: Levels, published: Any, dim: str, where: str) -> ManifestGroup:
    """The group that appends ``dataset`` to the ``published`` store along ``dim``.

    Raises
    ------
    IncompatibleArraysError
        If ``dataset`` does not fit the store (levels, grid, variables, order).
    """
    check_levels(dataset, published, where)

    def appended(path: str, level: xr.Dataset) -> ManifestGroup:
        existing = xr.open_zarr(
            published,
            group=path or None,
            consolidated=False,
            zarr_format=3,
            mask_and_scale=False,
            chunks=None,
        )
        check_appendable(existing, level, dim, where)
        return one_step_per_chunk(encode_like(level, existing, dim).virtual.to_group(), dim)

    return pyramid_group(dataset, appended)


def first_group(dataset: Levels, concat_dim: str) -> ManifestGroup:
    """The group that writes ``dataset`` as a store's first data."""
    return pyramid_group(
        dataset,
        lambda _, level: one_step_per_chunk(
            with_time_encoding(level, concat_dim).virtual.to_group(), concat_dim
        ),
    )


def _create(commit: _Commit, target: Target) -> RepositoryVersion:
    group = (
        commit.dataset
        if isinstance(commit.dataset, Writes)
        else _LocalWrites(first_group(commit.dataset, commit.concat_dim))
    )
    containers = required_containers(_unnamed(group, commit.root), commit.registry)
    config = ensure_containers(icechunk.RepositoryConfig.default(), containers)
    if target.is_local:
        path = target.path
        if path.exists() and not (path.is_dir() and not any(path.iterdir())):
            raise PublishError(f"{target.href} already exists and is not an Icechunk repository")
        with replacing(path) as staged:
            storage = icechunk.local_filesystem_storage(str(staged))
            repository = icechunk.Repository.create(storage, config=config)
            _, snapshot = _commit(repository, storage, group, commit, append=False)
        return _version(icechunk.Repository.open(target.icechunk_storage()), snapshot)
    store, key = target.store()
    found = target.listing(store, key)
    if not found <= _CREATION_FILES:
        raise PublishError(f"{target.href} holds objects but no Icechunk repository")
    if found:  # the first files of a creation that was killed before it completed
        target.remove_repository()
    storage = target.icechunk_storage()
    repository = icechunk.Repository.create(storage, config=config)
    try:
        return _version(*_commit(repository, storage, group, commit, append=False))
    except BaseException:
        target.remove_repository()
        raise


def _commit(
    repository: Any,
    storage: Any,
    group: ManifestGroup | Writes,
    commit: _Commit,
    *,
    append: bool,
    on: tuple[str, str] | None = None,
) -> tuple[Any, str]:
    """Write ``group`` on the branch and commit it; save containers it added afterwards.

    ``on``, the repository's href and a snapshot: the branch must be at that snapshot when
    the session starts and when it commits (``PublishError`` otherwise).
    Returns the repository (opened anew with the added containers) and the snapshot.
    """
    config = repository.config
    declared = _named_containers(config)
    writes = group if isinstance(group, Writes) else _LocalWrites(group)
    required = required_containers(_unnamed(writes, commit.root), commit.registry)
    root = commit.root
    locations = None
    if root is not None:
        # References below a relocatable catalog's directory are named after its container,
        # whichever process writes them.
        declare_root_container(config, root)
        locations = NamedLocation(root)
    ensure_containers(config, required)
    containers = set(config.virtual_chunk_containers or {})
    grown = _named_containers(config) != declared
    if grown:
        repository = icechunk.Repository.open(storage, config=config)
    session = repository.writable_session(BRANCH)
    if on is not None:
        _check_base(on[0], session.snapshot_id, on[1])
    summary = writes.write(session, commit.concat_dim if append else None, locations)
    try:
        snapshot = session.commit(
            commit.message, metadata=commit.metadata_with(containers, summary.as_metadata())
        )
    except icechunk.ConflictError as err:
        if on is None:
            raise
        moved = repository.lookup_branch(BRANCH)
        raise PublishError(
            f"the repository at {on[0]} moved to snapshot {moved} on {BRANCH!r} while "
            f"publishing onto {on[1]}, which the collection records: someone else published "
            "since. Reload the collection that recorded the newer snapshot and publish again"
        ) from err
    if grown:
        repository.save_config()
    return repository, str(snapshot)


def _unnamed(writes: Writes, root: str | None) -> Iterable[str]:
    """The sources needing containers of their own: all but those below a relocatable
    catalog's directory (named after its container)."""
    if root is None:
        return writes.sources()
    return [url for url in writes.sources() if not url.startswith(root)]


def _named_containers(config: Any) -> dict[str, str | None]:
    """The prefixes of the declared containers and their names (a name may be added)."""
    return {prefix: c.name for prefix, c in (config.virtual_chunk_containers or {}).items()}


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
