"""Errors of a catalog entry's parameters and templates, raised named, for our drivers.

Before Intake makes a source it renders the entry's ``args`` with Jinja and checks the user
parameters (``type``, ``min``, ``max``, ``allowed``); a failure there is Intake's bare
``ValueError`` (``"invalid literal for int() with base 10: 'x'"``) or a Jinja
``TemplateSyntaxError``, naming neither the catalog entry nor, often, the parameter. Intake
has no hook for this step, so :func:`name_entry_errors` wraps it in Intake's catalog entry
class; entries of other drivers are left exactly as Intake treats them. It also makes the
sources of our entries refuse, when used, a template naming no parameter, which Jinja would
render as nothing.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import jinja2
import jinja2.meta
import jinja2.nodes
from intake.catalog.local import LocalCatalogEntry
from intake.catalog.utils import expand_defaults

from virtualstac.errors import InvalidCatalogArgumentError, VirtualStacError
from virtualstac.intake.base import VirtualDataSource

__all__ = ["name_entry_errors"]

#: Whether Intake's entries are already wrapped (importing twice must not wrap twice).
_WRAPPED = "_virtualstac_names_entries"


def name_entry_errors() -> None:
    """Make the entries of our drivers raise :class:`InvalidCatalogArgumentError` naming the
    entry (and the parameter or argument) when their parameters or templates are refused."""
    create = LocalCatalogEntry._create_open_args
    if getattr(create, _WRAPPED, False):
        return

    @functools.wraps(create)
    def create_open_args(entry: LocalCatalogEntry, user_parameters: dict[str, Any]) -> Any:
        given = dict(user_parameters)  # Intake pops from it
        try:
            created = create(entry, user_parameters)
        except (ValueError, TypeError, KeyError, jinja2.TemplateError) as err:
            if isinstance(err, VirtualStacError) or not _ours(entry):
                raise
            raise InvalidCatalogArgumentError(
                f"catalog entry {entry.name!r}: {_reason(entry, given, err)}"
            ) from err
        return created

    get = LocalCatalogEntry.get

    @functools.wraps(get)
    def checked_get(entry: LocalCatalogEntry, **user_parameters: Any) -> Any:
        source = get(entry, **user_parameters)
        if isinstance(source, VirtualDataSource) and source._refused is None:
            # Refused when used, not now: Intake makes the default source of an entry as
            # soon as it is named (cat.entry), before it can be called with what a template
            # names (cat.entry(where=...)).
            source._refused = _unnamed(entry, user_parameters)
        return source

    setattr(create_open_args, _WRAPPED, True)
    LocalCatalogEntry._create_open_args = create_open_args
    LocalCatalogEntry.get = checked_get


def _ours(entry: LocalCatalogEntry) -> bool:
    plugins = entry._plugin.values() if isinstance(entry._plugin, Mapping) else entry._plugin
    return any(isinstance(p, type) and issubclass(p, VirtualDataSource) for p in plugins)


def _reason(entry: LocalCatalogEntry, given: Mapping[str, Any], err: Exception) -> str:
    """What was refused: the parameter whose value does not fit its declaration, or the
    argument whose template cannot be rendered; Intake's or Jinja's words otherwise."""
    message = str(err).splitlines()[0] if str(err) else type(err).__name__
    if isinstance(err, jinja2.TemplateError):
        for name, text in _texts(entry._open_args):
            try:
                jinja2.Environment().from_string(text)  # compiled: filters too
            except jinja2.TemplateError as bad:
                return f"argument {name!r}: its template {text!r} cannot be rendered: {bad}"
        return f"a template of its arguments cannot be rendered: {message}"
    for parameter in entry._user_parameters:
        value = given.get(parameter.name, parameter.default)
        if value is None:
            continue
        try:
            if isinstance(value, str):
                with warnings.catch_warnings():  # Intake warns of shell() even without one
                    warnings.simplefilter("ignore")
                    value = expand_defaults(value, getenv=entry.getenv, getshell=entry.getshell)
            parameter.validate(value)
        except (ValueError, TypeError, KeyError) as bad:
            return (
                f"parameter {parameter.name!r} (type {parameter.type}) refuses {value!r}: "
                f"{str(bad).splitlines()[0] if str(bad) else type(bad).__name__}"
            )
    return f"its parameters or arguments cannot be used: {message}"


def _unnamed(
    entry: LocalCatalogEntry, given: Mapping[str, Any]
) -> InvalidCatalogArgumentError | None:
    """The refusal of a template naming what is neither a parameter, an argument the entry
    was called with, one of its arguments, ``CATALOG_DIR`` nor one of Intake's functions:
    Jinja renders it as nothing, so a misspelt parameter (``{{ dya }}``) would name another
    file, silently."""
    parameters = [parameter.name for parameter in entry._user_parameters]
    known = {*parameters, *given, *entry._open_args, "CATALOG_DIR", "metadata", *_FUNCTIONS}
    environment = jinja2.Environment()
    for name, text in _texts(entry._open_args):
        if "{" not in text:
            continue
        parsed = environment.parse(text)
        named = jinja2.meta.find_undeclared_variables(parsed) - _function_arguments(parsed)
        unknown = sorted(named - known - set(environment.globals))
        if unknown:
            return InvalidCatalogArgumentError(
                f"argument {name!r}: its template {text!r} names "
                f"{', '.join(map(repr, unknown))}, which is neither a parameter of the entry "
                f"({', '.join(parameters) or 'it has none'}) nor an argument it was called "
                "with, and would render as nothing"
            )
    return None


#: The functions Intake gives templates: environment variables and shell commands.
_FUNCTIONS = ("env", "client_env", "shell", "client_shell")


def _function_arguments(template: jinja2.nodes.Template) -> set[str]:
    """The names Intake's functions take as bare words (``env(HOME)``): not variables."""
    return {
        argument.name
        for call in template.find_all(jinja2.nodes.Call)
        if isinstance(call.node, jinja2.nodes.Name) and call.node.name in _FUNCTIONS
        for argument in call.args
        if isinstance(argument, jinja2.nodes.Name)
    }


def _texts(value: Any, name: str = "") -> Iterator[tuple[str, str]]:
    """Each string in an entry's ``args``, with the name of the argument holding it."""
    if isinstance(value, str):
        yield name, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _texts(item, name or str(key))
    elif isinstance(value, list | tuple | set):
        for item in value:
            yield from _texts(item, name)
