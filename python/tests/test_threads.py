"""Threads calling one context at once (the GIL is released during each call)."""

import sys
import threading
import time

import numpy as np

import reference as ref


def test_threads_share_one_context(ctx):
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        try:
            for i in range(40):
                m, n, k = 1 + (seed * 7 + i) % 48, 1 + (seed + i * 3) % 40, 1 + (i * 5) % 64
                a, b = ref.random(rng, (m, k), np.float32), ref.random(rng, (k, n), np.float32)
                ref.assert_close(ctx.gemm(a, b), ref.gemm(a, b), np.float32, k, np.abs(a) @ np.abs(b))
                x = ref.random(rng, (m, 64), np.float32)
                ref.assert_close(ctx.softmax(x), ref.softmax(x), np.float32, 64, ref.softmax(x))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_gil_is_released_during_a_call(ctx):
    # With a switch interval of an hour, the main thread hands the GIL over only where it blocks
    # or releases it. A thread woken just before a long GEMM therefore runs during the GEMM only
    # if the call releases the GIL, and after it otherwise.
    a = np.ones((384, 384), np.float32)
    ctx.gemm(a, a)  # selection and first-call checks out of the way
    woken, ran_at = threading.Event(), []
    waiter = threading.Thread(target=lambda: (woken.wait(), ran_at.append(time.perf_counter())))
    waiter.start()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(3600)
    try:
        woken.set()
        start = time.perf_counter()
        for _ in range(20):
            ctx.gemm(a, a)
            if ran_at:
                break
        end = time.perf_counter()
    finally:
        sys.setswitchinterval(interval)
    waiter.join()
    assert start < ran_at[0] < end, "the waiting thread ran only after the GEMMs returned: the GIL was held"
