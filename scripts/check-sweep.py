#!/usr/bin/env python3
"""Checks what a gil-bench sweep wrote: a table row per policy and CPU-thread
count, and per policy a Chrome trace-event JSON and an SVG timeline that
parse and show the traced threads. When the sweep ran classic and priority
with 1 CPU thread, also that it shows the convoy and its cure, beside that
CPU thread:

  - classic: the I/O thread's average round trip (one over its round trips
    per second) is at least CONVOY_MEAN_LEAST switch interval: the interval
    paces it;
  - priority: the round trip's p50 is at most CURED_P50_MOST interval.

Medians over gil-bench's rounds, against the interval, not against the run
alone (0 CPU threads), which a busy machine moves by 5x in a 0.2 s run. On
two CPUs beside five busy threads classic's p50 fell on the quick side of
its two-humped round trips in one run of twelve (206 µs, at 175 round
trips/s), and priority's average rose to 6 ms in two of ten while its p50
stayed at 0.2 ms: hence classic's average and priority's p50. Beside
two interpreter builds (load 4-5) classic's average fell to 0.47 interval
(2026-12-02): a CPU thread that the OS deschedules holds no lock, so
some round trips wait no interval; hence a quarter of one, still five
times the average of a run without the convoy. The
peer's think time (gil-bench's default 100 µs) is what makes the convoy
show on every run: with 0, the reply can beat a sleeping waiter's wake-up.

    scripts/check-sweep.py OUT_DIR POLICY [POLICY ...]
"""

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

SVG = "{http://www.w3.org/2000/svg}"
CONVOY_MEAN_LEAST = 0.25
CURED_P50_MOST = 0.2


def fail(msg):
    sys.exit(f"check-sweep: {msg}")


def io_rows(table):
    """{(policy, cpu threads): (round trips/s, p50 µs or None)} from the
    one-I/O-thread table; empty for a sweep of several I/O threads, whose
    rates are totals over its threads."""
    lines = [line for line in table.splitlines() if line.startswith("|")]
    if not lines:
        return {}
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    want = ("policy", "CPU threads", "I/O round trips/s", "round trip p50")
    if "I/O threads" in head or not all(w in head for w in want):
        return {}
    at = [head.index(w) for w in want]
    rows = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        policy, cpu, rate, p50 = (cells[i] for i in at)
        p50 = None if p50 == "-" else float(p50.split()[0])
        rows[(policy, int(cpu))] = (float(rate.split()[0]), p50)
    return rows


def check_convoy(table, policies):
    """None if the sweep did not run classic and priority with 1 CPU thread
    and one I/O thread; else what it saw (or a failure)."""
    if not {"classic", "priority"} <= set(policies):
        return None
    rows = io_rows(table)
    if not rows:
        return None  # several I/O threads: not this check's table
    m = re.search(r"switch interval (\d+) µs", table)
    if not m:
        fail("sweep.md names no switch interval")
    if ("classic", 1) not in rows or ("priority", 1) not in rows:
        return None  # no run beside 1 CPU thread
    interval = int(m.group(1))
    classic_rate, classic_p50 = rows[("classic", 1)]
    priority_rate, priority_p50 = rows[("priority", 1)]
    if classic_p50 is None or priority_p50 is None:
        fail("classic or priority made no round trip beside 1 CPU thread")
    classic_mean = 1e6 / classic_rate if classic_rate > 0 else float("inf")
    what = (f"beside 1 CPU thread, classic's round trip {classic_mean:.0f} µs on average (p50 {classic_p50:.0f}) "
            f"and priority's p50 {priority_p50:.0f} µs (average {1e6 / max(priority_rate, 1e-9):.0f}); "
            f"switch interval {interval} µs")
    if classic_mean < CONVOY_MEAN_LEAST * interval:
        fail(f"no convoy shown: {what}; classic's average should be at least {CONVOY_MEAN_LEAST} interval")
    if priority_p50 > CURED_P50_MOST * interval:
        fail(f"the convoy is not removed: {what}; priority's p50 should be at most {CURED_P50_MOST} interval")
    return f"the convoy under classic and its removal under priority: {what}"


def main():
    if len(sys.argv) < 3:
        fail("usage: check-sweep.py OUT_DIR POLICY [POLICY ...]")
    out, policies = Path(sys.argv[1]), sys.argv[2:]
    table = (out / "sweep.md").read_text(encoding="utf-8")
    for p in policies:
        rows = [line for line in table.splitlines() if line.startswith(f"| {p} |")]
        if not rows:
            fail(f"sweep.md has no row for {p}")
        doc = json.loads((out / f"timeline-{p}.json").read_text())
        events = doc["traceEvents"]
        names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
        if "I/O thread" not in names:
            fail(f"timeline-{p}.json: no row for the I/O thread ({names})")
        if not any(e["ph"] == "X" and e["name"] == "running" for e in events):
            fail(f"timeline-{p}.json: nobody ran")
        root = ET.parse(out / f"timeline-{p}.svg").getroot()
        texts = ["".join(t.itertext()) for t in root.iter(SVG + "text")]
        if "I/O thread" not in texts or not any(t.startswith(p + ":") for t in texts):
            fail(f"timeline-{p}.svg: no I/O thread row or no title")
    print(f"check-sweep: {out}: table, JSON and SVG for {', '.join(policies)}")
    convoy = check_convoy(table, policies)
    if convoy:
        print(f"check-sweep: {convoy}")


if __name__ == "__main__":
    main()
