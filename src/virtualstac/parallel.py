"""Executors for parsing many files in parallel, all with the ``concurrent.futures`` interface.

Any ``concurrent.futures.Executor`` works where virtualstac takes an executor (thread and process
pools, a ``dask.distributed`` client's ``get_executor()``); these add a serial executor for
debugging, a dask.delayed executor, and an adapter for lithops.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from typing import Any, Generic, ParamSpec, TypeVar

from virtualstac.errors import VirtualStacError

__all__ = [
    "DaskDelayedExecutor",
    "ForkingExecutorError",
    "LithopsEagerFunctionExecutor",
    "SerialExecutor",
    "check_fork_safe",
]

T = TypeVar("T")
P = ParamSpec("P")


def _completed[R](fn: Callable[..., R], *args: Any, **kwargs: Any) -> Future[R]:
    future: Future[R] = Future()
    try:
        future.set_result(fn(*args, **kwargs))
    except BaseException as err:  # the future carries the error to the caller, as pools do
        future.set_exception(err)
    return future


class ForkingExecutorError(VirtualStacError, ValueError):
    """A process pool would fork a process whose object-store runtime cannot survive a fork."""


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
