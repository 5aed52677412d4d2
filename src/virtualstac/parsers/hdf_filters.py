"""HDF5 filter pipelines as zarr v3 codec chains.

An HDF5 dataset's filter pipeline is listed in the order the filters run when writing, which
is the order of a zarr v3 ``codecs`` list after its ``bytes`` codec. Each filter maps to a codec
whose decoder reads the filter's output unchanged:

==========================  =====================  =========================================
HDF5 filter (id)            zarr v3 codec          note
==========================  =====================  =========================================
deflate (1)                 ``numcodecs.zlib``     HDF5 deflate is a zlib stream, not gzip
shuffle (2)                 ``numcodecs.shuffle``  bytes -> bytes, element size from the filter
fletcher32 (3)              ``numcodecs.fletcher32``
bzip2 (307)                 ``numcodecs.bz2``
lzf (32000)                 ``imagecodecs_lzf``    raw LZF, no header (defined here)
blosc (32001)               ``numcodecs.blosc``    the blosc frame describes itself
lz4 (32004)                 ``imagecodecs_lz4h5``  the HDF5 LZ4 block framing (defined here)
bitshuffle (32008)          ``virtualstac.``       LZ4 or Zstandard blocks (defined here)
                            ``hdf5_bitshuffle``
szip (4)                    ``imagecodecs_szip``   libaec after HDF5's size header (defined here)
scaleoffset (6)             ``virtualstac.``       packed offsets from each chunk's minimum
                            ``hdf5_scaleoffset``   (defined here)
zstd (32015)                ``numcodecs.zstd``
==========================  =====================  =========================================

A shuffle whose input need not be whole values (after a compressor, or after fletcher32's
4-byte checksum of 8-byte values, as netCDF4 writes ``zlib``, ``shuffle`` and ``fletcher32``
together) leaves the bytes past the last whole value in place, which ``numcodecs.shuffle``
refuses; it becomes ``virtualstac.hdf5_shuffle``, which does as HDF5 does.

A chunk an optional filter failed on (one it could not compress) is stored as the filter got
it, its filter mask saying so. Where the pipeline's other filters are shuffle or fletcher32, the
chunk's size tells it apart, and the filter's codec is wrapped in ``virtualstac.hdf5_optional``,
which passes such chunks through (szip's codec does so itself).

nbit (5) packs the bits of values narrower than their type in ways no zarr codec undoes, so
datasets using it, or any other filter, cannot be referenced; on types of full precision it
stores the values as they are (its "need not compress" parameter), and is passed over.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from virtualstac.codecs import (
    HDF5BitshuffleCodec,
    HDF5OptionalCodec,
    HDF5ScaleOffsetCodec,
    HDF5ShuffleCodec,
    LZ4H5Codec,
    LZFCodec,
    SzipH5Codec,
)
from virtualstac.parsers.hdf_metadata import decode_text

__all__ = [
    "Filter",
    "SkipFrame",
    "UnsupportedFilterError",
    "codecs_for_filters",
    "filter_name",
    "is_szip",
    "pipeline",
    "skip_frame",
    "skippable_filters",
]

#: One filter of a pipeline: its id, its client data (``cd_values``) and its name.
type Filter = tuple[int, tuple[int, ...], str]

_DEFLATE = 1
_SHUFFLE = 2
_FLETCHER32 = 3
_SZIP = 4
_NBIT = 5
_SCALEOFFSET = 6
_BZIP2 = 307
_LZF = 32000
_BLOSC = 32001
_LZ4 = 32004
_BITSHUFFLE = 32008
_ZSTD = 32015

_NAMES = {
    _DEFLATE: "deflate",
    _SHUFFLE: "shuffle",
    _FLETCHER32: "fletcher32",
    _SZIP: "szip",
    _NBIT: "nbit",
    _SCALEOFFSET: "scaleoffset",
    _BZIP2: "bzip2",
    _LZF: "lzf",
    _BLOSC: "blosc",
    _LZ4: "lz4",
    _BITSHUFFLE: "bitshuffle",
    _ZSTD: "zstd",
}

# Compressor codes of the HDF5 blosc filter (hdf5-blosc ``blosc_filter.h``).
_BLOSC_CNAMES = {0: "blosclz", 1: "lz4", 2: "lz4hc", 3: "snappy", 4: "zlib", 5: "zstd"}


class UnsupportedFilterError(ValueError):
    """An HDF5 filter has no zarr codec that decodes its output; ``filter_id`` names it.

    The parser turns it into a ``NotVirtualizableError`` naming the file and the variable.
    """

    def __init__(self, filter_id: int, name: str, reason: str) -> None:
        super().__init__(f"filter {filter_id} ({name}) {reason}")
        self.filter_id = filter_id
        self.name = name
        self.reason = reason


def filter_name(pipeline_filter: Filter) -> str:
    """A filter's short name (``"blosc"``), or the name its plugin gives it."""
    filter_id, _, name = pipeline_filter
    return _NAMES.get(filter_id, name)


def _numcodecs(name: str, **configuration: Any) -> dict[str, Any]:
    return {"name": f"numcodecs.{name}", "configuration": configuration}


def _first(values: Sequence[int], default: int) -> int:
    return int(values[0]) if len(values) else default


def codec_for_filter(filter_id: int, cd_values: Sequence[int], name: str) -> dict[str, Any]:
    """The zarr v3 codec (JSON form) that decodes the output of one HDF5 filter.

    ``cd_values`` are the filter's client data as stored in the file (after ``set_local``).
    Raises :class:`UnsupportedFilterError` when no codec reads the filter's output.
    """
    name = _NAMES.get(filter_id, name)
    if filter_id == _DEFLATE:
        return _numcodecs("zlib", level=_first(cd_values, 6))
    if filter_id == _SHUFFLE:
        return _numcodecs("shuffle", elementsize=_first(cd_values, 1))
    if filter_id == _FLETCHER32:
        return _numcodecs("fletcher32")
    if filter_id == _BZIP2:
        return _numcodecs("bz2", level=_first(cd_values, 9))
    if filter_id == _LZF:
        return {"name": LZFCodec.codec_name, "configuration": {"header": False}}
    if filter_id == _LZ4:
        return {"name": LZ4H5Codec.codec_name, "configuration": {}}
    if filter_id == _BITSHUFFLE and len(cd_values) >= 3:
        return _bitshuffle(cd_values, name)
    if filter_id == _SZIP and len(cd_values) >= 4:
        # cd_values as the filter's set_local leaves them: options mask, pixels per block,
        # bits per pixel, pixels per scanline.
        keys = ("options_mask", "pixels_per_block", "bits_per_pixel", "pixels_per_scanline")
        configuration = {key: int(value) for key, value in zip(keys, cd_values, strict=False)}
        return {"name": SzipH5Codec.codec_name, "configuration": {**configuration, "header": True}}
    if filter_id == _ZSTD:
        return _numcodecs("zstd", level=_first(cd_values, 3))
    if filter_id == _BLOSC:
        # cd_values: revision, blosc version, type size, chunk bytes, clevel, shuffle, compressor.
        # Decoding reads all of these from the blosc frame header; they only describe the data.
        values = list(cd_values) + [0] * (7 - len(cd_values))
        cname = _BLOSC_CNAMES.get(int(values[6]), f"compressor {int(values[6])}")
        if cname not in _blosc_compressors():
            # Else every chunk fails to decode when read, as if the file were damaged.
            raise UnsupportedFilterError(
                filter_id, name, f"uses blosc's {cname}, which numcodecs' blosc is built without"
            )
        return _numcodecs(
            "blosc",
            cname=cname,
            clevel=int(values[4]) or 5,
            shuffle=int(values[5]),
            blocksize=0,
        )
    if filter_id == _SCALEOFFSET:
        try:
            return HDF5ScaleOffsetCodec(cd_values=cd_values).to_dict()
        except ValueError as err:
            raise UnsupportedFilterError(filter_id, name, str(err)) from err
    if filter_id in (_SZIP, _NBIT):
        raise UnsupportedFilterError(
            filter_id, name, "rewrites the bits of the values and no zarr codec decodes it"
        )
    raise UnsupportedFilterError(filter_id, name, "has no zarr codec")


def _bitshuffle(cd_values: Sequence[int], name: str) -> dict[str, Any]:
    """bitshuffle's codec; cd_values: version (2), element size, block size, compression."""
    compression = int(cd_values[4]) if len(cd_values) > 4 else 0
    names = {code: text for text, code in HDF5BitshuffleCodec.compressions.items()}
    if compression not in names:
        raise UnsupportedFilterError(
            _BITSHUFFLE, name, f"compresses with bitshuffle's compressor {compression}"
        )
    block = int(cd_values[3]) if len(cd_values) > 3 else 0
    try:
        codec = HDF5BitshuffleCodec(
            elementsize=int(cd_values[2]), blocksize=block, compression=names[compression]
        )
    except ValueError as err:
        reason = f"has parameters it refuses: {err}"
        raise UnsupportedFilterError(_BITSHUFFLE, name, reason) from err
    return codec.to_dict()


@functools.cache
def _blosc_compressors() -> frozenset[str]:
    """The compressors numcodecs' blosc decodes (its builds leave out snappy)."""
    from numcodecs import blosc

    return frozenset(blosc.list_compressors())


def _leaves_partial_values(earlier: Sequence[Filter], cd_values: Sequence[int]) -> bool:
    """Whether a shuffle after the filters ``earlier`` may get bytes that are not whole
    elements: after a compressor, or after fletcher32's 4-byte checksum of 8-byte values."""
    element_size = _first(cd_values, 1)
    if any(filter_id != _FLETCHER32 for filter_id, _, _ in earlier):
        return True
    return (4 * len(earlier)) % element_size != 0


def pipeline(dcpl: Any) -> list[Filter]:
    """The filters of a dataset creation property list, as ``(id, cd_values, name)``."""
    filters = []
    for i in range(dcpl.get_nfilters()):
        filter_id, _flags, values, name = dcpl.get_filter(i)
        filters.append((int(filter_id), tuple(int(v) for v in values), decode_text(name)))
    return filters


class SkipFrame(NamedTuple):
    """The fletcher32 checksums (4 bytes each) added to a chunk before a filter ran, and
    after: what a chunk's size is made of besides that filter's output."""

    checksums_before: int
    checksums_after: int


def skip_frame(filters: Sequence[Filter], position: int) -> SkipFrame | None:
    """The checksums around the filter at ``position`` where the size of a chunk tells
    whether the filter was skipped for it: the other filters change sizes predictably
    (shuffle, fletcher32) and it is neither of those."""
    ids = [filter_id for filter_id, _, _ in filters]
    predictable = {_SHUFFLE, _FLETCHER32}
    if ids[position] in predictable or not {*ids[:position], *ids[position + 1 :]} <= predictable:
        return None
    return SkipFrame(ids[:position].count(_FLETCHER32), ids[position + 1 :].count(_FLETCHER32))


def is_szip(pipeline_filter: Filter) -> bool:
    """Whether the filter is szip, whose codec passes a chunk szip skipped through itself."""
    return pipeline_filter[0] == _SZIP


def skippable_filters(filters: Sequence[Filter]) -> int:
    """The filter mask of the filters of a pipeline that chunks may have skipped, HDF5 having
    stored them as the filter got them, and still be read: szip, last in the pipeline or
    followed by fletcher32 only (as h5py orders them), whose codec passes such chunks through
    itself; and any filter whose skipped chunks their size tells apart (:func:`skip_frame`),
    through ``virtualstac.hdf5_optional``.

    Filters are skipped when optional (h5py's deflate and LZF, hdf5plugin's blosc) and they
    fail on a chunk, one they cannot compress.
    """
    mask = 0
    ids = [filter_id for filter_id, _, _ in filters]
    if _SZIP in ids:
        szip = len(ids) - 1 - ids[::-1].index(_SZIP)
        if set(ids[szip + 1 :]) <= {_FLETCHER32}:
            mask |= 1 << szip
    for position in range(len(filters)):
        if skip_frame(filters, position) is not None:
            mask |= 1 << position
    return mask


def codecs_for_filters(
    filters: Sequence[Filter], skipped: Mapping[int, int] | None = None
) -> list[dict[str, Any]]:
    """The zarr v3 bytes-to-bytes codecs for an HDF5 pipeline of ``(id, cd_values, name)``.

    ``skipped`` maps the positions of filters some chunks skipped to the size of such a chunk
    when the filter would have got it; their codecs pass chunks of that size through.
    """
    codecs = []
    for position, (filter_id, cd_values, name) in enumerate(filters):
        if filter_id == _NBIT and len(cd_values) > 1 and cd_values[1] == 1:
            continue  # every value has all its bits: nbit stored them as they are
        if filter_id == _SHUFFLE and _leaves_partial_values(filters[:position], cd_values):
            codec = HDF5ShuffleCodec(elementsize=_first(cd_values, 1)).to_dict()
        else:
            codec = codec_for_filter(filter_id, cd_values, name)
        if skipped and position in skipped:
            codec = HDF5OptionalCodec(size=skipped[position], codec=codec).to_dict()
        codecs.append(codec)
    return codecs
