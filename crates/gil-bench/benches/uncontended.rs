//! Uncontended cost: one acquire + release of the GIL against one
//! lock + unlock of `parking_lot::Mutex` (and `std::sync::Mutex` for scale),
//! measured in the same run.
//!
//! `cargo bench -p gil-bench --bench uncontended`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use gil_core::{Gil, GilConfig, ReleaseReason, Token};

fn uncontended(c: &mut Criterion) {
    let mut group = c.benchmark_group("uncontended");

    let gil = Gil::new(GilConfig::new()).expect("default config");
    let me = Token::new(1).expect("non-zero");
    group.bench_function("gil acquire+release", |b| {
        b.iter(|| {
            gil.acquire(black_box(me)).expect("free");
            gil.release(black_box(me), ReleaseReason::Voluntary).expect("held");
        })
    });
    assert_eq!(gil.counters().switches, 1, "nobody else may have taken the lock");

    let pl = parking_lot::Mutex::new(0u64);
    group.bench_function("parking_lot::Mutex lock+unlock", |b| {
        b.iter(|| {
            *black_box(&pl).lock() += 1;
        })
    });

    let std_mutex = std::sync::Mutex::new(0u64);
    group.bench_function("std::sync::Mutex lock+unlock", |b| {
        b.iter(|| {
            *black_box(&std_mutex).lock().expect("not poisoned") += 1;
        })
    });
    group.finish();
}

criterion_group!(benches, uncontended);
criterion_main!(benches);
