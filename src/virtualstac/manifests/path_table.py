"""The path table of a chunk manifest: each distinct path once, and a small code per chunk.

Paths repeat across millions of chunks but few are distinct, so a manifest keeps them once each
in a table and every grid position holds an integer code into it. Codes 0 and 1 are reserved:
0 is a missing chunk (path ``""``), 1 an inlined chunk (path ``"__inlined__"``). Codes are
stored in the narrowest unsigned integer type that holds the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from virtualstac.errors import InvalidManifestError
from virtualstac.storage.urls import normalize_url

__all__ = [
    "INLINED_CHUNK_PATH",
    "INLINED_CODE",
    "MISSING_CHUNK_PATH",
    "MISSING_CODE",
    "code_dtype",
    "code_paths",
    "drop_unused",
    "merge_tables",
    "normalize_table",
    "recode_path_table",
]

MISSING_CHUNK_PATH = ""
INLINED_CHUNK_PATH = "__inlined__"

#: The codes of the two reserved table entries.
MISSING_CODE = 0
INLINED_CODE = 1

_BLOCK = 65536


#: Each code type and the number of paths it can index (``np.iinfo`` costs more than a parse's
#: use of the manifest it sizes).
_CODE_TYPES = tuple(
    (np.dtype(dtype), int(np.iinfo(dtype).max) + 1) for dtype in (np.uint8, np.uint16, np.uint32)
)


def code_dtype(table_size: int) -> np.dtype[Any]:
    """The narrowest unsigned integer type that can index a table of ``table_size`` paths."""
    for dtype, capacity in _CODE_TYPES:
        if table_size <= capacity:
            return dtype
    return np.dtype(np.uint64)


def code_paths(paths: np.ndarray[Any, Any]) -> tuple[list[str], npt.NDArray[np.int64]]:
    """Distinct paths (after the two reserved ones) and each chunk's code into them.

    Paths usually come in long runs (the chunks of one file are adjacent), so only the first
    path of each run goes through the dict. Otherwise the array is converted to Python strings
    a block at a time, so that millions of temporary strings never exist at once.
    """
    table_index: dict[str, int] = {
        MISSING_CHUNK_PATH: MISSING_CODE,
        INLINED_CHUNK_PATH: INLINED_CODE,
    }
    flat = paths.ravel()
    if flat.dtype.kind not in "UT":
        flat = flat.astype(np.dtypes.StringDType())
    codes = np.empty(flat.size, dtype=np.int64)
    if flat.size:
        starts = np.flatnonzero(np.concatenate([[True], flat[1:] != flat[:-1]]))
        if len(starts) * 8 <= flat.size:
            run_codes = [table_index.setdefault(p, len(table_index)) for p in flat[starts].tolist()]
            codes = np.repeat(np.asarray(run_codes, dtype=np.int64), np.diff([*starts, flat.size]))
        else:
            for begin in range(0, flat.size, _BLOCK):
                block = flat[begin : begin + _BLOCK].tolist()
                codes[begin : begin + len(block)] = [
                    table_index.setdefault(p, len(table_index)) for p in block
                ]
    # Fresh copies, so the table does not pin the arena of a temporary string it came from.
    table = [p.encode().decode() for p in table_index]
    return table, codes.reshape(paths.shape)


def recode_path_table(
    path_table: Sequence[str], path_codes: npt.ArrayLike
) -> tuple[list[str], npt.NDArray[np.int64]]:
    """A caller's table of paths (``""`` for missing chunks) and codes into it, recoded to ours.

    Raises
    ------
    InvalidManifestError
        If a code does not index into the table, or the table holds the inlined sentinel.
    """
    codes_in = np.asarray(path_codes)
    if codes_in.dtype.kind not in "iu":
        raise InvalidManifestError(f"path_codes must be integers, got dtype {codes_in.dtype}")
    if codes_in.size and (codes_in.min() < 0 or codes_in.max() >= len(path_table)):
        raise InvalidManifestError("path_codes must index into path_table")
    table = [MISSING_CHUNK_PATH, INLINED_CHUNK_PATH]
    lookup = np.empty(len(path_table), dtype=np.int64)
    for i, path in enumerate(path_table):
        if path == INLINED_CHUNK_PATH:
            raise InvalidManifestError("inlined chunks need from_arrays(..., inlined=)")
        if path == MISSING_CHUNK_PATH:
            lookup[i] = MISSING_CODE
        else:
            lookup[i] = len(table)
            table.append(path)
    return table, lookup[codes_in]


def normalize_table(
    table: Sequence[str], codes: np.ndarray[Any, Any], root: str | None
) -> tuple[list[str], np.ndarray[Any, Any]]:
    """Normalise each distinct path once, merging paths that name the same object."""
    normalized: dict[str, int] = {
        MISSING_CHUNK_PATH: MISSING_CODE,
        INLINED_CHUNK_PATH: INLINED_CODE,
    }
    lookup = np.arange(len(table), dtype=np.int64)
    for i, path in enumerate(table[2:], start=2):
        lookup[i] = normalized.setdefault(normalize_url(path, root=root), len(normalized))
    if len(normalized) == len(table):
        return list(normalized), codes
    return list(normalized), lookup[codes]


def drop_unused(
    table: Sequence[str], codes: np.ndarray[Any, Any]
) -> tuple[list[str], np.ndarray[Any, Any]]:
    """Remove table entries no chunk refers to, so the table lists exactly the referenced paths."""
    if len(table) <= 2:
        return list(table), codes
    used = np.bincount(np.ravel(codes), minlength=len(table)) > 0
    used[:2] = True
    if used.all():
        return list(table), codes
    lookup = np.cumsum(used) - 1
    return [p for p, u in zip(table, used, strict=True) if u], lookup[codes]


def merge_tables(
    tables: Sequence[Sequence[str]], codes: Sequence[np.ndarray[Any, Any]]
) -> tuple[list[str], list[np.ndarray[Any, Any]]]:
    """One table for several manifests, and each manifest's codes recoded into it."""
    merged: dict[str, int] = {}
    recoded = []
    for table, table_codes in zip(tables, codes, strict=True):
        lookup = np.fromiter(
            (merged.setdefault(p, len(merged)) for p in table),
            dtype=np.int64,
            count=len(table),
        )
        recoded.append(lookup[table_codes])
    return list(merged), recoded
