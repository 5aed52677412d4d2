"""Zarr stores over HTTP, which has no listing: found through their consolidated metadata, each
chunk object's size by a HEAD, and read as xarray reads the store itself."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from servers import HTTPServer
from virtualstac import open_virtual_dataset
from virtualstac.errors import (
    LimitExceededError,
    SourceNotFoundError,
    UnregisteredURLError,
    UnsupportedOperationError,
)
from virtualstac.limits import limits
from virtualstac.parsers.zarr import ZarrParser
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.stats import counting_reads

pytestmark = [
    pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning"),
    pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning"),
]


def write_store(path: Path, zarr_format: int, *, consolidated: bool = True) -> Path:
    """A store of every kind of node: chunks never written, a subgroup, a scalar, shards."""
    group = zarr.open_group(path, mode="w", zarr_format=zarr_format)

    def create(parent: zarr.Group, name: str, dims: list[str], **options: object) -> zarr.Array:
        names = {"dimension_names": dims} if zarr_format == 3 else {}
        array = parent.create_array(name, **names, **options)  # type: ignore[arg-type]
        array.attrs["_ARRAY_DIMENSIONS"] = dims
        return array

    field = create(group, "field", ["y", "x"], shape=(5, 6), chunks=(2, 4), dtype="f4")
    field[:2] = np.arange(12).reshape(2, 6)  # the other rows of chunks are never written
    create(group, "level", [], shape=(), dtype="f8")[...] = 2.5
    create(group.create_group("sub"), "inner", ["n"], shape=(3,), chunks=(2,), dtype="i1")[:] = 7
    if zarr_format == 3:
        sharded = create(group, "sharded", ["t"], shape=(8,), chunks=(2,), shards=(4,), dtype="i2")
        sharded[:5] = np.arange(5)
    if consolidated:
        zarr.consolidate_metadata(path)
    return path


def served(http_server: HTTPServer, path: Path) -> tuple[str, ObjectStoreRegistry]:
    url = http_server.url_for(path)
    registry = ObjectStoreRegistry()
    registry.register(url.rsplit("/", 1)[0] + "/")
    return url, registry


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_consolidated_store_reads_as_xarray_reads_it(
    http_server: HTTPServer, zarr_format: int
) -> None:
    path = write_store(http_server.directory("zarr") / "store.zarr", zarr_format)
    url, registry = served(http_server, path)
    with counting_reads() as reads:
        store = ZarrParser()(url, registry)
    # One HEAD per chunk object the grids allow (field 6, level 1, inner 2, sharded 2 shards).
    assert reads.heads == (11 if zarr_format == 3 else 9)
    expected = xr.open_zarr(path, consolidated=False).load()
    xr.testing.assert_identical(xr.open_zarr(store, consolidated=False).load(), expected)
    inner = xr.open_zarr(ZarrParser(group="sub")(url, registry), consolidated=False)
    expected = xr.open_zarr(path, group="sub", consolidated=False)
    xr.testing.assert_identical(inner.load(), expected.load())
    # Only the chunks that were written are referenced: the others read as the fill value.
    assert len(store.group["field"].manifest) == 2


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_root_array_needs_no_consolidation(http_server: HTTPServer, zarr_format: int) -> None:
    path = http_server.directory("zarr") / "values.zarr"
    array = zarr.create_array(path, shape=(5,), chunks=(2,), dtype="i4", zarr_format=zarr_format)
    array[:3] = 4
    url, registry = served(http_server, path)
    read = zarr.open_group(ZarrParser()(url, registry), mode="r")["values"][:]
    np.testing.assert_array_equal(read, array[:])


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_store_without_consolidation_is_refused_saying_why(
    http_server: HTTPServer, zarr_format: int
) -> None:
    path = write_store(
        http_server.directory("zarr") / "store.zarr", zarr_format, consolidated=False
    )
    url, registry = served(http_server, path)
    with pytest.raises(UnsupportedOperationError, match="over HTTP, which has no listing"):
        open_virtual_dataset(url, registry=registry)
    with pytest.raises(SourceNotFoundError, match="no group 'other'"):
        ZarrParser(group="other")(http_server.url_for(write_store(path, zarr_format)), registry)


def test_a_grid_beyond_the_reference_limit_is_refused_before_a_head(
    http_server: HTTPServer,
) -> None:
    path = write_store(http_server.directory("zarr") / "store.zarr", 3)
    url, registry = served(http_server, path)
    heads = len(http_server.requests(method="HEAD"))
    with limits(references_per_array=3), pytest.raises(LimitExceededError):
        ZarrParser()(url, registry)
    assert len(http_server.requests(method="HEAD")) == heads


@pytest.mark.parametrize("climb", ["../..", "%2e%2e/%2E%2E"])
def test_consolidated_metadata_naming_nodes_outside_the_store_sends_them_no_request(
    http_server: HTTPServer, climb: str
) -> None:
    """Every chunk the grid allows is asked for with a HEAD: a node the (untrusted)
    consolidated metadata places above the store would send them to other files of the host,
    which servers resolve '..' to."""
    path = write_store(http_server.directory("zarr") / "store.zarr", 2)
    private = http_server.directory("private")
    (private / "0").write_bytes(b"s3cret!!")
    consolidated = json.loads((path / ".zmetadata").read_text())
    node = consolidated["metadata"]["sub/inner/.zarray"]
    consolidated["metadata"][f"{climb}/{private.name}/.zarray"] = node
    (path / ".zmetadata").write_text(json.dumps(consolidated))
    url, registry = served(http_server, path)

    with pytest.raises(UnregisteredURLError, match=rf"names chunk '{re.escape(climb)}/private"):
        ZarrParser()(url, registry)
    assert not [entry for entry in http_server.requests(method=None) if "private" in entry.path]
