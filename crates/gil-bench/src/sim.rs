//! The simulator: an I/O thread and CPU-bound threads sharing one lock, as
//! in a Python server with a computation running beside it, without
//! building CPython.
//!
//! The I/O thread plays a request/response client over a socket pair: it
//! releases the lock around each `write` and each `read` (as CPython does
//! around every blocking call) and measures each round trip, from before
//! its write until it holds the lock again after the read. A peer thread
//! that uses no lock echoes each message at once (or after a delay). The
//! CPU-bound threads hold the lock and do work units of about a microsecond,
//! polling the drop request between units as an interpreter does between
//! instructions. A counter bumped under the lock by every thread proves
//! mutual exclusion after each run.
//!
//! Under CPython's classic protocol every round trip costs the I/O thread a
//! whole switch interval once a CPU thread is waiting (the convoy effect);
//! the policies of gil-core remove that wait.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Barrier};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use gil_core::trace::{Trace, Tracer};
use gil_core::{Counters, Gil, GilConfig, ReleaseReason, Token};

use crate::workload::{gil_cpu_thread, stamp, EchoPeer, ExclusiveCounter};

/// One run of the simulator.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The lock's configuration (a preset, usually).
    pub config: GilConfig,
    /// CPU-bound threads beside the I/O thread.
    pub cpu_threads: usize,
    /// How long the threads run.
    pub duration: Duration,
    /// Bytes per message.
    pub message_len: usize,
    /// The peer's think time before each answer.
    pub peer_delay: Duration,
    /// Record a trace of this long, in the middle of the run.
    pub trace: Option<Duration>,
    /// The trace's title.
    pub title: String,
}

impl Scenario {
    /// `cpu_threads` CPU threads beside the I/O thread on a lock built from
    /// `config`, for `duration`; 64-byte messages, answered at once, no trace.
    pub fn new(config: GilConfig, cpu_threads: usize, duration: Duration) -> Scenario {
        Scenario {
            config,
            cpu_threads,
            duration,
            message_len: 64,
            peer_delay: Duration::ZERO,
            trace: None,
            title: String::new(),
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// From the start barrier to the stop flag.
    pub elapsed: Duration,
    /// Round-trip times of the I/O thread, sorted.
    pub round_trips: Vec<Duration>,
    /// Work units the CPU threads did, together.
    pub cpu_units: u64,
    /// The lock's counters at the end.
    pub counters: Counters,
    /// The trace, if the scenario asked for one.
    pub trace: Option<Trace>,
}

impl Outcome {
    /// Round trips per second.
    pub fn round_trips_per_s(&self) -> f64 {
        self.round_trips.len() as f64 / self.elapsed.as_secs_f64()
    }

    /// The `q`-quantile of the round-trip time (nearest rank); `None` if there
    /// were none.
    pub fn round_trip_quantile(&self, q: f64) -> Option<Duration> {
        let n = self.round_trips.len();
        if n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as usize).clamp(1, n);
        Some(self.round_trips[rank - 1])
    }

    /// CPU work units per second, all CPU threads together.
    pub fn cpu_units_per_s(&self) -> f64 {
        self.cpu_units as f64 / self.elapsed.as_secs_f64()
    }
}

fn lock_err(e: gil_core::GilError) -> io::Error {
    io::Error::other(format!("lock: {e}"))
}

/// Runs one scenario. An error means the run is void (a socket failed, the
/// lock refused an operation, or a thread panicked); a run whose counts
/// show lost updates under the lock is an error too.
pub fn run(scenario: &Scenario) -> io::Result<Outcome> {
    let gil = Arc::new(Gil::new(scenario.config.clone()).map_err(lock_err)?);
    let shared = Arc::new(ExclusiveCounter::default());
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(scenario.cpu_threads + 2));
    let (stream, peer) = EchoPeer::spawn(scenario.message_len, scenario.peer_delay)?;

    let io_token = Token::new(1).expect("non-zero");
    let io_thread: JoinHandle<io::Result<Vec<Duration>>> = {
        let (gil, shared, stop, start) = (gil.clone(), shared.clone(), stop.clone(), start.clone());
        let len = scenario.message_len;
        thread::Builder::new().name("sim-io".into()).spawn(move || {
            let mut stream = stream;
            let (mut msg, mut reply) = (vec![0u8; len], vec![0u8; len]);
            let mut times = Vec::new();
            start.wait();
            gil.acquire(io_token).map_err(lock_err)?;
            let mut seq = 0u64;
            let result = (|| {
                while !stop.load(Relaxed) {
                    seq += 1;
                    stamp(&mut msg, seq);
                    let t0 = Instant::now();
                    gil.release(io_token, ReleaseReason::Voluntary).map_err(lock_err)?;
                    let sent = stream.write_all(&msg);
                    gil.acquire(io_token).map_err(lock_err)?;
                    sent?;
                    shared.bump();
                    gil.release(io_token, ReleaseReason::Voluntary).map_err(lock_err)?;
                    let got = stream.read_exact(&mut reply);
                    gil.acquire(io_token).map_err(lock_err)?;
                    got?;
                    times.push(t0.elapsed());
                    if reply != msg {
                        return Err(io::Error::other(format!("round trip {seq}: the echo differs")));
                    }
                }
                Ok(())
            })();
            gil.release(io_token, ReleaseReason::Final).map_err(lock_err)?;
            drop(stream); // the peer sees the end
            result.map(|()| times)
        })?
    };
    let cpu: Vec<JoinHandle<u64>> = (0..scenario.cpu_threads)
        .map(|i| {
            let (gil, shared, stop, start) = (gil.clone(), shared.clone(), stop.clone(), start.clone());
            thread::Builder::new()
                .name(format!("sim-cpu-{}", i + 1))
                .spawn(move || {
                    start.wait();
                    let me = Token::new(100 + i).expect("non-zero");
                    gil_cpu_thread(&gil, me, &shared, |_| !stop.load(Relaxed))
                })
        })
        .collect::<io::Result<_>>()?;

    start.wait();
    let t0 = Instant::now();
    let trace = match scenario.trace {
        Some(window) if !window.is_zero() => {
            thread::sleep(scenario.duration.saturating_sub(window) / 2);
            let tracer = Tracer::new(Tracer::DEFAULT_MAX_EVENTS);
            tracer.set_title(scenario.title.clone());
            tracer.name_thread(io_token, "I/O thread");
            for i in 0..scenario.cpu_threads {
                tracer.name_thread(Token::new(100 + i).expect("non-zero"), format!("CPU thread {}", i + 1));
            }
            gil.set_event_hook(Some(tracer.hook())).expect("not inside a hook");
            thread::sleep(window);
            gil.set_event_hook(None).expect("not inside a hook");
            Some(tracer.finish())
        }
        _ => None,
    };
    thread::sleep(scenario.duration.saturating_sub(t0.elapsed()));
    stop.store(true, Relaxed);
    let elapsed = t0.elapsed();

    let joined = |what: &str| io::Error::other(format!("the {what} panicked"));
    let round_trips = io_thread.join().map_err(|_| joined("I/O thread"))?;
    let mut cpu_units = 0;
    for t in cpu {
        cpu_units += t.join().map_err(|_| joined("CPU thread"))?;
    }
    let echoed = peer.join()?;
    let mut round_trips = round_trips?;
    // Bumped once per round trip and once per unit, always under the lock.
    let bumps = shared.take();
    if bumps != round_trips.len() as u64 + cpu_units {
        return Err(io::Error::other(format!(
            "mutual exclusion broken: {bumps} bumps under the lock, {} expected",
            round_trips.len() as u64 + cpu_units
        )));
    }
    if echoed != round_trips.len() as u64 {
        return Err(io::Error::other(format!(
            "the peer echoed {echoed} messages for {} round trips",
            round_trips.len()
        )));
    }
    if !gil.is_idle() {
        return Err(io::Error::other(
            "the lock is not idle after every thread's final release",
        ));
    }
    round_trips.sort_unstable();
    Ok(Outcome {
        elapsed,
        round_trips,
        cpu_units,
        counters: gil.counters(),
        trace,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_use_the_nearest_rank() {
        let o = Outcome {
            elapsed: Duration::from_secs(2),
            round_trips: (1..=100).map(Duration::from_micros).collect(),
            cpu_units: 10,
            counters: Counters::default(),
            trace: None,
        };
        assert_eq!(o.round_trip_quantile(0.5), Some(Duration::from_micros(50)));
        assert_eq!(o.round_trip_quantile(0.99), Some(Duration::from_micros(99)));
        assert_eq!(o.round_trip_quantile(0.0), Some(Duration::from_micros(1)));
        assert_eq!(o.round_trips_per_s(), 50.0);
        assert_eq!(o.cpu_units_per_s(), 5.0);
    }

    #[test]
    fn a_short_run_counts_round_trips_and_work_and_traces_its_window() {
        let mut s = Scenario::new(
            GilConfig::new().switch_interval_us(1_000),
            1,
            Duration::from_millis(200),
        );
        s.trace = Some(Duration::from_millis(50));
        s.title = "test".into();
        let o = run(&s).unwrap();
        assert!(!o.round_trips.is_empty(), "the I/O thread made no round trip");
        assert!(o.cpu_units > 0, "the CPU thread did no work");
        assert!(o.elapsed >= s.duration);
        let trace = o.trace.expect("a trace was asked for");
        let rows = trace.rows();
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().any(|r| r.name == "I/O thread"));
        assert!(rows.iter().any(|r| r.name == "CPU thread 1"));
        assert!(trace.duration_ns() >= 50_000_000, "a window shorter than asked");
    }
}
