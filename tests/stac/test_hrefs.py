"""Asset hrefs of STAC API items that are bare local paths are refused with the reason."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pystac
import pytest

from virtualstac.stac import open_stac
from virtualstac.stac.hrefs import LocalHrefFromAPIError, check_not_local_on_api

API_ITEM = "https://stac.example.com/v1/collections/s2/items/S2_0"


def item_from(self_href: str, href: str) -> pystac.Item:
    """An Item as pystac(-client) reads it from JSON whose self link is ``self_href``."""
    item = pystac.Item("S2_0", None, None, dt.datetime(2024, 5, 1, tzinfo=dt.UTC), {})
    item.add_asset("B02", pystac.Asset(href, media_type="image/tiff", roles=["data"]))
    item.set_self_href(self_href)
    return pystac.Item.from_dict(item.to_dict())


@pytest.mark.parametrize("href", ["/data/B02.tif", "data/B02.tif"])
def test_a_local_path_in_an_api_item_names_the_host_it_was_resolved_against(href: str) -> None:
    item = item_from(API_ITEM, href)

    with pytest.raises(LocalHrefFromAPIError, match=r"resolved it against the STAC API host") as e:
        open_stac([item], ["B02"])
    assert "https://stac.example.com/" in str(e.value)
    assert isinstance(e.value, ValueError)


def test_static_catalogs_keep_their_relative_hrefs(tmp_path: Path) -> None:
    on_the_web = item_from("https://example.com/catalog/S2_0/S2_0.json", "./B02.tif")
    on_disk = item_from(str(tmp_path / "S2_0.json"), "./B02.tif")
    absolute = item_from(API_ITEM, "s3://bucket/B02.tif")

    for item in (on_the_web, on_disk, absolute):
        check_not_local_on_api("B02", item.assets["B02"], item)
