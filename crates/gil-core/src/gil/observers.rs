//! What a lock's observers asked for and what they collect: the event
//! hooks, the wait and hold histograms, the per-thread accounts, and the
//! flag that serialises turning them on and off. Which of them are on is
//! the `instr` byte on the lock word's cache line (`word.rs`); how they
//! are fed is `observe.rs`.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize};

use crate::accounting::Accounts;
use crate::events::HookList;
use crate::stats::{Histogram, Histograms};
use crate::Token;

/// A lock's observers (see the module docs). std's atomics even under
/// loom: none of this is part of the protocol.
pub(super) struct Observers {
    hooks: HookList,
    wait_hist: Histogram,
    hold_hist: Histogram,
    /// Per-thread accounting. Always a valid `Box<Accounts>` from
    /// `Box::into_raw`; replaced (the old one leaked) after a fork, freed
    /// only in `Drop`.
    accounts: AtomicPtr<Accounts>,
    /// Serialises changes of which observers are on (`serial`).
    changing: AtomicBool,
    /// The token of the last acquisition observed (0: none yet), unlike
    /// the lock's last holder kept through a final release: whom a drop
    /// request raised during one asked. Relaxed, like the names it stands
    /// in for: an observer's attribution is racy by nature.
    last_taker: AtomicUsize,
}

/// Holds [`Observers::serial`] while alive.
pub(super) struct Serial<'a>(&'a AtomicBool);

impl Drop for Serial<'_> {
    fn drop(&mut self) {
        self.0.store(false, Release);
    }
}

impl Observers {
    pub(super) fn new() -> Observers {
        Observers {
            hooks: HookList::new(),
            wait_hist: Histogram::new(),
            hold_hist: Histogram::new(),
            accounts: AtomicPtr::new(Box::into_raw(Box::new(Accounts::new()))),
            changing: AtomicBool::new(false),
            last_taker: AtomicUsize::new(0),
        }
    }

    /// The event hooks.
    pub(super) fn hooks(&self) -> &HookList {
        &self.hooks
    }

    /// The per-thread accounts.
    pub(super) fn accounts(&self) -> &Accounts {
        let ptr = self.accounts.load(Acquire);
        // SAFETY:
        // - `accounts` always holds a pointer from `Box::into_raw` (set in
        //   `new` and `replace_after_fork`);
        // - a replaced box is leaked, never freed, and the current one is
        //   freed only in `Drop`, which cannot run while `&self` lives.
        unsafe { &*ptr }
    }

    /// `token` took the lock (observed).
    pub(super) fn took(&self, token: Token) {
        self.last_taker.store(token.get(), Relaxed);
    }

    /// The token of the last acquisition observed.
    pub(super) fn last_taker(&self) -> Option<Token> {
        Token::new(self.last_taker.load(Relaxed))
    }

    /// Records a wait of `ns` nanoseconds.
    pub(super) fn record_wait(&self, ns: u64) {
        self.wait_hist.record(ns);
    }

    /// Records a hold of `ns` nanoseconds.
    pub(super) fn record_hold(&self, ns: u64) {
        self.hold_hist.record(ns);
    }

    /// A snapshot of both histograms.
    pub(super) fn histograms(&self) -> Histograms {
        Histograms {
            wait: self.wait_hist.snapshot(),
            hold: self.hold_hist.snapshot(),
        }
    }

    /// Empties both histograms.
    pub(super) fn reset_histograms(&self) {
        self.wait_hist.reset();
        self.hold_hist.reset();
    }

    /// Serialises changes of which observers are on while alive. A flag,
    /// not a mutex, so that a fork child can clear it
    /// (`replace_after_fork`): a mutex held by a thread lost in the fork
    /// could never be taken again.
    pub(super) fn serial(&self) -> Serial<'_> {
        while self
            .changing
            .compare_exchange_weak(false, true, Acquire, Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
        Serial(&self.changing)
    }

    /// In a fork child: the hooks forget the parent's threads, the serial
    /// flag is cleared (a parent thread may have been changing the
    /// observers), the histograms are emptied and the accounts start
    /// afresh. The old accounts are returned, for the caller to keep for
    /// the life of the process (a parent thread may have held their mutex).
    pub(super) fn replace_after_fork(&self) -> *mut Accounts {
        self.hooks.reset_after_fork();
        self.changing.store(false, Relaxed);
        self.reset_histograms();
        let fresh = Box::into_raw(Box::new(Accounts::new()));
        self.accounts.swap(fresh, std::sync::atomic::Ordering::AcqRel)
    }
}

impl Drop for Observers {
    fn drop(&mut self) {
        let ptr = *self.accounts.get_mut();
        // SAFETY:
        // - `ptr` came from `Box::into_raw` and is freed only here (a
        //   replaced one is never freed);
        // - `&mut self` means no thread is inside a method using it.
        drop(unsafe { Box::from_raw(ptr) });
    }
}
