#!/usr/bin/env python3
"""Ruby 3.3's convoy and the lock's presets, side by side in one run.

    python3 ruby/bench/bench.py [--rounds N] [--mbytes M] [--pings N]
                                 [--cpu-seconds S] [--policies "P ..."] [--out DIR]

Builds Ruby 3.3 stock and on the lock (ruby/build.sh --stock; about 20
minutes the first time), then runs echo.rb and cpu.rb with each, in every
round, one variant after the other (the order rotated each round):

  - a TCP echo beside 0, 1 and 2 CPU-bound threads: the time to send M MB
    in 16 KiB messages and read them back, and 64-byte round trips (their
    total time, p50, p99, p99.9), for stock, for "processes" (stock's echo
    with 0 threads beside the same spinning work in as many separate
    processes: no lock shared, the machine's own limit) and for each preset;
  - 1 to 4 CPU-bound threads alone: laps per second and fairness (the
    least-served thread's laps over the most-served one's).

Prints Markdown tables of the medians over the rounds (and each cell's
spread, min-max) and writes every raw figure to DIR/raw.json (after each
round, so a failed run keeps the rounds before it). Last, one
ping-pong beside one CPU thread under classic and under priority with
stats=1: the lock's own accounting of where the waits were.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import giloptions

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PRESETS = ["classic", "priority", "lazy", "priority-lazy", "monitor",
           "priority-monitor", "priority-lazy-monitor"]


def die(msg):
    sys.exit(f"ruby/bench/bench.py: {msg}")


def build():
    out = subprocess.run(["bash", os.path.join(REPO, "ruby/build.sh"), "--stock"],
                         stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        die("ruby/build.sh --stock failed")
    env = dict(line.split("=", 1) for line in out.stdout.splitlines()
               if line.startswith("RUBY_") and "=" in line)
    return env["RUBY_STOCK"], env["RUBY_RUSTGIL"]


def programs(prefix):
    """echo.rb and cpu.rb run by PREFIX's ruby."""
    ruby = os.path.join(prefix, "bin/ruby")
    return {prog: [ruby, os.path.join(HERE, f"{prog}.rb")] for prog in ("echo", "cpu")}


def run(cmd, policy=None, spinners=0, spin_cmd=None, timeout=900):
    env = dict(os.environ)
    env.pop("RUBY_RUST_GIL", None)
    if policy:
        env["RUBY_RUST_GIL"] = policy
    procs = [subprocess.Popen(spin_cmd + ["spin"]) for _ in range(spinners)]
    try:
        if procs:
            time.sleep(0.05)
        out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True,
                             timeout=timeout, check=True).stdout
    finally:
        for p in procs:
            p.kill()
            p.wait()
    fields = {}
    for word in out.split()[1:]:
        if "=" in word:
            k, v = word.split("=", 1)
            fields[k] = v
    return fields


def spread(xs):
    return f"{min(xs):.3g}-{max(xs):.3g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mbytes", type=int, default=10)
    ap.add_argument("--pings", type=int, default=1000)
    ap.add_argument("--cpu-seconds", type=float, default=2.0)
    ap.add_argument("--policies", default=" ".join(PRESETS),
                    help="space-separated RUBY_RUST_GIL values (default: every preset)")
    ap.add_argument("--out", default=os.path.join(REPO, "target/ruby-bench"))
    a = ap.parse_args()
    policies = a.policies.split()
    for p in policies:
        if p.split(",")[0] not in PRESETS:
            die(f"unknown preset '{p}' (known: {', '.join(PRESETS)})")
    if a.rounds < 1 or a.mbytes < 1 or a.pings < 100 or a.cpu_seconds <= 0:
        die("--rounds and --mbytes must be at least 1, --pings at least 100, --cpu-seconds above 0")
    os.makedirs(a.out, exist_ok=True)
    stock_prefix, lock_prefix = build()
    stock = programs(stock_prefix)
    lock = programs(lock_prefix)

    # variant -> (executables, policy, run the CPU work as processes)
    variants = [("stock", stock, None, False), ("processes", stock, None, True)]
    variants += [(p, lock, p, False) for p in policies]
    # What each variant's ruby runs (the processes control: stock's).
    bare = {k: v for k, v in os.environ.items() if k != "RUBY_RUST_GIL"}
    try:
        described = {name: giloptions.describe(exes["echo"][0], dict(bare, RUBY_RUST_GIL=policy) if policy else bare)
                     for name, exes, policy, as_procs in variants if not as_procs}
    except RuntimeError as e:
        die(str(e))
    raw = {"echo": {}, "cpu": {}, "machine": os.uname().nodename,
           "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    # Stock Ruby's convoy costs up to 0.1 s per 16 KiB message (7 s per MB)
    # beside one CPU thread, 0.2 s beside two, and as much per round trip:
    # a run's time limit grows with both.
    limit = 300 + 30 * a.mbytes + a.pings // 2

    def save():
        with open(os.path.join(a.out, "raw.json"), "w") as f:
            json.dump(raw, f, indent=1)

    for r in range(a.rounds):
        print(f"round {r + 1}/{a.rounds}", file=sys.stderr, flush=True)
        # Every variant once per round, the order rotated each round.
        k = r % len(variants)
        order = variants[k:] + variants[:k]
        for cpu in (0, 1, 2):
            for name, exes, policy, as_procs in order:
                if as_procs and cpu == 0:
                    continue
                threads, procs = (0, cpu) if as_procs else (cpu, 0)
                b = run(exes["echo"] + ["bulk", str(threads), str(a.mbytes)], policy, procs, stock["echo"], limit)
                p = run(exes["echo"] + ["pingpong", str(threads), str(a.pings)], policy, procs, stock["echo"], limit)
                cell = raw["echo"].setdefault(f"{name}/{cpu}", {"bulk_s": [], "pings_s": [], "p50_us": [],
                                                                 "p99_us": [], "p999_us": []})
                cell["bulk_s"].append(float(b["seconds"]))
                cell["pings_s"].append(float(p["seconds"]))
                for k in ("p50_us", "p99_us", "p999_us"):
                    cell[k].append(float(p[k]))
        for n in (1, 2, 3, 4):
            for name, exes, policy, as_procs in order:
                if as_procs:
                    continue
                c = run(exes["cpu"] + [str(n), str(a.cpu_seconds)], policy)
                laps = [int(x) for x in c["laps"].split(",")]
                cell = raw["cpu"].setdefault(f"{name}/{n}", {"laps_per_s": [], "fairness": []})
                cell["laps_per_s"].append(float(c["laps_per_s"]))
                cell["fairness"].append(min(laps) / max(laps) if max(laps) else 0.0)
        save()

    med = statistics.median
    print(f"\nRuby 3.3, {raw['cpus']} CPUs, {raw['date']}, {a.rounds} rounds "
          f"(median, spread min-max in brackets); bulk = {a.mbytes} MB in 16 KiB messages, "
          f"ping-pong = {a.pings} round trips of 64 bytes over TCP\n")
    for name, d in described.items():
        print(f"- {name}: {d}")
    names = [v[0] for v in variants]
    for cpu in (0, 1, 2):
        print(f"\nbeside {cpu} CPU-bound thread(s):\n")
        print("| variant | bulk s | ping-pong s | p50 us | p99 us | p99.9 us |\n|---|---|---|---|---|---|")
        for name in names:
            cell = raw["echo"].get(f"{name}/{cpu}")
            if cell is None:
                continue
            print(f"| {name} | " + " | ".join(f"{med(cell[k]):.3g} ({spread(cell[k])})"
                                              for k in ("bulk_s", "pings_s", "p50_us", "p99_us", "p999_us")) + " |")
    base = med(raw["echo"]["stock/0"]["bulk_s"])
    print(f"\nbulk time over stock alone ({base:.3g} s):\n")
    print("| variant | 0 CPU | 1 CPU | 2 CPU |\n|---|---|---|---|")
    for name in names:
        cells = [raw["echo"].get(f"{name}/{c}") for c in (0, 1, 2)]
        print(f"| {name} | " + " | ".join("-" if c is None else f"{med(c['bulk_s']) / base:.2f}x"
                                          for c in cells) + " |")
    print("\n| variant | " + " | ".join(f"{n} threads: laps/s | fairness" for n in (1, 2, 3, 4)) + " |")
    print("|---" * 9 + "|")
    for name in names:
        if f"{name}/1" not in raw["cpu"]:
            continue
        row = [name]
        for n in (1, 2, 3, 4):
            cell = raw["cpu"][f"{name}/{n}"]
            row += [f"{med(cell['laps_per_s']):.3g}", f"{med(cell['fairness']):.2f}"]
        print("| " + " | ".join(row) + " |")

    for policy in ("classic", "priority"):
        env = dict(os.environ, RUBY_RUST_GIL=f"{policy},stats=1")
        out = subprocess.run(lock["echo"] + ["pingpong", "1", str(a.pings)], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=limit, check=True)
        print(f"\n`RUBY_RUST_GIL={policy},stats=1 ruby echo.rb pingpong 1 {a.pings}`:\n\n```\n"
              f"{out.stdout.strip()}\n{out.stderr.strip()}\n```")


if __name__ == "__main__":
    main()
