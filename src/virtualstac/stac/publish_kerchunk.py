"""Publishing a virtual dataset as Kerchunk references (JSON or parquet), rewritten per publish.

Kerchunk files cannot be appended to, so a republish reads the published references (through
virtualstac's Kerchunk parser, which checks that their sources have not changed), appends the
new items' references, and writes the union under a temporary name that is then renamed over
the old file (a local parquet directory is swapped in whole): readers see the old or the new
references, never a mix. The references record which publish wrote them
(:class:`~virtualstac.stac.publish_recovery.PublishRecord`), so that the next publish can adopt
references whose catalog save was interrupted.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import obstore
import xarray as xr
from xarray.coding.times import encode_cf_datetime, infer_datetime_units

from virtualstac.errors import IncompatibleArraysError
from virtualstac.manifests import ManifestArray, ManifestGroup, ManifestStore
from virtualstac.parsers import KerchunkJSONParser, KerchunkParquetParser
from virtualstac.stac.appending import check_appendable, ordered_like
from virtualstac.stac.levels import Levels, check_levels, level_group, pyramid_group
from virtualstac.stac.publish_recovery import RECORD_KEY, PublishRecord
from virtualstac.stac.publish_references_distributed import ReferenceBatches
from virtualstac.stac.published import reading_registry
from virtualstac.stac.published_asset import multihash_sha256
from virtualstac.stac.relocation import moved
from virtualstac.stac.targets import PublishError, Target
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.writers.icechunk_containers import required_containers
from virtualstac.writers.kerchunk import RECORD_SIZE, kerchunk_refs, write_kerchunk
from virtualstac.writers.staging import replacing
from virtualstac.writers.zarr_v2 import with_v2_fill_value
from virtualstac.xarray.combine import concat_virtual
from virtualstac.xarray.convert import dataset_to_group

__all__ = ["KerchunkFormat", "ReferencesVersion", "publish_references"]

KerchunkFormat = Literal["json", "parquet"]


@dataclass(frozen=True)
class ReferencesVersion:
    """Written references: their parser, containers, what they hold, and the JSON file's size."""

    parser: str
    containers: tuple[str, ...]
    dataset: xr.Dataset
    size: int | None
    checksum: str | None


def publish_references(
    dataset: Levels | ReferenceBatches | None,
    target: Target,
    *,
    kerchunk_format: KerchunkFormat,
    previous_containers: Sequence[str] | None,
    concat_dim: str,
    registry: ObjectStoreRegistry | None,
    record: PublishRecord,
    schemes: Mapping[str, Mapping[str, Any]] | None = None,
    root: str | None = None,
    relocate: Mapping[str, str] | None = None,
) -> ReferencesVersion:
    """Write ``dataset`` as references at ``target``, after the published ones if any.

    ``previous_containers`` are the prefixes the published references point to (None when
    nothing is published there yet). A sequence of datasets is an image pyramid (finest
    first), written as a multiscales group (:mod:`virtualstac.stac.levels`). With ``dataset``
    None nothing is written: the published references are described as they are.
    ``record`` (its containers filled in) is written into the references. References below
    ``root``, the directory of a relocatable catalog, get containers of their own.
    ``relocate`` maps the directory the published references were written below to where it
    is now (its catalog moved): they are read, and rewritten, below the new one.
    :class:`~virtualstac.stac.publish_references_distributed.ReferenceBatches` (new parquet
    references at a local target) are written by the cluster's workers that parsed them.
    """
    if kerchunk_format not in ("json", "parquet"):
        raise ValueError(f"kerchunk_format must be 'json' or 'parquet', got {kerchunk_format!r}")
    parser = f"kerchunk-{kerchunk_format}"
    if isinstance(dataset, ReferenceBatches):
        if previous_containers is not None:
            raise ValueError("a cluster's workers write new references, not appended ones")
        _check_new(target)
        return _write_batches(dataset, target, registry, record, root)
    combined: dict[str, xr.Dataset] = {}
    if previous_containers is None:
        if dataset is None:
            raise ValueError("new references need a dataset to publish")
        _check_new(target)

        def joined(path: str, level: xr.Dataset) -> ManifestGroup:
            combined[path] = level
            return dataset_to_group(level)
    else:
        mapping = dict(relocate or {})
        prefixes = [moved(prefix, mapping) for prefix in previous_containers]
        reading = reading_registry(prefixes, registry, schemes)
        reading.register(target.url, **target.options)
        read = KerchunkParquetParser if parser == "kerchunk-parquet" else KerchunkJSONParser
        published = read(relocate=mapping)(target.url, reading)
        if dataset is None:
            return _described(target, kerchunk_format, prefixes, published)
        check_levels(dataset, published, target.href)

        def joined(path: str, level: xr.Dataset) -> ManifestGroup:
            existing = published.to_virtual_dataset(group=path)
            level = ordered_like(_as_written(level), existing)
            check_appendable(existing, level, concat_dim, target.href)
            _refuse_duplicate_sources(existing, level, concat_dim, target.href)
            combined[path] = _rewritten_whole(
                _concat(existing, level, concat_dim, target.href), concat_dim
            )
            return dataset_to_group(combined[path])

    group = pyramid_group(dataset, joined)
    containers = tuple(spec.prefix for spec in required_containers(group, registry, apart=root))
    notes = {RECORD_KEY: replace(record, containers=containers).to_json()}
    size = checksum = None
    if kerchunk_format == "json":
        data = json.dumps(kerchunk_refs(group, notes=notes), allow_nan=False).encode()
        target.write_file(data)
        size, checksum = len(data), multihash_sha256(data)
    elif target.is_local:
        write_kerchunk(group, target.path, format="parquet", record_size=RECORD_SIZE, notes=notes)
    else:
        with tempfile.TemporaryDirectory(prefix="virtualstac-") as work:
            directory = Path(work) / "references"
            write_kerchunk(group, directory, format="parquet", record_size=RECORD_SIZE, notes=notes)
            target.write_directory(directory)
    described = combined["" if isinstance(dataset, xr.Dataset) else "0"]
    return ReferencesVersion(parser, containers, described, size, checksum)


def _check_new(target: Target) -> None:
    if target.exists():
        raise PublishError(
            f"{target.href} already exists and this collection does not record it; publish "
            "to a new target, or delete it first"
        )


def _write_batches(
    batches: ReferenceBatches,
    target: Target,
    registry: ObjectStoreRegistry | None,
    record: PublishRecord,
    root: str | None,
) -> ReferencesVersion:
    """Write new parquet references whose records the cluster's workers write."""
    assert target.is_local, "the workers write into a directory they see"
    found = required_containers(batches.sources(), registry, apart=root)
    containers = tuple(spec.prefix for spec in found)
    notes = {RECORD_KEY: replace(record, containers=containers).to_json()}
    with replacing(target.path) as staged:
        batches.write(staged, record_size=RECORD_SIZE, notes=notes)
    return ReferencesVersion("kerchunk-parquet", containers, batches.dataset, None, None)


def _described(
    target: Target, kerchunk_format: str, containers: Sequence[str], published: ManifestStore
) -> ReferencesVersion:
    """The references at ``target`` as they are (a JSON file's size and checksum read)."""
    size = checksum = None
    if kerchunk_format == "json":
        store, path = target.store()
        data = bytes(obstore.get(store, path).bytes())
        size, checksum = len(data), multihash_sha256(data)
    dataset = published.to_virtual_dataset(group=level_group(published, None, target.href) or "")
    return ReferencesVersion(
        f"kerchunk-{kerchunk_format}", tuple(containers), dataset, size, checksum
    )


def _as_written(dataset: xr.Dataset) -> xr.Dataset:
    """``dataset`` with the fill values its arrays have once written as Kerchunk and read back,
    so that they join the published arrays, which were read back."""
    changed = {
        name: xr.Variable(
            variable.dims,
            with_v2_fill_value(variable.data, str(name)),
            variable.attrs,
            variable.encoding,
        )
        for name, variable in dataset.variables.items()
        if isinstance(variable.data, ManifestArray)
    }
    return dataset.assign(changed) if changed else dataset


def _refuse_duplicate_sources(existing: xr.Dataset, new: xr.Dataset, dim: str, where: str) -> None:
    """Refuse new items whose files the references already point to along ``dim``: their
    data would be in the store twice (as an Icechunk append refuses them)."""
    for name, variable in new.variables.items():
        published = existing.variables.get(name)
        if dim not in variable.dims or published is None:
            continue
        if not (
            isinstance(variable.data, ManifestArray) and isinstance(published.data, ManifestArray)
        ):
            continue
        already = sorted(
            (set(variable.data.manifest.path_table) & set(published.data.manifest.path_table))
            - {""}
        )
        if already:
            raise IncompatibleArraysError(
                f"the new items cannot be appended to the references at {where}: {str(name)!r} "
                f"already references {already[:3]}{' and more' if len(already) > 3 else ''}; "
                "appending the same files twice would duplicate their data"
            )


def _rewritten_whole(dataset: xr.Dataset, dim: str) -> xr.Dataset:
    """``dataset`` whose datetime ``dim`` coordinate, held in memory and written whole, gets
    units that hold all its values when the published ones do not (``days since ...`` of
    daily passes cannot hold a new time of day, which xarray would warn about and change)."""
    if dim not in dataset.coords or not np.issubdtype(dataset[dim].dtype, np.datetime64):
        return dataset
    coordinate = dataset[dim]
    units = coordinate.encoding.get("units")
    if units is None or isinstance(coordinate.variable.data, ManifestArray):
        return dataset
    calendar = coordinate.encoding.get("calendar")
    values = coordinate.values
    numbers, _, _ = encode_cf_datetime(values, units, calendar, dtype=np.dtype("float64"))
    if np.array_equal(numbers, np.round(numbers)):
        return dataset
    dataset = dataset.copy()
    dataset[dim].encoding = {**coordinate.encoding, "units": infer_datetime_units(values)}
    return dataset


def _concat(existing: xr.Dataset, new: xr.Dataset, dim: str, where: str) -> xr.Dataset:
    try:
        return concat_virtual(
            [existing, new], dim, labels=[f"the store at {where}", "the new items"]
        )
    except ValueError as err:
        raise IncompatibleArraysError(
            f"the new items cannot be appended to the references at {where}: {err}"
        ) from err
