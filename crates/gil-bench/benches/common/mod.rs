//! What the multi-threaded benches share: persistent worker threads driven by
//! a start barrier and a stop rendezvous (so only the contended region is
//! timed), the `parking_lot` baseline's CPU thread, the checks after each
//! run and the criterion settings; plus, from `gil_bench::workload` (shared
//! with the simulator), the exclusion counter, the CPU work unit and thread
//! body and the echo peer.
//!
//! Each bench includes this file with `mod common;` and uses a part of it.

#![allow(dead_code, reason = "each bench uses its own subset of these helpers")]

use std::hint::spin_loop;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Barrier};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

#[allow(unused_imports, reason = "each bench uses its own subset")]
pub use gil_bench::workload::{gil_cpu_thread, stamp, work_unit, EchoPeer, ExclusiveCounter};
use gil_core::{Counters, Gil, GilConfig, Token};

/// Every named configuration of the lock, read from `gil_core::PRESETS` so
/// that presets added to gil-core show up in every bench.
pub fn presets() -> impl Iterator<Item = (&'static str, GilConfig)> {
    gil_core::PRESETS.iter().map(|&name| {
        let config = GilConfig::preset(name).unwrap_or_else(|e| panic!("PRESETS lists {name:?}: {e}"));
        (name, config)
    })
}

/// Builds a lock, shared with the worker threads.
pub fn new_gil(config: GilConfig) -> Arc<Gil> {
    Arc::new(Gil::new(config).expect("preset configurations are valid"))
}

/// The token of bench thread number `n` (counting from 1).
pub fn token(n: usize) -> Token {
    Token::new(n).expect("bench tokens count from 1")
}

// ---- workers ----------------------------------------------------------------

/// What a worker thread runs on every measured run: called with criterion's
/// iteration count, returns a number the bench checks afterwards (work done,
/// round trips verified, ...).
pub type Body = Box<dyn FnMut(u64) -> u64 + Send>;

/// One worker thread's part in a run.
pub struct Job {
    /// Whether this worker's run counts towards the measured time.
    timed: bool,
    body: Body,
}

impl Job {
    /// A worker whose run is timed (the run's time spans every timed
    /// worker, from the first start to the last end).
    pub fn timed(body: impl FnMut(u64) -> u64 + Send + 'static) -> Job {
        Job {
            timed: true,
            body: Box::new(body),
        }
    }

    /// A worker that runs beside the timed ones without being timed (CPU
    /// threads next to the I/O thread, stopped by a flag).
    pub fn untimed(body: impl FnMut(u64) -> u64 + Send + 'static) -> Job {
        Job {
            timed: false,
            body: Box::new(body),
        }
    }
}

/// A worker's account of one run.
struct Report {
    worker: usize,
    value: u64,
    start: Instant,
    end: Instant,
}

/// The outcome of one [`Pool::run`].
pub struct Run {
    /// From the first timed worker's start to the last timed worker's end.
    pub elapsed: Duration,
    /// What each worker's body returned, in the order of the jobs.
    pub values: Vec<u64>,
}

/// Worker threads spawned once per benchmark and reused for every run of it.
///
/// A run: the bench sets up shared state, [`Pool::run`] stores the
/// iteration count and meets the workers at the start barrier; each worker
/// notes the time, runs its body, notes the time again and reports. Only
/// that span is measured: spawning, the barrier's wake-ups and the
/// correctness checks are not. The stop side is a channel rather than a
/// barrier so that a worker that panicked (a failed `expect` on the lock)
/// ends the bench with a message instead of a hang.
pub struct Pool {
    start: Arc<Barrier>,
    iters: Arc<AtomicU64>,
    quit: Arc<AtomicBool>,
    reports: Receiver<Report>,
    timed: Vec<bool>,
    handles: Vec<JoinHandle<()>>,
    broken: bool,
}

impl Pool {
    /// Spawns one thread per job; they wait for the first [`run`](Self::run).
    pub fn new(jobs: Vec<Job>) -> Pool {
        assert!(jobs.iter().any(|j| j.timed), "a pool needs a timed job");
        let start = Arc::new(Barrier::new(jobs.len() + 1));
        let iters = Arc::new(AtomicU64::new(0));
        let quit = Arc::new(AtomicBool::new(false));
        let (tx, reports) = mpsc::channel();
        let timed = jobs.iter().map(|j| j.timed).collect();
        let handles = jobs
            .into_iter()
            .enumerate()
            .map(|(worker, job)| {
                let (start, iters, quit, tx) = (start.clone(), iters.clone(), quit.clone(), tx.clone());
                thread::Builder::new()
                    .name(format!("bench-worker-{worker}"))
                    .spawn(move || worker_loop(worker, job.body, &start, &iters, &quit, &tx))
                    .expect("spawn a bench worker")
            })
            .collect();
        Pool {
            start,
            iters,
            quit,
            reports,
            timed,
            handles,
            broken: false,
        }
    }

    /// One measured run of `iters` iterations; returns once every worker has
    /// reported.
    ///
    /// # Panics
    /// If a worker thread died (its panic message is printed above).
    pub fn run(&mut self, iters: u64) -> Run {
        self.iters.store(iters, Relaxed);
        // The barrier orders everything written before it (shared state the
        // bench reset, the count above) before the workers' runs.
        self.start.wait();
        let mut reports: Vec<Option<Report>> = self.handles.iter().map(|_| None).collect();
        let mut left = reports.len();
        while left > 0 {
            match self.reports.recv_timeout(Duration::from_millis(200)) {
                Ok(r) => {
                    let slot = r.worker;
                    reports[slot] = Some(r);
                    left -= 1;
                }
                Err(RecvTimeoutError::Timeout) if !self.handles.iter().any(JoinHandle::is_finished) => {}
                Err(_) => {
                    self.broken = true;
                    panic!("a bench worker thread died; its panic message is above");
                }
            }
        }
        let reports: Vec<Report> = reports.into_iter().map(|r| r.expect("all reported")).collect();
        let timed = || reports.iter().zip(&self.timed).filter(|(_, t)| **t).map(|(r, _)| r);
        let first = timed().map(|r| r.start).min().expect("a timed job");
        let last = timed().map(|r| r.end).max().expect("a timed job");
        Run {
            elapsed: last - first,
            values: reports.iter().map(|r| r.value).collect(),
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if self.broken || thread::panicking() {
            // Some worker may be stuck behind a dead one: leave them be, the
            // process is about to end.
            return;
        }
        self.quit.store(true, Relaxed);
        self.start.wait();
        for h in self.handles.drain(..) {
            h.join().expect("bench worker exits cleanly");
        }
    }
}

fn worker_loop(
    worker: usize,
    mut body: Body,
    start: &Barrier,
    iters: &AtomicU64,
    quit: &AtomicBool,
    tx: &Sender<Report>,
) {
    loop {
        start.wait();
        if quit.load(Relaxed) {
            return;
        }
        let n = iters.load(Relaxed);
        let t0 = Instant::now();
        let value = body(n);
        let t1 = Instant::now();
        let report = Report {
            worker,
            value,
            start: t0,
            end: t1,
        };
        if tx.send(report).is_err() {
            return;
        }
    }
}

/// Waits outside any lock until `ready()`: spins briefly, then yields (the
/// bench machine has 2 cores; a pure spin would steal the other side's).
pub fn wait_until(mut ready: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !ready() {
        if spins < 100 {
            spins += 1;
            spin_loop();
        } else {
            thread::yield_now();
        }
    }
}

/// The same CPU-bound thread on a `parking_lot::Mutex`, taken once per work
/// unit: what a plain mutex does with the same critical sections (its own
/// "eventual fairness" hands it over every 0.5 ms or so).
pub fn mutex_cpu_thread(
    mutex: &parking_lot::Mutex<()>,
    seed: u64,
    shared: &ExclusiveCounter,
    mut more: impl FnMut(u64) -> bool,
) -> u64 {
    let mut done = 0;
    let mut seed = seed;
    while more(done) {
        let _guard = mutex.lock();
        seed = work_unit(seed);
        shared.bump();
        done += 1;
    }
    done
}

/// Checks what a run did to the lock: idle afterwards (every thread made its
/// final release), and counters that agree with each other and with the
/// acquisitions the bench knows of (`at_least` since `before`).
pub fn check_counters(gil: &Gil, before: &Counters, at_least: u64) -> Counters {
    assert!(gil.is_idle(), "the lock must be idle after the threads' final release");
    let now = gil.counters();
    let acquisitions = now.acquisitions - before.acquisitions;
    let switches = now.switches - before.switches;
    assert!(
        acquisitions >= at_least,
        "{acquisitions} acquisitions, at least {at_least} expected"
    );
    assert!(
        switches <= acquisitions,
        "{switches} switches > {acquisitions} acquisitions"
    );
    assert!(
        now.forced_switches - before.forced_switches <= now.drop_requests - before.drop_requests,
        "every forced switch answers a drop request: {now:?} since {before:?}"
    );
    assert!(
        now.lazy_takeovers - before.lazy_takeovers <= acquisitions,
        "every lazy takeover is an acquisition: {now:?} since {before:?}"
    );
    now
}

// ---- criterion ------------------------------------------------------------------

/// Criterion with short phases: the whole `cargo bench -p gil-bench` has to
/// fit in a few minutes on 2 cores. Benches shorten it further where an
/// iteration can take milliseconds.
pub fn criterion() -> criterion::Criterion {
    criterion::Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
        .configure_from_args()
}
