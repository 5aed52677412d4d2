"""Executors for parsing many files in parallel, all with the ``concurrent.futures`` interface.

Any ``concurrent.futures.Executor`` works where virtualstac takes an executor (thread and process
pools, a ``dask.distributed`` client's ``get_executor()``); these add a serial executor for
debugging, a dask.delayed executor, and an adapter for lithops.

:func:`executor_for` turns what users pass as ``parallel=`` into an executor (``True``: the
process pool of :func:`shared_process_pool`, started once per process), and
:func:`map_batched` runs a function over many items with a few tasks per worker, each task a
contiguous batch of items: a task costs a process pool or a dask cluster more (sending the
function and its arguments, scheduling, a reply) than parsing one small file does.
"""

from __future__ import annotations

import inspect
import itertools
import multiprocessing
import os
import pickle
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, Generic, ParamSpec, TypeVar

from virtualstac.errors import VirtualStacError

__all__ = [
    "DaskDelayedExecutor",
    "ForkingExecutorError",
    "LithopsEagerFunctionExecutor",
    "SerialExecutor",
    "UnpicklableTaskError",
    "batches",
    "check_fork_safe",
    "executor_for",
    "map_batched",
    "map_batches",
    "shared_process_pool",
    "worker_count",
]

T = TypeVar("T")
P = ParamSpec("P")

#: Tasks per worker in :func:`map_batched`: more than one, so that a worker whose batch is
#: slow (bigger files, a busy core) does not hold the others up at the end.
TASKS_PER_WORKER = 4


def _completed[R](fn: Callable[..., R], *args: Any, **kwargs: Any) -> Future[R]:
    future: Future[R] = Future()
    try:
        future.set_result(fn(*args, **kwargs))
    except BaseException as err:  # the future carries the error to the caller, as pools do
        future.set_exception(err)
    return future


class ForkingExecutorError(VirtualStacError, ValueError):
    """A process pool would fork a process whose object-store runtime cannot survive a fork."""


class UnpicklableTaskError(VirtualStacError, TypeError):
    """A task for other processes holds something pickle cannot send (a lambda, a local
    function, an open file)."""


def check_fork_safe(executor: Executor) -> None:
    """Refuse a ``ProcessPoolExecutor`` that starts its workers with ``fork``.

    obstore runs its requests on a tokio runtime whose threads a forked child does not inherit:
    once the parent has read anything, a forked worker's first read waits forever. Workers
    started with ``forkserver`` or ``spawn`` build their own runtime.
    """
    if not isinstance(executor, ProcessPoolExecutor):
        return
    # A pool keeps the multiprocessing context it was created with (the default one when none
    # was given) only in a private attribute.
    context = getattr(executor, "_mp_context", None)
    if context is not None and context.get_start_method() == "fork":
        raise ForkingExecutorError(
            "this ProcessPoolExecutor starts workers with fork, and a forked worker hangs on its "
            "first read once the parent process has read anything through obstore; create it "
            "with mp_context=multiprocessing.get_context('forkserver') (or 'spawn')"
        )


class SerialExecutor(Executor):
    """Run tasks one after another in the calling thread. Useful as a default and for debugging."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``fn(*args, **kwargs)`` now and return a completed future."""
        return _completed(fn, *args, **kwargs)

    def map(
        self,
        fn: Callable[..., T],
        *iterables: Iterable[Any],
        timeout: float | None = None,
        chunksize: int = 1,
        buffersize: int | None = None,
    ) -> Iterator[T]:
        """Apply ``fn`` to the items of ``iterables`` in order, lazily."""
        return map(fn, *iterables)


class DaskDelayedExecutor(Executor):
    """Run tasks with ``dask.delayed`` on the active dask scheduler."""

    def __init__(self) -> None:
        """Check that dask is installed."""
        import dask  # noqa: F401

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Compute one delayed call and return a completed future."""
        from dask.delayed import delayed

        return _completed(lambda: delayed(fn)(*args, **kwargs).compute())

    def map(
        self,
        fn: Callable[..., T],
        *iterables: Iterable[Any],
        timeout: float | None = None,
        chunksize: int = 1,
        buffersize: int | None = None,
    ) -> Iterator[T]:
        """Build one delayed call per item and compute them together."""
        from dask.base import compute
        from dask.delayed import delayed

        tasks = [delayed(fn)(*items) for items in zip(*iterables, strict=False)]
        return iter(compute(*tasks))  # type: ignore[no-untyped-call]


class LithopsEagerFunctionExecutor(Executor):
    """Run tasks on serverless functions with lithops, behind the ``Executor`` interface.

    lithops' own ``map`` returns futures and inspects signatures in ways that break
    ``functools.partial`` and ``*args`` wrappers; :class:`compatible_callable` smooths both.
    """

    class compatible_callable(Generic[P, T]):  # noqa: N801 - the name VirtualiZarr users know
        """Wrap a callable so lithops passes arguments to it as given."""

        def __init__(self, func: Callable[P, T]) -> None:
            """Wrap ``func``."""
            self.func = func
            self.__signature__ = inspect.Signature(
                [inspect.Parameter("args", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
            )

        def __call__(self, args: tuple[Any, ...]) -> T:
            """Call the wrapped function with the packed positional arguments."""
            return self.func(*args)  # type: ignore[call-arg]

    def __init__(self, **kwargs: Any) -> None:
        """Create a lithops ``FunctionExecutor`` with ``kwargs``."""
        try:
            import lithops
        except ImportError as err:
            raise ImportError(
                "LithopsEagerFunctionExecutor needs lithops: pip install lithops"
            ) from err
        self.lithops_client = lithops.FunctionExecutor(**kwargs)

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Run one call remotely, wait for it, and return a completed future."""

        def call() -> T:
            task = self.lithops_client.call_async(
                self.compatible_callable(lambda *a: fn(*a, **kwargs)), (args,)
            )
            # Given one future, get_result returns its result rather than a list of one.
            return self.lithops_client.get_result(task)  # type: ignore[no-any-return]

        return _completed(call)

    def map(
        self,
        fn: Callable[..., T],
        *iterables: Iterable[Any],
        timeout: float | None = None,
        chunksize: int = 1,
        buffersize: int | None = None,
    ) -> Iterator[T]:
        """Run one remote call per item and return the results in order."""
        items = [(tuple(args),) for args in zip(*iterables, strict=False)]
        futures = self.lithops_client.map(self.compatible_callable(fn), items, timeout=timeout)
        return iter(self.lithops_client.get_result(futures))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Clean up lithops' temporary data."""
        self.lithops_client.clean()


def _available_cores() -> int:
    """The cores this process may run on (its affinity, which containers and ``taskset`` limit)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


_shared_pool: ProcessPoolExecutor | None = None
_shared_pool_lock = threading.Lock()


def shared_process_pool() -> ProcessPoolExecutor:
    """The process pool ``parallel=True`` parses with: one worker per available core.

    It is started on first use and kept for the life of the process, so only the first call
    pays for starting the workers and importing virtualstac in them. Its workers start with
    ``forkserver`` (see :func:`check_fork_safe`).
    """
    global _shared_pool
    with _shared_pool_lock:
        if _shared_pool is None:
            _shared_pool = ProcessPoolExecutor(
                _available_cores(), mp_context=multiprocessing.get_context("forkserver")
            )
        return _shared_pool


def executor_for(parallel: Any) -> Executor:
    """The executor of a ``parallel=`` argument.

    ``False``/``None``: :class:`SerialExecutor`; ``True``: :func:`shared_process_pool`;
    ``"dask"``: :class:`DaskDelayedExecutor`; an ``Executor`` as it is (refused if it is a
    process pool that forks); a ``dask.distributed.Client``: its ``get_executor()``.
    """
    if parallel is False or parallel is None:
        return SerialExecutor()
    if parallel is True:
        return shared_process_pool()
    if parallel == "dask":
        return DaskDelayedExecutor()
    if isinstance(parallel, Executor):
        check_fork_safe(parallel)
        return parallel
    if hasattr(parallel, "get_executor"):  # a dask.distributed Client
        executor: Executor = parallel.get_executor()
        return executor
    if isinstance(parallel, type) and issubclass(parallel, Executor):
        # VirtualiZarr takes (deprecated) an executor class and starts and stops it itself.
        raise TypeError(
            f"parallel takes an executor, not its class: pass {parallel.__name__}(...), which "
            "you configure and shut down (or parallel=True for a shared process pool)"
        )
    raise TypeError(
        f"parallel must be False, True, 'dask', an Executor or a dask.distributed Client, "
        f"got {parallel!r}"
    )


def worker_count(executor: Executor) -> int:
    """How many tasks ``executor`` runs at once: its workers (threads of a dask cluster).

    Executors that do not say (dask.delayed, lithops) count as one per available core.
    """
    if isinstance(executor, SerialExecutor):
        return 1
    if isinstance(executor, ProcessPoolExecutor | ThreadPoolExecutor):
        # Both keep the max_workers they were created with (or their default) here only.
        return max(1, int(getattr(executor, "_max_workers", 1)))
    client = getattr(executor, "_client", None)  # dask.distributed's ClientExecutor
    if client is not None:
        return max(1, int(sum(client.nthreads().values())))
    return _available_cores()


def batches[T](items: Sequence[T], count: int) -> list[Sequence[T]]:
    """``items`` cut into at most ``count`` contiguous batches, in order, of sizes differing by
    at most one."""
    if not items:
        return []
    count = max(1, min(count, len(items)))
    size, extra = divmod(len(items), count)
    bounds = [0, *itertools.accumulate(size + (i < extra) for i in range(count))]
    return [items[start:stop] for start, stop in itertools.pairwise(bounds)]


def _run_batch[T, R](fn: Callable[[T], R], batch: Sequence[T]) -> list[R]:
    return [fn(item) for item in batch]


def _check_picklable(executor: Executor, fn: Callable[..., Any]) -> None:
    """Refuse, with advice, a task a process pool could not send to its workers."""
    if not isinstance(executor, ProcessPoolExecutor):
        return
    # The pool pickles in a background thread, and its error names neither the task nor what
    # to do; pickling once here costs one batch's share of what the pool does anyway.
    try:
        pickle.dumps(fn)
    except (pickle.PicklingError, TypeError, AttributeError) as err:
        raise UnpicklableTaskError(
            f"a process pool sends each task (the parser, the registry, preprocess and the "
            f"options) to its worker processes, and this one cannot be pickled: {err}. Use "
            "parallel=False, a ThreadPoolExecutor, or a dask.distributed Client (which "
            "pickles functions by value)"
        ) from err


def map_batches[T, R](
    executor: Executor,
    fn: Callable[[Sequence[T]], R],
    items: Sequence[T],
    *,
    tasks_per_worker: int = TASKS_PER_WORKER,
    max_batch: int | None = None,
) -> Iterator[tuple[Sequence[T], R]]:
    """``fn`` applied to contiguous :func:`batches` of ``items``: each batch with its result,
    in order.

    There are ``tasks_per_worker`` batches per worker of the executor, more when that would
    make a batch longer than ``max_batch`` items (so that what ``fn`` holds for a batch, and
    what it sends back, stays bounded however many items there are). Results are yielded as
    they are needed, so a caller that folds them in as they come holds one at a time beyond
    its own state. ``fn`` must pickle for process pools and dask clusters.
    """
    _check_picklable(executor, fn)
    count = worker_count(executor) * max(1, tasks_per_worker)
    if max_batch is not None:
        count = max(count, -(-len(items) // max(1, max_batch)))
    tasks = batches(items, count)
    return zip(tasks, executor.map(fn, tasks), strict=True)


def map_batched[T, R](
    executor: Executor,
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    tasks_per_worker: int = TASKS_PER_WORKER,
) -> Iterator[R]:
    """``fn`` applied to every item with ``executor``, the results in the order of ``items``.

    Items are sent in :func:`batches`, ``tasks_per_worker`` per worker of the executor, so that
    ``fn`` (with whatever it holds: a parser, a registry) is sent once per batch and results
    come back one message per batch. ``fn`` and the items must pickle for process pools and
    dask clusters. Serial executors apply ``fn`` lazily, one item at a time.
    """
    if isinstance(executor, SerialExecutor):
        return map(fn, items)
    _check_picklable(executor, fn)
    tasks = batches(items, worker_count(executor) * max(1, tasks_per_worker))
    results = executor.map(_run_batch, [fn] * len(tasks), tasks)
    return itertools.chain.from_iterable(results)
