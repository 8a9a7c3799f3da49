#!/usr/bin/env python3
"""Checks what a gil-bench sweep wrote: a table row per policy and CPU-thread
count, and per policy a Chrome trace-event JSON and an SVG timeline that
parse and show the traced threads.

    scripts/check-sweep.py OUT_DIR POLICY [POLICY ...]
"""

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

SVG = "{http://www.w3.org/2000/svg}"


def fail(msg):
    sys.exit(f"check-sweep: {msg}")


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


if __name__ == "__main__":
    main()
