"""Parsers: one module per format, each ``parser(url, registry) -> ManifestStore``."""

from virtualstac.parsers.hdf import HDFParser
from virtualstac.parsers.kerchunk import KerchunkJSONParser, KerchunkParquetParser
from virtualstac.parsers.netcdf3 import NetCDF3Parser
from virtualstac.parsers.protocol import Parser
from virtualstac.parsers.tiff import TIFFParser
from virtualstac.parsers.zarr import ZarrParser

__all__ = [
    "HDFParser",
    "KerchunkJSONParser",
    "KerchunkParquetParser",
    "NetCDF3Parser",
    "Parser",
    "TIFFParser",
    "ZarrParser",
]
