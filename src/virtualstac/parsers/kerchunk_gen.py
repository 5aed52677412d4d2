"""Kerchunk ``gen`` entries: references expanded over the product of their dimensions.

Each entry's ``key``, ``url``, ``offset`` and ``length`` are jinja-style templates whose
``{{expression}}`` fields (names, numbers, strings, arithmetic) are evaluated once over arrays
of every combination of the dimensions, not once per reference.
"""

from __future__ import annotations

import ast
import itertools
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from virtualstac.limits import check_references
from virtualstac.parsers.kerchunk_resolve import (
    TEMPLATE,
    WHOLE,
    KerchunkReferenceError,
    URLResolver,
)
from virtualstac.parsers.zarr_v2 import V2Node, parse_chunk_keys

__all__ = ["Generated", "expand_generators", "select_generated"]

_STRINGS = np.dtypes.StringDType()

#: Expanded ``gen`` references: keys, URLs (strings), offsets and lengths (``WHOLE``).
Generated = tuple[
    np.ndarray[Any, Any], np.ndarray[Any, Any], npt.NDArray[np.int64], npt.NDArray[np.int64]
]

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


def expand_generators(generators: Any, resolver: URLResolver) -> Generated | None:
    """Expand every ``gen`` entry; later entries override earlier ones and plain refs."""
    if not generators:
        return None
    if not isinstance(generators, list):
        raise KerchunkReferenceError(f"{resolver.source}: 'gen' must be a list")
    parts = [_expand_generator(g, resolver) for g in generators]
    keys, urls, offsets, lengths = (np.concatenate(p) for p in zip(*parts, strict=True))
    return keys, urls, offsets, lengths


def _expand_generator(generator: Any, resolver: URLResolver) -> Generated:
    source = resolver.source
    if not isinstance(generator, Mapping) or not {"key", "url", "dimensions"} <= set(generator):
        raise KerchunkReferenceError(
            f"{source}: a 'gen' entry needs 'key', 'url' and 'dimensions', got {generator!r}"
        )
    if ("offset" in generator) != ("length" in generator):
        raise KerchunkReferenceError(
            f"{source}: a 'gen' entry needs both 'offset' and 'length', or neither"
        )
    dimensions = dict(generator["dimensions"])
    lengths_of = {name: _dimension_length(name, spec, source) for name, spec in dimensions.items()}
    count = math.prod(lengths_of.values())
    check_references(count, source=source, array=f"gen {generator['key']}", add_to_open=False)
    axes: dict[str, np.ndarray[Any, Any]] = {
        name: np.asarray(spec)
        if isinstance(spec, list)
        else np.arange(spec.get("start", 0), spec["stop"], spec.get("step", 1))
        for name, spec in dimensions.items()
    }
    grids = np.meshgrid(*axes.values(), indexing="ij") if axes else []
    names: dict[str, Any] = dict(resolver.templates)
    names.update({name: g.reshape(-1) for name, g in zip(axes, grids, strict=True)})
    keys = _render(str(generator["key"]), names, count, source)
    urls = _render(str(generator["url"]), names, count, source)
    if "offset" in generator:
        offsets = _integers(str(generator["offset"]), names, count, source)
        lengths = _integers(str(generator["length"]), names, count, source)
    else:
        offsets = np.zeros(count, dtype=np.int64)
        lengths = np.full(count, WHOLE, dtype=np.int64)
    return keys, urls, offsets, lengths


def _dimension_length(name: str, spec: Any, source: str) -> int:
    """How many values a ``gen`` dimension has, without building them."""
    if isinstance(spec, list):
        return len(spec)
    if isinstance(spec, Mapping) and "stop" in spec:
        try:
            return len(range(spec.get("start", 0), spec["stop"], spec.get("step", 1)))
        except (TypeError, ValueError) as err:
            raise KerchunkReferenceError(
                f"{source}: gen dimension {name!r} needs integer start, stop and step: {err}"
            ) from err
    raise KerchunkReferenceError(
        f"{source}: gen dimension {name!r} must be a list or {{start, stop, step}}"
    )


def _render(template: str, names: Mapping[str, Any], count: int, source: str) -> Any:
    """Render a jinja-style template for every element: a string array of ``count``."""
    if "{%" in template:
        raise KerchunkReferenceError(
            f"{source}: gen template {template!r} uses jinja statements, which are not supported"
        )
    result: np.ndarray[Any, Any] = np.full(count, "", dtype=_STRINGS)
    for literal, expression in itertools.zip_longest(
        TEMPLATE.split(template)[::2], TEMPLATE.findall(template)
    ):
        if literal:
            result = np.strings.add(result, literal)
        if expression is not None:
            value = _evaluate(expression, names, template, source)
            result = np.strings.add(result, _as_strings(value))
    return result


def _integers(template: str, names: Mapping[str, Any], count: int, source: str) -> Any:
    rendered = _render(template, names, count, source)
    try:
        return rendered.astype(np.int64)
    except ValueError as err:
        raise KerchunkReferenceError(
            f"{source}: gen template {template!r} does not render to integers"
        ) from err


def _as_strings(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.astype(_STRINGS)
    return str(value)


def _evaluate(expression: str, names: Mapping[str, Any], template: str, source: str) -> Any:
    """Evaluate a template expression over arrays: names, constants, arithmetic, ``+``."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as err:
        raise KerchunkReferenceError(
            f"{source}: cannot parse {{{{{expression}}}}} in gen template {template!r}"
        ) from err

    def visit(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return visit(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise KerchunkReferenceError(
                    f"{source}: gen template {template!r} uses {node.id!r}, which is neither a "
                    "dimension nor a template"
                )
            return names[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            operand = visit(node.operand)
            return -operand if isinstance(node.op, ast.USub) else +operand
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = visit(node.left), visit(node.right)
            if isinstance(node.op, ast.Add) and (_is_text(left) or _is_text(right)):
                return np.strings.add(_as_strings(left), _as_strings(right))
            if isinstance(node.op, ast.Mod) and _is_text(left):
                return np.strings.mod(np.asarray(left, dtype=_STRINGS), right)
            return _BINARY[type(node.op)](left, right)
        raise KerchunkReferenceError(
            f"{source}: {{{{{expression}}}}} in gen template {template!r} uses syntax that is "
            "not supported (names, numbers, strings and + - * / // % ** are)"
        )

    return visit(tree)


def _is_text(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, np.ndarray) and value.dtype.kind in "UST")


def select_generated(
    generated: Generated, node: V2Node
) -> tuple[
    npt.NDArray[np.int64], np.ndarray[Any, Any], npt.NDArray[np.int64], npt.NDArray[np.int64]
]:
    """The generated references that belong to one array, with their flat positions."""
    keys, urls, offsets, lengths = generated
    if node.path:
        mine = np.strings.startswith(keys, node.path + "/")
        keys = np.strings.slice(keys[mine], len(node.path) + 1, None)
        urls, offsets, lengths = urls[mine], offsets[mine], lengths[mine]
    valid, positions = parse_chunk_keys(keys, node.separator, node.grid)
    return positions, urls[valid], offsets[valid], lengths[valid]
