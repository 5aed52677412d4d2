"""Two processes publishing to the same target at the same time.

Each process loads the same saved catalog, adds its own new item (or none), waits for a go
file so that both publish at once, and publishes. How the two interleave is up to the
scheduler; whatever it is, one wins and the other fails with a typed error or (same catalog,
same items) completes what the first wrote; never do both succeed with Collections that
record stores the target does not hold. (Before publishes took turns, nearly every run of
this file saw that happen, or an unrelated error.)
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pystac
import pytest
import rasterio
from rasterio.transform import from_origin

from servers import S3Server
from virtualstac import ObjectStoreRegistry
from virtualstac.stac import open_stac, publish

START = dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)

# One publisher: the catalog, plus the item of ``day`` if given (>= 0), published to target.
PUBLISHER = textwrap.dedent(
    """
    import datetime as dt, json, sys, time
    from pathlib import Path
    import pystac
    from virtualstac.stac import publish

    catalog, day, target, options, go, out = sys.argv[1:]
    collection = pystac.Collection.from_file(catalog)
    day = int(day)
    if day >= 0:
        root = Path(catalog).parents[1]
        item = pystac.Item(
            f"pass-{day}", {"type": "Point", "coordinates": [15.0, 36.1]},
            [15.0, 36.1, 15.0, 36.1], dt.datetime(2024, 5, 1 + day, 10, tzinfo=dt.UTC), {},
        )
        item.add_asset("red", pystac.Asset(str(root / "data" / f"red_{day}.tif"),
                                           media_type="image/tiff", roles=["data"]))
        item.set_self_href(str(root / "data" / f"pass-{day}.json"))
        collection.add_item(item, set_parent=False)
    Path(out + ".ready").touch()
    while not Path(go).exists():
        time.sleep(0.001)
    try:
        publish(collection, target, **json.loads(options))
    except Exception as err:
        result = {"error": type(err).__name__, "message": str(err)}
    else:
        result = {"asset": next(iter(collection.assets.values())).to_dict()}
    Path(out).write_text(json.dumps(result))
    """
)


def write_days(root: Path, days: int) -> None:
    for day in range(days):
        path = root / "data" / f"red_{day}.tif"
        path.parent.mkdir(parents=True, exist_ok=True)
        profile = dict(
            driver="COG", width=300, height=200, count=1, dtype="uint16", crs="EPSG:32633",
            transform=from_origin(500000, 4000000, 10, 10),
        )  # fmt: skip
        with rasterio.open(path, "w", **profile) as dst:
            dst.write(np.full((1, 200, 300), day + 1, "uint16"))


def saved_catalog(root: Path, days: int) -> Path:
    """A saved catalog of the first ``days`` items over the files ``write_days`` wrote."""
    items = []
    for day in range(days):
        item = pystac.Item(
            f"pass-{day}", {"type": "Point", "coordinates": [15.0, 36.1]},
            [15.0, 36.1, 15.0, 36.1], START + dt.timedelta(days=day), {},
        )  # fmt: skip
        item.add_asset(
            "red",
            pystac.Asset(
                str(root / "data" / f"red_{day}.tif"), media_type="image/tiff", roles=["data"]
            ),
        )
        items.append(item)
    collection = pystac.Collection("passes", "passes", pystac.Extent.from_items(items))
    for item in items:
        collection.add_item(item)
    collection.normalize_and_save(str(root / "catalog"), pystac.CatalogType.ABSOLUTE_PUBLISHED)
    return root / "catalog" / "collection.json"


def race(
    root: Path, catalog: Path, days: list[int], target: Path | str, options: dict
) -> list[dict]:
    """Publish from two processes at once, one per entry of ``days``; what each reported."""
    script = root / "publisher.py"
    script.write_text(PUBLISHER)
    go = root / "go"
    outs = [root / f"out-{index}.json" for index in range(len(days))]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                str(script),
                str(catalog),
                str(day),
                str(target),
                json.dumps(options),
                str(go),
                str(out),
            ],
            env=environment,
        )
        for day, out in zip(days, outs, strict=True)
    ]
    # Once both have imported and loaded their catalogs, they start together.
    deadline = time.monotonic() + 240
    while not all(Path(f"{out}.ready").exists() for out in outs):
        assert time.monotonic() < deadline and all(p.poll() is None for p in processes)
        time.sleep(0.01)
    go.touch()
    for process in processes:
        assert process.wait(timeout=240) == 0
    return [json.loads(out.read_text()) for out in outs]


def store_values(
    asset: dict, root: Path, registry: ObjectStoreRegistry | None = None
) -> np.ndarray:
    """The values of the store the asset records, opened as a reader of that asset would."""
    collection = pystac.Collection("passes", "passes", pystac.Extent.from_items([]))
    collection.add_asset("store", pystac.Asset.from_dict(asset))
    collection.set_self_href(str(root / "catalog" / "collection.json"))
    if registry is not None:
        return open_stac(collection, registry=registry)["red"].values
    return open_stac(collection, authorize=[(root / "data").as_uri() + "/"])["red"].values


KERCHUNK = {
    "json": {"format": "kerchunk"},
    "parquet": {"format": "kerchunk", "kerchunk_format": "parquet"},
}


@pytest.mark.parametrize("options", [{}, *KERCHUNK.values()], ids=["icechunk", *KERCHUNK])
def test_two_appends_of_different_items_never_both_succeed(tmp_path: Path, options: dict) -> None:
    write_days(tmp_path, 4)
    catalog = saved_catalog(tmp_path, 2)
    target = (
        tmp_path / f"scenes.{options.get('kerchunk_format', 'json') if options else 'icechunk'}"
    )
    collection = pystac.Collection.from_file(str(catalog))
    publish(collection, target, **options)
    collection.save_object()

    results = race(tmp_path, catalog, [2, 3], target, options)

    won = [result["asset"] for result in results if "asset" in result]
    lost = [result for result in results if "error" in result]
    assert len(won) == 1, results
    assert lost[0]["error"] in ("PublishError", "IncompatibleArraysError"), lost
    days = [int(item.split("-")[1]) for item in won[0]["virtual:items"]]
    values = store_values(won[0], tmp_path)
    assert values.shape[0] == len(days) == 3
    assert [int(step.max()) for step in values] == [day + 1 for day in days]


@pytest.mark.parametrize("options", [{}, *KERCHUNK.values()], ids=["icechunk", *KERCHUNK])
def test_two_first_publishes_of_one_catalog_record_the_store_that_is_there(
    tmp_path: Path, options: dict
) -> None:
    write_days(tmp_path, 2)
    catalog = saved_catalog(tmp_path, 2)
    target = (
        tmp_path / f"scenes.{options.get('kerchunk_format', 'json') if options else 'icechunk'}"
    )

    results = race(tmp_path, catalog, [-1, -1], target, options)

    # The second finds the first's store: written for this catalog, from the same sources, it
    # is adopted as it is; either way the store every success records is the one there.
    for result in results:
        assert "asset" in result, results
        assert result["asset"]["virtual:items"] == ["pass-0", "pass-1"]
        values = store_values(result["asset"], tmp_path)
        assert [int(step.max()) for step in values] == [1, 2]
    versions = {result["asset"].get("version") for result in results}
    assert len(versions) == 1


@pytest.mark.parametrize("options", [{}, *KERCHUNK.values()], ids=["icechunk", *KERCHUNK])
def test_two_appends_to_an_object_store_never_both_succeed(
    tmp_path: Path, s3_server: S3Server, options: dict
) -> None:
    """On an object store the turn is a lock object written conditionally; the second
    publish then finds the first one's store (and an Icechunk commit would still refuse a
    branch moved since)."""
    write_days(tmp_path, 4)
    catalog = saved_catalog(tmp_path, 2)
    suffix = options.get("kerchunk_format", "json") if options else "icechunk"
    bucket = s3_server.create_bucket()
    target = f"s3://{bucket}/published/scenes.{suffix}"
    options = {**options, "storage_options": s3_server.store_options}
    collection = pystac.Collection.from_file(str(catalog))
    publish(collection, target, **options)
    collection.save_object()

    results = race(tmp_path, catalog, [2, 3], target, options)

    won = [result["asset"] for result in results if "asset" in result]
    lost = [result for result in results if "error" in result]
    assert len(won) == 1, results
    assert lost[0]["error"] == "PublishError" and "someone else" in lost[0]["message"], lost
    registry = ObjectStoreRegistry()
    registry.register(target.rsplit("/", 1)[0], **s3_server.store_options)
    registry.register((tmp_path / "data").as_uri() + "/")
    days = [int(item.split("-")[1]) for item in won[0]["virtual:items"]]
    values = store_values(won[0], tmp_path, registry)
    assert [int(step.max()) for step in values] == [day + 1 for day in days] == [1, 2, days[2] + 1]
    listed = s3_server.client().list_objects_v2(Bucket=bucket).get("Contents", [])
    left = [
        entry["Key"] for entry in listed if not entry["Key"].startswith(target[6 + len(bucket) :])
    ]
    assert left == []  # neither the lock nor a temporary
