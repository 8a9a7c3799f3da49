//! Uncontended cost: one acquire + release of the GIL against one
//! lock + unlock of `parking_lot::Mutex` (and `std::sync::Mutex` for scale),
//! measured in the same run. `gil acquire+release` is the default
//! configuration (no event hook, no histograms); `preset/<name>` is every
//! entry of `gil_core::PRESETS` (with lazy release, a voluntary release and
//! the next acquire are the lazy mark and the reclaim).
//!
//! `cargo bench -p gil-bench --bench uncontended`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Bencher, BenchmarkId, Criterion};
use gil_core::{Gil, GilConfig, ReleaseReason, Token};

/// One thread taking and releasing `gil` with nobody else around.
fn cycle(b: &mut Bencher<'_>, gil: &Gil) {
    let me = Token::new(1).expect("non-zero");
    b.iter(|| {
        gil.acquire(black_box(me)).expect("free");
        gil.release(black_box(me), ReleaseReason::Voluntary).expect("held");
    })
}

/// After a lock's benchmark: nobody else took it, nobody waited, and it is
/// idle after a final release.
fn check(gil: &Gil) {
    let me = Token::new(1).expect("non-zero");
    assert_eq!(gil.counters().switches, 1, "nobody else may have taken the lock");
    assert_eq!(gil.counters().drop_requests, 0, "nobody waited");
    // With lazy release the lock is still reserved for `me`: take it back
    // and let go for good.
    gil.acquire(me).expect("free");
    gil.release(me, ReleaseReason::Final).expect("held");
    assert!(gil.is_idle(), "idle after the final release");
}

fn uncontended(c: &mut Criterion) {
    let mut group = c.benchmark_group("uncontended");

    let gil = Gil::new(GilConfig::new()).expect("default config");
    group.bench_function("gil acquire+release", |b| cycle(b, &gil));
    check(&gil);

    for &name in gil_core::PRESETS {
        let config = GilConfig::preset(name).unwrap_or_else(|e| panic!("PRESETS lists {name:?}: {e}"));
        let gil = Gil::new(config).expect("preset configurations are valid");
        group.bench_function(BenchmarkId::new("preset", name), |b| cycle(b, &gil));
        check(&gil);
    }

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
