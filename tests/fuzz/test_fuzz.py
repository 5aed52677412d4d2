"""Damaged files of every format: a typed error, or the values they should read as.

``worker.py`` writes a small real file of each format (``samples.py``), damages seeded copies
of it (truncation, bit flips, zeroed bytes, in headers, metadata documents and chunk data),
and opens and reads each through a virtual dataset. It runs in one subprocess whose address
space is limited, so a memory bomb fails its case and a crash or hang in C code is reported
with the case that caused it. Every case must end in a typed error from
:mod:`virtualstac.errors`, in values equal to the undamaged file's, or in values equal to what
the format's reference reader returns for the damaged file (damage no reader can detect:
uncompressed chunk bytes, or a changed offset in a reference). See ``worker.py``.
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from samples import SAMPLES

WORKER = Path(__file__).with_name("worker.py")
#: Damaged copies per format: 80 x 10 formats take about 15 s on an idle 2-core machine.
CASES_PER_FORMAT = 80
#: The whole run; a case that hangs in C code (where the worker's alarm cannot reach) ends it.
WORKER_TIMEOUT = 600
FAILURES = ("raw", "differ", "hang")


@dataclass
class FuzzRun:
    results: list[dict[str, Any]]
    unfinished: list[str]
    returncode: int
    stderr: str

    def of(self, fmt: str) -> list[dict[str, Any]]:
        return [r for r in self.results if r["format"] == fmt]


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory: pytest.TempPathFactory) -> FuzzRun:
    output = tmp_path_factory.mktemp("fuzz")
    done = subprocess.run(
        [sys.executable, str(WORKER), str(output), str(CASES_PER_FORMAT)],
        capture_output=True,
        text=True,
        timeout=WORKER_TIMEOUT,
        cwd=WORKER.parent,
        check=False,
    )
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    results = [r for r in records if r["event"] == "end"]
    ended = {r["case"] for r in results}
    unfinished = [r["case"] for r in records if r["event"] == "start" and r["case"] not in ended]
    counts = collections.Counter(r["outcome"] for r in results)
    print(f"\nfuzz: {len(results)} cases: {dict(sorted(counts.items()))}")
    return FuzzRun(results, unfinished, done.returncode, done.stderr)


def test_every_case_runs_to_its_end(fuzz: FuzzRun) -> None:
    # A crash (or the address-space limit hit outside Python) leaves its case unfinished.
    assert fuzz.unfinished == [], fuzz.stderr[-3000:]
    assert fuzz.returncode == 0, fuzz.stderr[-3000:]
    assert len(fuzz.results) == CASES_PER_FORMAT * len(SAMPLES)


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_damage_raises_a_typed_error_or_reads_right(fuzz: FuzzRun, fmt: str) -> None:
    results = fuzz.of(fmt)
    failures = [r for r in results if r["outcome"] in FAILURES]
    assert failures == [], json.dumps(failures, indent=1)[:6000]
    outcomes = collections.Counter(r["outcome"] for r in results)
    # Damage is varied enough to be caught sometimes and to miss what is read other times.
    assert outcomes["typed"] > 0
    assert outcomes["equal"] + outcomes["reference"] > 0


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_typed_errors_are_one_line_naming_the_file(fuzz: FuzzRun, fmt: str) -> None:
    typed = [r for r in fuzz.of(fmt) if r["outcome"] == "typed"]
    for result in typed:
        message = result["message"]
        assert "\n" not in message, message
        damaged = result["damage"].split(":", 1)[0].split("/", 1)[0]  # "case12"
        # Kerchunk references name their source: sample.source.nc, or, where the damage hit
        # the source's path (which bytes it hits depends on the temporary directory's name),
        # the file URL the damaged reference names instead.
        names_source = fmt.startswith("kerchunk") and re.search(r"file:///[^\s']+", message)
        assert f"/{damaged}" in message or names_source, message


def test_no_rust_panic_reaches_stderr(fuzz: FuzzRun) -> None:
    assert "panicked" not in fuzz.stderr
