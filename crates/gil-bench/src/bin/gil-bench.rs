//! The simulator sweep: every policy × CPU-thread count, one I/O thread
//! making round trips beside them (see `gil_bench::sim`). Prints a table of
//! I/O round trips/s, round-trip latency (p50, p99) and CPU work/s, writes
//! it to `OUT/sweep.md`, and draws one timeline per policy
//! (`OUT/timeline-POLICY.svg`, and `.json` for Perfetto).
//!
//! ```text
//! gil-bench [--seconds S] [--cpu N,N,...] [--policies P,P,...|all]
//!           [--interval-us US] [--peer-delay-us US] [--trace-ms MS]
//!           [--trace-cpu N] [--out DIR]
//! ```

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use gil_bench::sim::{self, Outcome, Scenario};
use gil_core::trace::TraceFormat;
use gil_core::GilConfig;

const USAGE: &str = "\
usage: gil-bench [options]

Runs one I/O thread (64-byte round trips over a socket pair, released
around each write and read) beside 0..N CPU-bound threads on one lock, for
every policy, and prints I/O round trips/s, latency and CPU work/s.

  --seconds S         length of each run (default 1.5)
  --cpu LIST          CPU-thread counts, comma-separated (default 0,1,2,4)
  --policies LIST     presets, comma-separated, or 'all' (default all)
  --interval-us US    switch interval (default 5000, CPython's)
  --peer-delay-us US  the echo peer's think time (default 0: at once)
  --trace-ms MS       timeline window per policy (default 30; 0: no pictures)
  --trace-cpu N       CPU threads in the traced run (default 2; must be in --cpu)
  --out DIR           where sweep.md and the timelines go (default target/gil-bench)";

struct Args {
    seconds: f64,
    cpu: Vec<usize>,
    policies: Vec<&'static str>,
    interval_us: u64,
    peer_delay_us: u64,
    trace_ms: u64,
    trace_cpu: usize,
    out: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        seconds: 1.5,
        cpu: vec![0, 1, 2, 4],
        policies: gil_core::PRESETS.to_vec(),
        interval_us: gil_core::DEFAULT_SWITCH_INTERVAL_US,
        peer_delay_us: 0,
        trace_ms: 30,
        trace_cpu: 2,
        out: PathBuf::from("target/gil-bench"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag} {v:?}: {e}"));
        match flag.as_str() {
            "--seconds" => {
                let v = value()?;
                args.seconds = v.parse().map_err(|e| format!("--seconds {v:?}: {e}"))?;
                if !(args.seconds > 0.0 && args.seconds <= 3600.0) {
                    return Err("--seconds must be in (0, 3600]".into());
                }
            }
            "--cpu" => {
                args.cpu = value()?
                    .split(',')
                    .map(|n| n.trim().parse::<usize>().map_err(|e| format!("--cpu {n:?}: {e}")))
                    .collect::<Result<_, _>>()?;
                if args.cpu.iter().any(|&n| n > 64) {
                    return Err("--cpu: at most 64 CPU threads".into());
                }
            }
            "--policies" => {
                let v = value()?;
                if v != "all" {
                    args.policies = v
                        .split(',')
                        .map(|name| {
                            gil_core::PRESETS
                                .iter()
                                .copied()
                                .find(|p| *p == name.trim())
                                .ok_or_else(|| gil_core::UnknownPreset(name.trim().to_string()).to_string())
                        })
                        .collect::<Result<_, _>>()?;
                }
            }
            "--interval-us" => args.interval_us = number(value()?)?,
            "--peer-delay-us" => args.peer_delay_us = number(value()?)?,
            "--trace-ms" => args.trace_ms = number(value()?)?,
            "--trace-cpu" => args.trace_cpu = number(value()?)? as usize,
            "--out" => args.out = PathBuf::from(value()?),
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    if args.cpu.is_empty() || args.policies.is_empty() {
        return Err("--cpu and --policies need at least one value".into());
    }
    if args.trace_ms > 0 && !args.cpu.contains(&args.trace_cpu) {
        return Err(format!(
            "--trace-cpu {} is not one of the --cpu counts {:?} (or pass --trace-ms 0)",
            args.trace_cpu, args.cpu
        ));
    }
    if args.trace_ms as f64 > args.seconds * 1e3 {
        return Err(format!(
            "--trace-ms {} is longer than a run (--seconds {})",
            args.trace_ms, args.seconds
        ));
    }
    if args.interval_us > gil_core::MAX_SWITCH_INTERVAL_US {
        return Err(format!(
            "--interval-us: at most {} µs",
            gil_core::MAX_SWITCH_INTERVAL_US
        ));
    }
    Ok(args)
}

fn micros(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".into(), |d| format!("{:.0} µs", d.as_secs_f64() * 1e6))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("gil-bench: {msg}");
            return ExitCode::from(2);
        }
    };
    match sweep(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("gil-bench: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn sweep(args: &Args) -> Result<(), String> {
    std::fs::create_dir_all(&args.out).map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let header = format!(
        "1 I/O thread ({}-byte round trips over a socket pair, peer answers after {} µs) beside N CPU-bound \
         threads (work units of ~1 µs); switch interval {} µs; {} s per run; {} CPUs.",
        64, args.peer_delay_us, args.interval_us, args.seconds, cpus
    );
    println!("{header}\n");
    let mut table = String::new();
    let _ = writeln!(
        table,
        "| policy | CPU threads | I/O round trips/s | vs 0 CPU threads | round trip p50 | p99 | CPU work, M units/s |"
    );
    let _ = writeln!(table, "|---|---:|---:|---:|---:|---:|---:|");
    print!("{table}");
    let started = Instant::now();
    let mut pictures = Vec::new();
    for &policy in &args.policies {
        let mut unloaded: Option<f64> = None;
        for &n in &args.cpu {
            let config = GilConfig::preset(policy)
                .map_err(|e| e.to_string())?
                .switch_interval_us(args.interval_us);
            let mut s = Scenario::new(config, n, Duration::from_secs_f64(args.seconds));
            s.peer_delay = Duration::from_micros(args.peer_delay_us);
            if args.trace_ms > 0 && n == args.trace_cpu {
                s.trace = Some(Duration::from_millis(args.trace_ms));
                s.title = format!(
                    "{policy}: 1 I/O thread + {n} CPU threads, switch interval {} µs",
                    args.interval_us
                );
            }
            let o: Outcome = sim::run(&s).map_err(|e| format!("{policy} with {n} CPU threads: {e}"))?;
            let rate = o.round_trips_per_s();
            if n == 0 {
                unloaded = Some(rate);
            }
            let line = format!(
                "| {policy} | {n} | {rate:.0} | {} | {} | {} | {} |\n",
                unloaded.map_or_else(|| "-".into(), |u| format!("{:.2}x", rate / u)),
                micros(o.round_trip_quantile(0.5)),
                micros(o.round_trip_quantile(0.99)),
                if n == 0 {
                    "-".into()
                } else {
                    format!("{:.2}", o.cpu_units_per_s() / 1e6)
                },
            );
            print!("{line}");
            table.push_str(&line);
            if let Some(trace) = &o.trace {
                for ext in ["svg", "json"] {
                    let path = args.out.join(format!("timeline-{policy}.{ext}"));
                    let format = TraceFormat::from_path(&path).expect("svg and json are formats");
                    trace
                        .write_to(&path, format)
                        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                    pictures.push(path);
                }
            }
        }
    }
    let report = args.out.join("sweep.md");
    std::fs::write(&report, format!("{header}\n\n{table}"))
        .map_err(|e| format!("cannot write {}: {e}", report.display()))?;
    println!(
        "\n({:.0} s) table: {}",
        started.elapsed().as_secs_f64(),
        report.display()
    );
    if !pictures.is_empty() {
        println!("timelines (SVG; JSON opens in ui.perfetto.dev):");
        for p in pictures {
            println!("  {}", p.display());
        }
    }
    Ok(())
}
