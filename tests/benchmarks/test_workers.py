"""Each measurement runs in a fresh process, and the processes it started end with it: a pool
or cluster left winding down would take the cores of the next measurement."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _common import run_worker

# A measurement that leaves a child behind, detached from its output (as a process pool's
# forkserver may be), writing the child's pid into its result.
LEAVES_A_CHILD = """
import subprocess, sys
sys.path.insert(0, {benchmarks!r})
from _common import worker_main

def leave_child(params):
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return {{"child": child.pid}}

worker_main({{"leave": leave_child}})
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_processes_a_measurement_leaves_behind_end_with_it(tmp_path: Path) -> None:
    script = tmp_path / "leaves.py"
    benchmarks = str(Path(__file__).resolve().parents[2] / "benchmarks")
    script.write_text(LEAVES_A_CHILD.format(benchmarks=benchmarks))

    result = run_worker(script, "leave", {})

    assert result is not None
    deadline = time.monotonic() + 5
    while alive(result["child"]) and time.monotonic() < deadline:
        time.sleep(0.05)  # ended, but perhaps not yet reaped by init
    assert not alive(result["child"])
    assert result["child"] != os.getpid()
