"""Publishing to a custom S3 endpoint the catalog declares in ``storage:schemes``.

The catalog of a MinIO-style provider declares its bucket once (``storage:schemes``) and its
assets refer to it (``storage:refs``). Publishing into that bucket with no options takes the
endpoint from the declaration, records no second scheme, and the store reopens from what the
catalog says plus credentials from the environment.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pystac
import pytest

from virtualstac.stac import open_published, publish
from virtualstac.stac.published import PublishedStoreUnreadableError

if TYPE_CHECKING:
    from conftest import Scenes
    from servers import S3Server

ReadBand = Callable[[Path], np.ndarray]
SCHEME = "minio"


def provider_catalog(scenes: Scenes, tmp_path: Path, s3_server: S3Server) -> pystac.Collection:
    """Two items whose B02 lies in a bucket behind the S3 server, declared on the Collection."""
    bucket = s3_server.create_bucket()
    items = []
    for item in (i for i in scenes.items if i.id in ("S2_0", "S2_1")):
        copy = item.clone()
        copy.assets = {"B02": copy.assets["B02"]}
        copy.assets["B02"].href = s3_server.upload(
            bucket, f"scenes/{item.id}/B02.tif", scenes.files[item.id]["B02"]
        )
        copy.assets["B02"].extra_fields["storage:refs"] = [SCHEME]
        copy.set_self_href(str(tmp_path / "catalog" / item.id / f"{item.id}.json"))
        items.append(copy)
    collection = pystac.Collection("scenes", "two scenes", pystac.Extent.from_items(items))
    collection.extra_fields["storage:schemes"] = {
        SCHEME: {
            "type": "custom-s3",
            "platform": s3_server.endpoint + "/{bucket}",
            "bucket": bucket,
            "region": s3_server.region,
        }
    }
    for item in items:
        collection.add_item(item)
    collection.normalize_hrefs(str(tmp_path / "catalog"))
    return collection


@pytest.mark.parametrize("format", ["icechunk", "kerchunk"])
def test_a_target_in_a_declared_bucket_uses_and_records_its_scheme_once(
    scenes: Scenes,
    tmp_path: Path,
    s3_server: S3Server,
    read_band: ReadBand,
    monkeypatch: pytest.MonkeyPatch,
    validator: Any,
    format: str,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_access_key)
    collection = provider_catalog(scenes, tmp_path, s3_server)
    declared = json.loads(json.dumps(collection.extra_fields["storage:schemes"]))
    bucket = declared[SCHEME]["bucket"]
    name = "scenes.icechunk" if format == "icechunk" else "scenes.json"
    publish(collection, f"s3://{bucket}/published/{name}", format=format)
    assert collection.extra_fields["storage:schemes"] == declared
    asset = collection.assets[format]
    assert asset.extra_fields["storage:refs"] == [SCHEME]
    assert "testing" not in json.dumps(collection.to_dict())
    assert "https://stac-extensions.github.io/storage/v2.0.0/schema.json" in collection.validate(
        validator=validator
    )
    read = pystac.Collection.from_dict(collection.to_dict())
    opened = open_published(read.assets[format], trust_catalog_endpoints=True)
    for step, day in enumerate(("S2_0", "S2_1")):
        expected = read_band(scenes.files[day]["B02"])
        np.testing.assert_array_equal(opened["B02"].isel(time=step).values, expected)


def test_a_store_that_cannot_be_opened_raises_a_typed_one_line_error(
    scenes: Scenes, tmp_path: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_access_key)
    collection = provider_catalog(scenes, tmp_path, s3_server)
    bucket = collection.extra_fields["storage:schemes"][SCHEME]["bucket"]
    publish(collection, f"s3://{bucket}/published/scenes.icechunk")
    read = pystac.Collection.from_dict(collection.to_dict())
    # An endpoint the catalog chose gets unsigned requests unless trusted: the bucket refuses.
    with pytest.raises(PublishedStoreUnreadableError, match=r"scenes\.icechunk") as caught:
        open_published(read.assets["icechunk"])
    assert isinstance(caught.value, OSError)
    assert "\n" not in str(caught.value)
