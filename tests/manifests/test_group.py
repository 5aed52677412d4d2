"""ManifestGroup: members, nested access, and virtual datasets and trees."""

from collections.abc import Callable

import pytest
import xarray as xr

from virtualstac import ManifestArray, ManifestGroup
from virtualstac.errors import IncompatibleArraysError, InvalidManifestError


@pytest.fixture
def root(virtual_array: Callable[..., ManifestArray]) -> ManifestGroup:
    """A file-like hierarchy: air(time, x) with time and lat coordinates, and a nested group."""
    surface = ManifestGroup(
        arrays={"sst": virtual_array((6,), (3,), dimension_names=["x"])},
        groups={"flags": ManifestGroup(attributes={"flag_meanings": "ok bad"})},
        attributes={"level": "surface"},
    )
    return ManifestGroup(
        arrays={
            "air": virtual_array(
                (4, 6),
                (2, 3),
                dimension_names=["time", "x"],
                attributes={"units": "K", "coordinates": "lat"},
            ),
            "time": virtual_array((4,), (2,), dimension_names=["time"]),
            "lat": virtual_array((6,), (3,), dimension_names=["x"]),
        },
        groups={"surface": surface},
        attributes={"title": "air temperature"},
    )


def test_members_and_attributes(root: ManifestGroup) -> None:
    assert list(root.arrays) == ["air", "time", "lat"]
    assert list(root.groups) == ["surface"]
    assert list(root) == ["air", "time", "lat", "surface"]
    assert len(root) == 4
    assert root.metadata.attributes == {"title": "air temperature"}
    assert root.metadata.zarr_format == 3


def test_members_are_reached_by_nested_paths(root: ManifestGroup) -> None:
    assert root["air"] is root.arrays["air"]
    assert root["surface/sst"] is root.groups["surface"].arrays["sst"]
    assert root["/surface/flags/"].metadata.attributes == {"flag_meanings": "ok bad"}

    for missing in ("pressure", "surface/pressure", "air/time"):
        with pytest.raises(KeyError, match=missing):
            root[missing]


def test_the_member_mappings_are_copies(root: ManifestGroup) -> None:
    root.arrays.clear()
    root.groups.clear()

    assert len(root) == 4


def test_walk_visits_every_node_parents_first(root: ManifestGroup) -> None:
    assert [path for path, _ in root.walk()] == [
        "",
        "air",
        "time",
        "lat",
        "surface",
        "surface/sst",
        "surface/flags",
    ]


def test_invalid_members_are_refused(virtual_array: Callable[..., ManifestArray]) -> None:
    array = virtual_array((2,), (2,))

    with pytest.raises(InvalidManifestError, match=r"without '/', .*got 'a/b'"):
        ManifestGroup(arrays={"a/b": array})
    with pytest.raises(InvalidManifestError, match=r"without '/', .*got ''"):
        ManifestGroup(groups={"": ManifestGroup()})
    # zarr refuses them, and writers would put the member beside or above their target.
    with pytest.raises(InvalidManifestError, match=r"other than '\.' and '\.\.', got '\.\.'"):
        ManifestGroup(groups={"..": ManifestGroup()})
    with pytest.raises(InvalidManifestError, match=r"got '\.'"):
        ManifestGroup(arrays={".": array})
    with pytest.raises(InvalidManifestError, match=r"used by both an array and a group: \['a'\]"):
        ManifestGroup(arrays={"a": array}, groups={"a": ManifestGroup()})
    with pytest.raises(TypeError, match="member 'a' must be a ManifestGroup, got ManifestArray"):
        ManifestGroup(groups={"a": array})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="member 'a' must be a ManifestArray, got dict"):
        ManifestGroup(arrays={"a": {}})  # type: ignore[dict-item]


def test_to_virtual_dataset_makes_coordinates_without_indexes(root: ManifestGroup) -> None:
    ds = root.to_virtual_dataset()

    assert list(ds.data_vars) == ["air"]
    assert set(ds.coords) == {"time", "lat"}
    assert len(ds.xindexes) == 0  # an index would need the coordinate values
    assert ds.attrs == {"title": "air temperature"}
    assert ds["air"].attrs == {"units": "K"}
    assert ds["air"].encoding["coordinates"] == "lat"
    assert all(isinstance(v.data, ManifestArray) for v in ds.variables.values())
    assert ds["air"].data.manifest is root["air"].manifest


def test_a_group_coordinates_attribute_makes_coordinates(
    virtual_array: Callable[..., ManifestArray],
) -> None:
    """xarray writes one for coordinates no data variable names, and consumes it on reading."""
    group = ManifestGroup(
        arrays={
            "air": virtual_array((4,), (2,), dimension_names=["time"]),
            "station": virtual_array((3,), (3,), dimension_names=["s"]),
        },
        attributes={"coordinates": "station", "title": "t"},
    )

    ds = group.to_virtual_dataset()

    assert set(ds.coords) == {"station"}
    assert ds.attrs == {"title": "t"}


def test_nbytes_virtual_counts_every_array_below(root: ManifestGroup) -> None:
    arrays = [node for _, node in root.walk() if isinstance(node, ManifestArray)]

    assert root.nbytes_virtual == sum(a.nbytes_virtual for a in arrays) > 0
    assert ManifestGroup().nbytes_virtual == 0


def test_to_virtual_dataset_ignores_sub_groups(root: ManifestGroup) -> None:
    assert "sst" not in root.to_virtual_dataset().variables
    assert list(root["surface"].to_virtual_dataset().data_vars) == ["sst"]


def test_to_virtual_datasets_has_one_dataset_per_group(root: ManifestGroup) -> None:
    datasets = root.to_virtual_datasets()

    assert list(datasets) == ["/", "/surface", "/surface/flags"]
    assert datasets["/surface"].attrs == {"level": "surface"}
    assert len(datasets["/surface/flags"].variables) == 0


def test_to_virtual_datatree_mirrors_the_hierarchy(root: ManifestGroup) -> None:
    tree = root.to_virtual_datatree()

    assert isinstance(tree, xr.DataTree)
    assert tree.attrs == {"title": "air temperature"}
    assert tree["surface"].attrs == {"level": "surface"}
    assert isinstance(tree["surface/sst"].data, ManifestArray)
    assert tree["surface/flags"].attrs == {"flag_meanings": "ok bad"}
    assert set(tree.coords) == {"time", "lat"}


def test_groups_whose_dimensions_cannot_nest_are_refused_with_advice(
    virtual_array: Callable[..., ManifestArray],
) -> None:
    """An image pyramid: the overview has the dimensions of its parent, halved."""
    overview = ManifestGroup(
        arrays={"band_data": virtual_array((2, 3), (1, 3), dimension_names=["y", "x"])}
    )
    pyramid = ManifestGroup(
        arrays={"band_data": virtual_array((4, 6), (2, 3), dimension_names=["y", "x"])},
        groups={"overview_1": overview},
    )
    with pytest.raises(
        IncompatibleArraysError, match=r"'/overview_1' is not aligned.*to_virtual_dataset\(group="
    ):
        pyramid.to_virtual_datatree()
    assert pyramid["overview_1"].to_virtual_dataset().sizes == {"y": 2, "x": 3}
