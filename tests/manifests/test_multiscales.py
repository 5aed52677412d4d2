"""The zarr-conventions multiscales metadata of image pyramids."""

from collections.abc import Callable

import pytest

from virtualstac import ManifestArray, ManifestGroup
from virtualstac.errors import InvalidManifestError
from virtualstac.manifests.multiscales import (
    MULTISCALES_UUID,
    level_names,
    multiscales_attributes,
    multiscales_group,
)


def test_attributes_declare_the_convention_and_the_levels() -> None:
    attributes = multiscales_attributes([(400, 600), (200, 300), (67, 100)])
    (convention,) = attributes["zarr_conventions"]
    assert convention["uuid"] == MULTISCALES_UUID
    assert convention["schema_url"].endswith("/multiscales/refs/tags/v0.1/schema.json")
    assert attributes["multiscales"]["layout"] == [
        {"asset": "0", "transform": {"scale": [1.0, 1.0]}},
        {
            "asset": "1",
            "derived_from": "0",
            "transform": {"scale": [2.0, 2.0], "translation": [0.0, 0.0]},
        },
        {
            "asset": "2",
            "derived_from": "0",
            "transform": {"scale": [400 / 67, 6.0], "translation": [0.0, 0.0]},
        },
    ]
    assert level_names(attributes) == ["0", "1", "2"]


def test_other_groups_have_no_levels() -> None:
    assert level_names({}) is None
    assert level_names({"multiscales": {"layout": [{"asset": "0"}]}}) is None  # undeclared
    declared = {"zarr_conventions": [{"name": "multiscales"}]}
    assert level_names({**declared, "multiscales": {"layout": []}}) is None
    assert level_names({**declared, "multiscales": {"layout": [{"group": "0"}]}}) is None
    with pytest.raises(ValueError, match="at least one level"):
        multiscales_attributes([])


def test_group_of_levels(virtual_array: Callable[..., ManifestArray]) -> None:
    def level(height: int, width: int) -> ManifestGroup:
        data = virtual_array((1, height, width), (1, 2, 2), dimension_names=["band", "y", "x"])
        return ManifestGroup(arrays={"band_data": data})

    pyramid = multiscales_group([level(8, 6), level(4, 3)], {"title": "scene"})
    assert sorted(pyramid.groups) == ["0", "1"]
    assert pyramid.metadata.attributes["title"] == "scene"
    assert level_names(pyramid.metadata.attributes) == ["0", "1"]
    flat = ManifestGroup(arrays={"v": virtual_array((4,), (2,), dimension_names=["time"])})
    with pytest.raises(InvalidManifestError, match="'y' and 'x' dimensions"):
        multiscales_group([flat])
