"""Size limits checked before memory is allocated for what a file's header claims.

A header is untrusted input: a few bytes can claim a billion chunks, a shape of 10**12, or a
gzip stream that inflates to gigabytes. Parsers check the figure against these limits before
allocating, and raise :class:`LimitExceededError` saying the figure, the limit and how to
raise it. The defaults hold real archives (a daily global 1 km grid over decades has a few
million chunks); raise them for bigger ones, for the whole process or within a block::

    import virtualstac.limits

    virtualstac.limits.set_limits(references_per_open=200_000_000)
    with virtualstac.limits.limits(metadata_bytes=2 * 2**30):
        ...

The settings are process-wide (threads opening files in parallel see them); the block form
restores the previous ones when it ends.
"""

from __future__ import annotations

import dataclasses
import threading
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from virtualstac.errors import LimitExceededError

__all__ = [
    "LimitExceededError",
    "Limits",
    "check_chunk_bytes",
    "check_coordinate",
    "check_group_depth",
    "check_metadata",
    "check_open_references",
    "check_references",
    "check_stac_catalogs",
    "check_stac_items",
    "check_stored_chunk_bytes",
    "counting_references",
    "fits_in_memory",
    "get_limits",
    "gunzip_metadata",
    "limits",
    "set_limits",
]


@dataclass(frozen=True)
class Limits:
    """How much a header may make virtualstac allocate.

    Attributes
    ----------
    references_per_array
        Chunk references (grid positions) of one array: each costs 17-24 bytes in memory.
    references_per_open
        Chunk references of all the arrays of one opened file or reference set.
    metadata_bytes
        Bytes of one metadata document, decompressed, before it is parsed: a Kerchunk JSON
        file (plain, or gzipped once inflated), a Kerchunk Parquet ``.zmetadata`` or record
        file, a Zarr store's metadata documents, STAC JSON (local, over HTTP, API pages),
        a netCDF-3 header.
        Parsing JSON takes several times its bytes: about 5 for Kerchunk references,
        up to about 25 for a document of tiny values (``[[],[],...]``).
    coordinate_bytes
        Bytes of one coordinate built in memory when a dataset opens or is written (loaded
        coordinate variables, coordinates computed from a geotransform).
    chunk_bytes
        Bytes of one chunk once decoded (its elements times their size), as Zarr metadata
        (``.zarray``, ``zarr.json``, Kerchunk) or an HDF5 chunked dataset declares it: a read
        holds a whole chunk in memory.
    group_depth
        Levels of groups nested in a Zarr store, Kerchunk reference set or HDF5 file, counted
        along the path of its deepest array or group (``a/b/c`` is 3 deep). Groups are walked
        recursively: a depth near Python's recursion limit would fail as a damaged file, and
        real hierarchies are a few levels deep.
    stac_items
        STAC Items gathered for one open: the pages of a STAC API search, the Items of a
        catalog walked by its links, an ItemCollection. A server can page for ever.
    stac_catalogs
        STAC Catalogs and Collections read for one open while a catalog is walked by its
        child links, the first one included: each is a request, and a chain of catalogs with
        no Items never trips ``stac_items``.
    """

    references_per_array: int = 50_000_000
    references_per_open: int = 50_000_000
    # Parsed JSON takes up to ~25 times its bytes, so 64 MiB bounds an untrusted document at
    # ~1.7 GB of memory (~350 MB for real references, about a million of them); bigger
    # reference sets are what Kerchunk's Parquet format is for.
    metadata_bytes: int = 64 * 2**20
    coordinate_bytes: int = 1 * 2**30
    chunk_bytes: int = 1 * 2**30
    group_depth: int = 100
    stac_items: int = 1_000_000
    # A catalog per day for over 250 years, or per tile of a fine grid: real hierarchies hold
    # fewer catalogs than Items.
    stac_catalogs: int = 100_000


_current = Limits()
_lock = threading.Lock()


def get_limits() -> Limits:
    """The limits in force."""
    return _current


def set_limits(**changes: int) -> Limits:
    """Change some limits for the whole process; returns the previous limits.

    >>> import virtualstac.limits
    >>> previous = virtualstac.limits.set_limits(references_per_open=100_000_000)
    >>> virtualstac.limits.get_limits().references_per_open
    100000000
    >>> _ = virtualstac.limits.set_limits(**dataclasses.asdict(previous))
    """
    global _current
    names = {field.name for field in dataclasses.fields(Limits)}
    unknown = sorted(set(changes) - names)
    if unknown:
        raise TypeError(f"unknown limits {unknown}; the limits are {sorted(names)}")
    for name, value in changes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"limit {name} must be a non-negative integer, got {value!r}")
    with _lock:
        previous = _current
        _current = dataclasses.replace(previous, **changes)
    return previous


@contextmanager
def limits(**changes: int) -> Iterator[Limits]:
    """Change some limits within a ``with`` block (see :func:`set_limits`); yields them."""
    previous = set_limits(**changes)
    try:
        yield get_limits()
    finally:
        set_limits(**dataclasses.asdict(previous))


def _exceeded(what: str, figure: int, name: str) -> LimitExceededError:
    limit = getattr(_current, name)
    return LimitExceededError(
        f"{what}: {figure:,} is more than the limit of {limit:,} ({name}); if the file is "
        f"trusted, raise it with virtualstac.limits.set_limits({name}=...) or within "
        f"`with virtualstac.limits.limits({name}=...)`"
    )


# References counted so far by the open in progress (see counting_references).
_open_total: ContextVar[list[int] | None] = ContextVar("virtualstac_open_total", default=None)


@contextmanager
def counting_references() -> Iterator[None]:
    """Count the references checked within the block against ``references_per_open``.

    Parsers wrap one open in it; nested blocks (a reference set opening its parts) add to the
    outermost count.
    """
    if _open_total.get() is not None:
        yield
        return
    token = _open_total.set([0])
    try:
        yield
    finally:
        _open_total.reset(token)


def check_references(count: int, *, source: str, array: str, add_to_open: bool = True) -> None:
    """Refuse ``count`` chunk references of ``array`` in ``source`` beyond the limits, before
    they are allocated.

    Within :func:`counting_references` they add to the open's total, unless ``add_to_open`` is
    false (a look ahead at references counted again when they are built).
    """
    if count > _current.references_per_array:
        raise _exceeded(
            f"{source}: array {array!r} has {count:,} chunk references",
            count,
            "references_per_array",
        )
    total = _open_total.get()
    if total is not None and add_to_open:
        total[0] += count
        check_open_references(total[0], source=source)


def check_open_references(total: int, *, source: str) -> None:
    """Refuse ``total`` chunk references of all the arrays of one open beyond the limit."""
    if total > _current.references_per_open:
        raise _exceeded(
            f"{source}: its arrays have {total:,} chunk references", total, "references_per_open"
        )


def check_metadata(nbytes: int, *, source: str, what: str | None = None) -> None:
    """Refuse ``nbytes`` of metadata from ``source`` beyond ``metadata_bytes``, before reading
    or building them: a metadata document, or what ``what`` says they are (``"gen references
    render ..."``)."""
    if nbytes > _current.metadata_bytes:
        said = what or f"the metadata document has {nbytes:,} bytes"
        raise _exceeded(f"{source}: {said}", nbytes, "metadata_bytes")


def gunzip_metadata(data: bytes, *, source: str) -> bytes:
    """Decompress gzip-compressed metadata, stopping as soon as it passes ``metadata_bytes``.

    Raises ``zlib.error`` for a corrupt or truncated stream, for the caller to name its format.
    """
    limit = _current.metadata_bytes
    out = bytearray()
    rest = data
    while rest:
        inflate = zlib.decompressobj(zlib.MAX_WBITS | 16)
        out += inflate.decompress(rest, limit + 1 - len(out))
        if len(out) > limit:
            raise _exceeded(
                f"{source}: the gzip stream inflates to more than {limit:,} bytes",
                len(out),
                "metadata_bytes",
            )
        if not inflate.eof:
            raise zlib.error("the gzip stream is truncated")
        rest = inflate.unused_data  # gzip files may hold several members, read one after another
    return bytes(out)


def check_coordinate(nbytes: int, *, source: str, name: str) -> None:
    """Refuse building variable ``name`` (a coordinate, or a loaded variable) of ``nbytes`` in
    memory beyond ``coordinate_bytes``."""
    if nbytes > _current.coordinate_bytes:
        raise _exceeded(
            f"{source}: variable {name!r} would take {nbytes:,} bytes in memory",
            nbytes,
            "coordinate_bytes",
        )


def check_chunk_bytes(nbytes: int, *, where: str) -> None:
    """Refuse an array whose chunks decode to ``nbytes`` each beyond ``chunk_bytes``, before
    its metadata (a fill value of one element) is built; ``where`` names the file and array."""
    if nbytes > _current.chunk_bytes:
        raise _exceeded(
            f"{where}: each chunk decodes to {nbytes:,} bytes",
            nbytes,
            "chunk_bytes",
        )


def check_stored_chunk_bytes(nbytes: int, *, where: str) -> None:
    """Refuse a chunk reference of ``nbytes`` stored bytes beyond ``chunk_bytes``, before it is
    read: a read holds a chunk's stored bytes whole, so a length claiming a huge object (or a
    reference to one whole) would be fetched into memory; ``where`` names the file and chunk."""
    if nbytes > _current.chunk_bytes:
        raise _exceeded(f"{where} references {nbytes:,} stored bytes", nbytes, "chunk_bytes")


def check_group_depth(paths: Iterable[str], *, source: str) -> None:
    """Refuse a hierarchy whose array or group ``paths`` (``"a/b/c"``, ``""`` for the root)
    nest deeper than ``group_depth``, before its groups are walked."""
    depth = max((path.count("/") + 1 for path in paths if path), default=0)
    if depth > _current.group_depth:
        raise _exceeded(f"{source}: its groups nest {depth:,} deep", depth, "group_depth")


def check_stac_items(count: int, *, source: str) -> None:
    """Refuse to gather more than ``stac_items`` STAC Items from ``source`` (a search, a
    catalog); called as they arrive, so that an endless source stops one Item past it."""
    if count > _current.stac_items:
        raise _exceeded(f"{source} gives more Items than that", count, "stac_items")


def check_stac_catalogs(count: int, *, source: str) -> None:
    """Refuse to read more than ``stac_catalogs`` STAC Catalogs walking ``source``; called
    before each is read, so that an endless chain stops without reading one past it."""
    if count > _current.stac_catalogs:
        raise _exceeded(f"{source} links to more catalogs than that", count, "stac_catalogs")


def fits_in_memory(nbytes: int) -> bool:
    """Whether a coordinate of ``nbytes`` may be built in memory (``coordinate_bytes``)."""
    return nbytes <= _current.coordinate_bytes
