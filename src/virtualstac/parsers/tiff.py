"""TIFF / GeoTIFF / COG parser: tiles or strips become chunk references, headers are all we read.

Layout of the output
--------------------
The root group holds the image of one IFD (the first by default), every reduced-resolution
IFD that follows it (and its SubIFDs) becomes a sub-group ``overview_1``, ``overview_2``, ...
in GDAL's order, so ``overview_<n + 1>`` is rasterio's ``overview_level=n`` (see
:mod:`virtualstac.parsers.tiff_overviews`). Each group holds, like
``rioxarray.open_rasterio(...).to_dataset("band_data")``:

``band_data (band, y, x)``
    The pixels: one chunk per tile or strip, or per block of its rows for uncompressed strips
    and tiles above ``max_chunk_bytes`` (:mod:`virtualstac.parsers.tiff_row_blocks`).
    Band-interleaved (planar) files have band chunks of 1. Pixel-interleaved (chunky) files
    store all samples of a pixel together, so a chunk holds every band; a ``transpose`` codec
    (zarr v3 spec) turns the stored ``(y, x, band)`` tile into the ``(band, y, x)`` chunk. With
    ``band_layout="native"`` chunky files are exposed as ``(y, x, band)`` without the
    transpose, which zarr v2 / Kerchunk can also express.
``band (band)``, ``x (x)``, ``y (y)``
    Band numbers from 1 and pixel-centre coordinates (as rioxarray computes them), inlined.
    x and y exist only for georeferenced rasters that rioxarray takes for unrotated.
``spatial_ref ()``
    The CF grid mapping (``crs_wkt``, ``spatial_ref``, ``GeoTransform`` and the CF projection
    parameters), inlined; ``band_data`` names it in ``grid_mapping`` and ``coordinates``.
``mask (y, x)``
    GDAL's internal mask, if any (:mod:`virtualstac.parsers.tiff_masks`).

The GDAL nodata value, rounded to the band type as GDAL rounds it, becomes the zarr
``fill_value`` and the CF ``_FillValue`` (for complex bands the nodata value plus 0j: CF readers
mask that value, where GDAL masks every pixel whose real part is the nodata value); tiles that
were never written (offset or byte count 0, e.g. GDAL ``SPARSE_OK=TRUE``) are missing chunks and
read as the fill value, as GDAL reads them. Integer bands mask their nodata truncated (7.5: 7),
one beyond their range (300 for bytes) nothing, but fill with it rounded (8, 255). 64-bit
integer bands take the leading integer of the nodata text, as GDAL parses it.
GDAL's other metadata (``tags()``, ``tags(bidx)``) becomes attributes (:mod:`.tiff_tags`).
GDAL band scales and offsets (``GDAL_METADATA``) become CF
``scale_factor``/``add_offset``; when they differ between the bands of a band-interleaved
image, each band is its own ``(y, x)`` variable ``band_data_1``, ``band_data_2``, ... (see
:mod:`virtualstac.parsers.tiff_bands`). Overviews inherit the full image's nodata and scales.

Codecs
------
Encode order: ``transpose`` (chunky, band-first only), the predictor (``imagecodecs_delta`` /
``imagecodecs_floatpred``), ``bytes`` (the file's byte order: libtiff swaps samples to it before
any compression, LERC's included), ``imagecodecs_packints`` for samples of fewer bits than
their type (GDAL ``NBITS``, bilevel images) or ``virtualstac.complex_int`` for complex integer
ones (CInt16 and CInt32, read as complex64 and complex128; both in
:mod:`virtualstac.parsers.tiff_samples`), ``virtualstac.pad`` (only for a short last strip
or short bottom tiles), then the decompressor:
``numcodecs.zlib`` (deflate), ``numcodecs.lzma``, or one of :mod:`virtualstac.codecs`
(LZW, PackBits, Zstandard, JPEG with its JPEGTables and colour space, LERC plus its optional
deflate/zstd layer, WebP).

Anything that cannot be expressed this way raises :class:`UnsupportedTIFFError` naming the file
and the reason: packed or complex integer samples that are differenced or JPEG-, LERC- or
WebP-compressed, packed samples that are signed or wider than 32 bits, 24-bit samples of
big-endian files, other sample sizes without a Zarr data type (40 or 48 bits), samples of
different sizes, bit-reversed fill order, YCbCr without
JPEG (subsampled, or 8-bit, which GDAL reads converted to RGB), 8-bit CMYK and CIELab (which
GDAL reads converted to RGBA), old-style JPEG, 12-bit JPEG, WebP of band-interleaved samples,
unknown compressions and predictors, horizontal differencing of big-endian or 128-bit complex
samples, volumes, band scales that differ within a chunk, uncompressed tiles shorter than
their rows, compressed segments without byte counts (or an only strip's count of 0, which GDAL
estimates from the file's size).
Compressed tiles or strips that decode to more than ``chunk_bytes`` (limits) raise
:class:`~virtualstac.errors.LimitExceededError`.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Sequence
from typing import IO, Any, Literal, cast

import numpy as np
import numpy.typing as npt
import tifffile

from virtualstac import limits
from virtualstac.codecs import (
    FloatPredictorCodec,
    HorizontalPredictorCodec,
    PadCodec,
)
from virtualstac.errors import CorruptFileError, NotVirtualizableError, UnknownFormatError
from virtualstac.limits import check_references, counting_references, fits_in_memory
from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.manifest import ChunkManifest
from virtualstac.manifests.metadata import cf_fill_value_attribute, create_v3_array_metadata
from virtualstac.manifests.sources import SourceStamp
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.corrupt import quiet_logger, reading
from virtualstac.parsers.protocol import registry_or_default
from virtualstac.parsers.tiff_bands import (
    BandMetadata,
    SharedChunksError,
    band_variables,
    nodata_value,
    unwritten_value,
)
from virtualstac.parsers.tiff_colour import converted_by_gdal
from virtualstac.parsers.tiff_compression import UnsupportedCompressionError, tiff_compressors
from virtualstac.parsers.tiff_geo import (
    GeoReference,
    georeference,
    geotiff_tags,
    pixel_is_point,
    rational_polynomials,
    ungridded_reference,
)
from virtualstac.parsers.tiff_masks import MASK_VARIABLE, mask_pages, with_mask
from virtualstac.parsers.tiff_overviews import overview_group_name, overview_pages
from virtualstac.parsers.tiff_row_blocks import DEFAULT_MAX_CHUNK_BYTES, block_rows, split_segments
from virtualstac.parsers.tiff_samples import (
    SampleTypeError,
    complex_differencing_refusal,
    read_type,
    sample_codecs,
)
from virtualstac.parsers.tiff_segments import (
    SegmentIndexError,
    ShortSegmentError,
    pads_bottom_segments,
    segment_references,
)
from virtualstac.storage.reader import BlockCachedReader
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import normalize_url

__all__ = ["TIFFParser", "UnsupportedTIFFError"]

#: Bytes read from the start of the file on open: a COG keeps every IFD there, so a typical
#: COG header costs one request (GDAL's /vsicurl/ reads the same 64 KiB first).
DEFAULT_PREFETCH = 64 * 1024
DEFAULT_BLOCK_SIZE = 64 * 1024

BandLayout = Literal["band_first", "native"]

_JSON = dict[str, Any]

_PLANAR_SEPARATE = 2
#: LZW, deflate (both codes), LZMA, Zstandard: the codecs libtiff undoes a predictor in.
_PREDICTED_COMPRESSIONS = frozenset({5, 8, 32946, 34925, 50000})
_BYTE_ORDER_MARKS = (b"II", b"MM")


class UnsupportedTIFFError(NotVirtualizableError):
    """A TIFF's pixels cannot be expressed as references to its chunks with zarr codecs."""


class TIFFParser:
    """Parse a TIFF, GeoTIFF or Cloud-Optimized GeoTIFF into a :class:`ManifestStore`.

    Parameters
    ----------
    ifd
        Index of the top-level IFD whose image becomes the root group.
    overviews
        Add the reduced-resolution IFDs after it (and its SubIFDs) as ``overview_<n>`` groups.
    band_layout
        ``"band_first"``: ``band_data`` is ``(band, y, x)`` for every file. ``"native"``:
        pixel-interleaved files keep their stored ``(y, x, band)`` order (no transpose codec).
    variable
        Name of the pixel variable.
    short_tiles
        Pad the bottom row of tiles to whole tiles when the image ends inside it: for writers
        that store only the rows inside the image there (GDAL and tifffile store whole tiles;
        GDAL reads both). Uncompressed short tiles are recognised by their byte counts and
        PackBits bottom tiles are padded without this; other compressed ones cannot be
        measured without reading them.
    max_chunk_bytes
        Uncompressed strips or tiles larger than this are referenced as several chunks of
        whole rows, so that a window reads only its rows; 4 MiB by default.
    prefetch, block_size
        Header reads: bytes fetched on open, and the granularity of later reads.

    Examples
    --------
    >>> store = TIFFParser()("s3://bucket/scene.tif", registry)  # doctest: +SKIP
    >>> xr.open_zarr(store)["band_data"]  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        ifd: int = 0,
        overviews: bool = True,
        band_layout: BandLayout = "band_first",
        variable: str = "band_data",
        short_tiles: bool = False,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
        prefetch: int = DEFAULT_PREFETCH,
        block_size: int = DEFAULT_BLOCK_SIZE,
    ) -> None:
        if band_layout not in ("band_first", "native"):
            raise ValueError(f"band_layout must be 'band_first' or 'native', got {band_layout!r}")
        reserved = ("band", "x", "y", "spatial_ref", MASK_VARIABLE)
        if variable in reserved or not variable or "/" in variable:
            raise ValueError(f"variable name {variable!r} is reserved or invalid")
        if max_chunk_bytes <= 0:
            raise ValueError("max_chunk_bytes must be positive")
        self.ifd = int(ifd)
        self.overviews = bool(overviews)
        self.band_layout: BandLayout = band_layout
        self.variable = variable
        self.short_tiles = bool(short_tiles)
        self.max_chunk_bytes = int(max_chunk_bytes)
        self.prefetch = int(prefetch)
        self.block_size = int(block_size)

    def __repr__(self) -> str:
        return (
            f"TIFFParser(ifd={self.ifd}, overviews={self.overviews}, "
            f"band_layout={self.band_layout!r}, variable={self.variable!r})"
        )

    def __call__(self, url: str, registry: ObjectStoreRegistry | None = None) -> ManifestStore:
        """Read the TIFF headers at ``url`` through ``registry`` and return its virtual store.

        Without a registry, reads are allowed from the file's directory or bucket only.
        """
        registry = registry_or_default(url, registry)
        chunk_url = normalize_url(url)
        reader = BlockCachedReader.from_url(
            url, registry, block_size=self.block_size, prefetch=self.prefetch
        )
        # tifffile logs the IFDs it cannot read; the damage they mean is raised instead.
        with reader, quiet_logger("tifffile"):
            with reading(url, "its IFD chain"):
                try:
                    tif = tifffile.TiffFile(cast(IO[bytes], reader))
                except tifffile.TiffFileError as err:
                    reader.seek(0)
                    if reader.read(2) in _BYTE_ORDER_MARKS:
                        # A TIFF header whose IFDs tifffile cannot follow: a damaged TIFF.
                        raise CorruptFileError(
                            f"{url} is damaged: its first IFD cannot be read ({err})"
                        ) from err
                    raise UnknownFormatError(f"{url!r} is not a readable TIFF file: {err}") from err
            tif.pages.cache = True  # overviews and masks are found in the same IFDs: parse once
            with tif, reading(url, "its IFDs and tags"), counting_references():
                group = self._parse(tif, url, chunk_url, reader.size)
        if reader.meta is not None:
            group = group.with_source_stamps({chunk_url: SourceStamp.from_meta(reader.meta)})
        return ManifestStore(group, registry=registry)

    def _parse(
        self, tif: tifffile.TiffFile, url: str, chunk_url: str, file_size: int
    ) -> ManifestGroup:
        if not tif.pages:
            raise CorruptFileError(
                f"{url} is damaged: its first IFD cannot be read (the file ends before it or "
                "inside it, or the header's offset to it is wrong)"
            )
        if not 0 <= self.ifd < len(tif.pages):
            raise UnsupportedTIFFError(
                f"{url}: IFD {self.ifd} does not exist; the file has {len(tif.pages)} IFDs"
            )
        main = tif.pages[self.ifd]
        if not isinstance(main, tifffile.TiffPage):
            raise UnsupportedTIFFError(f"{url}: IFD {self.ifd} could not be read as a page")
        tags = geotiff_tags(main)
        geo = georeference(tags)
        rpcs = rational_polynomials(main, url)  # beside a transform too: they are more exact
        crs_attributes = {**geo.crs_attributes(), **rpcs} if geo is not None else {}
        bands = BandMetadata.of_page(main, url)
        builder = _ImageBuilder(main, tif.byteorder, url, chunk_url, self, bands, file_size)
        control = ungridded_reference(tags, rpcs)
        root = builder.build(geo, crs_attributes, control, pixel_is_point(tags))
        masks, parser = mask_pages(tif, main), copy.copy(self)
        parser.variable = MASK_VARIABLE  # errors and limits name the mask

        def mask_pixels(mask: tifffile.TiffPage) -> ManifestArray:
            empty = BandMetadata(None, None)
            args = (tif.byteorder, url, chunk_url, parser, empty, file_size)
            return _ImageBuilder(mask, *args)._pixels({})

        root = with_mask(root, main, masks, mask_pixels)
        if not self.overviews:
            return root
        groups: dict[str, ManifestGroup] = {}
        for level, page in enumerate(overview_pages(tif, main)):
            page_geo = (
                geo.scaled(main.imagewidth, main.imagelength, page.imagewidth, page.imagelength)
                if geo is not None
                else None
            )
            # GDAL's overviews take the full image's nodata and scales, unless they have their own.
            page_bands = BandMetadata.of_page(page, url).or_else(bands)
            builder = _ImageBuilder(
                page, tif.byteorder, url, chunk_url, self, page_bands, file_size
            )
            overview = builder.build(page_geo, crs_attributes)
            groups[overview_group_name(level)] = with_mask(overview, page, masks, mask_pixels)
        return ManifestGroup(arrays=root.arrays, groups=groups, attributes=root.metadata.attributes)


class _ImageBuilder:
    """Turns one TIFF page into a group of ``band_data`` and its coordinates."""

    def __init__(
        self,
        page: tifffile.TiffPage,
        byteorder: str,
        url: str,
        chunk_url: str,
        parser: TIFFParser,
        bands: BandMetadata,
        file_size: int,
    ) -> None:
        self.page = page
        self.file_size = file_size
        self.byteorder = byteorder
        self.url = url
        self.chunk_url = chunk_url
        self.parser = parser
        self.bands = bands
        self.nodata = bands.nodata

    def fail(self, reason: str) -> UnsupportedTIFFError:
        where = f"IFD {self.page.index}, {self.parser.variable}"
        return UnsupportedTIFFError(f"{self.url} ({where}): {reason}")

    # -- pixel variable -------------------------------------------------------------------

    def build(
        self,
        geo: GeoReference | None,
        crs_attributes: dict[str, Any],
        control: dict[str, Any] | None = None,
        point: bool = False,
    ) -> ManifestGroup:
        """The group of this page: pixels, band numbers, and georeferencing if any (an affine
        transform, or ``control``: the ``spatial_ref`` of ground control points, of a
        ``PixelIsPoint`` raster if ``point``)."""
        page = self.page
        samples = int(page.samplesperpixel)
        arrays: dict[str, ManifestArray] = {}
        attributes: dict[str, Any] = {}
        if control is not None:
            # No transform gives x/y; the points say where pixels lie (rioxarray does so).
            attributes["grid_mapping"] = attributes["coordinates"] = "spatial_ref"
            attributes["AREA_OR_POINT"] = "Point" if point else "Area"
            arrays["spatial_ref"] = _inlined(np.array(0, dtype=np.int64), (), control)
        if geo is not None:
            attributes["grid_mapping"] = "spatial_ref"
            attributes["coordinates"] = "spatial_ref"
            attributes["AREA_OR_POINT"] = "Point" if geo.pixel_is_point else "Area"
            spatial_ref = {**crs_attributes, "GeoTransform": geo.geotransform_text}
            arrays["spatial_ref"] = _inlined(np.array(0, dtype=np.int64), (), spatial_ref)
            if geo.is_rectilinear:
                # Coordinates too big to hold are left to the GeoTransform: the virtual dataset
                # computes them lazily (manifests/geotransform.py).
                x_attrs, y_attrs = geo.coordinate_attributes()
                if fits_in_memory(8 * page.imagewidth):
                    arrays["x"] = _inlined(geo.x_coords(page.imagewidth), ("x",), x_attrs)
                if fits_in_memory(8 * page.imagelength):
                    arrays["y"] = _inlined(geo.y_coords(page.imagelength), ("y",), y_attrs)
        variable, packings = self.parser.variable, self.bands.packing_of_bands(samples)
        attributes.update(self.bands.text_attributes())
        if len(set(packings)) == 1:
            # GDAL's tags first: what the file's georeferencing, nodata and bands say wins.
            attributes = {**self.bands.tag_attributes(), **attributes}
            attributes.update(packings[0].attributes())
            arrays["band"] = _inlined(np.arange(1, samples + 1, dtype=np.int64), ("band",), {})
            arrays[variable] = self._pixels(attributes)
        else:
            pixels = self._pixels(attributes)
            tags = [self.bands.tag_attributes([n]) for n in range(samples)]
            try:
                arrays.update(band_variables(pixels, packings, variable, tags))
            except SharedChunksError as err:
                raise self.fail(str(err)) from err
        return ManifestGroup(arrays=arrays)

    def _pixels(self, attributes: dict[str, Any]) -> ManifestArray:
        page = self.page
        dtype = self._dtype()
        height, width = int(page.imagelength), int(page.imagewidth)
        samples = int(page.samplesperpixel)
        planar = page.planarconfig == _PLANAR_SEPARATE or samples == 1
        if page.is_tiled:
            segment_h, chunk_w = int(page.tilelength), int(page.tilewidth)
        else:
            segment_h, chunk_w = min(int(page.rowsperstrip), height), width
        planes = samples if planar else 1
        chunk_samples = 1 if planar else samples
        bits = int(page.bitspersample)
        # Stored rows start on a byte, even when their samples are packed bits.
        row_bytes = math.ceil(chunk_w * chunk_samples * bits / 8)
        decoded_row_bytes = chunk_w * chunk_samples * dtype.itemsize
        ceiling = limits.get_limits().chunk_bytes
        target = min(self.parser.max_chunk_bytes, ceiling)
        chunk_h = block_rows(page, segment_h, decoded_row_bytes, target, ceiling)
        grid_y, grid_x = math.ceil(height / chunk_h), math.ceil(width / chunk_w)
        stored_shape = (chunk_h, chunk_w, chunk_samples) if not planar else (1, chunk_h, chunk_w)

        codecs: list[_JSON] = []
        if planar:
            shape, chunks = (samples, height, width), (1, chunk_h, chunk_w)
            dims, grid = ("band", "y", "x"), (planes, grid_y, grid_x)
            x_axis = -1
        elif self.parser.band_layout == "native":
            shape, chunks = (height, width, samples), (chunk_h, chunk_w, samples)
            dims, grid = ("y", "x", "band"), (grid_y, grid_x, 1)
            x_axis = -2
        else:
            shape, chunks = (samples, height, width), (samples, chunk_h, chunk_w)
            dims, grid = ("band", "y", "x"), (1, grid_y, grid_x)
            x_axis = -2
            codecs.append({"name": "transpose", "configuration": {"order": [1, 2, 0]}})

        try:
            compressors = tiff_compressors(page)
        except UnsupportedCompressionError as err:
            raise self.fail(str(err)) from err
        codecs.extend(self._predictor(dtype, stored_shape, x_axis))
        endian = "little" if self.byteorder == "<" else "big"
        codecs.append({"name": "bytes", "configuration": {"endian": endian}})
        file_dtype = dtype.newbyteorder("<" if self.byteorder == "<" else ">").str
        size = chunk_h * row_bytes
        codecs.extend(sample_codecs(page, file_dtype, chunk_w * chunk_samples))
        where = f"{self.url} (IFD {page.index}, {self.parser.variable})"
        # A read decodes whole chunks.
        limits.check_chunk_bytes(chunk_h * decoded_row_bytes, where=where)
        segments = (planes, math.ceil(height / segment_h), grid_x)
        array = f"{self.parser.variable} (IFD {page.index})"
        check_references(math.prod(grid), source=self.url, array=array)
        offsets, lengths = self._segments(segments)
        try:
            pad = pads_bottom_segments(
                page,
                lengths,
                segments,
                segment_h,
                segment_h * row_bytes,
                short_tiles=self.parser.short_tiles,
            )
        except ShortSegmentError as err:
            raise self.fail(str(err)) from err
        manifest = self._manifest(grid, offsets, lengths, segment_h, chunk_h, row_bytes)
        if chunk_h != segment_h:  # blocks of rows (0 bytes: unwritten): the last may be fewer
            pad = bool(((manifest.lengths > 0) & (manifest.lengths < size)).any())
        if pad:
            codecs.append(PadCodec(size=size).to_dict())
        codecs.extend(compressors)

        fill_value = self._fill_value(dtype)
        if fill_value is not None:
            attributes["_FillValue"] = cf_fill_value_attribute(fill_value, dtype)
        # What missing chunks read as: GDAL's unwritten segments, even where nodata masks nothing.
        unwritten = None if self.nodata is None else unwritten_value(self.nodata, dtype)
        metadata = create_v3_array_metadata(
            shape=shape,
            data_type=dtype,
            chunk_shape=chunks,
            fill_value=unwritten,
            codecs=codecs,
            attributes=attributes,
            dimension_names=dims,
        )
        return ManifestArray(metadata, manifest)

    def _dtype(self) -> np.dtype[Any]:
        page = self.page
        if page.imagedepth > 1 or page.tiledepth > 1:
            raise self.fail("volumetric (ImageDepth > 1) images are not supported")
        dtype = page.dtype
        bits = page.bitspersample
        if not isinstance(bits, int):
            raise self.fail(
                f"its samples have different sizes (BitsPerSample {', '.join(map(str, bits))}), "
                "and one array has one data type"
            )
        if page.compression == 7 and bits != 8:
            # Before the packing check: 12-bit JPEG samples are not packed, but decoded.
            raise self.fail(f"{bits}-bit JPEG is not supported, only 8-bit")
        try:
            read_as = read_type(page, bits, self.byteorder)
        except SampleTypeError as err:
            raise self.fail(str(err)) from err
        if read_as is not None:
            dtype = read_as
        elif dtype is None or dtype.kind not in "iufc" or bits != dtype.itemsize * 8:
            raise self.fail(
                f"{bits}-bit samples of SampleFormat {int(page.sampleformat)} have no Zarr data "
                "type (integers and floats have 8, 16, 32 or 64 bits)"
            )
        if page.fillorder != 1:
            raise self.fail("bit-reversed fill order (FillOrder 2) is not supported")
        converted = converted_by_gdal(page)
        if converted is not None:
            raise self.fail(converted)
        # Rebuilt from its type string: tifffile's uint64 is numpy's 'Q' (unsigned long long),
        # which zarr's data types do not match; 'u8' is numpy's canonical uint64.
        return np.dtype(np.dtype(dtype).newbyteorder("=").str)

    def _predictor(
        self, dtype: np.dtype[Any], stored_shape: tuple[int, ...], x_axis: int
    ) -> list[_JSON]:
        predictor = int(self.page.predictor)
        if predictor == 1 or int(self.page.compression) not in _PREDICTED_COMPRESSIONS:
            return []  # libtiff, and so GDAL, ignores the tag elsewhere
        file_dtype = dtype.newbyteorder("<" if self.byteorder == "<" else ">").str
        if predictor == 2 and dtype.kind == "c":
            refused = complex_differencing_refusal(dtype, self.byteorder)
            if refused is not None:
                raise self.fail(refused)
        if predictor == 2:
            codec: HorizontalPredictorCodec | FloatPredictorCodec = HorizontalPredictorCodec(
                axis=x_axis, shape=stored_shape, dtype=file_dtype
            )
        elif predictor == 3:
            if dtype.kind != "f":
                raise self.fail(f"floating-point predictor on {dtype} samples is not supported")
            codec = FloatPredictorCodec(axis=x_axis, shape=stored_shape, dtype=file_dtype)
        else:
            raise self.fail(f"predictor {predictor} is not supported (only 1, 2 and 3)")
        return [codec.to_dict()]

    def _fill_value(self, dtype: np.dtype[Any]) -> int | float | None:
        if self.nodata is None:
            return None
        value = nodata_value(self.nodata, dtype)
        if value is None:
            unwritten = unwritten_value(self.nodata, dtype)
            warnings.warn(
                f"{self.url}: nodata {self.nodata} does not fit {dtype}; it masks nothing, and "
                f"unwritten tiles or strips read as {unwritten or 0}, as in GDAL",
                RuntimeWarning,
                stacklevel=5,
            )
        return value

    # -- chunk references -----------------------------------------------------------------

    def _segments(
        self, segments: tuple[int, int, int]
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
        """The offsets and byte counts of the ``segments`` (planes, rows, columns of tiles or
        strips)."""
        try:
            offsets, lengths = segment_references(
                self.page, self.url, self.file_size, math.prod(segments)
            )
        except SegmentIndexError as err:
            raise self.fail(str(err)) from err
        return offsets.reshape(segments), lengths.reshape(segments)

    def _manifest(
        self,
        grid: tuple[int, ...],
        offsets: npt.NDArray[np.uint64],
        lengths: npt.NDArray[np.uint64],
        segment_rows: int,
        rows: int,
        row_bytes: int,
    ) -> ChunkManifest:
        """References of the chunks of ``grid``: the segments (planes, rows, columns of tiles
        or strips of ``segment_rows``) at ``offsets``, or blocks of ``rows`` cut from them."""
        page = self.page
        if rows != segment_rows:
            offsets, lengths = split_segments(
                offsets,
                lengths,
                segment_rows=segment_rows,
                rows=rows,
                row_bytes=row_bytes,
                image_rows=int(page.imagelength),
            )
        # A segment that was never written has offset 0 or byte count 0 (GDAL SPARSE_OK): TIFF
        # defines it as missing, read as the nodata value. Elsewhere a zero length is an error.
        sparse = (offsets == 0) | (lengths == 0)
        return ChunkManifest.from_path_table(
            path_table=["", self.chunk_url],
            path_codes=np.where(sparse, 0, 1).astype(np.uint8).reshape(grid),
            offsets=offsets.reshape(grid),
            lengths=lengths.reshape(grid),
            validate_paths=False,
        )


def _inlined(
    values: npt.NDArray[Any], dims: Sequence[str], attributes: dict[str, Any]
) -> ManifestArray:
    """A small array held in the manifest itself, as one little-endian chunk."""
    values = np.asarray(values, dtype=values.dtype.newbyteorder("<"), order="C")
    metadata = create_v3_array_metadata(
        shape=values.shape,
        data_type=values.dtype,
        chunk_shape=values.shape,
        attributes=attributes,
        dimension_names=dims,
    )
    return ManifestArray(
        metadata, ChunkManifest.from_inlined_chunk(values.tobytes(), (1,) * values.ndim)
    )
