//! The waiting room: what every slow path shares, plain or monitored. A
//! waiter joins it (queued in arrival order with its own condition
//! variable, counted by class in the census, `WAITERS` set in the lock
//! word) and leaves it with or without the lock; a release wakes exactly
//! the waiter that should go next (the designee), and a forced releaser
//! waits here for a switch. Who that is, and who may take the lock, is
//! decided in [`crate::policy`]; this file only carries it out.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use super::word::{IN_SLICE, LOCKED, SYSCALL, WAITERS};
use super::{bump, AbortCheck, Gil};
use crate::class::{self, ThreadClass};
use crate::events::{Event, EventKind};
use crate::laps;
use crate::policy::{self, Asked, Candidate, Census, Turn};
use crate::reason::ReleaseReason;
use crate::sync::{spin_while, Clock, Clocked, Condvar, Mutex, MutexGuard, Stamp};
use crate::{Policy, Token};

/// The waiting room's bookkeeping, only touched under `Slow::mutex`.
#[derive(Default)]
pub(super) struct WaitRoom {
    /// Who waits in `acquire`, by class (all I/O-class unless the policy
    /// is priority), and how many of them starve.
    pub(super) census: Census,
    /// The waiters in arrival order.
    pub(super) queue: VecDeque<Queued>,
    next_ticket: u64,
    /// The designee seen last (its ticket), and since when it has been the
    /// designee: the hand-off bound is timed from then.
    head: Option<(u64, Stamp)>,
    /// When a CPU-class thread last took the lock while others waited: the
    /// CPU class's last turn, from which the starvation bound runs
    /// ([`policy::starvation_start`]).
    pub(super) cpu_served: Option<Stamp>,
    /// The slice under way: its holder's switch number, and when it began
    /// ([`policy::slice`]).
    pub(super) slice: Option<(u64, Stamp)>,
    /// Forced releasers waiting for somebody to take over.
    pub(super) switch_waiters: usize,
    /// Why the pending drop request was raised, as far as it tells about
    /// the holder: see [`policy::class_after_request`].
    pub(super) asked: Asked,
    /// Monitored locks: the monitor's timing.
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
            switch_cond: Condvar::new(),
            next_retired: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
        }
    }
}

/// A waiter's entry in the queue.
pub(super) struct Queued {
    pub(super) ticket: u64,
    pub(super) class: ThreadClass,
    /// When it joined, on the protocol's clock.
    pub(super) since: Stamp,
    /// Past the starvation bound.
    pub(super) starving: bool,
    /// The lock's acquisition count when it joined: who has overtaken it
    /// since ([`policy::may_overtake`]).
    joined_at: u64,
    /// Its last wait had a timeout (it keeps time, see `WaitRoom::keeps_time`):
    /// it needs no wake-up to notice that the holder runs on.
    timed: bool,
    cond: CondRef,
}

impl Candidate for Queued {
    fn class(&self) -> ThreadClass {
        self.class
    }
    fn starving(&self) -> bool {
        self.starving
    }
}

impl Queued {
    /// Wakes this waiter.
    pub(super) fn wake(&self) {
        // SAFETY: see `CondRef`: entries are only reached through the room,
        // under its mutex, while queued.
        unsafe { &*self.cond.0 }.notify_one();
    }
}

/// The queued waiter's own condition variable, which lives on its stack.
struct CondRef(*const Condvar);

// SAFETY: the pointer is only dereferenced under the lock's mutex while its
// entry is queued, and a waiter removes its entry (under the mutex) before
// its condition variable goes away.
unsafe impl Send for CondRef {}

impl WaitRoom {
    /// `ticket`'s entry (the queue is in ticket order).
    pub(super) fn entry_mut(&mut self, ticket: u64) -> &mut Queued {
        let at = self
            .queue
            .binary_search_by_key(&ticket, |q| q.ticket)
            .expect("a waiter's entry stays queued until it leaves");
        &mut self.queue[at]
    }

    /// The waiter a free lock goes to under `policy` ([`policy::designee`]).
    pub(super) fn designee(&self, policy: Policy) -> Option<&Queued> {
        policy::designee(policy, self.census, self.queue.iter())
    }

    /// Wakes the waiter that should go next: the designee.
    pub(super) fn wake_next(&self, policy: Policy) {
        if let Some(d) = self.designee(policy) {
            d.wake();
        }
    }

    /// Whether waiter `w` is the one the starvation bound is timed on
    /// ([`policy::next_to_starve`]). Only a CPU-class waiter looks along
    /// the line, so an I/O-class one (most waiters in a busy server) never
    /// pays for its length.
    pub(super) fn first_to_starve(&self, policy: Policy, w: &Waiter) -> bool {
        policy::may_starve(policy, w.class, w.starving)
            && policy::next_to_starve(policy, self.census, self.queue.iter())
                .is_some_and(|i| self.queue[i].ticket == w.ticket)
    }

    /// Whether waiter `w` keeps time in the plain waiting room: it is the
    /// designee (it times the holder's interval, slice and lazily released
    /// call), or the waiter the starvation bound is timed on. Everyone else
    /// sleeps without a timeout: with N waiters each timing its own
    /// interval, as in CPython's `take_gil`, N wake-ups an interval came
    /// whatever the hand-offs did (a herd on a timer). A waiter that
    /// becomes one of the two is woken ([`Gil::leave`]), unless its last
    /// wait had a timeout already.
    pub(super) fn keeps_time(&self, policy: Policy, w: &Waiter) -> bool {
        self.designee(policy).is_some_and(|d| d.ticket == w.ticket) || self.first_to_starve(policy, w)
    }

    /// Under loom: wakes every waiter, so timed waits can see the tick.
    #[cfg(gil_loom)]
    pub(super) fn wake_all(&self) {
        for q in &self.queue {
            q.wake();
        }
    }
}

/// A thread in the waiting room.
pub(super) struct Waiter<'c> {
    pub(super) token: Token,
    pub(super) class: ThreadClass,
    /// When it called `acquire`, for the wait-time accounts.
    pub(super) started: Instant,
    /// When it joined, on the protocol's clock (the starvation bound).
    pub(super) since: Stamp,
    /// Past the starvation bound, as marked by itself (plain room; the
    /// monitor marks only the queue entry, which is what counts).
    pub(super) starving: bool,
    /// Its place in the queue.
    pub(super) ticket: u64,
    /// Its own condition variable, on its stack, which its queue entry
    /// points to: a release wakes exactly it.
    cond: &'c Condvar,
}

impl Waiter<'_> {
    /// Waits on its condition variable for at most `timeout` if it keeps
    /// time (`timed`), else until woken. Whether it timed out.
    pub(super) fn wait(&self, room: &mut MutexGuard<'_, WaitRoom>, timed: bool, timeout: Duration) -> bool {
        room.entry_mut(self.ticket).timed = timed;
        if timed {
            self.cond.wait_for(room, timeout)
        } else {
            self.cond.wait(room);
            false
        }
    }
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

/// The monitor's share of a [`WaitRoom`] (`monitor.rs` keeps it).
#[derive(Default)]
pub(super) struct MonitorRoom {
    /// The lock is in the monitor thread's list: the process (`process::id`)
    /// whose monitor lists it. A fork child inherits its parent's value,
    /// and the parent's monitor thread is not there.
    pub(super) registered: Option<u32>,
    /// The holder being timed: its switch number, and since when.
    pub(super) watch: Option<(u64, Stamp)>,
    /// Lazy release: the system-call episode being timed (generation, first seen).
    pub(super) episode: Option<(u64, Stamp)>,
    /// The interval's drop request was put off once because the holder was
    /// in a call first seen at that look (see `monitor_pass_locked`).
    pub(super) deferred: bool,
}

impl Gil {
    /// `token` enters the waiting room, where it blocks on `cond`: queued,
    /// counted, and `WAITERS` set so that every release comes through the
    /// mutex from now on.
    pub(super) fn join<'c>(
        &self,
        room: &mut WaitRoom,
        token: Token,
        started: Instant,
        cond: &'c Condvar,
    ) -> Waiter<'c> {
        let class = self.class_of(token);
        room.census.join(class);
        let (ticket, since) = (room.next_ticket, room.clock.now());
        room.next_ticket += 1;
        room.queue.push_back(Queued {
            ticket,
            class,
            since,
            starving: false,
            joined_at: self.inner.hot.acquisitions.load(Relaxed),
            timed: false,
            cond: CondRef(cond),
        });
        if room.designee(self.inner.policy).is_some_and(|d| d.ticket == ticket) {
            // The hand-off bound is timed from now (see `turn`).
            room.head = Some((ticket, since));
        }
        // Acquire: pairs with the previous releaser's Release, so `owner`
        // reads below see its clearing store, hence 0 or the current holder.
        self.inner.hot.word.set_waiters();
        self.observe_wait_start(token);
        Waiter {
            token,
            class,
            started,
            since,
            starving: false,
            ticket,
            cond,
        }
    }

    /// `w` leaves the waiting room: with the lock, or without it (abort, a
    /// panicking callback). Without it, whoever should go next instead is
    /// woken, and if nobody is left a pending request is moot and a forced
    /// releaser waiting for a switch that can no longer come is let go.
    /// Whether it was starving.
    pub(super) fn leave(&self, slow: &Slow, room: &mut WaitRoom, w: &Waiter, with_lock: bool) -> bool {
        // Whether it kept time for the others (see `keeps_time`): then
        // whoever takes over that job is woken to do it.
        let was_designee = room.designee(self.inner.policy).is_some_and(|d| d.ticket == w.ticket);
        let was_timing_starvation = room.first_to_starve(self.inner.policy, w);
        let at = room
            .queue
            .binary_search_by_key(&w.ticket, |q| q.ticket)
            .expect("a waiter's entry stays queued until it leaves");
        let starving = room.queue.remove(at).expect("position is in range").starving;
        room.census.leave(w.class, starving);
        if !self.inner.monitor && room.census.waiters() > 0 {
            // Not one that keeps time already (the CPU-class waiter the
            // starvation bound is timed on, often): its timed wait sees the
            // new holder within an interval, and a wake-up per hand-off
            // would only take a CPU from the threads doing the work.
            if was_designee {
                if let Some(d) = room.designee(self.inner.policy).filter(|d| !d.timed) {
                    d.wake();
                }
            }
            if was_timing_starvation || starving {
                if let Some(i) = policy::next_to_starve(self.inner.policy, room.census, room.queue.iter()) {
                    if !room.queue[i].timed {
                        room.queue[i].wake();
                    }
                }
            }
        }
        if room.census.waiters() == 0 {
            self.inner.hot.word.clear_waiters();
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
            room.wake_next(self.inner.policy);
        }
        starving
    }

    /// Whether a thread that is not waiting may take the free lock now
    /// (`try_acquire`).
    pub(super) fn may_take_now(&self, token: Token, class: ThreadClass, room: &mut WaitRoom) -> bool {
        policy::may_take(
            self.inner.policy,
            room.census,
            class,
            false,
            self.turn(room, None, token),
        )
    }

    /// Whether waiter `w` may take the free lock now.
    pub(super) fn may_take_queued(&self, room: &mut WaitRoom, w: &Waiter) -> bool {
        let turn = self.turn(room, Some(w.ticket), w.token);
        policy::may_take(self.inner.policy, room.census, w.class, w.starving, turn)
    }

    /// Where the designee stands for `token`, the waiter with `ticket`
    /// (`None`: a thread not queued). Also starts timing a new designee.
    fn turn(&self, room: &mut WaitRoom, ticket: Option<u64>, token: Token) -> Turn {
        let Some((d, class, joined_at)) = room
            .designee(self.inner.policy)
            .map(|d| (d.ticket, d.class, d.joined_at))
        else {
            return Turn::Open;
        };
        let since = first_seen(&mut room.head, d, &room.clock);
        if Some(d) == ticket {
            return Turn::Mine;
        }
        let Some(bound) = policy::handoff_bound(self.inner.policy, self.inner.monitor, self.interval()) else {
            return Turn::Open;
        };
        let lapped = self.inner.laps > 0 && {
            let now = self.inner.hot.acquisitions.load(Relaxed);
            !policy::may_overtake(laps::since(self.id(), token.get(), joined_at, now), self.inner.laps)
        };
        if lapped || room.clock.passed(since, bound) {
            Turn::Reserved(class)
        } else {
            Turn::Open
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
    /// mutex with a waiter in the room, and sets `WAITERS` (a watcher may
    /// have cleared it, see `spin_while_io_holds`), so the holder cannot
    /// finish releasing (that needs the mutex) while the callback runs,
    /// and answers the request on the slow path.
    pub(super) fn request_drop(&self, by: Option<Token>) -> Result<(), Box<dyn Any + Send>> {
        // With a waiter in the room only a watcher clears it, under the
        // mutex held here: a load says whether one did, and spares the
        // usual request a write to the holder's cache line.
        if self.inner.hot.word.load(Relaxed) & WAITERS == 0 {
            self.inner.hot.word.set_waiters();
        }
        let fresh = !self.inner.drop_request.swap(true, Relaxed);
        if fresh {
            bump(&self.inner.drop_requests, 1);
        }
        let owner = Token::new(self.inner.hot.owner.load(Relaxed));
        if fresh && self.inner.hot.instr.load(Relaxed) != 0 {
            // Without an owner the holder is letting go right now (it cleared
            // `owner` and waits for the mutex): the request is its.
            if let Some(asked) = owner.or_else(|| Token::new(self.inner.hot.last_holder.load(Relaxed))) {
                self.observe_drop_request(asked, by);
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
    /// configured: whether it spun.
    pub(super) fn ask_at_once(
        &self,
        slow: &Slow,
        room: &mut MutexGuard<'_, WaitRoom>,
        w: &Waiter,
        preemption: bool,
    ) -> bool {
        if preemption {
            bump(&self.inner.preemptions, 1);
        }
        self.request_drop_for(slow, room, w);
        self.spin_for_release(room)
    }

    /// After a drop request, with a spin limit: watches the lock word,
    /// without the mutex, for the holder to let go before sleeping (see
    /// `GilConfig::spin_us`). Whether it spun.
    pub(super) fn spin_for_release(&self, room: &mut MutexGuard<'_, WaitRoom>) -> bool {
        let Some(limit) = self.spin_limit() else {
            return false;
        };
        MutexGuard::unlocked_spinning(room, limit, || spin_while(limit, || self.word_locked()));
        true
    }

    /// With a spin limit: waiter `w`, while an I/O-class thread holds the
    /// lock or was the last to hold it (state `s`, switch number `sn`),
    /// watches the lock word, without the mutex, before it takes the lock
    /// or sleeps, if [`policy::watches`] says so; [`policy::Watch`] says
    /// for how long. Once per holder (`spun_on` keeps its switch number),
    /// one waiter at a time. A waiter alone in the room watches with
    /// `WAITERS` cleared, so that the I/O thread's calls meanwhile cost what
    /// they cost with nobody waiting (the module docs of `word.rs`).
    /// Whether it watched.
    pub(super) fn spin_while_io_holds(
        &self,
        room: &mut MutexGuard<'_, WaitRoom>,
        w: &Waiter,
        (s, sn): (u64, u64),
        spun_on: &mut Option<u64>,
    ) -> bool {
        let Some(limit) = self.spin_limit() else {
            return false;
        };
        let watches = policy::watches(
            w.class,
            w.starving,
            self.holder_class().0,
            s & SYSCALL != 0,
            *spun_on == Some(sn),
        );
        if !watches || self.inner.cpu_spinner.swap(true, Relaxed) {
            return false;
        }
        *spun_on = Some(sn);
        let hot = &*self.inner.hot;
        // Alone in the room, the watcher steps out of the lock word: it
        // needs no wake-up, and with `WAITERS` clear the I/O thread's takes
        // and releases around its calls stay on the fast path instead of
        // queueing through the mutex each time. A drop request puts it
        // back (`request_drop`); so does the watcher, under the mutex,
        // before it looks at the word again.
        let stepped_out = room.census.waiters() == 1 && !self.inner.drop_request.load(Relaxed);
        if stepped_out {
            hot.word.clear_waiters();
        }
        MutexGuard::unlocked_spinning(room, limit, || {
            let mut watch = policy::Watch::new(limit, Instant::now(), hot.acquisitions.load(Relaxed));
            spin_while(policy::Watch::length(limit), || {
                let switched = hot.switch_number.load(Relaxed) != sn;
                let takes = hot.acquisitions.load(Relaxed);
                watch.look(Instant::now(), switched, takes, self.word_locked())
            });
        });
        if stepped_out {
            hot.word.set_waiters();
        }
        // After `WAITERS` is back: `is_idle` sees one or the other.
        self.inner.cpu_spinner.store(false, Relaxed);
        true
    }

    /// At the top of a wait loop, `w` allowed to take the lock: if it is
    /// free (state `s`), a CPU-class waiter first leaves an I/O-class last
    /// holder its grace ([`Gil::spin_while_io_holds`]). Whether it watched
    /// (then the loop looks again).
    pub(super) fn grace_before_take(
        &self,
        room: &mut MutexGuard<'_, WaitRoom>,
        w: &Waiter,
        s: u64,
        spun_on: &mut Option<u64>,
    ) -> bool {
        if s & LOCKED != 0 {
            return false;
        }
        let sn = self.inner.hot.switch_number.load(Relaxed);
        self.spin_while_io_holds(room, w, (s, sn), spun_on)
    }

    /// Counts a take by a waiter that spun for an I/O-class holder just
    /// before (`Counters::cpu_spin_takes`).
    pub(super) fn took_after_spin(&self) {
        bump(&self.inner.cpu_spin_takes, 1);
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
    /// releasers waiting for a switch are told to look. A CPU-class taker
    /// is the CPU class's turn; a waiter that `starved` starts its slice.
    pub(super) fn took_over_under_mutex(
        &self,
        token: Token,
        class: ThreadClass,
        starved: bool,
        slow: &Slow,
        room: &mut WaitRoom,
    ) {
        self.inner.drop_request.store(false, Relaxed);
        room.asked = Asked::default();
        self.became_holder(token, class);
        if self.inner.laps > 0 {
            laps::record(self.id(), token.get(), self.inner.hot.acquisitions.load(Relaxed));
        }
        if class == ThreadClass::Cpu {
            room.cpu_served = Some(room.clock.now());
        }
        if starved {
            self.inner.hot.holder_class.store(IN_SLICE, Relaxed);
            let sn = self.inner.hot.switch_number.load(Relaxed);
            room.slice = Some((sn, room.clock.now()));
        }
        self.observe_acquire(token);
        if self.inner.monitor {
            self.watch_new_holder(room);
        }
        if starved {
            self.time_the_slice(room);
        }
        if room.switch_waiters > 0 {
            slow.switch_cond.notify_all();
        }
    }

    /// How much of the holder's slice is left, if the holder (switch number
    /// `sn`) is in one: zero once it is over.
    pub(super) fn slice_left(&self, room: &WaitRoom, sn: u64) -> Option<Duration> {
        match room.slice {
            Some((n, start)) if n == sn && self.holder_class().1 => {
                let length = policy::slice(self.interval());
                Some(if room.clock.passed(start, length) {
                    Duration::ZERO
                } else {
                    room.clock.left(start, length)
                })
            }
            _ => None,
        }
    }

    /// A slice has just begun: makes sure somebody times its end. The
    /// monitor looks within the slice; without it, the designee (the
    /// waiter it ends for, and a timekeeper) is woken to time it, as it may
    /// be asleep in a wait of a whole interval.
    fn time_the_slice(&self, room: &WaitRoom) {
        if self.inner.monitor {
            self.ask_monitor_within(policy::slice(self.interval()));
        } else {
            room.wake_next(self.inner.policy);
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
        self.inner.hot.word.unlock();
        room.wake_next(self.inner.policy);
        if !policy::waits_for_switch(reason, requested) || room.census.waiters() == 0 {
            return;
        }
        // Forced switching: don't return (and maybe win the lock straight
        // back) before somebody else has taken it. With a spin limit, watch
        // for the switch before sleeping: the waiter that asked spins too,
        // and takes the lock within microseconds.
        room.switch_waiters += 1;
        if let Some(limit) = self.spin_limit() {
            MutexGuard::unlocked_spinning(&mut room, limit, || {
                spin_while(limit, || self.inner.hot.last_holder.load(Relaxed) == token.get())
            });
        }
        while self.inner.hot.last_holder.load(Relaxed) == token.get() && room.census.waiters() > 0 {
            slow.switch_cond.wait(&mut room);
        }
        room.switch_waiters -= 1;
        if self.inner.hot.last_holder.load(Relaxed) != token.get() {
            bump(&self.inner.forced_switches, 1);
            if self.hooked() {
                let to = Token::new(self.inner.hot.last_holder.load(Relaxed));
                self.emit(EventKind::ForcedSwitch, || {
                    Event::now(EventKind::ForcedSwitch, token, to)
                });
            }
        }
    }

    /// The switch interval in effect (0 set means 1 µs).
    pub(super) fn interval(&self) -> Duration {
        Duration::from_micros(self.inner.interval_us.load(Relaxed).max(1))
    }
}
