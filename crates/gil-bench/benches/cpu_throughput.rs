//! CPU-bound throughput: N threads (1, 2, 4) each hold the lock and do a
//! fixed number of work units (about 1 µs each), polling
//! `drop_requested()` between units and answering with
//! `handle_drop_request`. The switch interval is 1 ms so that forced
//! switches happen within every measurement. One iteration is one unit on
//! every thread (`Throughput::Elements(N)`): criterion's throughput is work
//! units per second, all threads together.
//!
//! References: the same threads on `parking_lot::Mutex`, taken once per unit
//! (a plain mutex around the same critical sections), and with no lock at
//! all (what the machine's cores give in parallel).
//!
//! `cargo bench -p gil-bench --bench cpu_throughput`

mod common;

use std::sync::Arc;

use common::{
    check_counters, gil_cpu_thread, mutex_cpu_thread, new_gil, presets, token, work_unit, ExclusiveCounter, Job, Pool,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput};

/// The switch interval of this bench, in µs.
const SWITCH_INTERVAL_US: u64 = 1_000;

/// Thread counts measured.
const THREADS: [usize; 3] = [1, 2, 4];

/// The checks after every run: every thread did all its units, and the
/// units counted under the lock add up to all of them.
fn check_run(values: &[u64], shared: &ExclusiveCounter, iters: u64) {
    assert!(
        values.iter().all(|&v| v == iters),
        "per-thread units {values:?}, {iters} each"
    );
    let total: u64 = values.iter().sum();
    assert_eq!(shared.take(), total, "units lost: mutual exclusion broken");
}

fn cpu_throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("cpu_throughput");
    group.sampling_mode(SamplingMode::Flat);

    for n in THREADS {
        group.throughput(Throughput::Elements(n as u64));

        for (name, config) in presets() {
            let gil = new_gil(config.switch_interval_us(SWITCH_INTERVAL_US));
            let shared = Arc::new(ExclusiveCounter::default());
            let jobs = (1..=n)
                .map(|t| {
                    let (gil, shared) = (gil.clone(), shared.clone());
                    Job::timed(move |iters| gil_cpu_thread(&gil, token(t), &shared, |done| done < iters))
                })
                .collect();
            let mut pool = Pool::new(jobs);
            group.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter_custom(|iters| {
                    let before = gil.counters();
                    let run = pool.run(iters);
                    check_run(&run.values, &shared, iters);
                    // Each thread acquires at least once per run.
                    let after = check_counters(&gil, &before, n as u64);
                    if n == 1 {
                        assert_eq!(after.drop_requests, before.drop_requests, "nobody to ask for a drop");
                    }
                    run.elapsed
                })
            });
        }

        let mutex = Arc::new(parking_lot::Mutex::new(()));
        let shared = Arc::new(ExclusiveCounter::default());
        let jobs = (1..=n)
            .map(|t| {
                let (mutex, shared) = (mutex.clone(), shared.clone());
                Job::timed(move |iters| mutex_cpu_thread(&mutex, t as u64, &shared, |done| done < iters))
            })
            .collect();
        let mut pool = Pool::new(jobs);
        group.bench_function(BenchmarkId::new("parking_lot", n), |b| {
            b.iter_custom(|iters| {
                let run = pool.run(iters);
                check_run(&run.values, &shared, iters);
                assert!(!mutex.is_locked(), "the mutex is free after the run");
                run.elapsed
            })
        });

        let jobs = (1..=n)
            .map(|t| {
                Job::timed(move |iters| {
                    let mut seed = t as u64;
                    for _ in 0..iters {
                        seed = work_unit(seed);
                    }
                    iters
                })
            })
            .collect();
        let mut pool = Pool::new(jobs);
        group.bench_function(BenchmarkId::new("no lock", n), |b| {
            b.iter_custom(|iters| {
                let run = pool.run(iters);
                assert!(
                    run.values.iter().all(|&v| v == iters),
                    "per-thread units {:?}",
                    run.values
                );
                run.elapsed
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = cpu_throughput
}
criterion_main!(benches);
