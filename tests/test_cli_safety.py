"""The ``virtualstac`` command at its edges: Ctrl-C, credentials in URLs, ``python -m``.

Whatever a user types or a catalog holds, the command ends with one line on stderr and an exit
status a shell can test, and never prints a password or a URL's signature.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pystac
import pytest
import rasterio
from rasterio.transform import from_origin

from faulty_servers import FaultyServer
from virtualstac.cli import main

SECRET = "s3cr3t"


def test_ctrl_c_ends_with_one_line_and_status_130() -> None:
    """Interrupted while it waits for a server, the command says so, without a traceback."""
    with FaultyServer({"item.json": b"{}"}, "hang") as server:
        command = [sys.executable, "-m", "virtualstac", "info", server.url_for("item.json")]
        with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as process:
            while server.connections == 0 and process.poll() is None:
                time.sleep(0.05)
            time.sleep(0.2)  # the request sent, the answer awaited
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=60)
    assert err == "virtualstac: interrupted\n"
    assert process.returncode == 130


def test_python_m_virtualstac_runs_the_command() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "virtualstac", "info", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0
    assert shown.stdout.startswith("usage: virtualstac info ")


@pytest.mark.parametrize(
    "url",
    [
        f"http://user:{SECRET}@{{host}}/root/catalog.json",
        f"{{url}}/root/catalog.json?token={SECRET}",
    ],
)
def test_errors_never_show_the_credentials_of_the_url_given(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = pystac.Catalog("root", "a catalog of collections")
    catalog.normalize_and_save(str(tmp_path / "root"), pystac.CatalogType.SELF_CONTAINED)
    document = (tmp_path / "root" / "catalog.json").read_bytes()
    with FaultyServer({"root/catalog.json": document}, "serve") as server:
        given = url.format(host=server.url.removeprefix("http://"), url=server.url)
        assert main(["info", given]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert "is a Catalog, not an Item, Collection or ItemCollection" in line
    assert SECRET not in line and "***" in line


def test_source_credentials_are_redacted_in_logs_and_summaries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An asset href with a user and password is read with them, and shown without."""
    cog = tmp_path / "B02.tif"
    profile = {
        "driver": "COG",
        "width": 64,
        "height": 64,
        "count": 1,
        "dtype": "uint16",
        "crs": "EPSG:32633",
        "transform": from_origin(500000, 4000000, 10, 10),
    }
    with rasterio.open(cog, "w", **profile) as dst:
        dst.write(np.ones((1, 64, 64), "uint16"))
    with FaultyServer({"B02.tif": cog.read_bytes()}, "serve") as server:
        item = pystac.Item("S0", None, None, dt.datetime(2024, 5, 1, tzinfo=dt.UTC), {})
        href = server.url_for("B02.tif").replace("http://", f"http://user:{SECRET}@")
        item.add_asset("B02", pystac.Asset(href, media_type="image/tiff", roles=["data"]))
        path = tmp_path / "S0.json"
        item.set_self_href(str(path))
        path.write_text(json.dumps(item.to_dict()))

        assert main(["-v", "info", "--json", "--no-progress", str(path)]) == 0

    out, err = capsys.readouterr()
    shown = server.url_for("B02.tif").replace("http://", "http://***@")
    assert json.loads(out)["sources"] == [shown]
    assert f"virtualstac: parsed {shown}" in err
    assert SECRET not in out + err


@pytest.mark.parametrize(
    ("text", "kind"), [("[1, 2]", "array"), ("null", "null"), ('"x"', "string")]
)
def test_json_that_holds_no_object_is_named(
    text: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = tmp_path / "item.json"
    document.write_text(text)
    assert main(["info", str(document)]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line == (
        f"virtualstac: error: invalid STAC JSON {document}: it holds a JSON {kind}, "
        "not a STAC object"
    )


def write_catalog(root: Path, count: int) -> Path:
    """``catalog/collection.json`` of ``count`` daily items, each a small COG."""
    items = []
    for day in range(count):
        path = root / "data" / f"B02_{day}.tif"
        path.parent.mkdir(exist_ok=True)
        profile = {
            "driver": "COG",
            "width": 64,
            "height": 64,
            "count": 1,
            "dtype": "uint16",
            "crs": "EPSG:32633",
            "transform": from_origin(500000, 4000000, 10, 10),
        }
        with rasterio.open(path, "w", **profile) as dst:
            dst.write(np.full((1, 64, 64), day, "uint16"))
        item = pystac.Item(
            f"S{day}",
            {"type": "Point", "coordinates": [15.0, 36.1]},
            [15.0, 36.1, 15.0, 36.1],
            dt.datetime(2024, 5, 1 + day, tzinfo=dt.UTC),
            {},
        )
        item.add_asset("B02", pystac.Asset(str(path), media_type="image/tiff", roles=["data"]))
        items.append(item)
    collection = pystac.Collection("scenes", "scenes", pystac.Extent.from_items(items))
    for item in items:
        collection.add_item(item)
    collection.normalize_and_save(str(root / "catalog"), pystac.CatalogType.SELF_CONTAINED)
    return root / "catalog" / "collection.json"


def test_ctrl_c_in_a_terminal_stops_the_worker_processes_quietly(tmp_path: Path) -> None:
    """A terminal's Ctrl-C signals the whole process group, the workers included."""
    catalog = write_catalog(tmp_path, 8)
    before = catalog.read_bytes()
    command = [sys.executable, "-m", "virtualstac", "publish", str(catalog), "--workers", "2"]
    command += [str(tmp_path / "s.icechunk"), "--parallel", "processes"]
    with subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as process:
        assert process.stderr is not None
        shown = ""
        while "virtualizing" not in shown and process.poll() is None:
            shown += process.stderr.read(1)  # the workers are started, the sources submitted
        time.sleep(0.3)
        os.killpg(process.pid, signal.SIGINT)
        _, err = process.communicate(timeout=120)
    assert "Traceback" not in err
    assert err.endswith("virtualstac: interrupted\n")
    assert process.returncode == 130
    assert catalog.read_bytes() == before


@pytest.mark.parametrize("module", ["virtualstac", "virtualstac.cli"])
def test_verbose_may_follow_the_command(module: str, tmp_path: Path) -> None:
    """``-v`` after the command, where users put it, as before it; with either ``-m``."""
    catalog = write_catalog(tmp_path, 1)
    target = tmp_path / "s.icechunk"
    command = [sys.executable, "-m", module, "publish", str(catalog), str(target)]
    done = subprocess.run(
        [*command, "--no-progress", "-v"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "virtualstac: wrote 1 new item" in done.stderr
    assert f"virtualstac: saved the collection at {catalog}" in done.stderr
    assert done.stdout.startswith("published 1 item (1 new,")


def test_publish_reads_utf8_json_whatever_the_locale(tmp_path: Path) -> None:
    """JSON is UTF-8: a collection described in French publishes under an ASCII locale."""
    catalog = write_catalog(tmp_path, 1)
    document = json.loads(catalog.read_text())
    document["description"] = "Scènes d'été"
    catalog.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    command = [sys.executable, "-X", "utf8=0", "-m", "virtualstac", "publish", str(catalog)]
    done = subprocess.run(
        [*command, str(tmp_path / "s.icechunk"), "--no-progress"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0"},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(catalog.read_text(encoding="utf-8"))["description"] == "Scènes d'été"
