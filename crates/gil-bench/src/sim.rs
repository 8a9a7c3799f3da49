//! The simulator: I/O threads and CPU-bound threads sharing one lock, as
//! in a Python server with a computation running beside it, without
//! building CPython.
//!
//! Each I/O thread plays a request/response client over its own socket
//! pair: it releases the lock around each `write` and each `read` (as
//! CPython does around every blocking call), then handles the reply with a
//! few work units under the lock (none by default), and measures each round
//! trip, from before its write until it has handled the reply. Each I/O
//! thread has its own peer, a thread that uses no lock and echoes each
//! message at once (or after a delay). The CPU-bound threads hold the lock
//! and do work units of about a microsecond, polling the drop request
//! between units as an interpreter does between instructions (or, as the
//! control, do the same units without the lock:
//! [`Scenario::cpu_take_lock`]); an I/O thread handling a reply polls it
//! the same way, so it can be asked to drop mid-reply as a Python request
//! handler can. A counter bumped under the lock by every thread that takes
//! it proves mutual exclusion after each run.
//!
//! Under CPython's classic protocol every round trip costs the I/O thread a
//! whole switch interval once a CPU thread is waiting (the convoy effect);
//! the policies of gil-core remove that wait. With many I/O threads (one
//! per connection, as in a thread-per-connection server) the question is
//! also how evenly the lock serves them: see [`Outcome::io_fairness`].

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Barrier};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use gil_core::trace::{Trace, Tracer};
use gil_core::{Counters, Gil, GilConfig, ReleaseReason, Token};

use crate::os::Stream;
use crate::workload::{free_cpu_thread, gil_cpu_thread, stamp, work_unit, EchoPeer, ExclusiveCounter};

/// The most I/O threads a scenario may have: their tokens (1 to this) stay
/// below the CPU threads' ([`cpu_token`]).
pub const MAX_IO_THREADS: usize = 4096;

/// The CPU threads' tokens start here, far above any I/O thread's.
const CPU_TOKEN_BASE: usize = 1_000_000;

/// The token of I/O thread `i` (counting from 0): `i + 1`, so that the
/// first one is token 1 as it always was.
pub fn io_token(i: usize) -> Token {
    assert!(i < MAX_IO_THREADS, "I/O thread {i}: at most {MAX_IO_THREADS}");
    Token::new(i + 1).expect("non-zero")
}

/// The token of CPU thread `i` (counting from 0).
pub fn cpu_token(i: usize) -> Token {
    Token::new(CPU_TOKEN_BASE + i).expect("non-zero")
}

/// One run of the simulator.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The lock's configuration (a preset, usually).
    pub config: GilConfig,
    /// CPU-bound threads beside the I/O threads.
    pub cpu_threads: usize,
    /// Whether the CPU threads take the lock (true) or, as the control, do
    /// the same work without it, as separate processes would: then they
    /// share only the CPUs with the I/O threads.
    pub cpu_take_lock: bool,
    /// I/O threads, each with its own peer and socket pair (1 to
    /// [`MAX_IO_THREADS`]).
    pub io_threads: usize,
    /// Work units (about 1 µs each) an I/O thread does under the lock to
    /// handle each reply, polling the drop request between them.
    pub io_work: u32,
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
    /// `cpu_threads` CPU threads beside one I/O thread on a lock built from
    /// `config`, for `duration`; 64-byte messages, answered at once and
    /// handled with no work, no trace.
    pub fn new(config: GilConfig, cpu_threads: usize, duration: Duration) -> Scenario {
        Scenario {
            config,
            cpu_threads,
            cpu_take_lock: true,
            io_threads: 1,
            io_work: 0,
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
    /// Round-trip times of all I/O threads together, sorted.
    pub round_trips: Vec<Duration>,
    /// Round trips per I/O thread, in thread order; they add up to
    /// `round_trips.len()`.
    pub io_round_trips: Vec<u64>,
    /// Work units the I/O threads did handling replies, together.
    pub io_units: u64,
    /// Work units the CPU threads did, together.
    pub cpu_units: u64,
    /// Work units each CPU thread did, in thread order; they add up to
    /// `cpu_units`.
    pub cpu_thread_units: Vec<u64>,
    /// The lock's counters at the end.
    pub counters: Counters,
    /// The trace, if the scenario asked for one.
    pub trace: Option<Trace>,
}

/// How evenly the lock served the I/O threads: the spread of their round
/// trip counts over one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fairness {
    /// The fewest round trips any I/O thread made.
    pub min: u64,
    /// The most round trips any I/O thread made.
    pub max: u64,
    /// Coefficient of variation of the counts (standard deviation over
    /// mean): 0 when every thread made as many; 0 if nobody made any.
    pub cv: f64,
}

impl Outcome {
    /// Round trips per second, all I/O threads together.
    pub fn round_trips_per_s(&self) -> f64 {
        self.round_trips.len() as f64 / self.elapsed.as_secs_f64()
    }

    /// The `q`-quantile of the round-trip time (nearest rank), all I/O
    /// threads together; `None` if there were none.
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

    /// How evenly the CPU threads shared the work: the smallest and the
    /// largest share of one thread in the CPU work, as fractions of the
    /// whole; `None` with fewer than two CPU threads, or no work done.
    pub fn cpu_shares(&self) -> Option<(f64, f64)> {
        let units = &self.cpu_thread_units;
        if units.len() < 2 || self.cpu_units == 0 {
            return None;
        }
        let total = self.cpu_units as f64;
        let (&min, &max) = (units.iter().min()?, units.iter().max()?);
        Some((min as f64 / total, max as f64 / total))
    }

    /// The spread of the round trips across the I/O threads; `None` without
    /// I/O threads.
    pub fn io_fairness(&self) -> Option<Fairness> {
        let counts = &self.io_round_trips;
        let (&min, &max) = (counts.iter().min()?, counts.iter().max()?);
        let n = counts.len() as f64;
        let mean = counts.iter().sum::<u64>() as f64 / n;
        let cv = if mean > 0.0 {
            let var = counts.iter().map(|&c| (c as f64 - mean).powi(2)).sum::<f64>() / n;
            var.sqrt() / mean
        } else {
            0.0
        };
        Some(Fairness { min, max, cv })
    }
}

fn lock_err(e: gil_core::GilError) -> io::Error {
    io::Error::other(format!("lock: {e}"))
}

/// What one I/O thread brings back: its round-trip times and the work
/// units it did handling replies.
struct IoThreadResult {
    times: Vec<Duration>,
    units: u64,
}

/// The body of one I/O thread: round trips until `stop`, each one a write
/// and a read with the lock released around each, then `io_work` units of
/// handling under the lock. Every round trip bumps `shared` once, and every
/// unit once more.
fn io_thread(
    gil: &Gil,
    me: Token,
    shared: &ExclusiveCounter,
    stop: &AtomicBool,
    mut stream: Stream,
    message_len: usize,
    io_work: u32,
) -> io::Result<IoThreadResult> {
    let (mut msg, mut reply) = (vec![0u8; message_len], vec![0u8; message_len]);
    let mut times = Vec::new();
    let mut units = 0u64;
    let mut seed = me.get() as u64;
    gil.acquire(me).map_err(lock_err)?;
    let mut seq = 0u64;
    let result = (|| {
        while !stop.load(Relaxed) {
            seq += 1;
            stamp(&mut msg, seq);
            let t0 = Instant::now();
            gil.release(me, ReleaseReason::Voluntary).map_err(lock_err)?;
            let sent = stream.write_all(&msg);
            gil.acquire(me).map_err(lock_err)?;
            sent?;
            shared.bump();
            gil.release(me, ReleaseReason::Voluntary).map_err(lock_err)?;
            let got = stream.read_exact(&mut reply);
            gil.acquire(me).map_err(lock_err)?;
            got?;
            if reply != msg {
                return Err(io::Error::other(format!("round trip {seq}: the echo differs")));
            }
            // Handling the reply: bytecode, so it answers drop requests
            // between units just as the CPU threads do.
            for _ in 0..io_work {
                seed = work_unit(seed);
                shared.bump();
                units += 1;
                if gil.drop_requested() {
                    gil.handle_drop_request(me).map_err(lock_err)?;
                }
            }
            times.push(t0.elapsed());
        }
        Ok(())
    })();
    gil.release(me, ReleaseReason::Final).map_err(lock_err)?;
    drop(stream); // the peer sees the end
    result.map(|()| IoThreadResult { times, units })
}

/// Runs one scenario. An error means the run is void (a socket failed, the
/// lock refused an operation, or a thread panicked); a run whose counts
/// show lost updates under the lock, or a peer that echoed a different
/// number of messages than its I/O thread counted, is an error too.
pub fn run(scenario: &Scenario) -> io::Result<Outcome> {
    if !(1..=MAX_IO_THREADS).contains(&scenario.io_threads) {
        return Err(io::Error::other(format!(
            "{} I/O threads: must be 1 to {MAX_IO_THREADS}",
            scenario.io_threads
        )));
    }
    let gil = Arc::new(Gil::new(scenario.config.clone()).map_err(lock_err)?);
    let shared = Arc::new(ExclusiveCounter::default());
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(scenario.cpu_threads + scenario.io_threads + 1));

    let mut io_threads: Vec<(JoinHandle<io::Result<IoThreadResult>>, EchoPeer)> = Vec::new();
    for i in 0..scenario.io_threads {
        let (stream, peer) = EchoPeer::spawn(scenario.message_len, scenario.peer_delay)?;
        let (gil, shared, stop, start) = (gil.clone(), shared.clone(), stop.clone(), start.clone());
        let (len, work) = (scenario.message_len, scenario.io_work);
        let handle = thread::Builder::new()
            .name(format!("sim-io-{}", i + 1))
            .spawn(move || {
                start.wait();
                io_thread(&gil, io_token(i), &shared, &stop, stream, len, work)
            })?;
        io_threads.push((handle, peer));
    }
    let take_lock = scenario.cpu_take_lock;
    let cpu: Vec<JoinHandle<u64>> = (0..scenario.cpu_threads)
        .map(|i| {
            let (gil, shared, stop, start) = (gil.clone(), shared.clone(), stop.clone(), start.clone());
            thread::Builder::new()
                .name(format!("sim-cpu-{}", i + 1))
                .spawn(move || {
                    start.wait();
                    if take_lock {
                        gil_cpu_thread(&gil, cpu_token(i), &shared, |_| !stop.load(Relaxed))
                    } else {
                        free_cpu_thread(cpu_token(i), |_| !stop.load(Relaxed))
                    }
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
            for i in 0..scenario.io_threads {
                // One I/O thread keeps its old row name (scripts look for it).
                let name = if scenario.io_threads == 1 {
                    "I/O thread".to_string()
                } else {
                    format!("I/O thread {}", i + 1)
                };
                tracer.name_thread(io_token(i), name);
            }
            for i in 0..scenario.cpu_threads {
                tracer.name_thread(cpu_token(i), format!("CPU thread {}", i + 1));
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
    // Join everything before judging, so that no thread outlives a failed run.
    let mut io_results = Vec::with_capacity(io_threads.len());
    for (i, (handle, peer)) in io_threads.into_iter().enumerate() {
        let result = handle.join().map_err(|_| joined("I/O thread"));
        io_results.push((i, result, peer.join()));
    }
    let mut cpu_thread_units = Vec::with_capacity(cpu.len());
    for t in cpu {
        cpu_thread_units.push(t.join().map_err(|_| joined("CPU thread"))?);
    }
    let cpu_units = cpu_thread_units.iter().sum();
    let mut round_trips = Vec::new();
    let mut io_round_trips = Vec::with_capacity(io_results.len());
    let mut io_units = 0;
    for (i, result, echoed) in io_results {
        let IoThreadResult { times, units } = result??;
        let echoed = echoed?;
        if echoed != times.len() as u64 {
            return Err(io::Error::other(format!(
                "I/O thread {}: its peer echoed {echoed} messages for {} round trips",
                i + 1,
                times.len()
            )));
        }
        io_round_trips.push(times.len() as u64);
        io_units += units;
        round_trips.extend(times);
    }
    // Bumped once per round trip and once per unit done under the lock.
    let bumps = shared.take();
    let expected = round_trips.len() as u64 + io_units + if take_lock { cpu_units } else { 0 };
    if bumps != expected {
        return Err(io::Error::other(format!(
            "mutual exclusion broken: {bumps} bumps under the lock, {expected} expected"
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
        io_round_trips,
        io_units,
        cpu_units,
        cpu_thread_units,
        counters: gil.counters(),
        trace,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(round_trips: Vec<Duration>, io_round_trips: Vec<u64>) -> Outcome {
        Outcome {
            elapsed: Duration::from_secs(2),
            round_trips,
            io_round_trips,
            io_units: 0,
            cpu_units: 10,
            cpu_thread_units: vec![10],
            counters: Counters::default(),
            trace: None,
        }
    }

    #[test]
    fn quantiles_use_the_nearest_rank() {
        let o = outcome((1..=100).map(Duration::from_micros).collect(), vec![100]);
        assert_eq!(o.round_trip_quantile(0.5), Some(Duration::from_micros(50)));
        assert_eq!(o.round_trip_quantile(0.99), Some(Duration::from_micros(99)));
        assert_eq!(o.round_trip_quantile(0.0), Some(Duration::from_micros(1)));
        assert_eq!(o.round_trips_per_s(), 50.0);
        assert_eq!(o.cpu_units_per_s(), 5.0);
        let o = outcome((1..=2000).map(Duration::from_micros).collect(), vec![2000]);
        assert_eq!(o.round_trip_quantile(0.999), Some(Duration::from_micros(1998)));
    }

    #[test]
    fn fairness_is_the_spread_of_the_per_thread_counts() {
        let even = outcome(Vec::new(), vec![5, 5, 5, 5]).io_fairness().unwrap();
        assert_eq!((even.min, even.max, even.cv), (5, 5, 0.0));
        // Counts 0 and 10: mean 5, standard deviation 5.
        let skewed = outcome(Vec::new(), vec![0, 10]).io_fairness().unwrap();
        assert_eq!((skewed.min, skewed.max), (0, 10));
        assert!((skewed.cv - 1.0).abs() < 1e-12, "cv {}", skewed.cv);
        let idle = outcome(Vec::new(), vec![0, 0]).io_fairness().unwrap();
        assert_eq!(idle.cv, 0.0);
        assert_eq!(outcome(Vec::new(), Vec::new()).io_fairness(), None);
    }

    #[test]
    fn cpu_shares_are_the_least_and_greatest_fraction_of_the_work() {
        let mut o = outcome(Vec::new(), vec![1]);
        assert_eq!(o.cpu_shares(), None, "one CPU thread has no spread");
        (o.cpu_thread_units, o.cpu_units) = (vec![10, 30, 60], 100);
        assert_eq!(o.cpu_shares(), Some((0.1, 0.6)));
        (o.cpu_thread_units, o.cpu_units) = (vec![0, 0], 0);
        assert_eq!(o.cpu_shares(), None, "no work: no shares");
    }

    #[test]
    fn tokens_of_io_and_cpu_threads_never_collide() {
        let io: Vec<usize> = (0..MAX_IO_THREADS).map(|i| io_token(i).get()).collect();
        assert_eq!(io[0], 1, "the first I/O thread keeps token 1");
        assert!(io.windows(2).all(|w| w[0] < w[1]));
        assert!(io[MAX_IO_THREADS - 1] < cpu_token(0).get());
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
        assert_eq!(o.io_round_trips, [o.round_trips.len() as u64]);
        assert_eq!(o.io_units, 0, "no handling work was asked for");
        assert!(o.elapsed >= s.duration);
        let trace = o.trace.expect("a trace was asked for");
        let rows = trace.rows();
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().any(|r| r.name == "I/O thread"));
        assert!(rows.iter().any(|r| r.name == "CPU thread 1"));
        assert!(trace.duration_ns() >= 50_000_000, "a window shorter than asked");
    }

    #[test]
    fn many_io_threads_with_handling_work_each_make_round_trips_counted_exactly() {
        // `run` itself fails on a lost bump (exclusion) or a peer whose echo
        // count differs from its thread's round trips; this checks the
        // per-thread figures on top.
        let mut s = Scenario::new(
            GilConfig::new().switch_interval_us(1_000),
            1,
            Duration::from_millis(300),
        );
        s.io_threads = 3;
        s.io_work = 20;
        s.trace = Some(Duration::from_millis(50));
        let o = run(&s).unwrap();
        assert_eq!(o.io_round_trips.len(), 3, "one count per I/O thread");
        for (i, &n) in o.io_round_trips.iter().enumerate() {
            assert!(n > 0, "I/O thread {} made no round trip", i + 1);
        }
        assert_eq!(o.io_round_trips.iter().sum::<u64>(), o.round_trips.len() as u64);
        assert_eq!(o.io_units, o.round_trips.len() as u64 * 20, "20 units per round trip");
        assert!(o.cpu_units > 0, "the CPU thread did no work");
        assert!(o.round_trips.windows(2).all(|w| w[0] <= w[1]), "sorted");
        let fair = o.io_fairness().unwrap();
        assert!(fair.min > 0 && fair.min <= fair.max);
        let trace = o.trace.expect("a trace was asked for");
        let names: Vec<&str> = trace.names.values().flatten().map(|(_, n)| n.as_str()).collect();
        for name in ["I/O thread 1", "I/O thread 2", "I/O thread 3", "CPU thread 1"] {
            assert!(names.contains(&name), "the trace does not name {name:?}: {names:?}");
        }
    }

    #[test]
    fn in_the_control_the_cpu_threads_work_without_the_lock() {
        // Timing-free: what is checked is who took the lock, not how fast.
        let mut s = Scenario::new(GilConfig::new(), 2, Duration::from_millis(200));
        s.cpu_take_lock = false;
        let o = run(&s).unwrap();
        assert!(o.cpu_units > 0, "the CPU threads did no work");
        assert!(!o.round_trips.is_empty(), "the I/O thread made no round trip");
        // Only the I/O thread ever held the lock (its first acquisition is
        // the one switch), so it never had to ask for it.
        assert_eq!(o.counters.switches, 1, "another thread took the lock");
        assert_eq!(o.counters.drop_requests, 0, "someone waited for the lock");
    }

    #[test]
    fn a_scenario_without_io_threads_is_refused() {
        let mut s = Scenario::new(GilConfig::new(), 1, Duration::from_millis(10));
        s.io_threads = 0;
        assert!(run(&s).is_err());
    }
}
