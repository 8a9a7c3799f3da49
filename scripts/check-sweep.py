#!/usr/bin/env python3
"""Checks what a gil-bench sweep wrote: a table row per policy and CPU-thread
count, and per policy a Chrome trace-event JSON and an SVG timeline that
parse and show the traced threads. When the sweep ran classic and priority
with 1 CPU thread, also that it shows the convoy and its cure, beside that
CPU thread:

  - classic: the I/O round trip's p50 is at least CONVOY_P50_LEAST switch
    interval (each round trip waits out the interval);
  - priority: its p50 is at most CURED_P50_MOST interval, and it makes at
    least CURE_OVER_CONVOY times classic's round trips/s.

The figures are measured against the interval, not against the run alone
(0 CPU threads), which a busy machine moves by 5x in a 0.2 s run. The
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
CONVOY_P50_LEAST = 0.5
CURED_P50_MOST = 0.2
CURE_OVER_CONVOY = 4.0


def fail(msg):
    sys.exit(f"check-sweep: {msg}")


def io_rows(table):
    """{(policy, cpu threads): (round trips/s, p50 µs)} from the one-I/O-thread
    table (empty for a sweep of several I/O threads)."""
    lines = [line for line in table.splitlines() if line.startswith("|")]
    if not lines:
        return {}
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    want = ("policy", "CPU threads", "I/O round trips/s", "round trip p50")
    if not all(w in head for w in want):
        return {}
    at = [head.index(w) for w in want]
    rows = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        policy, cpu, rate, p50 = (cells[i] for i in at)
        rows[(policy, int(cpu))] = (float(rate), float(p50.split()[0]))
    return rows


def check_convoy(table):
    rows = io_rows(table)
    m = re.search(r"switch interval (\d+) µs", table)
    if not m or ("classic", 1) not in rows or ("priority", 1) not in rows:
        return None
    interval = int(m.group(1))
    classic_rate, classic_p50 = rows[("classic", 1)]
    priority_rate, priority_p50 = rows[("priority", 1)]
    what = (f"beside 1 CPU thread, classic's round trip p50 {classic_p50:.0f} µs and priority's "
            f"{priority_p50:.0f} µs (switch interval {interval} µs); round trips/s {priority_rate:.0f} "
            f"against {classic_rate:.0f}")
    if classic_p50 < CONVOY_P50_LEAST * interval:
        fail(f"no convoy shown: {what}; classic's p50 should be at least {CONVOY_P50_LEAST} interval")
    if priority_p50 > CURED_P50_MOST * interval:
        fail(f"the convoy is not removed: {what}; priority's p50 should be at most {CURED_P50_MOST} interval")
    if priority_rate < CURE_OVER_CONVOY * classic_rate:
        fail(f"the convoy is not removed: {what}; priority should make {CURE_OVER_CONVOY}x the round trips")
    return f"the convoy under classic and its removal under priority: {what}"


def main():
    if len(sys.argv) < 3:
        fail("usage: check-sweep.py OUT_DIR POLICY [POLICY ...]")
    out, policies = Path(sys.argv[1]), sys.argv[2:]
    table = (out / "sweep.md").read_text()
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
    convoy = check_convoy(table)
    if convoy:
        print(f"check-sweep: {convoy}")


if __name__ == "__main__":
    main()
