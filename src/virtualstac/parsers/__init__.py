"""Parsers: one module per format, each ``parser(url, registry) -> ManifestStore``."""

from virtualstac.parsers.protocol import Parser

__all__ = ["Parser"]
