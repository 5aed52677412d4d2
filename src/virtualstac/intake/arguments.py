"""Intake drivers' arguments as a catalog gives them: checked, with one-line typed errors.

A YAML catalog hands a driver whatever its ``args`` say: ``urlpath: 3``, ``assets: {a: 1}``,
``chunks: "x"``, a misspelt option. Python would fail much later with an error that names
neither the catalog nor the argument. :class:`Arguments` checks each one as the driver is
made and raises an :class:`~virtualstac.errors.InvalidCatalogArgumentError` naming the
driver, the catalog directory and the argument. (Intake sets the entry's name on the source
only after making it, so the message cannot name the entry.)
"""

from __future__ import annotations

import ast
import datetime as dt
import inspect
import os
import types
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Literal, TypeAliasType, Union, get_args, get_origin

from virtualstac.errors import InvalidCatalogArgumentError

__all__ = ["Arguments"]


class Arguments:
    """Checks of the arguments of one driver, whose errors say where they come from."""

    def __init__(self, driver: str, metadata: Mapping[str, Any] | None) -> None:
        catalog = (metadata or {}).get("catalog_dir") if isinstance(metadata, Mapping) else None
        self.where = f"intake driver {driver!r}" + (f" (catalog in {catalog})" if catalog else "")

    def error(self, name: str, value: Any, expected: str) -> InvalidCatalogArgumentError:
        """The error for argument ``name``, whose ``value`` is not what it should be."""
        return InvalidCatalogArgumentError(
            f"{self.where}: argument {name!r} must be {expected}, "
            f"not {_shown(value)} ({type(value).__name__})"
        )

    def refused(self, name: str, reason: str) -> InvalidCatalogArgumentError:
        """The error for argument ``name``, of the right type but unusable for ``reason``."""
        return InvalidCatalogArgumentError(f"{self.where}: argument {name!r} {reason}")

    def relative(self, name: str, path: str) -> InvalidCatalogArgumentError:
        """The refusal of ``path``, relative: to the catalog, or to wherever Python runs?"""
        if "{{" in path or "{%" in path:
            # Intake renders an argument once: a parameter's value (its default included)
            # that holds a template stays that template.
            return self.refused(
                name,
                f"{path!r} holds a template Intake leaves as it is (it renders the "
                "arguments, not the values of parameters): write the template in the argument "
                'itself, such as "{{ CATALOG_DIR }}/{{ name }}" with a relative parameter',
            )
        return self.refused(
            name,
            f"{path!r} is a relative path: write it as "
            f'"{{{{ CATALOG_DIR }}}}/{path}" to name it in the catalog\'s directory',
        )

    def unknown(
        self, given: Collection[str], driver: Callable[..., Any], also: Iterable[str] = ()
    ) -> None:
        """Refuse argument names neither the ``driver``'s ``__init__`` nor ``also`` name."""
        if given:
            parameters = inspect.signature(driver).parameters.values()
            known = [p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD][1:]
            known += list(also)
            raise InvalidCatalogArgumentError(
                f"{self.where}: unknown argument(s) {', '.join(map(repr, sorted(given)))}; "
                f"it takes {', '.join(known)}"
            )

    def text(self, name: str, value: Any) -> str | None:
        """A string, or None."""
        if value is None or isinstance(value, str):
            return value
        raise self.error(name, value, "a string")

    def names(self, name: str, value: Any) -> list[str] | str | None:
        """A string, a list of strings, or None; the text ``"['a', 'b']"`` that a template of
        a list parameter renders to (``"{{ files }}"``, ``drop_variables: "{{ drop }}"``) is
        that list, not one name."""
        if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
            try:
                listed = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                return value  # a glob's character class, such as "[ab]"
            if isinstance(listed, list) and all(isinstance(v, str) for v in listed):
                return listed
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return list(value)
        raise self.error(name, value, "a string or a list of strings")

    def paths(self, name: str, value: Any) -> list[str] | str | None:
        """As :meth:`names`, for paths and URLs: ``pathlib`` paths are taken, and ``~`` is
        the user's home directory, as xarray and fsspec read a path."""
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        elif isinstance(value, list | tuple):
            value = [os.fspath(v) if isinstance(v, os.PathLike) else v for v in value]
        names = self.names(name, value)
        if isinstance(names, list):
            return [os.path.expanduser(path) for path in names]
        return None if names is None else os.path.expanduser(names)

    def prefixes(self, name: str, value: Any) -> list[str]:
        """URL prefixes to authorize: absolute paths (``~`` the home directory) or URLs; an
        empty or relative one is refused, as a relative ``urlpath`` is."""
        given = self.paths(name, value)
        prefixes = [given] if isinstance(given, str) else list(given or ())
        for prefix in prefixes:
            if not prefix.strip():
                raise self.refused(name, "holds an empty prefix: name a directory or URL")
            if "://" not in prefix and not prefix.startswith("/"):
                raise self.relative(name, prefix)
        return prefixes

    def variables(self, name: str, value: Any) -> list[str] | None:
        """Variable names: a list of strings, one string, or None."""
        names = self.names(name, value)
        return [names] if isinstance(names, str) else names

    def flag(self, name: str, value: Any) -> bool | None:
        """True, False or None; or the text a template of a ``bool`` parameter renders
        (``"True"``, ``"False"``)."""
        value = self.rendered_flag(value)
        if value is None or isinstance(value, bool):
            return value
        raise self.error(name, value, "true or false")

    def rendered_flag(self, value: Any) -> Any:
        """``value``, or True or False for the text a template of a ``bool`` parameter
        renders (``"True"``, ``"False"``)."""
        if isinstance(value, str) and value.strip().lower() in _FLAGS:
            return _FLAGS[value.strip().lower()]
        return value

    def mapping(self, name: str, value: Any) -> dict[str, Any] | None:
        """A mapping with string keys, or None; or the text ``"{'time': 24}"`` that a template
        of a ``dict`` parameter renders (``chunks: "{{ sizes }}"``)."""
        if value is None:
            return None
        if isinstance(value, str) and value.strip().startswith("{"):
            try:
                value = ast.literal_eval(value.strip())
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                pass  # refused below, as the text it is
        if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
            return dict(value)
        raise self.error(name, value, "a mapping of names to values")

    def chunks(self, value: Any) -> dict[str, Any] | str | int:
        """Dask chunks as ``xr.open_dataset`` takes them: a mapping of dimension names to
        sizes, ``-1`` (the whole dimension), ``"auto"`` or None (the files' own), or one of
        these for every dimension; the text a template of an ``int`` parameter renders is that
        number. None or ``{}`` keeps the files' own chunks."""
        if value is None:
            return {}
        whole = _chunk_size(value)
        if whole is not None:
            return whole
        sizes = self.mapping("chunks", value) or {}
        checked = {dim: _chunk_size(size) for dim, size in sizes.items()}
        if all(checked[dim] is not None or sizes[dim] is None for dim in sizes):
            return checked
        raise self.error("chunks", value, "a mapping of dimension names to sizes (or -1, 'auto')")

    def overview_level(self, value: Any) -> int | None:
        """A whole number from 0, or the text a template rendered (``""``: none)."""
        if value is None or value == "":
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
        raise self.error("overview_level", value, "a whole number from 0")

    def fits(self, value: Any, hint: Any) -> bool:
        """Whether ``value`` is of the type ``hint`` describes (unions, literals, lists of
        strings, mappings, functions and classes)."""
        if isinstance(hint, TypeAliasType):
            return self.fits(value, hint.__value__)
        origin, parts = get_origin(hint), get_args(hint)
        if origin in (Union, types.UnionType):
            return any(self.fits(value, part) for part in parts)
        if origin is Literal:
            return value in parts
        if hint is Any:
            return True
        if hint is None or hint is type(None):
            return value is None
        if hint is int:
            return isinstance(value, int) and not isinstance(value, bool)
        if origin is Callable:
            return callable(value)
        if origin in (Iterable, list, tuple):
            return isinstance(value, list | tuple) and all(self.fits(v, parts[0]) for v in value)
        if origin is Mapping:
            return isinstance(value, Mapping) and all(isinstance(k, str) for k in value)
        return isinstance(value, origin or hint)

    def described(self, hint: Any) -> str:
        """What ``hint`` asks for, in words of a catalog: ``true or false``, ``a string``..."""
        if isinstance(hint, TypeAliasType):
            return self.described(hint.__value__)
        origin, parts = get_origin(hint), get_args(hint)
        if origin in (Union, types.UnionType):
            alternatives = [self.described(p) for p in parts if p is not type(None)]
            return " or ".join(dict.fromkeys(alternatives))
        if origin is Literal:
            return " or ".join(map(repr, parts))
        words = {bool: "true or false", int: "a whole number", str: "a string"}
        if hint in words:
            return words[hint]
        if origin in (Iterable, list, tuple):
            return "a list of strings"
        if origin is Mapping:
            return "a mapping of names to values"
        if origin is Callable:
            return "a function"
        return f"a {getattr(hint, '__name__', hint)}"

    def moment(self, name: str, value: Any) -> str | dt.date | None:
        """A date, a datetime, or text (YAML reads unquoted dates as dates)."""
        if value is None or isinstance(value, str | dt.date):
            return value
        raise self.error(name, value, "a datetime or an interval like '2024-05-01/2024-05-31'")

    def numbers(self, name: str, value: Any) -> list[Any] | str | None:
        """A list of numbers (or of texts a template rendered), a comma-separated string."""
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, list | tuple) and all(
            isinstance(v, int | float | str) and not isinstance(v, bool) for v in value
        ):
            return list(value)
        raise self.error(name, value, "a list of numbers or a comma-separated string")

    def whole(self, name: str, value: Any) -> int | None:
        """A whole number, or its text."""
        if value is None or value == "":
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
        raise self.error(name, value, "a whole number")


#: How a YAML catalog or a template writes true and false.
_FLAGS = {"true": True, "false": False}
#: The largest size of a chunk: the largest length of an array, an int64.
_LONGEST = 2**63 - 1


def _chunk_size(value: Any) -> int | str | None:
    """A size of chunks (a positive number, ``-1`` or ``"auto"``), also as a template
    renders it (``"12"``); None for anything else."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    # No array is longer than an int64 counts: dask fails on a larger size with a TypeError
    # from numpy that names neither the entry nor the argument.
    if type(value) is int and (0 < value <= _LONGEST or value == -1):
        return value
    return "auto" if value == "auto" else None


def _shown(value: Any) -> str:
    """``value`` as it appears in the message: short, on one line."""
    text = repr(value).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."
