"""Choosing a parser from a file's first bytes (its magic number)."""

from __future__ import annotations

import json
from typing import Any

import obstore

from virtualstac.errors import ChunkReadError, SourceNotFoundError, UnknownFormatError
from virtualstac.parsers.protocol import Parser
from virtualstac.storage.failures import describe, network_failure, redact
from virtualstac.storage.registry import ObjectStoreRegistry

__all__ = ["detect_format", "parser_for"]

_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_TIFF_SIGNATURES = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")
_NETCDF3_SIGNATURES = (b"CDF\x01", b"CDF\x02", b"CDF\x05")
_PROBE_BYTES = 16


def detect_format(url: str, registry: ObjectStoreRegistry) -> str:
    """Return the format of the object or directory at ``url``.

    One of ``"hdf5"``, ``"tiff"``, ``"netcdf3"``, ``"kerchunk-json"``, ``"kerchunk-parquet"``
    and ``"zarr"``. Files are recognised by their magic bytes (one small range request);
    directories by their metadata objects (``zarr.json``, ``.zgroup``/``.zarray``, or a Kerchunk
    ``.zmetadata`` with ``record_size``).

    Raises
    ------
    UnknownFormatError
        If nothing matches; the message lists the formats tried.
    """
    store, path = registry.resolve(url)
    head = _read_head(store, path, url)
    if head is not None:
        if head.startswith(_HDF5_SIGNATURE):
            return "hdf5"
        if head.startswith(_TIFF_SIGNATURES):
            return "tiff"
        if head.startswith(_NETCDF3_SIGNATURES):
            return "netcdf3"
        if head.lstrip()[:1] == b"{":
            return "kerchunk-json"
        if _hdf5_after_userblock(store, path, url):
            return "hdf5"
        raise UnknownFormatError(
            f"cannot tell the format of {redact(url)!r} from its first bytes {bytes(head[:8])!r}; "
            "supported: HDF5/netCDF4, TIFF/COG, netCDF3, Kerchunk JSON. Pass parser= explicitly."
        )
    prefix = path.rstrip("/")
    if _exists(store, f"{prefix}/.zmetadata"):
        metadata = json.loads(bytes(obstore.get(store, f"{prefix}/.zmetadata").bytes()))
        return "kerchunk-parquet" if "record_size" in metadata else "zarr"
    if any(_exists(store, f"{prefix}/{key}") for key in ("zarr.json", ".zgroup", ".zarray")):
        return "zarr"
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


def _read_head(store: Any, path: str, url: str) -> bytes | None:
    """The first bytes of the object, or None if there is no object (a directory, or nothing)."""
    try:
        return bytes(obstore.get_range(store, path, start=0, end=_PROBE_BYTES))
    except FileNotFoundError:
        return None
    except Exception as err:
        failure = network_failure(err, url)
        if failure is not None:  # a server that ignores Range or cannot be reached
            raise failure from err
        if _exists(store, path):  # obstore refuses any range of an empty object
            return b""
        raise ChunkReadError(f"cannot read {redact(url)!r}: {describe(err)}") from err


def _hdf5_after_userblock(store: Any, path: str, url: str) -> bool:
    # HDF5 allows a user block of 512, 1024, 2048, ... bytes before the superblock.
    for offset in (512, 1024, 2048, 4096):
        try:
            data = bytes(obstore.get_range(store, path, start=offset, length=8))
        except Exception as err:  # past the end of a small file: no superblock there
            failure = network_failure(err, url)
            if failure is not None:
                raise failure from err
            return False
        if data == _HDF5_SIGNATURE:
            return True
    return False


def _exists(store: Any, path: str) -> bool:
    try:
        obstore.head(store, path)
    except (FileNotFoundError, IsADirectoryError):
        return False
    except Exception:  # a local directory answers with a generic error
        return False
    return True
