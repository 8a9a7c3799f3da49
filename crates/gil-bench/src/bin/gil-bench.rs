//! The simulator sweep: every policy × CPU-thread count, one I/O thread (or
//! several, each with its own peer) making round trips beside them (see
//! `gil_bench::sim`). Prints a table of I/O round trips/s, round-trip
//! latency (p50, p99; with several I/O threads also p99.9 and how evenly
//! they were served) and CPU work/s, writes it to `OUT/sweep.md`, and draws
//! one timeline per policy (`OUT/timeline-POLICY.svg`, and `.json` for
//! Perfetto).
//!
//! With `--scale`, the scale sweep instead (see `gil_bench::scale`): every
//! policy × number of waiting threads, hand-offs/s and wake-ups per
//! hand-off, written to `OUT/scale.md`.
//!
//! ```text
//! gil-bench [--seconds S] [--rounds N] [--no-control] [--cpu N,N,...] [--io-threads N,N,...]
//!           [--io-work-units N] [--policies P,P,...|all] [--interval-us US]
//!           [--peer-delay-us US] [--trace-ms MS] [--trace-cpu N] [--out DIR]
//! gil-bench --scale [--waiters N,N,...] [--seconds S] [--policies P,P,...|all]
//!           [--interval-us US] [--out DIR]
//! ```

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use gil_bench::scale::{self, ScaleCell};
use gil_bench::sim::{self, Outcome, Scenario};
use gil_core::trace::TraceFormat;
use gil_core::{GilConfig, Options};

const USAGE: &str = "\
usage: gil-bench [options]
       gil-bench --scale [--waiters LIST] [--seconds S] [--policies LIST]
                 [--interval-us US] [--laps N] [--out DIR]

Runs I/O threads (64-byte round trips over a socket pair each, released
around each write and read) beside 0..N CPU-bound threads on one lock, for
every policy, and prints I/O round trips/s, latency and CPU work/s.

  --seconds S          length of each run (default 1.5; 1 with --scale)
  --rounds N           runs of every cell, interleaved (every cell once per
                       round); the table gives each figure's median (the
                       I/O threads' fairness: that of the round nearest
                       the median rate) and the round trips' min-max
                       (default 3, 1-20)
  --no-control         leave out the control: the same CPU threads doing
                       their work without the lock (as separate processes
                       would), which shows what is the CPUs' share and what
                       the lock's; its rows are 'control' (its lock serves
                       the I/O threads under priority), and each policy's
                       round trips/s over it are 'vs control'
  --cpu LIST           CPU-thread counts, comma-separated (default 0,1,2,4);
                       --cpu-threads is the same
  --io-threads LIST    I/O-thread counts, comma-separated, 1-1024 (default 1);
                       each I/O thread has its own peer
  --io-work-units N    work units (~1 µs each) an I/O thread does under the
                       lock handling each reply, answering drop requests
                       between them (default 0)
  --policies LIST      presets, comma-separated, or 'all' (default all)
  --interval-us US     switch interval (default 5000, CPython's)
  --laps N             bound on laps for every policy (GilConfig::laps;
                       default 0: none; at most 16)
  --peer-delay-us US   the echo peer's think time (default 100, as a network
                       peer: long enough for a CPU thread to take the lock
                       while the I/O thread waits; 0: at once, which lets
                       the reply win that race on an idle machine)
  --trace-ms MS        timeline window per policy (default 30; 0: no pictures)
  --trace-cpu N        CPU threads in the traced run (default 2; must be in --cpu);
                       the traced run has the first --io-threads count
  --out DIR            where sweep.md (scale.md) and the timelines go
                       (default target/gil-bench)

  --scale              the scale sweep instead: 1 + N threads contend (take the
                       lock, ~1 µs of work, release, again), N waiting; prints
                       hand-offs/s and context switches per hand-off
  --waiters LIST       waiting-thread counts for --scale, 1-1024
                       (default 1,4,16,64,256)";

/// The echo peer's default think time, in microseconds: a network peer's
/// answer takes at least this long, so a CPU thread waiting for the lock
/// takes it while the I/O thread waits for the answer, and the convoy (or
/// its absence) shows on every run. With 0 the answer can arrive before a
/// sleeping waiter wakes, and whether the convoy shows depends on the
/// machine's load.
const DEFAULT_PEER_DELAY_US: u64 = 100;

/// The control's rows: the CPU threads do their work without the lock.
const CONTROL: &str = "control";

/// The most I/O threads, or waiting threads, a command line may ask for.
const MAX_THREADS: usize = 1024;

struct Args {
    seconds: f64,
    rounds: usize,
    control: bool,
    cpu: Vec<usize>,
    io_threads: Vec<usize>,
    io_work: u32,
    policies: Vec<&'static str>,
    interval_us: u64,
    laps: u32,
    peer_delay_us: u64,
    trace_ms: u64,
    trace_cpu: usize,
    out: PathBuf,
    scale: bool,
    waiters: Vec<usize>,
}

/// A comma-separated list of counts, each in `range`; an error names the
/// option and the bad value.
fn count_list(flag: &str, v: &str, range: std::ops::RangeInclusive<usize>) -> Result<Vec<usize>, String> {
    v.split(',')
        .map(|n| {
            let n = n.trim();
            let k = n.parse::<usize>().map_err(|e| format!("{flag} {n:?}: {e}"))?;
            if range.contains(&k) {
                Ok(k)
            } else {
                Err(format!("{flag} {k}: must be {} to {}", range.start(), range.end()))
            }
        })
        .collect()
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        seconds: 1.5,
        rounds: 3,
        control: true,
        cpu: vec![0, 1, 2, 4],
        io_threads: vec![1],
        io_work: 0,
        policies: gil_core::PRESETS.to_vec(),
        interval_us: gil_core::DEFAULT_SWITCH_INTERVAL_US,
        laps: 0,
        peer_delay_us: DEFAULT_PEER_DELAY_US,
        trace_ms: 30,
        trace_cpu: 2,
        out: PathBuf::from("target/gil-bench"),
        scale: false,
        waiters: vec![1, 4, 16, 64, 256],
    };
    let mut seconds_given = false;
    let mut sweep_only: Vec<String> = Vec::new();
    let mut waiters_given = false;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag} {v:?}: {e}"));
        if matches!(
            flag.as_str(),
            "--cpu"
                | "--cpu-threads"
                | "--rounds"
                | "--no-control"
                | "--io-threads"
                | "--io-work-units"
                | "--peer-delay-us"
                | "--trace-ms"
                | "--trace-cpu"
        ) {
            sweep_only.push(flag.clone());
        }
        match flag.as_str() {
            "--seconds" => {
                let v = value()?;
                args.seconds = v.parse().map_err(|e| format!("--seconds {v:?}: {e}"))?;
                if !(args.seconds > 0.0 && args.seconds <= 3600.0) {
                    return Err(format!("--seconds {v}: must be in (0, 3600]"));
                }
                seconds_given = true;
            }
            "--cpu" | "--cpu-threads" => args.cpu = count_list(&flag, &value()?, 0..=64)?,
            "--no-control" => args.control = false,
            "--rounds" => {
                let n: u64 = number(value()?)?;
                args.rounds = usize::try_from(n)
                    .ok()
                    .filter(|n| (1..=20).contains(n))
                    .ok_or_else(|| format!("--rounds {n}: must be 1 to 20"))?;
            }
            "--io-threads" => args.io_threads = count_list(&flag, &value()?, 1..=MAX_THREADS)?,
            "--io-work-units" => {
                let v = value()?;
                let n = number(v.clone())?;
                args.io_work = u32::try_from(n)
                    .ok()
                    .filter(|&n| n <= 1_000_000)
                    .ok_or_else(|| format!("--io-work-units {v}: at most 1000000 (one second per reply)"))?;
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
            "--laps" => {
                let n: u64 = number(value()?)?;
                args.laps = u32::try_from(n)
                    .ok()
                    .filter(|&n| n <= gil_core::MAX_LAPS)
                    .ok_or_else(|| format!("--laps {n}: at most {}", gil_core::MAX_LAPS))?;
            }
            "--peer-delay-us" => args.peer_delay_us = number(value()?)?,
            "--trace-ms" => args.trace_ms = number(value()?)?,
            "--trace-cpu" => args.trace_cpu = number(value()?)? as usize,
            "--out" => args.out = PathBuf::from(value()?),
            "--scale" => args.scale = true,
            "--waiters" => {
                args.waiters = count_list(&flag, &value()?, 1..=MAX_THREADS)?;
                waiters_given = true;
            }
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    if args.policies.is_empty() {
        return Err("--policies needs at least one value".into());
    }
    if args.interval_us > gil_core::MAX_SWITCH_INTERVAL_US {
        return Err(format!(
            "--interval-us {}: at most {} µs",
            args.interval_us,
            gil_core::MAX_SWITCH_INTERVAL_US
        ));
    }
    if args.scale {
        if let Some(flag) = sweep_only.first() {
            return Err(format!("{flag} is not an option of --scale (try --help)"));
        }
        if !seconds_given {
            args.seconds = 1.0;
        }
        return Ok(args);
    }
    if waiters_given {
        return Err("--waiters is an option of --scale only".into());
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
    Ok(args)
}

/// One run's figures, kept for the medians over the rounds.
#[derive(Clone)]
struct Sample {
    rate: f64,
    p50: Option<Duration>,
    p99: Option<Duration>,
    p999: Option<Duration>,
    fair: Option<sim::Fairness>,
    cpu_work: f64,
    cpu_shares: Option<(f64, f64)>,
}

impl Sample {
    fn of(o: &Outcome) -> Sample {
        Sample {
            rate: o.round_trips_per_s(),
            p50: o.round_trip_quantile(0.5),
            p99: o.round_trip_quantile(0.99),
            p999: o.round_trip_quantile(0.999),
            fair: o.io_fairness(),
            cpu_work: o.cpu_units_per_s(),
            cpu_shares: o.cpu_shares(),
        }
    }
}

/// The median (the mean of the middle two for an even count); `None` if empty.
fn median(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = xs.collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

/// The least and the greatest value (infinities if empty).
fn min_max(xs: impl Iterator<Item = f64>) -> (f64, f64) {
    xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)))
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
    let result = if args.scale { scale_sweep(&args) } else { sweep(&args) };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("gil-bench: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn config(policy: &str, args: &Args) -> Result<GilConfig, String> {
    Ok(GilConfig::preset(policy)
        .map_err(|e| e.to_string())?
        .switch_interval_us(args.interval_us)
        .laps(args.laps))
}

/// The header's list of the locks measured, each policy with its options
/// text (`priority,spin_us=0`): what a host would be given to build the same
/// lock, so that a table names its locks even after a preset's defaults
/// change.
fn locks_note(args: &Args) -> Result<String, String> {
    let mut locks = Vec::new();
    for &policy in &args.policies {
        let text = Options::from_settings(config(policy, args)?.settings())
            .map_or_else(|| "(no options text says it)".to_string(), |o| o.to_string());
        locks.push(format!("{policy} = `{text}`"));
    }
    Ok(format!("The locks, as options text: {}.", locks.join(", ")))
}

/// The header's note of the bound on laps, if one is set.
fn laps_note(args: &Args) -> String {
    if args.laps > 0 {
        format!("; at most {} laps past the first waiter", args.laps)
    } else {
        String::new()
    }
}

fn write_report(args: &Args, name: &str, header: &str, table: &str, started: Instant) -> Result<(), String> {
    let report = args.out.join(name);
    std::fs::write(&report, format!("{header}\n\n{table}"))
        .map_err(|e| format!("cannot write {}: {e}", report.display()))?;
    println!(
        "\n({:.0} s) table: {}",
        started.elapsed().as_secs_f64(),
        report.display()
    );
    Ok(())
}

fn sweep(args: &Args) -> Result<(), String> {
    std::fs::create_dir_all(&args.out).map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    // With more than one I/O thread, the table says how many and how evenly
    // they were served; with one, it stays as it always was.
    let many = args.io_threads.iter().any(|&n| n > 1);
    let io_who = if many {
        let counts: Vec<String> = args.io_threads.iter().map(usize::to_string).collect();
        format!("{} I/O threads, each with its own peer", counts.join(", "))
    } else {
        "1 I/O thread".to_string()
    };
    let handling = if args.io_work > 0 {
        format!(
            ", each reply handled with {} work units under the lock (inside the round trip)",
            args.io_work
        )
    } else {
        String::new()
    };
    // The control runs beside CPU threads only.
    let has_control = args.control && args.cpu.iter().any(|&n| n > 0);
    let (ctl_head, ctl_rule) = if has_control {
        (" vs control |", "---:|")
    } else {
        ("", "")
    };
    let header = format!(
        "{io_who} ({}-byte round trips over a socket pair, peer answers after {} µs{handling}) beside N \
         CPU-bound threads (work units of ~1 µs); switch interval {} µs{}; {} s per run; {} CPUs. {}{}",
        64,
        args.peer_delay_us,
        args.interval_us,
        laps_note(args),
        args.seconds,
        cpus,
        if has_control {
            "\"control\": the same CPU threads doing their work without the lock, as separate processes \
             would (they share the CPUs, not the lock); \"vs control\": a policy's round trips/s over the \
             control's. "
        } else {
            ""
        },
        if args.rounds > 1 {
            format!(
                "{} rounds, every cell once per round: medians, round trips/s with their min-max; \
                 \"~\": the rounds overlap those without CPU threads (within the noise).",
                args.rounds
            )
        } else {
            "One round.".to_string()
        },
    );
    let header = format!("{header}\n\n{}", locks_note(args)?);
    println!("{header}\n");
    let mut table = String::new();
    if many {
        let _ = writeln!(
            table,
            "| policy | I/O threads | CPU threads | I/O round trips/s | vs 0 CPU threads |{ctl_head} round trip p50 | \
             p99 | p99.9 | round trips per I/O thread, min-max (CV) | CPU work, M units/s | CPU threads' shares |"
        );
        let _ = writeln!(
            table,
            "|---|---:|---:|---:|---:|{ctl_rule}---:|---:|---:|---:|---:|---:|"
        );
    } else {
        let _ = writeln!(
            table,
            "| policy | CPU threads | I/O round trips/s | vs 0 CPU threads |{ctl_head} round trip p50 | p99 | \
             CPU work, M units/s | CPU threads' shares |"
        );
        let _ = writeln!(table, "|---|---:|---:|---:|{ctl_rule}---:|---:|---:|---:|");
    }
    print!("{table}");
    let started = Instant::now();
    let mut pictures = Vec::new();
    // Every cell once per round, in the same order, so that a slow stretch
    // of the machine falls on every cell alike.
    let mut cells: Vec<(&'static str, usize, usize)> = Vec::new();
    for &policy in &args.policies {
        for &io in &args.io_threads {
            for &n in &args.cpu {
                cells.push((policy, io, n));
            }
        }
    }
    if args.control {
        for &io in &args.io_threads {
            for &n in args.cpu.iter().filter(|&&n| n > 0) {
                cells.push((CONTROL, io, n));
            }
        }
    }
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); cells.len()];
    for round in 0..args.rounds {
        for (c, &(policy, io, n)) in cells.iter().enumerate() {
            let control = policy == CONTROL;
            // The control's lock serves the I/O threads alone, under
            // priority: with one I/O thread nobody waits for it, and the
            // policy does not matter; several I/O threads share it as
            // under priority.
            let preset = if control { "priority" } else { policy };
            let mut s = Scenario::new(config(preset, args)?, n, Duration::from_secs_f64(args.seconds));
            s.cpu_take_lock = !control;
            s.io_threads = io;
            s.io_work = args.io_work;
            s.peer_delay = Duration::from_micros(args.peer_delay_us);
            if !control && round == 0 && args.trace_ms > 0 && n == args.trace_cpu && io == args.io_threads[0] {
                s.trace = Some(Duration::from_millis(args.trace_ms));
                let who = if io == 1 {
                    "1 I/O thread".to_string()
                } else {
                    format!("{io} I/O threads")
                };
                s.title = format!(
                    "{policy}: {who} + {n} CPU threads, switch interval {} µs",
                    args.interval_us
                );
            }
            let o: Outcome =
                sim::run(&s).map_err(|e| format!("{policy} with {io} I/O threads and {n} CPU threads: {e}"))?;
            if args.rounds > 1 {
                eprintln!(
                    "  round {}/{}: {policy}, {io} I/O, {n} CPU threads: {:.0} round trips/s",
                    round + 1,
                    args.rounds,
                    o.round_trips_per_s()
                );
            }
            samples[c].push(Sample::of(&o));
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
    for (c, &(policy, io, n)) in cells.iter().enumerate() {
        let runs = &samples[c];
        let alone = cells
            .iter()
            .position(|&(p, i, k)| p == policy && i == io && k == 0)
            .map(|u| &samples[u]);
        let rate = median(runs.iter().map(|r| r.rate)).unwrap_or(0.0);
        let (lo, hi) = min_max(runs.iter().map(|r| r.rate));
        let spread = if runs.len() > 1 {
            format!(" ({lo:.0}-{hi:.0})")
        } else {
            String::new()
        };
        let vs = match alone {
            Some(alone) if n > 0 => {
                let base = median(alone.iter().map(|r| r.rate)).unwrap_or(0.0);
                // Marked when the rounds of the two cells overlap: the
                // difference is within the machine's noise.
                let (alo, ahi) = min_max(alone.iter().map(|r| r.rate));
                let within = runs.len() > 1 && lo <= ahi && alo <= hi;
                format!("{:.2}x{}", rate / base, if within { " ~" } else { "" })
            }
            Some(_) => "1.00x".into(),
            None => "-".into(),
        };
        let vs_control = cells
            .iter()
            .position(|&(p, i, k)| p == CONTROL && i == io && k == n)
            .filter(|_| policy != CONTROL)
            .and_then(|u| median(samples[u].iter().map(|r| r.rate)))
            .map_or_else(|| "-".into(), |base| format!("{:.2}x", rate / base));
        let vs_control = if has_control {
            format!(" {vs_control} |")
        } else {
            String::new()
        };
        let cpu_work = if n == 0 {
            "-".into()
        } else {
            format!("{:.2}", median(runs.iter().map(|r| r.cpu_work)).unwrap_or(0.0) / 1e6)
        };
        let quantile = |f: fn(&Sample) -> Option<Duration>| {
            micros(median(runs.iter().filter_map(f).map(|d| d.as_secs_f64())).map(Duration::from_secs_f64))
        };
        let (p50, p99) = (quantile(|r| r.p50), quantile(|r| r.p99));
        // Fairness (the I/O threads', the CPU threads' shares) from the
        // round of the median rate.
        let mid_round = runs
            .iter()
            .min_by(|a, b| (a.rate - rate).abs().total_cmp(&(b.rate - rate).abs()));
        let shares = mid_round.and_then(|r| r.cpu_shares).map_or_else(
            || "-".into(),
            |(lo, hi)| {
                format!(
                    "{:.0}-{:.0} % ({:.2}x)",
                    lo * 100.0,
                    hi * 100.0,
                    hi / lo.max(f64::MIN_POSITIVE)
                )
            },
        );
        let line = if many {
            let mid = mid_round.and_then(|r| r.fair);
            let fair = mid.map_or_else(|| "-".into(), |f| format!("{}-{} ({:.2})", f.min, f.max, f.cv));
            format!(
                "| {policy} | {io} | {n} | {rate:.0}{spread} | {vs} |{vs_control} {p50} | {p99} | {} | {fair} | \
                 {cpu_work} | {shares} |\n",
                quantile(|r| r.p999),
            )
        } else {
            format!(
                "| {policy} | {n} | {rate:.0}{spread} | {vs} |{vs_control} {p50} | {p99} | {cpu_work} | {shares} |\n"
            )
        };
        print!("{line}");
        table.push_str(&line);
    }
    write_report(args, "sweep.md", &header, &table, started)?;
    if !pictures.is_empty() {
        println!("timelines (SVG; JSON opens in ui.perfetto.dev):");
        for p in pictures {
            println!("  {}", p.display());
        }
    }
    Ok(())
}

fn scale_sweep(args: &Args) -> Result<(), String> {
    std::fs::create_dir_all(&args.out).map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let header = format!(
        "Scale sweep: 1 + N threads contend for one lock (each takes it, does one ~1 µs work unit, releases \
         voluntarily, takes it again), N waiting; switch interval {} µs{}; {} s measured per cell after a \
         warm-up; {} CPUs. A hand-off is an acquisition by another thread than the last holder; wake-ups are \
         the process's voluntary context switches, all = voluntary + involuntary (getrusage).",
        args.interval_us,
        laps_note(args),
        args.seconds,
        cpus
    );
    let header = format!("{header}\n\n{}", locks_note(args)?);
    println!("{header}\n");
    let mut table = String::new();
    let _ = writeln!(
        table,
        "| policy | waiting threads | acquisitions/s | hand-offs/s | hand-offs, % of acquisitions | \
         wake-ups per hand-off | all context switches per hand-off | drop requests per hand-off |"
    );
    let _ = writeln!(table, "|---|---:|---:|---:|---:|---:|---:|---:|");
    print!("{table}");
    let started = Instant::now();
    for &policy in &args.policies {
        for &n in &args.waiters {
            let cell = ScaleCell::new(config(policy, args)?, n, Duration::from_secs_f64(args.seconds));
            let o = scale::run(&cell).map_err(|e| format!("{policy} with {n} waiting threads: {e}"))?;
            let per = |x: Option<f64>| x.map_or_else(|| "-".into(), |x| format!("{x:.2}"));
            let share = if o.acquisitions > 0 {
                format!("{:.1} %", 100.0 * o.handoffs as f64 / o.acquisitions as f64)
            } else {
                "-".into()
            };
            let drops = (o.handoffs > 0).then(|| o.drop_requests as f64 / o.handoffs as f64);
            let line = format!(
                "| {policy} | {n} | {:.0} | {:.0} | {share} | {} | {} | {} |\n",
                o.acquisitions_per_s(),
                o.handoffs_per_s(),
                per(o.wakeups_per_handoff()),
                per(o.context_switches_per_handoff()),
                per(drops),
            );
            print!("{line}");
            table.push_str(&line);
        }
    }
    write_report(args, "scale.md", &header, &table, started)
}

#[cfg(test)]
mod tests {
    use super::{median, min_max};

    #[test]
    fn median_is_the_middle_or_the_mean_of_the_middle_two() {
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), Some(2.0));
        assert_eq!(median([4.0, 1.0, 3.0, 2.0].into_iter()), Some(2.5));
        assert_eq!(median([7.0].into_iter()), Some(7.0));
        assert_eq!(median(std::iter::empty()), None);
    }

    #[test]
    fn min_max_spans_every_value() {
        assert_eq!(min_max([5.0, -1.0, 3.0].into_iter()), (-1.0, 5.0));
    }
}
