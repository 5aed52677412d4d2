"""The ``virtualstac`` command line, run as users run it, on a saved static catalog of COGs."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pystac
import pytest
from rasterio.transform import from_origin

sys.path.insert(0, str(Path(__file__).parent / "parsers"))
from tiff_files import write_gdal

from faulty_servers import FaultyServer
from virtualstac.cli import main
from virtualstac.stac import open_stac
from virtualstac.writers.staging import temporary_name

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
START = dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)


def write_item(directory: Path, day: int) -> pystac.Item:
    """An item with a 10 m band B02 and a 20 m band B05, as COGs next to it."""
    directory.mkdir(parents=True)
    for band, resolution in (("B02", 10.0), ("B05", 20.0)):
        size = int(3000 / resolution)
        write_gdal(
            directory / f"{band}.tif",
            driver="COG",
            width=size,
            height=size * 2 // 3,
            transform=from_origin(500000.0, 4000000.0, resolution, resolution),
            blocksize=128,
            compress="DEFLATE",
            data=np.full((1, size * 2 // 3, size), day, "uint16"),
        )
    item = pystac.Item(
        f"S{day}",
        {"type": "Point", "coordinates": [15.0, 36.1]},
        [15.0, 36.1, 15.0, 36.1],
        START + dt.timedelta(days=day),
        {},
    )
    for band in ("B02", "B05"):
        href = str(directory / f"{band}.tif")
        item.add_asset(band, pystac.Asset(href, media_type=COG, roles=["data"]))
    return item


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    """``catalog/collection.json`` with items S0 and S1, saved self-contained."""
    items = [write_item(tmp_path / "data" / f"S{day}", day) for day in range(2)]
    collection = pystac.Collection("scenes", "two scenes", pystac.Extent.from_items(items))
    for item in items:
        collection.add_item(item)
    collection.normalize_and_save(str(tmp_path / "catalog"), pystac.CatalogType.SELF_CONTAINED)
    return tmp_path / "catalog" / "collection.json"


def test_publish_saves_the_collection_in_place(
    catalog: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = tmp_path / "scenes.icechunk"
    assert main(["publish", str(catalog), str(target), "--assets", "B02"]) == 0
    out, err = capsys.readouterr()
    assert out == (
        f"published 2 items (2 new, 0 appended, 0 already present) to {target}; saved {catalog}\n"
    )
    assert "virtualizing: 2/2" in err
    assert "writing and committing: 1/1" in err
    assert "<00:00" in err  # the bars show the time remaining
    saved = json.loads(catalog.read_text())
    assert saved["assets"]["icechunk"]["virtual:items"] == ["S0", "S1"]
    assert [link["rel"] for link in saved["links"]].count("store") == 1
    assert not any(link["rel"] == "self" for link in saved["links"])
    collection = pystac.Collection.from_file(str(catalog))
    assert len(list(collection.get_items())) == 2  # item links still resolve
    dataset = open_stac(collection)
    assert (dataset["B02"].isel(time=1).values == 1).all()


def test_publish_kerchunk_parquet_to_another_output(catalog: Path, tmp_path: Path) -> None:
    original = catalog.read_bytes()
    output = tmp_path / "published" / "collection.json"
    output.parent.mkdir()
    code = main(
        [
            "publish",
            str(catalog),
            str(tmp_path / "scenes.parq"),
            "--format",
            "kerchunk",
            "--kerchunk-format",
            "parquet",
            "--assets",
            "B02",
            "--workers",
            "2",
            "--no-progress",
            "--output",
            str(output),
        ]
    )
    assert code == 0
    assert catalog.read_bytes() == original
    collection = pystac.Collection.from_file(str(output))
    assert collection.assets["kerchunk"].extra_fields["virtual:parser"] == "kerchunk-parquet"
    assert sorted(item.id for item in collection.get_items()) == ["S0", "S1"]


def test_publish_overviews_writes_every_level(catalog: Path, tmp_path: Path) -> None:
    target = tmp_path / "scenes.icechunk"
    args = ["publish", str(catalog), str(target), "--assets", "B02", "--overviews"]
    assert main([*args, "--no-progress"]) == 0
    collection = pystac.Collection.from_file(str(catalog))
    overview = open_stac(collection, overview_level=0)  # from the published store
    assert overview["B02"].shape == (2, 100, 150)
    assert (overview["B02"].isel(time=1).values == 1).all()
    assert open_stac(collection)["B02"].shape == (2, 200, 300)


def test_info_prints_the_dataset_of_a_published_collection(
    catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = str(tmp_path / "s.icechunk")
    assert main(["publish", str(catalog), target, "--assets", "B02", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["info", str(catalog)]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"Collection scenes, opened from its published store {target}:\n")
    assert "B02          (time, y, x) uint16" in shown
    assert main(["info", "--sources", str(catalog.parent / "S0" / "S0.json")]) == 0
    parsed = capsys.readouterr().out
    assert parsed.startswith("Item S0, opened from its source assets (virtual references):")
    assert "on the grid EPSG:32633, 100 rows x 150 columns" in parsed


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["publish", "missing.json", "out"], "STAC Collection missing.json does not exist"),
        (["publish", "{catalog_dir}/S0/S0.json", "out"], "is a Feature, not a STAC Collection"),
        (
            ["publish", "{catalog}", "{tmp}/x.icechunk", "--no-progress"],
            "the assets of item 'S0' lie on 2 different grids",
        ),
        (
            ["publish", "{catalog}", "{tmp}/x.icechunk", "--no-progress"],
            "publish the assets of one grid with --assets KEY ..., and those of another grid "
            "under another --asset-key.",
        ),
        (["info", "{tmp}/nothing.json"], "nothing.json"),
        (["info", "{catalog_dir}"], "catalog is a directory, not a JSON document"),
        (["publish", "{catalog_dir}", "out"], "catalog is a directory, not a JSON document"),
        # A data file named where its catalog was meant.
        (["info", "{tmp}/data/S0/B02.tif"], "B02.tif: it is not UTF-8 JSON text (byte 0x"),
        (["publish", "{tmp}/data/S0/B02.tif", "out"], "it is not UTF-8 JSON text"),
        (
            ["publish", "http://example.com/collection.json", "out"],
            "cannot publish the collection at http://example.com/collection.json: publish "
            "saves the collection it reads, so it takes a local collection.json",
        ),
    ],
)
def test_errors_are_one_line(
    catalog: Path,
    tmp_path: Path,
    arguments: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    filled = [
        a.format(catalog=catalog, catalog_dir=catalog.parent, tmp=tmp_path) for a in arguments
    ]
    before = catalog.read_bytes()
    assert main(filled) == 1
    out, err = capsys.readouterr()
    assert out == ""
    [line] = err.splitlines()
    assert line.startswith("virtualstac: error: ")
    assert message in line
    assert catalog.read_bytes() == before


def test_info_of_an_unavailable_server_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """The document is read with timeouts and retries, and its failure named, not raised raw."""
    with FaultyServer({"item.json": b"{}"}, "unavailable") as server:
        assert main(["info", server.url_for("item.json")]) == 1
        assert server.connections == 4  # the default three retries
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("virtualstac: error: ")
    assert server.url_for("item.json") in line and "answered 503" in line


def test_the_command_exits_non_zero_without_a_traceback(catalog: Path, tmp_path: Path) -> None:
    failed = subprocess.run(
        [sys.executable, "-m", "virtualstac.cli", "publish", str(catalog), str(tmp_path / "x")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert failed.returncode == 1
    assert "Traceback" not in failed.stderr
    assert failed.stderr.splitlines()[-1].startswith("virtualstac: error: the assets of item")


def test_a_failing_republish_leaves_the_saved_collection_alone(
    catalog: Path,
    tmp_path: Path,
) -> None:
    target = tmp_path / "s.icechunk"
    assert main(["publish", str(catalog), str(target), "--assets", "B02", "--no-progress"]) == 0
    collection = pystac.Collection.from_file(str(catalog))
    collection.add_item(write_item(tmp_path / "data" / "S2", 2))
    collection.normalize_hrefs(str(catalog.parent))
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    published = catalog.read_bytes()
    (tmp_path / "data" / "S2" / "B02.tif").write_bytes(b"not a TIFF any more")
    assert main(["publish", str(catalog), str(target), "--assets", "B02", "--no-progress"]) == 1
    assert catalog.read_bytes() == published


def test_a_catalog_half_saved_by_a_killed_publish_is_removed_by_the_next(
    catalog: Path, tmp_path: Path
) -> None:
    """A publish killed while saving leaves its temporary beside the catalog; the next one,
    which finds the store it wrote and adopts it, removes it (that of a live one it keeps)."""
    target = tmp_path / "s.icechunk"
    assert main(["publish", str(catalog), str(target), "--assets", "B02", "--no-progress"]) == 0
    saved = catalog.read_bytes()
    # As if killed after the store's commit: the catalog as before, a half-written new one.
    collection = pystac.Collection.from_file(str(catalog))
    collection.add_item(write_item(tmp_path / "data" / "S2", 2))
    collection.normalize_hrefs(str(catalog.parent))
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    before = catalog.read_bytes()
    assert main(["publish", str(catalog), str(target), "--assets", "B02", "--no-progress"]) == 0
    catalog.write_bytes(before)  # the save of that publish, undone: the store is ahead
    finished = subprocess.Popen(["true"])
    finished.wait()
    dead = catalog.with_name(
        temporary_name(catalog.name).replace(f"-{os.getpid()}-", f"-{finished.pid}-")
    )
    dead.write_bytes(saved[: len(saved) // 2])
    live = catalog.with_name(temporary_name(catalog.name))  # this process: it may be writing
    live.write_bytes(b"{")

    assert main(["publish", str(catalog), str(target), "--assets", "B02", "--no-progress"]) == 0

    assert not dead.exists() and live.exists()
    recorded = json.loads(catalog.read_text())["assets"]["icechunk"]
    assert recorded["virtual:items"] == ["S0", "S1", "S2"]


@pytest.mark.parametrize(
    ("workers", "message"), [("0", "must be at least 1"), ("x", "must be a whole number, got 'x'")]
)
def test_usage_errors_exit_with_2(
    workers: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["publish", "c.json", "t", "--workers", workers])
    assert exited.value.code == 2
    assert f"--workers: {message}" in capsys.readouterr().err


def test_an_empty_target_is_refused_not_taken_for_the_working_directory(
    catalog: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``virtualstac publish c.json "$TARGET"`` with TARGET unset: the Kerchunk file would
    replace the (empty) directory the command runs in."""
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    command = ["publish", str(catalog), "", "--format", "kerchunk", "--assets", "B02"]
    assert main([*command, "--no-progress"]) == 1
    assert capsys.readouterr().err == (
        "virtualstac: error: cannot publish at '': name the store's local path or URL\n"
    )
    assert here.is_dir()
    assert "kerchunk" not in json.loads(catalog.read_text()).get("assets", {})


def run(*arguments: str, **options: object) -> subprocess.CompletedProcess[str]:
    """The installed command, as a shell runs it."""
    command = [sys.executable, "-m", "virtualstac.cli", *arguments]
    return subprocess.run(command, capture_output=True, text=True, check=False, **options)  # type: ignore[call-overload, no-any-return]


def test_version_prints_the_installed_version() -> None:
    shown = run("--version")
    assert shown.returncode == 0
    assert shown.stdout == f"virtualstac {importlib.metadata.version('virtualstac')}\n"


def test_options_of_the_other_format_are_refused_with_2(catalog: Path, tmp_path: Path) -> None:
    target = str(tmp_path / "s.icechunk")
    refused = run("publish", str(catalog), target, "--kerchunk-format", "parquet")
    assert refused.returncode == 2
    assert refused.stderr == (
        "virtualstac: error: --kerchunk-format applies to --format kerchunk, "
        "not to --format icechunk\n"
    )
    assert not Path(target).exists()


def test_info_names_every_store_it_reads(
    catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ten, twenty = tmp_path / "10m.icechunk", tmp_path / "20m.icechunk"
    for target, band in ((ten, "B02"), (twenty, "B05")):
        args = ["publish", str(catalog), str(target), "--assets", band, "--asset-key", band]
        assert main([*args, "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["info", "--json", str(catalog)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["stores"] == [str(ten), str(twenty)]
    assert summary["opened"] == str(ten)
    assert {name for d in summary["datasets"] for name in d["variables"]} >= {"B02", "B05"}
    assert len(summary["sources"]) == 4  # two items, one asset from each store
    assert main(["info", str(catalog)]) == 0
    assert f"opened from its published stores {ten}, {twenty}:" in capsys.readouterr().out


def test_info_json_summarizes_the_published_store_and_the_sources(
    catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "s.icechunk"
    assert main(["publish", str(catalog), str(target), "--assets", "B02", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["info", "--json", str(catalog)]) == 0
    published = json.loads(capsys.readouterr().out)
    assert published["type"] == "Collection" and published["id"] == "scenes"
    assert published["opened"] == str(target)
    [dataset] = published["datasets"]
    assert dataset["dims"] == {"time": 2, "y": 200, "x": 300}
    assert dataset["variables"]["B02"] == {
        "dims": ["time", "y", "x"],
        "shape": [2, 200, 300],
        "dtype": "uint16",
        "chunks": [1, 128, 128],
        "references": None,
    }
    # The item assets the store was published from (its vrt:hrefs).
    assert published["sources"] == [
        f"{catalog.parent}/S{day}/S{day}.json#/assets/B02" for day in range(2)
    ]

    item = catalog.parent / "S0" / "S0.json"
    assert main(["info", "--json", "--sources", "--no-progress", str(item)]) == 0
    parsed = json.loads(capsys.readouterr().out)
    assert parsed["opened"] == "parsed sources"
    grids = {tuple(d["grid"]["shape"]): d for d in parsed["datasets"]}
    ten_metres = grids[200, 300]
    assert ten_metres["grid"] == {
        "crs": "EPSG:32633",
        "shape": [200, 300],
        "transform": [500000.0, 10.0, 0.0, 4000000.0, 0.0, -10.0],
    }
    assert ten_metres["variables"]["B02"]["references"] == 6  # 2 x 3 tiles of 128
    assert ten_metres["variables"]["B02"]["chunks"] == [128, 128]
    references = {name: v["references"] for name, v in ten_metres["variables"].items()}
    assert references == {"B02": 6, "spatial_ref": 1, "x": None, "y": None}
    assert ten_metres["references"] == 7
    data = catalog.parent.parent / "data"
    assert parsed["sources"] == [f"file://{data / 'S0' / band}.tif" for band in ("B02", "B05")]


def test_the_summary_counts_new_appended_and_present_items(
    catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "s.icechunk"
    publish = ["publish", str(catalog), str(target), "--assets", "B02", "--no-progress"]
    assert main(publish) == 0
    collection = pystac.Collection.from_file(str(catalog))
    collection.add_item(write_item(tmp_path / "data" / "S2", 2))
    collection.normalize_hrefs(str(catalog.parent))
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    capsys.readouterr()
    assert main(publish) == 0
    assert "published 3 items (0 new, 1 appended, 2 already present)" in capsys.readouterr().out
    assert main(publish) == 0
    assert "published 3 items (0 new, 0 appended, 3 already present)" in capsys.readouterr().out


def test_another_target_needs_asset_key_or_replace(
    catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "first.icechunk", tmp_path / "second.icechunk"
    options = ["--assets", "B02", "--no-progress"]
    assert main(["publish", str(catalog), str(first), *options]) == 0
    capsys.readouterr()
    assert main(["publish", str(catalog), str(second), *options]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert f"records a published store at {first}" in line
    assert "--asset-key" in line and "--replace" in line

    def recorded(key: str) -> Path:
        """Where the saved collection's asset ``key`` points (its href may be relative)."""
        href = json.loads(catalog.read_text())["assets"][key]["href"]
        return (catalog.parent / href).resolve()

    assert main(["publish", str(catalog), str(second), *options, "--asset-key", "copy"]) == 0
    assert recorded("copy") == second
    assert recorded("icechunk") == first

    third = tmp_path / "third.icechunk"
    capsys.readouterr()
    assert main(["publish", str(catalog), str(third), *options, "--replace"]) == 0
    out, err = capsys.readouterr()
    assert "(2 new, 0 appended, 0 already present)" in out
    assert f"the old store is left untouched at {first}" in err
    assert recorded("icechunk") == third
    assert first.exists()


def test_verbose_logs_what_is_read_and_written(
    catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "s.icechunk"
    command = ["-v", "publish", str(catalog), str(target), "--assets", "B02", "--no-progress"]
    assert main(command) == 0
    err = capsys.readouterr().err
    assert f"virtualstac: parsed file://{catalog.parent.parent}/data/S0/B02.tif" in err
    assert f"virtualstac: wrote 2 new items to the icechunk store at {target}" in err
    assert f"virtualstac: saved the collection at {catalog}" in err
    assert main(["publish", str(catalog), str(target), "--assets", "B02", "--no-progress"]) == 0
    assert capsys.readouterr().err == ""  # without -v, nothing but warnings


def test_a_closed_pipe_ends_quietly(catalog: Path) -> None:
    command = [sys.executable, "-m", "virtualstac.cli", "info", "--no-progress", str(catalog)]
    # The reader is gone before the command writes, as with `| head -1` on a long output.
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        err = process.stderr.read().decode()
        status = process.wait()
    assert err == ""
    assert status == 1


def test_info_summarizes_a_saved_search_of_items(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FeatureCollection of Items (what pystac-client saves of a search) opens as the Items."""
    items = [write_item(tmp_path / "data" / f"S{day}", day) for day in range(2)]
    saved = tmp_path / "search.json"
    saved.write_text(json.dumps(pystac.ItemCollection(items).to_dict()))

    assert main(["info", "--json", str(saved)]) == 0

    summary = json.loads(capsys.readouterr().out)
    assert summary["type"] == "ItemCollection" and summary["id"] == str(saved)
    assert summary["opened"] == "parsed sources"
    assert sorted(d["dims"]["x"] for d in summary["datasets"]) == [150, 300]
    assert all(d["dims"]["time"] == 2 for d in summary["datasets"])


def test_info_of_a_catalog_names_what_it_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = pystac.Catalog("root", "a catalog of collections")
    catalog.normalize_and_save(str(tmp_path / "root"), pystac.CatalogType.SELF_CONTAINED)

    assert main(["info", str(tmp_path / "root" / "catalog.json")]) == 1

    [line] = capsys.readouterr().err.splitlines()
    assert "is a Catalog, not an Item, Collection or ItemCollection" in line


def test_a_local_prefix_to_authorize_may_be_relative_to_the_working_directory(
    catalog: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["info", str(catalog), "--authorize", "data/", "--no-progress"]) == 0
    assert "opened from its source assets" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:
        main(["info", str(catalog), "--authorize", ""])
    assert exited.value.code == 2
    assert "argument --authorize: must be a path or URL prefix, got ''" in capsys.readouterr().err


def test_the_summary_of_one_item_says_item(
    catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    collection = pystac.Collection.from_file(str(catalog))
    collection.remove_item("S1")
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    target = tmp_path / "s.icechunk"
    assert main(["publish", str(catalog), str(target), "--assets", "B02", "--no-progress"]) == 0
    assert "published 1 item (1 new, 0 appended, 0 already present)" in capsys.readouterr().out


def test_the_help_names_options_as_the_docs_do() -> None:
    shown = run("publish", "--help")
    assert shown.returncode == 0
    assert "[--workers N]" in shown.stdout and "[--output PATH]" in shown.stdout
