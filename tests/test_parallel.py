"""Executors for parsing many files: one ``concurrent.futures.Executor`` interface for all."""

import functools
import multiprocessing
import os
import pickle
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from virtualstac import ChunkManifest, ManifestArray, ManifestStore, open_virtual_mfdataset
from virtualstac.demo import write_sample_archive
from virtualstac.errors import VirtualStacError
from virtualstac.parallel import (
    TASKS_PER_WORKER,
    DaskDelayedExecutor,
    ForkingExecutorError,
    LithopsEagerFunctionExecutor,
    SerialExecutor,
    UnpicklableTaskError,
    batches,
    check_fork_safe,
    executor_for,
    map_batched,
    map_batches,
    worker_count,
)
from virtualstac.storage.registry import ObjectStoreRegistry

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


# -- batching: a few tasks per worker, each a run of consecutive items -----------------------


class CountingThreadPool(ThreadPoolExecutor):
    """A thread pool that records the batches it was given."""

    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers)
        self.tasks: list[list[Any]] = []

    def map(self, fn: Callable[..., Any], *iterables: Any, **kwargs: Any) -> Iterator[Any]:  # type: ignore[override]
        fns, batches = iterables
        self.tasks.extend(list(batch) for batch in batches)
        return super().map(fn, fns, batches, **kwargs)


@pytest.mark.parametrize(("items", "count"), [(10, 3), (7, 7), (3, 8), (1000, 8), (1, 1)])
def test_batches_cover_every_item_once_in_order(items: int, count: int) -> None:
    cut = batches(list(range(items)), count)

    assert [item for batch in cut for item in batch] == list(range(items))
    assert len(cut) == min(items, count)
    assert max(map(len, cut)) - min(map(len, cut)) <= 1


def test_batches_of_nothing_is_no_batch() -> None:
    assert batches([], 4) == []


def test_map_batched_sends_a_few_batches_per_worker_and_keeps_the_order() -> None:
    with CountingThreadPool(2) as pool:
        results = list(map_batched(pool, str, range(100)))

    assert results == [str(i) for i in range(100)]
    # 2 workers x 4 tasks each: 8 batches of consecutive items, not 100 tasks.
    assert len(pool.tasks) == 2 * TASKS_PER_WORKER
    assert [item for task in pool.tasks for item in task] == list(range(100))


def test_map_batches_gives_one_result_per_batch_of_bounded_length() -> None:
    with ThreadPoolExecutor(2) as pool:
        few = list(map_batches(pool, sum, range(100)))
        many = list(map_batches(pool, sum, range(100), max_batch=10))

    # 2 workers x 4 tasks each, unless that makes batches longer than max_batch.
    assert len(few) == 2 * TASKS_PER_WORKER
    assert [len(batch) for batch, _ in many] == [10] * 10
    for batch, total in few + many:
        assert total == sum(batch)
    assert [item for batch, _ in many for item in batch] == list(range(100))


def test_map_batches_refuses_what_a_process_pool_cannot_send() -> None:
    with forkserver_pool() as pool:
        with pytest.raises(UnpicklableTaskError, match="cannot be pickled"):
            list(map_batches(pool, lambda batch: len(batch), range(10)))


@pytest.mark.parametrize("executor", EXECUTORS[:3], ids=["serial", "dask-delayed", "threads"])
def test_map_batched_gives_what_map_gives(executor: Callable[[], Executor]) -> None:
    with executor() as pool:
        assert list(map_batched(pool, functools.partial(scaled, factor=3), range(20))) == [
            3 * i for i in range(20)
        ]


def test_map_batched_raises_the_error_of_the_item_that_failed() -> None:
    with ThreadPoolExecutor(2) as pool:
        with pytest.raises(ValueError, match="negative value -5"):
            list(map_batched(pool, scaled, [1, 2, 3, 4, -5, 6]))


def test_worker_count_is_the_number_of_tasks_run_at_once() -> None:
    assert worker_count(SerialExecutor()) == 1
    with ThreadPoolExecutor(3) as threads:
        assert worker_count(threads) == 3
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as processes:
        assert worker_count(processes) == 2


def test_parallel_true_is_one_process_pool_started_once() -> None:
    pool = executor_for(True)

    assert isinstance(pool, ProcessPoolExecutor)
    assert executor_for(True) is pool
    check_fork_safe(pool)  # forkserver
    assert worker_count(pool) == len(os.sched_getaffinity(0))


def test_parallel_arguments_that_are_not_executors_are_refused() -> None:
    with pytest.raises(TypeError, match="parallel must be False, True, 'dask'"):
        executor_for("threads")


@pytest.fixture(scope="module")
def cluster_client() -> Iterator[Any]:
    """A real dask.distributed cluster in this process: one worker of two threads."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def test_a_dask_cluster_runs_one_task_per_batch(cluster_client: Any) -> None:
    from distributed import get_task_stream

    executor = executor_for(cluster_client)
    assert worker_count(executor) == 2

    with get_task_stream(cluster_client) as stream:
        results = list(map_batched(executor, scaled, range(30)))

    assert results == list(range(30))
    # Each task the workers ran was one batch: 2 threads x 4 tasks each, not 30 tasks.
    assert len(stream.data) == 2 * TASKS_PER_WORKER


# -- compact results: manifests pickle as their arrays -----------------------------------------


def test_a_pickled_manifest_is_about_the_size_of_its_arrays() -> None:
    chunks = 100_000
    manifest = ChunkManifest.from_arrays(
        paths=np.array(["file:///data/a.nc", "file:///data/b.nc"] * (chunks // 2)).reshape(
            (100, 1000)
        ),
        offsets=np.arange(chunks, dtype=np.uint64).reshape((100, 1000)) * 4096,
        lengths=np.full((100, 1000), 4096, dtype=np.uint64),
    )
    array = ManifestArray(
        {
            "zarr_format": 3,
            "node_type": "array",
            "shape": [100, 1000],
            "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1, 1]}},
            "chunk_key_encoding": {"name": "default"},
            "codecs": [{"name": "bytes"}],
            "fill_value": 0,
        },
        manifest,
    )
    # Per chunk: a one-byte path code and two uint64s, 17 bytes, not a Python object each.
    arrays = chunks * (1 + 8 + 8)

    for value in (manifest, array):
        pickled = pickle.dumps(value, protocol=5)
        assert arrays <= len(pickled) < arrays + 4096
        assert pickle.loads(pickled).manifest == manifest if value is array else True
    assert pickle.loads(pickle.dumps(manifest, protocol=5)) == manifest


# -- open_virtual_mfdataset: what workers send back --------------------------------------------


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three daily netCDF4 files, as the demo writes them (netCDF4 library)."""
    return write_sample_archive(tmp_path_factory.mktemp("parallel") / "archive", days=3)


def forkserver_pool() -> ProcessPoolExecutor:
    return ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("forkserver"))


def test_a_damaged_file_parsed_by_a_worker_process_is_named(
    archive: list[Path], tmp_path: Path
) -> None:
    damaged = tmp_path / "day-2.nc"
    damaged.write_bytes(archive[1].read_bytes()[:3000])
    paths = [str(archive[0]), str(damaged), str(archive[2])]

    with forkserver_pool() as pool:
        with pytest.raises(VirtualStacError, match=str(damaged)):
            open_virtual_mfdataset(paths, parallel=pool, progress=False)


class GivingUpParser:
    """A parser whose error does not say which file it was parsing."""

    def __call__(self, url: str, registry: ObjectStoreRegistry | None = None) -> ManifestStore:
        raise RuntimeError("the parser gave up")


def test_an_error_that_does_not_name_its_file_gets_a_note_naming_it(
    archive: list[Path],
) -> None:
    with ThreadPoolExecutor(2) as pool:
        with pytest.raises(RuntimeError, match="the parser gave up") as raised:
            open_virtual_mfdataset(
                [str(p) for p in archive], parser=GivingUpParser(), parallel=pool, progress=False
            )

    notes = raised.value.__notes__
    assert len(notes) == 1
    assert notes[0].startswith("while opening file://")
    assert notes[0].removeprefix("while opening ") in [p.as_uri() for p in archive]


def test_a_task_a_process_pool_cannot_send_is_refused_with_advice(archive: list[Path]) -> None:
    registry = ObjectStoreRegistry.for_url(archive[0].as_uri())
    parser = functools.partial(lambda url, registry: None)  # a lambda does not pickle

    with forkserver_pool() as pool:
        with pytest.raises(UnpicklableTaskError, match=r"cannot be pickled.*ThreadPoolExecutor"):
            open_virtual_mfdataset(
                [str(p) for p in archive],
                parser=parser,  # type: ignore[arg-type]
                registry=registry,
                parallel=pool,
                progress=False,
            )
