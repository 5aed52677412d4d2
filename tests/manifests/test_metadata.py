"""Zarr v3 array metadata for manifest arrays: building, replacing, comparing, CF fill values."""

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualstac import ChunkManifest, ManifestArray
from virtualstac.errors import IncompatibleArraysError, InvalidManifestError
from virtualstac.manifests.metadata import (
    CF_ENCODING_ATTRS,
    cf_fill_value_attribute,
    check_combinable,
    chunk_shape_of,
    create_v3_array_metadata,
    decode_cf_fill_value,
    grid_shape,
    json_safe,
    replace_metadata,
)

ReadVirtual = Callable[[Mapping[str, ManifestArray]], xr.Dataset]


def metadata(**changes: object) -> ArrayV3Metadata:
    arguments: dict[str, object] = {
        "shape": (4, 6),
        "data_type": "<f4",
        "chunk_shape": (2, 3),
        "dimension_names": ["y", "x"],
    }
    arguments.update(changes)
    return create_v3_array_metadata(**arguments)  # type: ignore[arg-type]


# -- building ----------------------------------------------------------------------------------


def test_defaults_are_raw_little_endian_chunks_filled_with_zero() -> None:
    as_json = metadata().to_dict()

    assert as_json["shape"] == (4, 6)
    assert as_json["data_type"] == "float32"
    assert as_json["chunk_grid"] == {"name": "regular", "configuration": {"chunk_shape": (2, 3)}}
    assert as_json["codecs"] == ({"name": "bytes", "configuration": {"endian": "little"}},)
    assert as_json["fill_value"] == 0.0
    assert as_json["dimension_names"] == ("y", "x")
    assert as_json["chunk_key_encoding"]["configuration"] == {"separator": "/"}


def test_a_big_endian_dtype_becomes_a_big_endian_bytes_codec() -> None:
    as_json = metadata(data_type=">i2").to_dict()

    assert as_json["data_type"] == "int16"
    assert as_json["codecs"] == ({"name": "bytes", "configuration": {"endian": "big"}},)


def test_big_endian_raw_bytes_read_back(tmp_path: Path, read_virtual: ReadVirtual) -> None:
    values = np.arange(-6, 6, dtype=">i2")
    values.tofile(tmp_path / "big.bin")
    manifest = ChunkManifest(
        {
            "0": {"path": str(tmp_path / "big.bin"), "offset": 0, "length": 12},
            "1": {"path": str(tmp_path / "big.bin"), "offset": 12, "length": 12},
        }
    )
    marr = ManifestArray(
        create_v3_array_metadata(
            shape=(12,), data_type=">i2", chunk_shape=(6,), dimension_names=["x"]
        ),
        manifest,
    )

    np.testing.assert_array_equal(read_virtual({"v": marr})["v"].values, values)


# zarr warns that fixed-length bytes have no Zarr v3 specification yet; that is expected here.
@pytest.mark.filterwarnings("ignore:The data type .* does not have a Zarr V3 specification")
@pytest.mark.parametrize(
    ("data_type", "fill_value", "stored"),
    [
        ("<f4", float("nan"), "NaN"),
        ("<f8", -np.inf, "-Infinity"),
        ("<f4", np.float32(-9.0), -9.0),
        ("<i2", np.int16(-1), -1),
        ("|b1", True, True),
        ("S3", b"ab", "YWI="),
        ("S3", None, ""),
    ],
)
def test_fill_values_are_stored_as_zarr_json(
    data_type: str, fill_value: object, stored: object
) -> None:
    as_json = metadata(data_type=data_type, fill_value=fill_value).to_dict()

    assert as_json["fill_value"] == stored


def test_a_fill_value_that_does_not_fit_the_dtype_is_refused() -> None:
    with pytest.raises(InvalidManifestError, match=r"fill value 70000 cannot be stored .* int16"):
        metadata(data_type="<i2", fill_value=70000)


def test_codecs_and_attributes_are_kept() -> None:
    codecs = [
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}},
        {"name": "numcodecs.zlib", "configuration": {"level": 4}},
    ]

    built = metadata(codecs=codecs, attributes={"units": "K"})

    assert [c["name"] for c in built.to_dict()["codecs"]] == [c["name"] for c in codecs]
    assert built.attributes == {"units": "K"}


def test_arrays_alike_but_for_attributes_keep_their_own_attributes() -> None:
    """Metadata of alike arrays shares its immutable parts; attributes stay each array's own."""
    codecs = [{"name": "bytes", "configuration": {"endian": "big"}}]
    first = metadata(data_type=">i2", codecs=codecs, fill_value=-1, attributes={"units": "K"})
    second = metadata(data_type=">i2", codecs=codecs, fill_value=-1, attributes={"units": "m"})
    second.attributes["long_name"] = "changed after building"

    assert first.attributes == {"units": "K"}
    assert second.attributes == {"units": "m", "long_name": "changed after building"}
    assert first.data_type == ArrayV3Metadata.from_dict(first.to_dict()).data_type
    assert first.to_dict() == ArrayV3Metadata.from_dict(first.to_dict()).to_dict()
    assert first.codecs == second.codecs


def test_arrays_that_differ_in_anything_else_get_their_own_metadata() -> None:
    base = metadata(fill_value=np.nan).to_dict()

    assert base["fill_value"] == "NaN"
    assert metadata(fill_value=1.5).to_dict()["fill_value"] == 1.5
    assert metadata(dimension_names=["a", "b"]).to_dict()["dimension_names"] == ("a", "b")
    assert metadata(chunk_shape=(4, 6)).to_dict()["chunk_grid"]["configuration"] == {
        "chunk_shape": (4, 6)
    }
    assert metadata(separator=".").to_dict()["chunk_key_encoding"]["configuration"] == {
        "separator": "."
    }
    assert metadata(data_type="<f8").to_dict()["data_type"] == "float64"


def test_grid_shape_counts_partial_chunks() -> None:
    assert grid_shape((10, 4, 0), (3, 4, 5)) == (4, 1, 0)
    assert grid_shape((), ()) == ()


def test_only_regular_chunk_grids_are_supported() -> None:
    assert chunk_shape_of(metadata()) == (2, 3)


def test_replace_metadata_changes_only_what_it_is_told() -> None:
    original = metadata(attributes={"units": "K"})

    replaced = replace_metadata(original, shape=(8, 6), chunk_shape=(4, 3))

    assert replaced.shape == (8, 6)
    assert chunk_shape_of(replaced) == (4, 3)
    assert replaced.attributes == {"units": "K"}
    assert original.shape == (4, 6)


# -- comparing ---------------------------------------------------------------------------------


def test_check_combinable_accepts_arrays_that_differ_only_in_shape_and_names() -> None:
    check_combinable([metadata(), metadata(shape=(8, 6), dimension_names=["t", "x"])])


@pytest.mark.parametrize("attribute", CF_ENCODING_ATTRS)
def test_every_cf_encoding_attribute_must_agree(attribute: str) -> None:
    """Units decode the numbers as times only: others are a label (see below)."""
    one, two = (
        ("days since 2000-01-01", "days since 2000-02-01") if attribute == "units" else (1, 2)
    )
    with pytest.raises(
        IncompatibleArraysError, match=f"attribute '{attribute}' is {one!r} in array 0"
    ):
        check_combinable(
            [
                metadata(attributes={attribute: one}),
                metadata(attributes={attribute: one}),
                metadata(attributes={attribute: two}),
            ],
            what="stack",
        )


def test_units_that_are_a_label_need_not_agree() -> None:
    check_combinable([metadata(attributes={"units": "K"}), metadata(attributes={"units": "degC"})])


def test_the_message_names_the_operation_and_the_array() -> None:
    with pytest.raises(
        IncompatibleArraysError,
        match=r"cannot stack arrays with inconsistent dtypes: .* array 2 has float64",
    ):
        check_combinable([metadata(), metadata(), metadata(data_type="<f8")], what="stack")


def test_nan_fill_values_are_equal() -> None:
    check_combinable([metadata(fill_value=np.nan), metadata(fill_value=float("nan"))])


def test_other_attributes_may_differ() -> None:
    check_combinable([metadata(attributes={"history": "a"}), metadata(attributes={"history": "b"})])


# -- CF fill values ----------------------------------------------------------------------------


def test_cf_fill_value_encoding_follows_xarray() -> None:
    assert cf_fill_value_attribute(-9.0, np.dtype("float32")) == "AAAAAAAAIsA="
    assert cf_fill_value_attribute(np.nan, np.dtype("float64")) == "AAAAAAAA+H8="
    assert cf_fill_value_attribute(np.int16(-1), np.dtype("int16")) == -1
    assert cf_fill_value_attribute(b"x", np.dtype("S1")) == b"x"


@pytest.mark.parametrize(
    ("value", "dtype"),
    [(-9.0, "float32"), (np.nan, "float64"), (3.0, "complex64"), (1 - 2j, "complex128")],
)
def test_cf_fill_values_decode_as_xarray_decodes_them(value: complex, dtype: str) -> None:
    from xarray.backends.zarr import FillValueCoder

    encoded = cf_fill_value_attribute(value, np.dtype(dtype))
    expected = np.asarray(value, dtype=dtype)
    np.testing.assert_array_equal(FillValueCoder.decode(encoded, np.dtype(dtype)), expected)
    np.testing.assert_array_equal(decode_cf_fill_value(encoded, np.dtype(dtype)), expected)


def test_xarray_masks_the_cf_fill_value_of_a_real_file(
    write_hdf5: Callable[..., Path],
    hdf5_array: Callable[..., ManifestArray],
    read_virtual: ReadVirtual,
) -> None:
    values = np.array([[1.5, -9.0, 3.0], [-9.0, 5.0, 6.5]], dtype="<f4")
    path = write_hdf5("masked.h5", values, chunks=(1, 3), fillvalue=-9.0)
    attributes = {"_FillValue": cf_fill_value_attribute(-9.0, values.dtype)}

    ds = read_virtual({"v": hdf5_array(path, dims=["y", "x"], attributes=attributes)})

    with h5py.File(path, "r") as f:
        expected = np.where(f["data"][()] == -9.0, np.nan, f["data"][()])
    np.testing.assert_array_equal(ds["v"].values, expected)


def test_json_safe_spells_non_finite_numbers_as_zarr_does() -> None:
    attributes = {"missing_value": float("nan"), "valid_range": [0.0, float("inf")], "n": 1}
    assert json_safe(attributes) == {
        "missing_value": "NaN",
        "valid_range": [0.0, "Infinity"],
        "n": 1,
    }
    assert json_safe((float("-inf"), "x")) == ["-Infinity", "x"]


def test_fill_values_equal_as_numbers_keep_their_own_bits() -> None:
    # Casts of numpy fill values are reused across arrays: 0.0 and -0.0 compare equal, and a
    # NaN payload is not a NaN's only spelling, so each keeps its bytes.
    def fill(value: Any) -> Any:
        return create_v3_array_metadata(
            shape=(2,), data_type="f4", chunk_shape=(2,), fill_value=value
        ).fill_value

    assert not np.signbit(fill(np.float32(0.0)))
    assert np.signbit(fill(np.float32(-0.0)))
    payload = np.array([0x7FC00001], dtype="<u4").view("<f4")[0]
    assert fill(np.float32(np.nan)).tobytes() != fill(payload).tobytes()
    assert fill(payload).tobytes() == payload.tobytes()
    assert fill(np.float64(2.5)) == np.float32(2.5)
