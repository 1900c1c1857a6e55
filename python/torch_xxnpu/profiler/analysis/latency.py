"""Summary section: launch-to-start latency of the kernels."""
from torch_xxnpu.profiler.analysis.numeric import percentile, to_us


def launch_latency(cap):
    """(statistics, every latency in us): kernel start - its launch call's start, and the
    start delay when the stream was free."""
    lat = []
    unmatched = 0
    for d in cap.device:
        if d.cat != "kernel":
            continue
        launch = cap.launch_of[d.idx]
        if launch is None:
            unmatched += 1
            continue
        lat.append(d.start - launch.start)
    # Start delay when the stream was free: kernel start - max(launch, end of the previous
    # activity on its stream): the launch overhead without the queueing behind other work.
    free_delay = []
    for (dv, st), evs in cap.by_stream.items():
        prev_end = None
        for d in evs:
            launch = cap.launch_of[d.idx]
            if d.cat == "kernel" and launch is not None:
                free_delay.append(d.start - max(launch.start, prev_end if prev_end is not None else launch.start))
            prev_end = d.end if prev_end is None else max(prev_end, d.end)
    latency = {"count": len(lat), "unmatched_kernels": unmatched}
    if lat:
        latency.update({
            "min_us": to_us(min(lat)), "p50_us": to_us(percentile(lat, 50)), "p90_us": to_us(percentile(lat, 90)),
            "p99_us": to_us(percentile(lat, 99)), "max_us": to_us(max(lat)), "mean_us": to_us(sum(lat) / len(lat)),
            "negative": sum(1 for v in lat if v < 0),
            "free_stream_p50_us": to_us(percentile(free_delay, 50)),
            "free_stream_p90_us": to_us(percentile(free_delay, 90)),
            "free_stream_max_us": to_us(max(free_delay)),
        })
    return latency, [to_us(v) for v in lat]
