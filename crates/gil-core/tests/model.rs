//! proptest: random operation sequences over several tokens, run against
//! the lock and against a sequential reference model; after every operation
//! the results, the holder, the last holder, the switch number, the counters
//! and the switch interval must agree.
//!
//! Single-threaded, so a blocking `acquire` is only issued when the model
//! says the lock is free or held by the caller (otherwise it is skipped).
#![cfg(not(gil_loom))]

use gil_core::{Gil, GilConfig, GilError, Key, ReleaseReason, MAX_SWITCH_INTERVAL_US};
use proptest::prelude::*;

mod common;
use common::tok;

#[derive(Debug, Clone)]
enum Op {
    Acquire(usize),
    TryAcquire(usize),
    Release(usize, ReleaseReason),
    HandleDropRequest(usize),
    SetInterval(u64),
    ReinitAfterFork(usize),
    Settle,
}

fn reason() -> impl Strategy<Value = ReleaseReason> {
    prop_oneof![
        Just(ReleaseReason::Voluntary),
        Just(ReleaseReason::Forced),
        Just(ReleaseReason::Final)
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let token = 1usize..=4;
    prop_oneof![
        4 => token.clone().prop_map(Op::Acquire),
        3 => token.clone().prop_map(Op::TryAcquire),
        4 => (token.clone(), reason()).prop_map(|(t, r)| Op::Release(t, r)),
        1 => token.clone().prop_map(Op::HandleDropRequest),
        1 => prop_oneof![0u64..=10_000, Just(MAX_SWITCH_INTERVAL_US), MAX_SWITCH_INTERVAL_US + 1..=u64::MAX]
            .prop_map(Op::SetInterval),
        1 => token.prop_map(Op::ReinitAfterFork),
        1 => Just(Op::Settle),
    ]
}

/// The reference: what the lock must look like after each operation.
#[derive(Debug, Default)]
struct Model {
    /// Lazy release on: a voluntary release parks the lock in `syscall`.
    lazy: bool,
    /// The token whose lazily released call holds the lock reserved.
    syscall: Option<usize>,
    lazy_releases: u64,
    lazy_takeovers: u64,
    holder: Option<usize>,
    last_holder: Option<usize>,
    switches: u64,
    acquisitions: u64,
    interval: u64,
}

impl Model {
    fn take(&mut self, t: usize) {
        self.holder = Some(t);
        if self.last_holder != Some(t) {
            self.last_holder = Some(t);
            self.switches += 1;
        }
        self.acquisitions += 1;
    }
}

fn check(gil: &Gil, model: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(gil.holder(), model.holder.map(tok));
    // A lazily released lock is reserved, not held, and can be freed.
    prop_assert_eq!(gil.is_locked(), model.holder.is_some());
    prop_assert_eq!(gil.is_reserved(), model.syscall.is_some());
    prop_assert_eq!(gil.is_idle(), model.holder.is_none());
    prop_assert_eq!(gil.last_holder(), model.last_holder.map(tok));
    prop_assert_eq!(gil.switch_number(), model.switches);
    let c = gil.counters();
    prop_assert_eq!(c.acquisitions, model.acquisitions);
    prop_assert_eq!(c.switches, model.switches);
    // Alone, nobody waits: no requests, no forced switches, no wait time.
    prop_assert_eq!(c.drop_requests, 0);
    prop_assert_eq!(c.forced_switches, 0);
    prop_assert_eq!(c.lazy_releases, model.lazy_releases);
    prop_assert_eq!(c.lazy_takeovers, model.lazy_takeovers);
    prop_assert!(!gil.drop_requested());
    prop_assert_eq!(gil.switch_interval_us(), model.interval);
    Ok(())
}

fn run(lazy: bool, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let config = if lazy {
        GilConfig::new().lazy_release_us(Some(1))
    } else {
        GilConfig::new()
    };
    run_config(config, ops)
}

/// Runs `ops` on a lock built from `config`. A lazy configuration's
/// threshold is set to 1 µs, so that a thread that finds another's call in
/// progress takes it over at once (itself, or through the monitor thread).
fn run_config(config: GilConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let probe = Gil::new(config.clone()).unwrap();
    let lazy = probe.lazy_release_us().is_some();
    let config = if lazy { config.lazy_release_us(Some(1)) } else { config };
    let gil = Gil::new(config).unwrap();
    let mut m = Model {
        lazy,
        interval: gil_core::DEFAULT_SWITCH_INTERVAL_US,
        ..Model::default()
    };
    check(&gil, &m)?;
    for op in ops {
        match op {
            Op::Acquire(t) => match (m.holder, m.syscall) {
                (Some(h), _) if h == t => prop_assert_eq!(gil.acquire(tok(t)), Err(GilError::AlreadyHeld)),
                (Some(_), _) => continue, // would block: not for a single thread
                (None, Some(s)) if s == t => {
                    // Back from its own call: a reclaim, no switch.
                    prop_assert_eq!(gil.acquire(tok(t)), Ok(()));
                    m.syscall = None;
                    m.holder = Some(t);
                    m.acquisitions += 1;
                }
                (None, Some(_)) => {
                    // Another thread's call outlasts the threshold: take-over.
                    prop_assert_eq!(gil.acquire(tok(t)), Ok(()));
                    m.syscall = None;
                    m.lazy_takeovers += 1;
                    m.take(t);
                }
                (None, None) => {
                    prop_assert_eq!(gil.acquire(tok(t)), Ok(()));
                    m.take(t);
                }
            },
            Op::TryAcquire(t) => match (m.holder, m.syscall) {
                (Some(h), _) if h == t => prop_assert_eq!(gil.try_acquire(tok(t)), Err(GilError::AlreadyHeld)),
                (Some(_), _) => prop_assert_eq!(gil.try_acquire(tok(t)), Ok(false)),
                (None, Some(s)) if s == t => {
                    prop_assert_eq!(gil.try_acquire(tok(t)), Ok(true));
                    m.syscall = None;
                    m.holder = Some(t);
                    m.acquisitions += 1;
                }
                (None, Some(_)) => prop_assert_eq!(gil.try_acquire(tok(t)), Ok(false)),
                (None, None) => {
                    prop_assert_eq!(gil.try_acquire(tok(t)), Ok(true));
                    m.take(t);
                }
            },
            Op::Release(t, reason) => {
                if m.holder == Some(t) {
                    prop_assert_eq!(gil.release(tok(t), reason), Ok(()));
                    m.holder = None;
                    if reason == ReleaseReason::Final {
                        m.last_holder = None;
                    }
                    if m.lazy && reason == ReleaseReason::Voluntary {
                        m.syscall = Some(t);
                        m.lazy_releases += 1;
                    }
                } else {
                    prop_assert_eq!(gil.release(tok(t), reason), Err(GilError::NotHolder));
                }
            }
            Op::HandleDropRequest(t) => {
                let want = if m.holder == Some(t) {
                    Ok(false)
                } else {
                    Err(GilError::NotHolder)
                };
                prop_assert_eq!(gil.handle_drop_request(tok(t)), want);
            }
            Op::SetInterval(us) => {
                if us <= MAX_SWITCH_INTERVAL_US {
                    prop_assert_eq!(gil.set_switch_interval_us(us), Ok(()));
                    m.interval = us;
                } else {
                    prop_assert_eq!(
                        gil.set_switch_interval_us(us),
                        Err(GilError::InvalidSetting {
                            key: Key::IntervalUs,
                            value: us
                        })
                    );
                }
            }
            Op::Settle => {
                // Ends a reservation; the token then takes the lock back
                // the ordinary way, as the same holder (no switch).
                prop_assert_eq!(gil.settle(), m.holder.is_none());
                m.syscall = None;
            }
            Op::ReinitAfterFork(t) => {
                gil.reinit_after_fork(tok(t));
                m = Model {
                    lazy,
                    holder: Some(t),
                    last_holder: Some(t),
                    switches: 1,
                    acquisitions: 1,
                    interval: m.interval,
                    ..Model::default()
                };
            }
        }
        check(&gil, &m)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn lock_matches_the_sequential_model(ops in proptest::collection::vec(op(), 1..64)) {
        run(false, ops)?;
    }

    #[test]
    fn lazy_lock_matches_the_sequential_model(ops in proptest::collection::vec(op(), 1..64)) {
        run(true, ops)?;
    }

    /// Every preset (priority classes, the monitor thread) behaves the same
    /// for one thread at a time.
    #[test]
    fn every_preset_matches_the_sequential_model(
        preset in proptest::sample::select(gil_core::PRESETS),
        ops in proptest::collection::vec(op(), 1..64),
    ) {
        run_config(GilConfig::preset(preset).unwrap(), ops)?;
    }
}
