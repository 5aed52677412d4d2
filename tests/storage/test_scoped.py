"""A registry narrowed to a scope reads through another one, only within the scope."""

import pickle
import re
from pathlib import Path

import pytest

from virtualstac import ObjectStoreRegistry
from virtualstac.errors import UnregisteredURLError
from virtualstac.storage import objects
from virtualstac.storage.scoped import ScopedRegistry
from virtualstac.storage.signing import SigningRegistry


def files(directory: Path) -> tuple[Path, Path, Path]:
    """Three files: two of one owner (one a directory's), one of another."""
    (directory / "mine" / "store.zarr").mkdir(parents=True)
    (directory / "theirs").mkdir()
    own = directory / "mine" / "a.nc"
    inner = directory / "mine" / "store.zarr" / "zarr.json"
    other = directory / "theirs" / "b.nc"
    for path in (own, inner, other):
        path.write_bytes(path.name.encode())
    return own, inner, other


def read(registry: ObjectStoreRegistry, path: Path) -> bytes:
    store, key = registry.resolve(path.as_uri())
    return bytes(objects.get(store, key).bytes())


def test_only_the_scope_of_what_the_base_allows_is_read(tmp_path: Path) -> None:
    own, inner, other = files(tmp_path)
    base = ObjectStoreRegistry()
    base.register(tmp_path.as_uri() + "/")
    scoped = ScopedRegistry(base, [own.as_uri(), inner.parent.as_uri()], "item 'mine'")

    assert read(scoped, own) == b"a.nc"
    assert read(scoped, inner) == b"zarr.json"  # below a directory of the scope
    assert other.as_uri() in base and other.as_uri() not in scoped
    message = "item 'mine' may make virtualstac read only its own assets"
    with pytest.raises(UnregisteredURLError, match=message) as refused:
        read(scoped, other)
    assert f"authorize=['{other.parent.as_uri()}/']" in str(refused.value)
    # In the scope but not allowed by the base: still refused.
    narrow = ScopedRegistry(ObjectStoreRegistry(), [own.as_uri()], "item 'mine'")
    with pytest.raises(UnregisteredURLError, match="outside every registered prefix"):
        read(narrow, own)


def test_a_link_in_the_scope_is_judged_by_its_target(tmp_path: Path) -> None:
    own, _, other = files(tmp_path)
    (own.parent / "link.nc").symlink_to(other)
    base = ObjectStoreRegistry()
    base.register(tmp_path.as_uri() + "/")
    scoped = ScopedRegistry(base, [own.parent.as_uri()], "item 'mine'")

    with pytest.raises(UnregisteredURLError, match=re.escape(other.as_uri())):
        read(scoped, own.parent / "link.nc")
    with pytest.raises(UnregisteredURLError):
        read(scoped, own.parent / ".." / "theirs" / "b.nc")


def test_a_scope_survives_pickling_and_signs_through_its_base(tmp_path: Path) -> None:
    own, _, other = files(tmp_path)
    base = ObjectStoreRegistry()
    base.register(tmp_path.as_uri() + "/")
    signing = SigningRegistry.wrap(base, _Recorder())
    scoped = pickle.loads(pickle.dumps(ScopedRegistry(signing, [own.as_uri()], "item 'mine'")))

    assert read(scoped, own) == b"a.nc"
    assert isinstance(scoped.base, SigningRegistry)
    assert scoped.base.sign.signed == [own.as_uri()]
    with pytest.raises(UnregisteredURLError):
        read(scoped, other)
    with pytest.raises(TypeError, match="narrowed to a scope"):
        scoped.register(other.as_uri())


class _Recorder:
    """A picklable ``sign`` that records the URLs it signs and leaves them unchanged."""

    def __init__(self) -> None:
        self.signed: list[str] = []

    def __call__(self, url: str) -> str:
        self.signed.append(url)
        return url
