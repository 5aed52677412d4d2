"""Opening a published Icechunk store checks where its local chunks lead, a batch at a time."""

from __future__ import annotations

import json
import os
import re
import tracemalloc
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING
from unittest import mock

import icechunk
import numpy as np
import pystac
import pytest
from zarr.core.buffer import cpu
from zarr.core.sync import sync

from virtualstac.demo import write_sample_archive
from virtualstac.errors import UnregisteredURLError
from virtualstac.stac import open_published, publish

if TYPE_CHECKING:
    from conftest import Scenes

# Enough references that listing them all at once (about 90 bytes each) dwarfs the rest of
# the open.
MANY = 200_000


def published_scenes(scenes: Scenes, directory: Path) -> pystac.Collection:
    """A Collection of S2_0 and S2_1, published to ``directory/scenes.icechunk``."""
    items = [next(i for i in scenes.items if i.id == name) for name in ("S2_0", "S2_1")]
    collection = pystac.Collection("scenes", "two scenes", pystac.Extent.from_items(items))
    for item in items:
        collection.add_item(item, set_parent=False)
    publish(collection, directory / "scenes.icechunk", format="icechunk", assets=["B02"])
    return collection


def add_references(
    asset: pystac.Asset, array: str, source: Path, count: int, last: Path | None = None
) -> None:
    """Commit an array ``array`` (its groups left implicit) of ``count`` one-byte chunks in
    ``source`` to the store of ``asset``, its last one in ``last`` if given, and point the
    asset at that version, as a hostile catalog could."""
    store = asset.get_absolute_href()
    prefix = source.parent.as_uri() + "/"
    repository = icechunk.Repository.open(
        icechunk.local_filesystem_storage(str(store)),
        authorize_virtual_chunk_access=icechunk.containers_credentials(
            {prefix: icechunk.credentials.LocalFileSystemAccess}
        ),
    )
    session = repository.writable_session("main")
    metadata = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [count],
        "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [{"name": "bytes"}],
        "dimension_names": ["reference"],
    }
    document = cpu.Buffer.from_bytes(json.dumps(metadata).encode())
    sync(session.store.set(f"{array}/zarr.json", document))
    locations = [source.as_uri()] * count
    if last is not None:
        locations[-1] = last.as_uri()
    size = source.stat().st_size
    session.store.set_virtual_refs_arr(
        f"/{array}",
        (count,),
        locations,
        np.arange(count, dtype=np.uint64) % np.uint64(size),
        np.ones(count, np.uint64),
        validate_containers=False,
    )
    asset.extra_fields["virtual:version"] = session.commit(f"{count} references")


def peak_bytes(call: Callable[[], object]) -> int:
    """The most memory Python held while ``call`` ran."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_opening_a_store_of_many_references_takes_bounded_memory(
    scenes: Scenes, tmp_path: Path
) -> None:
    collection = published_scenes(scenes, tmp_path)
    asset = collection.assets["icechunk"]
    add_references(asset, "hostile/many", scenes.files["S2_0"]["B02"], MANY)
    storage = icechunk.local_filesystem_storage(str(tmp_path / "scenes.icechunk"))
    session = icechunk.Repository.open(storage).readonly_session("main")
    listing = peak_bytes(session.all_virtual_chunk_locations)

    opening = peak_bytes(lambda: open_published(asset))

    # About 26 MB listed at once, against about 3 MB for the whole open.
    assert listing > 10_000_000
    assert opening < listing / 4


@pytest.mark.parametrize("described", [True, False], ids=["snapshot", "listing"])
def test_a_linked_source_among_many_references_is_refused(
    scenes: Scenes, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, described: bool
) -> None:
    """The last of 25,000 references, in an array below groups that do not exist, leads
    outside its container through a link; without Icechunk's snapshot description, every
    reference is still listed."""
    (secret,) = write_sample_archive(tmp_path_factory.mktemp("private"), days=1)
    collection = published_scenes(scenes, tmp_path)
    source = scenes.files["S2_0"]["B02"]
    link = source.parent / "innocent.nc"
    link.symlink_to(secret)
    add_references(collection.assets["icechunk"], "deep/er/refs", source, 25_000, last=link)

    undescribed = mock.patch.object(
        icechunk.Repository, "inspect_snapshot_async", new=mock.AsyncMock(return_value={})
    )
    with nullcontext() if described else undescribed:
        with pytest.raises(UnregisteredURLError, match=re.escape(f"resolves to '{secret}'")):
            open_published(collection.assets["icechunk"])


def test_a_named_pipe_among_the_sources_is_refused_before_any_chunk_is_read(
    scenes: Scenes, tmp_path: Path
) -> None:
    """Icechunk reads some local chunks itself (a source newer than its recorded checksum): a
    named pipe in a container's directory would make it wait for a writer for ever."""
    collection = published_scenes(scenes, tmp_path)
    source = scenes.files["S2_0"]["B02"]
    pipe = source.parent / "pipe.nc"
    os.mkfifo(pipe)
    add_references(collection.assets["icechunk"], "hostile/refs", source, 3, last=pipe)

    with pytest.raises(UnregisteredURLError, match=re.escape(f"'{pipe.as_uri()}' is not allowed")):
        open_published(collection.assets["icechunk"])


def test_a_reference_outside_the_containers_is_refused_naming_the_store(
    scenes: Scenes, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A Collection opens several stores: the refusal says which one holds the reference."""
    (secret,) = write_sample_archive(tmp_path_factory.mktemp("private"), days=1)
    collection = published_scenes(scenes, tmp_path)
    add_references(
        collection.assets["icechunk"], "hostile/refs", scenes.files["S2_0"]["B02"], 3, last=secret
    )

    store = (tmp_path / "scenes.icechunk").as_uri()
    with pytest.raises(
        UnregisteredURLError,
        match=re.escape(f"the published Icechunk store at {store}: a virtual chunk references"),
    ):
        open_published(collection.assets["icechunk"])
