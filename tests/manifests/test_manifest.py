"""ChunkManifest: building, reading back, comparing and renaming chunk references."""

import pickle
from pathlib import Path

import h5py
import numpy as np
import pytest

from virtualstac import ChunkManifest
from virtualstac.errors import InvalidChunkKeyError, InvalidManifestError, InvalidPathError
from virtualstac.manifests import INLINED_CHUNK_PATH, MISSING_CHUNK_PATH

FOUR_CHUNKS = {
    "0.0.0": {"path": "s3://bucket/foo.nc", "offset": 100, "length": 100},
    "0.0.1": {"path": "s3://bucket/foo.nc", "offset": 200, "length": 100},
    "0.1.0": {"path": "s3://bucket/foo.nc", "offset": 300, "length": 100},
    "0.1.1": {"path": "s3://bucket/foo.nc", "offset": 400, "length": 100},
}


def one_chunk(path: str) -> ChunkManifest:
    return ChunkManifest({"0": {"path": path, "offset": 0, "length": 10}})


# -- construction from a dict ------------------------------------------------------------------


def test_dict_entries_define_the_chunk_grid_and_round_trip() -> None:
    manifest = ChunkManifest(FOUR_CHUNKS)

    assert manifest.shape_chunk_grid == (1, 2, 2)
    assert manifest.ndim_chunk_grid == 3
    assert len(manifest) == 4
    assert manifest.dict() == FOUR_CHUNKS
    assert ChunkManifest(manifest.dict()) == manifest


def test_an_explicit_shape_declares_a_grid_larger_than_the_keys() -> None:
    manifest = ChunkManifest(
        {"1.2": {"path": "s3://bucket/foo.nc", "offset": 0, "length": 8}}, shape=(4, 8)
    )

    assert manifest.shape_chunk_grid == (4, 8)
    assert len(manifest) == 1
    assert manifest.get_entry((0, 0)) is None
    assert manifest.get_entry((1, 2)) == {"path": "s3://bucket/foo.nc", "offset": 0, "length": 8}


def test_an_empty_manifest_needs_a_shape() -> None:
    assert ChunkManifest(entries={}, shape=(4, 8)).dict() == {}

    with pytest.raises(
        InvalidManifestError, match="needs an explicit chunk grid shape if no chunks are given"
    ):
        ChunkManifest(entries={})


def test_slash_separated_keys_are_kept_in_that_form() -> None:
    entries = {
        "0/0": {"path": "s3://bucket/foo.nc", "offset": 0, "length": 10},
        "0/1": {"path": "s3://bucket/foo.nc", "offset": 10, "length": 10},
    }
    manifest = ChunkManifest(entries, separator="/")

    assert manifest.separator == "/"
    assert manifest.shape_chunk_grid == (1, 2)
    assert manifest.dict() == entries


def test_an_unknown_separator_is_refused() -> None:
    with pytest.raises(InvalidChunkKeyError, match=r"separator must be '.' or '/'"):
        ChunkManifest(FOUR_CHUNKS, separator="_")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("entries", "shape", "message"),
    [
        ({"a.0": {}}, None, "Invalid format for chunk key: 'a.0'"),
        ({"-1.0": {}}, None, "Invalid format for chunk key: '-1.0'"),
        ({"+1": {}}, None, "Invalid format for chunk key: '\\+1'"),
        ({"0 ": {}}, None, "Invalid format for chunk key: '0 '"),
        ({"0..1": {}}, None, "Invalid format for chunk key: '0..1'"),
        ({"0.0": {}, "1": {}}, None, "Inconsistent number of dimensions: .* '1' has 1"),
        ({"0.1": {}}, (2,), "'0.1' does not have 1 indices"),
        ({"2.0": {}}, (2, 2), "'2.0' lies outside the chunk grid \\(2, 2\\)"),
        ({"1": {}, "01": {}}, None, "two chunk keys name the same chunk"),
    ],
)
def test_malformed_chunk_keys_are_refused(
    entries: dict[str, dict[str, object]], shape: tuple[int, ...] | None, message: str
) -> None:
    ref = {"path": "s3://bucket/foo.nc", "offset": 0, "length": 10}
    with pytest.raises(InvalidChunkKeyError, match=message):
        ChunkManifest({key: ref for key in entries}, shape=shape)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"path": "s3://bucket/foo.nc", "offset": -1, "length": 10}, "non-negative integers"),
        ({"path": "s3://bucket/foo.nc", "offset": 0}, "keys 'path', 'offset', 'length'"),
        ({"path": "s3://bucket/foo.nc", "offset": 0, "length": 4, "data": b"x"}, "both inlined"),
        ({"path": "", "offset": 0, "length": 4, "data": "text"}, "must be bytes"),
        ({"path": INLINED_CHUNK_PATH, "offset": 0, "length": 4}, "inlined but has no data"),
    ],
)
def test_invalid_entries_are_refused(entry: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidManifestError, match=message):
        ChunkManifest({"0": entry})


def test_entries_with_unknown_keys_are_refused() -> None:
    entry = {"path": "s3://bucket/foo.nc", "offset": 0, "length": 4, "garbage": "x"}

    with pytest.raises(InvalidManifestError, match=r"chunk '0.0' also has \['garbage'\]"):
        ChunkManifest({"0.0": entry})


def test_a_negative_grid_shape_is_refused() -> None:
    with pytest.raises(InvalidManifestError, match="must be non-negative"):
        ChunkManifest({}, shape=(2, -1))


# -- the three states of a chunk ---------------------------------------------------------------


def test_virtual_missing_and_inlined_chunks_in_one_manifest() -> None:
    manifest = ChunkManifest(
        {
            "0": {"path": "s3://bucket/foo.nc", "offset": 100, "length": 100},
            "1": {"path": MISSING_CHUNK_PATH, "offset": 0, "length": 0},
            "2": {"path": "", "offset": 0, "length": 4, "data": b"\x00\x01\x02\x03"},
        }
    )

    assert manifest.get_entry((0,)) == {"path": "s3://bucket/foo.nc", "offset": 100, "length": 100}
    assert manifest.get_entry((1,)) is None
    assert manifest.get_entry((2,)) == {
        "path": INLINED_CHUNK_PATH,
        "offset": 0,
        "length": 4,
        "data": b"\x00\x01\x02\x03",
    }
    assert len(manifest) == 2
    assert list(manifest.dict()) == ["0", "2"]
    assert [index for index, _ in manifest.iter_refs()] == [(0,), (2,)]
    assert list(manifest.iter_nonempty_paths()) == ["s3://bucket/foo.nc"]
    assert manifest.inlined == {(2,): b"\x00\x01\x02\x03"}


def test_a_manifest_reads_like_a_mapping_of_its_present_chunks() -> None:
    inlined = {"path": "", "offset": 0, "length": 2, "data": b"\x01\x02"}
    manifest = ChunkManifest(
        {**FOUR_CHUNKS, "0.1.1": inlined, "0.0.1": {"path": "", "offset": 0, "length": 0}}
    )
    present = {
        "0.0.0": FOUR_CHUNKS["0.0.0"],
        "0.1.0": FOUR_CHUNKS["0.1.0"],
        "0.1.1": {**inlined, "path": INLINED_CHUNK_PATH},
    }

    assert manifest["0.0.0"] == FOUR_CHUNKS["0.0.0"]
    assert manifest["0.1.1"]["data"] == b"\x01\x02"
    assert list(manifest) == list(manifest.keys()) == list(present)
    assert list(manifest.values()) == list(present.values())
    assert dict(manifest.items()) == present
    assert "0.1.0" in manifest
    for absent in ("0.0.1", "0.2.0", "0.0", "a.b.c", 7):
        assert absent not in manifest
    for absent in ("0.0.1", "0.2.0", "0.0"):
        with pytest.raises(KeyError):
            manifest[absent]


def test_a_scalar_manifest_has_the_one_key_0_or_c() -> None:
    entry = {"path": "s3://bucket/foo.nc", "offset": 0, "length": 8}
    manifest = ChunkManifest({"c": entry}, shape=())

    assert manifest["c"] == manifest["0"] == entry
    assert list(manifest.keys()) == ["0"]
    # Its paths are an array on the grid of no axes, as every other manifest's on its grid.
    assert manifest.paths.shape == () and manifest.paths[()] == "s3://bucket/foo.nc"


def test_the_repr_counts_inlined_chunks() -> None:
    inlined = {"path": "", "offset": 0, "length": 1, "data": b"\x01"}

    assert repr(ChunkManifest(FOUR_CHUNKS)) == "ChunkManifest<shape=(1, 2, 2)>"
    assert repr(ChunkManifest({"0": inlined, "1": inlined})) == (
        "ChunkManifest<shape=(2,), inlined_chunks=2>"
    )


def test_zero_length_references_are_refused_naming_the_chunk() -> None:
    # fsspec raises on them; missing chunks have the path "" (sparse TIFF parsers say so).
    with pytest.raises(InvalidManifestError, match=r"reference to '.*foo.nc' at index \(0, 1\)"):
        ChunkManifest(
            {
                "0.0": {"path": "s3://bucket/foo.nc", "offset": 0, "length": 10},
                "0.1": {"path": "s3://bucket/foo.nc", "offset": 10, "length": 0},
            }
        )


def test_empty_inlined_chunks_count_as_missing() -> None:
    manifest = ChunkManifest({"0": {"path": "", "offset": 0, "length": 0, "data": b""}})

    assert manifest.get_entry((0,)) is None
    assert manifest.inlined == {}


def test_get_entry_refuses_indices_outside_the_grid() -> None:
    manifest = ChunkManifest(FOUR_CHUNKS)

    with pytest.raises(InvalidChunkKeyError, match="lies outside grid"):
        manifest.get_entry((0, 2, 0))
    with pytest.raises(InvalidChunkKeyError, match="has 2 dimensions, the grid has 3"):
        manifest.get_entry((0, 0))


def test_iter_refs_yields_every_present_chunk_in_c_order() -> None:
    refs = list(ChunkManifest(FOUR_CHUNKS).iter_refs())

    assert [index for index, _ in refs] == [(0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1)]
    assert [entry["offset"] for _, entry in refs] == [100, 200, 300, 400]


# -- from_arrays and from_path_table -----------------------------------------------------------


def test_from_arrays_keeps_the_arrays_shape_as_the_grid() -> None:
    paths = np.asarray(
        [["s3://bucket/foo.nc", "s3://bucket/bar.nc"], ["", "s3://bucket/foo.nc"]],
        dtype=np.dtypes.StringDType(),
    )
    offsets = np.asarray([[100, 200], [0, 300]], dtype=np.uint64)
    lengths = np.asarray([[100, 100], [0, 100]], dtype=np.uint64)

    manifest = ChunkManifest.from_arrays(paths=paths, offsets=offsets, lengths=lengths)

    assert manifest.shape_chunk_grid == (2, 2)
    assert manifest.dict() == {
        "0.0": {"path": "s3://bucket/foo.nc", "offset": 100, "length": 100},
        "0.1": {"path": "s3://bucket/bar.nc", "offset": 200, "length": 100},
        "1.1": {"path": "s3://bucket/foo.nc", "offset": 300, "length": 100},
    }
    assert manifest.path_table == ("s3://bucket/foo.nc", "s3://bucket/bar.nc")
    assert list(manifest.paths.ravel()) == [*paths.ravel()]


def test_from_arrays_with_inlined_chunks() -> None:
    manifest = ChunkManifest.from_arrays(
        paths=np.asarray(["s3://bucket/foo.nc", ""], dtype=np.dtypes.StringDType()),
        offsets=np.asarray([100, 0], dtype=np.uint64),
        lengths=np.asarray([100, 4], dtype=np.uint64),
        inlined={(1,): b"\x00\x01\x02\x03"},
    )

    assert manifest.dict() == {
        "0": {"path": "s3://bucket/foo.nc", "offset": 100, "length": 100},
        "1": {"path": INLINED_CHUNK_PATH, "offset": 0, "length": 4, "data": b"\x00\x01\x02\x03"},
    }


@pytest.mark.parametrize("grid", [(), (1,), (1, 1), (3, 1)])
def test_from_inlined_chunk_is_the_dict_form_of_one_inlined_chunk(grid: tuple[int, ...]) -> None:
    manifest = ChunkManifest.from_inlined_chunk(b"\x00\x01\x02", grid)

    key = ".".join("0" for _ in grid) or "0"
    entry = {"path": INLINED_CHUNK_PATH, "offset": 0, "length": 3, "data": b"\x00\x01\x02"}
    assert manifest == ChunkManifest({key: entry}, shape=grid)
    assert manifest.shape_chunk_grid == grid
    assert len(manifest) == 1


def test_from_inlined_chunk_needs_a_chunk() -> None:
    with pytest.raises(InvalidManifestError, match="no chunk to inline"):
        ChunkManifest.from_inlined_chunk(b"x", (0, 1))


@pytest.mark.parametrize(
    ("arrays", "inlined", "error", "message"),
    [
        ((["s3://b/x"], [-1], [1]), None, InvalidManifestError, "offsets must be non-negative"),
        ((["s3://b/x"], [1.5], [1]), None, InvalidManifestError, "offsets must be integers"),
        ((["s3://b/x"], [1, 2], [1]), None, InvalidManifestError, "must have the same shape"),
        ((["s3://b/x"], [1], [1]), {(0,): b"x"}, InvalidManifestError, "path 's3://b/x'"),
        ((["__inlined__"], [1], [1]), None, InvalidManifestError, "inlined but has no data"),
        (([""], [1], [1]), {(3,): b"x"}, InvalidChunkKeyError, "lies outside grid \\(1,\\)"),
    ],
)
def test_from_arrays_refuses_inconsistent_input(
    arrays: tuple[list[object], ...],
    inlined: dict[tuple[int, ...], bytes] | None,
    error: type[Exception],
    message: str,
) -> None:
    paths, offsets, lengths = (np.asarray(a) for a in arrays)
    with pytest.raises(error, match=message):
        ChunkManifest.from_arrays(paths=paths, offsets=offsets, lengths=lengths, inlined=inlined)


def test_from_path_table_references_one_file_cheaply() -> None:
    manifest = ChunkManifest.from_path_table(
        path_table=["s3://bucket/a.nc", ""],
        path_codes=np.array([[0, 0], [1, 0]]),
        offsets=np.array([[0, 10], [0, 30]], dtype=np.uint64),
        lengths=np.full((2, 2), 10, dtype=np.uint64),
    )

    assert manifest.path_table == ("s3://bucket/a.nc",)
    assert manifest.get_entry((1, 0)) is None
    assert manifest.get_entry((1, 1)) == {"path": "s3://bucket/a.nc", "offset": 30, "length": 10}


def test_from_path_table_refuses_codes_outside_the_table() -> None:
    with pytest.raises(InvalidManifestError, match="path_codes must index into path_table"):
        ChunkManifest.from_path_table(
            path_table=["s3://bucket/a.nc"],
            path_codes=np.array([0, 1]),
            offsets=np.zeros(2, dtype=np.uint64),
            lengths=np.ones(2, dtype=np.uint64),
        )
    with pytest.raises(InvalidManifestError, match="path_codes must be integers"):
        ChunkManifest.from_path_table(
            path_table=["s3://bucket/a.nc"],
            path_codes=np.array([0.0]),
            offsets=np.zeros(1, dtype=np.uint64),
            lengths=np.ones(1, dtype=np.uint64),
        )
    with pytest.raises(InvalidManifestError, match="inlined chunks need from_arrays"):
        ChunkManifest.from_path_table(
            path_table=[INLINED_CHUNK_PATH],
            path_codes=np.array([0]),
            offsets=np.zeros(1, dtype=np.uint64),
            lengths=np.ones(1, dtype=np.uint64),
        )


def test_references_to_a_real_hdf5_file_match_h5pys_chunk_index(tmp_path: Path) -> None:
    path = tmp_path / "chunks.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=np.arange(64, dtype="<i4").reshape(8, 8), chunks=(4, 4))
    with h5py.File(path, "r") as f:
        infos = [f["v"].id.get_chunk_info(i) for i in range(f["v"].id.get_num_chunks())]

    manifest = ChunkManifest(
        {
            f"{info.chunk_offset[0] // 4}.{info.chunk_offset[1] // 4}": {
                "path": str(path),
                "offset": info.byte_offset,
                "length": info.size,
            }
            for info in infos
        }
    )

    assert manifest.shape_chunk_grid == (2, 2)
    assert manifest.path_table == (path.as_uri(),)
    assert sorted(manifest.offsets.ravel().tolist()) == sorted(i.byte_offset for i in infos)
    assert set(manifest.lengths.ravel().tolist()) == {4 * 4 * 4}


# -- immutability, comparison, pickling --------------------------------------------------------


def test_manifest_arrays_are_read_only() -> None:
    manifest = ChunkManifest(FOUR_CHUNKS)

    with pytest.raises(ValueError, match="read-only"):
        manifest.offsets[0, 0, 0] = 0
    with pytest.raises(ValueError, match="read-only"):
        manifest.lengths[0, 0, 0] = 0
    manifest.paths[0, 0, 0] = "s3://elsewhere/x"  # a copy: the manifest is unchanged
    assert manifest.dict() == FOUR_CHUNKS


def test_elementwise_eq_marks_the_chunks_that_differ() -> None:
    changed = dict(FOUR_CHUNKS)
    changed["0.1.0"] = {"path": "s3://bucket/foo.nc", "offset": 999, "length": 100}

    equal = ChunkManifest(FOUR_CHUNKS).elementwise_eq(ChunkManifest(changed))

    assert equal.tolist() == [[[True, True], [False, True]]]


def test_elementwise_eq_compares_inlined_bytes() -> None:
    def inlined(data: bytes) -> ChunkManifest:
        return ChunkManifest({"0": {"path": "", "offset": 0, "length": 1, "data": data}})

    assert inlined(b"a") == inlined(b"a")
    assert inlined(b"a") != inlined(b"b")
    assert inlined(b"a").elementwise_eq(inlined(b"b")).tolist() == [False]


def test_elementwise_eq_needs_equal_grids() -> None:
    with pytest.raises(InvalidManifestError, match="chunk grids differ"):
        ChunkManifest(FOUR_CHUNKS).elementwise_eq(one_chunk("s3://bucket/foo.nc"))


def test_equality_of_whole_manifests() -> None:
    manifest = ChunkManifest(FOUR_CHUNKS)

    assert manifest == ChunkManifest(dict(reversed(FOUR_CHUNKS.items())))
    assert manifest != ChunkManifest(FOUR_CHUNKS, shape=(2, 2, 2))
    assert manifest != manifest.rename_paths("s3://bucket/bar.nc")
    assert manifest != FOUR_CHUNKS


def test_pickling_carries_inlined_bytes() -> None:
    manifest = ChunkManifest(
        {
            "0/0": {"path": "s3://bucket/foo.nc", "offset": 100, "length": 100},
            "0/1": {"path": "", "offset": 0, "length": 4, "data": b"\x00\x01\x02\x03"},
        },
        separator="/",
    )

    restored = pickle.loads(pickle.dumps(manifest))

    assert restored == manifest
    assert restored.separator == "/"
    assert restored.get_entry((0, 1)) == manifest.get_entry((0, 1))
    assert not restored.offsets.flags.writeable


# -- renaming ----------------------------------------------------------------------------------


def test_rename_paths_to_one_new_path() -> None:
    renamed = ChunkManifest(FOUR_CHUNKS).rename_paths("s3://other/bar.nc")

    assert renamed.path_table == ("s3://other/bar.nc",)
    assert [e["offset"] for e in renamed.dict().values()] == [100, 200, 300, 400]


def test_rename_paths_with_a_function_keeps_missing_and_inlined_chunks() -> None:
    manifest = ChunkManifest(
        {
            "0": {"path": "/work/data/air.nc", "offset": 100, "length": 100},
            "1": {"path": "/work/data/sst.nc", "offset": 200, "length": 100},
            "2": {"path": "", "offset": 0, "length": 0},
            "3": {"path": "", "offset": 0, "length": 2, "data": b"ab"},
        }
    )

    def local_to_s3(old: str) -> str:
        return "s3://my-bucket/" + Path(old).name

    renamed = manifest.rename_paths(local_to_s3)

    assert renamed.dict() == {
        "0": {"path": "s3://my-bucket/air.nc", "offset": 100, "length": 100},
        "1": {"path": "s3://my-bucket/sst.nc", "offset": 200, "length": 100},
        "3": {"path": INLINED_CHUNK_PATH, "offset": 0, "length": 2, "data": b"ab"},
    }
    assert manifest.path_table == ("file:///work/data/air.nc", "file:///work/data/sst.nc")


def test_renamed_paths_are_validated() -> None:
    manifest = ChunkManifest(FOUR_CHUNKS)

    with pytest.raises(InvalidPathError, match=r"relative chunk path 'foo.nc'"):
        manifest.rename_paths(lambda old: old.rsplit("/", 1)[-1])
    with pytest.raises(TypeError, match="new must be a string or a callable"):
        manifest.rename_paths(42)  # type: ignore[arg-type]


class TestSourceStamps:
    """Each referenced object's version travels with its references."""

    def stamped(self, path: str, second: int) -> ChunkManifest:
        from datetime import UTC, datetime

        from virtualstac.manifests.sources import SourceStamp

        manifest = ChunkManifest({"0": {"path": path, "offset": 0, "length": 8}})
        stamp = SourceStamp(datetime(2024, 1, 1, 0, 0, second, 250_000, tzinfo=UTC), '"e"', 8)
        return manifest.with_source_stamps({path: stamp, "s3://bucket/unreferenced": stamp})

    def test_stamps_are_kept_for_referenced_paths_only(self) -> None:
        manifest = self.stamped("s3://bucket/a.nc", 1)
        assert list(manifest.source_stamps) == ["s3://bucket/a.nc"]

    def test_checksum_rounds_up_to_a_whole_second(self) -> None:
        stamp = self.stamped("s3://bucket/a.nc", 1).source_stamps["s3://bucket/a.nc"]
        assert stamp.last_modified_ceiling().isoformat() == "2024-01-01T00:00:02+00:00"

    def test_stamping_again_with_the_same_version_changes_nothing(self) -> None:
        manifest = self.stamped("s3://bucket/a.nc", 1)
        again = manifest.with_source_stamps(dict(manifest.source_stamps))
        assert again is manifest

    def test_a_newer_stamp_replaces_the_old_one_in_a_new_manifest(self) -> None:
        old = self.stamped("s3://bucket/a.nc", 1)
        new = self.stamped("s3://bucket/a.nc", 2)
        restamped = old.with_source_stamps(dict(new.source_stamps))
        assert restamped.source_stamps == new.source_stamps
        assert old.source_stamps != new.source_stamps
        assert restamped == old  # the same references

    def test_concatenation_merges_stamps(self) -> None:
        from virtualstac.manifests.grid_ops import concatenate_manifests

        joined = concatenate_manifests(
            [self.stamped("s3://bucket/a.nc", 1), self.stamped("s3://bucket/b.nc", 2)], axis=0
        )
        assert set(joined.source_stamps) == {"s3://bucket/a.nc", "s3://bucket/b.nc"}

    def test_one_file_in_two_versions_is_refused(self) -> None:
        from virtualstac.errors import IncompatibleArraysError
        from virtualstac.manifests.grid_ops import concatenate_manifests

        with pytest.raises(IncompatibleArraysError, match="two versions"):
            concatenate_manifests(
                [self.stamped("s3://bucket/a.nc", 1), self.stamped("s3://bucket/a.nc", 2)], axis=0
            )

    def test_stamps_survive_pickling_and_are_dropped_by_renaming(self) -> None:
        import pickle

        manifest = self.stamped("s3://bucket/a.nc", 1)
        assert pickle.loads(pickle.dumps(manifest)).source_stamps == manifest.source_stamps
        assert manifest.rename_paths("s3://other/a.nc").source_stamps == {}

    def test_path_codes_index_the_path_table(self) -> None:
        manifest = ChunkManifest.from_arrays(
            paths=np.asarray(["s3://b/x", "", "s3://b/y", ""], dtype=np.dtypes.StringDType()),
            offsets=np.zeros(4, np.uint64),
            lengths=np.full(4, 4, np.uint64),
            inlined={(3,): b"abcd"},
        )
        assert manifest.path_table == ("s3://b/x", "s3://b/y")
        assert manifest.path_codes.tolist() == [0, -2, 1, -1]
