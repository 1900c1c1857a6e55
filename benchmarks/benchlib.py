"""Timing shared by the Python benchmarks here."""
import statistics
import time


def per_call(fn, sync, calls, reps):
    """Median over `reps` of the seconds per call of `calls` back-to-back calls of fn, each
    batch ended by sync() (device work included); one warm-up call first."""
    fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / calls)
    return statistics.median(times)
