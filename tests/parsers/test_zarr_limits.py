"""Zarr metadata claiming a shape of 10**12 in small chunks is refused before the grid exists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zarr

from virtualstac.errors import LimitExceededError
from virtualstac.parsers.zarr import ZarrParser
from virtualstac.storage.registry import ObjectStoreRegistry


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_huge_shape_in_small_chunks_is_refused(tmp_path: Path, zarr_format: int) -> None:
    path = tmp_path / "huge.zarr"
    zarr.create_array(path, shape=(10,), chunks=(1,), dtype="f4", zarr_format=zarr_format)
    metadata = path / ("zarr.json" if zarr_format == 3 else ".zarray")
    document = json.loads(metadata.read_text())
    document["shape"] = [10**12]
    metadata.write_text(json.dumps(document))

    with pytest.raises(LimitExceededError, match=r"1,000,000,000,000 chunk references"):
        ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
