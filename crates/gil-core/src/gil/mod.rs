//! The lock: CPython's new-GIL protocol around a one-word fast path, with
//! the priority policy, lazy release and the monitor as options.
//!
//! One concept per file:
//!
//! | file           | what it holds                                                          |
//! |----------------|------------------------------------------------------------------------|
//! | `mod.rs`       | [`Gil`]: the public calls, configuration, queries, counters             |
//! | `word.rs`      | the lock word (`Word`: every change to it, each ordering argued once), its state table, and the uncontended paths |
//! | `room.rs`      | the waiting room (the monitor's share too): join / leave, wake-ups, drop requests, forced switching |
//! | `wait.rs`      | waiting: one loop for every waiter, and the time a waiter keeps itself  |
//! | `monitor.rs`   | the time the monitor keeps instead: what a look at a lock does         |
//! | `monitor/process.rs` | the process-wide monitor thread that keeps the time         |
//! | `lazy.rs`      | lazy release                                                           |
//! | `observe.rs`   | event hook and histograms                                              |
//! | `callbacks.rs` | which of the lock's callbacks a thread is inside (re-entry)            |
//! | `fork.rs`      | re-creating the lock in a fork child                                   |
//!
//! The scheduling rules themselves (who may take, who is woken, who
//! preempts, which class a releaser becomes, the starvation bound) are
//! plain functions in [`crate::policy`]; the primitives and the clock come
//! from `crate::sync`, the only place that differs under loom.

use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;

mod callbacks;
mod fork;
mod lazy;
mod monitor;
mod observe;
mod room;
mod wait;
mod word;

pub use monitor::monitor_wakeups;

use self::lazy::Lazy;
use self::room::Slow;
use self::word::{Hot, INSTR, LOCKED, SYSCALL, WAITERS};
use crate::accounting::Accounts;
use crate::class::{self, ThreadClass};
use crate::config::{
    check_laps, check_lazy_threshold, check_spin, check_switch_interval, DropRequestCallback,
    DEFAULT_SWITCH_INTERVAL_US,
};
use crate::events::HookList;
use crate::policy;
use crate::reason::ReleaseReason;
use crate::stats::Histogram;
use crate::sync::{AtomicBool, AtomicPtr, AtomicU64};
use crate::{GilConfig, GilError, Policy, Token};

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
    /// Priority policy with a spin limit: times a CPU-class waiter spun
    /// while an I/O-class thread held the lock and took it when that thread
    /// let go, without sleeping (see [`GilConfig::spin_us`]).
    pub cpu_spin_takes: u64,
}

/// What a waiter checks when one switch interval has passed (see
/// [`Gil::acquire_or_abort`]).
type AbortCheck<'a> = Option<&'a mut dyn FnMut() -> bool>;

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
    cpu_spin_takes: AtomicU64,
    policy: Policy,
    /// `Some(threshold)` when lazy release is on.
    lazy_release: Option<Duration>,
    /// Timed by the monitor thread, waiters served in order (`monitor.rs`).
    monitor: bool,
    /// How long a thread waiting for a hand-off spins before sleeping
    /// (`GilConfig::spin_us`), while spinning can help (`Gil::spin_limit`).
    spin: Option<Duration>,
    /// The spin limit as configured, in microseconds.
    spin_us: u64,
    /// Set while a CPU-class waiter spins for an I/O-class holder: one
    /// at a time (`Gil::spin_while_io_holds`).
    cpu_spinner: AtomicBool,
    /// A CPU-class thread always takes the lock through the waiting room
    /// ([`policy::cpu_through_room`]).
    cpu_through_room: bool,
    /// The bound on laps (0: none), see `GilConfig::laps`.
    laps: u32,
    on_drop_request: Option<DropRequestCallback>,
    /// Always a valid `Box<Slow>` from `Box::into_raw`; freed only in `Drop`.
    slow: AtomicPtr<Slow>,
    hook: HookList,
    /// Per-thread accounting. Always a valid `Box<Accounts>` from
    /// `Box::into_raw`; replaced (the old one leaked) after a fork, freed
    /// only in `Drop`.
    accounts: std::sync::atomic::AtomicPtr<Accounts>,
    wait_hist: Histogram,
    hold_hist: Histogram,
    /// Serialises changes of `Hot::instr` and the `INSTR` bit.
    observers: std::sync::atomic::AtomicBool,
}

impl Gil {
    /// Builds a free lock from `config`.
    ///
    /// # Errors
    /// [`GilError::InvalidSwitchInterval`],
    /// [`GilError::InvalidLazyThreshold`] or [`GilError::InvalidSpin`] if a
    /// duration is out of range, [`GilError::InvalidLaps`] if the bound on
    /// laps is.
    pub fn new(config: GilConfig) -> Result<Gil, GilError> {
        let interval = check_switch_interval(config.switch_interval_us.unwrap_or(DEFAULT_SWITCH_INTERVAL_US))?;
        let lazy = check_lazy_threshold(config.lazy_release_us)?;
        let spin = check_spin(config.spin_us)?;
        let laps = check_laps(config.laps)?;
        if spin > 0 {
            // The CPU quota is read here, then by threads made to let go
            // (`release_contended`), never on a waiter's way to the lock.
            crate::sync::refresh_quota(true);
        }
        Ok(Gil {
            inner: Arc::new(Inner {
                hot: CachePadded::new(Hot::new()),
                drop_request: CachePadded::new(AtomicBool::new(false)),
                interval_us: AtomicU64::new(interval),
                drop_requests: AtomicU64::new(0),
                forced_switches: AtomicU64::new(0),
                wait_ns: AtomicU64::new(0),
                preemptions: AtomicU64::new(0),
                lazy_takeovers: AtomicU64::new(0),
                starvation_promotions: AtomicU64::new(0),
                cpu_spin_takes: AtomicU64::new(0),
                policy: config.policy,
                lazy_release: lazy.map(Duration::from_micros),
                monitor: config.monitor,
                spin: (spin > 0).then(|| Duration::from_micros(spin)),
                spin_us: spin,
                cpu_spinner: AtomicBool::new(false),
                cpu_through_room: policy::cpu_through_room(config.policy, spin > 0),
                laps,
                on_drop_request: config.on_drop_request,
                slow: AtomicPtr::new(Box::into_raw(Box::new(Slow::new()))),
                hook: HookList::new(),
                accounts: std::sync::atomic::AtomicPtr::new(Box::into_raw(Box::new(Accounts::new()))),
                wait_hist: Histogram::new(),
                hold_hist: Histogram::new(),
                observers: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// Blocks until `token` holds the lock.
    ///
    /// While it waits, each full switch interval that passes without a
    /// switch raises a drop request on the holder (flag + callback); under
    /// the priority policy an I/O-class waiter asks a CPU-class holder at
    /// once. On Linux, waiting is no cancellation point for a thread with
    /// deferred cancellation: a `pthread_cancel` takes effect at its next
    /// cancellation point after the call (a thread with asynchronous
    /// cancellation: see [`crate::cancel`]).
    ///
    /// # Errors
    /// [`GilError::AlreadyHeld`] if `token` holds it already. A token that
    /// made a [`ReleaseReason::Final`] release may acquire again: the lock
    /// treats it as a new thread, because hosts recycle thread-state memory.
    #[inline]
    pub fn acquire(&self, token: Token) -> Result<(), GilError> {
        self.check_not_holder(token)?;
        if self.try_fast_unless_cpu(token) {
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
    /// [`GilError::Reentrant`]. It runs with the thread's cancellation
    /// disabled ([`NoCancel`](crate::NoCancel)): a pending `pthread_cancel`
    /// acts at the thread's next cancellation point after this returns.
    pub fn acquire_or_abort(&self, token: Token, should_abort: &mut dyn FnMut() -> bool) -> Result<(), GilError> {
        self.check_not_holder(token)?;
        if self.try_fast_unless_cpu(token) {
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
        let class = self.class_of(token);
        if self.try_fast(token, class) {
            return Ok(true);
        }
        if self.in_callback() {
            return Err(GilError::Reentrant);
        }
        if self.inner.hot.word.load(Relaxed) & LOCKED != 0 {
            return Ok(false);
        }
        // Free, but waiters are being woken: take it under the mutex, like
        // they do, so they always see a consistent holder.
        let slow = self.slow();
        let mut room = slow.mutex.lock();
        if !self.may_take_now(token, class, &mut room) || !self.try_lock_word() {
            return Ok(false);
        }
        self.took_over_under_mutex(token, class, false, slow, &mut room);
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
        if self.inner.hot.word.unlock_alone() {
            return Ok(());
        }
        self.release_contended(token, reason, observed)
    }

    /// Under the priority policy, records the class `token` has after
    /// releasing for `reason` (see [`class`]).
    #[inline]
    fn remember_class(&self, token: Token, reason: ReleaseReason) {
        if let Some(class) = policy::class_after(self.inner.policy, reason) {
            class::remember(self.id(), token.get(), class);
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
        if self.inner.hot.word.load(Relaxed) & INSTR != 0 && !observed {
            self.observe_release(token, reason);
        }
        if self.inner.hot.word.unlock_unless_waiters() {
            return Ok(());
        }
        self.release_slow(token, reason);
        if reason == ReleaseReason::Forced && self.inner.spin.is_some() {
            // Made to let go, and switched: a moment nobody waits on this
            // thread, for the (slow, rate-bounded) re-read of the quota.
            crate::sync::refresh_quota(false);
        }
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
        if self.inner.monitor && self.inner.hot.word.load(Relaxed) & WAITERS != 0 {
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
            laps: self.inner.laps,
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

    /// The bound on laps (0: none), see [`GilConfig::laps`].
    pub fn laps(&self) -> u32 {
        self.inner.laps
    }

    /// The spin limit in microseconds (0: no spinning), as configured: see
    /// [`GilConfig::spin_us`]. [`Gil::spin_us_now`] says whether the
    /// calling thread would spin now.
    pub fn spin_us(&self) -> u64 {
        self.inner.spin_us
    }

    /// The spin limit in effect for the calling thread now: [`Gil::spin_us`],
    /// or 0 while the CPUs it may use are one or fewer (its affinity, or
    /// the process's cgroup CPU quota), where a spinner would only delay the
    /// thread it waits for. Re-read at a bounded rate: the thread's
    /// affinity at most every 10 ms, the quota at most once a second (by a
    /// thread made to let go of the lock, after the switch).
    pub fn spin_us_now(&self) -> u64 {
        self.spin_limit().map_or(0, |_| self.inner.spin_us)
    }

    /// The spin limit in effect for the calling thread now (see
    /// [`Gil::spin_us_now`]): for the waiting paths, which re-read the
    /// CPUs at a bounded rate.
    pub(super) fn spin_limit(&self) -> Option<Duration> {
        self.inner.spin.filter(|_| crate::sync::spinning_helps())
    }

    /// The lazy-release threshold in microseconds, `None` if lazy release is off.
    pub fn lazy_release_us(&self) -> Option<u64> {
        self.inner.lazy_release.map(|d| d.as_micros() as u64)
    }

    /// Whether some token holds the lock (racy by nature; for observers). A
    /// lazily released lock does not count: its thread released it, and the
    /// lock is only reserved for it ([`is_reserved`](Self::is_reserved)).
    pub fn is_locked(&self) -> bool {
        self.inner.hot.word.load(Relaxed) & (LOCKED | SYSCALL) == LOCKED
    }

    /// Whether the lock is reserved for a thread that released it lazily
    /// and is in a system call: that thread takes it back without waiting
    /// if it returns within the threshold, a waiter takes it over after.
    /// [`settle`](Self::settle) ends a reservation nobody waits for (racy by
    /// nature; for observers).
    pub fn is_reserved(&self) -> bool {
        self.inner.hot.word.load(Relaxed) & SYSCALL != 0
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
            cpu_spin_takes: self.inner.cpu_spin_takes.load(Relaxed),
        }
    }

    /// Whether nobody holds the lock and nobody waits for it, i.e. it could
    /// be freed. A lazily released lock nobody waits for counts as idle: its
    /// thread has released it ([`settle`](Self::settle) ends the reservation).
    pub fn is_idle(&self) -> bool {
        let s = self.inner.hot.word.load(Acquire);
        // A waiter watching with `WAITERS` cleared (`spin_while_io_holds`)
        // is the CPU spinner.
        s & WAITERS == 0 && s & (LOCKED | SYSCALL) != LOCKED && !self.inner.cpu_spinner.load(Relaxed)
    }

    /// Ends the reservation of a lazily released lock that nobody waits
    /// for, so that it is plainly free (the thread in the call takes it the
    /// ordinary way when it comes back), and says whether the lock is now
    /// idle: neither held nor awaited.
    pub fn settle(&self) -> bool {
        self.inner.hot.word.settle()
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
        room.clock.tick();
        if self.inner.monitor {
            self.monitor_pass_locked(&mut room);
        }
        under_mutex();
        room.wake_all();
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

    fn accounts(&self) -> &Accounts {
        let ptr = self.inner.accounts.load(std::sync::atomic::Ordering::Acquire);
        // SAFETY:
        // - `accounts` always holds a pointer from `Box::into_raw` (set in
        //   `new` and `reinit_after_fork`);
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
}

impl Drop for Inner {
    fn drop(&mut self) {
        let ptr = self.slow.load(Acquire);
        // SAFETY:
        // - `ptr` came from `Box::into_raw` and is freed only here;
        // - `&mut self` means no thread is inside a method using it.
        drop(unsafe { Box::from_raw(ptr) });
        let ptr = *self.accounts.get_mut();
        // SAFETY: as for `slow`.
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
            .field("laps", &self.inner.laps)
            .field("switch_interval_us", &self.switch_interval_us())
            .field("holder", &self.holder())
            .field("drop_requested", &self.drop_requested())
            .field("counters", &self.counters())
            .finish()
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
