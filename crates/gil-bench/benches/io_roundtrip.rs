//! The convoy effect, measured: one I/O thread makes round trips over a
//! connected stream pair (`gil_bench::os::stream_pair`: a Unix-domain
//! socket pair, loopback TCP on Windows) to an echo peer thread that does
//! not use the lock.
//! The I/O thread holds the lock between system calls and releases it
//! (`ReleaseReason::Voluntary`) around each blocking write and read, taking it
//! back after each, as CPython does around `send`/`recv`. Beside it run 0, 1
//! or 2 CPU-bound threads (work units, polling for drop requests, as in
//! `cpu_throughput`). The presets keep their own switch interval (CPython's
//! 5 ms): under the classic protocol each time the I/O thread comes back from
//! a system call it may wait for a CPU thread's whole interval.
//!
//! Three groups, ids `<lock>/<CPU threads>`:
//! * `io_roundtrip`: 64-byte messages echoed at once; one iteration is one
//!   round trip. The peer answers within microseconds, often before a CPU
//!   thread woken by the I/O thread's release has run, so the I/O thread
//!   mostly takes the lock straight back: the convoy shows up as a minority
//!   of round trips that wait a whole interval, and in the mean.
//! * `io_roundtrip_slow_peer`: the same, but the peer sleeps 200 µs before
//!   answering (a server's think time): long enough for a CPU thread to take
//!   the lock during every read, so under the classic protocol every round
//!   trip waits for a drop request. This is the convoy effect proper.
//! * `io_bandwidth`: 64 KiB messages echoed at once; `Throughput::Bytes`
//!   counts the message once per round trip (it crosses the socket twice).
//!
//! Only the I/O thread's run is timed. Baseline: the same threads on
//! `parking_lot::Mutex` (CPU threads take it once per unit; see
//! `common::mutex_cpu_thread`).
//!
//! `cargo bench -p gil-bench --bench io_roundtrip`

mod common;

use std::io::{Read, Write};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::Arc;
use std::time::Duration;

use gil_bench::os::Stream;

use common::{
    check_counters, gil_cpu_thread, mutex_cpu_thread, new_gil, presets, stamp, token, EchoPeer, ExclusiveCounter, Job,
    Pool,
};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput};
use gil_core::{Gil, ReleaseReason, Token};

/// CPU-bound threads beside the I/O thread.
const CPU_THREADS: [usize; 3] = [0, 1, 2];

/// Message length of the latency group.
const SMALL: usize = 64;

/// Message length of the bandwidth group.
const LARGE: usize = 64 * 1024;

/// The slow peer's think time.
const SLOW_PEER: Duration = Duration::from_micros(200);

/// The I/O thread's socket end and buffers, kept across runs.
struct IoEnd {
    stream: Stream,
    out: Vec<u8>,
    back: Vec<u8>,
    /// Sequence number of the next message, across runs.
    seq: u64,
}

impl IoEnd {
    fn new(stream: Stream, len: usize) -> IoEnd {
        IoEnd {
            stream,
            out: vec![0xa5; len],
            back: vec![0; len],
            seq: 0,
        }
    }

    /// Prepares the next message (under the lock, as an interpreter would).
    fn next_message(&mut self) {
        stamp(&mut self.out, self.seq);
        self.seq += 1;
    }

    /// Whether the echo matched the message (under the lock too).
    fn echo_ok(&self) -> bool {
        self.back == self.out
    }
}

/// The I/O thread on the GIL: `iters` round trips, then `stop` for the CPU
/// threads and a final release. Returns the round trips whose echo matched.
fn gil_io_thread(
    gil: &Gil,
    me: Token,
    io: &mut IoEnd,
    shared: &ExclusiveCounter,
    stop: &AtomicBool,
    iters: u64,
) -> u64 {
    let mut ok = 0;
    gil.acquire(me).expect("acquire");
    for _ in 0..iters {
        io.next_message();
        shared.bump();
        gil.release(me, ReleaseReason::Voluntary).expect("release");
        io.stream.write_all(&io.out).expect("write");
        gil.acquire(me).expect("acquire");
        gil.release(me, ReleaseReason::Voluntary).expect("release");
        io.stream.read_exact(&mut io.back).expect("read");
        gil.acquire(me).expect("acquire");
        ok += u64::from(io.echo_ok());
    }
    stop.store(true, Release);
    gil.release(me, ReleaseReason::Final).expect("release");
    ok
}

/// The same I/O thread on `parking_lot::Mutex`.
fn mutex_io_thread(
    mutex: &parking_lot::Mutex<()>,
    io: &mut IoEnd,
    shared: &ExclusiveCounter,
    stop: &AtomicBool,
    iters: u64,
) -> u64 {
    let mut ok = 0;
    let mut guard = mutex.lock();
    for _ in 0..iters {
        io.next_message();
        shared.bump();
        drop(guard);
        io.stream.write_all(&io.out).expect("write");
        guard = mutex.lock();
        drop(guard);
        io.stream.read_exact(&mut io.back).expect("read");
        guard = mutex.lock();
        ok += u64::from(io.echo_ok());
    }
    stop.store(true, Release);
    drop(guard);
    ok
}

/// The checks after every run: every echo matched, and the round trips and
/// units counted under the lock add up.
fn check_run(values: &[u64], shared: &ExclusiveCounter, iters: u64) {
    assert_eq!(values[0], iters, "round trips whose echo matched");
    let total: u64 = values.iter().sum();
    assert_eq!(shared.take(), total, "updates lost: mutual exclusion broken");
}

/// One benchmark per preset and the baseline, for `cpu` CPU threads,
/// messages of `len` bytes and a peer that answers after `delay`.
fn io_benches(group: &mut BenchmarkGroup<'_, WallTime>, cpu: usize, len: usize, delay: Duration) {
    for (name, config) in presets() {
        let gil = new_gil(config);
        let shared = Arc::new(ExclusiveCounter::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (stream, peer) = EchoPeer::spawn(len, delay).expect("start the echo peer");
        let mut io = IoEnd::new(stream, len);
        let mut jobs = vec![{
            let (gil, shared, stop) = (gil.clone(), shared.clone(), stop.clone());
            Job::timed(move |iters| gil_io_thread(&gil, token(cpu + 1), &mut io, &shared, &stop, iters))
        }];
        jobs.extend((1..=cpu).map(|t| {
            let (gil, shared, stop) = (gil.clone(), shared.clone(), stop.clone());
            Job::untimed(move |_| gil_cpu_thread(&gil, token(t), &shared, |_| !stop.load(Relaxed)))
        }));
        let mut pool = Pool::new(jobs);
        let mut round_trips = 0;
        group.bench_function(BenchmarkId::new(name, cpu), |b| {
            b.iter_custom(|iters| {
                stop.store(false, Relaxed);
                let before = gil.counters();
                let run = pool.run(iters);
                check_run(&run.values, &shared, iters);
                // Three acquisitions per round trip (one at the start), and
                // at least one per CPU thread.
                check_counters(&gil, &before, 2 * iters + 1 + cpu as u64);
                round_trips += iters;
                run.elapsed
            })
        });
        drop(pool); // closes the socket: the peer sees end of file
        assert_eq!(
            peer.join().expect("echo peer I/O"),
            round_trips,
            "the peer echoed every message once"
        );
    }

    let mutex = Arc::new(parking_lot::Mutex::new(()));
    let shared = Arc::new(ExclusiveCounter::default());
    let stop = Arc::new(AtomicBool::new(false));
    let (stream, peer) = EchoPeer::spawn(len, delay).expect("start the echo peer");
    let mut io = IoEnd::new(stream, len);
    let mut jobs = vec![{
        let (mutex, shared, stop) = (mutex.clone(), shared.clone(), stop.clone());
        Job::timed(move |iters| mutex_io_thread(&mutex, &mut io, &shared, &stop, iters))
    }];
    jobs.extend((1..=cpu).map(|t| {
        let (mutex, shared, stop) = (mutex.clone(), shared.clone(), stop.clone());
        Job::untimed(move |_| mutex_cpu_thread(&mutex, t as u64, &shared, |_| !stop.load(Relaxed)))
    }));
    let mut pool = Pool::new(jobs);
    let mut round_trips = 0;
    group.bench_function(BenchmarkId::new("parking_lot", cpu), |b| {
        b.iter_custom(|iters| {
            stop.store(false, Relaxed);
            let run = pool.run(iters);
            check_run(&run.values, &shared, iters);
            assert!(!mutex.is_locked(), "the mutex is free after the run");
            round_trips += iters;
            run.elapsed
        })
    });
    drop(pool);
    assert_eq!(
        peer.join().expect("echo peer I/O"),
        round_trips,
        "the peer echoed every message once"
    );
}

/// Short phases: with the classic preset and CPU threads a round trip takes
/// up to two switch intervals (~10 ms).
fn short(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
}

fn io_roundtrip(c: &mut Criterion) {
    let mut group = c.benchmark_group("io_roundtrip");
    short(&mut group);
    for cpu in CPU_THREADS {
        io_benches(&mut group, cpu, SMALL, Duration::ZERO);
    }
    group.finish();

    let mut group = c.benchmark_group("io_roundtrip_slow_peer");
    short(&mut group);
    for cpu in CPU_THREADS {
        io_benches(&mut group, cpu, SMALL, SLOW_PEER);
    }
    group.finish();

    let mut group = c.benchmark_group("io_bandwidth");
    short(&mut group);
    group.throughput(Throughput::Bytes(LARGE as u64));
    for cpu in CPU_THREADS {
        io_benches(&mut group, cpu, LARGE, Duration::ZERO);
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = io_roundtrip
}
criterion_main!(benches);
