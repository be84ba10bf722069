"""The futures log() returns behave as concurrent.futures.Future, with their lock made on demand."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import FIRST_COMPLETED, Future, InvalidStateError, as_completed, wait

import pytest

from touchstone._future import LazyFuture, new_future


def test_this_python_uses_the_lazy_future() -> None:
    assert new_future is LazyFuture
    assert isinstance(new_future(), Future)


def test_settled_without_a_waiter_makes_no_lock() -> None:
    ok, failed = LazyFuture(), LazyFuture()
    ok.set_result("a" * 32)
    failed.set_exception(ValueError("refused"))
    assert ok.done()
    assert failed.done()
    assert ok.result(timeout=0) == "a" * 32
    assert ok.exception(timeout=0) is None
    assert isinstance(failed.exception(timeout=0), ValueError)
    with pytest.raises(ValueError, match="refused"):
        failed.result(timeout=0)
    assert ok._lazy is None
    with pytest.raises(InvalidStateError):
        ok.set_result("again")
    with pytest.raises(InvalidStateError):
        failed.set_exception(RuntimeError())


def test_a_waiter_on_another_thread_never_misses_the_result() -> None:
    # The waiter makes the lock while the setter settles: both orders, many times.
    for i in range(2000):
        future = LazyFuture()
        got: list[str] = []
        waiter = threading.Thread(target=lambda f=future, out=got: out.append(f.result(timeout=10)))
        waiter.start()
        if i % 2:
            threading.Event().wait(0.0001)
        future.set_result(str(i))
        waiter.join(10)
        assert got == [str(i)]


def test_pending_until_set_and_times_out_when_not() -> None:
    future = LazyFuture()
    assert not future.done()
    with pytest.raises(TimeoutError):
        future.result(timeout=0.01)
    with pytest.raises(TimeoutError):
        future.exception(timeout=0.01)


def test_callbacks_wait_as_completed_and_cancel() -> None:
    calls: list[str] = []
    early, late, never = LazyFuture(), LazyFuture(), LazyFuture()
    early.add_done_callback(lambda f: calls.append(f"early {f.result()}"))
    early.set_result("1")
    late.set_result("2")
    late.add_done_callback(lambda f: calls.append(f"late {f.result()}"))
    assert calls == ["early 1", "late 2"]
    done, pending = wait([early, late, never], timeout=0.05)
    assert done == {early, late}
    assert pending == {never}
    threading.Timer(0.05, never.set_result, ("3",)).start()
    done, _ = wait([never], timeout=10, return_when=FIRST_COMPLETED)
    assert done == {never}
    assert sorted(f.result() for f in as_completed([early, late, never], timeout=10)) == [
        "1",
        "2",
        "3",
    ]
    cancelled = LazyFuture()
    assert cancelled.cancel()
    assert cancelled.done()
    with pytest.raises(InvalidStateError):
        cancelled.set_result("x")


def test_asyncio_can_await_it() -> None:
    future = LazyFuture()

    async def main() -> str:
        asyncio.get_running_loop().call_later(0.01, future.set_result, "from a thread")
        return await asyncio.wrap_future(future)

    assert asyncio.run(main()) == "from a thread"
