//! The lock: CPython's new-GIL protocol around a one-word fast path, with
//! the priority policy and lazy release as options.
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
//! `WAITERS` mirrors "`WaitRoom::waiters() > 0`" and is only changed under
//! the mutex. While it is set every acquisition and release takes the mutex,
//! which is what makes the classic protocol's reasoning ("the holder cannot
//! release while I hold the mutex", "switch_number only moves under the
//! mutex") hold for every waiter, exactly as in CPython where *every* take
//! and drop takes `gil->mutex`. Without waiters there is nobody to reason
//! about, so acquire + release cost two uncontended CAS.
//!
//! A lazy release adds `SYSCALL` and bumps the generation, so a thread back
//! from its call can only reclaim its own episode: if somebody took the lock
//! over (clearing `SYSCALL`) and it was lazily released again since, the
//! generation differs and the reclaiming CAS fails.
//!
//! # Holder-written fields
//!
//! `owner`, `last_holder`, `switch_number`, `acquisitions` and `holder_class`
//! are written only by the thread that holds the lock, so they are bumped
//! with a plain load + store instead of a read-modify-write; the lock's own
//! acquire/release ordering publishes them to the next holder. Readers
//! without the lock (debuggers, stats) get a recent value.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

mod callbacks;
mod monitor;

pub use monitor::monitor_wakeups;

use crate::class::{self, ThreadClass};
#[cfg(not(gil_loom))]
use crate::config::STARVATION_INTERVALS;
use crate::config::{
    check_lazy_threshold, check_spin, check_switch_interval, DropRequestCallback, DEFAULT_SWITCH_INTERVAL_US,
};
use crate::events::{now_ns, Event, EventHook, EventKind, HookSlot};
use crate::reason::ReleaseReason;
use crate::stats::{Histogram, Histograms};
use crate::sync::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Condvar, Mutex, MutexGuard};
use crate::{GilConfig, GilError, Policy, Token};

/// The lock is held (or, with `SYSCALL`, reserved for a thread in a call).
const LOCKED: u64 = 1;
/// At least one thread waits under the mutex (or is about to).
const WAITERS: u64 = 2;
/// Lazy release: the holder is in a system call.
const SYSCALL: u64 = 4;
/// An event hook or the histograms are on (see `Hot::instr` for which).
const INSTR: u64 = 8;
/// One lazy-release episode in the generation above the flags.
const GEN_ONE: u64 = 16;

/// `Hot::instr`: an event hook is installed.
const INSTR_HOOK: u8 = 1;
/// `Hot::instr`: histograms are on.
const INSTR_HIST: u8 = 2;

/// A snapshot of a lock's counters, all since creation (or the last
/// [`Gil::reinit_after_fork`]).
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
}

/// What a waiter checks when one switch interval has passed (see
/// [`Gil::acquire_or_abort`]).
type AbortCheck<'a> = Option<&'a mut dyn FnMut() -> bool>;

/// How a lazy voluntary release went.
enum Lazy {
    /// The holder is marked as in a system call.
    Done,
    /// A drop request is pending: the release must be a real one.
    /// `observed`: it has been reported to observers already.
    Real { observed: bool },
    /// Called from inside one of the lock's callbacks: nothing changed.
    Reentrant,
}

/// Fields written on every acquisition, kept on one cache line.
struct Hot {
    state: AtomicU64,
    /// The holding token, 0 if none (or in the instant around a hand-over,
    /// or while the holder is in a lazily released system call).
    owner: AtomicUsize,
    /// The token that took the lock last (CPython's `last_holder`), 0 after
    /// a final release.
    last_holder: AtomicUsize,
    switch_number: AtomicU64,
    acquisitions: AtomicU64,
    /// The holder's [`ThreadClass`] (priority policy).
    holder_class: AtomicU8,
    /// The token of the latest lazy-release episode.
    syscall_owner: AtomicUsize,
    lazy_releases: AtomicU64,
    /// `INSTR_*` bits: what observers asked for; the `INSTR` bit of `state`
    /// says whether any is set. (std's atomics even under loom: it is not
    /// part of the protocol.)
    instr: std::sync::atomic::AtomicU8,
    /// With histograms on: when the holder took the lock (`now_ns`).
    acquired_at: std::sync::atomic::AtomicU64,
}

/// Waiting-room bookkeeping, only touched under `Slow::mutex`.
#[derive(Default)]
struct WaitRoom {
    /// I/O-class threads in `acquire_slow` (all waiters, under classic).
    io_waiters: usize,
    /// CPU-class threads in `acquire_slow`.
    cpu_waiters: usize,
    /// CPU-class waiters past the starvation bound: served before anyone.
    starving: usize,
    /// Forced releasers waiting for somebody to take over.
    switch_waiters: usize,
    /// The pending drop request was raised because the holder ran a whole
    /// switch interval while someone waited (not to preempt it, not for a
    /// starving waiter): priority policy, answering it makes a CPU-class
    /// thread whatever the release reason.
    interval_request: bool,
    /// Monitored locks: the waiters' queue and the monitor's timing.
    monitor: monitor::MonitorRoom,
    /// Under loom: how many times the model's clock has ticked.
    #[cfg(gil_loom)]
    ticks: u64,
}

impl WaitRoom {
    fn waiters(&self) -> usize {
        self.io_waiters + self.cpu_waiters
    }
}

/// The parts only the slow paths use. Replaced (never freed) by
/// [`Gil::reinit_after_fork`], see there.
struct Slow {
    mutex: Mutex<WaitRoom>,
    /// I/O-class waiters block here (every waiter, under classic); a release
    /// signals one of them (CPython's `cond`).
    io_cond: Condvar,
    /// CPU-class waiters block here (priority policy only).
    cpu_cond: Condvar,
    /// Forced releasers block here until a switch (CPython's `switch_cond`).
    switch_cond: Condvar,
    /// Next entry of [`RETIRED`] once this one has been replaced.
    next_retired: std::sync::atomic::AtomicPtr<Slow>,
}

impl Slow {
    fn new() -> Self {
        Slow {
            mutex: Mutex::new(WaitRoom::default()),
            io_cond: Condvar::new(),
            cpu_cond: Condvar::new(),
            switch_cond: Condvar::new(),
            next_retired: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    fn cond(&self, class: ThreadClass) -> &Condvar {
        match class {
            ThreadClass::Io => &self.io_cond,
            ThreadClass::Cpu => &self.cpu_cond,
        }
    }
}

/// Every `Slow` replaced after a fork, kept for the life of the process (see
/// [`Gil::reinit_after_fork`]). A list rooted in a static keeps them
/// reachable, so leak checkers do not report a deliberate leak as lost. It
/// is lock-free: after a fork any lock may be held by a thread that is gone.
static RETIRED: std::sync::atomic::AtomicPtr<Slow> = std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

fn retire(old: *mut Slow) {
    // SAFETY: `old` came from `Box::into_raw` and is never freed (it is only
    // ever put on this list), so it stays valid for the process's life.
    let entry = unsafe { &*old };
    let mut head = RETIRED.load(Relaxed);
    loop {
        entry.next_retired.store(head, Relaxed);
        match RETIRED.compare_exchange_weak(head, old, Release, Relaxed) {
            Ok(_) => return,
            Err(now) => head = now,
        }
    }
}

/// A global interpreter lock: one instance per interpreter (or per
/// sub-interpreter that owns one); any number may coexist in a process.
///
/// All methods take `&self`; share it between threads with `Arc` or a
/// `static`. See the [crate docs](crate) for the protocol.
pub struct Gil {
    inner: Arc<Inner>,
}

/// Everything a lock is, shared by its [`Gil`] handle and, while it has
/// waiters, the monitor thread.
struct Inner {
    hot: CachePadded<Hot>,
    /// "Holder, please drop": raised by a waiter, polled by the holder.
    drop_request: CachePadded<AtomicBool>,
    interval_us: AtomicU64,
    drop_requests: AtomicU64,
    forced_switches: AtomicU64,
    wait_ns: AtomicU64,
    preemptions: AtomicU64,
    lazy_takeovers: AtomicU64,
    starvation_promotions: AtomicU64,
    policy: Policy,
    /// `Some(threshold)` when lazy release is on.
    lazy_release: Option<Duration>,
    /// Timed by the monitor thread, waiters served in order (`monitor.rs`).
    monitor: bool,
    /// How long a waiter that just asked for a drop spins before sleeping.
    spin: Option<Duration>,
    on_drop_request: Option<DropRequestCallback>,
    /// Always a valid `Box<Slow>` from `Box::into_raw`; freed only in `Drop`.
    slow: AtomicPtr<Slow>,
    hook: HookSlot,
    wait_hist: Histogram,
    hold_hist: Histogram,
    /// Serialises changes of `Hot::instr` and the `INSTR` bit.
    observers: std::sync::Mutex<()>,
}

impl Gil {
    /// Builds a free lock from `config`.
    ///
    /// # Errors
    /// [`GilError::InvalidSwitchInterval`] or
    /// [`GilError::InvalidLazyThreshold`] if a duration is out of range.
    pub fn new(config: GilConfig) -> Result<Gil, GilError> {
        let interval = check_switch_interval(config.switch_interval_us.unwrap_or(DEFAULT_SWITCH_INTERVAL_US))?;
        let lazy = check_lazy_threshold(config.lazy_release_us)?;
        let spin = check_spin(config.spin_us)?;
        Ok(Gil {
            inner: Arc::new(Inner {
                hot: CachePadded::new(Hot {
                    state: AtomicU64::new(0),
                    owner: AtomicUsize::new(0),
                    last_holder: AtomicUsize::new(0),
                    switch_number: AtomicU64::new(0),
                    acquisitions: AtomicU64::new(0),
                    holder_class: AtomicU8::new(ThreadClass::Io as u8),
                    syscall_owner: AtomicUsize::new(0),
                    lazy_releases: AtomicU64::new(0),
                    instr: std::sync::atomic::AtomicU8::new(0),
                    acquired_at: std::sync::atomic::AtomicU64::new(0),
                }),
                drop_request: CachePadded::new(AtomicBool::new(false)),
                interval_us: AtomicU64::new(interval),
                drop_requests: AtomicU64::new(0),
                forced_switches: AtomicU64::new(0),
                wait_ns: AtomicU64::new(0),
                preemptions: AtomicU64::new(0),
                lazy_takeovers: AtomicU64::new(0),
                starvation_promotions: AtomicU64::new(0),
                policy: config.policy,
                lazy_release: lazy.map(Duration::from_micros),
                monitor: config.monitor,
                spin: (spin > 0).then(|| Duration::from_micros(spin)),
                on_drop_request: config.on_drop_request,
                slow: AtomicPtr::new(Box::into_raw(Box::new(Slow::new()))),
                hook: HookSlot::new(),
                wait_hist: Histogram::new(),
                hold_hist: Histogram::new(),
                observers: std::sync::Mutex::new(()),
            }),
        })
    }

    /// Blocks until `token` holds the lock.
    ///
    /// While it waits, each full switch interval that passes without a
    /// switch raises a drop request on the holder (flag + callback); under
    /// the priority policy an I/O-class waiter asks a CPU-class holder at
    /// once.
    ///
    /// # Errors
    /// [`GilError::AlreadyHeld`] if `token` holds it already. A token that
    /// made a [`ReleaseReason::Final`] release may acquire again: the lock
    /// treats it as a new thread, because hosts recycle thread-state memory.
    #[inline]
    pub fn acquire(&self, token: Token) -> Result<(), GilError> {
        self.check_not_holder(token)?;
        if self.try_fast(token) {
            return Ok(());
        }
        self.acquire_slow(token, None)
    }

    /// Like [`acquire`](Self::acquire), but each time a switch interval has
    /// passed without getting the lock, `should_abort` is asked whether to
    /// give up; if it says `true`, returns [`GilError::Aborted`] without the
    /// lock. CPython uses this for threads that must exit during
    /// finalization.
    ///
    /// `should_abort` runs under the lock's internal mutex: it must be short;
    /// calls on this lock from inside it that would wait return
    /// [`GilError::Reentrant`].
    pub fn acquire_or_abort(&self, token: Token, should_abort: &mut dyn FnMut() -> bool) -> Result<(), GilError> {
        self.check_not_holder(token)?;
        if self.try_fast(token) {
            return Ok(());
        }
        self.acquire_slow(token, Some(should_abort))
    }

    /// Takes the lock if it is free right now (or if it is `token`'s own
    /// lazily released one); `Ok(false)` otherwise. Never blocks for longer
    /// than the internal mutex is held, and never raises a drop request.
    /// Under the priority policy a CPU-class caller does not take it past
    /// waiting I/O-class threads.
    ///
    /// # Errors
    /// [`GilError::AlreadyHeld`] if `token` holds it already.
    pub fn try_acquire(&self, token: Token) -> Result<bool, GilError> {
        self.check_not_holder(token)?;
        if self.try_fast(token) {
            return Ok(true);
        }
        if self.in_callback() {
            return Err(GilError::Reentrant);
        }
        if self.inner.hot.state.load(Relaxed) & LOCKED != 0 {
            return Ok(false);
        }
        // Free, but waiters are being woken: take it under the mutex, like
        // they do, so they always see a consistent holder.
        let slow = self.slow();
        let mut room = slow.mutex.lock();
        let class = self.class_of(token);
        let may_take = if self.inner.monitor {
            self.may_take_unqueued(class, &room)
        } else {
            self.may_take(class, &room, false)
        };
        if !may_take || !self.try_lock_word() {
            return Ok(false);
        }
        self.took_over_under_mutex(token, class, slow, &mut room);
        Ok(true)
    }

    /// Lets go of the lock. See [`ReleaseReason`] for what each reason does.
    ///
    /// # Errors
    /// [`GilError::NotHolder`] if `token` does not hold the lock.
    #[inline]
    pub fn release(&self, token: Token, reason: ReleaseReason) -> Result<(), GilError> {
        if self.inner.hot.owner.load(Relaxed) != token.get() {
            return Err(GilError::NotHolder);
        }
        // Before anything can fail: a release refused as re-entrant leaves
        // this record too, but it is never read before the thread's real
        // release overwrites it (only a later acquisition reads it).
        self.remember_class(token, reason);
        let mut observed = false;
        if reason == ReleaseReason::Voluntary && self.inner.lazy_release.is_some() {
            match self.release_lazily(token) {
                Lazy::Done => return Ok(()),
                Lazy::Real { observed: o } => observed = o,
                Lazy::Reentrant => return Err(GilError::Reentrant),
            }
        }
        self.inner.hot.owner.store(0, Relaxed);
        if reason == ReleaseReason::Final {
            self.inner.hot.last_holder.store(0, Relaxed);
        }
        // A pending drop request implies a waiter, hence WAITERS, hence the
        // slow path: the fast path never has a request to answer.
        if self
            .inner
            .hot
            .state
            .compare_exchange(LOCKED, 0, Release, Relaxed)
            .is_ok()
        {
            return Ok(());
        }
        self.release_contended(token, reason, observed)
    }

    /// Under the priority policy, records the class `token` has after
    /// releasing for `reason` (see [`class`]).
    #[inline]
    fn remember_class(&self, token: Token, reason: ReleaseReason) {
        if self.inner.policy == Policy::Priority {
            class::remember(self.id(), token.get(), ThreadClass::after(reason));
        }
    }

    /// A release that the fast path could not make: observers are on, or
    /// somebody waits. `observed`: the release was already reported.
    #[cold]
    fn release_contended(&self, token: Token, reason: ReleaseReason, observed: bool) -> Result<(), GilError> {
        if self.in_callback() {
            // From inside one of this lock's callbacks (which always runs
            // while the lock is awaited or observed, so the fast path failed
            // and led here): the mutex may be ours already. Undo `release`'s
            // stores: `token` holds the lock, so it was `last_holder` too.
            self.inner.hot.owner.store(token.get(), Relaxed);
            self.inner.hot.last_holder.store(token.get(), Relaxed);
            return Err(GilError::Reentrant);
        }
        let mut s = self.inner.hot.state.load(Relaxed);
        if s & INSTR != 0 && !observed {
            self.observe_release(token, reason);
        }
        while s & WAITERS == 0 {
            match self
                .inner
                .hot
                .state
                .compare_exchange_weak(s, s & !LOCKED, Release, Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(now) => s = now,
            }
        }
        self.release_slow(token, reason);
        Ok(())
    }

    /// Whether a waiter has asked the current holder to drop the lock. One
    /// relaxed load: cheap enough to poll in an interpreter loop.
    #[inline]
    pub fn drop_requested(&self) -> bool {
        self.inner.drop_request.load(Relaxed)
    }

    /// For hosts that poll: if a drop has been requested, releases with
    /// [`ReleaseReason::Forced`] and re-acquires. `Ok(true)` if it did.
    ///
    /// # Errors
    /// [`GilError::NotHolder`] if `token` does not hold the lock.
    pub fn handle_drop_request(&self, token: Token) -> Result<bool, GilError> {
        if self.inner.hot.owner.load(Relaxed) != token.get() {
            return Err(GilError::NotHolder);
        }
        if !self.drop_requested() {
            return Ok(false);
        }
        self.release(token, ReleaseReason::Forced)?;
        self.acquire(token)?;
        Ok(true)
    }

    /// The switch interval in microseconds, as set (0 means 1 µs in effect).
    pub fn switch_interval_us(&self) -> u64 {
        self.inner.interval_us.load(Relaxed)
    }

    /// Sets the switch interval; waiters use it from their next wait on.
    /// 0 is accepted and behaves as 1 µs, as in CPython.
    ///
    /// # Errors
    /// [`GilError::InvalidSwitchInterval`] above
    /// [`MAX_SWITCH_INTERVAL_US`](crate::MAX_SWITCH_INTERVAL_US); the
    /// interval is then unchanged.
    pub fn set_switch_interval_us(&self, us: u64) -> Result<(), GilError> {
        self.inner.interval_us.store(check_switch_interval(us)?, Relaxed);
        if self.inner.monitor && self.inner.hot.state.load(Relaxed) & WAITERS != 0 {
            // The monitor's schedule was made with the old interval.
            self.ask_monitor_to_look();
        }
        Ok(())
    }

    /// This lock's configuration as it stands (the switch interval may have
    /// changed since it was built).
    pub fn settings(&self) -> crate::Settings {
        crate::Settings {
            switch_interval_us: self.switch_interval_us(),
            policy: self.inner.policy,
            lazy_release_us: self.lazy_release_us(),
            monitor: self.inner.monitor,
            spin_us: self.spin_us(),
        }
    }

    /// The scheduling policy this lock was built with.
    pub fn policy(&self) -> Policy {
        self.inner.policy
    }

    /// Whether the monitor thread keeps this lock's time
    /// ([`GilConfig::monitor`]).
    pub fn uses_monitor(&self) -> bool {
        self.inner.monitor
    }

    /// The spin limit in microseconds (0: no spinning), see
    /// [`GilConfig::spin_us`].
    pub fn spin_us(&self) -> u64 {
        self.inner.spin.map_or(0, |d| d.as_micros() as u64)
    }

    /// The lazy-release threshold in microseconds, `None` if lazy release is off.
    pub fn lazy_release_us(&self) -> Option<u64> {
        self.inner.lazy_release.map(|d| d.as_micros() as u64)
    }

    /// Whether some token holds the lock (racy by nature; for observers). A
    /// lazily released lock does not count: its thread released it, and the
    /// lock is only reserved for it ([`is_reserved`](Self::is_reserved)).
    pub fn is_locked(&self) -> bool {
        self.inner.hot.state.load(Relaxed) & (LOCKED | SYSCALL) == LOCKED
    }

    /// Whether the lock is reserved for a thread that released it lazily
    /// and is in a system call: that thread takes it back without waiting
    /// if it returns within the threshold, a waiter takes it over after.
    /// [`settle`](Self::settle) ends a reservation nobody waits for (racy by
    /// nature; for observers).
    pub fn is_reserved(&self) -> bool {
        self.inner.hot.state.load(Relaxed) & SYSCALL != 0
    }

    /// The lock word's LOCKED bit: held, or reserved by a lazy release.
    fn word_locked(&self) -> bool {
        self.inner.hot.state.load(Relaxed) & LOCKED != 0
    }

    /// The token holding the lock and running, if any: `None` while the
    /// lock is free or its holder is in a lazily released system call (racy
    /// by nature; for observers).
    pub fn holder(&self) -> Option<Token> {
        Token::new(self.inner.hot.owner.load(Relaxed))
    }

    /// The token that took the lock most recently, even if it has released
    /// it since — unless that was a final release (CPython's `last_holder`).
    pub fn last_holder(&self) -> Option<Token> {
        Token::new(self.inner.hot.last_holder.load(Relaxed))
    }

    /// How many times the lock has changed hands (CPython's `switch_number`).
    pub fn switch_number(&self) -> u64 {
        self.inner.hot.switch_number.load(Relaxed)
    }

    /// A snapshot of the counters. Each is read without the lock, so the
    /// snapshot is not atomic as a whole.
    pub fn counters(&self) -> Counters {
        Counters {
            acquisitions: self.inner.hot.acquisitions.load(Relaxed),
            switches: self.inner.hot.switch_number.load(Relaxed),
            drop_requests: self.inner.drop_requests.load(Relaxed),
            forced_switches: self.inner.forced_switches.load(Relaxed),
            wait_time: Duration::from_nanos(self.inner.wait_ns.load(Relaxed)),
            preemptions: self.inner.preemptions.load(Relaxed),
            lazy_releases: self.inner.hot.lazy_releases.load(Relaxed),
            lazy_takeovers: self.inner.lazy_takeovers.load(Relaxed),
            starvation_promotions: self.inner.starvation_promotions.load(Relaxed),
        }
    }

    /// Installs `hook` (or, with `None`, removes the current one). Returns
    /// once no thread is still running the hook it replaced, so whatever that
    /// hook used may be freed. See [`events`](crate::events) for where hooks
    /// run.
    ///
    /// # Errors
    /// [`GilError::Reentrant`] from inside one of this lock's callbacks (it
    /// would wait for itself to leave the hook); nothing changes.
    pub fn set_event_hook(&self, hook: Option<EventHook>) -> Result<(), GilError> {
        if self.in_callback() {
            return Err(GilError::Reentrant);
        }
        let on = hook.is_some();
        // Flag first when installing (an emitter that sees the flag but not
        // yet the hook just finds the slot empty), slot first when removing.
        if on {
            self.set_instr(INSTR_HOOK, true);
        }
        self.inner.hook.set(hook);
        if !on {
            self.set_instr(INSTR_HOOK, false);
        }
        Ok(())
    }

    /// Turns an `INSTR_*` bit on or off, and `state`'s `INSTR` bit with it.
    fn set_instr(&self, bit: u8, on: bool) {
        let _serial = self
            .inner
            .observers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let hot = &*self.inner.hot;
        if on {
            hot.instr.fetch_or(bit, Relaxed);
        } else {
            hot.instr.fetch_and(!bit, Relaxed);
        }
        if hot.instr.load(Relaxed) != 0 {
            hot.state.fetch_or(INSTR, Relaxed);
        } else {
            hot.state.fetch_and(!INSTR, Relaxed);
        }
    }

    /// Whether an event hook is installed.
    pub fn has_event_hook(&self) -> bool {
        self.inner.hook.is_set()
    }

    /// Turns the wait-time and hold-time histograms on or off. Turning them
    /// on does not clear what was recorded before; see
    /// [`reset_histograms`](Self::reset_histograms).
    pub fn set_histograms(&self, on: bool) {
        self.set_instr(INSTR_HIST, on);
    }

    /// Whether the histograms are on.
    pub fn histograms_enabled(&self) -> bool {
        self.inner.hot.instr.load(Relaxed) & INSTR_HIST != 0
    }

    /// A snapshot of the histograms (all zero unless they were turned on).
    pub fn histograms(&self) -> Histograms {
        Histograms {
            wait: self.inner.wait_hist.snapshot(),
            hold: self.inner.hold_hist.snapshot(),
        }
    }

    /// Empties both histograms.
    pub fn reset_histograms(&self) {
        self.inner.wait_hist.reset();
        self.inner.hold_hist.reset();
    }

    /// In a child process after `fork()`: makes this a freshly initialised
    /// lock held by `token` (the forking thread); every other thread is
    /// forgotten, counters restart (at one acquisition and one switch, as
    /// CPython's `recreate_gil` + `take_gil`). Interval, policy, callback and
    /// event hook are kept (a hook that takes locks of its own must cope
    /// with a fork: a thread of the parent may have held them).
    ///
    /// Call it only where no other thread can touch the lock — in the child,
    /// before starting threads. Elsewhere it breaks mutual exclusion (it is
    /// still memory-safe).
    ///
    /// The internal mutex and condition variables may have been held or
    /// waited on by threads that do not exist in the child. They are not
    /// reset in place: new ones are allocated and the old ones kept, unused,
    /// for the life of the process (a few hundred bytes per fork): a
    /// pthread mutex locked by a thread that died in the fork can neither be
    /// used nor even destroyed.
    pub fn reinit_after_fork(&self, token: Token) {
        let fresh = Box::into_raw(Box::new(Slow::new()));
        // The old `Slow` is deliberately kept forever, see above.
        retire(self.inner.slow.swap(fresh, AcqRel));
        self.inner.hook.reset_after_fork();
        self.inner.drop_request.store(false, Relaxed);
        for c in [
            &self.inner.drop_requests,
            &self.inner.forced_switches,
            &self.inner.wait_ns,
            &self.inner.preemptions,
            &self.inner.lazy_takeovers,
            &self.inner.starvation_promotions,
            &self.inner.hot.lazy_releases,
        ] {
            c.store(0, Relaxed);
        }
        self.inner.hot.owner.store(token.get(), Relaxed);
        self.inner.hot.last_holder.store(token.get(), Relaxed);
        self.inner.hot.syscall_owner.store(0, Relaxed);
        self.inner.hot.holder_class.store(ThreadClass::Io as u8, Relaxed);
        self.inner.hot.switch_number.store(1, Relaxed);
        self.inner.hot.acquisitions.store(1, Relaxed);
        self.inner.hot.acquired_at.store(0, Relaxed);
        self.reset_histograms();
        let instr = if self.inner.hot.instr.load(Relaxed) != 0 {
            INSTR
        } else {
            0
        };
        self.inner.hot.state.store(LOCKED | instr, Release);
    }

    /// Whether nobody holds the lock and nobody waits for it, i.e. it could
    /// be freed. A lazily released lock nobody waits for counts as idle: its
    /// thread has released it ([`settle`](Self::settle) ends the reservation).
    pub fn is_idle(&self) -> bool {
        let s = self.inner.hot.state.load(Acquire);
        s & WAITERS == 0 && s & (LOCKED | SYSCALL) != LOCKED
    }

    /// Ends the reservation of a lazily released lock that nobody waits
    /// for, so that it is plainly free (the thread in the call takes it the
    /// ordinary way when it comes back), and says whether the lock is now
    /// idle: neither held nor awaited.
    pub fn settle(&self) -> bool {
        let hot = &*self.inner.hot;
        let mut s = hot.state.load(Acquire);
        while s & (WAITERS | SYSCALL) == SYSCALL {
            // AcqRel: as a takeover, it continues the lazy release's
            // release sequence for whoever takes the lock next.
            match hot
                .state
                .compare_exchange_weak(s, s & !(LOCKED | SYSCALL), AcqRel, Acquire)
            {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        s & (LOCKED | WAITERS) == 0
    }

    /// Destroys the lock, refusing if it is held or awaited: returns it with
    /// [`GilError::Busy`] so nothing is lost. A lazily released lock nobody
    /// waits for is not held ([`settle`](Self::settle)). (A plain `drop` is
    /// always allowed; nobody can be waiting on a lock that can be dropped.)
    ///
    /// # Errors
    /// `(self, GilError::Busy)` if some token holds the lock.
    #[allow(
        clippy::result_large_err,
        reason = "handing the lock back whole is the point; the error path is rare"
    )]
    pub fn close(self) -> Result<(), (Gil, GilError)> {
        if self.settle() {
            Ok(())
        } else {
            Err((self, GilError::Busy))
        }
    }

    /// Under loom only: one tick of the model's clock. Every waiter blocked
    /// in a timed wait treats it as its timeout; for a monitored lock the
    /// clock also plays the monitor thread and takes its look. `under_mutex`
    /// runs after that, while the internal mutex is held, so a model can
    /// record what it saw in the same total order as acquisitions and drop
    /// requests.
    #[cfg(gil_loom)]
    #[doc(hidden)]
    pub fn loom_tick(&self, under_mutex: impl FnOnce()) {
        let slow = self.slow();
        let mut room = slow.mutex.lock();
        room.ticks += 1;
        if self.inner.monitor {
            self.monitor_pass_locked(&mut room);
            self.loom_wake_queued(&room);
        }
        under_mutex();
        slow.io_cond.notify_all();
        slow.cpu_cond.notify_all();
    }

    // ---- internals ----------------------------------------------------

    /// Another handle on the same lock (for the monitor thread).
    #[cfg(not(gil_loom))]
    fn handle(&self) -> Gil {
        Gil {
            inner: Arc::clone(&self.inner),
        }
    }

    fn slow(&self) -> &Slow {
        let ptr = self.inner.slow.load(Acquire);
        // SAFETY:
        // - `slow` always holds a pointer from `Box::into_raw` (set in `new`
        //   and `reinit_after_fork`);
        // - a replaced box is leaked, never freed, and the current one is
        //   freed only in `Drop`, which cannot run while `&self` lives.
        unsafe { &*ptr }
    }

    /// This lock's identity for per-thread class memory.
    fn id(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    #[inline]
    fn class_of(&self, token: Token) -> ThreadClass {
        match self.inner.policy {
            Policy::Priority => class::recall(self.id(), token.get()),
            _ => ThreadClass::Io,
        }
    }

    #[inline]
    fn check_not_holder(&self, token: Token) -> Result<(), GilError> {
        // Only `token` itself ever stores `token` here, and it clears it
        // before letting go, so this read is exact for the calling token.
        if self.inner.hot.owner.load(Relaxed) == token.get() {
            Err(GilError::AlreadyHeld)
        } else {
            Ok(())
        }
    }

    /// The uncontended paths: reclaim our own lazily released lock, or take
    /// a free one nobody waits for.
    #[inline]
    fn try_fast(&self, token: Token) -> bool {
        if self.inner.lazy_release.is_some() {
            if let Some(before) = self.reclaim(token) {
                // Back from a call that nobody needed the lock during: no
                // switch happened, and the thread is still I/O-class.
                self.inner.hot.owner.store(token.get(), Relaxed);
                self.inner.hot.holder_class.store(ThreadClass::Io as u8, Relaxed);
                bump(&self.inner.hot.acquisitions, 1);
                if before & INSTR != 0 {
                    self.observe_acquire(token);
                }
                return true;
            }
        }
        match self.inner.hot.state.compare_exchange(0, LOCKED, Acquire, Relaxed) {
            Ok(_) => {
                self.became_holder(token, self.class_of(token));
                true
            }
            Err(s) if s & !INSTR == 0 => self.try_fast_observed(token),
            Err(_) => false,
        }
    }

    /// The fast path with observers on: free and nobody waits, but `INSTR`
    /// is set.
    #[cold]
    fn try_fast_observed(&self, token: Token) -> bool {
        if self.in_callback() {
            return false; // the slow path says why
        }
        let mut s = self.inner.hot.state.load(Relaxed);
        while s & !INSTR == 0 {
            match self
                .inner
                .hot
                .state
                .compare_exchange_weak(s, s | LOCKED, Acquire, Relaxed)
            {
                Ok(_) => {
                    self.became_holder(token, self.class_of(token));
                    self.observe_acquire(token);
                    return true;
                }
                Err(now) => s = now,
            }
        }
        false
    }

    /// Clears SYSCALL if the current episode is `token`'s own; the state
    /// before if it did. Retries while only the other flag bits move (a waiter arriving
    /// sets WAITERS): failing here would leave `token` waiting for its own
    /// system call to time out.
    #[inline]
    fn reclaim(&self, token: Token) -> Option<u64> {
        // Acquire: a lazy release stores `syscall_owner` before its Release
        // CAS, so reading that CAS's value shows the matching owner.
        let mut s = self.inner.hot.state.load(Acquire);
        while s & SYSCALL != 0 && self.inner.hot.syscall_owner.load(Relaxed) == token.get() {
            match self
                .inner
                .hot
                .state
                .compare_exchange_weak(s, s & !SYSCALL, Acquire, Acquire)
            {
                Ok(_) => return Some(s),
                Err(now) => s = now,
            }
        }
        None
    }

    /// Bookkeeping of a new holder; runs right after the lock word was won.
    #[inline]
    fn became_holder(&self, token: Token, class: ThreadClass) {
        let hot = &*self.inner.hot;
        hot.owner.store(token.get(), Relaxed);
        hot.holder_class.store(class as u8, Relaxed);
        if hot.last_holder.load(Relaxed) != token.get() {
            hot.last_holder.store(token.get(), Relaxed);
            bump(&hot.switch_number, 1);
        }
        bump(&hot.acquisitions, 1);
    }

    /// Observers' share of an acquisition on a path that is not the fast
    /// one (which leaves observing to `try_fast_observed`).
    #[inline]
    fn observe_acquire(&self, token: Token) {
        let instr = self.inner.hot.instr.load(Relaxed);
        if instr != 0 {
            self.observe_acquire_slow(instr, token);
        }
    }

    #[cold]
    fn observe_acquire_slow(&self, instr: u8, token: Token) {
        let now = now_ns();
        if instr & INSTR_HIST != 0 {
            self.inner.hot.acquired_at.store(now, Relaxed);
        }
        if instr & INSTR_HOOK != 0 {
            self.emit(|| Event {
                kind: EventKind::Acquired,
                token,
                other: None,
                time_ns: now,
            });
        }
    }

    #[cold]
    fn observe_release(&self, token: Token, reason: ReleaseReason) {
        let instr = self.inner.hot.instr.load(Relaxed);
        let now = now_ns();
        if instr & INSTR_HIST != 0 {
            // 0: histograms were turned on during this hold.
            let since = self.inner.hot.acquired_at.swap(0, Relaxed);
            if since != 0 {
                self.inner.hold_hist.record(now.saturating_sub(since));
            }
        }
        if instr & INSTR_HOOK != 0 {
            self.emit(|| Event {
                kind: EventKind::Released(reason),
                token,
                other: None,
                time_ns: now,
            });
        }
    }

    /// Sets LOCKED if it is clear; `true` if this call set it.
    fn try_lock_word(&self) -> bool {
        let mut s = self.inner.hot.state.load(Relaxed);
        while s & LOCKED == 0 {
            match self
                .inner
                .hot
                .state
                .compare_exchange_weak(s, s | LOCKED, Acquire, Relaxed)
            {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    /// Whether a waiter of `class` may take a free lock now.
    fn may_take(&self, class: ThreadClass, room: &WaitRoom, starving: bool) -> bool {
        match self.inner.policy {
            Policy::Priority if room.starving > 0 => starving,
            Policy::Priority => class == ThreadClass::Io || room.io_waiters == 0,
            _ => true,
        }
    }

    /// The lock word was just won under the mutex: a new holder starts with
    /// no drop request (CPython clears the bit in `take_gil`), and forced
    /// releasers waiting for a switch are told to look.
    fn took_over_under_mutex(&self, token: Token, class: ThreadClass, slow: &Slow, room: &mut WaitRoom) {
        self.inner.drop_request.store(false, Relaxed);
        room.interval_request = false;
        self.became_holder(token, class);
        self.observe_acquire(token);
        if self.inner.monitor {
            self.watch_new_holder(room);
        }
        if room.switch_waiters > 0 {
            slow.switch_cond.notify_all();
        }
    }

    /// A lazy voluntary release: mark the holder as in a system call, unless
    /// the release must be a real one (a drop request is pending, which
    /// CPython answers with a forced switch).
    #[inline]
    fn release_lazily(&self, token: Token) -> Lazy {
        let hot = &*self.inner.hot;
        // Written while still the holder: nobody else writes these now.
        hot.syscall_owner.store(token.get(), Relaxed);
        hot.owner.store(0, Relaxed);
        let s = hot.state.load(Relaxed);
        if s & (WAITERS | INSTR) == 0 {
            bump(&hot.lazy_releases, 1);
            if hot
                .state
                .compare_exchange(s, (s | SYSCALL) + GEN_ONE, Release, Relaxed)
                .is_ok()
            {
                return Lazy::Done;
            }
            // A waiter (or an observer) came: undo the count.
            hot.lazy_releases
                .store(hot.lazy_releases.load(Relaxed).wrapping_sub(1), Relaxed);
        }
        self.release_lazily_contended(token)
    }

    /// `release_lazily` when observers are on or somebody waits.
    #[cold]
    fn release_lazily_contended(&self, token: Token) -> Lazy {
        let hot = &*self.inner.hot;
        if self.in_callback() {
            // See `release_contended`; `syscall_owner` means nothing
            // without SYSCALL, which is clear while `token` holds the lock.
            hot.owner.store(token.get(), Relaxed);
            return Lazy::Reentrant;
        }
        let mut s = hot.state.load(Relaxed);
        let observed = s & INSTR != 0;
        if observed {
            self.observe_release(token, ReleaseReason::Voluntary);
        }
        while s & WAITERS == 0 {
            // Counted while still the holder (its only writer), undone if
            // the CAS fails.
            bump(&hot.lazy_releases, 1);
            match hot
                .state
                .compare_exchange_weak(s, (s | SYSCALL) + GEN_ONE, Release, Relaxed)
            {
                Ok(_) => return Lazy::Done,
                Err(now) => {
                    hot.lazy_releases
                        .store(hot.lazy_releases.load(Relaxed).wrapping_sub(1), Relaxed);
                    s = now;
                }
            }
        }
        if self.inner.monitor {
            // Somebody waits, and the monitor keeps the time: no mutex, no
            // wake-up, at most a signal to the monitor.
            if self.inner.drop_request.load(Relaxed) {
                hot.owner.store(token.get(), Relaxed);
                return Lazy::Real { observed };
            }
            bump(&hot.lazy_releases, 1);
            let mut s = hot.state.load(Relaxed);
            while let Err(now) = hot
                .state
                .compare_exchange_weak(s, (s | SYSCALL) + GEN_ONE, Release, Relaxed)
            {
                s = now;
            }
            self.ask_monitor_to_look();
            return Lazy::Done;
        }
        // Somebody waits: under the mutex, so the waiter that is woken starts
        // timing the call right away.
        let slow = self.slow();
        let room = slow.mutex.lock();
        if self.inner.drop_request.load(Relaxed) {
            drop(room);
            hot.owner.store(token.get(), Relaxed);
            return Lazy::Real { observed };
        }
        bump(&hot.lazy_releases, 1);
        let mut s = hot.state.load(Relaxed);
        loop {
            match hot
                .state
                .compare_exchange_weak(s, (s | SYSCALL) + GEN_ONE, Release, Relaxed)
            {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        self.wake_next(slow, &room);
        Lazy::Done
    }

    /// Wakes the waiter that should go next.
    fn wake_next(&self, slow: &Slow, room: &WaitRoom) {
        if self.inner.monitor {
            self.wake_designee(room);
        } else if room.starving > 0 {
            slow.cpu_cond.notify_all();
        } else if room.io_waiters > 0 {
            slow.io_cond.notify_one();
        } else if room.cpu_waiters > 0 {
            slow.cpu_cond.notify_one();
        }
    }

    #[cold]
    fn acquire_slow(&self, token: Token, mut should_abort: AbortCheck<'_>) -> Result<(), GilError> {
        if self.in_callback() {
            // The lock is held, awaited or observed while its callback runs:
            // waiting here would wait for this very thread.
            return Err(GilError::Reentrant);
        }
        if self.inner.monitor {
            return self.acquire_slow_monitored(token, should_abort);
        }
        let started = Instant::now();
        let class = self.class_of(token);
        let slow = self.slow();
        let mut room = slow.mutex.lock();
        match class {
            ThreadClass::Io => room.io_waiters += 1,
            ThreadClass::Cpu => room.cpu_waiters += 1,
        }
        // Acquire: pairs with the previous releaser's Release, so `owner`
        // reads below see its clearing store, hence 0 or the current holder.
        self.inner.hot.state.fetch_or(WAITERS, Acquire);
        if self.inner.hot.instr.load(Relaxed) & INSTR_HOOK != 0 {
            self.emit(|| Event::now(EventKind::WaitStart, token, None));
        }
        let mut starving = false;
        // The lazy-release episode being timed: (generation, first seen).
        let mut episode: Option<(u64, Stamp)> = None;
        // The switch number of the holder already preempted by this waiter.
        let mut preempted: Option<u64> = None;
        // With lazy release: since when this waiter has waited for the
        // current holder (its switch number), across wake-ups.
        let mut waiting_on: Option<(u64, Stamp)> = None;
        #[cfg(gil_loom)]
        let first_tick = room.ticks;
        let took = loop {
            let s = self.inner.hot.state.load(Relaxed);
            let may_take = self.may_take(class, &room, starving);
            if may_take && self.try_lock_word() {
                break Ok(());
            }
            // What this wait is for, and the switch number at its start.
            let mut holder_running = None;
            let timed_out = if s & SYSCALL != 0 {
                if self.reclaim(token).is_some() {
                    // Our own system call (the fast path lost a race with a
                    // waiter's arrival): just take it back.
                    break Ok(());
                }
                // The holder is in a system call: take it over once the call
                // has lasted the threshold.
                let threshold = self.inner.lazy_release.unwrap_or_default();
                let gen = s & !(GEN_ONE - 1);
                let since = match episode {
                    Some((g, since)) if g == gen => since,
                    _ => {
                        let now = Stamp::now(&room);
                        episode = Some((gen, now));
                        now
                    }
                };
                if since.passed(threshold, &room)
                    && may_take
                    && self
                        .inner
                        .hot
                        .state
                        .compare_exchange(s, s & !SYSCALL, Acquire, Relaxed)
                        .is_ok()
                {
                    bump(&self.inner.lazy_takeovers, 1);
                    if self.inner.hot.instr.load(Relaxed) & INSTR_HOOK != 0 {
                        if let Some(from) = Token::new(self.inner.hot.syscall_owner.load(Relaxed)) {
                            self.emit(|| Event::now(EventKind::LazyTakeover, from, Some(token)));
                        }
                    }
                    break Ok(());
                }
                // The holder's switch interval runs on while it is in short
                // calls: a thread that is in a call most of the time but
                // never for long must still be asked to drop. The request
                // then only raises the flag (nobody runs to call back); the
                // holder answers at its next release.
                let sn = self.inner.hot.switch_number.load(Relaxed);
                let held = holder_since(&mut waiting_on, sn, &room);
                holder_running = Some(sn);
                let left = since.left(threshold).min(held.left(self.interval()));
                self.timed_wait(slow.cond(class), &mut room, left);
                // A call that has outlasted the threshold is taken over (next
                // round), not asked to end.
                held.passed(self.interval(), &room) && !since.passed(threshold, &room)
            } else if s & LOCKED == 0 {
                // Free, but not ours to take (priority): wait to be woken.
                self.timed_wait(slow.cond(class), &mut room, self.interval())
            } else {
                // Priority: an I/O-class waiter does not wait out the
                // interval behind a CPU-class holder, and a starving CPU
                // waiter does not wait for anybody.
                let urgent = self.inner.policy == Policy::Priority
                    && (starving
                        || (class == ThreadClass::Io
                            && ThreadClass::from_u8(self.inner.hot.holder_class.load(Relaxed)) == ThreadClass::Cpu));
                let sn = self.inner.hot.switch_number.load(Relaxed);
                if urgent && preempted != Some(sn) {
                    preempted = Some(sn);
                    if !starving {
                        bump(&self.inner.preemptions, 1);
                    }
                    if let Err(panic) = self.request_drop(Some(token)) {
                        self.leave_wait_room(slow, &mut room, class, starving);
                        drop(room);
                        std::panic::resume_unwind(panic);
                    }
                    if let Some(limit) = self.inner.spin {
                        drop(room);
                        self.spin_until_free(limit);
                        room = slow.mutex.lock();
                        continue;
                    }
                }
                holder_running = Some(sn);
                if self.inner.lazy_release.is_some() {
                    // Every lazy release wakes a waiter (to time the call);
                    // such wake-ups must not restart the interval, or a
                    // thread making system calls all the time would never be
                    // asked to drop. So the interval runs from when this
                    // waiter started waiting on this holder.
                    let since = holder_since(&mut waiting_on, sn, &room);
                    let left = since.left(self.interval());
                    self.timed_wait(slow.cond(class), &mut room, left);
                    since.passed(self.interval(), &room)
                } else {
                    self.timed_wait(slow.cond(class), &mut room, self.interval())
                }
            };
            if !timed_out {
                continue;
            }
            if let Some(check) = should_abort.as_mut() {
                if self.ask_abort(&mut **check) {
                    self.leave_wait_room(slow, &mut room, class, starving);
                    return Err(GilError::Aborted);
                }
            }
            if class == ThreadClass::Cpu && self.inner.policy == Policy::Priority && !starving {
                #[cfg(not(gil_loom))]
                let overdue = started.elapsed() >= self.interval() * STARVATION_INTERVALS as u32;
                #[cfg(gil_loom)]
                let overdue = room.ticks.wrapping_sub(first_tick) >= 2;
                if overdue {
                    starving = true;
                    room.starving += 1;
                    bump(&self.inner.starvation_promotions, 1);
                    continue;
                }
            }
            // A whole interval passed with the holder running. Ask for a
            // drop only if nobody took the lock in the meantime: after a
            // switch the new holder gets its own full interval (CPython's
            // rule).
            let now = self.inner.hot.state.load(Relaxed);
            if holder_running.is_some_and(|sn| sn == self.inner.hot.switch_number.load(Relaxed)) && now & LOCKED != 0 {
                room.interval_request = true;
                if let Err(panic) = self.request_drop(Some(token)) {
                    self.leave_wait_room(slow, &mut room, class, starving);
                    drop(room);
                    std::panic::resume_unwind(panic);
                }
                if waiting_on.is_some() {
                    // Lazy release: the holder gets a whole interval to
                    // answer before it is asked again (as the timed waits of
                    // the other policies give it), not a wake-up a
                    // microsecond.
                    waiting_on = holder_running.map(|sn| (sn, Stamp::now(&room)));
                }
                if let Some(limit) = self.inner.spin {
                    drop(room);
                    self.spin_until_free(limit);
                    room = slow.mutex.lock();
                }
            }
        };
        took?;
        self.unregister(&mut room, class, starving);
        if room.waiters() == 0 {
            self.inner.hot.state.fetch_and(!WAITERS, Relaxed);
        }
        self.took_over_under_mutex(token, class, slow, &mut room);
        self.waited(started);
        Ok(())
    }

    /// Reports an event to the hook, if one is installed, as a callback of
    /// this lock (see [`Gil::in_callback`]).
    fn emit(&self, event: impl FnOnce() -> Event) {
        let _inside = self.enter_callback();
        self.inner.hook.emit(event);
    }

    /// Asks an `acquire_or_abort` check whether to give up, as a callback of
    /// this lock.
    fn ask_abort(&self, check: &mut dyn FnMut() -> bool) -> bool {
        let _inside = self.enter_callback();
        check()
    }

    /// Accounts a wait that ended with the lock; called under the mutex.
    fn waited(&self, started: Instant) {
        let waited = saturating_nanos(started.elapsed());
        bump(&self.inner.wait_ns, waited);
        if self.inner.hot.instr.load(Relaxed) & INSTR_HIST != 0 {
            self.inner.wait_hist.record(waited);
        }
    }

    fn interval(&self) -> Duration {
        Duration::from_micros(self.inner.interval_us.load(Relaxed).max(1))
    }

    fn unregister(&self, room: &mut WaitRoom, class: ThreadClass, starving: bool) {
        match class {
            ThreadClass::Io => room.io_waiters -= 1,
            ThreadClass::Cpu => room.cpu_waiters -= 1,
        }
        if starving {
            room.starving -= 1;
        }
    }

    /// Watches the lock word, without the mutex, until the lock is free or
    /// `limit` has passed (a bounded spin; see `GilConfig::spin_us`).
    #[cfg(not(gil_loom))]
    fn spin_until_free(&self, limit: Duration) {
        let start = Instant::now();
        while self.inner.hot.state.load(Relaxed) & LOCKED != 0 && start.elapsed() < limit {
            for _ in 0..32 {
                std::hint::spin_loop();
            }
        }
    }

    /// Under loom a spin is one look: loom explores the interleavings a
    /// longer one would allow.
    #[cfg(gil_loom)]
    fn spin_until_free(&self, _limit: Duration) {
        let _ = self.inner.hot.state.load(Relaxed);
        crate::sync::yield_now();
    }

    /// Waits on `cond` for up to `timeout`; `true` if it timed out.
    #[cfg(not(gil_loom))]
    fn timed_wait(&self, cond: &Condvar, room: &mut MutexGuard<'_, WaitRoom>, timeout: Duration) -> bool {
        cond.wait_timeout(room, timeout.max(Duration::from_micros(1)))
    }

    /// Under loom, time passes only when the model's clock ticks.
    #[cfg(gil_loom)]
    fn timed_wait(&self, cond: &Condvar, room: &mut MutexGuard<'_, WaitRoom>, _timeout: Duration) -> bool {
        let before = room.ticks;
        cond.wait(room);
        room.ticks != before
    }

    /// A waiter leaves without the lock (abort, or a panicking callback).
    fn leave_wait_room(&self, slow: &Slow, room: &mut WaitRoom, class: ThreadClass, starving: bool) {
        self.unregister(room, class, starving);
        if room.waiters() == 0 {
            self.inner.hot.state.fetch_and(!WAITERS, Relaxed);
            // Nobody is left to take over: a pending request is moot, and a
            // forced releaser must stop waiting for a switch.
            self.inner.drop_request.store(false, Relaxed);
            room.interval_request = false;
            if room.switch_waiters > 0 {
                slow.switch_cond.notify_all();
            }
        } else if !self.word_locked() || starving {
            // We may have consumed the wake-up meant for taking the lock, or
            // held back the others while starving.
            self.wake_next(slow, room);
        }
    }

    /// Raises the drop request on the current holder. Called under the
    /// mutex with WAITERS set, so the holder cannot finish releasing (that
    /// needs the mutex) while the callback runs.
    fn request_drop(&self, by: Option<Token>) -> Result<(), Box<dyn Any + Send>> {
        let fresh = !self.inner.drop_request.swap(true, Relaxed);
        if fresh {
            bump(&self.inner.drop_requests, 1);
        }
        let owner = Token::new(self.inner.hot.owner.load(Relaxed));
        if fresh && self.inner.hot.instr.load(Relaxed) & INSTR_HOOK != 0 {
            // Without an owner the holder is letting go right now (it cleared
            // `owner` and waits for the mutex): the request is its.
            if let Some(asked) = owner.or_else(|| Token::new(self.inner.hot.last_holder.load(Relaxed))) {
                self.emit(|| Event::now(EventKind::DropRequested, asked, by));
            }
        }
        // No owner: the holder is letting go (see above), or it is the
        // instant between a fast-path CAS and its `owner` store. The flag is
        // up either way; only the callback needs a live holder.
        let Some(holder) = owner else {
            return Ok(());
        };
        match &self.inner.on_drop_request {
            Some(callback) => {
                let _inside = self.enter_callback();
                catch_unwind(AssertUnwindSafe(|| callback(holder)))
            }
            None => Ok(()),
        }
    }

    #[cold]
    fn release_slow(&self, token: Token, reason: ReleaseReason) {
        let slow = self.slow();
        let mut room = slow.mutex.lock();
        let requested = self.inner.drop_request.swap(false, Relaxed);
        let held_too_long = std::mem::take(&mut room.interval_request);
        if requested && held_too_long && reason == ReleaseReason::Voluntary && self.inner.policy == Policy::Priority {
            // It kept the lock a whole interval while someone waited and had
            // to be asked: CPU-bound behaviour, whatever call it makes now.
            // Left I/O-class, a thread whose calls return at once would
            // preempt its successor as soon as it is back, again and again.
            // (A request made to preempt it, or for a starving waiter, says
            // nothing about how long it held: no change then.)
            class::remember(self.id(), token.get(), ThreadClass::Cpu);
        }
        self.inner.hot.state.fetch_and(!LOCKED, Release);
        self.wake_next(slow, &room);
        let must_wait = match reason {
            ReleaseReason::Final => false,
            ReleaseReason::Forced => true,
            ReleaseReason::Voluntary => requested,
        };
        if !must_wait || room.waiters() == 0 {
            return;
        }
        // Forced switching: don't return (and maybe win the lock straight
        // back) before somebody else has taken it.
        room.switch_waiters += 1;
        while self.inner.hot.last_holder.load(Relaxed) == token.get() && room.waiters() > 0 {
            slow.switch_cond.wait(&mut room);
        }
        room.switch_waiters -= 1;
        if self.inner.hot.last_holder.load(Relaxed) != token.get() {
            bump(&self.inner.forced_switches, 1);
            if self.inner.hot.instr.load(Relaxed) & INSTR_HOOK != 0 {
                let to = Token::new(self.inner.hot.last_holder.load(Relaxed));
                self.emit(|| Event::now(EventKind::ForcedSwitch, token, to));
            }
        }
    }
}

/// A point in time for timing a lazy-release episode: a clock reading, or
/// under loom the model clock's tick count.
#[derive(Clone, Copy)]
struct Stamp {
    #[cfg(not(gil_loom))]
    at: Instant,
    #[cfg(gil_loom)]
    tick: u64,
}

impl Stamp {
    #[cfg(not(gil_loom))]
    fn now(_room: &WaitRoom) -> Stamp {
        Stamp { at: Instant::now() }
    }

    #[cfg(gil_loom)]
    fn now(room: &WaitRoom) -> Stamp {
        Stamp { tick: room.ticks }
    }

    #[cfg(not(gil_loom))]
    fn passed(self, d: Duration, _room: &WaitRoom) -> bool {
        self.at.elapsed() >= d
    }

    #[cfg(gil_loom)]
    fn passed(self, _d: Duration, room: &WaitRoom) -> bool {
        room.ticks != self.tick
    }

    /// How much of `d` is left since this stamp (at least 1 µs).
    #[cfg(not(gil_loom))]
    fn left(self, d: Duration) -> Duration {
        d.saturating_sub(self.at.elapsed()).max(Duration::from_micros(1))
    }

    #[cfg(gil_loom)]
    fn left(self, d: Duration) -> Duration {
        d
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let ptr = self.slow.load(Acquire);
        // SAFETY:
        // - `ptr` came from `Box::into_raw` and is freed only here;
        // - `&mut self` means no thread is inside a method using it.
        drop(unsafe { Box::from_raw(ptr) });
    }
}

impl std::fmt::Debug for Gil {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gil")
            .field("policy", &self.inner.policy)
            .field("lazy_release_us", &self.lazy_release_us())
            .field("monitor", &self.inner.monitor)
            .field("spin_us", &self.spin_us())
            .field("switch_interval_us", &self.switch_interval_us())
            .field("holder", &self.holder())
            .field("drop_requested", &self.drop_requested())
            .field("counters", &self.counters())
            .finish()
    }
}

/// Lazy release: since when a waiter has waited on the holder with switch
/// number `sn` (`waiting_on` remembers it across wake-ups).
fn holder_since(waiting_on: &mut Option<(u64, Stamp)>, sn: u64, room: &WaitRoom) -> Stamp {
    match *waiting_on {
        Some((w, since)) if w == sn => since,
        _ => {
            let now = Stamp::now(room);
            *waiting_on = Some((sn, now));
            now
        }
    }
}

/// Adds to a counter that has a single writer at a time (the holder, or
/// whoever holds the mutex): a load and a store, no read-modify-write.
#[inline]
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(by), Relaxed);
}

fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
