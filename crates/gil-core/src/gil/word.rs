//! The lock word and the fields the holder writes with it, on one cache
//! line (`Hot`): taking a free lock nobody waits for, reclaiming one's own
//! lazily released lock and letting go are a CAS here and a few stores
//! (the uncontended paths themselves are `Gil::try_fast` and
//! `Gil::release`, in `mod.rs`).
//!
//! # The lock word
//!
//! `state` is a `u64`: four flag bits and, above them, a generation that
//! numbers lazy-release episodes.
//!
//! | `state` flags              | meaning                                   | who changes it, and how                          |
//! |----------------------------|-------------------------------------------|--------------------------------------------------|
//! | `0`                        | free, nobody waiting                      | `acquire` fast path: CAS `0 → LOCKED`            |
//! | `LOCKED`                   | held, nobody waiting                      | `release` fast path: CAS `LOCKED → 0`            |
//! | `LOCKED \| WAITERS`         | held, someone waits on the mutex          | `release` goes through the mutex, wakes a waiter |
//! | `WAITERS`                  | free, waiters being woken                 | acquisitions go through the mutex                |
//! | `LOCKED \| SYSCALL`         | (lazy release) the holder is in a system call | its `acquire`: CAS back to `LOCKED`, same generation; a waiter: the same CAS after the threshold (a takeover) |
//! | `+ INSTR`                  | an event hook or the histograms are on    | `set_event_hook`, `set_histograms`               |
//!
//! `INSTR` makes observers free when there are none: with it set, the two
//! fast-path CASes above fail (their expected values have it clear) and the
//! acquisition or release takes an instrumented path that reports it. Without
//! it the uncontended paths carry no check at all.
//! `WAITERS` mirrors "the waiting room's census is not empty" and is only
//! changed under the mutex. While it is set every acquisition and release
//! takes the mutex, which is what makes the classic protocol's reasoning
//! ("the holder cannot release while I hold the mutex", "switch_number only
//! moves under the mutex") hold for every waiter, exactly as in CPython
//! where *every* take and drop takes `gil->mutex`. Without waiters there is
//! nobody to reason about, so acquire + release cost two uncontended CAS.
//! One waiter steps out: the room's only waiter, a CPU-class thread
//! watching an I/O-class holder's quick calls (`Gil::spin_while_io_holds`),
//! clears `WAITERS` for its watch, which reasons about nothing and needs no
//! wake-up, so that the holder's calls keep the fast paths. It sets it back
//! under the mutex before it looks at the word again, and so does anyone
//! who joins or raises a drop request meanwhile.
//!
//! A lazy release adds `SYSCALL` and bumps the generation, so a thread back
//! from its call can only reclaim its own episode: if somebody took the lock
//! over (clearing `SYSCALL`) and it was lazily released again since, the
//! generation differs and the reclaiming CAS fails.
//!
//! # Holder-written fields
//!
//! `owner`, `last_holder`, `switch_number`, `acquisitions`, `holder_class`,
//! `syscall_owner` and `lazy_releases` are written only by the thread that
//! holds the lock (or, after a fork, by the only thread left), through
//! `Hot`'s methods, so they are bumped with a plain load + store instead of
//! a read-modify-write; the lock's own acquire/release ordering publishes
//! them to the next holder. Readers without the lock (debuggers, stats)
//! get a recent value.

use std::sync::atomic::Ordering::{self, AcqRel, Acquire, Relaxed, Release};

use super::counters::bump;
use crate::class::ThreadClass;
use crate::sync::{AtomicU64, AtomicU8, AtomicUsize};
use crate::Token;

/// The lock is held (or, with `SYSCALL`, reserved for a thread in a call).
pub(super) const LOCKED: u64 = 1;
/// At least one thread waits under the mutex (or is about to).
pub(super) const WAITERS: u64 = 2;
/// Lazy release: the holder is in a system call.
pub(super) const SYSCALL: u64 = 4;
/// An event hook or the histograms are on (see `Hot::instr` for which).
pub(super) const INSTR: u64 = 8;
/// `Hot::holder_class` of a CPU-class holder in its slice: it took the lock
/// after starving (see `policy::preempts`). Read as CPU-class.
pub(super) const IN_SLICE: u8 = 2;
/// One lazy-release episode in the generation above the flags.
pub(super) const GEN_ONE: u64 = 16;

/// The generation of lazy-release episodes in a lock word.
pub(super) fn generation(s: u64) -> u64 {
    s & !(GEN_ONE - 1)
}

/// The lock word (see the module docs). Its methods are the only code that
/// changes it, and each says once why its ordering is enough:
///
/// * taking the lock (`lock_free`, `lock_free_observed`, `try_lock`,
///   `reclaim`, `take_over_call`) is `Acquire`, pairing with the `Release`
///   of the release (or lazy release) that freed it, so the new holder sees
///   everything the old one wrote while holding it;
/// * letting go (`unlock_alone`, `unlock_unless_waiters`, `unlock`,
///   `enter_call`, `reset_held`) is `Release`, for the same pairing;
/// * a takeover that leaves the lock free (`take_over_call` with `free`,
///   `settle`) is `AcqRel`: it continues the lazy release's release
///   sequence for whoever takes the lock next;
/// * `WAITERS` is set with `Acquire` (the joining waiter then reads
///   `owner`, which the previous releaser cleared before its `Release`)
///   and cleared `Relaxed`, always under the mutex, which orders it;
/// * `INSTR` is `Relaxed` both ways: it only diverts the fast paths to the
///   observed ones, and an observer turned on races with the calls in
///   flight by nature.
pub(super) struct Word(AtomicU64);

impl Word {
    fn new() -> Word {
        Word(AtomicU64::new(0))
    }

    /// The word as it is. `Relaxed` where the value is only a hint that a
    /// CAS or the mutex checks again; `Acquire` where the caller then
    /// reads what the releaser published.
    #[inline]
    pub(super) fn load(&self, order: Ordering) -> u64 {
        self.0.load(order)
    }

    /// The acquire fast path: `0 → LOCKED`. The word seen if it was not 0.
    #[inline]
    pub(super) fn lock_free(&self) -> Result<(), u64> {
        self.0.compare_exchange(0, LOCKED, Acquire, Relaxed).map(|_| ())
    }

    /// `LOCKED` set while nothing but `INSTR` is: the fast path with
    /// observers on. Whether it was set.
    pub(super) fn lock_free_observed(&self) -> bool {
        let mut s = self.0.load(Relaxed);
        while s & !INSTR == 0 {
            match self.0.compare_exchange_weak(s, s | LOCKED, Acquire, Relaxed) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    /// Sets `LOCKED` if it is clear; whether this call set it.
    pub(super) fn try_lock(&self) -> bool {
        let mut s = self.0.load(Relaxed);
        while s & LOCKED == 0 {
            match self.0.compare_exchange_weak(s, s | LOCKED, Acquire, Relaxed) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    /// Clears `SYSCALL` while `mine()` says the episode is the caller's;
    /// the word before if it did. Retries while only the other flag bits
    /// move (a waiter arriving sets `WAITERS`). `Acquire` on the load too:
    /// a lazy release stores its owner before its `Release` CAS, so the
    /// word read shows the matching owner to `mine`.
    #[inline]
    fn reclaim(&self, mine: impl Fn() -> bool) -> Option<u64> {
        let mut s = self.0.load(Acquire);
        while s & SYSCALL != 0 && mine() {
            match self.0.compare_exchange_weak(s, s & !SYSCALL, Acquire, Acquire) {
                Ok(_) => return Some(s),
                Err(now) => s = now,
            }
        }
        None
    }

    /// One attempt at a lazy release from word `s`: `SYSCALL` set and a new
    /// generation. `weak`: may fail spuriously (the caller loops).
    #[inline]
    fn enter_call(&self, s: u64, weak: bool) -> Result<(), u64> {
        let to = (s | SYSCALL) + GEN_ONE;
        let r = if weak {
            self.0.compare_exchange_weak(s, to, Release, Relaxed)
        } else {
            self.0.compare_exchange(s, to, Release, Relaxed)
        };
        r.map(|_| ())
    }

    /// Takes the lock from a lazily released call, from word `s`: whether
    /// this call did. `free`: leave the lock free (to hand it on).
    pub(super) fn take_over_call(&self, s: u64, free: bool) -> bool {
        let (to, order) = if free {
            (s & !(SYSCALL | LOCKED), AcqRel)
        } else {
            (s & !SYSCALL, Acquire)
        };
        self.0.compare_exchange(s, to, order, Relaxed).is_ok()
    }

    /// Ends a lazy reservation nobody waits for (see `Gil::settle`);
    /// whether the lock is then neither held nor awaited.
    pub(super) fn settle(&self) -> bool {
        let mut s = self.0.load(Acquire);
        while s & (WAITERS | SYSCALL) == SYSCALL {
            match self
                .0
                .compare_exchange_weak(s, s & !(LOCKED | SYSCALL), AcqRel, Acquire)
            {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        s & (LOCKED | WAITERS) == 0
    }

    /// The release fast path: `LOCKED → 0`. Whether it was that simple.
    #[inline]
    pub(super) fn unlock_alone(&self) -> bool {
        self.0.compare_exchange(LOCKED, 0, Release, Relaxed).is_ok()
    }

    /// Clears `LOCKED` while `WAITERS` is clear (observers on, nobody
    /// waiting); `false` once a waiter is seen: the mutex path then.
    pub(super) fn unlock_unless_waiters(&self) -> bool {
        let mut s = self.0.load(Relaxed);
        while s & WAITERS == 0 {
            match self.0.compare_exchange_weak(s, s & !LOCKED, Release, Relaxed) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    /// Clears `LOCKED`, under the mutex with waiters there.
    pub(super) fn unlock(&self) {
        self.0.fetch_and(!LOCKED, Release);
    }

    /// A waiter joined (under the mutex).
    pub(super) fn set_waiters(&self) {
        self.0.fetch_or(WAITERS, Acquire);
    }

    /// The last waiter left (under the mutex).
    pub(super) fn clear_waiters(&self) {
        self.0.fetch_and(!WAITERS, Relaxed);
    }

    /// Observers on or off.
    pub(super) fn set_instr(&self, on: bool) {
        if on {
            self.0.fetch_or(INSTR, Relaxed);
        } else {
            self.0.fetch_and(!INSTR, Relaxed);
        }
    }

    /// After `fork`: held by the forking thread, nobody waiting, no call.
    pub(super) fn reset_held(&self, instr: bool) {
        self.0.store(LOCKED | if instr { INSTR } else { 0 }, Release);
    }
}

/// Fields written on every acquisition, kept on one cache line: the lock
/// word, and what the holder writes with it (see "Holder-written fields"
/// in the module docs). Its methods are the only code that writes them.
pub(super) struct Hot {
    word: Word,
    /// The holding token, 0 if none (or in the instant around a hand-over,
    /// or while the holder is in a lazily released system call).
    owner: AtomicUsize,
    /// The token that took the lock last (CPython's `last_holder`), 0 after
    /// a final release.
    last_holder: AtomicUsize,
    switch_number: AtomicU64,
    acquisitions: AtomicU64,
    /// The holder's [`ThreadClass`] (priority policy), or `IN_SLICE`.
    holder_class: AtomicU8,
    /// The token of the latest lazy-release episode.
    syscall_owner: AtomicUsize,
    lazy_releases: AtomicU64,
    /// `INSTR_*` bits (`observe.rs`): what observers asked for; the `INSTR`
    /// bit of the word says whether any is set. (std's atomics even under
    /// loom: it is not part of the protocol.)
    instr: std::sync::atomic::AtomicU8,
    /// With histograms on: when the holder took the lock (`now_ns`).
    acquired_at: std::sync::atomic::AtomicU64,
}

impl Hot {
    pub(super) fn new() -> Hot {
        Hot {
            word: Word::new(),
            owner: AtomicUsize::new(0),
            last_holder: AtomicUsize::new(0),
            switch_number: AtomicU64::new(0),
            acquisitions: AtomicU64::new(0),
            holder_class: AtomicU8::new(ThreadClass::Io as u8),
            syscall_owner: AtomicUsize::new(0),
            lazy_releases: AtomicU64::new(0),
            instr: std::sync::atomic::AtomicU8::new(0),
            acquired_at: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The lock word.
    #[inline]
    pub(super) fn word(&self) -> &Word {
        &self.word
    }

    /// Whether `token` holds the lock and runs. Exact for the calling
    /// token: only its own thread stores it here, and it clears it before
    /// letting go.
    #[inline]
    pub(super) fn holds(&self, token: Token) -> bool {
        self.owner.load(Relaxed) == token.get()
    }

    /// The token holding the lock and running, if any.
    pub(super) fn holder(&self) -> Option<Token> {
        Token::new(self.owner.load(Relaxed))
    }

    /// The token that took the lock last, unless that was a final release.
    pub(super) fn last_holder(&self) -> Option<Token> {
        Token::new(self.last_holder.load(Relaxed))
    }

    /// Whether `token` took the lock last (a forced releaser waiting for a
    /// switch).
    pub(super) fn last_held_by(&self, token: Token) -> bool {
        self.last_holder.load(Relaxed) == token.get()
    }

    /// How many times the lock has changed hands.
    pub(super) fn switch_number(&self) -> u64 {
        self.switch_number.load(Relaxed)
    }

    /// How many times the lock has been taken.
    pub(super) fn acquisitions(&self) -> u64 {
        self.acquisitions.load(Relaxed)
    }

    /// How many lazy releases marked a system call.
    pub(super) fn lazy_releases(&self) -> u64 {
        self.lazy_releases.load(Relaxed)
    }

    /// The token of the latest lazy-release episode, if any.
    pub(super) fn syscall_owner(&self) -> Option<Token> {
        Token::new(self.syscall_owner.load(Relaxed))
    }

    /// The holder's class, and whether it is in its slice (see `IN_SLICE`).
    pub(super) fn holder_class(&self) -> (ThreadClass, bool) {
        let raw = self.holder_class.load(Relaxed);
        (ThreadClass::from_u8(raw), raw == IN_SLICE)
    }

    /// The word's `LOCKED` bit: held, or reserved by a lazy release.
    pub(super) fn locked(&self) -> bool {
        self.word.load(Relaxed) & LOCKED != 0
    }

    /// Bookkeeping of a new holder; runs right after the lock word was won.
    #[inline]
    pub(super) fn became_holder(&self, token: Token, class: ThreadClass) {
        self.owner.store(token.get(), Relaxed);
        self.holder_class.store(class as u8, Relaxed);
        if self.last_holder.load(Relaxed) != token.get() {
            self.last_holder.store(token.get(), Relaxed);
            bump(&self.switch_number, 1);
        }
        bump(&self.acquisitions, 1);
    }

    /// The holder took the slice a starving waiter is given.
    pub(super) fn start_slice(&self) {
        self.holder_class.store(IN_SLICE, Relaxed);
    }

    /// Clears `SYSCALL` if the current episode is `token`'s own; the word
    /// before if it did. Retries while only the other flag bits move (a
    /// waiter arriving sets `WAITERS`): failing here would leave `token`
    /// waiting for its own system call to time out.
    #[inline]
    pub(super) fn reclaim(&self, token: Token) -> Option<u64> {
        self.word.reclaim(|| self.syscall_owner.load(Relaxed) == token.get())
    }

    /// Bookkeeping of a reclaim on the uncontended path: back from a call
    /// that nobody needed the lock during, so no switch happened, and the
    /// thread is still I/O-class.
    #[inline]
    pub(super) fn back_from_call(&self, token: Token) {
        self.owner.store(token.get(), Relaxed);
        self.holder_class.store(ThreadClass::Io as u8, Relaxed);
        bump(&self.acquisitions, 1);
    }

    /// The holder begins a release: it no longer runs, and after a final
    /// release it is nobody's last holder.
    #[inline]
    pub(super) fn letting_go(&self, final_release: bool) {
        self.owner.store(0, Relaxed);
        if final_release {
            self.last_holder.store(0, Relaxed);
        }
    }

    /// A release `letting_go` began is refused: `token` holds the lock, so
    /// it was the last holder too.
    pub(super) fn release_refused(&self, token: Token) {
        self.owner.store(token.get(), Relaxed);
        self.last_holder.store(token.get(), Relaxed);
    }

    /// The holder begins a lazy release: the episode is `token`'s, and it
    /// no longer runs. Written while still the holder: nobody else writes
    /// these now.
    #[inline]
    pub(super) fn letting_go_lazily(&self, token: Token) {
        self.syscall_owner.store(token.get(), Relaxed);
        self.owner.store(0, Relaxed);
    }

    /// A lazy release `letting_go_lazily` began does not mark a call:
    /// `token` runs again (`syscall_owner` means nothing without
    /// `SYSCALL`, which is clear while `token` holds the lock).
    pub(super) fn lazy_release_undone(&self, token: Token) {
        self.owner.store(token.get(), Relaxed);
    }

    /// One attempt at marking the holder as in a system call from word `s`
    /// (`Word::enter_call`), counted. Only the holder calls it, so the
    /// count, made before the CAS that publishes it, is undone if the CAS
    /// fails.
    #[inline]
    pub(super) fn enter_call(&self, s: u64, weak: bool) -> Result<(), u64> {
        bump(&self.lazy_releases, 1);
        let r = self.word.enter_call(s, weak);
        if r.is_err() {
            self.lazy_releases
                .store(self.lazy_releases.load(Relaxed).wrapping_sub(1), Relaxed);
        }
        r
    }

    /// Marks the holder as in a system call from word `s`, retrying while
    /// `keep_trying(word)`; whether it did.
    pub(super) fn mark_in_call(&self, mut s: u64, keep_trying: impl Fn(u64) -> bool) -> bool {
        while keep_trying(s) {
            match self.enter_call(s, true) {
                Ok(()) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    /// The `INSTR_*` bits observers asked for.
    #[inline]
    pub(super) fn instr(&self) -> u8 {
        self.instr.load(Relaxed)
    }

    /// Turns an `INSTR_*` bit on or off, and the word's `INSTR` bit with
    /// them. Callers serialise (`Observers::serial`).
    pub(super) fn set_instr(&self, bit: u8, on: bool) {
        if on {
            self.instr.fetch_or(bit, Relaxed);
        } else {
            self.instr.fetch_and(!bit, Relaxed);
        }
        self.word.set_instr(self.instr.load(Relaxed) != 0);
    }

    /// With histograms on: the holder took the lock at `now` (`now_ns`).
    pub(super) fn hold_started(&self, now: u64) {
        self.acquired_at.store(now, Relaxed);
    }

    /// When the hold now ending started, 0 if unknown (histograms turned on
    /// during it).
    pub(super) fn take_hold_start(&self) -> u64 {
        self.acquired_at.swap(0, Relaxed)
    }

    /// After `fork`: held by `token`, the forking thread, as if it had
    /// just taken it (one acquisition, one switch); nobody waiting, no
    /// call, observers as they were.
    pub(super) fn reset_after_fork(&self, token: Token) {
        self.lazy_releases.store(0, Relaxed);
        self.owner.store(token.get(), Relaxed);
        self.last_holder.store(token.get(), Relaxed);
        self.syscall_owner.store(0, Relaxed);
        self.holder_class.store(ThreadClass::Io as u8, Relaxed);
        self.switch_number.store(1, Relaxed);
        self.acquisitions.store(1, Relaxed);
        self.acquired_at.store(0, Relaxed);
        self.word.reset_held(self.instr() != 0);
    }
}
