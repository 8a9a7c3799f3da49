//! Shows the lock handing off between threads: N CPU-bound threads that poll
//! the drop-request flag, beside one I/O-like thread that releases the lock
//! around a 1 ms sleep (its "blocking call") and times how long it takes to
//! get the lock back. Prints per-thread figures and the lock's counters.
//!
//! ```text
//! gil-demo [--cpu N] [--seconds S] [--interval-us US] [--policy PRESET]
//! ```
//!
//! `PRESET` is one of `gil_core::PRESETS` (classic, priority, lazy, ...).
//!
//! ```text
//! ```

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use gil_core::{Gil, GilConfig, ReleaseReason, Token};

struct Args {
    cpu: usize,
    seconds: f64,
    interval_us: u64,
    policy: &'static str,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        cpu: 2,
        seconds: 2.0,
        interval_us: gil_core::DEFAULT_SWITCH_INTERVAL_US,
        policy: "classic",
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--cpu" => args.cpu = value("--cpu")?.parse().map_err(|e| format!("--cpu: {e}"))?,
            "--seconds" => {
                args.seconds = value("--seconds")?.parse().map_err(|e| format!("--seconds: {e}"))?;
                if !(args.seconds > 0.0 && args.seconds <= 3600.0) {
                    return Err("--seconds must be in (0, 3600]".into());
                }
            }
            "--interval-us" => {
                args.interval_us = value("--interval-us")?
                    .parse()
                    .map_err(|e| format!("--interval-us: {e}"))?
            }
            "--policy" => {
                let name = value("--policy")?;
                args.policy = gil_core::PRESETS
                    .iter()
                    .copied()
                    .find(|p| *p == name)
                    .ok_or_else(|| format!("{}", gil_core::UnknownPreset(name)))?;
            }
            "-h" | "--help" => {
                return Err("usage: gil-demo [--cpu N] [--seconds S] [--interval-us US] [--policy PRESET]".into())
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    Ok(args)
}

/// A unit of "bytecode": enough arithmetic to take a few microseconds.
fn work_unit(seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..2_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("gil-demo: {msg}");
            return ExitCode::from(2);
        }
    };
    let config = GilConfig::preset(args.policy)
        .expect("a name from PRESETS")
        .switch_interval_us(args.interval_us);
    let gil = match Gil::new(config) {
        Ok(g) => Arc::new(g),
        Err(e) => {
            eprintln!("gil-demo: {e}");
            return ExitCode::from(2);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let duration = Duration::from_secs_f64(args.seconds);

    let cpu_threads: Vec<_> = (0..args.cpu)
        .map(|i| {
            let (gil, stop) = (Arc::clone(&gil), Arc::clone(&stop));
            thread::spawn(move || {
                let me = Token::new(100 + i).expect("non-zero");
                let (mut units, mut yields, mut sink) = (0u64, 0u64, 0u64);
                gil.acquire(me).expect("fresh token");
                while !stop.load(Ordering::Relaxed) {
                    sink = sink.wrapping_add(work_unit(units));
                    units += 1;
                    if gil.handle_drop_request(me).expect("we hold it") {
                        yields += 1;
                    }
                }
                gil.release(me, ReleaseReason::Final).expect("we hold it");
                (units, yields, sink)
            })
        })
        .collect();

    let io_thread = {
        let (gil, stop) = (Arc::clone(&gil), Arc::clone(&stop));
        thread::spawn(move || {
            let me = Token::new(1).expect("non-zero");
            let mut waits = Vec::new();
            gil.acquire(me).expect("fresh token");
            while !stop.load(Ordering::Relaxed) {
                gil.release(me, ReleaseReason::Voluntary).expect("we hold it");
                thread::sleep(Duration::from_millis(1));
                let t = Instant::now();
                gil.acquire(me).expect("released above");
                waits.push(t.elapsed());
            }
            gil.release(me, ReleaseReason::Final).expect("we hold it");
            waits
        })
    };

    thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let mut waits = io_thread.join().expect("I/O thread panicked");
    println!(
        "policy {} | switch interval {} µs | {} CPU thread(s) + 1 I/O thread | {:.1} s",
        args.policy, args.interval_us, args.cpu, args.seconds
    );
    println!();
    println!("{:<10} {:>12} {:>14}", "thread", "work units", "forced drops");
    for (i, t) in cpu_threads.into_iter().enumerate() {
        let (units, yields, sink) = t.join().expect("CPU thread panicked");
        std::hint::black_box(sink);
        println!("{:<10} {:>12} {:>14}", format!("cpu{i}"), units, yields);
    }
    waits.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    if waits.is_empty() {
        println!("I/O thread: no round trips");
    } else {
        let p = |q: f64| waits[((waits.len() - 1) as f64 * q) as usize];
        println!();
        println!(
            "I/O thread: {} round trips ({:.0}/s); wait to re-acquire after its 1 ms call: \
             median {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            waits.len(),
            waits.len() as f64 / args.seconds,
            ms(p(0.5)),
            ms(p(0.99)),
            ms(p(1.0)),
        );
    }
    let c = gil.counters();
    println!();
    println!(
        "lock counters: acquisitions {} | switches {} | drop requests {} | forced switches {} | total wait {:.1} ms",
        c.acquisitions,
        c.switches,
        c.drop_requests,
        c.forced_switches,
        ms(c.wait_time)
    );
    ExitCode::SUCCESS
}
