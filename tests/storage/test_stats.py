"""counting_reads() counts what virtualstac sends: checked against what the server served."""

from pathlib import Path

import h5py
import numpy as np
import xarray as xr

from servers import HTTPServer
from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.parsers import HDFParser
from virtualstac.storage import counting_reads
from virtualstac.storage.reader import BlockCachedReader


def write_netcdf_like(path: Path) -> np.ndarray:
    """An HDF5 file with one chunked, compressed variable of 16 chunks."""
    values = np.arange(64 * 64, dtype="<f4").reshape(64, 64)
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=values, chunks=(16, 16), compression="gzip")
    return values


def test_parsing_and_reading_are_counted_as_the_server_served_them(http_server: HTTPServer) -> None:
    directory = http_server.directory("stats")
    values = write_netcdf_like(directory / "v.h5")
    url = http_server.url_for(directory / "v.h5")
    registry = ObjectStoreRegistry.for_url(url)

    with counting_reads() as everything:
        with counting_reads() as parsing:
            virtual = open_virtual_dataset(
                url, parser=HDFParser(), registry=registry, loadable_variables=[]
            )
        parsed = http_server.requests(directory / "v.h5", method=None)
        assert (parsing.requests, parsing.bytes) == (
            len(parsed),
            sum(e.bytes_sent for e in parsed),
        )
        opened = xr.open_zarr(virtual.virtual.to_store(registry), consolidated=False)
        np.testing.assert_array_equal(opened["v"].values, values)

    served = http_server.requests(directory / "v.h5", method=None)
    chunk_bytes = sum(e.bytes_sent for e in served[len(parsed) :])
    assert chunk_bytes == sum(
        virtual["v"].data.manifest.dict()[k]["length"] for k in virtual["v"].data.manifest.dict()
    )
    assert everything.bytes == parsing.bytes + chunk_bytes
    assert everything.requests > parsing.requests


def test_reads_outside_a_block_are_not_counted(tmp_path: Path) -> None:
    write_netcdf_like(tmp_path / "v.h5")
    with counting_reads() as before:
        pass
    open_virtual_dataset(str(tmp_path / "v.h5"))
    assert (before.requests, before.bytes) == (0, 0)


def test_head_requests_are_counted_apart(http_server: HTTPServer) -> None:
    directory = http_server.directory("heads")
    (directory / "data.bin").write_bytes(bytes(1000))
    url = http_server.url_for(directory / "data.bin")

    with counting_reads() as reads:
        # Without a prefetch nothing tells the reader the size but a HEAD.
        reader = BlockCachedReader.from_url(url, ObjectStoreRegistry.for_url(url), prefetch=0)
        reader.read(10)

    served = http_server.requests(directory / "data.bin", method=None)
    assert [e.method for e in served] == ["HEAD", "GET"]
    assert (reads.requests, reads.heads, reads.bytes) == (2, 1, 1000)
