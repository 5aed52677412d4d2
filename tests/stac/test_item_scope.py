"""Items from different publishers opened together: each Item's references reach only its own.

A search across collections, or an ItemCollection file someone sent, mixes Items nobody vetted
together. The references of one Item's asset (Kerchunk) may read the other assets of that Item
and what the user authorized, never another Item's files: those are exposed through their own
Item only. See docs/security.md.
"""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import re
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pystac
import pytest
import xarray as xr

from servers import HTTPServer
from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.demo import write_sample_archive
from virtualstac.errors import UnregisteredURLError
from virtualstac.stac import open_asset, open_stac, stac_registry
from virtualstac.storage.stats import counting_reads

NETCDF = "application/x-netcdf"
DAY_1 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
DAY_2 = dt.datetime(2024, 1, 2, tzinfo=dt.UTC)
MakeItem = Callable[..., pystac.Item]


def saved(item: pystac.Item, directory: Path) -> pystac.Item:
    """``item`` as a user receives it: written to ``directory`` and read back."""
    item.set_self_href(str(directory / f"{item.id}.json"))
    item.save_object(include_self_link=True)
    return pystac.Item.from_file(str(directory / f"{item.id}.json"))


def archive_item(make_item: MakeItem, data: str, archive: str, directory: Path) -> pystac.Item:
    """Publisher A's Item: a data asset that opens, and an archive asset that is not opened."""
    item = make_item("a", DAY_1, {"data": (data, NETCDF)})
    item.add_asset("archive", pystac.Asset(archive, media_type=NETCDF, roles=["metadata"]))
    return saved(item, directory)


def write_references(source: str, refs: Path, *, recorded: bool, **options: object) -> Path:
    """Kerchunk JSON references to ``source``; ``recorded=False`` leaves out the source
    versions virtualstac records (as Kerchunk itself writes them), which opening checks."""
    refs.parent.mkdir(exist_ok=True)
    open_virtual_dataset(source, **options).virtual.to_kerchunk(refs, format="json")  # type: ignore[arg-type]
    if not recorded:
        document = json.loads(refs.read_text())
        del document["virtualstac"]
        refs.write_text(json.dumps(document))
    return refs


def references_item(make_item: MakeItem, refs: Path, directory: Path) -> pystac.Item:
    """Publisher B's Item: one Kerchunk asset, whose references B chose."""
    item = make_item("b", DAY_2, {})
    item.add_asset(
        "refs", pystac.Asset(str(refs), media_type="application/json", roles=["references"])
    )
    return saved(item, directory)


def refused(asset: str, item: str, url: str) -> str:
    """The start of the refusal of ``url`` read through ``asset`` of ``item``."""
    return re.escape(f"asset {asset!r} of item {item!r}: ") + f".*{re.escape(url)}"


@pytest.mark.parametrize("recorded", [False, True], ids=["kerchunk", "versions-recorded"])
def test_references_may_not_read_another_items_assets(
    tmp_path: Path, make_item: MakeItem, http_server: HTTPServer, recorded: bool
) -> None:
    served = http_server.directory("item-scope")
    mine, theirs = write_sample_archive(served, days=2)
    mine_url, theirs_url = http_server.url_for(mine), http_server.url_for(theirs)
    a = archive_item(make_item, mine_url, theirs_url, tmp_path / "publisher-a")
    # B's references point at A's archive, which A exposes but does not open.
    refs = write_references(theirs_url, tmp_path / "b" / "refs.json", recorded=recorded)
    b = references_item(make_item, refs, tmp_path / "b")
    sent = pystac.ItemCollection([a, b])
    before = len(http_server.requests(theirs, method=None))

    with pytest.raises(UnregisteredURLError, match=refused("refs", "b", theirs_url)):
        open_stac(sent).load()
    with pytest.raises(UnregisteredURLError, match=refused("refs", "b", theirs_url)):
        open_stac(sent, references=True)
    assert len(http_server.requests(theirs, method=None)) == before  # nothing read through B

    with xr.open_dataset(mine, engine="netcdf4") as direct:
        xr.testing.assert_equal(open_stac(a)["t2m"].load(), direct["t2m"].load())
    trusted = open_stac(sent, authorize=[theirs_url])
    with xr.open_dataset(theirs, engine="netcdf4") as direct:
        expected = direct["t2m"].load()
    xr.testing.assert_equal(trusted["t2m"].sel(time=expected["time"]).load(), expected)


def test_a_coordinate_loaded_while_opening_is_not_read_through_another_item(
    tmp_path: Path, make_item: MakeItem
) -> None:
    data = tmp_path / "data"
    mine, theirs = write_sample_archive(data, days=2)
    a = archive_item(make_item, str(mine), str(theirs), tmp_path / "publisher-a")
    # References whose coordinates are not inlined: opening reads them from the source.
    refs = write_references(
        str(theirs), tmp_path / "b" / "refs.json", recorded=False, loadable_variables=[]
    )
    assert "time/0" in json.loads(refs.read_text())["refs"]
    b = references_item(make_item, refs, tmp_path / "b")

    with counting_reads() as reads, pytest.raises(UnregisteredURLError):
        open_stac([b, a], loadable_variables=["time"])
    with counting_reads() as alone:
        open_stac(a, loadable_variables=["time"])
    assert reads.requests <= alone.requests  # A's own file only, nothing of A's archive


def test_each_process_of_a_pool_keeps_to_its_items_assets(
    tmp_path: Path, make_item: MakeItem
) -> None:
    data = tmp_path / "data"
    mine, theirs = write_sample_archive(data, days=2)
    a = archive_item(make_item, str(mine), str(theirs), tmp_path / "publisher-a")
    refs = write_references(str(theirs), tmp_path / "b" / "refs.json", recorded=False)
    b = references_item(make_item, refs, tmp_path / "b")

    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(2, mp_context=context) as pool:
        with pytest.raises(UnregisteredURLError, match=refused("refs", "b", theirs.as_uri())):
            open_stac([a, b], parallel=pool)
        trusted = open_stac([a, b], parallel=pool, authorize=[theirs.as_uri()])
    assert trusted.sizes["time"] == 48


def test_references_may_read_every_asset_of_their_own_item(
    tmp_path: Path, make_item: MakeItem
) -> None:
    data = tmp_path / "data"
    first, second = write_sample_archive(data, days=2)
    refs = write_references(str(second), tmp_path / "b" / "refs.json", recorded=False)
    # An index Item next to another: its references read its own archive asset.
    index = references_item(make_item, refs, tmp_path / "b")
    index.add_asset("archive", pystac.Asset(str(second), media_type=NETCDF, roles=["metadata"]))
    other = make_item("a", DAY_1, {"data": (str(first), NETCDF)})

    opened = open_stac([saved(other, tmp_path / "publisher-a"), index])
    with xr.open_dataset(second, engine="netcdf4") as direct:
        expected = direct["t2m"].load()
    xr.testing.assert_equal(opened["t2m"].sel(time=expected["time"]).load(), expected)


def test_the_catalogs_registry_given_back_keeps_each_item_to_its_assets(
    tmp_path: Path, make_item: MakeItem
) -> None:
    data = tmp_path / "data"
    mine, theirs = write_sample_archive(data, days=2)
    a = archive_item(make_item, str(mine), str(theirs), tmp_path / "publisher-a")
    refs = write_references(str(theirs), tmp_path / "b" / "refs.json", recorded=False)
    b = references_item(make_item, refs, tmp_path / "b")

    # stac_registry's list is the catalogs' (every Item's assets), not the user's own.
    with pytest.raises(UnregisteredURLError, match=refused("refs", "b", theirs.as_uri())):
        open_stac([a, b], registry=stac_registry([a, b]))
    with pytest.raises(UnregisteredURLError, match=refused("refs", "b", theirs.as_uri())):
        open_asset(b.assets["refs"], registry=stac_registry([a, b]))
    authorized = stac_registry([a, b], authorize=[theirs.as_uri()])
    assert open_stac([a, b], registry=authorized).sizes["time"] == 48
    # A registry of the user's own is the user's authorization.
    own = ObjectStoreRegistry()
    own.register(data.as_uri() + "/")
    own.register(refs.parent.as_uri() + "/")
    assert open_stac([a, b], registry=own).sizes["time"] == 48


def test_parquet_references_keep_to_their_item_too(tmp_path: Path, make_item: MakeItem) -> None:
    data = tmp_path / "data"
    mine, theirs = write_sample_archive(data, days=2)
    a = archive_item(make_item, str(mine), str(theirs), tmp_path / "publisher-a")
    refs = tmp_path / "b" / "refs.parq"
    refs.parent.mkdir()
    open_virtual_dataset(str(theirs)).virtual.to_kerchunk(refs, format="parquet")
    b = make_item("b", DAY_2, {})
    b.add_asset(
        "refs",
        pystac.Asset(
            str(refs), roles=["references"], extra_fields={"virtual:parser": "kerchunk-parquet"}
        ),
    )
    b = saved(b, tmp_path / "b")

    with pytest.raises(UnregisteredURLError, match=refused("refs", "b", theirs.as_uri())):
        open_stac([a, b])
    assert open_stac([a, b], authorize=[theirs.as_uri()]).sizes["time"] == 48
