"""The ``virtualstac`` command line, run as users run it, on a saved static catalog of COGs."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pystac
import pytest
from rasterio.transform import from_origin

sys.path.insert(0, str(Path(__file__).parent / "parsers"))
from tiff_files import write_gdal

from virtualstac.cli import main
from virtualstac.stac import open_stac

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
        (["publish", "missing.json", "out"], "No such file or directory"),
        (["publish", "{catalog_dir}/S0/S0.json", "out"], "is a Feature, not a STAC Collection"),
        (
            ["publish", "{catalog}", "{tmp}/x.icechunk", "--no-progress"],
            "the assets of item 'S0' lie on 2 different grids",
        ),
        (["info", "{tmp}/nothing.json"], "nothing.json"),
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


def test_usage_errors_exit_with_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["publish", "c.json", "t", "--workers", "0"])
    assert exited.value.code == 2
    assert "--workers: must be at least 1" in capsys.readouterr().err
