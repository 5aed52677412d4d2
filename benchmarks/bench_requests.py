"""Requests and bytes per open: virtualstac beside virtual-tiff (COGs) and VirtualiZarr.

Each file is served by nginx (uvicorn where nginx is missing) on loopback (started as
``tests/servers.py`` starts it for the tests); its access log gives the requests (HEADs counted
apart) and the bytes of one open. An open is each library's
``open_virtual_dataset(url, ..., loadable_variables=[])``: the header and chunk index, no
coordinate values. virtualstac is measured twice: with the format detected from the file (no
parser given, the usual call) and with the parser given. virtual-tiff is opened through
VirtualiZarr's ``open_virtual_dataset`` with ``VirtualTIFF(ifd=0)``; VirtualiZarr has no TIFF
parser of its own, virtual-tiff none for netCDF.

Files: the five files of ``bench_parsers.py`` (a 28 MB COG with overviews, netCDF4, HDF5,
netCDF3 classic and record) and two small ones of its many-files benchmark (a 256 x 256 COG,
a netCDF4 file of one time step).

Run ``python benchmarks/bench_requests.py``.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from _common import Row, format_bytes, print_table, progress, run_worker, worker_main
from bench_files import SINGLE_FILES, write_cog, write_netcdf
from bench_parsers import _log_lines, _peer_importable, _registry, _start_http

SCRIPT = Path(__file__).resolve()

#: (label, file name, writer): bench_parsers' files, and two small ones.
FILES: tuple[tuple[str, str, Callable[[Path], None]], ...] = (
    *SINGLE_FILES,
    ("small COG", "small.tif", lambda p: write_cog(p, 256, 3, 128)),
    (
        "small netCDF4",
        "small.nc",
        lambda p: write_netcdf(
            p, fmt="NETCDF4", times=np.array([0.0]), nlat=32, nlon=64, chunks=(1, 32, 64)
        ),
    ),
)

#: (column, library, format detected): who opens each file.
OPENERS = (
    ("virtualstac, detected", "ours", True),
    ("virtualstac, parser given", "ours", False),
    ("virtual-tiff", "vt", False),
    ("VirtualiZarr", "vz", False),
)


def _applies(lib: str, label: str) -> bool:
    """Whether ``lib`` parses the file (virtual-tiff: TIFF only; VirtualiZarr: no TIFF)."""
    cog = label.endswith("COG")
    if lib == "vt":
        return cog and _peer_importable("vz", "COG")
    if lib == "vz":
        return not cog and _peer_importable("vz", label)
    return True


def _open(lib: str, label: str, url: str, registry: Any, detect: bool) -> Any:
    """One ``open_virtual_dataset`` of ``url`` by ``lib``, keeping every variable virtual."""
    cog = label.endswith("COG")
    if lib == "ours":
        from virtualstac import open_virtual_dataset
        from virtualstac.parsers import HDFParser, NetCDF3Parser, TIFFParser

        parser: Any = None
        if not detect:
            parser = TIFFParser() if cog else NetCDF3Parser() if "netCDF3" in label else HDFParser()
        return open_virtual_dataset(url, parser=parser, registry=registry, loadable_variables=[])
    from virtualizarr import open_virtual_dataset as peer_open

    if lib == "vt":
        from virtual_tiff import VirtualTIFF

        peer_parser: Any = VirtualTIFF(ifd=0)
    else:
        from virtualizarr.parsers import HDFParser as PeerHDF
        from virtualizarr.parsers import NetCDF3Parser as PeerNetCDF3

        peer_parser = PeerNetCDF3() if "netCDF3" in label else PeerHDF()
    return peer_open(url, parser=peer_parser, registry=registry, loadable_variables=[])


def worker_open(params: dict[str, Any]) -> dict[str, Any]:
    """Open one file over HTTP once and count what the server served for it.

    The local file is opened first, untimed and uncounted, so that imports and lazy
    initialisation send nothing during the counted open.
    """
    lib, label, detect = params["lib"], params["label"], params["detect"]
    registry_lib = "ours" if lib == "ours" else "vz"
    _open(lib, label, Path(params["path"]).as_uri(), _registry(registry_lib, "file:///"), detect)
    url, log = params["http_url"], Path(params["log"])
    registry = _registry(registry_lib, url.rsplit("/", 1)[0])
    served = "/" + url.split("/", 3)[3]
    seen = len(_log_lines(log))
    _open(lib, label, url, registry, detect)
    mine = [line.split("\t") for line in _log_lines(log)[seen:]]
    mine = [entry for entry in mine if entry[1] == served]
    return {
        "requests": len(mine),
        "heads": sum(1 for entry in mine if entry[0] == "HEAD"),
        "bytes": sum(int(entry[4]) for entry in mine),
    }


WORKERS = {"open": worker_open}


def measure(tmp: Path) -> dict[str, dict[str, dict[str, Any] | None]]:
    """Requests, HEADs and bytes per open: by file label, then by opener column."""
    server = _start_http(tmp / "http")
    print(f"  files served by {type(server).__name__}")
    table: dict[str, dict[str, dict[str, Any] | None]] = {}
    try:
        for label, name, writer in FILES:
            path = server.directory("requests") / name
            writer(path)
            progress(f"{label}: {format_bytes(path.stat().st_size)} on disk")
            table[label] = {}
            for column, lib, detect in OPENERS:
                if not _applies(lib, label):
                    table[label][column] = None
                    continue
                params = {
                    "lib": lib,
                    "label": label,
                    "detect": detect,
                    "path": str(path),
                    "http_url": server.url_for(path),
                    "log": str(server.access_log),
                }
                table[label][column] = run_worker(SCRIPT, "open", params)
                progress(f"{label}: {column}: {table[label][column]}")
    finally:
        server.stop()
    return table


def _cell(result: dict[str, Any] | None) -> str:
    if result is None:
        return "-"
    heads = f" ({result['heads']} HEAD)" if result["heads"] else ""
    return f"{result['requests']}{heads}, {format_bytes(result['bytes'])}"


def print_requests_table(table: dict[str, dict[str, dict[str, Any] | None]]) -> None:
    """Print requests (HEADs among them) and bytes per open, one row per file."""
    header = ("file", *(column for column, _, _ in OPENERS))
    body = [(label, *(_cell(cells[c]) for c, _, _ in OPENERS)) for label, cells in table.items()]
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(header))]
    print("\nRequests per open (HEADs among them), bytes per open, over HTTP")
    for line in (header, tuple("-" * w for w in widths), *body):
        print("  " + "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


def rows(table: dict[str, dict[str, dict[str, Any] | None]]) -> list[Row]:
    """Summary rows for ``run_all.py``: ours (format detected) against the file's peer."""
    result: list[Row] = []
    for label, cells in table.items():
        cog = label.endswith("COG")
        peer_column = "virtual-tiff" if cog else "VirtualiZarr"
        ours, peer = cells["virtualstac, detected"], cells[peer_column]
        for key, unit, scale in (("requests", "requests", 1.0), ("bytes", "KiB", 1 / 1024)):
            result.append(
                Row(
                    f"{label}: {key} per open",
                    unit,
                    None if ours is None else ours[key] * scale,
                    None if peer is None else peer[key] * scale,
                    target="1" if key == "requests" and label in ("COG", "small COG") else "",
                    peer_name=peer_column,
                )
            )
    return result


def run(quick: bool = False) -> list[Row]:
    """Count requests and bytes per open for every file and opener; print the table."""
    del quick  # one open per library and file is already the smallest run
    print("\nbench_requests: requests and bytes per open over HTTP (the server's access log)")
    with tempfile.TemporaryDirectory(prefix="virtualstac-bench-") as tmp:
        table = measure(Path(tmp))
    print_requests_table(table)
    return rows(table)


def main() -> None:
    """Print the requests-per-open table and its summary rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    print_table("Requests per open", run())


if __name__ == "__main__":
    if not worker_main(WORKERS):
        main()
