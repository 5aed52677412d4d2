"""Where a published store lives: a local path or an object-store URL, and writing there safely.

A target is where :func:`virtualstac.stac.publish` puts an Icechunk repository or a Kerchunk
reference file (JSON) or directory (parquet). Object-store targets take the same options as
:meth:`virtualstac.ObjectStoreRegistry.register` (``endpoint``, ``region``, ``access_key_id``,
``secret_access_key``, ``skip_signature``, ``client_options``); they are used to reach the store
and are never written into STAC.

Kerchunk files are written under a temporary name that names its writer (host and process) and
then renamed over the old ones, so a reader (or a failed or killed publish) never sees half a
file. A local parquet directory is swapped in whole; on an object store, whose objects can only
be renamed one at a time, the staged directory lists its files in a journal before the renames
start, so that the next publish finishes a swap that a killed one began.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import icechunk
import obstore

from virtualstac.errors import InvalidPathError, VirtualStacError
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import file_url_to_path, normalize_url
from virtualstac.writers.object_turns import taking_turns_in_store
from virtualstac.writers.staging import (
    clean_leftovers,
    orphaned,
    replacing,
    taking_turns,
    temporary_name,
)

__all__ = ["PublishError", "Target", "icechunk_failures", "store_options"]

# Icechunk's own storages; other schemes can hold Kerchunk files but not repositories.
_ICECHUNK_SCHEMES = ("file", "s3", "s3a", "gs", "gcs")
# Where obstore writes objects: an HTTP server is only read from.
_WRITABLE_SCHEMES = (*_ICECHUNK_SCHEMES, "az", "azure", "abfs", "abfss")
_PARQUET_METADATA = ".zmetadata"
# Written into a staged directory once all its files are uploaded: the files to move in.
_JOURNAL = ".virtualstac-staged"


class PublishError(VirtualStacError, ValueError):
    """A store cannot be published where, or as, asked."""


class StoreRecordedElsewhereError(PublishError):
    """The Collection records a published store under this asset key at another target.

    Publishing there would orphan the recorded store: pass another ``asset_key`` (a second
    store, recorded beside the first) or ``replace=True`` (the old store stays where it is).
    """


@contextmanager
def icechunk_failures(href: str) -> Iterator[None]:
    """Turn Icechunk's own errors into :class:`PublishError` naming the repository.

    Icechunk's messages continue with a trace of its internals: only their first line is kept
    (the error stays chained).
    """
    try:
        yield
    except icechunk.IcechunkError as err:
        lines = str(err).strip().splitlines()
        reason = lines[0] if lines else type(err).__name__
        message = f"cannot publish to the Icechunk repository at {href}: {reason}"
        raise PublishError(message) from err


def _truthy(value: Any) -> bool:
    return str(value).lower() in ("true", "1", "yes") if value is not None else False


@dataclass(frozen=True)
class Target:
    """A store location: ``url`` (``file:///abs/path`` or ``s3://bucket/prefix``) and options."""

    url: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        location: str | Path,
        options: Mapping[str, Any] | None = None,
        registry: ObjectStoreRegistry | None = None,
    ) -> Target:
        """The target at ``location``: a local path or URL.

        Options default to those of the store ``registry`` holds for the location, so one
        registry can grant reading the sources and writing the target.

        Raises
        ------
        InvalidPathError
            For an empty ``location`` or a URL of a scheme no store is written at.
        """
        if not str(location).strip():
            # Path("") is the working directory: a Kerchunk file would replace it if empty.
            raise InvalidPathError(
                f"cannot publish at {str(location)!r}: name the store's local path or URL"
            )
        url = normalize_url(str(Path(location).resolve()) if _is_local(location) else str(location))
        url = url.rstrip("/")
        scheme = url.partition("://")[0]
        if scheme not in _WRITABLE_SCHEMES:
            raise InvalidPathError(
                f"cannot publish at {url!r}: a store is written at a local path or a URL of "
                f"an object store ({', '.join(_WRITABLE_SCHEMES[1:])}), not at a {scheme} URL"
            )
        if options is None:
            options = store_options(url, registry)
        return cls(url, dict(options or {}))

    @property
    def scheme(self) -> str:
        """The URL scheme (``file``, ``s3``, ...)."""
        return self.url.partition("://")[0]

    @property
    def is_local(self) -> bool:
        """Whether the target is on the local filesystem."""
        return self.scheme == "file"

    @property
    def path(self) -> Path:
        """The local path of a local target."""
        return Path(file_url_to_path(self.url))

    @property
    def href(self) -> str:
        """The href a STAC asset gives the store: an absolute path for local targets."""
        return file_url_to_path(self.url) if self.is_local else self.url

    @property
    def bucket(self) -> str:
        """The bucket (or host) of an object-store target."""
        return urlsplit(self.url).netloc

    @property
    def key(self) -> str:
        """The object path inside the bucket (no leading or trailing ``/``)."""
        return urlsplit(self.url).path.strip("/")

    @contextmanager
    def writing_turn(self) -> Iterator[None]:
        """Hold the turn of publishing here: other publishes to this target wait until it ends.

        Locally the turn is a ``flock`` (:func:`~virtualstac.writers.staging.taking_turns`); on
        an object store a lock object written conditionally
        (:func:`~virtualstac.writers.object_turns.taking_turns_in_store`), except for a target
        at a bucket's root, which has nowhere beside it.
        """
        if self.is_local:
            with taking_turns(self.path):
                yield
            return
        store, path = self.store()
        if not path:
            yield
            return
        with taking_turns_in_store(store, path):
            yield

    # -- Icechunk --------------------------------------------------------------------------

    def icechunk_storage(self) -> Any:
        """The ``icechunk.Storage`` of a repository at this target."""
        if self.is_local:
            return icechunk.local_filesystem_storage(file_url_to_path(self.url))
        if self.scheme in ("s3", "s3a"):
            options = self.options
            endpoint = options.get("endpoint") or options.get("endpoint_url")
            anonymous = _truthy(options.get("skip_signature"))
            has_keys = bool(options.get("access_key_id") and options.get("secret_access_key"))
            allow_http = _truthy(
                (options.get("client_options") or {}).get("allow_http")
            ) or _truthy(options.get("allow_http"))
            return icechunk.s3_storage(
                bucket=self.bucket,
                prefix=self.key or None,
                region=options.get("region"),
                endpoint_url=endpoint,
                allow_http=allow_http or bool(endpoint and str(endpoint).startswith("http://")),
                access_key_id=options.get("access_key_id") if has_keys else None,
                secret_access_key=options.get("secret_access_key") if has_keys else None,
                session_token=options.get("token") or options.get("session_token"),
                anonymous=anonymous or None,
                from_env=None if (has_keys or anonymous) else True,
                force_path_style=endpoint is not None,
                requester_pays=_truthy(options.get("request_payer")),
            )
        if self.scheme in ("gs", "gcs"):
            return icechunk.gcs_storage(bucket=self.bucket, prefix=self.key or None, from_env=True)
        raise InvalidPathError(
            f"cannot publish an Icechunk repository at {self.url!r}: Icechunk stores repositories "
            f"on {', '.join(_ICECHUNK_SCHEMES)} URLs or local paths"
        )

    def remove_repository(self) -> None:
        """Delete everything below the target (a repository this process just created)."""
        if self.is_local:
            shutil.rmtree(file_url_to_path(self.url), ignore_errors=True)
            return
        store, prefix = self.store()
        self._delete_below(store, prefix)

    # -- Kerchunk files ---------------------------------------------------------------------

    def store(self) -> tuple[Any, str]:
        """An obstore store and the target's path in it."""
        if self.is_local:
            registry = ObjectStoreRegistry()
            registry.register("file:///")
        else:
            registry = ObjectStoreRegistry()
            try:
                registry.register(f"{self.scheme}://{self.bucket}", **self.options)
            except obstore.exceptions.BaseError as err:
                # A missing account or a malformed option, say: obstore's message continues
                # with a debug dump of its internals.
                reason = str(err).strip().splitlines()[0] if str(err).strip() else repr(err)
                raise PublishError(f"cannot reach the target {self.url}: {reason}") from err
        return registry.resolve(self.url)

    def exists(self) -> bool:
        """Whether anything is at the target: a file or object, or a directory that is not empty.

        A directory without Kerchunk's parquet index counts (a partial copy, someone's files):
        writing references there would replace it. Only an empty local directory holds nothing.
        """
        if self.is_local:
            local = self.path
            return local.exists() and not (local.is_dir() and not any(local.iterdir()))
        store, path = self.store()
        try:
            obstore.head(store, path)
        except (FileNotFoundError, IsADirectoryError):
            below = obstore.list(store, prefix=f"{path}/" if path else None, chunk_size=1)
            return any(len(batch) > 0 for batch in below)
        return True

    def write_file(self, data: bytes) -> None:
        """Write ``data`` to a temporary object next to the target, then rename it into place."""
        if self.is_local:
            with replacing(self.path) as staged:
                staged.write_bytes(data)
            return
        store, path = self.store()
        temporary = temporary_name(path)
        obstore.put(store, temporary, data)
        try:
            obstore.rename(store, temporary, path)
        except BaseException:
            obstore.delete(store, temporary)
            raise

    def write_directory(self, directory: Path) -> None:
        """Replace the object-store directory at the target with the files of ``directory``.

        The files are uploaded under a temporary prefix, then a journal listing them; then
        they are renamed into place, the parquet metadata (which readers open first) last,
        and files of the old version that the new one lacks are deleted. A publish killed
        after the journal was written is finished by :meth:`clean_leftovers`.
        """
        store, path = self.store()
        temporary = temporary_name(path)
        files = sorted(
            (p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()),
            key=lambda name: name == _PARQUET_METADATA,
        )
        try:
            for name in files:
                obstore.put(store, f"{temporary}/{name}", (directory / name).read_bytes())
            obstore.put(store, f"{temporary}/{_JOURNAL}", json.dumps(files).encode())
        except BaseException:
            self._delete_below(store, temporary)
            raise
        self._move_in(store, temporary, path, files)

    def _move_in(self, store: Any, temporary: str, path: str, files: list[str]) -> None:
        staged = self.listing(store, temporary)
        old = self.listing(store, path)
        for name in files:
            if name in staged:
                obstore.rename(store, f"{temporary}/{name}", f"{path}/{name}")
        stale = [f"{path}/{name}" for name in old - set(files)]
        if stale:
            obstore.delete(store, stale)
        self._delete_below(store, temporary)

    def clean_leftovers(self) -> None:
        """Finish or remove what publishes to this target that were killed left beside it.

        Only temporaries of dead processes of this host are touched (see
        :func:`virtualstac.writers.staging.orphaned`): a staged directory whose journal was
        written is moved in, as the killed publish would have; anything else is deleted.
        """
        if self.is_local:
            clean_leftovers(self.path)
            return
        store, path = self.store()
        parent, _, name = path.rpartition("/")
        found = obstore.list_with_delimiter(store, prefix=parent or None)
        for entry in found["objects"]:
            if orphaned(entry["path"].rpartition("/")[2], name):
                obstore.delete(store, entry["path"])
        for prefix in found["common_prefixes"]:
            if not orphaned(prefix.rstrip("/").rpartition("/")[2], name):
                continue
            temporary = prefix.rstrip("/")
            try:
                journal = bytes(obstore.get(store, f"{temporary}/{_JOURNAL}").bytes())
            except FileNotFoundError:
                self._delete_below(store, temporary)
                continue
            self._move_in(store, temporary, path, list(json.loads(journal)))

    def listing(self, store: Any, path: str) -> set[str]:
        """The object names below ``path`` in ``store``, relative to it."""
        found: set[str] = set()
        for batch in obstore.list(store, prefix=path + "/"):
            found.update(entry["path"][len(path) + 1 :] for entry in batch)
        return found

    def _delete_below(self, store: Any, path: str) -> None:
        leftovers = [f"{path}/{name}" for name in self.listing(store, path)]
        if leftovers:
            obstore.delete(store, leftovers)


def store_options(url: str, registry: ObjectStoreRegistry | None) -> dict[str, Any] | None:
    """The options of the store ``registry`` serves ``url`` with, as ``register`` takes them.

    None when the registry does not cover ``url``. Local stores have no options.
    """
    if registry is None or url not in registry:
        return None
    store, _ = registry.resolve(url)
    config = getattr(store, "config", None)
    options: dict[str, Any] = {
        k: v for k, v in (config if isinstance(config, Mapping) else {}).items() if k != "bucket"
    }
    client = getattr(store, "client_options", None)
    if isinstance(client, Mapping) and client:
        options["client_options"] = dict(client)
    return options


def _is_local(location: str | Path) -> bool:
    return isinstance(location, Path) or "://" not in location
