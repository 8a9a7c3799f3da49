//! Hand-off latency: two threads pass the lock back and forth, strictly in
//! turn. Each side waits outside the lock until an atomic turn variable
//! names it, takes the lock, checks the turn under it, does its step, gives
//! the turn to the other side and releases (`ReleaseReason::Voluntary`).
//! The turn passes before the release, so the other side may already be in
//! `acquire` when the lock is let go: a hand-off to a contending acquirer. One
//! iteration is one hand-off. Baseline: the same ping-pong on
//! `parking_lot::Mutex`. `PRESET+accounting` is `PRESET` with per-thread
//! accounting on (`Gil::set_thread_stats`).
//!
//! `cargo bench -p gil-bench --bench handoff`

mod common;

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::Arc;

use common::{check_counters, new_gil, presets, token, wait_until, ExclusiveCounter, Job, Pool};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};
use crossbeam_utils::CachePadded;
use gil_core::{Gil, ReleaseReason};

/// What the two sides share: whose turn it is, the exclusion proof, and how
/// often a side found the turn wrong under the lock (must stay 0).
#[derive(Default)]
struct Table {
    turn: CachePadded<AtomicUsize>,
    steps: ExclusiveCounter,
    wrong_turn: CachePadded<AtomicUsize>,
}

/// Steps side `side` (0 or 1) makes in a run of `iters` hand-offs; side 0
/// goes first.
fn steps_of(side: usize, iters: u64) -> u64 {
    (iters + 1 - side as u64) / 2
}

/// One side of the ping-pong on the GIL. Its last step ends with a final
/// release so the lock is idle after the run (also with lazy release).
fn gil_side(gil: &Gil, table: &Table, side: usize, iters: u64) -> u64 {
    let me = token(side + 1);
    let steps = steps_of(side, iters);
    for i in 0..steps {
        wait_until(|| table.turn.load(Acquire) == side);
        gil.acquire(me).expect("acquire");
        if table.turn.load(Relaxed) != side {
            table.wrong_turn.fetch_add(1, Relaxed);
        }
        table.steps.bump();
        table.turn.store(1 - side, Release);
        let reason = if i + 1 == steps {
            ReleaseReason::Final
        } else {
            ReleaseReason::Voluntary
        };
        gil.release(me, reason).expect("release");
    }
    steps
}

/// The same side on `parking_lot::Mutex`.
fn mutex_side(mutex: &parking_lot::Mutex<()>, table: &Table, side: usize, iters: u64) -> u64 {
    let steps = steps_of(side, iters);
    for _ in 0..steps {
        wait_until(|| table.turn.load(Acquire) == side);
        let guard = mutex.lock();
        if table.turn.load(Relaxed) != side {
            table.wrong_turn.fetch_add(1, Relaxed);
        }
        table.steps.bump();
        table.turn.store(1 - side, Release);
        drop(guard);
    }
    steps
}

/// The checks after every run, for both locks.
fn check_run(table: &Table, values: &[u64], iters: u64) {
    assert_eq!(values, [steps_of(0, iters), steps_of(1, iters)], "each side's steps");
    assert_eq!(table.steps.take(), iters, "a lost step: mutual exclusion broken");
    assert_eq!(table.wrong_turn.swap(0, Relaxed), 0, "a side held the lock out of turn");
}

/// The ping-pong on `gil` as bench `id`; with `accounting`, also checks each
/// side's per-thread record after the run.
fn bench_gil(group: &mut BenchmarkGroup<'_, WallTime>, id: &str, gil: Arc<Gil>, accounting: bool) {
    let table = Arc::new(Table::default());
    let jobs = (0..2)
        .map(|side| {
            let (gil, table) = (gil.clone(), table.clone());
            Job::timed(move |iters| gil_side(&gil, &table, side, iters))
        })
        .collect();
    let mut pool = Pool::new(jobs);
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            table.turn.store(0, Relaxed);
            let before = gil.counters();
            let run = pool.run(iters);
            check_run(&table, &run.values, iters);
            let after = check_counters(&gil, &before, iters);
            // Each step is one acquisition by the other side than the
            // last holder: exactly one switch per hand-off.
            assert_eq!(
                after.acquisitions - before.acquisitions,
                iters,
                "one acquisition per step"
            );
            assert_eq!(after.switches - before.switches, iters, "one switch per hand-off");
            if accounting {
                check_accounts(&gil, iters);
            }
            run.elapsed
        })
    });
}

/// With accounting on: each side's record of the run (begun at its first
/// event, ended by its final release) counts its steps.
fn check_accounts(gil: &Gil, iters: u64) {
    for side in 0..2 {
        let steps = steps_of(side, iters);
        if steps == 0 {
            continue; // no event, no record of this run
        }
        let stats = gil.thread_stats(token(side + 1)).expect("a record of each side");
        assert!(!stats.alive, "the final release ends the record");
        assert_eq!(stats.acquisitions, steps, "the record counts the side's steps");
    }
}

fn handoff(c: &mut Criterion) {
    let mut group = c.benchmark_group("handoff");

    for (name, config) in presets() {
        bench_gil(&mut group, name, new_gil(config), false);
    }
    // The same with per-thread accounting on: its cost on a hand-off.
    for (name, config) in presets() {
        let gil = new_gil(config);
        gil.set_thread_stats(true);
        bench_gil(&mut group, &format!("{name}+accounting"), gil, true);
    }

    let mutex = Arc::new(parking_lot::Mutex::new(()));
    let table = Arc::new(Table::default());
    let jobs = (0..2)
        .map(|side| {
            let (mutex, table) = (mutex.clone(), table.clone());
            Job::timed(move |iters| mutex_side(&mutex, &table, side, iters))
        })
        .collect();
    let mut pool = Pool::new(jobs);
    group.bench_function("parking_lot", |b| {
        b.iter_custom(|iters| {
            table.turn.store(0, Relaxed);
            let run = pool.run(iters);
            check_run(&table, &run.values, iters);
            assert!(!mutex.is_locked(), "the mutex is free after the run");
            run.elapsed
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = handoff
}
criterion_main!(benches);
