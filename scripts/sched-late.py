#!/usr/bin/env python3
"""Late wake-ups in a gil-bench run, from the kernel's scheduler trace.

    perf sched record -o DATA -- gil-bench --policies P --cpu 2 --rounds 1 \
        --no-control --trace-ms 0 --seconds 1.5
    perf sched timehist -i DATA | python3 scripts/sched-late.py

Reads `perf sched timehist` output: every wake-up of the I/O thread
(sim-io-1) or the echo peer that waited over 1 ms for a CPU, and what ran
on each CPU meanwhile (CPU, task, ms); the lock's own trace cannot show a
thread that is runnable but not running."""
import re, sys, collections
rows = []
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+)\s+\[(\d+)\]\s+(.+?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", line)
    if m:
        t, cpu, task, wait, delay, run = m.groups()
        t, wait, delay, run = float(t), float(wait), float(delay), float(run)
        rows.append((t, int(cpu), task.split("[")[0], delay / 1e3, run / 1e3))
late = [r for r in rows if r[2] in ("sim-io-1", "echo-peer") and r[3] > 1e-3]
print(f"{len(late)} late wake-ups (> 1 ms) of sim-io-1 / echo-peer")
summary = collections.Counter()
for i, (t, cpu, task, delay, run) in enumerate(late[:200]):
    start, end = t - run - delay, t - run
    occ = collections.Counter()
    for t2, cpu2, task2, _, run2 in rows:
        a, b = max(start, t2 - run2), min(end, t2)
        if b > a:
            occ[(cpu2, task2)] += b - a
    for k, v in occ.items():
        summary[k] += v
    if i < 5:
        print(f"  {task} late {delay*1e3:.2f} ms:", ", ".join(f"cpu{c} {n} {v*1e3:.2f}" for (c, n), v in occ.most_common(4)))
print("what ran during all late wake-ups (cpu task: ms):")
for (c, n), v in summary.most_common(8):
    print(f"  cpu{c} {n}: {v*1e3:.1f}")
