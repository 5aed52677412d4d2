"""Every opening option, defined once in ``OpenOptions``, is accepted by every entry point."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pystac
import pytest
import xarray as xr

import intake
from virtualstac import ManifestArray
from virtualstac.intake import StacVirtualSource
from virtualstac.stac import VirtualExtension, open_stac, stac_registry
from virtualstac.stac.backend import StacBackendEntrypoint
from virtualstac.stac.options import OPTION_NAMES, OpenOptions, UnknownOptionError

if TYPE_CHECKING:
    from conftest import Scenes

# xarray deprecates use_cftime= for a CFDatetimeCoder, yet still takes it, as open_stac does.
pytestmark = pytest.mark.filterwarnings("ignore:Usage of 'use_cftime':FutureWarning")


def samples(item: pystac.Item) -> dict[str, Any]:
    """A value for every option that opens ``item``'s B02 asset."""
    return {
        "group_by": "grid",
        "registry": stac_registry(item),
        "sign": lambda url: url,
        "groupby": "time",
        "parallel": False,
        "progress": False,
        "group": None,
        "loadable_variables": ["x", "y"],
        "drop_variables": ["spatial_ref"],
        "decode_times": True,
        "concat_dim": "time",
        "use_published": False,
        "overview_level": None,
        "authorize": [],
        "trust_catalog_endpoints": False,
        "references": True,
        "chunks": {"x": 256},
        "mask_and_scale": False,
        "decode_timedelta": False,
        "use_cftime": False,
        "concat_characters": True,
        "decode_coords": True,
    }


def test_the_options_are_listed_once_with_group_by_first() -> None:
    assert OPTION_NAMES == ("group_by", *OpenOptions.__annotations__)
    assert len(set(OPTION_NAMES)) == len(OPTION_NAMES)
    # xarray's own chunks= chunks what the engine returns; every other option reaches it.
    engine = set(StacBackendEntrypoint.open_dataset_parameters)
    assert engine >= {"filename_or_obj", "assets", *OPTION_NAMES} - {"chunks"}


@pytest.mark.parametrize("name", OPTION_NAMES)
def test_every_entry_point_accepts_every_option(scenes: Scenes, tmp_path: Path, name: str) -> None:
    item = scenes.items[0]
    value = samples(item)[name]
    given = {name: value}
    expected = np.asarray(open_stac(item, ["B02"])["B02"])

    def check(opened: Any, where: str) -> None:
        dataset = next(iter(opened.values())) if isinstance(opened, dict) else opened
        if isinstance(dataset, xr.DataTree):
            dataset = dataset["10x10"].to_dataset()
        if name == "references":
            assert isinstance(dataset["B02"].data, ManifestArray), where
        else:
            np.testing.assert_array_equal(dataset["B02"].values, expected, err_msg=where)

    check(open_stac(item, ["B02"], **given), "open_stac")
    check(VirtualExtension.ext(item, add_if_missing=True).to_xarray(["B02"], **given), "to_xarray")
    if name == "group_by":
        check(xr.open_datatree(item, engine="virtualstac", assets=["B02"], **given), "engine")
    else:
        check(xr.open_dataset(item, engine="virtualstac", assets=["B02"], **given), "engine")
    check(StacVirtualSource(item.get_self_href(), assets=["B02"], **given).to_dask(), "intake")


def test_the_intake_driver_checks_options_against_their_definition(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        "sources:\n  wrong:\n    driver: stac_virtual\n    args:\n"
        "      url: item.json\n      use_published: maybe\n"
    )
    with pytest.raises(ValueError, match="argument 'use_published' must be true or false"):
        intake.open_catalog(str(catalog))["wrong"].to_dask()
    with pytest.raises(ValueError, match=r"unknown argument.*'use_publish'.*use_published"):
        StacVirtualSource("item.json", use_publish=True)


def test_the_intake_driver_checks_a_type_alias_through_its_value(tmp_path: Path) -> None:
    # groupby is a GroupBy: a string (solar_day, a property name) or a function.
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        "sources:\n  wrong:\n    driver: stac_virtual\n    args:\n"
        '      url: "{{ CATALOG_DIR }}/item.json"\n      groupby: [1, 2]\n'
    )
    with pytest.raises(ValueError, match="argument 'groupby' must be a string or a function"):
        intake.open_catalog(str(catalog))["wrong"].to_dask()
    source = StacVirtualSource(str(tmp_path / "item.json"), groupby="solar_day")
    assert source.options == {"groupby": "solar_day"}


def test_chunks_naming_a_dimension_the_data_lacks_are_refused(scenes: Scenes) -> None:
    """xr.open_zarr ignores them: a misspelt dimension would keep the files' chunks."""
    with pytest.raises(ValueError, match=r"chunks names 'tim', not a dimension.*time, x, y"):
        open_stac(scenes.items, ["B02"], chunks={"tim": 1})
    opened = open_stac(scenes.items, ["B02"], chunks={"time": 1, "x": 150})
    assert opened["B02"].chunks is not None
    assert opened["B02"].chunksizes["x"][0] == 150


@pytest.mark.parametrize(
    ("option", "advice"),
    [
        ({"bands": ["B02"]}, r"assets=\[\.\.\.\]"),
        ({"resolution": 20}, "cannot resample or reproject.*group_by='grid'"),
        ({"crs": "EPSG:4326"}, "cannot resample or reproject"),
        ({"bbox": [14.99, 36.1, 15.0, 36.11]}, r"ds\.sel\(x=slice"),
        ({"dtype": "float32"}, r"\.astype"),
        ({"mask_and_sacle": False}, "the options are: assets, group_by"),
    ],
)
def test_options_it_does_not_take_are_refused_not_ignored(
    scenes: Scenes, option: dict[str, Any], advice: str
) -> None:
    # odc-stac's load options above: ignored, resolution=20 gave the 10 m pixels silently.
    (name,) = option
    item = scenes.items[0]
    entry_points = [
        lambda: open_stac(scenes.items, ["B02"], **option),
        lambda: VirtualExtension.ext(item, add_if_missing=True).to_xarray(["B02"], **option),
        lambda: xr.open_dataset(item, engine="virtualstac", assets=["B02"], **option),
        lambda: VirtualExtension.ext(item.assets["B02"]).to_xarray(**option),
    ]
    for opening in entry_points:
        with pytest.raises(UnknownOptionError, match=f"unknown option '{name}'.*{advice}"):
            opening()
