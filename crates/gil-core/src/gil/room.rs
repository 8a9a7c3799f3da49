//! The waiting room: what every slow path shares, plain or monitored. A
//! waiter joins it (counted by class in the census, `WAITERS` set in the
//! lock word) and leaves it with or without the lock; a releaser wakes
//! whoever should go next, and a forced releaser waits here for a switch.
//! Who that is, and who may take the lock, is decided in
//! [`crate::policy`]; this file only carries it out.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::time::{Duration, Instant};

use super::monitor::MonitorRoom;
use super::word::{LOCKED, WAITERS};
use super::{bump, AbortCheck, Gil};
use crate::class::{self, ThreadClass};
use crate::events::{Event, EventKind};
use crate::policy::Candidate as _;
use crate::policy::{self, Asked, Census, Wake};
use crate::reason::ReleaseReason;
use crate::sync::{spin_while, Clock, Clocked, Condvar, Mutex, MutexGuard, Stamp};
use crate::Token;

/// The waiting room's bookkeeping, only touched under `Slow::mutex`.
#[derive(Default)]
pub(super) struct WaitRoom {
    /// Who waits in `acquire`, by class (all I/O-class unless the policy
    /// is priority), and how many of them starve.
    pub(super) census: Census,
    /// Forced releasers waiting for somebody to take over.
    pub(super) switch_waiters: usize,
    /// Why the pending drop request was raised, as far as it tells about
    /// the holder: see [`policy::class_after_request`].
    pub(super) asked: Asked,
    /// Monitored locks: the waiters' queue and the monitor's timing.
    pub(super) monitor: MonitorRoom,
    /// The protocol's clock (under loom, the model's ticks).
    pub(super) clock: Clock,
}

impl Clocked for WaitRoom {
    fn clock(&self) -> &Clock {
        &self.clock
    }
}

/// The parts only the slow paths use. Replaced (never freed) by
/// [`Gil::reinit_after_fork`], see there.
pub(super) struct Slow {
    pub(super) mutex: Mutex<WaitRoom>,
    /// I/O-class waiters block here (every waiter, under classic); a release
    /// signals one of them (CPython's `cond`).
    io_cond: Condvar,
    /// CPU-class waiters block here (priority policy only).
    cpu_cond: Condvar,
    /// Forced releasers block here until a switch (CPython's `switch_cond`).
    switch_cond: Condvar,
    /// Next entry of the retired list once this one has been replaced
    /// (`fork.rs`).
    pub(super) next_retired: std::sync::atomic::AtomicPtr<Slow>,
}

impl Slow {
    pub(super) fn new() -> Self {
        Slow {
            mutex: Mutex::new(WaitRoom::default()),
            io_cond: Condvar::new(),
            cpu_cond: Condvar::new(),
            switch_cond: Condvar::new(),
            next_retired: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// Where a waiter of `class` blocks in the plain waiting room.
    pub(super) fn cond(&self, class: ThreadClass) -> &Condvar {
        match class {
            ThreadClass::Io => &self.io_cond,
            ThreadClass::Cpu => &self.cpu_cond,
        }
    }

    /// Under loom: every waiter of the plain room wakes to see the tick.
    #[cfg(gil_loom)]
    pub(super) fn wake_all(&self) {
        self.io_cond.notify_all();
        self.cpu_cond.notify_all();
    }
}

/// A thread in the waiting room.
pub(super) struct Waiter {
    pub(super) token: Token,
    pub(super) class: ThreadClass,
    /// When it called `acquire`, for the wait-time accounts.
    pub(super) started: Instant,
    /// When it joined, on the protocol's clock (the starvation bound).
    pub(super) since: Stamp,
    /// Past the starvation bound. (A queued waiter's mark is in its queue
    /// entry, where the monitor sets it.)
    pub(super) starving: bool,
    /// Its place in the monitored queue, if queued.
    pub(super) ticket: Option<u64>,
}

/// `slot` remembers since when something identified by `key` has been
/// seen (an episode's generation, a holder's switch number): that time if
/// `key` is the one remembered, else now, remembered from now on.
pub(super) fn first_seen(slot: &mut Option<(u64, Stamp)>, key: u64, clock: &Clock) -> Stamp {
    match *slot {
        Some((k, since)) if k == key => since,
        _ => {
            let now = clock.now();
            *slot = Some((key, now));
            now
        }
    }
}

impl Gil {
    /// `token` enters the waiting room: counted, and `WAITERS` set so that
    /// every release comes through the mutex from now on.
    pub(super) fn join(&self, room: &mut WaitRoom, token: Token, started: Instant) -> Waiter {
        let class = self.class_of(token);
        room.census.join(class);
        // Acquire: pairs with the previous releaser's Release, so `owner`
        // reads below see its clearing store, hence 0 or the current holder.
        self.inner.hot.state.fetch_or(WAITERS, Acquire);
        if self.hooked() {
            self.emit(|| Event::now(EventKind::WaitStart, token, None));
        }
        Waiter {
            token,
            class,
            started,
            since: room.clock.now(),
            starving: false,
            ticket: None,
        }
    }

    /// `w` leaves the waiting room: with the lock, or without it (abort, a
    /// panicking callback). Without it, whoever should go next instead is
    /// woken, and if nobody is left a pending request is moot and a forced
    /// releaser waiting for a switch that can no longer come is let go.
    pub(super) fn leave(&self, slow: &Slow, room: &mut WaitRoom, w: &Waiter, with_lock: bool) {
        let starving = match w.ticket {
            Some(ticket) => self.dequeue(room, ticket).starving(),
            None => w.starving,
        };
        room.census.leave(w.class, starving);
        if room.census.waiters() == 0 {
            self.inner.hot.state.fetch_and(!WAITERS, Relaxed);
            if !with_lock {
                self.inner.drop_request.store(false, Relaxed);
                room.asked = Asked::default();
                if room.switch_waiters > 0 {
                    slow.switch_cond.notify_all();
                }
            }
        } else if !with_lock && (!self.word_locked() || starving) {
            // We may have consumed the wake-up meant for taking the lock, or
            // held back the others while starving.
            self.wake_next(slow, room);
        }
    }

    /// Whether a thread that is not waiting may take the free lock now
    /// (`try_acquire`).
    pub(super) fn may_take_now(&self, class: ThreadClass, room: &WaitRoom) -> bool {
        if self.inner.monitor {
            policy::may_take_unqueued(self.inner.policy, room.census, room.monitor.queued(), class)
        } else {
            policy::may_take(self.inner.policy, room.census, class, false)
        }
    }

    /// Wakes the waiter that should go next.
    pub(super) fn wake_next(&self, slow: &Slow, room: &WaitRoom) {
        if self.inner.monitor {
            self.wake_designee(room);
            return;
        }
        match policy::wake(room.census) {
            Some(Wake::AllCpu) => slow.cpu_cond.notify_all(),
            Some(Wake::OneIo) => slow.io_cond.notify_one(),
            Some(Wake::OneCpu) => slow.cpu_cond.notify_one(),
            None => {}
        }
    }

    /// Raises the drop request for waiter `w`. If the host's callback
    /// panicked, `w` leaves the room and the panic goes on.
    pub(super) fn request_drop_for(&self, slow: &Slow, room: &mut WaitRoom, w: &Waiter) {
        if let Err(panic) = self.request_drop(Some(w.token)) {
            self.leave(slow, room, w, false);
            std::panic::resume_unwind(panic);
        }
    }

    /// Raises the drop request on the current holder. Called under the
    /// mutex with WAITERS set, so the holder cannot finish releasing (that
    /// needs the mutex) while the callback runs.
    pub(super) fn request_drop(&self, by: Option<Token>) -> Result<(), Box<dyn Any + Send>> {
        let fresh = !self.inner.drop_request.swap(true, Relaxed);
        if fresh {
            bump(&self.inner.drop_requests, 1);
        }
        let owner = Token::new(self.inner.hot.owner.load(Relaxed));
        if fresh && self.hooked() {
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

    /// Asks the holder to drop at once for waiter `w` (a preemption,
    /// counted as one if `preemption`), then spins for the release if
    /// configured: the guard back, and whether it spun.
    pub(super) fn ask_at_once<'s>(
        &self,
        slow: &'s Slow,
        mut room: MutexGuard<'s, WaitRoom>,
        w: &Waiter,
        preemption: bool,
    ) -> (MutexGuard<'s, WaitRoom>, bool) {
        if preemption {
            bump(&self.inner.preemptions, 1);
        }
        self.request_drop_for(slow, &mut room, w);
        self.spin_for_release(slow, room)
    }

    /// After a drop request, with a spin limit: watches the lock word,
    /// without the mutex, for the holder to let go before sleeping (see
    /// `GilConfig::spin_us`). The guard back, and whether it spun.
    pub(super) fn spin_for_release<'s>(
        &self,
        slow: &'s Slow,
        room: MutexGuard<'s, WaitRoom>,
    ) -> (MutexGuard<'s, WaitRoom>, bool) {
        let Some(limit) = self.inner.spin else {
            return (room, false);
        };
        drop(room);
        spin_while(limit, || self.word_locked());
        (slow.mutex.lock(), true)
    }

    /// Asks an `acquire_or_abort` check whether to give up, as a callback of
    /// this lock.
    pub(super) fn ask_abort(&self, check: &mut AbortCheck<'_>) -> bool {
        match check {
            Some(check) => {
                let _inside = self.enter_callback();
                check()
            }
            None => false,
        }
    }

    /// The lock word was just won under the mutex: a new holder starts with
    /// no drop request (CPython clears the bit in `take_gil`), and forced
    /// releasers waiting for a switch are told to look.
    pub(super) fn took_over_under_mutex(&self, token: Token, class: ThreadClass, slow: &Slow, room: &mut WaitRoom) {
        self.inner.drop_request.store(false, Relaxed);
        room.asked = Asked::default();
        self.became_holder(token, class);
        self.observe_acquire(token);
        if self.inner.monitor {
            self.watch_new_holder(room);
        }
        if room.switch_waiters > 0 {
            slow.switch_cond.notify_all();
        }
    }

    /// A release with somebody waiting: frees the lock under the mutex,
    /// wakes whoever goes next, and with forced switching waits until
    /// another thread has taken it.
    #[cold]
    pub(super) fn release_slow(&self, token: Token, reason: ReleaseReason) {
        let slow = self.slow();
        let mut room = slow.mutex.lock();
        let requested = self.inner.drop_request.swap(false, Relaxed);
        let asked = std::mem::take(&mut room.asked);
        let held_as = ThreadClass::from_u8(self.inner.hot.holder_class.load(Relaxed));
        if let Some(class) = policy::class_after_request(self.inner.policy, reason, requested, asked, held_as) {
            class::remember(self.id(), token.get(), class);
        }
        self.inner.hot.state.fetch_and(!LOCKED, Release);
        self.wake_next(slow, &room);
        let must_wait = match reason {
            ReleaseReason::Final => false,
            ReleaseReason::Forced => true,
            ReleaseReason::Voluntary => requested,
        };
        if !must_wait || room.census.waiters() == 0 {
            return;
        }
        // Forced switching: don't return (and maybe win the lock straight
        // back) before somebody else has taken it.
        room.switch_waiters += 1;
        while self.inner.hot.last_holder.load(Relaxed) == token.get() && room.census.waiters() > 0 {
            slow.switch_cond.wait(&mut room);
        }
        room.switch_waiters -= 1;
        if self.inner.hot.last_holder.load(Relaxed) != token.get() {
            bump(&self.inner.forced_switches, 1);
            if self.hooked() {
                let to = Token::new(self.inner.hot.last_holder.load(Relaxed));
                self.emit(|| Event::now(EventKind::ForcedSwitch, token, to));
            }
        }
    }

    /// The switch interval in effect (0 set means 1 µs).
    pub(super) fn interval(&self) -> Duration {
        Duration::from_micros(self.inner.interval_us.load(Relaxed).max(1))
    }
}
