"""An interrupted sanitizer pass of ``wireup mutate`` ends within seconds (audit/mutate/_run.py,
``_interruptible_pool``): its queued runs are dropped, the running ones see every supervisor closing (no
worker starts, the live ones were killed) and keep nothing. On 6 December a ``timeout`` SIGTERM during the
memcheck pass left a plain ``with ThreadPoolExecutor`` waiting for every queued survivor's run."""

from __future__ import annotations

import threading
import time

import pytest

from audit.mutate._run import _interruptible_pool
from audit.runtime._worker_lifetime import closing


def test_an_interrupted_pool_drops_its_queue_and_closes_the_supervisors_of_the_running_calls():
    started: list[int] = []
    saw_closing: list[bool] = []
    stop = threading.Event()

    def call(i: int) -> int:
        started.append(i)
        if i == 0:
            return i  # the first result reaches the main thread, which is then interrupted
        for _ in range(1000):  # a verify call whose supervisor waits on a worker, until it is told to close
            if closing():
                break
            time.sleep(0.01)
        saw_closing.append(closing())
        return i

    with pytest.raises(KeyboardInterrupt):
        with _interruptible_pool(2, stop) as pool:
            for _ in pool.map(call, range(10)):
                raise KeyboardInterrupt
    assert stop.is_set()
    assert set(started) <= {0, 1, 2, 3} and 1 in started, started  # the queue (4 .. 9) never ran
    assert saw_closing and all(saw_closing), saw_closing
    assert not closing()  # the process's later supervisors may start workers again


def test_a_pool_that_ends_normally_runs_everything_and_leaves_stop_clear():
    stop = threading.Event()
    with _interruptible_pool(3, stop) as pool:
        assert list(pool.map(lambda i: i * i, range(6))) == [0, 1, 4, 9, 16, 25]
    assert not stop.is_set() and not closing()
