"""The ``virtualstac`` command: publish a static STAC collection as a virtual store, or inspect one.

``virtualstac publish COLLECTION_JSON TARGET`` virtualizes the collection's source assets,
writes an Icechunk repository (or Kerchunk references) at TARGET and saves the collection with
the store recorded as an asset. ``virtualstac info URL`` prints the dataset of an Item or
Collection (from its published store when it has one). Errors are reported in one line, with an
exit status of 1; usage errors exit with 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import icechunk
import pystac

from virtualstac.errors import VirtualStacError

__all__ = ["main"]

_PROGRAM = "virtualstac"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit status."""
    arguments = _parser().parse_args(argv)
    if "ICECHUNK_LOG" not in os.environ:
        # Icechunk warns on every local repository that it is unsafe for concurrent commits;
        # a one-shot command makes one commit at most. ICECHUNK_LOG still chooses otherwise.
        icechunk.set_logs_filter("error")
    try:
        if arguments.command == "publish":
            return _publish(arguments)
        return _info(arguments)
    except (VirtualStacError, pystac.STACError, OSError, ValueError, KeyError, TypeError) as err:
        print(f"{_PROGRAM}: error: {_one_line(err)}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROGRAM,
        description="Publish a static STAC collection as a virtual Zarr store, or inspect one.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    publish = commands.add_parser(
        "publish",
        help="publish a static STAC collection as a virtual Zarr store",
        description="Virtualize the source assets of a collection's items, write a virtual "
        "store, and save the collection with the store recorded as an asset. Publishing again "
        "adds only new items.",
    )
    publish.add_argument("collection", help="path of the collection JSON (collection.json)")
    publish.add_argument("target", help="where the store goes: a local path or s3://bucket/prefix")
    publish.add_argument("--format", choices=("icechunk", "kerchunk"), default="icechunk")
    publish.add_argument(
        "--kerchunk-format",
        choices=("json", "parquet"),
        default="json",
        help="Kerchunk file layout (with --format kerchunk)",
    )
    publish.add_argument(
        "--assets", nargs="+", metavar="KEY", help="asset keys to publish (default: data assets)"
    )
    publish.add_argument(
        "--overviews",
        action="store_true",
        help="also publish the COG overviews, as a multiscales group of resolution levels",
    )
    publish.add_argument("--workers", type=_positive, default=1, help="parallel parsing threads")
    publish.add_argument("--no-progress", action="store_true", help="do not print progress")
    publish.add_argument(
        "--output", type=Path, help="save the updated collection here (default: in place)"
    )

    info = commands.add_parser(
        "info",
        help="print the dataset of a STAC Item or Collection",
        description="Open an Item or Collection (its published store when it has one) and "
        "print its dataset.",
    )
    info.add_argument("url", help="path or URL of an Item or Collection JSON")
    info.add_argument(
        "--sources", action="store_true", help="parse the source assets even if a store exists"
    )
    return parser


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _one_line(err: BaseException) -> str:
    text = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
    return " ".join(line.strip() for line in text.splitlines() if line.strip()) or repr(err)


def _publish(arguments: argparse.Namespace) -> int:
    from virtualstac.stac.publish import publish
    from virtualstac.stac.writable import check_file_writable

    source = Path(arguments.collection)
    document = json.loads(source.read_text())
    if document.get("type") != "Collection":
        raise ValueError(
            f"{source} is a {document.get('type', 'document without a type')}, not a STAC "
            "Collection; pass the collection.json of the collection to publish"
        )
    collection = pystac.Collection.from_file(str(source.resolve()))
    had_self_link = any(link.get("rel") == "self" for link in document.get("links", []))
    output = (arguments.output or source).resolve()
    # The store is written first and the collection last: check now that the last step can be
    # done, rather than leave a store the saved collection does not record.
    check_file_writable(output, "the collection")
    with ThreadPoolExecutor(arguments.workers) as pool:
        publish(
            collection,
            arguments.target,
            format=arguments.format,
            kerchunk_format=arguments.kerchunk_format,
            assets=arguments.assets,
            parallel=pool if arguments.workers > 1 else False,
            progress=not arguments.no_progress,
            overviews=arguments.overviews,
        )
    _save(collection, output, include_self_link=had_self_link)
    asset = collection.assets[arguments.format]
    print(
        f"published {len(asset.extra_fields['virtual:items'])} items to {asset.href}; "
        f"saved {output}"
    )
    return 0


def _save(collection: pystac.Collection, path: Path, *, include_self_link: bool) -> None:
    """Write the collection JSON at ``path`` by renaming, links relative to its new place."""
    from virtualstac.writers.staging import replacing

    for link in collection.links:
        if link.rel != "self" and not link.is_resolved():
            link.target = link.get_absolute_href() or link.target
    collection.set_self_href(str(path))
    document: dict[str, Any] = collection.to_dict(include_self_link=include_self_link)
    # Beside the file under a name of this process, which the next save removes if killed.
    with replacing(path) as staged:
        staged.write_text(json.dumps(document, indent=2))


def _info(arguments: argparse.Namespace) -> int:
    from virtualstac.manifests import ManifestArray
    from virtualstac.stac.open import open_stac

    stac = pystac.read_file(arguments.url)
    if not isinstance(stac, pystac.Item | pystac.Collection):
        raise ValueError(f"{arguments.url} is a {type(stac).__name__}, not an Item or Collection")
    datasets = open_stac(stac, group_by="grid", use_published=not arguments.sources)
    virtual = any(
        isinstance(v.data, ManifestArray) for d in datasets.values() for v in d.variables.values()
    )
    origin = "its source assets (virtual references)" if virtual else "its published store"
    print(f"{type(stac).__name__} {stac.id}, opened from {origin}:")
    for grid, dataset in datasets.items():
        if len(datasets) > 1:
            print(f"\non the grid {grid}:" if grid is not None else "\nwithout a raster grid:")
        print(dataset)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
