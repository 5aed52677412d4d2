"""The fuzz worker: damages sample files and reads them through virtualstac, one case at a time.

Run by ``test_fuzz.py`` as ``python worker.py OUTPUT_DIR CASES_PER_FORMAT`` in a subprocess
whose address space is limited (``RLIMIT_AS``), so that a memory bomb fails its case with
``MemoryError`` instead of exhausting the machine, and a crash or a hang in C code cannot take
pytest with it. Each case writes one JSON line to stdout as soon as it ends; a ``start`` line
comes first, so the parent can name the case that killed the worker.

A case copies a sample, damages it (truncation, bit flips or zeroed bytes, in the header or in
chunk data, chosen by a seeded generator), opens it with ``open_virtual_dataset`` and reads
every variable through ``xr.open_zarr`` on the virtual store. Its outcome is one of:

``typed``
    a :class:`~virtualstac.errors.VirtualStacError` was raised;
``equal``
    every value equals the undamaged file's;
``reference``
    values differ from the undamaged file's but equal what the format's reference reader
    (rasterio, h5py, scipy, netCDF4, zarr-python, fsspec's reference filesystem) returns for
    the damaged file: damage no reader can detect, e.g. a flipped bit in uncompressed chunk
    data or in a compressed one whose codec has no checksum, or a changed digit of a Kerchunk
    offset;
``raw``, ``differ``, ``hang``
    failures: a foreign exception, values no reader returns, no answer within the timeout.
"""

from __future__ import annotations

import json
import resource
import shutil
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from samples import SAMPLES

from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.errors import VirtualStacError

#: Seconds one case may take; a case takes about 50 ms.
CASE_TIMEOUT = 20
#: Address space the worker may use beyond what it holds after writing the samples.
MEMORY_MARGIN = 3 * 1024**3

Values = dict[str, np.ndarray]


class CaseTimeout(BaseException):
    """Raised by the alarm: a BaseException, so that no ``except Exception`` swallows it."""


def read_virtual(path: Path) -> Values:
    """Every variable of the root group, read through the virtual store, undecoded."""
    url = str(path)
    dataset = open_virtual_dataset(url, decode_times=False)
    store = dataset.virtual.to_store(ObjectStoreRegistry.for_url(url))
    opened = xr.open_zarr(store, consolidated=False, chunks=None, decode_cf=False)
    return {name: np.asarray(variable.values) for name, variable in opened.variables.items()}


def read_tiff(path: Path) -> Values:
    import rasterio

    with rasterio.open(path) as src:
        values: Values = {"band_data": src.read()}
        transform = src.transform
        values["x"] = transform.c + (np.arange(src.width) + 0.5) * transform.a
        values["y"] = transform.f + (np.arange(src.height) + 0.5) * transform.e
    return values


def read_h5py(path: Path) -> Values:
    import h5py

    values: Values = {}
    with h5py.File(path, "r") as f:
        for name, node in f.items():
            if isinstance(node, h5py.Dataset):
                values[name] = node[()]
    return values


def read_scipy(path: Path) -> Values:
    import scipy.io

    with scipy.io.netcdf_file(path, "r", mmap=False) as nc:
        return {name: np.array(var[:]) for name, var in nc.variables.items()}


def read_netcdf4(path: Path) -> Values:
    import netCDF4

    with netCDF4.Dataset(path) as nc:
        nc.set_auto_maskandscale(False)
        nc.set_auto_chartostring(False)
        return {name: np.asarray(var[...]) for name, var in nc.variables.items()}


def read_zarr(path: Path) -> Values:
    import zarr

    group = zarr.open_group(path, mode="r")
    return {name: np.asarray(array[...]) for name, array in group.arrays()}


def read_fsspec(path: Path) -> Values:
    opened = xr.open_dataset(
        "reference://",
        engine="zarr",
        chunks=None,
        decode_cf=False,
        backend_kwargs={
            "consolidated": False,
            "storage_options": {"fo": str(path), "remote_protocol": "file"},
        },
    )
    return {name: np.asarray(variable.values) for name, variable in opened.variables.items()}


#: Format -> the reference reader of a damaged file.
REFERENCE_READERS: dict[str, Callable[[Path], Values]] = {
    "cog": read_tiff,
    "gtiff": read_tiff,
    "netcdf4": read_h5py,
    "netcdf3": read_scipy,
    "netcdf3-cdf5": read_netcdf4,
    "hdf5": read_h5py,
    "zarr2": read_zarr,
    "zarr3": read_zarr,
    "kerchunk-json": read_fsspec,
    "kerchunk-parquet": read_fsspec,
}


def same(ours: Values, theirs: Values, *, all_names: bool) -> bool:
    """Whether the variables agree: all of them, or those both readers have.

    Byte order does not count (scipy returns big-endian arrays, zarr native ones).
    """
    if all_names and set(ours) != set(theirs):
        return False
    names = set(ours) & set(theirs)
    if not names and (ours or theirs):
        return False
    for name in names:
        a, b = ours[name], np.asarray(theirs[name])
        if a.shape != b.shape or a.dtype.newbyteorder("=") != b.dtype.newbyteorder("="):
            return False
        if not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
            return False
    return True


def files_of(sample: Path) -> list[Path]:
    """The files of a sample (itself, or those below a directory), in a stable order."""
    if sample.is_file():
        return [sample]
    return sorted(p for p in sample.rglob("*") if p.is_file())


def is_metadata(path: Path) -> bool:
    """Whether a file of a directory sample holds metadata rather than chunks."""
    return path.name in ("zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata")


def damage(sample: Path, target: Path, rng: np.random.Generator) -> str:
    """Copy ``sample`` to ``target`` and damage one of its files; describe what was done."""
    if sample.is_dir():
        shutil.copytree(sample, target)
    else:
        shutil.copyfile(sample, target)
    files = [p for p in files_of(target) if p.stat().st_size]
    metadata = [p for p in files if target.is_file() or is_metadata(p)]
    chunks = [p for p in files if not is_metadata(p)]
    # Metadata (and single files) get most of the damage: that is where parsers can go wrong.
    pool = chunks if chunks and rng.random() < 0.3 else metadata
    victim = pool[int(rng.integers(len(pool)))]
    data = bytearray(victim.read_bytes())
    size = len(data)
    # Headers sit at the start of a file; the first KiB gets half of the damage.
    head = min(size, 1024)
    position = int(rng.integers(head)) if rng.random() < 0.5 else int(rng.integers(max(size, 1)))
    kind = str(rng.choice(["truncate", "bitflip", "zero"]))
    name = victim.relative_to(target.parent)
    if kind == "truncate":
        del data[position:]
        what = f"{name}: truncated to {position} of {size} bytes"
    elif kind == "bitflip":
        flips = int(rng.integers(1, 4))
        positions = sorted({min(position + int(rng.integers(16)), size - 1) for _ in range(flips)})
        for at in positions:
            data[at] ^= 1 << int(rng.integers(8))
        what = f"{name}: bits flipped at {positions}"
    else:
        length = int(rng.integers(1, 64))
        data[position : position + length] = bytes(len(data[position : position + length]))
        what = f"{name}: {length} bytes zeroed at {position}"
    victim.write_bytes(bytes(data))
    return what


def run_case(fmt: str, path: Path, original: Values) -> dict[str, Any]:
    """Open and read one damaged sample; the outcome and what was seen."""

    def on_alarm(signum: int, frame: Any) -> None:
        raise CaseTimeout

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(CASE_TIMEOUT)
    try:
        values = read_virtual(path)
    except CaseTimeout:
        return {"outcome": "hang"}
    except VirtualStacError as err:
        return {"outcome": "typed", "error": type(err).__name__, "message": str(err)}
    except BaseException as err:
        return {
            "outcome": "raw",
            "error": f"{type(err).__module__}.{type(err).__qualname__}",
            "message": str(err)[:500],
            "traceback": traceback.format_exc()[-3000:],
        }
    finally:
        signal.alarm(0)
    if same(values, original, all_names=True):
        return {"outcome": "equal"}
    try:
        reference = REFERENCE_READERS[fmt](path)
    except Exception as err:
        return {"outcome": "differ", "reference": f"{type(err).__name__}: {err}"[:300]}
    if same(values, reference, all_names=False):
        return {"outcome": "reference"}
    return {"outcome": "differ", "reference": "values differ"}


def emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def main(output: Path, cases: int, formats: list[str]) -> None:
    """Write the samples below ``output``, then run ``cases`` damaged copies of each."""
    warnings.simplefilter("ignore")
    samples = {}
    originals = {}
    for fmt in formats:
        directory = output / fmt
        directory.mkdir()
        samples[fmt] = SAMPLES[fmt](directory / "sample")
        originals[fmt] = read_virtual(samples[fmt])
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    in_use = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (in_use + MEMORY_MARGIN, hard))
    for fmt in formats:
        rng = np.random.default_rng([12, sorted(SAMPLES).index(fmt)])
        for number in range(cases):
            case = f"{fmt}-{number}"
            path = output / fmt / f"case{number}"
            what = damage(samples[fmt], path, rng)
            emit({"event": "start", "case": case, "damage": what})
            started = time.perf_counter()
            result = run_case(fmt, path, originals[fmt])
            result.update(
                event="end",
                case=case,
                format=fmt,
                damage=what,
                seconds=round(time.perf_counter() - started, 3),
            )
            emit(result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:] or sorted(SAMPLES))
