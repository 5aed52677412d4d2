"""The benchmark results generator writes the markdown table and the plots from given figures.

No benchmark runs here: the rows and series are made up, as a benchmark module would return
them, and ``benchmarks/results.py`` turns them into ``results.md`` and PNG files.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _common import Row, Series
from results import markdown_tables, write_results

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

SECTIONS = [
    (
        "Read throughput (uncompressed MB per second)",
        [
            Row("zlib+shuffle: store", "MB/s", 150.0, 50.0, better="higher", target=">= 1.5x"),
            Row("raw: store vs native", "MB/s", 400.0, None, better="higher", peer_name="h5py"),
        ],
    ),
    ("Chunk manifests", [Row("memory/ref, RSS | 1M refs", "B/ref", 12.0, 96.0)]),
]

SERIES = [
    Series("Read throughput per codec", "virtualstac", "codec", "MB/s", [("zlib+shuffle", 150.0)]),
    Series("Read throughput per codec", "virtualstac", "codec", "MB/s", [("raw", 400.0)]),
    Series("Read throughput per codec", "h5py", "codec", "MB/s", [("zlib+shuffle", 100.0)]),
    Series(
        "Files per second", "virtualstac, serial", "files", "files/s", [(10, 80.0), (1000, 82.0)]
    ),
    Series(
        "Files per second", "VirtualiZarr, serial", "files", "files/s", [(10, 30.0), (1000, 40.0)]
    ),
    Series("Nothing measured", "virtualstac", "x", "y", []),
]


def test_markdown_tables_hold_every_figure_beside_the_peers() -> None:
    markdown = markdown_tables(SECTIONS)

    assert "## Read throughput (uncompressed MB per second)" in markdown
    assert (
        "| zlib+shuffle: store | MB/s | 150 | 50.0 | 3.00x | VirtualiZarr | >= 1.5x |" in markdown
    )
    assert "| raw: store vs native | MB/s | 400 | - | - | h5py |  |" in markdown
    # A pipe inside a figure's name does not split its row.
    assert "| memory/ref, RSS \\| 1M refs | B/ref | 12.0 | 96.0 | 8.00x |" in markdown


def test_write_results_writes_the_table_and_one_plot_per_name(tmp_path: Path) -> None:
    (tmp_path / "from-an-older-run.png").write_bytes(PNG_SIGNATURE)

    written = write_results(tmp_path, SECTIONS, SERIES, header=["2 CPUs; quick run."])

    names = sorted(path.name for path in written)
    assert names == ["files-per-second.png", "read-throughput-per-codec.png", "results.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    for name in names[:2]:
        assert (tmp_path / name).read_bytes().startswith(PNG_SIGNATURE)
    markdown = (tmp_path / "results.md").read_text()
    assert markdown.startswith("# Benchmark results\n\n2 CPUs; quick run.\n")
    assert "![Files per second](files-per-second.png)" in markdown
    assert "![Read throughput per codec](read-throughput-per-codec.png)" in markdown
    assert "| zlib+shuffle: store | MB/s | 150 |" in markdown
