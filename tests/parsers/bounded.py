"""Running a parse in a subprocess whose address space is capped, to prove memory stays bounded.

A header that claims a billion chunks would take tens of gigabytes if the parser allocated
first; under the cap that is a MemoryError (or a crash), while a limit checked before
allocating raises the typed error with a message the parent can read.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

#: Address space for the child: enough for Python, numpy, h5py and zarr, far below the bombs.
ADDRESS_SPACE = 3 * 2**30


def run_capped(code: str) -> str:
    """Run ``code`` in a fresh interpreter limited to :data:`ADDRESS_SPACE`; return its stdout.

    The code prints what the parent asserts on; a non-zero exit fails with the child's stderr.
    """
    preamble = textwrap.dedent(
        f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE}, {ADDRESS_SPACE}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", preamble + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout
