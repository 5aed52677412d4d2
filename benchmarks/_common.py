"""Shared helpers for the benchmark scripts: workers in fresh processes, timing, RSS, tables.

Every measurement runs in a fresh subprocess of the same Python (``sys.executable``), so that
memory figures start from a clean heap and neither library warms caches for the other. A
benchmark script is both the driver and the worker: run as ``script.py --worker NAME JSON`` it
performs the single measurement ``NAME`` with the parameters ``JSON`` and prints one result line
(a JSON object after :data:`RESULT_MARKER`) that the driver parses.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import importlib.util
import json
import math
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "RESULT_MARKER",
    "Row",
    "Series",
    "Timing",
    "format_bytes",
    "peak_rss_bytes",
    "peer_available",
    "print_table",
    "progress",
    "reset_peak_rss",
    "rss_bytes",
    "run_worker",
    "time_calls",
    "trim_heap",
    "window_peak_rss_bytes",
    "worker_main",
]

RESULT_MARKER = "@@BENCH-RESULT@@ "
PEER = "virtualizarr"
_START = time.perf_counter()


# -- process memory ------------------------------------------------------------------------


def rss_bytes() -> int:
    """Resident set size of this process now, in bytes (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """Largest resident set size this process has had, in bytes."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_peak_rss() -> bool:
    """Start a new peak-RSS window (Linux ``clear_refs``); False where the kernel refuses.

    After this call :func:`window_peak_rss_bytes` reports the largest RSS since, so a figure can
    leave out the memory its untimed setup needed.
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def window_peak_rss_bytes() -> int:
    """Largest RSS since the last :func:`reset_peak_rss` (``VmHWM``), in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return peak_rss_bytes()


def trim_heap() -> None:
    """Collect garbage and hand free heap pages back to the OS, so RSS shows live memory only."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if name:
        try:
            ctypes.CDLL(name).malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass


# -- timing --------------------------------------------------------------------------------


@dataclass
class Timing:
    """Wall-clock seconds of repeated calls: the first call (cold) and the best of all."""

    runs: list[float] = field(default_factory=list)

    @property
    def first(self) -> float:
        """The first call, which pays for allocation and any lazy initialisation."""
        return self.runs[0]

    @property
    def best(self) -> float:
        """The fastest call."""
        return min(self.runs)

    def as_dict(self) -> dict[str, Any]:
        """The figures as plain JSON-able values."""
        return {"first": self.first, "best": self.best, "runs": [round(r, 4) for r in self.runs]}


def time_calls(
    fn: Callable[[], Any], repeat: int, after: Callable[[Any], None] | None = None
) -> Timing:
    """Call ``fn`` ``repeat`` times and time each call.

    ``after`` receives each result outside the timed region (to check or free it); the result is
    dropped and garbage is collected before the next call, so runs do not pile up memory.
    """
    timing = Timing()
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        result = fn()
        timing.runs.append(time.perf_counter() - start)
        if after is not None:
            after(result)
        del result
        gc.collect()
    return timing


# -- peer and workers ----------------------------------------------------------------------


def peer_available() -> bool:
    """Whether VirtualiZarr can be imported in this Python."""
    return importlib.util.find_spec(PEER) is not None


def progress(message: str) -> None:
    """Print a progress line with the seconds elapsed since the driver started."""
    print(f"  [{time.perf_counter() - _START:6.1f}s] {message}", flush=True)


def run_worker(
    script: Path, name: str, params: Mapping[str, Any], timeout: float = 900
) -> dict[str, Any] | None:
    """Run measurement ``name`` of ``script`` in a fresh subprocess and return its result.

    Returns ``None`` (after printing the tail of its stderr) if the worker fails, so that one
    broken measurement does not hide the others.
    """
    command = [sys.executable, str(script), "--worker", name, json.dumps(dict(params))]
    # Its own session: the processes a measurement started (pool workers, a forkserver, a
    # cluster's nannies) are ended with it, not left to wind down during the next measurement.
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as worker:
        try:
            stdout, stderr = worker.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
            print(f"    ! worker {name} timed out after {timeout:.0f} s", flush=True)
            return None
        finally:
            _end_session(worker.pid)
    done = subprocess.CompletedProcess(command, worker.returncode, stdout, stderr)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            result: dict[str, Any] = json.loads(line[len(RESULT_MARKER) :])
            return result
    tail = "\n      ".join(done.stderr.strip().splitlines()[-8:])
    print(f"    ! worker {name} failed (exit {done.returncode}):\n      {tail}", flush=True)
    return None


def _end_session(session: int) -> None:
    """End every process left in ``session`` and wait, up to 10 s, until they are gone."""
    for signal_number in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(session, signal_number)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.killpg(session, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.05)


def worker_main(workers: Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]]) -> bool:
    """If this process was started as a worker, run it, print its result and return True."""
    if len(sys.argv) < 2 or sys.argv[1] != "--worker":
        return False
    name, params = sys.argv[2], json.loads(sys.argv[3])
    result = workers[name](params)
    result["peak_rss"] = peak_rss_bytes()
    print(RESULT_MARKER + json.dumps(result), flush=True)
    return True


# -- reporting -----------------------------------------------------------------------------


@dataclass
class Row:
    """One figure measured for us and for the peer.

    ``better`` is ``"lower"`` (times, bytes) or ``"higher"`` (throughput). :attr:`advantage` is
    how many times better our figure is: above 1 we win, below 1 the peer wins. ``peer_name``
    says what the peer column holds when it is not VirtualiZarr (e.g. a native reader).
    """

    figure: str
    unit: str
    ours: float | None
    peer: float | None
    better: str = "lower"
    target: str = ""
    peer_name: str = "VirtualiZarr"

    @property
    def advantage(self) -> float | None:
        """Peer / ours for lower-is-better figures, ours / peer for higher-is-better ones."""
        if self.ours is None or self.peer is None or self.ours <= 0 or self.peer <= 0:
            return None
        return self.peer / self.ours if self.better == "lower" else self.ours / self.peer


@dataclass
class Series:
    """One line (or one group of bars) of a plot in ``benchmarks/results/``.

    A benchmark module that measures a figure against a varying quantity exposes
    ``series() -> list[Series]`` beside ``run()``: the series its last ``run()`` measured.
    ``run_all.py`` collects them and ``results.py`` draws one plot per ``plot`` name: lines
    against ``x`` when every ``x`` is a number, grouped bars when the ``x`` are labels (codecs,
    executors). ``label`` names the line: the library and the setting
    (``"virtualstac, process pool (2)"``).
    """

    plot: str
    label: str
    x_label: str
    y_label: str
    points: list[tuple[float | str, float]] = field(default_factory=list)


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 0.1:
        return f"{value:.2f}"
    return f"{value:.2g}"


def format_bytes(n: float) -> str:
    """Human-readable byte count (binary units)."""
    if n <= 0:
        return f"{n:.0f} B"
    exponent = min(int(math.log(n, 1024)), 4)
    unit = ("B", "KiB", "MiB", "GiB", "TiB")[exponent]
    return f"{n / 1024**exponent:.1f} {unit}"


def print_table(title: str, rows: Sequence[Row], peer_skipped: bool = False) -> None:
    """Print rows as an aligned table: figure, unit, ours, peer, advantage, peer name, target."""
    header = ("figure", "unit", "virtualstac", "peer", "ours better by", "peer is", "target")
    body = [
        (
            r.figure,
            r.unit,
            _number(r.ours),
            "skipped"
            if peer_skipped and r.peer is None and r.peer_name == "VirtualiZarr"
            else _number(r.peer),
            "-" if r.advantage is None else f"{r.advantage:.2f}x",
            r.peer_name,
            r.target,
        )
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in (header, *body)) for i in range(len(header))]
    print(f"\n{title}")
    print("  " + "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  " + "  ".join("-" * w for w in widths))
    for line in body:
        cells = [
            c.ljust(w) if i < 2 or i >= 5 else c.rjust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        ]
        print("  " + "  ".join(cells).rstrip())
    if peer_skipped:
        print("  (VirtualiZarr is not importable here: its measurements were skipped)")
    sys.stdout.flush()
