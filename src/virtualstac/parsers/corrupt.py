"""Damaged files: the foreign exceptions of header parsing as one-line typed errors.

Parsers read headers through libraries that fail on damaged input with their own exceptions:
tifffile with ``struct.error``, ``ValueError`` or ``TypeError``, h5py with ``KeyError``,
``RuntimeError`` or ``OSError``, ``json`` with ``JSONDecodeError``, ``UnicodeDecodeError`` or
``RecursionError``, pyarrow with ``ArrowInvalid``. Each parser wraps its entry point (and, to
say more precisely where, each variable) in :func:`reading`, which turns them into a
:class:`~virtualstac.errors.CorruptFileError` naming the file and what was being read, with
the original exception chained. virtualstac's own errors pass through unchanged.

Some libraries also log what they skip in damaged input (tifffile warns of IFD offsets beyond
the end of the file); :func:`quiet_logger` drops those records while a parse, which reports the
damage as an error, runs.
"""

from __future__ import annotations

import logging
import struct
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from virtualstac.errors import CorruptFileError, VirtualStacError
from virtualstac.storage.failures import describe, redact

__all__ = ["FOREIGN_ERRORS", "quiet_logger", "reading"]

#: What libraries raise on damaged input. ``OSError`` is not among them: it usually means the
#: file could not be read at all (and h5py, which raises it for damaged metadata, adds it).
FOREIGN_ERRORS: tuple[type[Exception], ...] = (
    ArithmeticError,
    AttributeError,
    EOFError,
    LookupError,
    RuntimeError,  # RecursionError among them
    TypeError,
    ValueError,  # UnicodeDecodeError, JSONDecodeError, TiffFileError, ArrowInvalid
    struct.error,
    zlib.error,
)


@contextmanager
def reading(url: str, what: str, *, also: tuple[type[Exception], ...] = ()) -> Iterator[None]:
    """Raise a :class:`CorruptFileError` for a foreign exception raised inside the block.

    ``what`` says what was being read (``"the netCDF-3 header"``, ``"dataset 'temp' (its
    layout and chunk index)"``); ``also`` adds exception types to :data:`FOREIGN_ERRORS`.
    """
    try:
        yield
    except VirtualStacError:
        raise
    except (*FOREIGN_ERRORS, *also) as err:
        raise CorruptFileError(
            f"{redact(url)} is damaged: reading {what} failed ({describe(err)})"
        ) from err


class _OtherThreads(logging.Filter):
    """Passes the records of every thread but the one that created it."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` comes from another thread."""
        return record.thread != self.thread


@contextmanager
def quiet_logger(name: str) -> Iterator[None]:
    """Drop what the logger ``name`` records from this thread inside the block; other threads'
    records (parses of other files) are kept."""
    logger = logging.getLogger(name)
    only_others = _OtherThreads()
    logger.addFilter(only_others)
    try:
        yield
    finally:
        logger.removeFilter(only_others)
