"""Choosing a parser from a file's first bytes (its magic number)."""

from __future__ import annotations

import json
import os
import zlib
from typing import Any

from virtualstac.errors import SourceNotFoundError, UnknownFormatError
from virtualstac.parsers.corrupt import reading
from virtualstac.parsers.protocol import Parser
from virtualstac.storage import objects
from virtualstac.storage.failures import redact
from virtualstac.storage.reader import read_document, read_head
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import file_url_to_path, normalize_url

__all__ = ["detect_format", "parser_for"]

_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_TIFF_SIGNATURES = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")
_NETCDF3_SIGNATURES = (b"CDF\x01", b"CDF\x02", b"CDF\x05")
_USERBLOCK_SIZES = (512, 1024, 2048, 4096)
_GZIP_MAGIC = b"\x1f\x8b"


def _gzipped_json(head: bytes) -> bool:
    """Whether ``head`` starts a gzip stream of a JSON object (Kerchunk writes ``.json.gz``)."""
    if not head.startswith(_GZIP_MAGIC):
        return False
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        start = inflate.decompress(head, 64)  # a few bytes tell; no more are inflated
    except zlib.error:
        return False
    return start.lstrip()[:1] == b"{"


def detect_format(url: str, registry: ObjectStoreRegistry) -> str:
    """Return the format of the object or directory at ``url``.

    One of ``"hdf5"``, ``"tiff"``, ``"netcdf3"``, ``"kerchunk-json"``, ``"kerchunk-parquet"``
    and ``"zarr"``. Files are recognised by their magic bytes, read with the first block a parser
    reads (one range request, which a parser opened inside
    :func:`~virtualstac.storage.reader.sharing_heads` reuses); directories by their metadata
    objects (``zarr.json``, ``.zgroup``/``.zarray``, or a Kerchunk ``.zmetadata`` with
    ``record_size``).

    Raises
    ------
    UnknownFormatError
        If nothing matches; the message lists the formats tried.
    """
    found = read_head(url, registry)
    if found is not None:
        head = found.data
        if head.startswith(_HDF5_SIGNATURE):
            return "hdf5"
        if head.startswith(_TIFF_SIGNATURES):
            return "tiff"
        if head.startswith(_NETCDF3_SIGNATURES):
            return "netcdf3"
        if head.lstrip()[:1] == b"{" or _gzipped_json(head):
            return "kerchunk-json"
        # HDF5 allows a user block of 512, 1024, 2048, ... bytes before the superblock.
        if any(head[n : n + 8] == _HDF5_SIGNATURE for n in _USERBLOCK_SIZES):
            return "hdf5"
        raise UnknownFormatError(
            f"cannot tell the format of {redact(url)!r} from its first bytes {bytes(head[:8])!r}; "
            "supported: HDF5/netCDF4, TIFF/COG, netCDF3, Kerchunk JSON. Pass parser= explicitly "
            "(for a STAC asset, set its virtual:parser)."
        )
    store, path = registry.resolve(url)
    prefix = path.rstrip("/")
    if _exists(store, f"{prefix}/.zmetadata"):
        zmetadata = f"{url.rstrip('/')}/.zmetadata"
        data = read_document(zmetadata, registry, what="consolidated metadata")
        with reading(zmetadata, "its JSON"):
            metadata = json.loads(data)
        return (
            "kerchunk-parquet"
            if isinstance(metadata, dict) and "record_size" in metadata
            else "zarr"
        )
    if any(_exists(store, f"{prefix}/{key}") for key in ("zarr.json", ".zgroup", ".zarray")):
        return "zarr"
    local = normalize_url(url)
    if local.startswith("file://") and os.path.isdir(file_url_to_path(local)):
        # An object store has no directories to tell apart from nothing; a disk has.
        raise UnknownFormatError(
            f"{redact(url)!r} is a directory without Zarr or Kerchunk parquet metadata "
            "(zarr.json, .zgroup, .zarray, .zmetadata): name the files in it, or a glob"
        )
    raise SourceNotFoundError(
        f"{redact(url)!r} does not exist (no object there, nor Zarr or Kerchunk parquet "
        "metadata below it)"
    )


def parser_for(url: str, registry: ObjectStoreRegistry, **options: Any) -> Parser:
    """Return a parser for the format of ``url``, constructed with ``options``."""
    fmt = detect_format(url, registry)
    if fmt == "hdf5":
        from virtualstac.parsers.hdf import HDFParser

        return HDFParser(**options)
    if fmt == "tiff":
        from virtualstac.parsers.tiff import TIFFParser

        return TIFFParser(**options)
    if fmt == "netcdf3":
        from virtualstac.parsers.netcdf3 import NetCDF3Parser

        return NetCDF3Parser(**options)
    if fmt == "kerchunk-json":
        from virtualstac.parsers.kerchunk import KerchunkJSONParser

        return KerchunkJSONParser(**options)
    if fmt == "kerchunk-parquet":
        from virtualstac.parsers.kerchunk import KerchunkParquetParser

        return KerchunkParquetParser(**options)
    from virtualstac.parsers.zarr import ZarrParser

    return ZarrParser(**options)


def _exists(store: Any, path: str) -> bool:
    try:
        objects.head(store, path)
    except (FileNotFoundError, IsADirectoryError):
        return False
    except Exception:  # a local directory answers with a generic error
        return False
    return True
