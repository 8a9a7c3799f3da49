//! The lock: CPython's new-GIL protocol around a one-word fast path, with
//! the priority policy, lazy release and the monitor as options.
//!
//! One concept per file. The lock's state, each part with one owner that
//! alone writes it:
//!
//! | file           | what it holds                                                          |
//! |----------------|------------------------------------------------------------------------|
//! | `word.rs`      | the lock word (`Word`: every change to it, each ordering argued once), its state table, and the fields the holder writes with it (`Hot`) |
//! | `room.rs`      | the waiting room: its mutex-guarded queue and census, the drop request and the watch (`Room`) |
//! | `tuning.rs`    | the settings the lock was built with, and the switch interval         |
//! | `counters.rs`  | the counters kept under the room's mutex, and the snapshot callers get |
//! | `observers.rs` | what observers asked for and collect: hooks, histograms, accounts      |
//!
//! and the paths through it, each a part of [`Gil`]'s behaviour:
//!
//! | file           | what it does                                                           |
//! |----------------|------------------------------------------------------------------------|
//! | `mod.rs`       | [`Gil`]: the public calls, the uncontended paths, queries, counters   |
//! | `handoff.rs`   | under the room's mutex: join / leave, whose turn it is, drop requests, a new holder, a release that wakes the next, forced switching |
//! | `wait.rs`      | waiting: one loop for every waiter                                     |
//! | `look.rs`      | one look at the lock's clock ([`policy::due`]), by a waiter or the monitor |
//! | `monitor.rs`   | the monitor: which locks it watches, and its looks                     |
//! | `monitor/process.rs` | the process-wide monitor thread that keeps the time         |
//! | `lazy.rs`      | lazy release                                                           |
//! | `observe.rs`   | event hooks, histograms and accounts: turning them on, feeding them    |
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
mod counters;
mod fork;
mod handoff;
mod lazy;
mod look;
pub(crate) mod monitor;
mod observe;
mod observers;
mod room;
mod tuning;
mod wait;
mod word;

pub use self::counters::Counters;
use self::counters::Tally;
use self::observers::Observers;
use self::room::{Room, Slow};
use self::tuning::Tuning;
use self::word::{Hot, INSTR, LOCKED, SYSCALL, WAITERS};
use crate::accounting::Accounts;
use crate::class::{self, ThreadClass};
use crate::policy;
use crate::reason::ReleaseReason;
use crate::{GilConfig, GilError, Policy, Token};

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
/// waiters, the monitor thread: its parts, split by who writes them.
struct Inner {
    /// The lock word and what the holder writes with it.
    hot: CachePadded<Hot>,
    /// The waiting room, the drop request and the watch.
    room: Room,
    /// The settings (written only by `set_switch_interval_us`).
    tuning: Tuning,
    /// The counters kept under the room's mutex.
    tally: Tally,
    /// The observers' hooks, histograms and accounts.
    observers: Observers,
}

impl Gil {
    /// Builds a free lock from `config`.
    ///
    /// # Errors
    /// [`GilError::InvalidSetting`] if a setting is out of its range
    /// ([`Settings::check`](crate::Settings::check)).
    pub fn new(config: GilConfig) -> Result<Gil, GilError> {
        let tuning = Tuning::new(config)?;
        if tuning.spin_us() > 0 {
            // The CPU quota is read here, then by threads made to let go
            // (`release_contended`), never on a waiter's way to the lock.
            crate::sync::refresh_quota(true);
        }
        Ok(Gil {
            inner: Arc::new(Inner {
                hot: CachePadded::new(Hot::new()),
                room: Room::new(),
                tuning,
                tally: Tally::new(),
                observers: Observers::new(),
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
        if self.inner.hot.locked() {
            return Ok(false);
        }
        // Free, but waiters are being woken: take it under the mutex, like
        // they do, so they always see a consistent holder.
        let slow = self.slow();
        let mut room = slow.lock();
        if !self.may_take_now(token, class, &mut room) || !self.inner.hot.word().try_lock() {
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
        if !self.inner.hot.holds(token) {
            return Err(GilError::NotHolder);
        }
        // Before anything can fail: a release refused as re-entrant leaves
        // this record too, but it is never read before the thread's real
        // release overwrites it (only a later acquisition reads it).
        self.remember_class(token, reason);
        if reason == ReleaseReason::Voluntary && self.inner.tuning.lazy_release().is_some() {
            return self.release_lazily(token);
        }
        self.release_now(token, reason, false)
    }

    /// Under the priority policy, records the class `token` has after
    /// releasing for `reason` (see [`class`]).
    #[inline]
    fn remember_class(&self, token: Token, reason: ReleaseReason) {
        if let Some(class) = policy::class_after(self.inner.tuning.policy(), reason) {
            class::remember(self.id(), token.get(), class);
        }
    }

    /// The release itself, not a lazy one. `observed`: it was reported to
    /// observers already.
    #[inline]
    fn release_now(&self, token: Token, reason: ReleaseReason, observed: bool) -> Result<(), GilError> {
        self.inner.hot.letting_go(reason == ReleaseReason::Final);
        // A pending drop request implies a waiter, hence WAITERS, hence the
        // slow path: the fast path never has a request to answer.
        if self.inner.hot.word().unlock_alone() {
            return Ok(());
        }
        self.release_contended(token, reason, observed)
    }

    /// A release that the fast path could not make: observers are on, or
    /// somebody waits. `observed`: the release was already reported.
    #[cold]
    fn release_contended(&self, token: Token, reason: ReleaseReason, observed: bool) -> Result<(), GilError> {
        let hot = &*self.inner.hot;
        if self.in_callback() {
            // From inside one of this lock's callbacks (which always runs
            // while the lock is awaited or observed, so the fast path failed
            // and led here): the mutex may be ours already.
            hot.release_refused(token);
            return Err(GilError::Reentrant);
        }
        if hot.word().load(Relaxed) & INSTR != 0 && !observed {
            self.observe_release(token, reason);
        }
        if hot.word().unlock_unless_waiters() {
            return Ok(());
        }
        self.release_slow(token, reason);
        if reason == ReleaseReason::Forced && self.inner.tuning.spin_us() > 0 {
            // Made to let go, and switched: a moment nobody waits on this
            // thread, for the (slow, rate-bounded) re-read of the quota.
            crate::sync::refresh_quota(false);
        }
        Ok(())
    }

    /// `acquire`'s uncontended paths: reclaim our own lazily released lock,
    /// or take a free one nobody waits for, except as a CPU-class thread
    /// that always goes through the waiting room
    /// ([`policy::cpu_through_room`]). A reclaim needs no class (a thread
    /// back from its own call is I/O-class: a lazy release is a voluntary
    /// one, and nothing else runs on this thread in between), so the class
    /// is looked up only for a free lock.
    #[inline]
    fn try_fast_unless_cpu(&self, token: Token) -> bool {
        if self.reclaim_fast(token) {
            return true;
        }
        let class = self.class_of(token);
        if class == ThreadClass::Cpu && self.inner.tuning.cpu_through_room() {
            return false;
        }
        self.take_free(token, class)
    }

    /// The uncontended paths as a thread of `class`: reclaim our own lazily
    /// released lock, or take a free one nobody waits for.
    #[inline]
    fn try_fast(&self, token: Token, class: ThreadClass) -> bool {
        self.reclaim_fast(token) || self.take_free(token, class)
    }

    /// With lazy release: takes back our own lazily released lock, if the
    /// call's episode is still ours; whether it did.
    #[inline]
    fn reclaim_fast(&self, token: Token) -> bool {
        if self.inner.tuning.lazy_release().is_none() {
            return false;
        }
        let hot = &*self.inner.hot;
        let Some(before) = hot.reclaim(token) else {
            return false;
        };
        hot.back_from_call(token);
        if before & INSTR != 0 {
            self.observe_acquire(token);
        }
        true
    }

    /// Takes a free lock nobody waits for, as a thread of `class`; whether
    /// it did.
    #[inline]
    fn take_free(&self, token: Token, class: ThreadClass) -> bool {
        let hot = &*self.inner.hot;
        match hot.word().lock_free() {
            Ok(()) => {
                hot.became_holder(token, class);
                true
            }
            Err(s) if s & !INSTR == 0 => self.try_fast_observed(token, class),
            Err(_) => false,
        }
    }

    /// The fast path with observers on: free and nobody waits, but `INSTR`
    /// is set.
    #[cold]
    fn try_fast_observed(&self, token: Token, class: ThreadClass) -> bool {
        if self.in_callback() {
            return false; // the slow path says why
        }
        if self.inner.hot.word().lock_free_observed() {
            self.inner.hot.became_holder(token, class);
            self.observe_acquire(token);
            return true;
        }
        false
    }

    /// Whether a waiter has asked the current holder to drop the lock. One
    /// relaxed load: cheap enough to poll in an interpreter loop.
    #[inline]
    pub fn drop_requested(&self) -> bool {
        self.inner.room.drop_requested()
    }

    /// For hosts that poll: if a drop has been requested, releases with
    /// [`ReleaseReason::Forced`] and re-acquires. `Ok(true)` if it did.
    ///
    /// # Errors
    /// [`GilError::NotHolder`] if `token` does not hold the lock.
    pub fn handle_drop_request(&self, token: Token) -> Result<bool, GilError> {
        if !self.inner.hot.holds(token) {
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
        self.inner.tuning.interval_us()
    }

    /// Sets the switch interval; waiters use it from their next wait on.
    /// 0 is accepted and behaves as 1 µs, as in CPython.
    ///
    /// # Errors
    /// [`GilError::InvalidSetting`] above
    /// [`MAX_SWITCH_INTERVAL_US`](crate::MAX_SWITCH_INTERVAL_US); the
    /// interval is then unchanged.
    pub fn set_switch_interval_us(&self, us: u64) -> Result<(), GilError> {
        self.inner.tuning.set_interval_us(us)?;
        if self.inner.tuning.monitored() && self.inner.hot.word().load(Relaxed) & WAITERS != 0 {
            // The monitor's schedule was made with the old interval.
            self.ask_monitor_to_look();
        }
        Ok(())
    }

    /// This lock's configuration as it stands (the switch interval may have
    /// changed since it was built).
    pub fn settings(&self) -> crate::Settings {
        self.inner.tuning.settings()
    }

    /// The scheduling policy this lock was built with.
    pub fn policy(&self) -> Policy {
        self.inner.tuning.policy()
    }

    /// Whether the monitor thread keeps this lock's time
    /// ([`GilConfig::monitor`]).
    pub fn uses_monitor(&self) -> bool {
        self.inner.tuning.monitored()
    }

    /// The bound on laps (0: none), see [`GilConfig::laps`].
    pub fn laps(&self) -> u32 {
        self.inner.tuning.laps()
    }

    /// The spin limit in microseconds (0: no spinning), as configured: see
    /// [`GilConfig::spin_us`]. [`Gil::spin_us_now`] says whether the
    /// calling thread would spin now.
    pub fn spin_us(&self) -> u64 {
        self.inner.tuning.spin_us()
    }

    /// The spin limit in effect for the calling thread now: [`Gil::spin_us`],
    /// or 0 while the CPUs it may use are one or fewer (its affinity, or
    /// the process's cgroup CPU quota), where a spinner would only delay the
    /// thread it waits for. Re-read at a bounded rate: the thread's
    /// affinity at most every 10 ms, the quota at most once a second (by a
    /// thread made to let go of the lock, after the switch).
    pub fn spin_us_now(&self) -> u64 {
        self.inner
            .tuning
            .spin_limit()
            .map_or(0, |_| self.inner.tuning.spin_us())
    }

    /// The lazy-release threshold in microseconds, `None` if lazy release is off.
    pub fn lazy_release_us(&self) -> Option<u64> {
        self.inner.tuning.lazy_release().map(|d| d.as_micros() as u64)
    }

    /// Whether some token holds the lock (racy by nature; for observers). A
    /// lazily released lock does not count: its thread released it, and the
    /// lock is only reserved for it ([`is_reserved`](Self::is_reserved)).
    pub fn is_locked(&self) -> bool {
        self.inner.hot.word().load(Relaxed) & (LOCKED | SYSCALL) == LOCKED
    }

    /// Whether the lock is reserved for a thread that released it lazily
    /// and is in a system call: that thread takes it back without waiting
    /// if it returns within the threshold, a waiter takes it over after.
    /// [`settle`](Self::settle) ends a reservation nobody waits for (racy by
    /// nature; for observers).
    pub fn is_reserved(&self) -> bool {
        self.inner.hot.word().load(Relaxed) & SYSCALL != 0
    }

    /// The token holding the lock and running, if any: `None` while the
    /// lock is free or its holder is in a lazily released system call (racy
    /// by nature; for observers).
    pub fn holder(&self) -> Option<Token> {
        self.inner.hot.holder()
    }

    /// The token that took the lock most recently, even if it has released
    /// it since — unless that was a final release (CPython's `last_holder`).
    pub fn last_holder(&self) -> Option<Token> {
        self.inner.hot.last_holder()
    }

    /// How many times the lock has changed hands (CPython's `switch_number`).
    pub fn switch_number(&self) -> u64 {
        self.inner.hot.switch_number()
    }

    /// A snapshot of the counters. Each is read without the lock, so the
    /// snapshot is not atomic as a whole.
    pub fn counters(&self) -> Counters {
        let hot = &*self.inner.hot;
        Counters {
            acquisitions: hot.acquisitions(),
            switches: hot.switch_number(),
            lazy_releases: hot.lazy_releases(),
            ..self.inner.tally.snapshot()
        }
    }

    /// Whether nobody holds the lock and nobody waits for it, i.e. it could
    /// be freed. A lazily released lock nobody waits for counts as idle: its
    /// thread has released it ([`settle`](Self::settle) ends the reservation).
    pub fn is_idle(&self) -> bool {
        let s = self.inner.hot.word().load(Acquire);
        // A waiter watching with `WAITERS` cleared (`spin_while_io_holds`)
        // is the CPU spinner.
        s & WAITERS == 0 && s & (LOCKED | SYSCALL) != LOCKED && !self.inner.room.watched()
    }

    /// Ends the reservation of a lazily released lock that nobody waits
    /// for, so that it is plainly free (the thread in the call takes it the
    /// ordinary way when it comes back), and says whether the lock is now
    /// idle: neither held nor awaited.
    pub fn settle(&self) -> bool {
        self.inner.hot.word().settle()
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
        let mut room = slow.lock();
        room.tick();
        if self.inner.tuning.monitored() {
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

    /// The switch interval in effect (0 set means 1 µs).
    fn interval(&self) -> Duration {
        self.inner.tuning.interval()
    }

    /// The waiting room's mutex-guarded part.
    fn slow(&self) -> &Slow {
        self.inner.room.slow()
    }

    /// The per-thread accounts.
    fn accounts(&self) -> &Accounts {
        self.inner.observers.accounts()
    }

    /// This lock's identity for per-thread class memory.
    fn id(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    #[inline]
    fn class_of(&self, token: Token) -> ThreadClass {
        match self.inner.tuning.policy() {
            Policy::Priority => class::recall(self.id(), token.get()),
            _ => ThreadClass::Io,
        }
    }

    #[inline]
    fn check_not_holder(&self, token: Token) -> Result<(), GilError> {
        if self.inner.hot.holds(token) {
            Err(GilError::AlreadyHeld)
        } else {
            Ok(())
        }
    }
}

impl std::fmt::Debug for Gil {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gil")
            .field("policy", &self.policy())
            .field("lazy_release_us", &self.lazy_release_us())
            .field("monitor", &self.uses_monitor())
            .field("spin_us", &self.spin_us())
            .field("laps", &self.laps())
            .field("switch_interval_us", &self.switch_interval_us())
            .field("holder", &self.holder())
            .field("drop_requested", &self.drop_requested())
            .field("counters", &self.counters())
            .finish()
    }
}
