#!/usr/bin/env python3
"""CPU throughput of 1-4 CPU-bound Ruby threads: the lock against stock, in pairs.

    python3 ruby/bench/cpu.py [--threads 1,2,3,4] [--pairs 5] [--seconds 3]
                              [--policies "default classic"]

Builds Ruby 3.3 stock and on the lock (ruby/build.sh --stock; cached; or
takes RUBY_STOCK and RUBY_RUSTGIL, the prefixes build.sh prints, from the
environment when both are set), then
for each thread count runs ruby/bench/cpu.rb (N threads, each a loop of
Ruby code, for --seconds) under stock and under each policy ("default":
RUBY_RUST_GIL unset), one right after the other, the order alternating from
pair to pair. Each pair gives a ratio (policy's laps/s over stock's);
the table has the medians of laps/s, the median ratio with its spread
(min-max), the same ratio of laps per CPU-second the process used (less
moved by other programs on the machine than laps per second; it also
counts CPU a waiting thread spends spinning), the CPUs used, and the fairness (least-served thread's laps over the
most-served one's). The machine's load average is read before each run and
its range printed: on a busy machine the pairs spread, and the median ratio
is what to read.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def build():
    if os.environ.get("RUBY_STOCK") and os.environ.get("RUBY_RUSTGIL"):
        return os.environ["RUBY_STOCK"], os.environ["RUBY_RUSTGIL"]
    out = subprocess.run(["bash", os.path.join(REPO, "ruby/build.sh"), "--stock"],
                         stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit("ruby/bench/cpu.py: ruby/build.sh --stock failed")
    env = dict(line.split("=", 1) for line in out.stdout.splitlines()
               if line.startswith("RUBY_") and "=" in line)
    return env["RUBY_STOCK"], env["RUBY_RUSTGIL"]


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run(ruby, policy, n, seconds):
    env = dict(os.environ)
    env.pop("RUBY_RUST_GIL", None)
    if policy and policy != "default":
        env["RUBY_RUST_GIL"] = policy
    load = loadavg()
    out = subprocess.run([ruby, os.path.join(HERE, "cpu.rb"), str(n), str(seconds)], env=env,
                         stdout=subprocess.PIPE, text=True, check=True, timeout=60 + 10 * seconds).stdout
    f = dict(w.split("=", 1) for w in out.split()[1:])
    laps = [int(x) for x in f["laps"].split(",")]
    return {"laps_per_s": float(f["laps_per_s"]), "laps_per_cpu_s": sum(laps) / float(f["cpu_s"]),
            "cpus": float(f["cpu_s"]) / seconds, "fairness": min(laps) / max(laps) if max(laps) else 0.0,
            "load": load}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2,3,4")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--policies", default="default classic",
                    help='RUBY_RUST_GIL values, "default" for unset (default: "default classic")')
    a = ap.parse_args()
    threads = [int(x) for x in a.threads.split(",")]
    policies = a.policies.split()
    if a.pairs < 1 or a.seconds <= 0 or not policies or min(threads) < 1:
        sys.exit("ruby/bench/cpu.py: --pairs, --threads at least 1, --seconds above 0, a policy")
    stock_prefix, lock_prefix = build()
    stock = os.path.join(stock_prefix, "bin/ruby")
    lock = os.path.join(lock_prefix, "bin/ruby")
    t0 = time.time()
    res = {}  # (n, policy) -> list of (stock run, policy run)
    for n in threads:
        for i in range(a.pairs):
            for p in policies:
                print(f"threads={n} pair {i + 1}/{a.pairs}: stock and {p}", file=sys.stderr, flush=True)
                if i % 2 == 0:
                    s = run(stock, None, n, a.seconds)
                    r = run(lock, p, n, a.seconds)
                else:
                    r = run(lock, p, n, a.seconds)
                    s = run(stock, None, n, a.seconds)
                res.setdefault((n, p), []).append((s, r))
    t1 = time.time()
    med = statistics.median
    loads = [x["load"] for pairs in res.values() for pair in pairs for x in pair]
    print(f"cpu.rb, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M', time.gmtime(t0))}-"
          f"{time.strftime('%H:%M UTC', time.gmtime(t1))}, load average {min(loads):.1f}-{max(loads):.1f}; "
          f"{a.pairs} pairs of {a.seconds:g} s runs per cell, medians\n")
    print("| threads | policy | stock laps/s | policy laps/s | ratio per pair: median (min-max) "
          "| laps per CPU-second, ratio | CPUs used, stock / policy | fairness, stock / policy |")
    print("|---:|---|---:|---:|---|---|---|---|")
    for n in threads:
        for p in policies:
            pairs = res[(n, p)]
            ratios = [r["laps_per_s"] / s["laps_per_s"] for s, r in pairs]
            per_cpu = [r["laps_per_cpu_s"] / s["laps_per_cpu_s"] for s, r in pairs]
            print(f"| {n} | {p} | {med([s['laps_per_s'] for s, _ in pairs]) / 1e6:.2f}M "
                  f"| {med([r['laps_per_s'] for _, r in pairs]) / 1e6:.2f}M "
                  f"| **{med(ratios):.3f}** ({min(ratios):.3f}-{max(ratios):.3f}) "
                  f"| {med(per_cpu):.3f} ({min(per_cpu):.3f}-{max(per_cpu):.3f}) "
                  f"| {med([s['cpus'] for s, _ in pairs]):.2f} / {med([r['cpus'] for _, r in pairs]):.2f} "
                  f"| {med([s['fairness'] for s, _ in pairs]):.2f} / {med([r['fairness'] for _, r in pairs]):.2f} |")


if __name__ == "__main__":
    main()
