"""Kerchunk reference sets that claim more than memory holds are refused before allocating.

Bombs: ``gen`` entries over a billion keys, an array of a billion chunks, Parquet reference
sets of a billion single-row record files, and a gzip stream that inflates to gigabytes. Each
raises :class:`LimitExceededError` saying the figure, the limit and how to raise it.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import bounded
import numpy as np
import pytest
import tifffile

import virtualstac.limits
from virtualstac.errors import CorruptFileError, LimitExceededError
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.kerchunk import (
    KerchunkJSONParser,
    KerchunkParquetParser,
    KerchunkReferenceError,
)
from virtualstac.storage.registry import ObjectStoreRegistry

pytestmark = pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning")


def registry_for(path: Path) -> ObjectStoreRegistry:
    return ObjectStoreRegistry.for_url(path.parent.as_uri() + "/")


def parse_json(path: Path) -> ManifestStore:
    return KerchunkJSONParser()(str(path), registry_for(path))


def zarray(shape: list[int], chunks: list[int]) -> str:
    return json.dumps(
        {
            "zarr_format": 2,
            "shape": shape,
            "chunks": chunks,
            "dtype": "<f4",
            "fill_value": None,
            "order": "C",
            "filters": None,
            "compressor": None,
        }
    )


def write_json(tmp_path: Path, references: dict[str, Any], name: str = "refs.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(references))
    return path


def test_gen_over_a_billion_keys_is_refused_before_expanding(tmp_path: Path) -> None:
    path = write_json(
        tmp_path,
        {
            "version": 1,
            "refs": {".zgroup": '{"zarr_format": 2}', "v/.zarray": zarray([10**9], [1])},
            "gen": [
                {
                    "key": "v/{{i}}",
                    "url": "data.bin",
                    "offset": "{{i * 4}}",
                    "length": "4",
                    "dimensions": {"i": {"stop": 10**9}},
                }
            ],
        },
    )

    with pytest.raises(LimitExceededError, match=r"1,000,000,000 chunk references") as raised:
        parse_json(path)

    message = str(raised.value)
    assert "50,000,000 (references_per_array)" in message
    assert "virtualstac.limits.set_limits(references_per_array=...)" in message


def test_a_billion_chunk_array_is_refused_with_memory_capped(tmp_path: Path) -> None:
    """With the defaults, in a process that could not hold the grid (24 GB) if it were built."""
    path = write_json(
        tmp_path,
        {".zgroup": '{"zarr_format": 2}', "v/.zarray": zarray([10**12], [1000])},
    )

    out = bounded.run_capped(
        f"""
        from virtualstac.errors import CorruptFileError, LimitExceededError
        from virtualstac.parsers.kerchunk import KerchunkJSONParser
        from virtualstac.storage.registry import ObjectStoreRegistry
        url = {path.as_uri()!r}
        try:
            KerchunkJSONParser()(url, ObjectStoreRegistry.for_url(url))
        except LimitExceededError as err:
            print(err)
        """
    )

    assert "array 'v' has 1,000,000,000 chunk references" in out


def test_the_references_of_all_arrays_count_against_one_open(tmp_path: Path) -> None:
    refs: dict[str, Any] = {".zgroup": '{"zarr_format": 2}'}
    for name in ("a", "b", "c"):
        refs[f"{name}/.zarray"] = zarray([400], [1])
    path = write_json(tmp_path, refs)

    with virtualstac.limits.limits(references_per_array=500, references_per_open=1000):
        with pytest.raises(LimitExceededError, match=r"1,200 chunk references.*per_open"):
            parse_json(path)
    with virtualstac.limits.limits(references_per_array=500, references_per_open=1200):
        store = parse_json(path)

    assert sorted(store.group.arrays) == ["a", "b", "c"]


def test_parquet_with_a_record_file_per_chunk_is_refused_before_listing_them(
    tmp_path: Path,
) -> None:
    root = tmp_path / "refs.parq"
    root.mkdir()
    metadata = {".zgroup": '{"zarr_format": 2}', "v/.zarray": zarray([10**9], [1])}
    (root / ".zmetadata").write_text(json.dumps({"metadata": metadata, "record_size": 1}))

    with pytest.raises(LimitExceededError, match="array 'v' has 1,000,000,000 chunk references"):
        KerchunkParquetParser()(str(root), registry_for(root))


def test_a_gzip_bomb_stops_inflating_at_the_limit(tmp_path: Path) -> None:
    references = {".zgroup": '{"zarr_format": 2}', "pad": " " * (4 * 2**20)}
    path = tmp_path / "refs.json.gz"
    path.write_bytes(gzip.compress(json.dumps(references).encode(), compresslevel=1))
    assert path.stat().st_size < 2**20

    with virtualstac.limits.limits(metadata_bytes=2**20):
        with pytest.raises(LimitExceededError, match=r"inflates to more than 1,048,576 bytes"):
            parse_json(path)
    with virtualstac.limits.limits(metadata_bytes=8 * 2**20):
        assert parse_json(path).group.arrays == {}


def test_a_truncated_gzip_file_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "refs.json.gz"
    path.write_bytes(gzip.compress(b'{".zgroup": "{\\"zarr_format\\": 2}"}')[:-12])

    with pytest.raises(CorruptFileError, match=r"refs\.json\.gz is damaged: reading its gzip"):
        parse_json(path)


# -- zero-length references: fsspec raises, and so do we (at open) -------------------------


def test_a_zero_length_reference_is_refused_naming_the_key_and_file(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(np.arange(4, dtype="<f4").tobytes())
    path = write_json(
        tmp_path,
        {
            ".zgroup": '{"zarr_format": 2}',
            "v/.zarray": zarray([4], [2]),
            "v/0": ["data.bin", 0, 8],
            "v/1": ["data.bin", 8, 0],
        },
    )

    with pytest.raises(KerchunkReferenceError, match=r"refs\.json: chunk 'v/1' references 0 bytes"):
        parse_json(path)


def test_an_empty_inlined_chunk_is_refused(tmp_path: Path) -> None:
    path = write_json(
        tmp_path,
        {".zgroup": '{"zarr_format": 2}', "v/.zarray": zarray([2], [2]), "v/0": ""},
    )

    with pytest.raises(KerchunkReferenceError, match=r"chunk 'v/0' inlines no bytes"):
        parse_json(path)


def test_tifffile_references_edited_to_zero_bytes_are_refused(tmp_path: Path) -> None:
    tiff = tmp_path / "image.tif"
    tifffile.imwrite(tiff, np.arange(64 * 64, dtype="u1").reshape(64, 64), tile=(32, 32))
    path = tmp_path / "image.json"
    with tifffile.TiffFile(tiff) as tif, tif.aszarr() as source:
        source.write_fsspec(str(path), url=".")
    references = json.loads(path.read_text())
    references["0.1"][2] = 0
    path.write_text(json.dumps(references))

    with pytest.raises(KerchunkReferenceError, match=r"image\.json: chunk '0\.1' references 0"):
        parse_json(path)
