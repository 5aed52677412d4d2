"""Kerchunk reference sets that claim more than memory holds are refused before allocating.

Bombs: ``gen`` entries over a billion keys or repeating text a billion-fold, an array of a
billion chunks, Parquet reference sets of a billion single-row record files, and a gzip stream
that inflates to gigabytes. Each raises :class:`LimitExceededError` saying the figure, the
limit and how to raise it. A ``gen`` template computing ``9**9**9`` is malformed
(:class:`KerchunkReferenceError`), refused before computing.
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

import bounded
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tifffile
import zarr

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


def gen_refs(**entry: Any) -> dict[str, Any]:
    """A reference set whose single ``gen`` entry is ``entry``, over array ``v``."""
    return {
        "version": 1,
        "refs": {".zgroup": '{"zarr_format": 2}', "v/.zarray": zarray([20_000], [1])},
        "gen": [{"key": "v/{{i}}", "url": "data.bin", **entry}],
    }


@pytest.mark.parametrize("field", ["key", "offset"])
def test_gen_powers_of_powers_are_refused_before_computing(tmp_path: Path, field: str) -> None:
    """``9**9**9`` has 370 million digits: computing it took hours."""
    entry: dict[str, Any] = {"offset": "0", "length": "4", "dimensions": {"i": [0]}}
    entry[field] = "v/{{ 9**9**9 }}" if field == "key" else "{{ 9**9**9 }}"
    path = write_json(tmp_path, gen_refs(**entry))

    with pytest.raises(KerchunkReferenceError) as raised:
        parse_json(path)

    message = str(raised.value)
    assert str(path) in message
    assert "{{ 9**9**9 }}" in message
    assert "an integer of more than 1024 bits" in message


def test_gen_text_repeated_a_million_fold_is_refused_with_memory_capped(tmp_path: Path) -> None:
    """200-byte templates asking for gigabytes, once or repeated over 20,000 keys."""
    bombs = {
        "per_key.json": gen_refs(url="{{ 'a' * 200000 }}", dimensions={"i": {"stop": 20_000}}),
        "once.json": gen_refs(url="{{ 'a' * 300000000 }}", dimensions={"i": [0]}),
        "formatted.json": gen_refs(url="{{ '%0300000000d' % i }}", dimensions={"i": [0]}),
        "dimension.json": gen_refs(
            url="{{ name }}", dimensions={"name": ["a" * 200_000], "i": {"stop": 20_000}}
        ),
    }
    paths = [write_json(tmp_path, references, name) for name, references in bombs.items()]

    out = bounded.run_capped(
        f"""
        from virtualstac.errors import LimitExceededError
        from virtualstac.parsers.kerchunk import KerchunkJSONParser
        from virtualstac.storage.registry import ObjectStoreRegistry
        for url in {[path.as_uri() for path in paths]!r}:
            try:
                KerchunkJSONParser()(url, ObjectStoreRegistry.for_url(url))
            except LimitExceededError as err:
                print(err)
        """
    )

    refusals = out.splitlines()
    assert len(refusals) == len(paths)
    for path, refusal in zip(paths, refusals, strict=True):
        assert str(path) in refusal
        assert "more than the limit of 67,108,864 (metadata_bytes)" in refusal
    # The keys (128,890 characters) came first.
    assert "render 4,000,128,890 characters (gen template \"{{ 'a' * 200000 }}\")" in refusals[0]


def test_gen_text_repeated_a_float_number_of_times_is_refused(tmp_path: Path) -> None:
    path = write_json(tmp_path, gen_refs(url="{{ 'a' * 3e9 }}", dimensions={"i": [0]}))

    with pytest.raises(KerchunkReferenceError, match=r"'a' \* 3e9.*not an integer"):
        parse_json(path)


def test_the_text_of_all_gen_entries_counts_against_metadata_bytes(tmp_path: Path) -> None:
    """Each entry renders 500 characters of URLs (and 50 of keys); together they are 1,100."""
    entry = {"key": "v/{{i}}", "url": "{{ 'u' * 50 }}", "dimensions": {"i": {"stop": 10}}}
    second = {**entry, "key": "v/{{ i + 10 }}"}
    (tmp_path / ("u" * 50)).write_bytes(bytes(4))
    references = gen_refs(**entry)
    references["gen"].append(second)
    path = write_json(tmp_path, references)

    with virtualstac.limits.limits(metadata_bytes=1000):
        with pytest.raises(LimitExceededError, match=r"render 1,0\d\d characters"):
            parse_json(path)
    with virtualstac.limits.limits(metadata_bytes=1100):
        store = parse_json(path)

    manifest = store.group["v"].manifest
    assert manifest.path_table == ((tmp_path / ("u" * 50)).as_uri(),)
    assert manifest.lengths[:20].tolist() == [4] * 20


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


def test_a_plain_json_file_beyond_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = write_json(tmp_path, {".zgroup": '{"zarr_format": 2}', "pad": " " * 2**20})

    with virtualstac.limits.limits(metadata_bytes=2**20):
        with pytest.raises(LimitExceededError, match=r"refs\.json: the metadata document has"):
            parse_json(path)
    with virtualstac.limits.limits(metadata_bytes=2 * 2**20):
        assert parse_json(path).group.arrays == {}


def test_a_parquet_zmetadata_beyond_the_limit_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "refs.parq"
    root.mkdir()
    metadata = {".zgroup": '{"zarr_format": 2}', ".zattrs": json.dumps({"pad": "x" * 100_000})}
    (root / ".zmetadata").write_text(json.dumps({"metadata": metadata, "record_size": 10}))

    with virtualstac.limits.limits(metadata_bytes=1000):
        with pytest.raises(LimitExceededError, match=r"\.zmetadata: the metadata document has"):
            KerchunkParquetParser()(str(root), registry_for(root))
    store = KerchunkParquetParser()(str(root), registry_for(root))
    assert store.group.metadata.attributes["pad"] == "x" * 100_000


def test_a_parquet_record_beyond_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """Record files are read whole, so they are bounded as metadata documents are."""
    root = tmp_path / "refs.parq"
    (root / "v").mkdir(parents=True)
    metadata = {".zgroup": '{"zarr_format": 2}', "v/.zarray": zarray([4], [2])}
    (root / ".zmetadata").write_text(json.dumps({"metadata": metadata, "record_size": 2}))
    (tmp_path / "data.bin").write_bytes(bytes(16))
    noise = np.random.default_rng(0).bytes(50_000)  # incompressible, so the file is this big
    table = pa.table(
        {
            "path": [str(tmp_path / "data.bin")] * 2,
            "offset": [0, 8],
            "size": [8, 8],
            "raw": [noise, None],
        }
    )
    pq.write_table(table, root / "v" / "refs.0.parq")

    with virtualstac.limits.limits(metadata_bytes=20_000):
        with pytest.raises(LimitExceededError, match=r"v/refs\.0\.parq: the metadata document"):
            KerchunkParquetParser()(str(root), registry_for(root))


def write_inline_record(tmp_path: Path, rows: int, raw: Any) -> Path:
    """A parquet reference set of one array of ``rows`` one-byte chunks, all inlined by ``raw``
    in one zstd record file."""
    root = tmp_path / "refs.parq"
    (root / "v").mkdir(parents=True)
    metadata = {".zgroup": '{"zarr_format": 2}', "v/.zarray": zarray([rows], [1])}
    (root / ".zmetadata").write_text(json.dumps({"metadata": metadata, "record_size": rows}))
    zeros = pa.array(np.zeros(rows, dtype=np.int64))
    table = pa.table({"path": pa.nulls(rows, pa.string()), "offset": zeros, "size": zeros})
    pq.write_table(table.append_column("raw", raw), root / "v" / "refs.0.parq", compression="zstd")
    return root


def test_a_parquet_record_that_decompresses_beyond_the_limit_is_refused(tmp_path: Path) -> None:
    """A few kilobytes of zstd held megabytes of zeros (gigabytes, a few more kilobytes on): the
    record file was decompressed whole before anything was checked."""
    raw = pa.array([bytes([i]) * 1_000_000 for i in range(4)], pa.binary())
    root = write_inline_record(tmp_path, 4, raw)
    assert (root / "v" / "refs.0.parq").stat().st_size < 20_000
    with (
        virtualstac.limits.limits(metadata_bytes=1_000_000),
        pytest.raises(
            LimitExceededError, match=r"v/refs\.0\.parq: the record file decompresses to 4,000,"
        ),
    ):
        KerchunkParquetParser()(str(root), registry_for(root))


def test_an_inline_value_repeated_on_every_row_is_refused_before_it_is_copied(
    tmp_path: Path,
) -> None:
    """A dictionary-encoded raw value of 1 MB on each of 20,000 rows is a 1.3 KB record file
    that took 20 GB to read (MemoryError, or the process killed)."""
    indices = pa.array(np.zeros(20_000, dtype=np.int32))
    raw = pa.DictionaryArray.from_arrays(indices, pa.array([bytes(10**6)], pa.binary()))
    root = write_inline_record(tmp_path, 20_000, raw)
    assert (root / "v" / "refs.0.parq").stat().st_size < 10_000
    output = bounded.run_capped(
        f"""
        from virtualstac.errors import LimitExceededError
        from virtualstac.parsers.kerchunk import KerchunkParquetParser
        from virtualstac.storage.registry import ObjectStoreRegistry
        url = {root.as_uri()!r}
        try:
            KerchunkParquetParser()(url, ObjectStoreRegistry.for_url(url))
        except LimitExceededError as err:
            print(err)
        """
    )
    assert "v/refs.0.parq: its rows inline 20,000,000,000 bytes" in output
    assert "(metadata_bytes)" in output


def test_the_default_limit_bounds_parsing_a_gzip_of_empty_lists(tmp_path: Path) -> None:
    """JSON of tiny values parses to ~25 times its bytes: 100 MiB of "[]," from a 100 kB file
    would take 2.5 GB. The default metadata_bytes refuses it before json.loads."""
    count = 100 * 2**20 // 3
    path = tmp_path / "refs.json.gz"
    path.write_bytes(gzip.compress(b'{"x": [' + b"[]," * count + b"[]]}", compresslevel=9))
    assert path.stat().st_size < 2**20

    with pytest.raises(LimitExceededError, match=r"inflates to more than 67,108,864 bytes"):
        parse_json(path)


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


def test_groups_nested_beyond_the_depth_limit_are_refused_naming_the_depth(
    tmp_path: Path,
) -> None:
    """Deeper than Python's recursion allows (was a 'damaged (RecursionError)' file)."""
    deep = "/".join(["g"] * 2000)
    path = write_json(
        tmp_path, {".zgroup": '{"zarr_format": 2}', f"{deep}/v/.zarray": zarray([4], [2])}
    )

    message = r"refs\.json: its groups nest 2,001 deep: .* limit of 100 \(group_depth\)"
    with pytest.raises(LimitExceededError, match=message):
        parse_json(path)


def test_groups_nested_to_the_depth_limit_open(tmp_path: Path) -> None:
    path = write_json(
        tmp_path, {".zgroup": '{"zarr_format": 2}', "a/b/c/v/.zarray": zarray([4], [2])}
    )

    with virtualstac.limits.limits(group_depth=3):
        with pytest.raises(LimitExceededError, match=r"nest 4 deep"):
            parse_json(path)
    with virtualstac.limits.limits(group_depth=4):
        store = parse_json(path)

    assert store.group["a/b/c/v"].shape == (4,)


def test_opening_time_grows_with_the_number_of_arrays_not_its_square(tmp_path: Path) -> None:
    """Each array and group looked for its keys and children among all of them: 8,000 groups of
    one array each (a 1 MB file, far below every limit) took over a minute, and 16 times the
    arrays took 30 to 60 times as long."""
    one_chunk = zarray([2], [2])

    def seconds_to_open(groups: int) -> float:
        references = {".zgroup": '{"zarr_format": 2}'}
        for i in range(groups):
            references[f"g{i}/.zgroup"] = '{"zarr_format": 2}'
            references[f"g{i}/a/.zarray"] = one_chunk
            references[f"g{i}/a/0"] = ["x.bin", 0, 8]
        path = write_json(tmp_path, references, f"groups{groups}.json")
        start = time.process_time()  # CPU time: other processes on the machine do not count
        store = parse_json(path)
        elapsed = time.process_time() - start
        assert len(store.group.groups) == groups
        assert store.group[f"g{groups - 1}/a"].manifest.lengths.tolist() == [8]
        return elapsed

    seconds_to_open(50)  # imports and caches warmed up
    ratio = seconds_to_open(6000) / seconds_to_open(500)
    assert ratio < 30, f"12 times the arrays took {ratio:.0f} times as long to open"


def test_arrays_beyond_the_first_few_find_their_own_references(tmp_path: Path) -> None:
    """Past a few arrays, keys are found by binary search in sorted keys: each array must still
    get exactly its own references, plain and generated, with "." and "/" separators."""
    values = np.arange(40 * 4, dtype="<f4")
    (tmp_path / "x.bin").write_bytes(values.tobytes())
    two_by_two = {**json.loads(zarray([2, 2], [1, 2])), "dimension_separator": "/"}
    references: dict[str, Any] = {".zgroup": '{"zarr_format": 2}'}
    for i in range(40):
        references[f"v{i}/.zarray"] = zarray([4], [2])
        references[f"v{i}/0"] = ["x.bin", 16 * i, 8]
        references[f"s{i}/.zarray"] = json.dumps(two_by_two)
        references[f"s{i}/0/0"] = ["x.bin", 16 * i, 8]
    # gen gives every v{i} its second chunk and every s{i} its second row; v1 and v10 share
    # a prefix, so a sloppy prefix search would mix them up.
    generators = [
        {
            "key": f"{name}{{{{i}}}}{key}",
            "url": "x.bin",
            "offset": "{{ 16 * i + 8 }}",
            "length": "8",
            "dimensions": {"i": {"stop": 40}},
        }
        for name, key in (("v", "/1"), ("s", "/1/0"))
    ]
    path = write_json(tmp_path, {"version": 1, "refs": references, "gen": generators})
    group = zarr.open_group(parse_json(path), mode="r")
    for i in range(40):
        expected = values[4 * i : 4 * i + 4]
        np.testing.assert_array_equal(group[f"v{i}"][:], expected, err_msg=f"v{i}")
        np.testing.assert_array_equal(group[f"s{i}"][:], expected.reshape(2, 2), err_msg=f"s{i}")


@pytest.mark.parametrize("reference", [["data.bin", 0, 4096], ["data.bin"]])
def test_a_reference_longer_than_chunk_bytes_is_refused_before_it_is_read(
    tmp_path: Path, reference: list[Any]
) -> None:
    """A read holds a chunk's stored bytes whole: a 16-byte chunk referencing a range of a huge
    object (or the whole of one) was fetched into memory before its decoding failed, 1.5 GB
    of it for a 1.5 GB local file."""
    (tmp_path / "data.bin").write_bytes(bytes(4096))
    path = write_json(tmp_path, {"v/.zarray": zarray([4], [4]), "v/0": reference})
    with (
        virtualstac.limits.limits(chunk_bytes=1024),
        pytest.raises(
            LimitExceededError,
            match=r"refs\.json: chunk 'v/0' references 4,096 stored bytes: 4,096 is more than "
            r"the limit of 1,024 \(chunk_bytes\)",
        ),
    ):
        parse_json(path)
