"""Threads at once, and whether a call releases the GIL: shared by the tests of the operations
and of plans."""

import sys
import threading
import time


def assert_releases_gil(call, attempts=20):
    """With a switch interval of an hour, the main thread hands the GIL over only where it blocks
    or releases it. A thread woken just before a long `call()` therefore runs during the call only
    if the call releases the GIL, and after it otherwise. `call` should take milliseconds and have
    run once already (selection and first-call checks out of the way)."""
    woken, ran_at = threading.Event(), []
    waiter = threading.Thread(target=lambda: (woken.wait(), ran_at.append(time.perf_counter())))
    waiter.start()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(3600)
    try:
        woken.set()
        start = time.perf_counter()
        for _ in range(attempts):
            call()
            if ran_at:
                break
        end = time.perf_counter()
    finally:
        sys.setswitchinterval(interval)
    waiter.join()
    assert start < ran_at[0] < end, "the waiting thread ran only after the calls returned: the GIL was held"


def run_in_threads(worker, count=8):
    """Runs `worker(seed)` on `count` threads at once (seeds 0..count-1); fails with the first
    exception any of them raised."""
    errors = []

    def guarded(seed):
        try:
            worker(seed)
        except Exception as e:  # reported below, on the main thread
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(seed,)) for seed in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
