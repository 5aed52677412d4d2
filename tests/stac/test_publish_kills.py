"""``virtualstac publish`` killed (SIGKILL) at moments told by the files it writes, then rerun.

Each scenario starts real ``virtualstac publish`` processes (the console script) on copies of
one saved catalog, and kills each as soon as its own sign appears: a staged temporary, a new
Icechunk manifest or snapshot, a replaced reference file, the catalog's temporary. Where
exactly the kill lands after the sign is up to the scheduler; what must hold is the same
wherever it lands: the catalog parses and opens with the values it had (or, if the kill came
after its save, is the complete result), and a rerun (in this process, through the same
``main``) completes with every item and leaves no temporaries. All the processes run at once:
their imports dominate, and the file's time stays near a minute on a busy 2-core machine.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pystac
import pytest
import xarray as xr
from rasterio.transform import from_origin

sys.path.insert(0, str(Path(__file__).parents[1] / "parsers"))
from tiff_files import pixels, write_gdal

from virtualstac.cli import main
from virtualstac.stac import open_stac

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
START = dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)
# The console script of this environment, or the module where it has none (e.g. a user install).
SCRIPT = Path(sys.executable).with_name("virtualstac")
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "virtualstac.cli"]
# How long one killed run may take before the test gives up on it (imports included).
PATIENCE = 240.0

# Called when the process starts (to note how things are), it returns the test for the sign.
Sign = Callable[["Scene"], Callable[[], bool]]


def write_band(data: Path, day: int) -> Path:
    """The small 10 m COG band ``B02`` of day ``day``."""
    directory = data / f"S{day}"
    directory.mkdir(parents=True)
    return write_gdal(
        directory / "B02.tif",
        driver="COG",
        width=64,
        height=48,
        transform=from_origin(500000.0, 4000000.0, 10.0, 10.0),
        blocksize=32,
        compress="DEFLATE",
        overviews=(),
        data=pixels(1, 48, 64, "uint16", seed=day),
    )


def make_item(day: int, band: Path) -> pystac.Item:
    item = pystac.Item(
        f"S{day}",
        {"type": "Point", "coordinates": [15.0, 36.1]},
        [15.0, 36.1, 15.0, 36.1],
        START + dt.timedelta(days=day),
        {},
    )
    item.add_asset("B02", pystac.Asset(str(band), media_type=COG, roles=["data"]))
    return item


def expected_values(days: int) -> np.ndarray:
    return np.stack([pixels(1, 48, 64, "uint16", seed=day)[0] for day in range(days)])


@dataclass
class Scene:
    """One copy of the catalog, its target, and what it opened as before the kill."""

    root: Path
    target: Path
    arguments: list[str]
    before: bytes = b""
    values: np.ndarray | None = None

    @property
    def catalog(self) -> Path:
        return self.root / "catalog" / "collection.json"

    def command(self) -> list[str]:
        return ["publish", str(self.catalog), str(self.target), *self.arguments, "--no-progress"]


def prepare(
    root: Path, bands: list[Path], target_name: str, arguments: list[str], *, published: int
) -> Scene:
    """A catalog of S0..S2 whose first ``published`` items are published (in-process)."""
    items = [make_item(day, band) for day, band in enumerate(bands)]
    catalog = root / "catalog"
    collection = pystac.Collection("scenes", "scenes", pystac.Extent.from_items(items))
    for item in items[: published or len(items)]:
        collection.add_item(item)
    collection.normalize_and_save(str(catalog), pystac.CatalogType.SELF_CONTAINED)
    scene = Scene(root, root / target_name, arguments)
    if published:
        assert main(scene.command()) == 0
        collection = pystac.Collection.from_file(str(scene.catalog))
        collection.add_item(items[published])
        collection.normalize_hrefs(str(catalog))
        collection.save(pystac.CatalogType.SELF_CONTAINED)
    scene.before = scene.catalog.read_bytes()
    scene.values = published_values(scene.catalog)
    return scene


def published_values(catalog: Path) -> np.ndarray | None:
    """The values of the catalog's published store as it opens; None if it has none."""
    collection = pystac.Collection.from_file(str(catalog))
    return opened_store(collection)["B02"].values if collection.assets else None


def opened_store(collection: pystac.Collection) -> xr.Dataset:
    """The collection's published store, opened as its publisher does: the sources lie outside
    the catalog's directory, so the publisher authorizes them (docs/security.md)."""
    sources = [
        asset.get_absolute_href() or asset.href
        for item in collection.get_items()
        for asset in item.assets.values()
    ]
    return open_stac(collection, authorize=[Path(os.path.commonpath(sources)).as_uri() + "/"])


def _temporaries(path: Path) -> list[Path]:
    """Temporaries of ``path`` beside it: a staged version (or an old one being removed)."""
    return [
        Path(entry.path)
        for entry in os.scandir(path.parent)
        if entry.name.startswith((f"{path.name}.tmp-", f"{path.name}.old-"))
    ]


def staged(scene: Scene) -> Callable[[], bool]:
    return lambda: bool(_temporaries(scene.target))


def committing_beside(scene: Scene) -> Callable[[], bool]:
    """A staged new repository has a manifest: its commit is being written."""
    return lambda: any((p / "manifests").is_dir() for p in _temporaries(scene.target))


def present(scene: Scene) -> Callable[[], bool]:
    return scene.target.exists


def saving_catalog(scene: Scene) -> Callable[[], bool]:
    return lambda: bool(_temporaries(scene.catalog))


def grown(folder: str) -> Sign:
    """More files in the repository's ``folder`` than when the run started."""

    def start(scene: Scene) -> Callable[[], bool]:
        directory = scene.target / folder
        count = len(os.listdir(directory))
        return lambda: len(os.listdir(directory)) > count

    return start


def replaced(scene: Scene) -> Callable[[], bool]:
    """The target is another file or directory than when the run started (renamed over)."""
    inode = os.stat(scene.target).st_ino
    return lambda: os.stat(scene.target).st_ino != inode


def run_killed(scenes: list[tuple[Scene, Sign]]) -> list[int | None]:
    """Start one publish per scene, kill each when its sign appears; their exit statuses."""
    processes = []
    tests = []
    for scene, sign in scenes:
        tests.append(sign(scene))
        command = [*COMMAND, *scene.command()]
        processes.append(subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE))
    deadline = time.monotonic() + PATIENCE
    pending = set(range(len(processes)))
    while pending and time.monotonic() < deadline:
        for index in sorted(pending):
            process = processes[index]
            if process.poll() is not None:
                pending.discard(index)
            elif _safely(tests[index]):
                process.send_signal(signal.SIGKILL)
                pending.discard(index)
        time.sleep(0.005)
    for process in processes:
        if process.poll() is None and pending:
            process.kill()
        process.communicate()
    return [process.returncode for process in processes]


def _safely(test: Callable[[], bool]) -> bool:
    try:
        return test()
    except FileNotFoundError:  # a file vanished between listing and looking: look again
        return False


def check_killed_then_rerun(scene: Scene, status: int | None) -> None:
    """The catalog is as before (or complete), opens the same, and a rerun completes."""
    ids = ["S0", "S1", "S2"]
    saved = scene.catalog.read_bytes()
    document = json.loads(saved)
    if saved != scene.before:  # killed after the catalog was saved: the complete result
        assert status in (0, -signal.SIGKILL)
        assert next(iter(document["assets"].values()))["virtual:items"] == ids
    elif scene.values is not None:
        opened = published_values(scene.catalog)
        assert opened is not None
        # Kerchunk files have no versions: once renamed, the recorded items read the same,
        # followed by the new ones.
        np.testing.assert_array_equal(opened[: len(scene.values)], scene.values)
        if "--format" not in scene.arguments:
            assert opened.shape == scene.values.shape
    assert main(scene.command()) == 0
    collection = pystac.Collection.from_file(str(scene.catalog))
    [asset] = collection.assets.values()
    assert asset.extra_fields["virtual:items"] == ids
    values = opened_store(collection)["B02"].values
    np.testing.assert_array_equal(values, expected_values(len(ids)))
    assert _temporaries(scene.target) == _temporaries(scene.catalog) == []


#: Scenario -> target, arguments, items published before, and the signs to kill at.
SCENARIOS: dict[str, tuple[str, list[str], int, list[Sign]]] = {
    "icechunk-first": (
        "scenes.icechunk",
        [],
        0,
        [staged, committing_beside, present, saving_catalog],
    ),
    "icechunk-append": (
        "scenes.icechunk",
        [],
        2,
        [grown("manifests"), grown("snapshots"), saving_catalog],
    ),
    "kerchunk-json-first": (
        "scenes.json",
        ["--format", "kerchunk"],
        0,
        [staged, present, saving_catalog],
    ),
    "kerchunk-parquet-first": (
        "scenes.parq",
        ["--format", "kerchunk", "--kerchunk-format", "parquet"],
        0,
        [staged, present, saving_catalog],
    ),
    "kerchunk-json-append": (
        "scenes.json",
        ["--format", "kerchunk"],
        2,
        [staged, replaced, saving_catalog],
    ),
    "kerchunk-parquet-append": (
        "scenes.parq",
        ["--format", "kerchunk", "--kerchunk-format", "parquet"],
        2,
        [staged, replaced, saving_catalog],
    ),
}


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[Scene, int | None]]]:
    """Every scenario's scenes after their publishes were killed (all run at once)."""
    data = tmp_path_factory.mktemp("data")
    bands = [write_band(data, day) for day in range(3)]
    runs: list[tuple[str, Scene, Sign]] = []
    for name, (target, arguments, published, signs) in SCENARIOS.items():
        for index, sign in enumerate(signs):
            root = tmp_path_factory.mktemp(f"{name}-{index}")
            runs.append((name, prepare(root, bands, target, arguments, published=published), sign))
    statuses = run_killed([(scene, sign) for _, scene, sign in runs])
    found: dict[str, list[tuple[Scene, int | None]]] = {name: [] for name in SCENARIOS}
    for (name, scene, _), status in zip(runs, statuses, strict=True):
        found[name].append((scene, status))
    return found


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_killed_publish_leaves_the_catalog_as_it_was_and_a_rerun_completes(
    killed: dict[str, list[tuple[Scene, int | None]]], scenario: str
) -> None:
    for scene, status in killed[scenario]:
        check_killed_then_rerun(scene, status)
