"""torch_xxnpu.profiler.analyze: the trace analysis, its CLI, --check and the HTML report.

Real traces come from torch.profiler around xxnpu work (adds, randn, copies, a host sleep
between launches, synchronizations); a hand-made trace pins the arithmetic exactly.
"""
import json
import os
import re
import subprocess
import sys
import time

import pytest
import torch
import torch_xxnpu  # noqa: F401
from torch.profiler import ProfilerActivity, profile

from torch_xxnpu.profiler import analyze
from torch_xxnpu.profiler.html_report import render_html

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
SLEEP_S = 0.2
MiB = 1 << 20


def run_cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-m", "torch_xxnpu.profiler.analyze", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=300, cwd=cwd)


# ---------------------------------------------------------------------------- real traces


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    torch.randn(4, device="xxnpu").cpu()  # first use of the device outside the capture
    torch.xxnpu.synchronize()
    with profile(activities=ACTIVITIES, profile_memory=True, record_shapes=True) as prof:
        x = torch.randn(256, 1024, device="xxnpu")         # 1 MiB each
        y = torch.randn(256, 1024, device="xxnpu")
        for _ in range(5):
            z = x + y                                       # aten::add -> xxnpu::add
        big = torch.ones(2048, 1024, device="xxnpu")        # 8 MiB: the biggest tensor, aten::ones
        host = z.cpu()                                      # Memcpy DtoH
        back = host.to("xxnpu")                             # Memcpy HtoD
        torch.xxnpu.synchronize()
        t0 = time.perf_counter()
        time.sleep(SLEEP_S)                                 # the device has nothing to do
        slept_us = (time.perf_counter() - t0) * 1e6
        w = x + back
        torch.xxnpu.synchronize()
    del big, w
    path = tmp_path_factory.mktemp("real") / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = analyze.load_trace(str(path))
    return path, trace, analyze.summarize(trace, source=str(path)), slept_us


def test_kernels_and_ops(real):
    _, _, s, _ = real
    kernels = {(k["name"], k["kind"]): k for k in s["kernels"]}
    assert kernels[("xxnpu::add", "kernel")]["calls"] == 6
    assert ("xxnpu::normal", "kernel") in kernels and ("xxnpu::fill", "kernel") in kernels
    assert ("Memcpy DtoH", "memcpy") in kernels and ("Memcpy HtoD", "memcpy") in kernels
    for k in s["kernels"]:
        assert k["min_us"] <= k["avg_us"] <= k["max_us"] and k["total_us"] > 0
    assert sum(k["pct_device_time"] for k in s["kernels"]) == pytest.approx(100.0, abs=0.1)
    pairs = {(m["op"], m["kernel"]) for m in s["op_kernel_map"]}
    assert ("aten::add", "xxnpu::add") in pairs
    assert ("aten::normal_", "xxnpu::normal") in pairs
    assert ("aten::fill_", "xxnpu::fill") in pairs
    normal = next(m for m in s["op_kernel_map"] if m["op"] == "aten::normal_")
    assert normal["top_level_ops"] == ["aten::randn"]
    ops = {o["name"]: o for o in s["ops"]}
    assert ops["aten::add"]["calls"] == 6 and ops["aten::add"]["device_activities"] == 6
    assert ops["aten::add"]["device_total_us"] > 0 and ops["aten::add"]["host_total_us"] > 0
    assert "(no op)" not in ops
    assert not s["warnings"], s["warnings"]


def test_utilisation_adds_up_and_the_sleep_is_host_launch_idle(real):
    _, _, s, slept_us = real
    window = s["window"]["duration_us"]
    assert window >= slept_us
    for u in s["utilization"]:
        assert u["window_us"] == pytest.approx(window)
        assert u["busy_us"] + u["idle_us"] == pytest.approx(window, abs=0.01)
        parts = u["kernel_us"] + u["memcpy_us"] + u["memset_us"] + sum(u["idle"].values())
        assert parts == pytest.approx(window, abs=0.01)
        assert 0 < u["utilization_pct"] < 100
        assert u["memcpy_us"] > 0
        # The sleep is idle time the host caused by not launching.
        assert u["idle"]["host_launch"] >= 0.95 * slept_us
    gap = s["longest_gaps"][0]
    assert gap["cause"] == "host_launch"
    assert 0.95 * slept_us <= gap["causes_us"]["host_launch"] <= slept_us + 100_000
    assert gap["after"]["op"] == "aten::add"  # the add launched after the sleep


def test_launch_latency(real):
    _, _, s, _ = real
    lat = s["launch_latency"]
    assert lat["count"] == s["counts"]["kernels"] and lat["unmatched_kernels"] == 0
    assert 0 < lat["min_us"] <= lat["p50_us"] <= lat["p90_us"] <= lat["p99_us"] <= lat["max_us"]
    assert lat["negative"] == 0
    assert 0 < lat["free_stream_p50_us"] <= lat["free_stream_p90_us"] <= lat["free_stream_max_us"]


def test_memory_top_consumer_is_the_biggest_allocation(real):
    _, _, s, _ = real
    mem = s["memory"]
    assert mem["largest"][0]["bytes"] == 8 * MiB and mem["largest"][0]["op"] == "aten::ones"
    assert mem["by_op"][0]["op"] == "aten::ones"
    assert mem["by_op"][0]["largest_allocation"] == 8 * MiB
    (dev,) = mem["devices"]
    # x, y, z, big and back (1 + 1 + 1 + 8 + 1 MiB) are alive together; w adds 1 MiB.
    assert dev["peak_allocated"] >= 12 * MiB
    assert dev["peak_reserved"] >= dev["peak_allocated"]
    live = {r["op"]: r["bytes"] for r in dev["live_at_peak_by_op"]}
    assert live["aten::ones"] == 8 * MiB and live["aten::randn"] == 2 * MiB
    adds = next(r for r in mem["by_op"] if r["op"] == "aten::add")
    assert adds["allocations"] == 6 and adds["bytes_allocated"] == 6 * MiB


def test_text_report_and_cli(real, tmp_path):
    path, _, s, _ = real
    text = analyze.format_text(s)
    for heading in ("Device time by kernel", "Device time by op", "Op -> kernel map", "Device utilisation",
                    "Longest device idle gaps", "Launch-to-start latency", "Device memory", "Collectives"):
        assert heading in text
    assert re.search(r"aten::add\s+-> xxnpu::add \[kernel\] x6", text), text
    out_json = tmp_path / "s.json"
    r = run_cli(path, "--json", out_json)
    assert r.returncode == 0, r.stderr
    assert "xxnpu::add" in r.stdout and "Traceback" not in r.stderr
    data = json.loads(out_json.read_text())
    assert data["kernels"] and not any(k.startswith("_") for k in data)
    # `python -m torch_xxnpu.profiler` is the same command.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r2 = subprocess.run([sys.executable, "-m", "torch_xxnpu.profiler", str(path)], env=env, capture_output=True,
                        text=True, timeout=300)
    assert r2.returncode == 0 and "Device time by kernel" in r2.stdout and not r2.stderr.strip(), r2.stderr


def test_check_passes_on_a_real_trace(real):
    path, trace, _, _ = real
    assert [p for p in analyze.check_trace(trace) if p["fatal"]] == []
    r = run_cli(path, "--check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check passed" in r.stdout


def test_html_report(real, tmp_path):
    path, _, _, _ = real
    out = tmp_path / "report.html"
    r = run_cli(path, "--html", out)
    assert r.returncode == 0, r.stderr
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    # Self-contained: nothing fetched.
    assert not re.search(r"<(script|link|img|iframe)[^>]*\b(src|href)\s*=", html, re.IGNORECASE)
    assert "http://" not in html and "https://" not in html and "@import" not in html
    for chart in ("device timeline", "utilisation over time", "window breakdown", "bar chart",
                  "latency histogram", "memory over time"):
        assert f'aria-label="{chart}"' in html, chart
    assert html.count("<svg") >= 7
    assert "xxnpu::add" in html and "aten::ones" in html


# ---------------------------------------------------------------------------- hand-made trace


def _x(name, cat, pid, tid, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _mem(ts, nbytes, total, addr, dtype=20):
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 100, "tid": 100, "ts": ts,
            "args": {"Total Reserved": 2 * MiB, "Total Allocated": total, "Bytes": nbytes, "Device Id": 0,
                     "Device Type": dtype, "Addr": addr}}


def handmade():
    """Window [1000, 1140] us. Device: add [1030, 1070], mul [1105, 1125], memcpy [1130, 1140]."""
    ev = [
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "xxnpu:0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
        _x("aten::add", "cpu_op", 100, 100, 1000, 20, **{"External id": 1}),
        _x("xxnpuLaunchKernel", "privateuse1_runtime", 100, 100, 1005, 5, correlation=11, device=0, stream=7,
           **{"External id": 1}),
        _x("xxnpu::add", "kernel", 0, 7, 1030, 40, device=0, stream=7, correlation=11, **{"External id": 1}),
        _x("xxnpuStreamSynchronize", "privateuse1_runtime", 100, 100, 1079, 12, correlation=99, device=0),
        _x("xxnpuStreamSynchronize (wait)", "privateuse1_runtime", 100, 100, 1080, 10, wait="stream", device=0),
        _x("aten::mul", "cpu_op", 100, 100, 1100, 10, **{"External id": 2}),
        _x("xxnpuLaunchKernel", "privateuse1_runtime", 100, 100, 1102, 3, correlation=12, device=0, stream=7,
           **{"External id": 2}),
        _x("xxnpu::mul", "kernel", 0, 7, 1105, 20, device=0, stream=7, correlation=12, **{"External id": 2}),
        _x("aten::copy_", "cpu_op", 100, 100, 1125, 5, **{"External id": 3}),
        _x("xxnpuMemcpyAsync", "privateuse1_runtime", 100, 100, 1126, 2, correlation=13, device=0, stream=7,
           **{"External id": 3}),
        _x("Memcpy HtoD", "gpu_memcpy", 0, 7, 1130, 10, device=0, stream=7, correlation=13, bytes=4096,
           **{"External id": 3}),
        {"ph": "s", "id": 11, "pid": 100, "tid": 100, "ts": 1005, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 11, "pid": 0, "tid": 7, "ts": 1030, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        _mem(1001, 1024, 1024, 1),        # in aten::add
        _mem(1101, 4096, 5120, 2),        # in aten::mul: the peak
        _mem(1127, -1024, 4096, 1),       # in aten::copy_: frees add's block
        _mem(1128, 1 << 30, 1 << 30, 3, dtype=0),  # CPU memory: not the device's
        {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 5000},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "x", "ts": 900,
         "dur": 4000},
    ]
    return {"traceEvents": ev, "schemaVersion": 1}


def test_handmade_arithmetic():
    s = analyze.summarize(handmade())
    assert s["window"]["duration_us"] == 140.0
    k = {x["name"]: x for x in s["kernels"]}
    assert [x["name"] for x in s["kernels"]] == ["xxnpu::add", "xxnpu::mul", "Memcpy HtoD"]
    assert (k["xxnpu::add"]["calls"], k["xxnpu::add"]["total_us"], k["xxnpu::add"]["avg_us"]) == (1, 40.0, 40.0)
    assert k["xxnpu::add"]["pct_device_time"] == 57.14
    assert k["xxnpu::mul"]["pct_device_time"] == 28.57
    assert k["Memcpy HtoD"]["pct_device_time"] == 14.29 and k["Memcpy HtoD"]["kind"] == "memcpy"
    ops = {o["name"]: o for o in s["ops"]}
    assert ops["aten::add"]["device_total_us"] == 40.0 and ops["aten::add"]["host_total_us"] == 20.0
    assert ops["aten::copy_"]["kernels"] == ["Memcpy HtoD"]
    assert {(m["op"], m["kernel"]) for m in s["op_kernel_map"]} == {
        ("aten::add", "xxnpu::add"), ("aten::mul", "xxnpu::mul"), ("aten::copy_", "Memcpy HtoD")}

    dev, stream = s["utilization"]
    assert (dev["stream"], stream["stream"]) == (None, 7)
    for u in (dev, stream):
        assert u["busy_us"] == 70.0 and u["idle_us"] == 70.0 and u["utilization_pct"] == 50.0
        assert (u["kernel_us"], u["memcpy_us"], u["memset_us"]) == (60.0, 10.0, 0.0)
        # [1000,1010) nothing launched: host; [1010,1030) add launched, not started: queued;
        # [1070,1105): wait [1080,1090) sync, rest host; [1125,1128) host; [1128,1130) queued.
        assert u["idle"] == {"host_launch": 38.0, "sync_wait": 10.0, "queued": 22.0}
    gap = s["longest_gaps"][0]
    assert (gap["start_us"], gap["dur_us"], gap["cause"]) == (70.0, 35.0, "host_launch")
    assert gap["before"]["name"] == "xxnpu::add" and gap["after"] == {"name": "xxnpu::mul", "op": "aten::mul"}

    lat = s["launch_latency"]  # add: 1030 - 1005 = 25; mul: 1105 - 1102 = 3
    assert (lat["count"], lat["min_us"], lat["max_us"], lat["mean_us"]) == (2, 3.0, 25.0, 14.0)
    assert (lat["p50_us"], lat["p90_us"], lat["p99_us"]) == (14.0, 22.8, 24.78)
    assert lat["free_stream_p50_us"] == 14.0  # mul: 1105 - max(1102, 1070) = 3

    mem = s["memory"]
    (d,) = mem["devices"]
    assert (d["peak_allocated"], d["peak_at_us"], d["peak_op"]) == (5120, 101.0, "aten::mul")
    assert d["allocations"] == 2 and d["frees"] == 1 and d["allocated_at_start"] == 0
    assert d["live_at_peak_by_op"] == [{"op": "aten::mul", "bytes": 4096}, {"op": "aten::add", "bytes": 1024}]
    assert [r["op"] for r in mem["by_op"]] == ["aten::mul", "aten::add"]
    assert mem["largest"][0] == {"device": 0, "bytes": 4096, "op": "aten::mul", "path": "aten::mul",
                                 "at_us": 101.0, "lifetime_us": None}
    assert mem["largest"][1]["lifetime_us"] == 126.0
    assert s["collectives"] == []
    assert analyze.check_trace(handmade()) == []


def test_graph_launches_per_graph_id():
    """Two launches of graph 5 (3 nodes each), one of graph 9 (1 node), one eager kernel."""
    ev = [_x("step", "user_annotation", 100, 100, 1000, 200, **{"External id": 1})]
    t = 1010
    for corr, gid, nodes, dur in ((21, 5, 3, 10), (22, 5, 3, 20), (23, 9, 1, 50)):
        ev.append(_x("xxnpuGraphLaunch", "privateuse1_runtime", 100, 100, t, 5, correlation=corr, device=0,
                     **{"External id": 1}))
        for n in range(nodes):
            ev.append(_x(f"k{n}", "kernel", 0, 7, t + 10 + n * dur, dur, device=0, stream=7, correlation=corr,
                         **{"External id": 1, "graph id": gid, "graph node id": n}))
        t += 200
    ev.append(_x("xxnpu::add", "kernel", 0, 7, t, 40, device=0, stream=7, correlation=30))
    s = analyze.summarize({"traceEvents": ev})
    g = s["graphs"]
    assert g["launches"] == 3
    assert [r["graph_id"] for r in g["graphs"]] == [5, 9]  # 90 us before 50 us
    five, nine = g["graphs"]
    assert (five["launches"], five["nodes_per_launch"], five["device_total_us"], five["device_per_launch_us"]) == (
        2, {"min": 3, "max": 3, "avg": 3.0}, 90.0, 45.0)
    assert (nine["launches"], nine["nodes_per_launch"]["max"], nine["device_total_us"]) == (1, 1, 50.0)
    assert five["pct_device_time"] == 50.0  # of 180 us
    # Launched outside any op: the record_function range around the replays owns the work.
    ops = {o["name"]: o for o in s["ops"]}
    assert (ops["step"]["calls"], ops["step"]["device_total_us"], ops["step"]["host_total_us"]) == (1, 140.0, 200.0)
    assert ops["(no op)"]["device_total_us"] == 40.0
    text = analyze.format_text(s)
    assert "Graph launches (3 xxnpuGraphLaunch calls)" in text
    assert analyze.summarize(handmade())["graphs"] == {"launches": 0, "graphs": []}
    assert "Graph launches" not in analyze.format_text(analyze.summarize(handmade()))


def test_percentile():
    assert analyze.percentile([], 50) is None
    assert analyze.percentile([7], 99) == 7
    assert analyze.percentile([1, 2, 3, 4], 50) == 2.5
    assert analyze.percentile([10, 0, 5], 100) == 10


def test_launch_found_through_the_flow_when_correlation_is_missing():
    t = handmade()
    for e in t["traceEvents"]:
        if e.get("name") == "xxnpu::add":
            del e["args"]["correlation"]
            del e["args"]["External id"]
    s = analyze.summarize(t)
    assert s["launch_latency"]["count"] == 2
    assert ("aten::add", "xxnpu::add") in {(m["op"], m["kernel"]) for m in s["op_kernel_map"]}


def test_collectives_are_listed():
    t = handmade()
    t["traceEvents"].append(_x("xxccl::all_reduce", "kernel", 0, 7, 1071, 2, device=0, stream=7, correlation=20))
    s = analyze.summarize(t)
    assert [(c["name"], c["side"], c["count"]) for c in s["collectives"]] == [("xxccl::all_reduce", "device", 1)]


# ---------------------------------------------------------------------------- errors


def _write(tmp_path, name, content):
    p = tmp_path / name
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content if isinstance(content, str) else json.dumps(content))
    return p


@pytest.mark.parametrize("name,content,expect", [
    ("broken.json", '{"traceEvents": [', "invalid JSON at line 1"),
    ("empty.json", "", "the file is empty"),
    ("notatrace.json", {"hello": "world"}, "without a \"traceEvents\" list"),
    ("number.json", "42", "JSON, but int"),
    ("binary.bin", b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "not UTF-8"),
    ("cpu_only.json", {"traceEvents": [_x("aten::add", "cpu_op", 1, 1, 0, 5)]}, "no device activity"),
])
def test_errors_are_clear_without_traceback(tmp_path, name, content, expect):
    path = _write(tmp_path, name, content)
    r = run_cli(path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith("error: ") and expect in r.stderr, r.stderr
    assert "expected" in r.stderr and "Traceback" not in r.stderr
    with pytest.raises(analyze.TraceError):
        analyze.summarize(analyze.load_trace(str(path)))


def test_missing_file(tmp_path, capsys):
    assert analyze.main([str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err
    assert "cannot read the file" in err and "export_chrome_trace" in err


def test_cpu_only_real_capture_is_rejected(tmp_path):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.ones(8, device="xxnpu")
    path = tmp_path / "cpu.json"
    prof.export_chrome_trace(str(path))
    r = run_cli(path)
    assert r.returncode == 2 and "no device activity" in r.stderr and "PrivateUse1" in r.stderr
    assert run_cli(path, "--check").returncode != 0


# ---------------------------------------------------------------------------- --check


def test_check_fails_on_overlap_and_missing_stream(tmp_path):
    t = handmade()
    # Two X events on one host row that overlap without nesting, and a kernel without args.stream.
    t["traceEvents"].append(_x("aten::zeros", "cpu_op", 100, 100, 1015, 20))
    t["traceEvents"].append(_x("xxnpu::bad", "kernel", 0, 7, 1071, 1, device=0, correlation=30))
    problems = analyze.check_trace(t)
    kinds = sorted(p["kind"] for p in problems)
    assert kinds == ["hta", "nesting"], problems
    assert "args.stream" in next(p["message"] for p in problems if p["kind"] == "hta")
    path = _write(tmp_path, "bad.json", t)
    r = run_cli(path, "--check")
    assert r.returncode == 1, r.stdout
    assert "[nesting]" in r.stdout and "aten::zeros" in r.stdout and "args.stream" in r.stdout
    assert "check failed: 2 problem(s)" in r.stdout
    # Without --check the analysis runs and says it as warnings.
    r2 = run_cli(path)
    assert r2.returncode == 0 and "warning: [nesting]" in r2.stderr and "warning: [hta]" in r2.stderr


def test_check_other_device_row_rules(tmp_path):
    t = handmade()
    t["traceEvents"].append(_x("stray", "cpu_op", 0, 7, 1200, 1))               # wrong category on a device row
    t["traceEvents"].append(_x("xxnpu::neg", "kernel", 0, 8, 1200, 1, stream=-1, correlation=5))
    t["traceEvents"].append(_x("xxnpu::nocorr", "gpu_memset", 0, 9, 1200, 1, stream=9))
    msgs = [p["message"] for p in analyze.check_trace(t)]
    assert any("'stray'" in m and "device row" in m for m in msgs), msgs
    assert any("xxnpu::neg" in m and "got -1" in m for m in msgs), msgs
    assert any("xxnpu::nocorr" in m and "args.correlation" in m for m in msgs), msgs


def test_check_passes_on_the_handmade_trace(tmp_path):
    r = run_cli(_write(tmp_path, "good.json", handmade()), "--check")
    assert r.returncode == 0 and "check passed" in r.stdout, r.stdout + r.stderr


def test_raw_control_character(tmp_path):
    text = json.dumps(handmade()).replace("aten::mul", "aten::\tmul")
    path = _write(tmp_path, "ctl.json", text)
    r = run_cli(path, "--check")
    assert r.returncode == 1 and "raw control character U+0009" in r.stderr, r.stderr
    r2 = run_cli(path)  # the analysis still runs, with a warning
    assert r2.returncode == 0 and "warning: " in r2.stderr and "aten::\tmul" in r2.stdout


def test_render_html_of_handmade_trace():
    html = render_html(analyze.summarize(handmade()))
    assert "<svg" in html and "Memcpy HtoD" in html and "http" not in html


def test_gzip_trace(tmp_path):
    import gzip

    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(handmade()).encode()))
    assert analyze.summarize(analyze.load_trace(str(path)))["window"]["duration_us"] == 140.0


def test_html_stays_small_for_dense_traces():
    ev = []
    for i in range(20000):
        t = 10.0 * i
        ev.append(_x("aten::add", "cpu_op", 1, 1, t, 4, **{"External id": i + 1}))
        ev.append(_x("xxnpuLaunchKernel", "privateuse1_runtime", 1, 1, t + 1, 1, correlation=10**6 + i,
                     **{"External id": i + 1}))
        ev.append(_x(f"k{i % 25}", "kernel", 0, 0, t + 3, 2, device=0, stream=0, correlation=10**6 + i,
                     **{"External id": i + 1}))
        ev.append(_mem(t + 0.5, 512 if i % 2 == 0 else -512, 512 * (i % 2 == 0), i // 2))
    s = analyze.summarize({"traceEvents": ev})
    assert s["utilization"][0]["busy_us"] == pytest.approx(40000.0)
    html = render_html(s)
    assert len(html) < 1_000_000 and html.count("<rect") < 5000
