"""Where the local virtual chunks of a published Icechunk snapshot lead, checked in batches.

Icechunk reads local virtual chunks itself and follows links, so opening a store checks
where every local reference leads first (:func:`~virtualstac.stac.authorization.
check_local_locations`). Icechunk's ``Session.all_virtual_chunk_locations`` would list one
string per reference, all at once: a store of billions of references (hostile, or only huge)
would take gigabytes at open, before anything is read. :func:`check_local_chunk_locations`
reads the references array by array, a batch at a time (Icechunk's ``array_chunk_iterator``),
and judges each distinct location once, remembering at most :data:`_REMEMBERED` of them:
memory stays bounded whatever the number of references or of distinct source files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zarr.core.sync import sync

from virtualstac.errors import UnregisteredURLError
from virtualstac.stac.authorization import check_local_locations

__all__ = ["check_local_chunk_locations"]

# References read at once: about 1 MB of locations (a Python string each).
_BATCH = 10_000
# Distinct locations remembered as judged; past it they are forgotten and judged again when
# met again (slower, never wrong), so that millions of distinct files cost no more memory.
_REMEMBERED = 100_000


def check_local_chunk_locations(
    repository: Any, session: Any, containers: Sequence[str], store: str
) -> None:
    """Refuse a snapshot whose local chunk locations resolve (links, ``..``) outside the
    local ``containers``, reading its references a batch at a time.

    ``session`` is a read-only session of ``repository``, the store at ``store``; every array
    of its snapshot is checked, those below groups that do not exist too.

    Raises
    ------
    UnregisteredURLError
        Naming the store, the first location found that escapes and the prefix to authorize.
    icechunk.IcechunkError
        If the snapshot or one of its manifests cannot be read.
    """
    try:
        sync(_check_snapshot(repository, session, containers))
    except UnregisteredURLError as err:
        # A catalog opens several stores: the reader must know which one holds the reference.
        raise UnregisteredURLError(f"the published Icechunk store at {store}: {err}") from err


async def _check_snapshot(repository: Any, session: Any, containers: Sequence[str]) -> None:
    # The asynchronous call: Icechunk's synchronous inspect_snapshot keeps the GIL while it
    # waits for the object store, stopping every other thread of the process meanwhile (and
    # never returning when the store is served from this process, as moto is in the tests).
    arrays = _array_paths(await repository.inspect_snapshot_async(session.snapshot_id))
    if arrays is None:
        # A snapshot description this version does not know: the listing, unbounded but
        # complete, rather than an array left unchecked.
        check_local_locations(await session.all_virtual_chunk_locations_async(), containers)
        return
    await _check_arrays(session.store, arrays, containers)


def _array_paths(snapshot: Any) -> list[str] | None:
    """The paths of the arrays Icechunk's description of a snapshot lists; None if it is
    not the description this module knows."""
    nodes = snapshot.get("nodes") if isinstance(snapshot, dict) else None
    if not isinstance(nodes, list):
        return None
    paths = []
    for node in nodes:
        if not isinstance(node, dict) or not isinstance(node.get("path"), str):
            return None
        if node.get("node_type") not in ("array", "group"):
            return None
        if node["node_type"] == "array":
            paths.append(node["path"])
    return paths


async def _check_arrays(store: Any, arrays: Sequence[str], containers: Sequence[str]) -> None:
    judged: set[str] = set()
    for array in arrays:
        async for batch in store.array_chunk_iterator(array, batch_size=_BATCH):
            fresh = [
                location
                for location in dict.fromkeys(batch[2])
                if location.startswith("file://") and location not in judged
            ]
            check_local_locations(fresh, containers)
            if len(judged) + len(fresh) > _REMEMBERED:
                judged.clear()
            judged.update(fresh)
