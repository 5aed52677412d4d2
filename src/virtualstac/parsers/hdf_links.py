"""Following an HDF5 file's links without leaving the file.

A path in an HDF5 file (a soft link's target, the ``group`` asked for) can pass through an
external link, which HDF5 follows by opening the file it names, by name, from the local disk:
a file nobody authorized (``../../home/you/secret.h5``), whose metadata it would read. Opened
as a SWMR reader (by name: :mod:`~virtualstac.parsers.hdf_open`), HDF5 does so; opened through
a file object, it opens that same file object again, and a path through the link would lead to
an object of *this* file, not of the one HDF5 readers see. Either way the references built
would be wrong. So paths are walked here one link at a time, following hard and soft links as
HDF5 does, and an external link on the way is refused before HDF5 could follow it.
"""

from __future__ import annotations

import h5py

from virtualstac.parsers.hdf_metadata import decode_text

__all__ = ["LinkOutsideFileError", "linked", "outside_file"]

#: How many soft links HDF5 follows along one path before it gives up (``H5L_NUM_LINKS``).
_MAX_SOFT_LINKS = 16


class LinkOutsideFileError(Exception):
    """A path passes through a link that leads out of the file (external or user-defined);
    the message says which link and where it leads."""


def linked(group: h5py.Group, path: str) -> h5py.Dataset | h5py.Group | h5py.Datatype | None:
    """The dataset, group or named datatype ``path`` leads to from ``group`` (from the file's
    root if it starts with ``/``), as ``group.get(path)`` finds it; None if it leads to nothing
    (a missing link, a dangling soft link, a loop of soft links, a component that is no group).

    Raises
    ------
    LinkOutsideFileError
        If a link along the way is an external (or user-defined) link, which is not followed.
    """
    found = _walk(group.id, path.encode("utf-8"), [_MAX_SOFT_LINKS])
    if isinstance(found, h5py.h5d.DatasetID):
        return h5py.Dataset(found, readonly=True)
    if isinstance(found, h5py.h5g.GroupID):
        return h5py.Group(found)
    if isinstance(found, h5py.h5t.TypeID):
        return h5py.Datatype(found)
    return None


def outside_file(link: object, err: LinkOutsideFileError) -> str:
    """Why a member whose link is ``link`` (as ``group.get(key, getlink=True)`` gives it) and
    whose walk raised ``err`` is not opened."""
    if isinstance(link, h5py.ExternalLink):
        return (
            f"is an external link to {link.path!r} in {link.filename!r}, whose data lies in "
            "another file"
        )
    if isinstance(link, h5py.SoftLink):
        return f"is a soft link to {link.path!r}, where {err}"
    return str(err)


def _walk(start: h5py.h5g.GroupID, path: bytes, budget: list[int]) -> object | None:
    """The object ``path`` leads to from ``start``; ``budget`` holds how many more soft links
    may be followed, shared by the soft links' own paths."""
    current: object = h5py.h5o.open(start, b"/") if path.startswith(b"/") else start
    walked: list[str] = []
    for part in path.split(b"/"):
        if part in (b"", b"."):
            continue
        if not isinstance(current, h5py.h5g.GroupID):
            return None
        try:
            kind = current.links.get_info(part).type
        except (KeyError, RuntimeError):  # h5py: "name doesn't exist"
            return None
        walked.append(decode_text(part))
        if kind == h5py.h5l.TYPE_HARD:
            try:
                current = h5py.h5o.open(current, part)
            except KeyError:  # an object HDF5 cannot read (damaged): nothing, as group.get gives
                return None
        elif kind == h5py.h5l.TYPE_SOFT:
            budget[0] -= 1
            if budget[0] < 0:
                return None  # HDF5 too gives up: "too many links"
            current = _walk(current, bytes(current.links.get_val(part)), budget)
            if current is None:
                return None
        elif kind == h5py.h5l.TYPE_EXTERNAL:
            filename, target = current.links.get_val(part)
            raise LinkOutsideFileError(
                f"{'/'.join(walked)!r} is an external link to {decode_text(target)!r} in "
                f"{decode_text(filename)!r}, which is not followed (its data lies in another "
                "file: open that file instead)"
            )
        else:
            raise LinkOutsideFileError(
                f"{'/'.join(walked)!r} is a user-defined HDF5 link, which is not followed"
            )
    return current
