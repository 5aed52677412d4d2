"""The `stac_virtual` Intake driver, used as catalog users do: YAML catalogs and to_dask().

Static catalogs are written by pystac next to their COGs (so asset hrefs are relative); the
API entries search rustac's STAC API over COGs served over HTTP.
"""

from __future__ import annotations

import json
from pathlib import Path

import dask.array
import numpy as np
import pystac
import pytest

import intake
from servers import HTTPServer
from stac_archive import (
    COLLECTION,
    HEIGHT,
    SOUTH_IDS,
    WIDTH,
    Archive,
    ServedArchive,
    write_archive,
)
from virtualstac import ManifestArray
from virtualstac.errors import ChunkReadError, CorruptFileError, InvalidCatalogArgumentError
from virtualstac.intake import StacVirtualSource
from virtualstac.stac import publish
from virtualstac.stac.options import InvalidOptionError


def save_static(archive: Archive, root: Path) -> Path:
    """The archive's south-tile items as a self-contained collection saved below ``root``."""
    collection = archive.collection.clone()
    collection.add_items([item.clone() for item in archive.items if item.id in SOUTH_IDS])
    collection.normalize_hrefs(str(root))
    collection.make_all_asset_hrefs_relative()
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    return root / "collection.json"


@pytest.fixture
def static(tmp_path: Path) -> tuple[Path, Archive]:
    """A YAML catalog over a static STAC collection with relative hrefs, and the archive."""
    archive = write_archive(tmp_path / "stac")
    save_static(archive, tmp_path / "stac")
    listed = pystac.ItemCollection([i for i in archive.items if i.id in SOUTH_IDS[:2]])
    listed.save_object(dest_href=str(tmp_path / "listed.json"))
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        """
sources:
  south:
    description: three passes over one tile
    driver: stac_virtual
    args:
      url: "{{ CATALOG_DIR }}/stac/collection.json"
      assets: [B02, B03]
  scene:
    driver: stac_virtual
    parameters:
      scene:
        description: item id
        type: str
        default: S2_20240501_T33
    args:
      url: "{{ CATALOG_DIR }}/stac/{{ scene }}/{{ scene }}.json"
  listed:
    driver: stac_virtual
    args:
      url: "{{ CATALOG_DIR }}/listed.json"
      assets: [B03]
  bands:
    driver: stac_virtual
    parameters:
      bands: {description: band assets, type: list, default: [B02, B03]}
    args:
      url: "{{ CATALOG_DIR }}/stac/collection.json"
      assets: "{{ bands }}"
"""
    )
    return catalog, archive


def test_the_driver_is_registered() -> None:
    assert intake.registry["stac_virtual"] is StacVirtualSource


def test_a_static_collection_with_relative_hrefs_is_a_lazy_dask_cube(
    static: tuple[Path, Archive],
) -> None:
    catalog, archive = static
    saved = json.loads(
        (catalog.parent / "stac" / SOUTH_IDS[0] / f"{SOUTH_IDS[0]}.json").read_text()
    )
    assert saved["assets"]["B02"]["href"] == "./B02.tif"
    cube = intake.open_catalog(str(catalog)).south.to_dask()
    assert isinstance(cube["B02"].data, dask.array.Array)
    assert not any(isinstance(v.data, ManifestArray) for v in cube.variables.values())
    assert cube["B02"].chunks == ((1, 1, 1), (128,), (128, 128))  # the COGs' tiles
    for index, item_id in enumerate(SOUTH_IDS):
        for band in ("B02", "B03"):
            expected = archive.band(item_id, band)
            np.testing.assert_array_equal(cube[band].isel(time=index).values, expected)


def test_a_user_parameter_chooses_the_item_and_read_loads_it(
    static: tuple[Path, Archive],
) -> None:
    catalog, archive = static
    entries = intake.open_catalog(str(catalog))
    scene = entries.scene(scene="S2_20240503_T33").read()
    assert scene["B03"].chunks is None
    np.testing.assert_array_equal(scene["B03"].values, archive.band("S2_20240503_T33", "B03"))
    default = entries.scene.to_dask()
    np.testing.assert_array_equal(default["B02"].values, archive.band(SOUTH_IDS[0], "B02"))


def test_a_list_parameter_chooses_the_assets(static: tuple[Path, Archive]) -> None:
    catalog, _ = static
    entries = intake.open_catalog(str(catalog))
    assert sorted(entries.bands.to_dask().data_vars) == ["B02", "B03"]
    assert list(entries.bands(bands=["B03"]).to_dask().data_vars) == ["B03"]


def test_a_published_collection_opens_from_its_store(static: tuple[Path, Archive]) -> None:
    catalog, _ = static
    path = catalog.parent / "stac" / "collection.json"
    collection = pystac.Collection.from_file(str(path))
    publish(collection, catalog.parent / "south.icechunk")
    collection.save_object(include_self_link=False)
    for item in collection.get_items():  # from now on, the sources must not be read
        for band in ("B02", "B03"):
            Path(item.assets[band].get_absolute_href() or "").with_suffix(".tif").unlink()

    cube = intake.open_catalog(str(catalog)).south.to_dask()
    assert sorted(cube.data_vars) == ["B02", "B03"]
    # The store's references still need the COGs (the error names the missing one) ...
    with pytest.raises(ChunkReadError, match=r"published Icechunk store .*B02\.tif not found"):
        cube["B02"].isel(time=0).load()
    assert cube["time"].size == len(SOUTH_IDS)  # ... but opening read no header


def test_an_item_collection_file_opens_too(static: tuple[Path, Archive]) -> None:
    catalog, archive = static
    cube = intake.open_catalog(str(catalog)).listed.read()
    assert cube.sizes["time"] == 2
    np.testing.assert_array_equal(
        cube["B03"].isel(time=1).values, archive.band(SOUTH_IDS[1], "B03")
    )


def test_an_api_search_with_templated_parameters(stac_api: ServedArchive, tmp_path: Path) -> None:
    catalog = tmp_path / "api.yaml"
    catalog.write_text(
        f"""
sources:
  passes:
    driver: stac_virtual
    parameters:
      start: {{description: first day, type: str, default: "2024-05-01"}}
      end: {{description: last day, type: str, default: "2024-05-31"}}
      limit: {{description: most items, type: int, default: 10}}
    args:
      url: {stac_api.url}
      collections: [{COLLECTION}]
      bbox: [14.9, 36.0, 15.1, 36.2]
      datetime: "{{{{ start }}}}/{{{{ end }}}}"
      max_items: "{{{{ limit }}}}"
      assets: [B02]
"""
    )
    entries = intake.open_catalog(str(catalog))
    cube = entries.passes(start="2024-05-02").to_dask()
    assert [str(t)[:10] for t in cube["time"].values] == ["2024-05-02", "2024-05-03"]
    for index, item_id in enumerate(SOUTH_IDS[1:]):
        expected = stac_api.archive.band(item_id, "B02")
        np.testing.assert_array_equal(cube["B02"].isel(time=index).values, expected)
    assert entries.passes(limit=1).to_dask().sizes["time"] == 1
    described = entries.passes.discover()
    assert described["metadata"]["dims"] == {"time": 3, "y": HEIGHT, "x": WIDTH}
    assert described["metadata"]["data_vars"] == {"B02": ["time", "y", "x"]}


def test_discover_reads_headers_only(http_server: HTTPServer, tmp_path: Path) -> None:
    # COGs larger than the 64 KiB header read, so chunk reads show in the server's log.
    served = http_server.directory("stac-discover")
    archive = write_archive(served, width=512, height=256)
    collection = save_static(archive, served)
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        f"""
sources:
  south:
    driver: stac_virtual
    args:
      url: {http_server.url_for(collection)}
      assets: [B02]
"""
    )
    entry = intake.open_catalog(str(catalog)).south
    cogs = [archive.files[item_id, "B02"] for item_id in SOUTH_IDS]
    described = entry.discover()
    assert described["metadata"]["dims"] == {"time": 3, "y": 256, "x": 512}
    for cog in cogs:
        assert [e.range for e in http_server.requests(cog)] == ["bytes=0-65535"]
    values = entry.read()
    for cog in cogs:
        assert len(http_server.requests(cog)) > 1  # the chunks, read only now
    np.testing.assert_array_equal(
        values["B02"].isel(time=0).values, archive.band(SOUTH_IDS[0], "B02")
    )


def test_to_dask_reads_no_chunk_until_computed(http_server: HTTPServer, tmp_path: Path) -> None:
    served = http_server.directory("stac-lazy")
    archive = write_archive(served, width=512, height=256)
    collection = save_static(archive, served)
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        f"""
sources:
  south:
    driver: stac_virtual
    args:
      url: {http_server.url_for(collection)}
      assets: [B02]
"""
    )
    cogs = [archive.files[item_id, "B02"] for item_id in SOUTH_IDS]
    cube = intake.open_catalog(str(catalog)).south.to_dask()
    for cog in cogs:
        assert [e.range for e in http_server.requests(cog)] == ["bytes=0-65535"]  # headers
    first = cube["B02"].isel(time=0).values
    assert len(http_server.requests(cogs[0])) > 1  # its tiles, read only now
    assert [len(http_server.requests(cog)) for cog in cogs[1:]] == [1, 1]  # not computed
    np.testing.assert_array_equal(first, archive.band(SOUTH_IDS[0], "B02"))


def test_sign_by_import_path_reads_a_signed_directory(
    http_server: HTTPServer, tmp_path: Path
) -> None:
    archive = write_archive(http_server.directory("signed"), http_server.url_for)
    listed = pystac.ItemCollection([i for i in archive.items if i.id in SOUTH_IDS])
    listed.save_object(dest_href=str(tmp_path / "items.json"))
    arguments = {"url": str(tmp_path / "items.json"), "assets": ["B02"]}
    with pytest.raises(OSError, match="403 Forbidden"):
        StacVirtualSource(**arguments).to_dask()
    cube = StacVirtualSource(**arguments, sign="servers:add_token").read()
    np.testing.assert_array_equal(
        cube["B02"].isel(time=2).values, archive.band(SOUTH_IDS[2], "B02")
    )
    with pytest.raises(ValueError, match="cannot be imported"):
        StacVirtualSource(**arguments, sign="servers.no_such_function")


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ('{"type": "Feature", "stac_version": "1.1.0", "id": "a"', json.JSONDecodeError),
        ('{"type": "Feature", "stac_version": "1.1.0", "id": "a", "links": []}', pystac.STACError),
        (b'{"type": "Catalog\xff"}', UnicodeDecodeError),
    ],
)
def test_malformed_stac_json_names_the_file(
    tmp_path: Path, text: str | bytes, cause: type[Exception]
) -> None:
    path = tmp_path / "item.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(CorruptFileError, match=r"invalid STAC JSON .*item\.json: "):
        StacVirtualSource(str(path)).read()
    with pytest.raises(CorruptFileError) as caught:
        StacVirtualSource(str(path)).stac()
    assert isinstance(caught.value.__cause__, cause)


def test_a_bool_parameter_sets_a_flag(static: tuple[Path, Archive]) -> None:
    """Intake renders ``"{{ virtual }}"`` of a bool parameter as ``"True"``/``"False"``."""
    catalog, _ = static
    extra = catalog.parent / "flags.yaml"
    extra.write_text(
        """
sources:
  flagged:
    driver: stac_virtual
    parameters:
      virtual: {description: references instead of values, type: bool, default: true}
    args:
      url: "{{ CATALOG_DIR }}/stac/collection.json"
      assets: B02
      references: "{{ virtual }}"
"""
    )
    entry = intake.open_catalog(str(extra)).flagged
    assert isinstance(entry.read()["B02"].data, ManifestArray)
    assert isinstance(entry(virtual=False).to_dask()["B02"].data, dask.array.Array)


def test_references_true_gives_the_references_and_group_by_grid_a_tree(
    static: tuple[Path, Archive],
) -> None:
    catalog, archive = static
    extra = catalog.parent / "more.yaml"
    extra.write_text(
        """
sources:
  references:
    driver: stac_virtual
    args:
      url: "{{ CATALOG_DIR }}/stac/collection.json"
      assets: B02
      references: true
  grids:
    driver: stac_virtual
    args:
      url: "{{ CATALOG_DIR }}/stac/collection.json"
      group_by: grid
"""
    )
    entries = intake.open_catalog(str(extra))
    references = entries.references.read()
    assert list(references.data_vars) == ["B02"]  # one asset, named by a string
    assert isinstance(references["B02"].data, ManifestArray)
    tree = entries.grids.to_dask()
    assert list(tree.children) == ["10x10"]  # one group per raster grid, named by pixel size
    assert set(entries.grids.discover()["metadata"]["groups"]) == {"/", "/10x10"}
    np.testing.assert_array_equal(
        tree["10x10"]["B02"].isel(time=0).values, archive.band(SOUTH_IDS[0], "B02")
    )


def test_chunks_of_minus_one_take_the_whole_dimension(static: tuple[Path, Archive]) -> None:
    catalog, _ = static
    extra = catalog.parent / "chunks.yaml"
    extra.write_text(
        """
sources:
  whole_rows:
    driver: stac_virtual
    args:
      url: "{{ CATALOG_DIR }}/stac/collection.json"
      assets: B02
      chunks: {time: 1, x: -1}
"""
    )
    cube = intake.open_catalog(str(extra)).whole_rows.to_dask()
    assert cube["B02"].chunks[0] == (1, 1, 1) and cube["B02"].chunks[2] == (WIDTH,)


def test_datetime_and_list_parameters_in_a_search(stac_api: ServedArchive, tmp_path: Path) -> None:
    """A ``datetime`` parameter renders as ``2024-05-02 00:00:00``, a ``list`` one as
    ``[14.9, 36.0, 15.1, 36.2]``: both are what the user meant."""
    catalog = tmp_path / "api.yaml"
    catalog.write_text(
        f"""
sources:
  passes:
    driver: stac_virtual
    parameters:
      start: {{description: first moment, type: datetime, default: "2024-05-02"}}
      end: {{description: last moment, type: datetime, default: "2024-05-31"}}
      box: {{description: west south east north, type: list, default: [14.9, 36.0, 15.1, 36.2]}}
    args:
      url: {stac_api.url}
      collections: [{COLLECTION}]
      bbox: "{{{{ box }}}}"
      datetime: "{{{{ start }}}}/{{{{ end }}}}"
      assets: [B02]
"""
    )
    entry = intake.open_catalog(str(catalog)).passes
    cube = entry.to_dask()
    assert [str(t)[:10] for t in cube["time"].values] == ["2024-05-02", "2024-05-03"]
    assert entry(start="2024-05-03T00:00:00").to_dask().sizes["time"] == 1
    with pytest.raises(InvalidCatalogArgumentError) as refused:
        StacVirtualSource(stac_api.url, collections=COLLECTION, datetime="yesterday").stac()
    assert "search parameters (collections, datetime) make no search of" in str(refused.value)
    assert "invalid datetime component: yesterday" in str(refused.value)


def test_an_item_collection_with_hrefs_relative_to_itself(tmp_path: Path) -> None:
    """A FeatureCollection written by hand (or saved from a search) beside its data: its
    Items have no self link, and their relative hrefs resolve against the file holding them,
    as an Item's resolve against its own file."""
    archive = write_archive(tmp_path / "scenes")
    features = []
    for item in archive.items[:2]:
        feature = item.to_dict(include_self_link=False)
        feature["links"] = []
        for key, asset in feature["assets"].items():
            absolute = Path(item.assets[key].get_absolute_href() or "")
            asset["href"] = str(absolute.relative_to(tmp_path))  # "scenes/.../B03.tif"
        features.append(feature)
    (tmp_path / "scenes.json").write_text(
        json.dumps({"type": "FeatureCollection", "features": features})
    )
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        """
sources:
  scenes:
    driver: stac_virtual
    args:
      url: "{{ CATALOG_DIR }}/scenes.json"
      assets: [B03]
"""
    )
    cube = intake.open_catalog(str(catalog)).scenes.read()
    assert cube.sizes["time"] == 2
    for step, item in enumerate(archive.items[:2]):
        np.testing.assert_array_equal(
            cube["B03"].isel(time=step).values, archive.band(item.id, "B03")
        )


def test_chunks_of_a_dimension_the_items_have_not(static: tuple[Path, Archive]) -> None:
    """As for the virtual driver: a misspelt dimension is refused, typed and named, not
    xarray's silence nor a bare ValueError."""
    catalog, _ = static
    text = catalog.read_text().replace("assets: [B03]", "assets: [B03]\n      chunks: {tim: 1}")
    catalog.write_text(text)
    with pytest.raises(InvalidOptionError) as refused:
        intake.open_catalog(str(catalog)).listed.to_dask()
    assert str(refused.value).startswith("catalog entry 'listed': chunks names 'tim', not a")


def test_a_list_parameter_names_the_variables_to_drop(static: tuple[Path, Archive]) -> None:
    """``drop_variables: "{{ drop }}"`` renders as the text "['lat_bnds']": that list."""
    catalog, _ = static
    text = catalog.read_text().replace(
        "      assets: [B03]\n",
        '      assets: [B03]\n      drop_variables: "{{ drop }}"\n    parameters:\n'
        "      drop: {description: left out, type: list, default: [lat_bnds, lon_bnds]}\n",
    )
    catalog.write_text(text)
    listed = intake.open_catalog(str(catalog)).listed
    assert listed.options["drop_variables"] == ["lat_bnds", "lon_bnds"]
    assert list(listed.to_dask().data_vars) == ["B03"]


def test_read_leaves_to_dask_lazy(static: tuple[Path, Archive]) -> None:
    """read() loads a dataset in place: not the one to_dask() gives next, nor what a caller
    added to an earlier one."""
    catalog, _ = static
    entry = intake.open_catalog(str(catalog)).listed
    assert isinstance(entry.read()["B03"].data, np.ndarray)
    cube = entry.to_dask()
    assert isinstance(cube["B03"].data, dask.array.Array)
    cube["double"] = cube["B03"] * 2
    assert list(entry.to_dask().data_vars) == ["B03"]
    assert isinstance(entry.to_dask()["B03"].data, dask.array.Array)


def test_a_templated_bound_of_a_query_is_a_number(tmp_path: Path) -> None:
    """Intake renders ``{"lt": "{{ clouds }}"}`` of an int parameter as the text "20", which a
    STAC API compares with cloud cover as text; ``eq`` keeps text (Landsat's path "042")."""
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        """
sources:
  clear:
    driver: stac_virtual
    parameters:
      clouds: {description: most cloud cover, type: int, default: 20}
      least: {description: least sun elevation, type: float, default: 30.5}
    args:
      url: https://stac.example.com/v1
      collections: [landsat-c2-l2]
      query:
        eo:cloud_cover: {lt: "{{ clouds }}"}
        view:sun_elevation: {gte: "{{ least }}"}
        landsat:wrs_path: {eq: "042"}
        start: {gt: "2024-05-01"}
"""
    )
    entry = intake.open_catalog(str(catalog)).clear
    assert entry.search_parameters["query"] == {
        "eo:cloud_cover": {"lt": 20},
        "view:sun_elevation": {"gte": 30.5},
        "landsat:wrs_path": {"eq": "042"},
        "start": {"gt": "2024-05-01"},
    }
    assert entry(clouds=5).search_parameters["query"]["eo:cloud_cover"] == {"lt": 5}
