//! The lock's counters: the snapshot a caller gets ([`Counters`]), and the
//! counts kept under the waiting room's mutex ([`Tally`]). The holder's own
//! counts (acquisitions, switches, lazy releases) sit on the lock word's
//! cache line, in `word.rs`'s `Hot`.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use crate::sync::AtomicU64;

/// A snapshot of a lock's counters, all since creation (or the last
/// [`Gil::reinit_after_fork`](crate::Gil::reinit_after_fork)).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Successful `acquire` / `try_acquire` calls, reclaims after a lazy
    /// release included.
    pub acquisitions: u64,
    /// Acquisitions by a different token than the previous holder
    /// (CPython's `switch_number`).
    pub switches: u64,
    /// Drop requests raised by waiters (a repeated request for a drop already
    /// pending is not counted again).
    pub drop_requests: u64,
    /// Forced releases after which another thread took the lock before the
    /// releaser returned.
    pub forced_switches: u64,
    /// Time spent waiting in `acquire` calls that did not get the lock at once.
    pub wait_time: Duration,
    /// Priority policy: drop requests raised at once by an I/O-class waiter
    /// against a CPU-class holder.
    pub preemptions: u64,
    /// Lazy release: voluntary releases that only marked a system call.
    pub lazy_releases: u64,
    /// Lazy release: system calls that outlasted the threshold while a
    /// thread waited, so that thread took the lock over.
    pub lazy_takeovers: u64,
    /// Priority policy: CPU-class waiters that reached the starvation bound
    /// and were served before I/O-class ones.
    pub starvation_promotions: u64,
    /// Priority policy with a spin limit: times a CPU-class waiter spun
    /// while an I/O-class thread held the lock and took it when that thread
    /// let go, without sleeping (see
    /// [`GilConfig::spin_us`](crate::GilConfig::spin_us)).
    pub cpu_spin_takes: u64,
}

/// The counts that change under the waiting room's mutex. Whoever holds
/// the mutex is their only writer, so each is bumped with a load and a
/// store ([`bump`]); readers without the mutex get a recent value.
pub(super) struct Tally {
    drop_requests: AtomicU64,
    forced_switches: AtomicU64,
    wait_ns: AtomicU64,
    preemptions: AtomicU64,
    lazy_takeovers: AtomicU64,
    starvation_promotions: AtomicU64,
    cpu_spin_takes: AtomicU64,
}

impl Tally {
    pub(super) fn new() -> Tally {
        Tally {
            drop_requests: AtomicU64::new(0),
            forced_switches: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
            preemptions: AtomicU64::new(0),
            lazy_takeovers: AtomicU64::new(0),
            starvation_promotions: AtomicU64::new(0),
            cpu_spin_takes: AtomicU64::new(0),
        }
    }

    /// A fresh drop request was raised.
    pub(super) fn drop_request(&self) {
        bump(&self.drop_requests, 1);
    }

    /// A forced releaser saw another thread take the lock.
    pub(super) fn forced_switch(&self) {
        bump(&self.forced_switches, 1);
    }

    /// A wait of `ns` nanoseconds ended with the lock.
    pub(super) fn waited(&self, ns: u64) {
        bump(&self.wait_ns, ns);
    }

    /// An I/O-class waiter asked a CPU-class holder at once.
    pub(super) fn preemption(&self) {
        bump(&self.preemptions, 1);
    }

    /// A lazily released call was taken over.
    pub(super) fn lazy_takeover(&self) {
        bump(&self.lazy_takeovers, 1);
    }

    /// A CPU-class waiter reached the starvation bound.
    pub(super) fn starvation_promotion(&self) {
        bump(&self.starvation_promotions, 1);
    }

    /// A waiter that watched an I/O-class holder took the lock.
    pub(super) fn cpu_spin_take(&self) {
        bump(&self.cpu_spin_takes, 1);
    }

    /// Every count back to 0 (in a fork child).
    pub(super) fn reset(&self) {
        for c in [
            &self.drop_requests,
            &self.forced_switches,
            &self.wait_ns,
            &self.preemptions,
            &self.lazy_takeovers,
            &self.starvation_promotions,
            &self.cpu_spin_takes,
        ] {
            c.store(0, Relaxed);
        }
    }

    /// These counts, the holder's own left at 0 for the caller to fill in.
    pub(super) fn snapshot(&self) -> Counters {
        Counters {
            drop_requests: self.drop_requests.load(Relaxed),
            forced_switches: self.forced_switches.load(Relaxed),
            wait_time: Duration::from_nanos(self.wait_ns.load(Relaxed)),
            preemptions: self.preemptions.load(Relaxed),
            lazy_takeovers: self.lazy_takeovers.load(Relaxed),
            starvation_promotions: self.starvation_promotions.load(Relaxed),
            cpu_spin_takes: self.cpu_spin_takes.load(Relaxed),
            ..Counters::default()
        }
    }
}

/// Adds to a counter that has a single writer at a time (the holder, or
/// whoever holds the mutex): a load and a store, no read-modify-write.
#[inline]
pub(super) fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(by), Relaxed);
}
