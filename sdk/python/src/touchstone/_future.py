"""The futures ``log()`` returns: ``concurrent.futures.Future`` with its lock made on demand.

A plain Future makes a ``threading.Condition`` (an RLock and its bookkeeping) when it is created.
``log()`` makes one future per record, on the caller's thread, and most are never waited on one
by one (``flush()`` waits for all at once): that Condition, and the garbage collector walking it
while the record is queued, was a quarter of the caller's cost. Here it is made the first time
something needs it (a wait, a callback, ``concurrent.futures.wait``); settling a future nobody
waits on only sets its state. Whether the Condition exists is decided under one module lock by
both sides, so a waiter never misses its result. Behaviour is the base class's; when this
Python's Future is not laid out as expected, the plain Future is used instead.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, InvalidStateError
from typing import Any

# The base class's states (private constants of concurrent.futures._base; _usable checks them).
PENDING = "PENDING"
FINISHED = "FINISHED"
CANCELLED = "CANCELLED"
CANCELLED_AND_NOTIFIED = "CANCELLED_AND_NOTIFIED"

_MAKE = threading.Lock()
_DONE = frozenset((CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED))
_FIELDS = {"_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks"}


class LazyFuture(Future[str]):
    """A Future[str] whose Condition is made on first use (see the module docstring)."""

    def __init__(self) -> None:  # the base's fields, all but the Condition
        self._lazy: threading.Condition | None = None
        self._state = PENDING
        self._result = None
        self._exception = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Any] = []

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        condition = self._lazy
        if condition is None:
            with _MAKE:
                condition = self._lazy
                if condition is None:
                    condition = self._lazy = threading.Condition()
        return condition

    def done(self) -> bool:
        return self._state in _DONE

    def result(self, timeout: float | None = None) -> str:
        if self._state == FINISHED and self._exception is None:  # final: no lock needed
            return self._result  # type: ignore[return-value]
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state == FINISHED:
            return self._exception
        return super().exception(timeout)

    def set_result(self, result: str) -> None:
        if not self._settle_unwatched("_result", result):
            super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        if not self._settle_unwatched("_exception", exception):
            super().set_exception(exception)

    def _settle_unwatched(self, field: str, value: Any) -> bool:
        """Settles without a Condition when none was made (so nothing waits or calls back)."""
        with _MAKE:
            if self._lazy is not None:
                return False
            state = self._state
            if state not in _DONE:
                setattr(self, field, value)
                self._state = FINISHED
                return True
        # Outside the lock: the repr takes the Condition, which takes the lock.
        raise InvalidStateError(f"{state}: {self!r}")


def _usable() -> bool:
    """Whether this Python's Future has the fields LazyFuture stands in for."""
    try:
        from concurrent.futures import _base  # noqa: PLC0415 (checked once, at import)

        states = (PENDING, FINISHED, CANCELLED, CANCELLED_AND_NOTIFIED)
        same_states = all(getattr(_base, state, None) == state for state in states)
        return same_states and set(vars(Future())) == _FIELDS
    except Exception:
        return False


new_future: type[Future[str]] = LazyFuture if _usable() else Future
