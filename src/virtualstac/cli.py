"""The ``virtualstac`` command: publish a static STAC collection as a virtual store, or inspect one.

``virtualstac publish COLLECTION_JSON TARGET`` virtualizes the collection's source assets,
writes an Icechunk repository (or Kerchunk references) at TARGET and saves the collection with
the store recorded as an asset. ``virtualstac info URL`` prints the dataset of an Item or
Collection (from its published store when it has one), or with ``--json`` a summary of it.
Errors are reported in one line (credentials redacted), with an exit status of 1; usage errors
exit with 2, Ctrl-C with 130. Progress bars are on unless ``--no-progress``; ``--verbose`` logs
what is read and written.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import multiprocessing
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pystac

from virtualstac.errors import VirtualStacError, redact
from virtualstac.stac.invalid import reading_stac

__all__ = ["main"]

_PROGRAM = "virtualstac"


#: Options that only apply to one format, with that format.
_FORMAT_ONLY = {"kerchunk_format": ("--kerchunk-format", "kerchunk")}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit status."""
    # Icechunk's Rust warnings are silenced when virtualstac is imported (unless ICECHUNK_LOG).
    arguments = _parser().parse_args(argv)
    refused = _refused_option(arguments) if arguments.command == "publish" else None
    if refused is not None:
        print(f"{_PROGRAM}: error: {refused}", file=sys.stderr)
        return 2
    try:
        with _logging_to_stderr(verbose=arguments.verbose):
            status = _publish(arguments) if arguments.command == "publish" else _info(arguments)
        sys.stdout.flush()  # here, so that a closed pipe is met inside the try
    except BrokenPipeError:
        # The reader went away (``virtualstac info ... | head -1``): stop quietly. Python's
        # docs recommend pointing stdout at devnull so that the exit flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        # Ctrl-C: what was written is left as a killed publish leaves it, and the next
        # publish completes it. 130 is what shells report for a command ended by SIGINT.
        print(f"{_PROGRAM}: interrupted", file=sys.stderr)
        return 130
    except (VirtualStacError, pystac.STACError, OSError, ValueError, KeyError, TypeError) as err:
        print(f"{_PROGRAM}: error: {_one_line(err)}", file=sys.stderr)
        return 1
    return status


class _RedactingFormatter(logging.Formatter):
    """Log lines with the credentials of URLs in them (signed hrefs, user:password@) hidden."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


@contextmanager
def _logging_to_stderr(*, verbose: bool) -> Iterator[None]:
    """Show virtualstac's warnings (with ``verbose``, what it reads and writes) on stderr.

    Only while the command runs: ``main`` called in-process leaves logging as it found it.
    """
    logger = logging.getLogger("virtualstac")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter(f"{_PROGRAM}: %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _refused_option(arguments: argparse.Namespace) -> str | None:
    """Why an option given does not apply to the chosen format, or None."""
    for name, (flag, format) in _FORMAT_ONLY.items():
        if getattr(arguments, name) is not None and arguments.format != format:
            return f"{flag} applies to --format {format}, not to --format {arguments.format}"
    return None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROGRAM,
        description="Publish a static STAC collection as a virtual Zarr store, or inspect one.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {importlib.metadata.version(_PROGRAM)}"
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log the files read and written on stderr"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    # -v also after the command, where users put it; left unset there so as not to undo a -v
    # given before it.
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="log the files read and written on stderr",
    )

    publish = commands.add_parser(
        "publish",
        parents=[verbose],
        help="publish a static STAC collection as a virtual Zarr store",
        description="Virtualize the source assets of a collection's items, write a virtual "
        "store, and save the collection with the store recorded as an asset. Publishing again "
        "adds only new items.",
    )
    publish.add_argument("collection", help="path of the collection JSON (collection.json)")
    publish.add_argument("target", help="where the store goes: a local path or s3://bucket/prefix")
    publish.add_argument(
        "--format",
        choices=("icechunk", "kerchunk"),
        default="icechunk",
        help="store format (default icechunk)",
    )
    publish.add_argument(
        "--kerchunk-format",
        choices=("json", "parquet"),
        help="Kerchunk file layout (with --format kerchunk; default json)",
    )
    publish.add_argument(
        "--asset-key",
        metavar="KEY",
        help="key of the published asset on the collection (default: the format's name); "
        "another key records a second store beside the first",
    )
    publish.add_argument(
        "--replace",
        action="store_true",
        help="when the asset records a store at another target, record the new store instead "
        "(the old one is left untouched)",
    )
    publish.add_argument(
        "--assets", nargs="+", metavar="KEY", help="asset keys to publish (default: data assets)"
    )
    publish.add_argument(
        "--groupby",
        metavar="HOW",
        help="which items form one time step: 'time' (default: equal datetimes), 'solar_day' "
        "(tiles of one pass stamped seconds apart), 'id', or an item property name",
    )
    publish.add_argument(
        "--overviews",
        action="store_true",
        help="also publish the COG overviews, as a multiscales group of resolution levels",
    )
    publish.add_argument(
        "--workers",
        type=_positive,
        default=1,
        metavar="N",
        help="sources parsed at a time (threads or processes; default 1)",
    )
    publish.add_argument(
        "--parallel",
        type=_parallel,
        default="threads",
        metavar="HOW",
        help="'threads' (default) or 'processes' (--workers of them), or dask://HOST:PORT: the "
        "workers of that dask.distributed scheduler parse the sources and write the Icechunk "
        "repository (or new Kerchunk parquet records)",
    )
    publish.add_argument("--no-progress", action="store_true", help="no progress bars")
    publish.add_argument(
        "--output",
        type=Path,
        metavar="PATH",
        help="save the updated collection here (default: in place)",
    )

    info = commands.add_parser(
        "info",
        parents=[verbose],
        help="print the dataset of a STAC Item or Collection",
        description="Open an Item or Collection (its published store when it has one) and "
        "print its dataset.",
    )
    info.add_argument("url", help="path or URL of an Item or Collection JSON")
    info.add_argument(
        "--sources", action="store_true", help="parse the source assets even if a store exists"
    )
    info.add_argument(
        "--json", action="store_true", help="print a machine-readable summary, as JSON"
    )
    info.add_argument("--no-progress", action="store_true", help="no progress bars")
    info.add_argument(
        "--authorize",
        action="append",
        type=_prefix,
        metavar="PREFIX",
        help="a URL prefix the catalog may make us read beyond its own assets (repeatable): "
        "sources of Kerchunk references, containers of a published store",
    )
    info.add_argument(
        "--trust-catalog-endpoints",
        action="store_true",
        help="send your credentials to the S3 endpoints the catalog's storage schemes choose",
    )
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        # argparse would name this function: "invalid _positive value".
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _prefix(text: str) -> str:
    """A prefix to authorize: a URL, or a local path (relative ones from where the command
    runs, as a shell user means them; a trailing ``/`` is kept: it limits the prefix to the
    directory's contents)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must be a path or URL prefix, got {text!r}")
    if "://" in text:
        return text
    resolved = str(Path(text).expanduser().resolve())
    return resolved + "/" if text.endswith("/") and resolved != "/" else resolved


def _parallel(text: str) -> str:
    if text in ("threads", "processes") or (text.startswith("dask://") and len(text) > 7):
        return text
    raise argparse.ArgumentTypeError(
        f"must be 'threads', 'processes' or dask://HOST:PORT, got {text!r}"
    )


@contextmanager
def _executor(how: str, workers: int) -> Iterator[Any]:
    """What parses (and on a dask cluster, writes): threads, processes or a dask client."""
    if how.startswith("dask://"):
        from distributed import Client

        with Client("tcp://" + how.removeprefix("dask://")) as client:  # type: ignore[no-untyped-call]
            yield client
    elif how == "processes":
        # obstore's runtime does not survive fork (see virtualstac.parallel.check_fork_safe).
        context = multiprocessing.get_context("forkserver")
        # Ctrl-C reaches the whole process group: this process stops the publish, and the
        # workers, left to end quietly, would each print a KeyboardInterrupt traceback.
        ignoring = (signal.SIGINT, signal.SIG_IGN)
        with _stopping(
            ProcessPoolExecutor(
                workers, mp_context=context, initializer=signal.signal, initargs=ignoring
            )
        ) as processes:
            yield processes
    else:
        with _stopping(ThreadPoolExecutor(workers)) as threads:
            yield threads if workers > 1 else False


@contextmanager
def _stopping(executor: Executor) -> Iterator[Executor]:
    """``executor``, shut down on leaving without running the tasks still queued: after
    Ctrl-C or an error, what is left to parse is not wanted (leaving ``with executor`` would
    run it all first)."""
    try:
        yield executor
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def _one_line(err: BaseException) -> str:
    """The message of ``err`` on one line, credentials redacted: errors of pystac, obstore or
    the standard library quote URLs as they were given."""
    text = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
    return redact(" ".join(line.strip() for line in text.splitlines() if line.strip()) or repr(err))


def _publish(arguments: argparse.Namespace) -> int:
    from virtualstac.stac.publish import publish
    from virtualstac.stac.writable import check_file_writable

    if "://" in arguments.collection:
        # The collection is saved where it was read: a URL cannot be (a path would mangle it).
        raise ValueError(
            f"cannot publish the collection at {arguments.collection}: publish saves the "
            "collection it reads, so it takes a local collection.json; download the catalog "
            "and publish its copy"
        )
    source = Path(arguments.collection)
    with reading_stac(str(source), "STAC Collection"):
        document = json.loads(source.read_text(encoding="utf-8"))  # JSON's, whatever the locale
    kind = document.get("type") if isinstance(document, dict) else "JSON array or value"
    if kind != "Collection":
        raise ValueError(
            f"{source} is a {kind or 'document without a type'}, not a STAC "
            "Collection; pass the collection.json of the collection to publish"
        )
    with reading_stac(str(source), "STAC Collection"):
        collection = pystac.Collection.from_file(str(source.resolve()))
    had_self_link = any(link.get("rel") == "self" for link in document.get("links", []))
    output = (arguments.output or source).resolve()
    # The store is written first and the collection last: check now that the last step can be
    # done, rather than leave a store the saved collection does not record.
    check_file_writable(output, "the collection")
    key = arguments.asset_key or arguments.format
    recorded = collection.assets.get(key)
    # Copied now: publishing may update the asset in place.
    before = None if recorded is None else (_href(recorded), _items(recorded))
    with _executor(arguments.parallel, arguments.workers) as parallel, _grids_advice():
        publish(
            collection,
            arguments.target,
            format=arguments.format,
            kerchunk_format=arguments.kerchunk_format or "json",
            assets=arguments.assets,
            asset_key=arguments.asset_key,
            parallel=parallel,
            progress=not arguments.no_progress,
            overviews=arguments.overviews,
            replace=arguments.replace,
            groupby=arguments.groupby,
        )
    _save(collection, output, include_self_link=had_self_link)
    # Named, not __name__: run as ``python -m virtualstac.cli`` this module is "__main__",
    # outside the "virtualstac" logger that -v shows.
    logging.getLogger("virtualstac.cli").info("saved the collection at %s", output)
    asset = collection.assets[key]
    print(redact(f"published {_counts(before, asset)} to {_href(asset)}; saved {output}"))
    return 0


@contextmanager
def _grids_advice() -> Iterator[None]:
    """Advise on mixed grids with the command's options: it has no ``group_by``."""
    from virtualstac.stac.combining import MIXED_GRIDS_ADVICE, MixedGridsError

    try:
        yield
    except MixedGridsError as err:
        advice = (
            "Virtual references cannot resample: publish the assets of one grid with "
            "--assets KEY ..., and those of another grid under another --asset-key."
        )
        raise MixedGridsError(str(err).replace(MIXED_GRIDS_ADVICE, advice)) from err


def _href(asset: pystac.Asset) -> str:
    """Where the store is (a relocatable catalog records it relative to the collection)."""
    return asset.get_absolute_href() or asset.href


def _items(asset: pystac.Asset) -> tuple[str, ...]:
    return tuple(asset.extra_fields.get("virtual:items") or ())


def _counts(before: tuple[str, tuple[str, ...]] | None, after: pystac.Asset) -> str:
    """How many items the store holds: new (in a new store), appended, already present."""
    items = _items(after)
    same_store = before is not None and before[0] == _href(after)
    present = set(before[1]) if before is not None and same_store else set()
    already = sum(item in present for item in items)
    new = 0 if same_store else len(items)
    appended = len(items) - new - already
    noun = "item" if len(items) == 1 else "items"
    return f"{len(items)} {noun} ({new} new, {appended} appended, {already} already present)"


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
    from pystac_client import ItemSearch

    from virtualstac.cli_summary import dataset_summary, opened_stores, sources_of
    from virtualstac.manifests import ManifestArray
    from virtualstac.stac.documents import read_stac
    from virtualstac.stac.open import open_stac
    from virtualstac.storage.client import DEFAULT_NETWORK

    # Bounded as every read is; links followed later go through the same reader.
    stac = read_stac(arguments.url, DEFAULT_NETWORK)
    kind = type(stac).__name__
    if not isinstance(stac, pystac.Item | pystac.Collection | pystac.ItemCollection):
        what = "a STAC API" if isinstance(stac, ItemSearch) else f"a {kind}"
        raise ValueError(
            f"{arguments.url} is {what}, not an Item, Collection or ItemCollection: name one "
            "of its Collections or Items, or save a search's items as a FeatureCollection"
        )
    if isinstance(stac, pystac.ItemCollection) and not stac.items:
        raise ValueError(f"{arguments.url} is a FeatureCollection holding no Items")
    # An ItemCollection or a search has no id: named by its URL, which may be signed.
    name = getattr(stac, "id", None) or redact(arguments.url)
    # Sources are summarised by their references; a published store by what it holds.
    parse = arguments.sources or not opened_stores(stac)
    datasets = open_stac(
        stac,
        group_by="grid",
        references=parse,
        progress=not arguments.no_progress,
        authorize=arguments.authorize,
        trust_catalog_endpoints=arguments.trust_catalog_endpoints,
    )
    virtual = any(
        isinstance(v.data, ManifestArray) for d in datasets.values() for v in d.variables.values()
    )
    assets = [] if virtual else opened_stores(stac)
    stores = [redact(asset.get_absolute_href() or asset.href) for asset in assets]
    if arguments.json:
        summary = {
            "type": kind,
            "id": name,
            # The first store read (the one holding the first variables), and every one.
            "opened": stores[0] if stores else "parsed sources",
            "stores": stores,
            "datasets": [dataset_summary(grid, dataset) for grid, dataset in datasets.items()],
            "sources": [redact(source) for source in sources_of(assets, datasets.values())],
        }
        print(json.dumps(summary, indent=2))
        return 0
    if virtual:
        origin = "its source assets (virtual references)"
    else:
        origin = f"its published store{'s' if len(stores) > 1 else ''} {', '.join(stores)}"
    print(f"{kind} {name}, opened from {origin}:")
    for grid, dataset in datasets.items():
        if len(datasets) > 1:
            print(f"\non the grid {grid}:" if grid is not None else "\nwithout a raster grid:")
        print(dataset)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
