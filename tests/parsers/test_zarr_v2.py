"""The Zarr v2 translation the Zarr and Kerchunk parsers share: keys zarr would not read, and
metadata that must be refused before it reaches zarr or xarray."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr
from kerchunk_refs import SIMPLE_ZARRAY, open_fsspec, open_ours, parse_json, write_refs
from zarr.core.dtype import VariableLengthBytes

from virtualstac import open_virtual_datatree
from virtualstac.errors import InvalidManifestError, LimitExceededError
from virtualstac.limits import limits
from virtualstac.parsers.zarr import ZarrParser
from virtualstac.parsers.zarr_v2 import V2MetadataError
from virtualstac.storage.registry import ObjectStoreRegistry

pytestmark = [
    pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning"),
    # fsspec's reference filesystem reads the Zarr v2 side of the comparison.
    pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]

ZGROUP = json.dumps({"zarr_format": 2})
DIMS = json.dumps({"_ARRAY_DIMENSIONS": ["x"]})


# -- chunk keys ----------------------------------------------------------------------------


def test_keys_of_non_ascii_digits_are_not_chunks(tmp_path: Path) -> None:
    data = tmp_path / "data.bin"
    data.write_bytes(np.arange(64, dtype="<i4").tobytes())
    references = {
        ".zgroup": ZGROUP,
        "v/.zarray": SIMPLE_ZARRAY,
        "v/.zattrs": DIMS,
        "v/0": [str(data), 0, 8],
        "v/\uff10": [str(data), 40, 8],  # a fullwidth zero
        "v/\u00b2": [str(data), 48, 8],  # a superscript two, which int() refuses
    }
    path = write_refs(tmp_path, references)
    ours = open_ours(parse_json(path))["v"].values
    expected = open_fsspec(str(path))["v"].values
    np.testing.assert_array_equal(ours, expected)
    assert ours[:2].tolist() == [0, 1]


def test_store_objects_named_by_non_ascii_digits_are_not_chunks(tmp_path: Path) -> None:
    path = tmp_path / "v2.zarr"
    array = zarr.create_array(
        path, shape=(4,), chunks=(2,), dtype="u1", zarr_format=2, fill_value=0, compressors=None
    )
    array[:2] = [1, 2]
    (path / "\uff11").write_bytes(bytes([7, 7]))  # a fullwidth one, where chunk 1 is missing
    store = ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    values = zarr.open_group(store, mode="r")["v2"][...]
    assert values.tolist() == zarr.open_array(path, mode="r")[...].tolist() == [1, 2, 0, 0]


# -- the hierarchy -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["../v/.zarray", "./v/.zarray", "v/../.zarray", "a//v/.zarray", "/v/.zarray"]
)
def test_keys_with_empty_or_dot_segments_are_refused(tmp_path: Path, key: str) -> None:
    # zarr cannot list such a node, and a tree holding it would be written outside its target.
    references = {".zgroup": ZGROUP, "v/.zarray": SIMPLE_ZARRAY, key: SIMPLE_ZARRAY}
    path = write_refs(tmp_path, references)
    message = rf"bad\.json: key '{re.escape(key)}' has an empty, '\.' or '\.\.' path segment"
    with pytest.raises(V2MetadataError, match=message):
        parse_json(path)
    with pytest.raises(V2MetadataError, match=message):
        open_virtual_datatree(str(path))


@pytest.mark.parametrize(
    ("references", "error", "match"),
    [
        ({"v/.zarray": "[1, 2]"}, V2MetadataError, r"v/\.zarray is not a JSON object"),
        (
            {"v/.zarray": SIMPLE_ZARRAY, "v/.zgroup": ZGROUP},
            InvalidManifestError,
            r"group '/': names used by both an array and a group: \['v'\]",
        ),
    ],
)
def test_errors_of_the_hierarchy_name_the_file(
    tmp_path: Path, references: dict[str, str], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=rf"bad\.json: {match}"):
        parse_json(write_refs(tmp_path, references))


# -- sizes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "decoded"),
    [("|V1000000000", "4,000,000,000"), ("|S2000000000", "8,000,000,000"), ("<f8", "8,000")],
)
def test_chunks_decoding_beyond_chunk_bytes_are_refused(
    tmp_path: Path, dtype: str, decoded: str
) -> None:
    # Before zarr builds a fill value: an element of "|V2000000000" alone is two gigabytes.
    chunks = [4] if dtype[1] in "VS" else [1000]
    zarray = {**json.loads(SIMPLE_ZARRAY), "dtype": dtype, "shape": chunks, "chunks": chunks}
    path = write_refs(tmp_path, {".zgroup": ZGROUP, "v/.zarray": json.dumps(zarray)})
    with (
        limits(chunk_bytes=4096),
        pytest.raises(
            LimitExceededError,
            match=rf"bad\.json: array 'v': each chunk decodes to {decoded} bytes",
        ),
    ):
        parse_json(path)


@pytest.mark.parametrize(
    ("shape", "chunks"), [([2**70], [2**70]), ([2**40, 2**40], [2**40, 2**40]), ([4], [2**64])]
)
def test_shapes_beyond_int64_are_refused(
    tmp_path: Path, shape: list[int], chunks: list[int]
) -> None:
    # numpy, zarr and xarray would fail with a raw OverflowError or ValueError when reading.
    zarray = {**json.loads(SIMPLE_ZARRAY), "shape": shape, "chunks": chunks}
    path = write_refs(tmp_path, {".zgroup": ZGROUP, "v/.zarray": json.dumps(zarray)})
    with pytest.raises(V2MetadataError, match=r"bad\.json: array 'v': shape .* than int64 holds"):
        parse_json(path)


# -- object arrays -------------------------------------------------------------------------


def test_vlen_bytes_read_as_zarr_python_reads_them(tmp_path: Path) -> None:
    # zarr-python writes an array of Python bytes objects with the vlen-bytes object codec,
    # which Zarr v3 has as its vlen-bytes serializer and variable_length_bytes data type.
    path = tmp_path / "blobs.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=2)
    blobs = group.create_array(
        "blob", shape=(5,), chunks=(2,), dtype=VariableLengthBytes(), fill_value=b"none"
    )
    blobs.attrs["_ARRAY_DIMENSIONS"] = ["record"]
    blobs[:3] = np.array([b"\x00\xff", b"", b"abc"], dtype=object)  # the last chunk is missing
    assert json.loads((path / "blob" / ".zarray").read_text())["filters"] == [{"id": "vlen-bytes"}]
    store = ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    assert store.group["blob"].metadata.to_dict()["codecs"][0]["name"] == "vlen-bytes"
    values = zarr.open_group(store, mode="r")["blob"][...]
    assert values.tolist() == blobs[...].tolist() == [b"\x00\xff", b"", b"abc", b"none", b"none"]
    opened = xr.open_zarr(store, consolidated=False, chunks=None)["blob"]
    assert opened.dims == ("record",)
    assert opened.values.tolist() == values.tolist()


@pytest.mark.parametrize("order", ["<", ">"])
def test_structured_arrays_read_as_zarr_python_reads_them(tmp_path: Path, order: str) -> None:
    # A record array of a Zarr v2 store (dtype [["station", ">i4"], ...]): its v3 form keeps
    # the fields, one byte order for all of them in the bytes codec; the chunk never written
    # reads as the fill value record.
    records = np.dtype([("station", f"{order}i4"), ("level", f"{order}f8"), ("flag", "S2")])
    path = tmp_path / "records.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=2)
    fill = np.array((-1, np.nan, b"--"), dtype=records)[()]
    observations = group.create_array(
        "obs", shape=(5,), chunks=(2,), dtype=records, fill_value=fill
    )
    observations.attrs["_ARRAY_DIMENSIONS"] = ["record"]
    observations[:3] = np.array([(1, 850.0, b"ok"), (2, 500.5, b""), (3, -1.5, b"x")], records)
    store = ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    ours = zarr.open_group(store, mode="r")["obs"]
    expected = zarr.open_group(path, mode="r")["obs"]
    assert ours.dtype.names == expected.dtype.names
    # Byte for byte (the fill record's NaN never equals itself), in the fields' own order.
    assert ours[...].tobytes() == expected[...].astype(ours.dtype).tobytes()
    assert ours[...].tolist()[3][0] == -1
    opened = xr.open_zarr(store, consolidated=False, chunks=None)["obs"]
    assert opened.dims == ("record",)
    assert opened.values.tolist()[:3] == expected[:3].tolist()


def test_structured_arrays_of_mixed_byte_orders_are_refused(tmp_path: Path) -> None:
    references = {
        ".zgroup": ZGROUP,
        "v/.zarray": json.dumps(
            {**json.loads(SIMPLE_ZARRAY), "dtype": [["a", "<i4"], ["b", ">i4"]]}
        ),
        "v/.zattrs": DIMS,
    }
    path = write_refs(tmp_path, references)
    with pytest.raises(
        V2MetadataError, match=r"array 'v': structured dtype .* mixes little- and big-endian"
    ):
        parse_json(path)


@pytest.mark.parametrize(
    ("dtype", "fill_value"),
    [("<f4", 0.1), ("<f4", -9999.9), ("<f2", 0.1), ("<f4", 1e40), ("<c8", [0.1, 0.2])],
)
def test_fill_values_a_float_type_rounds_mask_as_zarr_rounds_them(
    tmp_path: Path, dtype: str, fill_value: object
) -> None:
    """zarr reads a float32 array's fill value 0.1 as float32 (1e40 as inf), so xarray masks
    the values equal to it; as a float64 0.1 it matched none of them (nor the missing chunk)."""
    fill = complex(*fill_value) if isinstance(fill_value, list) else fill_value
    with np.errstate(over="ignore"):
        written = np.array([fill, 2], dtype=dtype)
    zarray = {**json.loads(SIMPLE_ZARRAY), "dtype": dtype, "fill_value": fill_value}
    references = {
        ".zgroup": ZGROUP,
        "v/.zarray": json.dumps(zarray),
        "v/.zattrs": DIMS,
        "v/0": "base64:" + base64.b64encode(written.tobytes()).decode(),
    }
    ours = open_ours(parse_json(write_refs(tmp_path, references)))["v"].values
    np.testing.assert_array_equal(ours, open_fsspec(references)["v"].values)
    assert np.isnan(ours[[0, 2, 3]]).all() and ours[1] == 2


@pytest.mark.parametrize(
    ("dtype", "fill_value"),
    [
        ("<f8", "1.5"),
        ("<f8", "nan"),
        ("<f4", "-inf"),
        ("<f8", "1e400"),  # inf, as float() reads it
        ("<c16", [2.5, "-Infinity"]),
        ("<M8[s]", "NaT"),
        ("<m8[ms]", "NaT"),
    ],
)
def test_fill_values_spelled_as_text_read_as_zarr_reads_them(
    tmp_path: Path, dtype: str, fill_value: object
) -> None:
    # zarr-python reads a v2 float fill value of any text float() reads, and "NaT" for
    # dates and durations: the missing chunk reads as that value.
    path = tmp_path / "store.zarr"
    (path / "v").mkdir(parents=True)
    (path / ".zgroup").write_text(ZGROUP)
    zarray = {**json.loads(SIMPLE_ZARRAY), "dtype": dtype, "fill_value": fill_value}
    (path / "v" / ".zarray").write_text(json.dumps(zarray))
    (path / "v" / ".zattrs").write_text(DIMS)
    expected = zarr.open_array(path / "v", mode="r")[...]
    ours = zarr.open_group(ZarrParser()(str(path)), mode="r")["v"][...]
    assert ours.dtype == expected.dtype
    np.testing.assert_array_equal(ours, expected)


@pytest.mark.parametrize("dtype", ["<M8", "<m8"])
def test_dates_without_a_unit_are_refused_when_opened(tmp_path: Path, dtype: str) -> None:
    # zarr-python opens such an array, then fails on its first read with a ValueError.
    path = tmp_path / "store.zarr"
    (path / "v").mkdir(parents=True)
    (path / ".zgroup").write_text(ZGROUP)
    zarray = {**json.loads(SIMPLE_ZARRAY), "dtype": dtype, "fill_value": 0}
    (path / "v" / ".zarray").write_text(json.dumps(zarray))
    with pytest.raises(V2MetadataError, match=f"array 'v': dtype '{dtype}' has no time unit"):
        ZarrParser()(str(path))
