"""virtualstac.codecs: registration, round trips through zarr, and agreement with imagecodecs."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import imagecodecs
import imagecodecs.numcodecs as icn
import numcodecs
import numpy as np
import pytest
import zarr
from zarr.abc.codec import ArrayArrayCodec, BytesBytesCodec, SupportsSyncCodec
from zarr.codecs import BytesCodec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.chunk_utils import ChunkTransform
from zarr.registry import get_codec_class

import virtualstac.codecs as codecs
from virtualstac.codecs import (
    ComplexIntCodec,
    FloatPredictorCodec,
    HDF5BitshuffleCodec,
    HDF5OptionalCodec,
    HDF5ScaleOffsetCodec,
    HDF5ShuffleCodec,
    HDF5StringPadCodec,
    HorizontalPredictorCodec,
    JPEGCodec,
    LERCCodec,
    LZWCodec,
    PackBitsCodec,
    PackIntsCodec,
    PadCodec,
    WebPCodec,
    ZstdCodec,
)


def roundtrip(
    data: np.ndarray,
    chunks: tuple[int, ...],
    *,
    filters: list[Any] | None = None,
    compressors: list[Any] | None = None,
    endian: str = "little",
) -> zarr.Array:
    array = zarr.create_array(
        store={},
        shape=data.shape,
        chunks=chunks,
        dtype=data.dtype.newbyteorder("="),
        filters=filters or [],
        serializer=BytesCodec(endian=endian),  # type: ignore[arg-type]
        compressors=compressors or [],
    )
    array[...] = data
    return array


def test_every_codec_is_registered_with_zarr() -> None:
    assert set(codecs.CODECS) == {
        "imagecodecs_lzw",
        "imagecodecs_packbits",
        "imagecodecs_packints",
        "imagecodecs_zstd",
        "imagecodecs_jpeg",
        "imagecodecs_lerc",
        "imagecodecs_webp",
        "virtualstac.pad",
        "virtualstac.complex_int",
        "imagecodecs_lzf",
        "imagecodecs_lz4h5",
        "imagecodecs_szip",
        "virtualstac.hdf5_shuffle",
        "virtualstac.hdf5_bitshuffle",
        "virtualstac.hdf5_scaleoffset",
        "virtualstac.hdf5_optional",
        "virtualstac.hdf5_strpad",
        "imagecodecs_delta",
        "imagecodecs_floatpred",
    }
    for name, cls in codecs.CODECS.items():
        assert get_codec_class(name) is cls
        kind = ArrayArrayCodec if "delta" in name or "floatpred" in name else BytesBytesCodec
        assert issubclass(cls, kind)


def test_every_codec_decodes_synchronously() -> None:
    # zarr's ChunkTransform takes only such codecs: a chain with another one (a TIFF's
    # predictor, its short last strip's padding) is read by zarr's per-chunk coroutines,
    # past virtualstac's decoding pool (manifests/decoding.py) and its selection reads.
    not_sync = [
        name for name, cls in codecs.CODECS.items() if not issubclass(cls, SupportsSyncCodec)
    ]
    assert not_sync == []
    for codec in (HorizontalPredictorCodec(), FloatPredictorCodec(), PadCodec(size=8)):
        ChunkTransform(codecs=(codec, BytesCodec()) if isinstance(codec, ArrayArrayCodec)
                       else (BytesCodec(), codec))  # fmt: skip


@dataclass(frozen=True)
class AsyncOnly(BytesBytesCodec):
    """A bytes-to-bytes codec with no synchronous methods, as third-party codecs may be."""

    is_fixed_size = True

    async def _decode_single(self, chunk_bytes: Any, chunk_spec: Any) -> Any:
        return chunk_bytes

    async def _encode_single(self, chunk_bytes: Any, chunk_spec: Any) -> Any:
        return chunk_bytes

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: Any) -> int:
        return input_byte_length


def test_hdf5_optional_decodes_synchronously_when_its_filter_does() -> None:
    zlib = {"name": "numcodecs.zlib", "configuration": {"level": 1}}
    ChunkTransform(codecs=(BytesCodec(), HDF5OptionalCodec(size=40, codec=zlib)))
    with pytest.raises(TypeError, match="HDF5OptionalCodec"):
        ChunkTransform(codecs=(BytesCodec(), HDF5OptionalCodec(size=40, codec=AsyncOnly())))
    # Read through zarr's coroutines, it still decodes.
    array = roundtrip(np.arange(20, dtype="<i4"), (10,), compressors=[
        HDF5OptionalCodec(size=40, codec=AsyncOnly())
    ])  # fmt: skip
    np.testing.assert_array_equal(array[...], np.arange(20))


@pytest.mark.parametrize("codec", [LZWCodec(), PackBitsCodec(), ZstdCodec(level=3)])
def test_lossless_bytes_codecs_round_trip(codec: BytesBytesCodec) -> None:
    data = np.arange(40 * 30, dtype="<u2").reshape(40, 30) % 77
    array = roundtrip(data, (16, 16), compressors=[codec])
    np.testing.assert_array_equal(array[...], data)


@pytest.mark.parametrize(
    "codec",
    [
        LZWCodec(),
        PackBitsCodec(),
        ZstdCodec(level=5),
        JPEGCodec(tables="AAAA", colorspace_data="RGB"),
        LERCCodec(),
        WebPCodec(),
        PadCodec(size=12),
        ComplexIntCodec(dtype=">i2"),
        PackIntsCodec(dtype=">u2", bitspersample=12, runlen=30),
        HorizontalPredictorCodec(axis=-2, shape=[4, 4, 3], dtype=">u2"),
        FloatPredictorCodec(axis=-1, shape=(1, 8, 8), dtype="<f4"),
    ],
)
def test_json_form_round_trips(codec: Any) -> None:
    as_dict = codec.to_dict()
    again = type(codec).from_dict(as_dict)
    assert again.to_dict() == as_dict
    assert again == codec
    assert hash(again) == hash(codec)


def test_codec_configs_are_the_imagecodecs_numcodecs_configs() -> None:
    # A zarr v3 entry becomes a zarr v2 / Kerchunk codec by adding its name as "id".
    for codec in (ZstdCodec(level=5), JPEGCodec(tables="AAAA", colorspace_data="RGB")):
        entry = codec.to_dict()
        v2 = icn.Zstd if entry["name"] == "imagecodecs_zstd" else icn.Jpeg
        twin = v2.from_config(dict(entry["configuration"]))
        config = {k: v for k, v in twin.get_config().items() if v is not None and k != "id"}
        assert config == entry["configuration"]


@pytest.mark.parametrize(("bits", "dtype"), [(1, "|u1"), (4, "|u1"), (12, ">u2"), (12, "<u2")])
def test_packints_unpacks_rows_that_start_on_a_byte(bits: int, dtype: str) -> None:
    data = (np.arange(20 * 13, dtype=dtype).reshape(20, 13) * 7) % (1 << bits)
    codec = PackIntsCodec(dtype=dtype, bitspersample=bits, runlen=13)
    packed = imagecodecs.packints_encode(data, bits, runlen=13)
    assert len(packed) == 20 * -(-13 * bits // 8)  # each row rounded up to whole bytes
    endian = "big" if dtype.startswith(">") else "little"
    array = roundtrip(data, (20, 13), compressors=[codec], endian=endian)
    np.testing.assert_array_equal(array[...], data)
    twin = icn.Packints.from_config(dict(codec.to_dict()["configuration"]))
    np.testing.assert_array_equal(twin.decode(packed).reshape(20, 13), data)


def test_image_codecs_round_trip_through_zarr() -> None:
    data = np.zeros((32, 32, 3), dtype=np.uint8)
    data[8:24, 8:24] = 200
    lossless = roundtrip(data, (16, 16, 3), compressors=[WebPCodec(lossless=True)])
    np.testing.assert_array_equal(lossless[...], data)
    floats = np.linspace(0, 1, 32 * 32, dtype="<f4").reshape(32, 32)
    lerc = roundtrip(floats, (16, 16), compressors=[LERCCodec(level=0.0)])
    np.testing.assert_array_equal(lerc[...], floats)
    jpeg = roundtrip(data, (16, 16, 3), compressors=[JPEGCodec(level=95)])
    assert np.abs(jpeg[...].astype(int) - data).max() < 8


def test_jpeg_tables_decode_abbreviated_streams() -> None:
    # An abbreviated stream holds no quantisation/Huffman tables; TIFF keeps them in
    # JPEGTables. Build one from a full JPEG by splitting its header off.
    image = (np.arange(16 * 16) % 251).astype(np.uint8).reshape(16, 16)
    full = bytes(imagecodecs.jpeg8_encode(image, level=90))
    table_segments, other_segments = b"", b""
    position = 2
    while full[position + 1] != 0xDA:  # up to the start of scan
        length = int.from_bytes(full[position + 2 : position + 4], "big")
        segment = full[position : position + 2 + length]
        if full[position + 1] in (0xDB, 0xC4):  # quantisation and Huffman tables
            table_segments += segment
        else:
            other_segments += segment
        position += 2 + length
    tables = b"\xff\xd8" + table_segments + b"\xff\xd9"
    abbreviated = b"\xff\xd8" + other_segments + full[position:]

    codec = JPEGCodec(tables=base64.b64encode(tables).decode())
    with pytest.raises(imagecodecs.Jpeg8Error):
        JPEGCodec()._codec.decode(abbreviated)
    decoded = codec._codec.decode(abbreviated)
    np.testing.assert_array_equal(decoded, imagecodecs.jpeg8_decode(full))


@pytest.mark.parametrize("endian", ["little", "big"])
def test_horizontal_predictor_works_per_row_and_sample(endian: str) -> None:
    data = (np.arange(20 * 24 * 3, dtype=np.int64) * 7919 % 65536).astype("u2")
    data = data.reshape(20, 24, 3)
    codec = HorizontalPredictorCodec(axis=-2)
    array = roundtrip(data, (8, 8, 3), filters=[codec], compressors=[ZstdCodec()], endian=endian)
    np.testing.assert_array_equal(array[...], data)
    stored = array.store_path.store._store_dict["c/0/0/0"].to_bytes()  # type: ignore[attr-defined]
    raw = np.frombuffer(
        imagecodecs.zstd_decode(stored), dtype=("<" if endian == "little" else ">") + "u2"
    )
    # Each row of each sample is differenced on its own, as TIFF predictor 2 defines.
    expected = imagecodecs.delta_encode(data[:8, :8].astype("=u2"), axis=-2)
    np.testing.assert_array_equal(raw.reshape(8, 8, 3), expected)


def test_horizontal_predictor_differences_complex_samples_as_integer_words() -> None:
    data = (np.arange(8 * 8, dtype="f4").reshape(8, 8) * (1.5 - 2j)).astype("c8")
    array = roundtrip(data, (8, 8), filters=[HorizontalPredictorCodec(axis=-1)])
    np.testing.assert_array_equal(array[...], data)
    stored = array.store_path.store._store_dict["c/0/0"].to_bytes()  # type: ignore[attr-defined]
    # libtiff's differencing of GDAL's CFloat32: each sample one 64-bit integer.
    expected = imagecodecs.delta_encode(data.view("<u8"), axis=-1)
    np.testing.assert_array_equal(np.frombuffer(stored, "<u8").reshape(8, 8), expected)


@pytest.mark.parametrize("order", ["<", ">"])
def test_float_predictor_matches_imagecodecs_twin(order: str) -> None:
    rng = np.random.default_rng(1)
    data = rng.standard_normal((16, 12, 2)).astype("f8")
    dtype = order + "f8"
    codec = FloatPredictorCodec(axis=-2, shape=(16, 12, 2), dtype=dtype)
    endian = "little" if order == "<" else "big"
    array = roundtrip(data, (16, 12, 2), filters=[codec], endian=endian)
    np.testing.assert_array_equal(array[...], data)
    stored = array.store_path.store._store_dict["c/0/0/0"].to_bytes()  # type: ignore[attr-defined]
    twin = icn.Floatpred(shape=(16, 12, 2), dtype=dtype, axis=-2)
    np.testing.assert_array_equal(twin.decode(stored), data)


def test_predictors_check_the_chunk_they_get() -> None:
    data = np.ones((8, 8), dtype="<f4")  # all-zero chunks would not be written at all
    wrong_shape = FloatPredictorCodec(axis=-1, shape=(4, 4), dtype="<f4")
    with pytest.raises(ValueError, match=r"configured for chunks of shape \(4, 4\)"):
        roundtrip(data, (8, 8), filters=[wrong_shape])
    wrong_dtype = HorizontalPredictorCodec(axis=-1, dtype="<u2")
    with pytest.raises(ValueError, match="configured for data type <u2"):
        roundtrip(data, (8, 8), filters=[wrong_dtype])


@pytest.mark.parametrize(("axis", "dist"), [("x", 1), (-1, 0), (-1, 1.5)])
def test_predictor_configuration_is_validated(axis: Any, dist: Any) -> None:
    with pytest.raises(ValueError, match="needs an integer axis and a positive integer dist"):
        HorizontalPredictorCodec(axis=axis, dist=dist)


def test_pad_codec_pads_short_chunks_and_refuses_long_ones() -> None:
    data = np.arange(10 * 4, dtype="<u2").reshape(10, 4)
    array = zarr.create_array(
        store={}, shape=(10, 4), chunks=(4, 4), dtype="u2", compressors=[PadCodec(size=32)]
    )
    array[...] = data
    store = array.store_path.store._store_dict  # type: ignore[attr-defined]
    # Cut the last chunk to the two rows inside the array, as a TIFF's last strip is.
    store["c/2/0"] = store["c/2/0"][:16]
    np.testing.assert_array_equal(array[...], data)
    store["c/2/0"] = store["c/1/0"] + store["c/1/0"]
    with pytest.raises(ValueError, match="more than its size 32"):
        array[...]


@pytest.mark.parametrize(("component", "dtype"), [("<i2", "<c8"), (">i2", ">c8"), ("<i4", "<c16")])
def test_complex_int_widens_stored_integer_pairs_exactly(component: str, dtype: str) -> None:
    data = (np.arange(-300, 300).reshape(20, 30) * (1 + 2j) * 50).astype(dtype)
    endian = "big" if dtype.startswith(">") else "little"
    codec = ComplexIntCodec(dtype=component)
    array = roundtrip(data, (16, 16), compressors=[codec], endian=endian)
    np.testing.assert_array_equal(array[...], data)
    stored = array.store_path.store._store_dict["c/0/0"].to_bytes()  # type: ignore[attr-defined]
    assert len(stored) == 16 * 16 * 2 * np.dtype(component).itemsize  # integers, not floats
    twin = numcodecs.get_codec({"id": "virtualstac.complex_int", "dtype": component})
    widened = np.frombuffer(twin.decode(stored), dtype=dtype).reshape(16, 16)
    np.testing.assert_array_equal(widened, data[:16, :16])


@pytest.mark.parametrize("component", ["<u2", "<i8", "<f4", "nonsense"])
def test_complex_int_takes_int16_or_int32_components(component: str) -> None:
    with pytest.raises(ValueError, match="needs an int16 or int32 component type"):
        ComplexIntCodec(dtype=component)


@pytest.mark.parametrize("size", [-1, 1.5, True])
def test_pad_size_is_validated(size: Any) -> None:
    with pytest.raises(ValueError, match="non-negative integer size"):
        PadCodec(size=size)
    with pytest.raises(ValueError, match="non-negative integer size"):
        numcodecs.get_codec({"id": "virtualstac.pad", "size": size})


def test_pad_has_a_numcodecs_twin_for_zarr_v2_readers() -> None:
    """Kerchunk references of short TIFF strips name it as a v2 filter."""
    from importlib.metadata import entry_points

    advertised = {ep.name: ep.value for ep in entry_points(group="numcodecs.codecs")}
    assert advertised["virtualstac.pad"] == "virtualstac.codecs:PadNumcodec"
    codec = numcodecs.get_codec({"id": "virtualstac.pad", "size": 6})
    assert codec.encode(b"abc") == b"abc"
    assert bytes(codec.decode(b"abc")) == b"abc\0\0\0"
    with pytest.raises(ValueError, match="more than its size 6"):
        codec.decode(b"abcdefg")


def test_hdf5_shuffle_keeps_the_bytes_past_the_last_whole_element() -> None:
    """HDF5 shuffles whole elements and leaves the rest, a fletcher32 checksum, where it is."""
    values = np.arange(6, dtype="<f8").tobytes()
    checksum = b"\x01\x02\x03\x04"
    shuffled = numcodecs.Shuffle(elementsize=8).encode(values).tobytes() + checksum
    twin = numcodecs.get_codec({"id": "virtualstac.hdf5_shuffle", "elementsize": 8})

    assert bytes(twin.decode(shuffled)) == values + checksum
    assert bytes(twin.encode(values + checksum)) == shuffled
    array = zarr.create_array(
        store={},
        shape=(6,),
        chunks=(6,),
        dtype="<f8",
        compressors=[HDF5ShuffleCodec(elementsize=8)],
    )
    array[...] = np.arange(6.0)
    assert array.store_path.store._store_dict["c/0"].to_bytes() == shuffled[:-4]  # type: ignore[attr-defined]
    np.testing.assert_array_equal(array[...], np.arange(6.0))
    with pytest.raises(ValueError, match="positive integer elementsize"):
        HDF5ShuffleCodec(elementsize=0)


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
@pytest.mark.parametrize("chunks", [(100,), (45,), (5,)], ids=["blocks", "short_block", "few"])
def test_hdf5_bitshuffle_round_trips_and_its_twin_reads_the_same(
    compression: str, chunks: tuple[int, ...]
) -> None:
    # 45 values: two blocks of 16, one of 8 (45 - 32 rounded down to 8s), 5 left as they are.
    values = np.random.default_rng(3).normal(size=100)
    codec = HDF5BitshuffleCodec(elementsize=8, blocksize=16, compression=compression)
    array = roundtrip(values, chunks, compressors=[codec])
    np.testing.assert_array_equal(array[...], values)
    stored = array.store_path.store._store_dict["c/0"].to_bytes()  # type: ignore[attr-defined]
    twin = numcodecs.get_codec(
        {"id": "virtualstac.hdf5_bitshuffle", **codec.to_dict()["configuration"]}
    )
    first = values[: chunks[0]].tobytes()
    assert bytes(twin.decode(stored)) == first
    assert bytes(twin.encode(first)) == stored


def test_hdf5_bitshuffle_refuses_a_header_claiming_more_than_its_chunk() -> None:
    codec = HDF5BitshuffleCodec(elementsize=4, compression="lz4")
    array = roundtrip(np.arange(64, dtype="<i4"), (64,), compressors=[codec])
    store = array.store_path.store._store_dict  # type: ignore[attr-defined]
    stored = store["c/0"].to_bytes()
    claimed = (10**12).to_bytes(8, "big") + stored[8:]
    store["c/0"] = store["c/0"].from_bytes(claimed)
    with pytest.raises(Exception, match=r"claims 1000000000000 bytes, more than its"):
        array[...]
    with pytest.raises(ValueError, match="blocksize of 8s"):
        HDF5BitshuffleCodec(elementsize=4, blocksize=12)
    with pytest.raises(ValueError, match="one of"):
        HDF5BitshuffleCodec(elementsize=4, compression="lzf")


def test_hdf5_scale_offset_refuses_parameters_claiming_more_than_its_chunk() -> None:
    # int32 (class 0, 4 bytes, signed, little-endian) without a fill value, in chunks said to
    # hold 10**9 values where the array's hold 8.
    cd_values = [2, 0, 10**9, 0, 4, 1, 0, 0] + [0] * 12
    codec = HDF5ScaleOffsetCodec(cd_values=cd_values)
    assert codec.to_dict()["configuration"] == {"cd_values": cd_values}
    array = zarr.create_array(store={}, shape=(8,), chunks=(8,), dtype="<i4", compressors=[codec])
    chunks = array.store_path.store._store_dict  # type: ignore[attr-defined]
    chunks["c/0"] = default_buffer_prototype().buffer.from_bytes(bytes(24))
    with pytest.raises(Exception, match=r"would hold 4000000000 bytes, over its"):
        array[...]
    with pytest.raises(ValueError, match="decodes integers of 1 to 8 bytes"):
        HDF5ScaleOffsetCodec(cd_values=[0, 0, 8, 0, 3, 1, 0, 0] + [0] * 12)


def test_hdf5_optional_passes_chunks_of_its_size_through() -> None:
    # A deflated chunk decodes; one of the filter's input size is as HDF5 stored it, raw.
    zlib = {"name": "numcodecs.zlib", "configuration": {"level": 1}}
    codec = HDF5OptionalCodec(size=40, codec=zlib)
    assert HDF5OptionalCodec.from_dict(codec.to_dict()) == codec
    array = roundtrip(np.arange(20, dtype="<i4"), (10,), compressors=[codec])
    chunks = array.store_path.store._store_dict  # type: ignore[attr-defined]
    chunks["c/1"] = chunks["c/1"].from_bytes(np.arange(10, 20, dtype="<i4").tobytes())
    np.testing.assert_array_equal(array[...], np.arange(20))
    twin = numcodecs.get_codec(
        {"id": "virtualstac.hdf5_optional", "size": 40, "codec": {"id": "zlib", "level": 1}}
    )
    assert bytes(twin.decode(chunks["c/1"].to_bytes())) == np.arange(10, 20, dtype="<i4").tobytes()
    assert bytes(twin.decode(chunks["c/0"].to_bytes())) == np.arange(10, dtype="<i4").tobytes()
    with pytest.raises(ValueError, match="wraps a bytes-to-bytes codec"):
        HDF5OptionalCodec(size=40, codec={"name": "bytes", "configuration": {}})


def test_hdf5_strpad_pads_strings_with_nulls_as_hdf5_converts_them() -> None:
    # Null-terminated: nothing from the first null on; space-padded: no trailing spaces.
    cases = {
        "nullterm": (b"ab\0xyz" + b"abcdef" + b"\0\0\0\1\1\1", b"ab\0\0\0\0abcdef" + bytes(6)),
        "spacepad": (b"ab    " + b"a b \0 " + b"      ", b"ab\0\0\0\0a b \0\0" + bytes(6)),
    }
    for pad, (stored, converted) in cases.items():
        codec = HDF5StringPadCodec(size=6, pad=pad)
        assert HDF5StringPadCodec.from_dict(codec.to_dict()) == codec
        array = roundtrip(np.array([b"x"] * 3, "S6"), (3,), compressors=[codec])
        chunks = array.store_path.store._store_dict  # type: ignore[attr-defined]
        chunks["c/0"] = chunks["c/0"].from_bytes(stored)
        assert array[...].tobytes() == converted
        twin = numcodecs.get_codec({"id": "virtualstac.hdf5_strpad", "size": 6, "pad": pad})
        assert bytes(twin.decode(stored)) == converted
        padding = b"\0\0\0\0" if pad == "nullterm" else b"    "
        assert bytes(twin.encode(b"ab\0\0\0\0")) == b"ab" + padding
    with pytest.raises(ValueError, match="pads one of"):
        HDF5StringPadCodec(size=6, pad="nullpad")


def test_bad_imagecodecs_configuration_fails_on_construction() -> None:
    with pytest.raises(TypeError):
        ZstdCodec(levels=3)


def test_codecs_are_advertised_as_entry_points() -> None:
    """A process that never imports virtualstac still finds the codecs through zarr."""
    from importlib.metadata import entry_points

    advertised = {
        ep.name: ep.value
        for ep in entry_points(group="zarr.codecs")
        if ep.dist is not None and ep.dist.name == "virtualstac"
    }
    for name, cls in codecs.CODECS.items():
        assert advertised[name] == f"virtualstac.codecs:{cls.__name__}"


def test_our_codecs_win_over_other_implementations_of_the_same_name() -> None:
    class Impostor(HorizontalPredictorCodec):
        """Another package's codec registered under an imagecodecs name (virtual-tiff does)."""

    zarr.registry.register_codec("imagecodecs_delta", Impostor)
    try:
        assert get_codec_class("imagecodecs_delta") is HorizontalPredictorCodec
    finally:
        zarr.registry._codec_registries["imagecodecs_delta"].pop(
            f"{Impostor.__module__}.{Impostor.__qualname__}"
        )


@pytest.mark.parametrize("codec_cls", [HorizontalPredictorCodec, FloatPredictorCodec])
def test_predictors_follow_inserted_and_removed_axes(codec_cls: type[Any]) -> None:
    # A planar band chunk (band, y, x) as the TIFF parser describes it: x is axis 2.
    codec = codec_cls(axis=2, shape=(1, 4, 6), dtype="<f4")
    stacked = codec.with_axis_inserted(0, 3)  # a time axis in front
    assert (stacked.axis, stacked.shape) == (3, (1, 1, 4, 6))
    assert codec.with_axis_inserted(3, 3).axis == 2  # after x: samples, x stays
    squeezed = codec.with_axis_removed(0, 3)  # the band axis selected away
    assert (squeezed.axis, squeezed.shape, squeezed.dtype) == (1, (4, 6), "<f4")
    assert codec_cls(axis=-1).with_axis_removed(0, 3).axis == 1
    with pytest.raises(ValueError, match="x axis"):
        codec.with_axis_removed(2, 3)


def test_predicted_chunks_decode_identically_after_axis_changes() -> None:
    image = np.arange(24, dtype="<u2").reshape(1, 4, 6) * 7
    encoded = imagecodecs.delta_encode(image[0], axis=-1)
    codec = HorizontalPredictorCodec(axis=2, shape=(1, 4, 6), dtype="<u2")
    for variant, shape in [
        (codec.with_axis_inserted(0, 3), (1, 1, 4, 6)),
        (codec.with_axis_removed(0, 3), (4, 6)),
    ]:
        chunks: dict[str, Any] = {}
        array = zarr.create_array(
            store=chunks, shape=shape, chunks=shape, dtype="<u2", filters=[variant], compressors=[]
        )
        key = "c/" + "/".join("0" * len(shape))
        chunks[key] = zarr.core.buffer.cpu.Buffer.from_bytes(encoded.astype("<u2").tobytes())
        np.testing.assert_array_equal(array[...], image.reshape(shape))
