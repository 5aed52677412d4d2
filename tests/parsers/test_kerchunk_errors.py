"""Kerchunk references that must be refused; the Zarr v2 translation the Kerchunk parsers share."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import xarray as xr
from kerchunk_refs import (
    SIMPLE_ZARRAY,
    assert_same,
    open_fsspec,
    open_ours,
    parse_json,
    parse_parquet,
    write_refs,
)

from virtualstac.errors import InvalidPathError, SourceNotFoundError, UnregisteredURLError
from virtualstac.parsers.kerchunk import KerchunkReferenceError
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


# -- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("references", "match"),
    [
        ({"version": 2, "refs": {}}, r"unknown reference version 2"),
        ({"type": "FeatureCollection", "features": []}, r"holds no Zarr metadata \(\.zgroup"),
        ({"version": 1, "refs": {"x/0": ["/data.bin"]}}, r"so it is no Kerchunk reference set"),
        (
            {"version": 1, "refs": {"v/.zarray": SIMPLE_ZARRAY, "v/0": ["{{nope}}/x.bin", 0, 8]}},
            r"uses template \{\{nope\}\}, which is not defined",
        ),
        (
            {"v/.zarray": SIMPLE_ZARRAY, "v/0": ["/tmp/x.bin", 0]},
            r"chunk 'v/0' is \['/tmp/x.bin', 0\]; a reference is \[url\] or \[url, offset",
        ),
        ({"v/.zarray": SIMPLE_ZARRAY, "v/1": [None, 0, 8]}, r"chunk 'v/1' references None"),
        (
            {"v/.zarray": SIMPLE_ZARRAY, "v/1": [["x.bin"], 0, 8]},
            r"chunk 'v/1' references \['x\.bin'\]; a URL is a string",
        ),
        ({"v/.zarray": SIMPLE_ZARRAY, "v/1": 17}, r"chunk 'v/1' is a int"),
        # Only JSON integers are byte positions: numpy would read from byte 1, 8 and 1.
        (
            {"v/.zarray": SIMPLE_ZARRAY, "v/0": ["x.bin", 1.5, 8]},
            r"chunk 'v/0' has offset 1\.5, which is not an integer",
        ),
        (
            {"v/.zarray": SIMPLE_ZARRAY, "v/0": ["x.bin", "8", 8], "v/1": ["x.bin", 8, 8]},
            r"chunk 'v/0' has offset '8', which is not an integer",
        ),
        (
            {"v/.zarray": SIMPLE_ZARRAY, "v/0": ["x.bin"], "v/1": ["x.bin", True, 8]},
            r"chunk 'v/1' has offset True, which is not an integer",
        ),
        (
            {"v/.zarray": SIMPLE_ZARRAY, "v/0": ["x.bin", 0, 2**64 - 1]},
            r"chunk 'v/0' has length 18446744073709551615, which is out of range",
        ),
        # Reading a range that ends past 2**63 - 1 fails with the OS's bare EINVAL.
        (
            {"v/.zarray": SIMPLE_ZARRAY, "v/1": ["x.bin", 2**63 - 8, 16]},
            r"chunk 'v/1' references 16 bytes at offset 9223372036854775800, which end beyond "
            r"byte 2\*\*63 - 1",
        ),
        (
            {
                "version": 1,
                "refs": {"v/.zarray": SIMPLE_ZARRAY},
                "gen": [
                    {
                        "key": "v/{{i}}",
                        "url": "x.bin",
                        "offset": "{{ 2**63 - 1 - i }}",
                        "length": "8",
                        "dimensions": {"i": [0]},
                    }
                ],
            },
            r"chunk 'v/0' references 8 bytes at offset 9223372036854775807, which end beyond",
        ),
        # -1 is no whole object ([url] is): it is as negative as -2.
        (
            {"v/.zarray": SIMPLE_ZARRAY, "v/0": ["x.bin", 0, -1]},
            r"chunk 'v/0' has a negative offset or length \(0, -1\)",
        ),
        (
            {"v/.zarray": SIMPLE_ZARRAY, "v/0": "AAAA", "v/1": ["x.bin", -8, 8]},
            r"chunk 'v/1' has a negative offset or length \(-8, 8\)",
        ),
        (
            {"v/.zarray": SIMPLE_ZARRAY, "v/0": "base64:!!!!"},
            r"bad\.json: chunk 'v/0' inlines 'base64:!!!!', which is not valid base64",
        ),
        (
            {"v/.zarray": "base64:e30=!"},
            r"bad\.json: 'v/.zarray' is not valid base64-encoded UTF-8",
        ),
        ({"v/.zarray": "{not json"}, r"'v/.zarray' is not valid JSON"),
        (
            {"v/.zarray": SIMPLE_ZARRAY, "v/.zattrs": "[" * 100_000 + "]" * 100_000},
            r"bad\.json: 'v/.zattrs' nests JSON too deeply to read",
        ),
        (
            {
                "version": 1,
                "refs": {"v/.zarray": SIMPLE_ZARRAY},
                "gen": [{"key": "v/{{i}}", "url": "/x", "dimensions": [0, 1]}],
            },
            r"gen entry 'v/\{\{i\}\}' has dimensions \[0, 1\]; they are a JSON object",
        ),
        (
            {
                "version": 1,
                "refs": {"v/.zarray": SIMPLE_ZARRAY},
                "gen": [
                    {
                        "key": "v/{{i}}",
                        "url": "/x",
                        "offset": "{{ i|int }}",
                        "length": "8",
                        "dimensions": {"i": {"stop": 2}},
                    }
                ],
            },
            r"\{\{ i\|int \}\}.*syntax that is not supported",
        ),
        (
            {
                "version": 1,
                "refs": {"v/.zarray": SIMPLE_ZARRAY},
                "gen": [{"key": "v/{{i}}", "url": "/x", "offset": "0", "dimensions": {"i": [0]}}],
            },
            r"needs both 'offset' and 'length'",
        ),
        (
            {
                "version": 1,
                "refs": {"v/.zarray": SIMPLE_ZARRAY},
                "gen": [{"key": "v/{{k}}", "url": "/x", "dimensions": {"i": [0]}}],
            },
            r"uses 'k', which is neither a dimension nor a template",
        ),
        (
            {
                "version": 1,
                "refs": {"v/.zarray": SIMPLE_ZARRAY},
                "gen": [{"key": "v/{{ i // 0 }}", "url": "/x", "dimensions": {"i": [0]}}],
            },
            r"cannot evaluate \{\{ i // 0 \}\}.*divide by zero",
        ),
        (
            {
                "version": 1,
                "refs": {"v/.zarray": SIMPLE_ZARRAY},
                "gen": [{"key": "v/{{i}}", "url": "/{{ 'x' * 1.5 }}", "dimensions": {"i": [0]}}],
            },
            r"repeats text a number of times that is not an integer",
        ),
        (
            {
                "version": 1,
                "refs": {"v/.zarray": SIMPLE_ZARRAY},
                "gen": [
                    {
                        "key": "v/{{i}}",
                        "url": "/x",
                        "dimensions": {"i": {"start": 10**30, "stop": 10**30 + 2}},
                    }
                ],
            },
            r"gen dimension 'i' has integers beyond 64 bits",
        ),
        (
            {
                "version": 1,
                "refs": {"v/.zarray": SIMPLE_ZARRAY},
                "gen": [{"key": "v/{{i}}", "url": "/x", "dimensions": {"i": [[0, 1], [2]]}}],
            },
            r"gen dimension 'i' must list strings or numbers",
        ),
        (
            {
                "version": 1,
                "refs": {"v/.zarray": SIMPLE_ZARRAY},
                "gen": [
                    {
                        "key": "v/{{i}}",
                        "url": "/x",
                        "offset": "{{ i * 8 }}",
                        "length": "{{ i - 1 }}",  # -1 for the first: no whole-object marker
                        "dimensions": {"i": [0, 1]},
                    }
                ],
            },
            r"gen template '\{\{ i - 1 \}\}' renders a negative offset or length, -1",
        ),
    ],
)
def test_malformed_references(tmp_path: Path, references: Any, match: str) -> None:
    with pytest.raises(KerchunkReferenceError, match=match):
        parse_json(write_refs(tmp_path, references))


@pytest.mark.parametrize(
    ("version", "match"),
    [
        (5, r"source 'x\.bin' is not a JSON object"),
        ({"size": "64"}, r"source 'x\.bin' has size '64', not a byte count"),
        ({"size": -1}, r"source 'x\.bin' has size -1, not a byte count"),
        ({"etag": 7}, r"source 'x\.bin' has an etag or last_modified that is not a string"),
        ({"last_modified": "today"}, r"source 'x\.bin' has last_modified 'today', not an ISO"),
    ],
)
def test_damaged_recorded_source_versions_are_refused(
    tmp_path: Path, version: Any, match: str
) -> None:
    # A size of "64" read as a change of size, 5 as a damaged file without a reason.
    references = {
        "version": 1,
        "refs": {"v/.zarray": SIMPLE_ZARRAY, "v/0": ["x.bin", 0, 8]},
        "virtualstac": {"sources": {"x.bin": version}},
    }
    (tmp_path / "x.bin").write_bytes(bytes(16))
    with pytest.raises(
        KerchunkReferenceError, match=rf"bad\.json: the recorded version of {match}"
    ):
        parse_json(write_refs(tmp_path, references))


@pytest.mark.parametrize(
    ("source", "error", "match"),
    [
        (
            "s3://elsewhere/x.bin",
            UnregisteredURLError,
            r"bad\.json' records the version of source 's3://elsewhere/x\.bin', which cannot be "
            r"checked: reading 's3://elsewhere/x\.bin' is not allowed",
        ),
        (
            "../x.bin",
            InvalidPathError,
            r"bad\.json: the list of recorded source versions references '\.\./x\.bin', which",
        ),
    ],
)
def test_recorded_sources_that_cannot_be_checked_name_the_reference_file(
    tmp_path: Path, source: str, error: type[Exception], match: str
) -> None:
    # Named only the URL (or "chunk 'sources'"), not the references that listed it.
    references = {
        "version": 1,
        "refs": {"v/.zarray": SIMPLE_ZARRAY, "v/0": ["x.bin", 0, 8]},
        "virtualstac": {"sources": {source: {"size": 16}}},
    }
    (tmp_path / "x.bin").write_bytes(bytes(16))
    with pytest.raises(error, match=match):
        parse_json(write_refs(tmp_path, references))


def parquet_refs(tmp_path: Path, rows: dict[str, list[Any]], record_size: Any = 2) -> Path:
    """A parquet reference set of one 8-element uint8 array ``v`` in 4 chunks of 2, whose
    first record file holds ``rows`` (referencing ``data.bin``, bytes 0..255)."""
    pq = pytest.importorskip("pyarrow.parquet")
    (tmp_path / "data.bin").write_bytes(bytes(range(256)))
    root = tmp_path / "refs.parq"
    (root / "v").mkdir(parents=True)
    zarray = {**json.loads(SIMPLE_ZARRAY), "shape": [8], "dtype": "|u1", "fill_value": 0}
    metadata = {
        ".zgroup": {"zarr_format": 2},
        "v/.zarray": zarray,
        "v/.zattrs": {"_ARRAY_DIMENSIONS": ["x"]},
    }
    content = {"record_size": record_size, "metadata": metadata}
    (root / ".zmetadata").write_text(json.dumps(content))
    table = pa.table({"path": [str(tmp_path / "data.bin")] * len(rows["offset"]), **rows})
    pq.write_table(table, root / "v" / "refs.0.parq")
    return root


def test_parquet_rows_beyond_record_size_are_not_chunks(tmp_path: Path) -> None:
    """fsspec reads row i % record_size of record i // record_size: the extra rows of a
    record file are never read, and the chunks of the absent record 1 are missing."""
    root = parquet_refs(tmp_path, {"offset": [0, 2, 100, 102], "size": [2, 2, 2, 2]})
    by_fsspec = open_fsspec(str(root), remote_protocol="file")
    ours = open_ours(parse_parquet(root))

    assert_same(ours, by_fsspec)
    np.testing.assert_array_equal(ours["v"].values[4:], np.nan)  # fill value 0, masked


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        ({"offset": [0, 2], "size": [2, -1]}, r"chunk 'v/1' has a negative offset or length"),
        (
            {"offset": np.array([0, 2**64 - 1], dtype=np.uint64), "size": [2, 2]},
            r"refs\.0\.parq': column 'offset' has a value out of range",
        ),
        ({"offset": [0.0, 1.5], "size": [2, 2]}, r"refs\.0\.parq': column 'offset' holds double"),
        (
            {"offset": [0, 2**63 - 1], "size": [2, 2]},
            r"chunk 'v/1' references 2 bytes at offset 9223372036854775807, which end beyond",
        ),
    ],
)
def test_parquet_offsets_and_sizes_are_non_negative_int64(
    tmp_path: Path, rows: dict[str, Any], match: str
) -> None:
    with pytest.raises(KerchunkReferenceError, match=match):
        parse_parquet(parquet_refs(tmp_path, rows))


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        # Nulls read as 0 would read another byte range; fsspec writes 0s, never nulls.
        (
            {"offset": pa.array([None, 2], type=pa.int64()), "size": [2, 2]},
            r"refs\.0\.parq': chunk 'v/0' has a path but a null offset or size",
        ),
        (
            {"path": [b"x.bin", b"x.bin"], "offset": [0, 2], "size": [2, 2]},
            r"refs\.0\.parq': column 'path' holds binary, not string",
        ),
        (
            {"path": [None, None], "offset": [0, 0], "size": [0, 0], "raw": ["ab", "cd"]},
            r"refs\.0\.parq': column 'raw' holds string, not binary",
        ),
    ],
)
def test_malformed_parquet_rows_name_the_record_file(
    tmp_path: Path, rows: dict[str, Any], match: str
) -> None:
    with pytest.raises(KerchunkReferenceError, match=match):
        parse_parquet(parquet_refs(tmp_path, rows))


@pytest.mark.parametrize("record_size", [True, 2.5, "2", 0])
def test_a_record_size_that_is_not_a_positive_integer_is_refused(
    tmp_path: Path, record_size: Any
) -> None:
    # int() would read True as 1: each record's second row dropped, its chunks the fill value.
    root = parquet_refs(tmp_path, {"offset": [0, 2], "size": [2, 2]}, record_size=record_size)
    with pytest.raises(
        KerchunkReferenceError,
        match=rf"\.zmetadata has record_size {re.escape(repr(record_size))}, not a positive",
    ):
        parse_parquet(root)


@pytest.mark.parametrize(
    ("zarray", "match"),
    [
        ({"compressor": {"id": "no-such-codec"}}, r"array 'v'.*codec 'no-such-codec' has no"),
        (
            {"dtype": "|O", "filters": [{"id": "pickle"}]},
            r"object dtype with object codec 'pickle'",
        ),
        ({"dtype": [["a", "<i4"], ["b", ">i4"]]}, r"structured dtype .* mixes little- and"),
        ({"dtype": [["a", "<i4", [2]]]}, r"structured dtype .* has no Zarr v3 equivalent"),
        ({"fill_value": "oops"}, r"fill_value 'oops' is not a int32 value"),
        ({"chunks": [0]}, r"chunks \[0\] do not fit shape \[4\]"),
        # zarr refuses shapes that are not JSON integers; int() would read them as 4 and 2.
        ({"shape": [4.5]}, r"lacks a valid shape, chunks or dtype"),
        ({"shape": ["4"]}, r"lacks a valid shape, chunks or dtype"),
        ({"chunks": [2.7]}, r"lacks a valid shape, chunks or dtype"),
        (
            {"filters": [{"id": "zlib"}, {"id": "delta", "dtype": "<i4"}]},
            r"array filter 'delta' follows a byte filter",
        ),
        # zarr builds the codec when the first chunk is read, whose failure would then pass
        # for a damaged chunk.
        (
            {"filters": [{"id": "delta", "dtype": "<i4", "typo": 1}]},
            r"codec 'delta' has configuration .*, which numcodecs refuses \(TypeError: .*'typo'",
        ),
        ({"compressor": {"id": "blosc", "clevel": 5, "cname": "lz4", "x": 0}}, r"codec 'blosc'"),
        ({"zarr_format": 3}, r"v/\.zarray has zarr_format 3; a Zarr v2 document has 2"),
    ],
)
def test_unrepresentable_metadata(tmp_path: Path, zarray: dict[str, Any], match: str) -> None:
    document = {**json.loads(SIMPLE_ZARRAY), **zarray}
    path = write_refs(tmp_path, {"v/.zarray": json.dumps(document)})
    with pytest.raises(V2MetadataError, match=rf"bad\.json.*{match}"):
        parse_json(path)


def test_paths_may_not_climb_out_of_the_reference_directory(tmp_path: Path) -> None:
    path = write_refs(tmp_path, {"v/.zarray": SIMPLE_ZARRAY, "v/0": ["../secret.bin", 0, 8]})
    with pytest.raises(InvalidPathError, match=r"chunk 'v/0' references '../secret.bin'"):
        parse_json(path)


def test_a_group_document_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    # zarr refuses to open it; read as a group, its arrays would open regardless.
    path = write_refs(tmp_path, {".zgroup": "[1]", "v/.zarray": SIMPLE_ZARRAY})
    with pytest.raises(V2MetadataError, match=r"bad\.json: \.zgroup is not a JSON object"):
        parse_json(path)


def test_a_relative_url_with_a_nul_names_the_reference_file_and_chunk(tmp_path: Path) -> None:
    path = write_refs(tmp_path, {"v/.zarray": SIMPLE_ZARRAY, "v/0": ["x.bin\u0000y", 0, 8]})
    with pytest.raises(
        InvalidPathError,
        match=r"bad\.json: chunk 'v/0' references 'x\.bin\\x00y', which cannot be resolved: "
        r"relative path .* contains a NUL character",
    ):
        parse_json(path)


def test_whole_object_references_need_a_size(tmp_path: Path) -> None:
    path = write_refs(tmp_path, {"v/.zarray": SIMPLE_ZARRAY, "v/0": ["s3://elsewhere/x.bin"]})
    with pytest.raises(UnregisteredURLError, match=r"chunk 'v/0' references the whole object"):
        parse_json(path)
    path = write_refs(tmp_path, {"v/.zarray": SIMPLE_ZARRAY, "v/0": ["missing.bin"]})
    with pytest.raises(SourceNotFoundError, match=r"missing\.bin', which does not exist"):
        parse_json(path)


def test_missing_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(SourceNotFoundError, match=r"reference file .*nothing\.json"):
        parse_json(tmp_path / "nothing.json")
    (tmp_path / "text.json").write_text("not json")
    with pytest.raises(KerchunkReferenceError, match=r"text\.json' is not a JSON document"):
        parse_json(tmp_path / "text.json")
    (tmp_path / "empty.parq").mkdir()
    with pytest.raises(SourceNotFoundError, match=r"parquet metadata .*empty\.parq/\.zmetadata"):
        parse_parquet(tmp_path / "empty.parq")
    (tmp_path / "empty.parq" / ".zmetadata").write_text('{"metadata": {}}')
    with pytest.raises(KerchunkReferenceError, match=r"not Kerchunk parquet metadata"):
        parse_parquet(tmp_path / "empty.parq")


# -- the shared Zarr v2 translation, through ZarrParser ------------------------------------


def test_zarr_v2_store(tmp_path: Path) -> None:
    path = tmp_path / "v2.zarr"
    rng = np.random.default_rng(3)
    dataset = xr.Dataset(
        {
            "temp": (("t", "y"), rng.normal(size=(6, 4)).astype(">f4")),
            "flag": (("y",), np.array([1, 0, 1, 1], dtype="u1")),
        },
        coords={"t": np.arange(6), "y": np.arange(4) * 0.5},
        attrs={"title": "v2"},
    )
    encoding = {"temp": {"chunks": (4, 2), "_FillValue": -1.0}}
    dataset.to_zarr(path, zarr_format=2, encoding=encoding, consolidated=False)
    dataset.to_zarr(path, group="inner", zarr_format=2, consolidated=False, mode="a")
    store = ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    temp = store.group["temp"]
    assert temp.manifest.shape_chunk_grid == (2, 2)
    assert temp.manifest.get_entry((1, 1))["path"] == (path / "temp" / "1.1").as_uri()
    expected = xr.open_zarr(path, consolidated=False, chunks=None)
    assert_same(open_ours(store), expected)
    assert_same(
        open_ours(store, "inner"),
        xr.open_zarr(path, group="inner", consolidated=False, chunks=None),
    )


@pytest.mark.parametrize(
    "url",
    [
        "ftp://reader:s3cret@archive.example.org/x.bin",  # an unsupported scheme
        "file://reader:s3cret@archive.example.org/x.bin",  # a file URL with a host
        "sftp://archive.example.org/x.bin?token=s3cret",
    ],
)
def test_credentials_in_a_refused_reference_never_reach_the_message(
    tmp_path: Path, url: str
) -> None:
    """A reference file may hold URLs with credentials; a refusal names them redacted."""
    path = write_refs(tmp_path, {"v/.zarray": SIMPLE_ZARRAY, "v/0": [url, 0, 8]})
    with pytest.raises(InvalidPathError, match="chunk 'v/0'") as caught:
        parse_json(path)
    assert "s3cret" not in str(caught.value)
    assert "***" in str(caught.value)
