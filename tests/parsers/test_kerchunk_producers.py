"""References from kerchunk producers the interop tests do not cover: GDAL GeoTIFFs through
``kerchunk.tiff``, and what ``kerchunk.hdf`` writes for HDF5 types its references cannot
describe, which must fail naming the file and the reason rather than read wrong values.
"""

from __future__ import annotations

import json
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import rasterio
import zarr
from kerchunk_refs import SIMPLE_ZARRAY, hdf5_refs, kerchunk, write_refs
from peer_reads import loaded
from rasterio.transform import from_origin

from virtualstac import open_virtual_dataset
from virtualstac.errors import ChunkDecodeError
from virtualstac.parsers.zarr_v2 import V2MetadataError
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.xarray import open_zarr_dataset

pytestmark = [
    pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning"),
    pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]


def registry_of(directory: Path) -> ObjectStoreRegistry:
    registry = ObjectStoreRegistry()
    registry.register(directory.as_uri() + "/")
    return registry


@pytest.mark.parametrize(
    "layout",
    [
        {"interleave": "pixel", "compress": "lzw", "predictor": 2},
        {"interleave": "band", "compress": "deflate"},
    ],
)
@pytest.mark.parametrize("inline_threshold", [0, 100_000])
def test_kerchunk_tiff_of_a_gdal_geotiff_reads_as_fsspec_does(
    tmp_path: Path, layout: dict[str, object], inline_threshold: int
) -> None:
    bands = np.random.default_rng(4).integers(1, 1000, (2, 40, 36)).astype("i2")
    tiff = tmp_path / "scene.tif"
    profile = {"driver": "GTiff", "width": 36, "height": 40, "count": 2, "dtype": "int16"}
    with rasterio.open(
        tiff,
        "w",
        **profile,
        crs="EPSG:4326",
        transform=from_origin(10, 50, 0.1, 0.1),
        tiled=True,
        blockxsize=16,
        blockysize=16,
        **layout,
    ) as dst:
        dst.write(bands)
    raw = kerchunk("tiff").tiff_to_zarr(str(tiff), inline_threshold=inline_threshold)
    # Inlined tiles come back as bytes (kerchunk's own target= cannot write them): consolidate
    # makes them text or "base64:" text, as kerchunk's translators return them.
    refs = kerchunk("utils").consolidate(raw)
    tiles = [k for k in refs["refs"] if not k.startswith(".z")]
    inlined = [k for k in tiles if isinstance(refs["refs"][k], str)]
    assert inlined == (tiles if inline_threshold else [])
    references = tmp_path / "scene.json"
    references.write_text(json.dumps(refs))
    # A root array, as tifffile writes it: pixel-interleaved as (y, x, band), else (band, y, x).
    expected = zarr.open_array("reference://", mode="r", storage_options={"fo": refs})[...]
    pixel = layout["interleave"] == "pixel"
    np.testing.assert_array_equal(expected, np.moveaxis(bands, 0, -1) if pixel else bands)
    registry = registry_of(tmp_path)
    virtual = open_virtual_dataset(str(references), registry=registry)
    ours = open_zarr_dataset(virtual.virtual.to_store(registry), chunks={})["scene"]
    assert ours.dims == (("Y", "X", "S") if pixel else ("S", "Y", "X"))
    # fill_value 0 masks a v2 array as xarray masks it, so values are floats: no pixel is 0.
    np.testing.assert_array_equal(ours.values, expected.astype("f4"), strict=True)
    assert (
        ours.attrs["GTModelTypeGeoKey"] == json.loads(refs["refs"][".zattrs"])["GTModelTypeGeoKey"]
    )


def test_netcdf4_compound_left_by_kerchunk_without_its_padding_names_the_chunk(
    tmp_path: Path,
) -> None:
    # netCDF-4 aligns a compound's fields as C does: (int32, float64) takes 16 bytes. kerchunk
    # describes it packed, 12 bytes, so a 3-element chunk of 48 bytes cannot be 3 records.
    # fsspec fails with a bare reshape error; virtualstac names the chunk and the file.
    source = tmp_path / "pairs.nc"
    pair = np.dtype([("station", "<i4"), ("level", "<f8")])
    with netCDF4.Dataset(source, "w") as ds:
        ds.createDimension("n", 3)
        compound = ds.createCompoundType(pair, "pair_t")
        ds.createVariable("pairs", compound, ("n",))[:] = np.array(
            [(1, 1.5), (2, 2.5), (3, 3.5)], dtype=pair
        )
    refs = hdf5_refs(source, inline_threshold=0, vlen_encode="leave")
    assert json.loads(refs["refs"]["pairs/.zarray"])["dtype"] == [
        ["station", "<i4"],
        ["level", "<f8"],
    ]
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps(refs))
    with pytest.raises(ChunkDecodeError, match=r"chunk 'pairs/c/0' \(48 bytes .*pairs\.nc"):
        loaded(path, registry_of(tmp_path))


def test_kerchunk_string_codec_is_refused_naming_the_array(tmp_path: Path) -> None:
    # kerchunk 0.2 on zarr 2 writes variable-length HDF5 strings with vlen_encode="encode" as
    # 16-byte heap ids and its own FillStringsCodec, which maps them to the strings.
    strings = {
        "zarr_format": 2,
        "shape": [2],
        "chunks": [2],
        "dtype": "|O",
        "fill_value": " ",
        "order": "C",
        "compressor": None,
        "filters": [{"id": "fill_hdf_strings", "dtype": "S16", "id_map": {"a": "x", "b": "y"}}],
    }
    path = write_refs(
        tmp_path,
        {
            "version": 1,
            "refs": {
                ".zgroup": '{"zarr_format": 2}',
                "names/.zarray": json.dumps(strings),
                "names/.zattrs": '{"_ARRAY_DIMENSIONS": ["n"]}',
                "names/0": ["data.h5", 0, 32],
                "v/.zarray": SIMPLE_ZARRAY,
                "v/.zattrs": '{"_ARRAY_DIMENSIONS": ["x"]}',
            },
        },
        "strings.json",
    )
    registry = registry_of(tmp_path)
    refused = r"strings\.json: array 'names': object dtype with object codec 'fill_hdf_strings'"
    with pytest.raises(V2MetadataError, match=refused):
        open_virtual_dataset(str(path), registry=registry)
    others = open_virtual_dataset(str(path), registry=registry, drop_variables=["names"])
    assert list(others) == ["v"]
