"""How times, sizes and names are shown, shared by the text report, the HTML report and
the check messages."""


def fmt_time(us):
    if us is None:
        return "-"
    a = abs(us)
    if a >= 1e6:
        return f"{us / 1e6:.3f} s"
    if a >= 1e3:
        return f"{us / 1e3:.3f} ms"
    return f"{us:.3f} us"


def fmt_bytes(b):
    if b is None:
        return "-"
    a = abs(b)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if a >= scale:
            return f"{b / scale:.2f} {unit}"
    return f"{b} B"


def clip(s, n=60):
    return s if len(s) <= n else s[: n - 3] + "..."
