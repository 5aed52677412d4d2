"""Kerchunk ``gen`` entries: references expanded over the product of their dimensions.

Each entry's ``key``, ``url``, ``offset`` and ``length`` are jinja-style templates whose
``{{expression}}`` fields (names, numbers, strings, arithmetic) are evaluated once over arrays
of every combination of the dimensions, not once per reference.

A few bytes of template can ask for unbounded work (``9**9**9``) or memory (``'a' * 10**9``
for each of a million keys), so every integer is bounded in bits before it is computed, and
every text before it is built: the text the expansion renders counts against
``metadata_bytes``, as the same references written out as JSON would.
"""

from __future__ import annotations

import ast
import itertools
import math
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from virtualstac.limits import check_metadata, check_references
from virtualstac.parsers.kerchunk_grid import KeysBelow
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

#: Bits of the integers an expression may compute: offsets and lengths are 64-bit, and the
#: bound keeps ``9**9**9`` from computing for hours.
_MAX_INTEGER_BITS = 1024
#: Characters ``%`` formatting may make of a number, besides its width and precision: ``%f``
#: of the largest float has 309 digits, ``%o`` of a 1024-bit integer 344 characters.
_NUMBER_CHARACTERS = 400
#: One printf conversion: its width, precision and type.
_CONVERSION = re.compile(r"%(?:\([^)]*\))?[#0 +-]*(\d*)(?:\.(\d*))?[hlL]?(.?)", re.DOTALL)

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
    rendering = _Rendering(resolver.source)
    parts = [_expand_generator(g, resolver, rendering) for g in generators]
    keys, urls, offsets, lengths = (np.concatenate(p) for p in zip(*parts, strict=True))
    return keys, urls, offsets, lengths


class _Rendering:
    """The text one reference set's ``gen`` entries render, against ``metadata_bytes``."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.rendered = 0

    def check(self, size: int, template: str) -> None:
        """Refuse building ``size`` more characters for ``template`` beyond the limit."""
        total = self.rendered + size
        check_metadata(
            total,
            source=self.source,
            what=f"its gen references render {total:,} characters (gen template {template!r})",
        )

    def spend(self, size: int, template: str) -> None:
        """Count ``size`` characters rendered for ``template``, refusing them beyond the limit."""
        self.check(size, template)
        self.rendered += size


class _Scope:
    """The names an expression may use: templates, and dimensions built only when used."""

    def __init__(
        self,
        templates: Mapping[str, str],
        axes: Mapping[str, np.ndarray[Any, Any]],
        rendering: _Rendering,
    ) -> None:
        self.templates = templates
        self.axes = axes
        self.rendering = rendering
        self.count = math.prod(len(values) for values in axes.values())
        positions = [np.arange(len(values)) for values in axes.values()]
        grids = np.meshgrid(*positions, indexing="ij") if axes else []
        self._positions = {name: g.reshape(-1) for name, g in zip(axes, grids, strict=True)}
        self._values: dict[str, Any] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.axes or name in self.templates

    def value(self, name: str, template: str) -> Any:
        """A template's text, or a dimension's value at every combination of the dimensions."""
        if name not in self.axes:
            return self.templates[name]
        if name not in self._values:
            values = self.axes[name]
            if _is_text(values) and len(values):
                # Each value repeats once per combination of the other dimensions.
                repeats = self.count // len(values)
                self.rendering.check(_size(values, 1) * repeats, template)
            self._values[name] = values[self._positions[name]]
        return self._values[name]


def _expand_generator(generator: Any, resolver: URLResolver, rendering: _Rendering) -> Generated:
    source = resolver.source
    if not isinstance(generator, Mapping) or not {"key", "url", "dimensions"} <= set(generator):
        raise KerchunkReferenceError(
            f"{source}: a 'gen' entry needs 'key', 'url' and 'dimensions', got {generator!r}"
        )
    if ("offset" in generator) != ("length" in generator):
        raise KerchunkReferenceError(
            f"{source}: a 'gen' entry needs both 'offset' and 'length', or neither"
        )
    if not isinstance(generator["dimensions"], Mapping):
        raise KerchunkReferenceError(
            f"{source}: gen entry {generator['key']!r} has dimensions "
            f"{generator['dimensions']!r:.200}; they are a JSON object of name: values"
        )
    dimensions = dict(generator["dimensions"])
    lengths_of = {name: _dimension_length(name, spec, source) for name, spec in dimensions.items()}
    count = math.prod(lengths_of.values())
    check_references(count, source=source, array=f"gen {generator['key']}", add_to_open=False)
    axes = {name: _dimension_values(name, spec, source) for name, spec in dimensions.items()}
    scope = _Scope(resolver.templates, axes, rendering)
    keys = _render(str(generator["key"]), scope)
    urls = _render(str(generator["url"]), scope)
    if "offset" in generator:
        offsets = _integers(str(generator["offset"]), scope)
        lengths = _integers(str(generator["length"]), scope)
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
        except (TypeError, ValueError, OverflowError) as err:
            raise KerchunkReferenceError(
                f"{source}: gen dimension {name!r} needs integer start, stop and step: {err}"
            ) from err
    raise KerchunkReferenceError(
        f"{source}: gen dimension {name!r} must be a list or {{start, stop, step}}"
    )


def _dimension_values(name: str, spec: Any, source: str) -> np.ndarray[Any, Any]:
    """A ``gen`` dimension's values: 64-bit numbers, or text (kept out of bignum arithmetic)."""
    if isinstance(spec, list):
        if not all(isinstance(v, str | int | float) for v in spec):
            raise KerchunkReferenceError(
                f"{source}: gen dimension {name!r} must list strings or numbers, got {spec!r:.200}"
            )
        if any(isinstance(v, str) for v in spec):
            return np.array([str(v) for v in spec], dtype=_STRINGS)
        values = np.asarray(spec)
    else:
        values = np.arange(spec.get("start", 0), spec["stop"], spec.get("step", 1))
    if values.dtype.kind not in "biuf":
        raise KerchunkReferenceError(
            f"{source}: gen dimension {name!r} has integers beyond 64 bits"
        )
    return values


def _render(template: str, scope: _Scope) -> Any:
    """Render a jinja-style template for every element: a string array of ``count``."""
    rendering = scope.rendering
    if "{%" in template:
        raise KerchunkReferenceError(
            f"{rendering.source}: gen template {template!r} uses jinja statements, which are "
            "not supported"
        )
    result: np.ndarray[Any, Any] = np.full(scope.count, "", dtype=_STRINGS)
    for literal, expression in itertools.zip_longest(
        TEMPLATE.split(template)[::2], TEMPLATE.findall(template)
    ):
        if literal:
            rendering.spend(_size(literal, scope.count), template)
            result = np.strings.add(result, literal)
        if expression is not None:
            text = _as_strings(_evaluate(expression, scope, template))
            rendering.spend(_size(text, scope.count), template)
            result = np.strings.add(result, text)
    return result


def _integers(template: str, scope: _Scope) -> Any:
    rendered = _render(template, scope)
    try:
        integers = rendered.astype(np.int64)
    except (ValueError, OverflowError) as err:
        raise KerchunkReferenceError(
            f"{scope.rendering.source}: gen template {template!r} does not render to integers"
        ) from err
    if (integers < 0).any():
        # A negative length would pass for the whole-object marker (WHOLE, -1).
        raise KerchunkReferenceError(
            f"{scope.rendering.source}: gen template {template!r} renders a negative offset or "
            f"length, {int(integers.min())}"
        )
    return integers


def _as_strings(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.astype(_STRINGS)
    return str(value)


def _size(text: Any, count: int) -> int:
    """Characters of ``text``: an array of strings, or one string repeated ``count`` times."""
    if isinstance(text, np.ndarray):
        return int(np.strings.str_len(text).sum())
    return len(text) * count


def _evaluate(expression: str, scope: _Scope, template: str) -> Any:
    """Evaluate a template expression over arrays: names, constants, arithmetic, ``+``."""
    source = scope.rendering.source
    field = f"{{{{{expression}}}}} in gen template {template!r}"
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, RecursionError) as err:
        raise KerchunkReferenceError(f"{source}: cannot parse {field}") from err

    def bounded(value: Any) -> Any:
        if isinstance(value, int) and value.bit_length() > _MAX_INTEGER_BITS:
            raise KerchunkReferenceError(
                f"{source}: {field} computes an integer of more than {_MAX_INTEGER_BITS} bits"
            )
        if isinstance(value, np.ndarray) and value.ndim == 0:
            return value.item()
        return value

    def compute(operation: Callable[..., Any], *operands: Any) -> Any:
        try:
            with np.errstate(all="raise"):
                return bounded(operation(*operands))
        except (ArithmeticError, TypeError, ValueError) as err:
            if isinstance(err, KerchunkReferenceError):
                raise
            raise KerchunkReferenceError(f"{source}: cannot evaluate {field}: {err}") from err

    def visit(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return visit(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
            return bounded(node.value)
        if isinstance(node, ast.Name):
            if node.id not in scope:
                raise KerchunkReferenceError(
                    f"{source}: gen template {template!r} uses {node.id!r}, which is neither a "
                    "dimension nor a template"
                )
            return scope.value(node.id, template)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            sign = operator.neg if isinstance(node.op, ast.USub) else operator.pos
            return compute(sign, visit(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return binary(node.op, visit(node.left), visit(node.right))
        raise KerchunkReferenceError(
            f"{source}: {field} uses syntax that is not supported (names, numbers, strings and "
            "+ - * / // % ** are)"
        )

    def binary(op: ast.operator, left: Any, right: Any) -> Any:
        count = scope.count if isinstance(left, np.ndarray) or isinstance(right, np.ndarray) else 1
        if isinstance(op, ast.Add) and (_is_text(left) or _is_text(right)):
            left, right = _as_strings(left), _as_strings(right)
            scope.rendering.check(_size(left, count) + _size(right, count), template)
            return compute(np.strings.add, left, right)
        if isinstance(op, ast.Mod) and _is_text(left):
            scope.rendering.check(_formatted_size(left, right, count), template)
            return compute(np.strings.mod, np.asarray(left, dtype=_STRINGS), right)
        if isinstance(op, ast.Mult) and (_is_text(left) or _is_text(right)):
            text, times = (left, right) if _is_text(left) else (right, left)
            if not _is_integer(times):
                raise KerchunkReferenceError(
                    f"{source}: {field} repeats text a number of times that is not an integer"
                )
            scope.rendering.check(_repeated_size(text, times), template)
            return compute(np.strings.multiply, np.asarray(text, dtype=_STRINGS), times)
        if isinstance(op, ast.Pow) and not _power_fits(left, right):
            raise KerchunkReferenceError(
                f"{source}: {field} computes an integer of more than {_MAX_INTEGER_BITS} bits"
            )
        return compute(_BINARY[type(op)], left, right)

    try:
        return visit(tree)
    except RecursionError as err:
        raise KerchunkReferenceError(f"{source}: {field} is nested too deeply") from err


def _is_text(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, np.ndarray) and value.dtype.kind in "UST")


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) or (isinstance(value, np.ndarray) and value.dtype.kind in "biu")


def _power_fits(base: Any, exponent: Any) -> bool:
    """Whether ``base ** exponent`` of Python integers stays within the bound on bits."""
    if not (isinstance(base, int) and isinstance(exponent, int)) or exponent <= 0:
        return True  # numpy's 64-bit integers and floats do not grow
    if abs(base) <= 1:
        return True
    return (abs(base).bit_length() - 1) * exponent <= _MAX_INTEGER_BITS


def _repeated_size(text: Any, times: Any) -> int:
    """Characters of ``text * times``, computed without building it."""
    lengths = np.strings.str_len(text) if isinstance(text, np.ndarray) else len(text)
    if isinstance(lengths, int) and isinstance(times, int):
        return lengths * max(times, 0)
    if isinstance(times, int):
        times = min(times, 2**62)  # any more is refused, and numpy takes 64 bits
    # Floats: the sizes of huge repetitions overflow 64-bit integers, and only their order counts.
    size = np.sum(np.multiply(lengths, np.maximum(times, 0), dtype=np.float64))
    return math.ceil(float(size))


def _formatted_size(formats: Any, value: Any, count: int) -> int:
    """At most how many characters ``formats % value`` makes, computed without making them."""
    if not _is_text(value):
        argument = _NUMBER_CHARACTERS
    elif isinstance(value, str):
        argument = len(value)
    else:
        argument = int(np.strings.str_len(value).max(initial=0))

    def widest(text: str) -> int:
        size = len(text)
        for width, precision, conversion in _CONVERSION.findall(text):
            # repr escapes a character as up to ten (\U0001f600)
            shown = 10 * argument + 2 if conversion in "ra" else argument
            size += _digits(width) + _digits(precision) + shown
        return size

    if isinstance(formats, str):
        return widest(formats) * count
    return max((widest(str(f)) for f in np.unique(formats)), default=0) * count


def _digits(text: str) -> int:
    """A width or precision, capped where it could only be refused (no 4300-digit parsing)."""
    return int(text[:19]) if text else 0


def select_generated(
    generated: Generated, node: V2Node, below: KeysBelow
) -> tuple[
    npt.NDArray[np.int64], np.ndarray[Any, Any], npt.NDArray[np.int64], npt.NDArray[np.int64]
]:
    """The generated references that belong to one array, with their flat positions;
    ``below`` indexes the generated keys (shared by every array of the reference set)."""
    keys, urls, offsets, lengths = generated
    if node.path:
        at = below.of(node.path)
        keys, urls, offsets, lengths = keys[at], urls[at], offsets[at], lengths[at]
        mine = np.strings.startswith(keys, node.path + "/")
        keys = np.strings.slice(keys[mine], len(node.path) + 1, None)
        urls, offsets, lengths = urls[mine], offsets[mine], lengths[mine]
    valid, positions = parse_chunk_keys(keys, node.separator, node.grid)
    return positions, urls[valid], offsets[valid], lengths[valid]
