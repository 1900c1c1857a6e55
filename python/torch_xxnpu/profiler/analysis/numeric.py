"""Numbers of the trace and of the summary: trace microseconds to integer nanoseconds and
back, percentages, percentiles, and the type checks a hand-edited trace needs."""
import math


def is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def to_ns(x):
    """Trace microseconds (float, ns precision) -> integer nanoseconds."""
    return int(round(float(x) * 1000.0))


def to_us(ns):
    return round(ns / 1000.0, 3)


def pct(part, whole):
    return round(100.0 * part / whole, 2) if whole > 0 else 0.0


def percentile(values, p):
    """p-th percentile (0..100) with linear interpolation between closest ranks."""
    if not values:
        return None
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * p / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
