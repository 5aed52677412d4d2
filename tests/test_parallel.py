"""Executors for parsing many files: one ``concurrent.futures.Executor`` interface for all."""

import functools
import multiprocessing
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import h5py
import numpy as np
import pytest

from virtualstac.parallel import (
    DaskDelayedExecutor,
    ForkingExecutorError,
    LithopsEagerFunctionExecutor,
    SerialExecutor,
    check_fork_safe,
)

#: lithops running functions in local processes of this interpreter, storing in /tmp.
LITHOPS_LOCALHOST = {
    "lithops": {"backend": "localhost", "storage": "localhost", "log_level": None},
    "localhost": {"runtime": sys.executable},
}

EXECUTORS: list[Callable[[], Executor]] = [
    SerialExecutor,
    DaskDelayedExecutor,
    functools.partial(ThreadPoolExecutor, max_workers=4),
    functools.partial(LithopsEagerFunctionExecutor, config=LITHOPS_LOCALHOST),
]


def chunk_count(path: Path) -> int:
    """The kind of task executors run: read one file's chunk index."""
    with h5py.File(path, "r") as f:
        return int(f["data"].id.get_num_chunks())


def scaled(value: int, *, factor: int = 1) -> int:
    if value < 0:
        raise ValueError(f"negative value {value}")
    return value * factor


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    """Three HDF5 files with 1, 2 and 3 chunks."""
    paths = []
    for count in (1, 2, 3):
        path = tmp_path / f"{count}.h5"
        with h5py.File(path, "w") as f:
            f.create_dataset("data", data=np.zeros(4 * count, dtype="u1"), chunks=(4,))
        paths.append(path)
    return paths


@pytest.fixture(params=EXECUTORS, ids=["serial", "dask-delayed", "thread-pool", "lithops"])
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    with request.param() as executor:
        yield executor


def test_map_returns_results_in_order(executor: Executor, files: list[Path]) -> None:
    assert list(executor.map(chunk_count, files)) == [1, 2, 3]


def test_map_zips_several_iterables(executor: Executor) -> None:
    assert list(executor.map(pow, [2, 3, 4], [3, 2, 1])) == [8, 9, 4]


def test_submit_returns_a_future_of_the_result(executor: Executor, files: list[Path]) -> None:
    future = executor.submit(scaled, 21, factor=2)

    assert future.result() == 42
    assert executor.submit(chunk_count, files[2]).result() == 3


def test_exceptions_reach_the_caller_through_the_future(executor: Executor) -> None:
    future = executor.submit(scaled, -1)

    assert isinstance(future.exception(), ValueError)
    with pytest.raises(ValueError, match="negative value -1"):
        future.result()


def test_exceptions_in_map_reach_the_caller(executor: Executor) -> None:
    with pytest.raises(ValueError, match="negative value -2"):
        list(executor.map(scaled, [1, -2, 3]))


def test_the_serial_executor_runs_tasks_in_the_calling_thread() -> None:
    caller = threading.get_ident()

    with SerialExecutor() as executor:
        assert executor.submit(threading.get_ident).done()
        assert executor.submit(threading.get_ident).result() == caller


def test_the_lithops_executor_explains_that_lithops_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "lithops", None)  # import lithops now fails
    with pytest.raises(
        ImportError, match="LithopsEagerFunctionExecutor needs lithops: pip install"
    ):
        LithopsEagerFunctionExecutor()


def test_lithops_compatible_callable_spreads_packed_arguments() -> None:
    wrapped = LithopsEagerFunctionExecutor.compatible_callable(functools.partial(scaled, factor=3))

    assert wrapped((5,)) == 15
    assert list(wrapped.__signature__.parameters) == ["args"]


def test_only_process_pools_that_fork_are_refused() -> None:
    for method in ("forkserver", "spawn"):
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context(method)) as pool:
            check_fork_safe(pool)
    with ThreadPoolExecutor(1) as threads:
        check_fork_safe(threads)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as forking:
        with pytest.raises(ForkingExecutorError, match="forked worker hangs"):
            check_fork_safe(forking)
