"""``python -m torch_xxnpu.profiler.analyze``: load, check, summarise, print, and write the
JSON and HTML reports."""
import argparse
import json
import os
import sys
from collections import defaultdict

from torch_xxnpu.profiler.analysis.checks import check_trace
from torch_xxnpu.profiler.analysis.errors import ControlCharacterError, NoDeviceActivityError, TraceError
from torch_xxnpu.profiler.analysis.html_report import render_html
from torch_xxnpu.profiler.analysis.loading import load_trace
from torch_xxnpu.profiler.analysis.summary import summarize
from torch_xxnpu.profiler.analysis.text import format_text


def _public(summary):
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if not k.startswith("_")}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x
    return strip(summary)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m torch_xxnpu.profiler.analyze",
        description="Summarise a torch.profiler chrome trace with the xxnpu device timeline: device time by "
                    "kernel and op, op->kernel map, utilisation and idle causes, launch latency, memory.")
    parser.add_argument("trace", help="chrome trace JSON (or .json.gz) from prof.export_chrome_trace()")
    parser.add_argument("--html", metavar="OUT.html", help="also write a self-contained HTML report")
    parser.add_argument("--json", metavar="OUT.json", help="also write the summary as JSON")
    parser.add_argument("--check", action="store_true",
                        help="validate the trace for Perfetto/chrome://tracing and HTA; exit 1 on violations")
    parser.add_argument("--top", type=int, default=25, help="rows per table (default 25)")
    args = parser.parse_args(argv)

    def fail(msg, code=2):
        print(f"error: {msg}", file=sys.stderr)
        return code

    try:
        try:
            trace = load_trace(args.trace)
        except ControlCharacterError as e:
            if args.check:
                print(f"check failed: {e}", file=sys.stderr)
                return 1
            print(f"warning: {e}; analysing it anyway", file=sys.stderr)
            trace = load_trace(args.trace, strict=False)
    except TraceError as e:
        return fail(str(e))

    problems = check_trace(trace)
    if args.check:
        fatal = [p for p in problems if p["fatal"]]
        for p in problems:
            print(f"{'error' if p['fatal'] else 'warning'}: [{p['kind']}] {p['message']}")
        if fatal:
            print(f"check failed: {len(fatal)} problem(s) in {args.trace}")
            return 1
        n = len(trace["traceEvents"])
        print(f"check passed: {args.trace} ({n} events): valid JSON, rows nest, device events carry "
              "int args.stream >= 0 and args.correlation")
        if not (args.html or args.json):
            return 0

    try:
        summary = summarize(trace, source=args.trace)
    except NoDeviceActivityError as e:
        return fail(str(e))
    if not args.check:
        # One line per kind: the first problem and how many more (--check lists them all).
        by_kind = defaultdict(list)
        for p in problems:
            if p["kind"] != "device":
                by_kind[p["kind"]].append(p)
        for kind, ps in by_kind.items():
            more = sum(int(p["message"].split()[2]) if p["message"].startswith("... and") else 1 for p in ps) - 1
            tail = f" [and {more} more like it; --check lists them]" if more > 0 else ""
            print(f"warning: [{kind}] {ps[0]['message']}{tail}", file=sys.stderr)
    if not args.check:
        print(format_text(summary, top=args.top))
    if args.json:
        try:
            with open(args.json, "w") as f:
                json.dump(_public(summary), f, indent=1)
        except OSError as e:
            return fail(f"cannot write {args.json}: {e}")
    if args.html:
        try:
            with open(args.html, "w", encoding="utf-8") as f:
                f.write(render_html(summary))
        except OSError as e:
            return fail(f"cannot write {args.html}: {e}")
        print(f"report written to {os.path.abspath(args.html)}", file=sys.stderr if args.check else sys.stdout)
    return 0
