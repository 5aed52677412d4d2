"""Typed exceptions raised by virtualstac.

Every error a user can cause (bad paths, unregistered URLs, incompatible arrays, unreadable
chunks, unrepresentable data) is one of these, with a message that says what to do. Each class
also derives from the builtin exception a Python user would expect (``ValueError``, ``KeyError``,
``PermissionError``, ``OSError``), so generic ``except`` clauses keep working.
"""

from __future__ import annotations

import copy
import re
from typing import Any

__all__ = [
    "ChunkDecodeError",
    "ChunkReadError",
    "CorruptFileError",
    "IncompatibleArraysError",
    "IncompatibleCalendarsError",
    "IncompatibleCodecsError",
    "IndexerTypeError",
    "InvalidCatalogArgumentError",
    "InvalidCatalogError",
    "InvalidChunkKeyError",
    "InvalidIndexerError",
    "InvalidManifestError",
    "InvalidPathError",
    "LimitExceededError",
    "NetworkError",
    "NetworkTimeoutError",
    "NotVirtualizableError",
    "NotWritableError",
    "OverviewNotFoundError",
    "RangeNotSupportedError",
    "ReadOnlyStoreError",
    "RedirectRefusedError",
    "SourceChangedError",
    "SourceNotFoundError",
    "TurnLostError",
    "UnknownFormatError",
    "UnregisteredURLError",
    "UnsupportedIndexingError",
    "UnsupportedOperationError",
    "UnsupportedOptionError",
    "VariableNotFoundError",
    "VirtualStacError",
    "WorkerLostError",
    "in_context",
    "redact",
]


# Up to the last "@" before the path, as URL parsers split user info from the host: a
# password may hold an "@" of its own.
_USERINFO = re.compile(r"(?<=://)[^/?#\s'\"]*@")
# Query parameters that carry a signature or a token (S3 and GCS pre-signed URLs, Azure SAS,
# bearer tokens passed in the query, Planetary Computer tokens).
_SECRET_QUERY = re.compile(
    r"(?i)([?&](?:sig|signature|token|access_token|api_?key|key|password|secret|"
    r"x-amz-signature|x-amz-credential|x-amz-security-token|"
    r"x-goog-signature|x-goog-credential)=)[^&#\s'\"]*"
)


def redact(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``.

    Examples
    --------
    >>> redact("http://user:secret@host/x.nc?token=abc&v=1")
    'http://***@host/x.nc?token=***&v=1'
    """
    return _SECRET_QUERY.sub(r"\1***", _USERINFO.sub("***@", text))


class VirtualStacError(Exception):
    """Base class of every error virtualstac raises on purpose.

    Its message never shows credentials: URLs in it are :func:`redact` ed, whichever code
    wrote it (a catalog or reference file may hold URLs with passwords or signatures).
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*(redact(arg) if isinstance(arg, str) else arg for arg in args))


class InvalidPathError(VirtualStacError, ValueError):
    """A chunk path is not an absolute URL or local path that can be referenced."""


class InvalidChunkKeyError(VirtualStacError, ValueError):
    """A chunk key is malformed or lies outside the chunk grid."""


class InvalidManifestError(VirtualStacError, ValueError):
    """Manifest entries or arrays do not describe a valid chunk grid."""


class IncompatibleArraysError(VirtualStacError, ValueError):
    """Arrays cannot be combined without changing what their bytes mean."""


class IncompatibleCalendarsError(IncompatibleArraysError, TypeError):
    """Files whose decoded times are dates of different calendars cannot share one time
    coordinate: a date of one calendar is no date of the other.

    Also a ``TypeError``, as xarray raises for a coordinate of dates of mixed types.
    """


class IncompatibleCodecsError(IncompatibleArraysError, NotImplementedError):
    """Arrays with different codec chains cannot become one Zarr array, which has one chain.

    Also a ``NotImplementedError``, as VirtualiZarr raises for it: joining them would need a
    more general notion of concatenation than one array.
    """


class InvalidIndexerError(VirtualStacError, IndexError, ValueError):
    """An indexer is malformed: too many or too few indices, several ellipses, out of bounds.

    An ``IndexError`` as numpy raises, and a ``ValueError`` as the array API and VirtualiZarr do.
    """


class IndexerTypeError(InvalidIndexerError, TypeError):
    """An indexer of a type arrays cannot be indexed with (a string, a float, a list of them)."""


class UnsupportedIndexingError(VirtualStacError, IndexError, ValueError, NotImplementedError):
    """An index would cut through chunks or pick elements, which references cannot express.

    An ``IndexError`` as numpy's refusals are, a ``ValueError`` as VirtualiZarr's
    ``SubChunkIndexingError`` is, and a ``NotImplementedError`` as its refusal of fancy
    indexing is.
    """


class UnsupportedOperationError(VirtualStacError, NotImplementedError):
    """An operation would need the values of virtual chunks (for example loading or arithmetic)."""


class UnsupportedOptionError(VirtualStacError, TypeError):
    """A keyword argument that ``xr.open_mfdataset`` or VirtualiZarr takes has no meaning for
    references (or is spelled differently here); the message names it and what to use
    instead."""


class ReadOnlyStoreError(UnsupportedOperationError, ValueError):
    """A write to a read-only store (a ``ValueError``, as zarr's read-only stores raise)."""


class NotVirtualizableError(VirtualStacError, ValueError):
    """A variable's bytes cannot be referenced as Zarr chunks, or its metadata represented.

    The message names the file, the variable and the reason; ``drop_variables=`` skips it.
    """


class NotWritableError(VirtualStacError, PermissionError):
    """A store target or catalog file cannot be written (read-only, not a directory, denied).

    Raised before anything is written, naming the place and the reason.
    """


class OverviewNotFoundError(VirtualStacError, IndexError):
    """An overview level asked for does not exist: the file has fewer (or no) overviews."""


class VariableNotFoundError(VirtualStacError, KeyError):
    """A variable asked for by name (``loadable_variables``) is not in the file's group."""

    def __str__(self) -> str:
        # KeyError quotes its message; this one is a sentence.
        return str(self.args[0]) if self.args else ""


class LimitExceededError(VirtualStacError, MemoryError):
    """A file claims more than a size limit allows (chunk references, decompressed metadata,
    coordinate values): refused before the memory is allocated. The message says the figure,
    the limit and how to raise it (:mod:`virtualstac.limits`).
    """


class UnregisteredURLError(VirtualStacError, PermissionError):
    """A URL lies outside every prefix of the object store registry (the read allow-list)."""


class RedirectRefusedError(UnregisteredURLError):
    """An HTTP server answered a read with a redirect, which is never followed: it could lead
    outside the read allow-list. STAC JSON is redirected to other HTTP URLs only: this is
    also a redirect of a STAC document elsewhere (a ``file:`` URL)."""


class UnknownFormatError(VirtualStacError, ValueError):
    """A file's format could not be recognised, or no parser handles it."""


class CorruptFileError(VirtualStacError, ValueError):
    """A file's header or metadata is damaged: it cannot be parsed as the format it claims.

    The message names the file and what was being read; the parser's own exception is chained.
    """


class InvalidCatalogError(CorruptFileError):
    """A STAC JSON file (a catalog, a collection, an item or one they link to) or an Intake
    catalog entry is malformed: broken JSON, a required field missing or of the wrong type,
    a bad datetime, an asset without ``href``.

    The message names the file (and the file linking to it) or the entry; the exception of
    the library that refused it (pystac, json, PyYAML) is chained.
    """


class InvalidCatalogArgumentError(InvalidCatalogError, TypeError):
    """An argument of an Intake driver, as a catalog entry gives it, is unknown or of the
    wrong type. The message names the driver, the entry when known, and the argument."""


class SourceNotFoundError(VirtualStacError, FileNotFoundError):
    """A source file or directory does not exist."""


class ChunkReadError(VirtualStacError, OSError):
    """The bytes of a referenced chunk could not be read as referenced."""


class ChunkDecodeError(ChunkReadError):
    """A chunk's bytes were read but do not decode with its array's codecs: the source is
    damaged, or the reference's offset or length is wrong. The message names the chunk key, the
    source URL, the offset and the length.
    """


class SourceChangedError(ChunkReadError):
    """A source object changed after its references were captured."""


class NetworkError(ChunkReadError):
    """A request failed on every attempt: the connection was refused or dropped, or the server
    kept answering with a server error. The message names the URL (credentials redacted) and
    the attempts; :class:`~virtualstac.NetworkOptions` set timeouts and retries.
    """


class NetworkTimeoutError(NetworkError, TimeoutError):
    """A server did not answer a request within the timeout, on every attempt."""


class RangeNotSupportedError(ChunkReadError):
    """A server answered a byte-range request with the whole object: it ignores ``Range``."""


class WorkerLostError(VirtualStacError, RuntimeError):
    """A worker of a cluster died during a publish, which therefore committed nothing."""


class TurnLostError(VirtualStacError, RuntimeError):
    """Another writer took over this writer's turn at a target: it went unheard of for a lease."""


def in_context(err: VirtualStacError, context: str) -> VirtualStacError | None:
    """A copy of ``err`` (same type, same cause) whose message starts with ``context``, such as
    the catalog entry or the STAC asset it was raised for; None for an error whose message is
    not its first argument, or that cannot be copied."""
    if not err.args or not isinstance(err.args[0], str):
        return None
    try:
        named = copy.copy(err)
        named.args = (f"{context}: {err.args[0]}", *err.args[1:])
    except Exception:
        return None
    named.__cause__ = err.__cause__
    return named
