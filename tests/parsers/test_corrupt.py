"""Damaged headers and metadata raise CorruptFileError (or another typed error) naming the file.

Each case is a real file damaged where a parser used to let a foreign exception escape (or read
garbage); ``tests/fuzz`` damages files at random.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest
import tifffile
import zarr

from virtualstac import open_virtual_dataset
from virtualstac.errors import (
    CorruptFileError,
    NotVirtualizableError,
    UnsupportedOperationError,
    VirtualStacError,
)
from virtualstac.parsers.corrupt import reading
from virtualstac.parsers.kerchunk import KerchunkJSONParser, KerchunkReferenceError


def test_reading_turns_foreign_errors_into_one_line_chained_corrupt_file_errors() -> None:
    with pytest.raises(CorruptFileError) as caught:
        with reading("/data/x.nc", "the netCDF-3 header"):
            struct.unpack(">i", b"\x00")
    message = str(caught.value)
    assert message.startswith("/data/x.nc is damaged: reading the netCDF-3 header failed (")
    assert "\n" not in message
    assert isinstance(caught.value.__cause__, struct.error)
    assert isinstance(caught.value, ValueError)  # what a caller of a parser would catch


def test_reading_lets_virtualstac_errors_and_unlisted_errors_through() -> None:
    typed = UnsupportedOperationError("not this")
    with pytest.raises(UnsupportedOperationError) as caught:
        with reading("/data/x.nc", "anything"):
            raise typed
    assert caught.value is typed
    with pytest.raises(FileNotFoundError):
        with reading("/data/x.nc", "anything"):
            raise FileNotFoundError("/data/x.nc")
    with pytest.raises(CorruptFileError):
        with reading("/data/x.nc", "anything", also=(OSError,)):
            raise OSError("Can't read data (wrong B-tree signature)")


def test_hard_link_to_an_unreadable_object_is_named(tmp_path: Path) -> None:
    path = tmp_path / "links.h5"
    with h5py.File(path, "w", libver="latest") as f:
        f.create_dataset("a", data=np.arange(100.0), chunks=(10,))
        f.create_dataset("b", data=np.arange(10.0))
    with h5py.File(path, "r") as f:
        header = h5py.h5o.get_info(f["a"].id).addr
    data = bytearray(path.read_bytes())
    data[header + 8 : header + 16] = bytes(8)  # the object header's checksum no longer holds
    path.write_bytes(bytes(data))
    # Used to escape as AttributeError: 'HardLink' object has no attribute 'path'.
    with pytest.raises(CorruptFileError, match=r"links\.h5 is damaged: the object 'a' links to"):
        open_virtual_dataset(str(path))


def test_short_unfiltered_chunk_is_refused_rather_than_read_as_garbage(tmp_path: Path) -> None:
    path = tmp_path / "short.h5"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("a", shape=(8,), dtype="f8", chunks=(4,))
        ds[:] = np.arange(8.0)
        # A damaged chunk index: 5 bytes where a chunk of 4 float64 needs 32. HDF5 reads the
        # missing 27 bytes from whatever memory held, so the inlined values would be garbage.
        ds.id.write_direct_chunk((4,), b"short")
    with pytest.raises(NotVirtualizableError, match=r"unfiltered chunk \(1,\) of 5 bytes"):
        open_virtual_dataset(str(path))


def test_tiff_segment_at_offset_zero_is_damage_not_sparseness(tmp_path: Path) -> None:
    path = tmp_path / "strips.tif"
    tifffile.imwrite(path, np.arange(64 * 16, dtype="uint16").reshape(64, 16), rowsperstrip=16)
    with tifffile.TiffFile(path) as tif:
        tag = tif.pages[0].tags["StripOffsets"]
        where, byteorder = tag.valueoffset, tif.byteorder
    data = bytearray(path.read_bytes())
    data[where + 4 : where + 8] = struct.pack(f"{byteorder}I", 0)  # strip 1 at offset 0
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=r"512 bytes of tile or strip 1 at offset 0"):
        open_virtual_dataset(str(path))


def test_tiff_cut_short_inside_its_tiles_is_refused_before_any_store_is_made(
    tmp_path: Path,
) -> None:
    # A copy or upload interrupted after the header: GDAL opens it and fails reading pixels; a
    # store of it would be published with references past the end of the file.
    whole = tmp_path / "whole.tif"
    rng = np.random.default_rng(0)
    tifffile.imwrite(whole, rng.integers(0, 60000, (256, 256), "uint16"), tile=(64, 64))
    with tifffile.TiffFile(whole) as tif:  # the IFD before the tiles, as tifffile writes it
        assert tif.pages[0].offset < min(tif.pages[0].dataoffsets)
    path = tmp_path / "cut.tif"
    path.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(
        CorruptFileError, match=r"cut\.tif is truncated or damaged: tile or strip \d+ of IFD 0 "
    ) as info:
        open_virtual_dataset(str(path))
    assert f"past the end of the file ({path.stat().st_size} bytes)" in str(info.value)


@pytest.mark.parametrize("kept", [8, 16, 60])
def test_tiff_cut_before_or_inside_its_first_ifd_is_damaged(
    tmp_path: Path, kept: int, capfd: pytest.CaptureFixture[str]
) -> None:
    whole = tmp_path / "whole.tif"
    tifffile.imwrite(whole, np.zeros((256, 256), "uint16"), tile=(64, 64), compression="zlib")
    with tifffile.TiffFile(whole) as tif:
        assert tif.pages[0].offset == 8  # right after the header: cut before it, or inside it
    path = tmp_path / "cut.tif"
    path.write_bytes(whole.read_bytes()[:kept])
    with pytest.raises(CorruptFileError, match=r"cut\.tif is damaged: its first IFD cannot be"):
        open_virtual_dataset(str(path))
    assert "invalid offset" not in capfd.readouterr().err  # tifffile's warning is not repeated


def test_deeply_nested_kerchunk_json_is_a_reference_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"version": 1, "refs": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(KerchunkReferenceError, match="nests JSON too deeply") as caught:
        open_virtual_dataset(str(path))
    assert isinstance(caught.value.__cause__, RecursionError)


def test_damaged_gzip_kerchunk_json_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "refs.json.gz"
    compressed = bytearray(zlib.compress(b'{"version": 1, "refs": {}}', wbits=31))
    path.write_bytes(bytes(compressed[: len(compressed) // 2]))
    with pytest.raises(CorruptFileError, match=r"refs\.json\.gz is damaged: reading its gzip"):
        open_virtual_dataset(str(path), parser=KerchunkJSONParser())


def test_damaged_zmetadata_names_the_document(tmp_path: Path) -> None:
    store = tmp_path / "refs.parq"
    store.mkdir()
    (store / ".zmetadata").write_bytes(b'{"record_size": 10, "metadata": {"\xdb\xff": 1}}')
    # Used to escape from format detection as UnicodeDecodeError.
    with pytest.raises(CorruptFileError, match=r"refs\.parq/\.zmetadata is damaged") as caught:
        open_virtual_dataset(str(store))
    assert isinstance(caught.value.__cause__, UnicodeDecodeError)


def test_zarr_document_that_is_not_json_is_named(tmp_path: Path) -> None:
    store = tmp_path / "data.zarr"
    root = zarr.open_group(store, mode="w", zarr_format=3)
    root.create_array("a", shape=(4,), dtype="int32", dimension_names=("x",))
    document = store / "a" / "zarr.json"
    document.write_text(document.read_text()[:40])
    with pytest.raises(CorruptFileError, match=r"data\.zarr/a/zarr\.json is damaged: it is not"):
        open_virtual_dataset(str(store))


def test_zarr_metadata_that_zarr_refuses_names_the_document(tmp_path: Path) -> None:
    store = tmp_path / "data.zarr"
    root = zarr.open_group(store, mode="w", zarr_format=3)
    root.create_array("a", shape=(4,), dtype="int32", dimension_names=("x",))
    document = store / "a" / "zarr.json"
    metadata = json.loads(document.read_text())
    metadata["chunk_grid"] = {"name": "regular", "configuration": {}}
    document.write_text(json.dumps(metadata))
    with pytest.raises(
        CorruptFileError, match=r"data\.zarr/a/zarr\.json is damaged: it is not valid"
    ):
        open_virtual_dataset(str(store))
    assert issubclass(CorruptFileError, VirtualStacError)
