"""VirtualiZarr's own tests of manifests, arrays, groups and the store, run against virtualstac.

VirtualiZarr's wheel ships its test modules. They describe what users of the seed API rely on,
so they are read from the installed package, their imports renamed to ours, and run in a
subprocess next to ``virtualizarr_conftest.py`` (the fixtures of VirtualiZarr's repository
conftest, built on our API). Every test must pass except those in :data:`EXCLUDED`, which
exercise VirtualiZarr's internal helpers or behaviour the seed leaves to each implementation.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NamedTuple

import pytest

SUITE = ("test_array.py", "test_manifest.py", "test_group.py", "test_store.py")

#: Import statements of the suite and what they become; an import of VirtualiZarr or obspec-utils
#: missing here fails the run, so a new VirtualiZarr release cannot pass unnoticed.
RENAMES = {
    "from virtualizarr.manifests import": "from virtualstac.manifests import",
    "from virtualizarr.manifests.indexing import SubChunkIndexingError": (
        "from virtualstac.errors import UnsupportedIndexingError as SubChunkIndexingError"
    ),
    "from obspec_utils.registry import ObjectStoreRegistry": (
        "from virtualstac import ObjectStoreRegistry"
    ),
    "from virtualizarr.manifests.utils import": "from conftest import",
    "from virtualizarr.tests import": "from conftest import",
    # An internal helper; the tests that call it are excluded below.
    "from virtualizarr.manifests.store import parse_manifest_index": "",
}

#: Tests (node id or node id prefix) that are not ours to pass, and why.
EXCLUDED = {
    "test_manifest.py::TestPathValidation": (
        "ChunkEntry.with_validation is VirtualiZarr's internal validation helper; our paths are "
        "checked by ChunkManifest itself (tests/storage/test_urls.py)"
    ),
    "test_manifest.py::TestConvertingRelativePathsUsingFSRoot": (
        "ChunkEntry.with_validation(fs_root=) is an internal helper; ours is "
        "ChunkManifest(root=) (tests/manifests/test_manifest.py)"
    ),
    "test_manifest.py::TestInlinedChunks::test_chunk_entry_with_validation_inlined": (
        "ChunkEntry.with_validation is an internal helper"
    ),
    "test_manifest.py::TestSerializeManifest": "skipped by VirtualiZarr itself: not implemented",
    "test_array.py::TestEquals::test_partly_equals": (
        "skipped by VirtualiZarr itself: not implemented"
    ),
    "test_store.py::test_parse_manifest_index": (
        "parse_manifest_index is an internal helper of VirtualiZarr's store"
    ),
    "test_store.py::test_parse_manifest_index_raises": (
        "parse_manifest_index is an internal helper of VirtualiZarr's store"
    ),
    "test_store.py::test_parse_manifest_index_raises_invalid_separator": (
        "parse_manifest_index is an internal helper of VirtualiZarr's store"
    ),
    "test_manifest.py::TestInlinedChunks::test_mixed_virtual_and_inlined": (
        "reads the private _paths array; ours is a path table and codes, and the public "
        "ChunkManifest.paths gives the same strings (tests/manifests/test_manifest.py)"
    ),
    "test_array.py::TestNotChunkedArray": (
        "VirtualiZarr 2.8 removed ManifestArray.chunks; the seed API documents it, and our "
        "chunk manager makes xarray's chunked-array handling explain that loading needs a store"
    ),
    "test_manifest.py::TestZeroLengthChunks::test_inlined_dict_constructor_raises": (
        "VirtualiZarr 2.8 refuses empty inlined chunks; we read them as missing chunks (they "
        "hold nothing to decode); zero-length references are refused as VirtualiZarr does"
    ),
    **dict.fromkeys(
        [
            "test_manifest.py::TestZeroLengthChunks::test_chunk_entry_raises",
            "test_manifest.py::TestZeroLengthChunks::test_inlined_raises",
        ],
        "ChunkEntry.with_validation is an internal helper",
    ),
    "test_array.py::TestEquals::test_equals_nan_fill_value": (
        "builds a 1-d array over a manifest with 3-d chunk keys, a grid we refuse; NaN fill "
        "values comparing equal is tested in tests/manifests/test_array.py"
    ),
    "test_group.py::TestManifestGroup::test_manifest_repr": (
        "pins VirtualiZarr's multi-line repr text, which starts and ends with a newline"
    ),
    "test_store.py::TestToVirtualXarray::test_warns_about_oversized_virtual_chunks": (
        "VirtualiZarr warns on opening any virtual variable whose chunk exceeds its shape (every "
        "COG smaller than one tile); we refuse the concatenation that cannot work when it is "
        "asked for, naming the input and axis"
    ),
}

TESTS_DIR = Path(__file__).resolve().parent.parent

PYTEST_INI = """\
[pytest]
markers =
    asyncio: an async test, run by the conftest's pytest_pyfunc_call
    minio: needs an S3 server (moto on loopback here)
    network: needs the internet (none of the suite does)
    slow: a slow test
"""


class Outcome(NamedTuple):
    """How one test of the suite ended, and the failure message if it did not pass."""

    result: str
    message: str


def rewrite(source: str, name: str) -> str:
    """The test module ``source`` with VirtualiZarr's imports renamed to ours."""
    for old, new in RENAMES.items():
        source = source.replace(old, new)
    # The accessor VirtualiZarr registers as ``.vz`` is ``.virtual`` here.
    source = source.replace(".vz.", ".virtual.")
    left = re.findall(r"^\s*(?:from|import)\s+(?:virtualizarr|obspec_utils)\b.*$", source, re.M)
    assert not left, f"{name}: imports without a virtualstac equivalent: {left}"
    return source


def under(nodeid: str, entry: str) -> bool:
    """Whether the test ``nodeid`` is ``entry`` (a node id or prefix) or lies below it."""
    return nodeid == entry or nodeid.startswith((entry + "::", entry + "["))


def is_excluded(nodeid: str) -> bool:
    """Whether ``nodeid`` is, or lies below, an entry of :data:`EXCLUDED`."""
    return any(under(nodeid, entry) for entry in EXCLUDED)


def nodeid_of(case: ET.Element) -> str:
    """``file.py::Class::test[param]`` from a JUnit ``testcase`` element."""
    module, *classes = case.attrib["classname"].split(".")
    return "::".join([f"{module}.py", *classes, case.attrib["name"]])


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Run the rewritten suite once; the outcome of each of its tests by node id."""
    spec = importlib.util.find_spec("virtualizarr")
    assert spec is not None and spec.submodule_search_locations, "virtualizarr is not installed"
    source = Path(spec.submodule_search_locations[0]) / "tests" / "test_manifests"
    workdir = tmp_path_factory.mktemp("virtualizarr-suite")
    for name in SUITE:
        (workdir / name).write_text(rewrite((source / name).read_text(), name))
    shutil.copy(Path(__file__).with_name("virtualizarr_conftest.py"), workdir / "conftest.py")
    (workdir / "pytest.ini").write_text(PYTEST_INI)
    report = workdir / "report.xml"
    python_path = [str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"],
        cwd=workdir,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in python_path if p)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert report.exists(), f"the suite did not run:\n{run.stdout}\n{run.stderr}"
    results: dict[str, Outcome] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        problem = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        if problem is None:
            results[nodeid_of(case)] = Outcome("passed", "")
        else:
            message = problem.attrib.get("message", "") or (problem.text or "")
            results[nodeid_of(case)] = Outcome(problem.tag, message.strip()[:500])
    return results


@pytest.mark.parametrize("module", SUITE)
def test_every_test_not_excluded_passes(outcomes: dict[str, Outcome], module: str) -> None:
    ran = {n: o for n, o in outcomes.items() if n.startswith(module + "::")}
    failed = {n: o for n, o in ran.items() if o.result != "passed" and not is_excluded(n)}

    assert ran, f"no test of {module} ran"
    assert not failed, "\n".join(f"{n}: {o.result}: {o.message}" for n, o in sorted(failed.items()))


def test_every_exclusion_names_tests_of_the_suite(outcomes: dict[str, Outcome]) -> None:
    unmatched = [entry for entry in EXCLUDED if not any(under(n, entry) for n in outcomes)]

    assert not unmatched, f"exclusions that match no test (renamed or removed?): {unmatched}"
