"""The code examples in README.md and docs/ run and their assertions hold."""

import re
from pathlib import Path

import pytest

import virtualstac.xarray  # noqa: F401 - registers the .virtual accessor the examples use

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _examples() -> list[tuple[str, str]]:
    found = []
    for document in DOCUMENTS:
        blocks = re.findall(r"```python\n(.*?)```", document.read_text(), flags=re.DOTALL)
        found += [(f"{document.name}[{i}]", block) for i, block in enumerate(blocks)]
    return found


@pytest.mark.parametrize(("name", "code"), _examples(), ids=[n for n, _ in _examples()])
def test_example_runs(name: str, code: str) -> None:
    exec(compile(code, name, "exec"), {"__name__": name})
