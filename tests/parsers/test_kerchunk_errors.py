"""Kerchunk references that must be refused; the Zarr v2 translation the Kerchunk parsers share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
from kerchunk_refs import (
    SIMPLE_ZARRAY,
    assert_same,
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
        (
            {"version": 1, "refs": {"v/.zarray": SIMPLE_ZARRAY, "v/0": ["{{nope}}/x.bin", 0, 8]}},
            r"uses template \{\{nope\}\}, which is not defined",
        ),
        (
            {"v/.zarray": SIMPLE_ZARRAY, "v/0": ["/tmp/x.bin", 0]},
            r"chunk 'v/0' is \['/tmp/x.bin', 0\]; a reference is \[url\] or \[url, offset",
        ),
        ({"v/.zarray": SIMPLE_ZARRAY, "v/1": [None, 0, 8]}, r"chunk 'v/1' references None"),
        ({"v/.zarray": SIMPLE_ZARRAY, "v/1": 17}, r"chunk 'v/1' is a int"),
        ({"v/.zarray": "{not json"}, r"'v/.zarray' is not valid JSON"),
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
    ],
)
def test_malformed_references(tmp_path: Path, references: Any, match: str) -> None:
    with pytest.raises(KerchunkReferenceError, match=match):
        parse_json(write_refs(tmp_path, references))


@pytest.mark.parametrize(
    ("zarray", "match"),
    [
        ({"compressor": {"id": "no-such-codec"}}, r"array 'v'.*codec 'no-such-codec' has no"),
        (
            {"dtype": "|O", "filters": [{"id": "pickle"}]},
            r"object dtype with object codec 'pickle'",
        ),
        ({"dtype": [["a", "<i4"]]}, r"structured dtype"),
        ({"fill_value": "oops"}, r"fill_value 'oops' is not a int32 value"),
        ({"chunks": [0]}, r"chunks \[0\] do not fit shape \[4\]"),
        (
            {"filters": [{"id": "zlib"}, {"id": "delta", "dtype": "<i4"}]},
            r"array filter 'delta' follows a byte filter",
        ),
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
