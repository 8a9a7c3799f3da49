//! The waiting room: what every slow path shares, plain or monitored, and
//! its parts' own bookkeeping. A waiter joins it (queued in arrival order
//! with its own condition variable, counted by class in the census) and
//! leaves it with or without the lock; a release wakes exactly the waiter
//! that should go next (the designee), and a forced releaser waits here
//! for a switch. Who that is, and who may take the lock, is decided in
//! [`crate::policy`]; what the lock does on joining, leaving and handing
//! over is `handoff.rs`.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::class::ThreadClass;
use crate::policy::{self, Asked, Candidate, Census, Elapsed, Rotation, Timers};
use crate::sync::{AtomicBool, AtomicPtr, Clock, Clocked, Condvar, Mutex, MutexGuard, Stamp};
use crate::{Policy, Token};

/// The waiting room as the lock holds it: the part guarded by the mutex
/// ([`Slow`], replaced after a fork), and two flags written under that
/// mutex and read without it: the drop request, which the holder polls,
/// and the watch over an I/O-class holder, which `Gil::is_idle` reads.
pub(super) struct Room {
    /// Always a valid `Box<Slow>` from `Box::into_raw`; replaced (the old
    /// one kept, never freed) after a fork, freed only in `Drop`.
    slow: AtomicPtr<Slow>,
    /// "Holder, please drop": raised by a waiter, polled by the holder.
    drop_request: CachePadded<AtomicBool>,
    /// Set while a CPU-class waiter watches an I/O-class holder: one at a
    /// time (`Gil::spin_while_io_holds`).
    watching: AtomicBool,
}

impl Room {
    pub(super) fn new() -> Room {
        Room {
            slow: AtomicPtr::new(Box::into_raw(Box::new(Slow::new()))),
            drop_request: CachePadded::new(AtomicBool::new(false)),
            watching: AtomicBool::new(false),
        }
    }

    /// The mutex-guarded part.
    pub(super) fn slow(&self) -> &Slow {
        let ptr = self.slow.load(Acquire);
        // SAFETY:
        // - `slow` always holds a pointer from `Box::into_raw` (set in `new`
        //   and `replace_after_fork`);
        // - a replaced box is kept, never freed, and the current one is
        //   freed only in `Drop`, which cannot run while `&self` lives.
        unsafe { &*ptr }
    }

    /// Whether a drop request is pending. One relaxed load.
    #[inline]
    pub(super) fn drop_requested(&self) -> bool {
        self.drop_request.load(Relaxed)
    }

    /// Raises the drop request; whether it was not pending already.
    pub(super) fn raise_drop_request(&self) -> bool {
        !self.drop_request.swap(true, Relaxed)
    }

    /// Lowers the drop request; whether it was pending.
    pub(super) fn take_drop_request(&self) -> bool {
        self.drop_request.swap(false, Relaxed)
    }

    /// Lowers the drop request (a new holder starts without one, and one
    /// nobody waits for any more is moot).
    pub(super) fn clear_drop_request(&self) {
        self.drop_request.store(false, Relaxed);
    }

    /// Claims the watch over an I/O-class holder; whether this call did
    /// (one watcher at a time).
    pub(super) fn begin_watch(&self) -> bool {
        !self.watching.swap(true, Relaxed)
    }

    /// The watch is over.
    pub(super) fn end_watch(&self) {
        self.watching.store(false, Relaxed);
    }

    /// Whether a waiter watches an I/O-class holder now.
    pub(super) fn watched(&self) -> bool {
        self.watching.load(Relaxed)
    }

    /// In a fork child: a fresh mutex-guarded part, no drop request and no
    /// watch (a parent thread may have been raising or watching). The old
    /// part is returned, for the caller to keep for the life of the
    /// process (a thread lost in the fork may have held its mutex).
    pub(super) fn replace_after_fork(&self) -> *mut Slow {
        let fresh = Box::into_raw(Box::new(Slow::new()));
        self.drop_request.store(false, Relaxed);
        self.watching.store(false, Relaxed);
        self.slow.swap(fresh, std::sync::atomic::Ordering::AcqRel)
    }
}

impl Drop for Room {
    fn drop(&mut self) {
        let ptr = self.slow.load(Acquire);
        // SAFETY:
        // - `ptr` came from `Box::into_raw` and is freed only here (a
        //   replaced one is never freed);
        // - `&mut self` means no thread is inside a method using it.
        drop(unsafe { Box::from_raw(ptr) });
    }
}

/// The waiting room's bookkeeping, only touched under `Slow::mutex`.
#[derive(Default)]
pub(super) struct WaitRoom {
    /// Who waits in `acquire`, by class (all I/O-class unless the policy
    /// is priority), and how many of them starve.
    census: Census,
    /// The waiters in arrival order.
    queue: VecDeque<Queued>,
    next_ticket: u64,
    /// The designee seen last (its ticket), and since when it has been the
    /// designee: the hand-off bound is timed from then.
    head: Option<(u64, Stamp)>,
    /// The lock's one timing state: what [`policy::due`] times (the
    /// holder's interval or slice, its lazily released call, the
    /// starvation bound, the CPU class's turn).
    timers: Timers<Stamp>,
    /// Forced releasers waiting for somebody to take over.
    switch_waiters: usize,
    /// After a takeover of a call, contended lazy releases are real ones
    /// for a while ([`policy::Handovers`]).
    handovers: policy::Handovers<Stamp>,
    /// Why the pending drop request was raised, as far as it tells about
    /// the holder: see [`policy::class_after_request`].
    asked: Asked,
    /// Monitored locks: whether the monitor thread watches the lock.
    monitor: MonitorRoom,
    /// The protocol's clock (under loom, the model's ticks).
    clock: Clock,
}

impl Clocked for WaitRoom {
    fn clock(&self) -> &Clock {
        &self.clock
    }
}

/// The parts only the slow paths use. Replaced (never freed) by
/// `Room::replace_after_fork`, see `Gil::reinit_after_fork`.
pub(super) struct Slow {
    mutex: Mutex<WaitRoom>,
    /// Forced releasers block here until a switch (CPython's `switch_cond`).
    switch_cond: Condvar,
    /// Next entry of the retired list once this one has been replaced
    /// (`fork.rs`).
    next_retired: std::sync::atomic::AtomicPtr<Slow>,
}

impl Slow {
    pub(super) fn new() -> Self {
        Slow {
            mutex: Mutex::new(WaitRoom::default()),
            switch_cond: Condvar::new(),
            next_retired: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The waiting room, locked.
    pub(super) fn lock(&self) -> MutexGuard<'_, WaitRoom> {
        self.mutex.lock()
    }

    /// The link of the retired list (`fork.rs`).
    pub(super) fn next_retired(&self) -> &std::sync::atomic::AtomicPtr<Slow> {
        &self.next_retired
    }

    /// Tells the forced releasers waiting for a switch to look again.
    pub(super) fn notify_switch(&self) {
        self.switch_cond.notify_all();
    }

    /// A forced releaser waits for a switch (or a wake-up) under `room`.
    pub(super) fn wait_for_switch(&self, room: &mut MutexGuard<'_, WaitRoom>) {
        self.switch_cond.wait(room);
    }
}

/// A waiter's entry in the queue.
pub(super) struct Queued {
    ticket: u64,
    class: ThreadClass,
    /// When it joined, on the protocol's clock.
    since: Stamp,
    /// Past the starvation bound.
    starving: bool,
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
    fn ticket(&self) -> u64 {
        self.ticket
    }
}

impl Queued {
    /// Its place in the queue.
    pub(super) fn ticket(&self) -> u64 {
        self.ticket
    }

    /// When it joined, on the protocol's clock.
    pub(super) fn since(&self) -> Stamp {
        self.since
    }

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
    /// Who waits, by class, and how many of them starve.
    pub(super) fn census(&self) -> Census {
        self.census
    }

    /// The waiters in arrival order.
    pub(super) fn queue(&self) -> &VecDeque<Queued> {
        &self.queue
    }

    /// The protocol's clock.
    pub(super) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The monitor's share (`monitor.rs` keeps it).
    pub(super) fn monitor_mut(&mut self) -> &mut MonitorRoom {
        &mut self.monitor
    }

    /// The lock's timers.
    pub(super) fn timers_mut(&mut self) -> &mut Timers<Stamp> {
        &mut self.timers
    }

    /// One look at the lock seeing `scene`: what is due ([`policy::due`]).
    pub(super) fn due(&mut self, scene: &policy::Scene<Stamp>) -> policy::Due {
        policy::due(&self.clock, scene, &mut self.timers)
    }

    /// Where the CPU class's turn stands: its owner queued, or (not
    /// queued) holding the lock or on its way back to it.
    pub(super) fn rotation(&self) -> Rotation {
        match self.timers.turn() {
            Some(&policy::CpuTurn {
                queued: Some(ticket), ..
            }) => Rotation::Queued(ticket),
            Some(t) if t.held || t.away.is_some() => Rotation::Away,
            _ => Rotation::Open,
        }
    }

    /// The first waiter has come while `holder` holds the lock (`last`
    /// took it last): a turn whose owner neither holds the lock, nor waits,
    /// nor is on its way back from a preemption is over (its owner let go
    /// on the uncontended path, which never sees the room), so that nobody
    /// waits for it.
    pub(super) fn first_waiter_came(&mut self, holder: Option<Token>, last: Option<Token>) {
        let Some(turn) = self.timers.turn() else {
            return;
        };
        let owner = Some(turn.owner);
        let holds = holder.map(Token::get) == owner;
        // Preempted, then back and gone again without the room.
        let came_back = last.map(Token::get) == owner;
        if turn.queued.is_none() && !holds && (turn.away.is_none() || came_back) {
            self.timers.end_turn();
        }
    }

    /// Whether `token` may take a free lock as far as the CPU class's turn
    /// goes, queued with `ticket` (or not queued).
    pub(super) fn my_rotation(&self, token: Token, ticket: Option<u64>) -> bool {
        match self.rotation() {
            Rotation::Open => true,
            Rotation::Queued(t) => Some(t) == ticket,
            Rotation::Away => ticket.is_none() && self.turn_owner() == Some(token.get()),
        }
    }

    /// The token whose turn it is, if the CPU class's turn is under way.
    pub(super) fn turn_owner(&self) -> Option<usize> {
        self.timers.turn().map(|t| t.owner)
    }

    /// The monitor's share, to read.
    pub(super) fn monitor(&self) -> &MonitorRoom {
        &self.monitor
    }

    /// `token`, of `class`, joins the queue and the census, the lock having
    /// been taken `acquisitions` times, and waits on `cond` (which must
    /// outlive its entry: the waiter leaves with [`WaitRoom::remove`]
    /// before `cond` goes away). `started`: when it called `acquire`.
    pub(super) fn join<'c>(
        &mut self,
        policy: Policy,
        (token, class): (Token, ThreadClass),
        started: Instant,
        acquisitions: u64,
        cond: &'c Condvar,
    ) -> Waiter<'c> {
        self.census.join(class);
        let (ticket, since) = (self.next_ticket, self.clock.now());
        self.next_ticket += 1;
        self.queue.push_back(Queued {
            ticket,
            class,
            since,
            starving: false,
            joined_at: acquisitions,
            timed: false,
            cond: CondRef(cond),
        });
        if let Some(turn) = self.timers.turn_mut() {
            if turn.owner == token.get() {
                turn.queued = Some(ticket);
                turn.away = None;
            } else if class == ThreadClass::Cpu && turn.contested.is_none() {
                // A rival for the turn: it ends an interval from now.
                turn.contested = Some(since);
            }
        }
        if self.designee(policy).is_some_and(|d| d.ticket == ticket) {
            // The hand-off bound is timed from now (see `designee_since`).
            self.head = Some((ticket, since));
        }
        Waiter {
            token,
            class,
            started,
            ticket,
            cond,
        }
    }

    /// Waiter `w` leaves the queue and the census, with the lock or
    /// without it: whether it was starving. The CPU class's turn ends when
    /// its owner gives up waiting, and when nobody is left to take turns
    /// with (unless its owner is on its way back).
    pub(super) fn remove(&mut self, w: &Waiter<'_>, with_lock: bool) -> bool {
        let at = self
            .queue
            .binary_search_by_key(&w.ticket, |q| q.ticket)
            .expect("a waiter's entry stays queued until it leaves");
        let starving = self.queue.remove(at).expect("position is in range").starving;
        self.census.leave(w.class, starving);
        if let Some(turn) = self.timers.turn_mut() {
            if turn.queued == Some(w.ticket) {
                turn.queued = None;
                if !with_lock {
                    self.timers.end_turn();
                }
            }
        }
        if self.census.waiters() == 0 && self.timers.turn().is_some_and(|t| t.away.is_none()) {
            // Nobody left to take turns with; an owner on its way back
            // keeps its turn (for an interval at most: `policy::due`).
            self.timers.end_turn();
        }
        starving
    }

    /// Whether the waiter with `ticket` is starving (marked by whoever
    /// looked at the lock).
    pub(super) fn is_starving(&self, ticket: u64) -> bool {
        self.queue
            .binary_search_by_key(&ticket, |q| q.ticket)
            .is_ok_and(|at| self.queue[at].starving)
    }

    /// The designee under `policy`, as (ticket, class, the acquisition
    /// count when it joined), and since when it has been the designee: the
    /// hand-off bound is timed from then (a new designee from now).
    pub(super) fn designee_since(&mut self, policy: Policy) -> Option<(u64, ThreadClass, u64, Stamp)> {
        let (d, class, joined_at) = self.designee(policy).map(|d| (d.ticket, d.class, d.joined_at))?;
        let since = first_seen(&mut self.head, d, &self.clock);
        Some((d, class, joined_at, since))
    }

    /// The waiter with `ticket` is past the starvation bound.
    pub(super) fn mark_starving(&mut self, ticket: u64) {
        self.entry_mut(ticket).starving = true;
        self.census.starve();
    }

    /// A waiter that kept time has left (plain room): whoever keeps time
    /// now in its place, as the `designee` or the waiter the starvation
    /// bound is timed on (`starvation`), is woken to do it. Not one that
    /// keeps time already (the CPU-class waiter the starvation bound is
    /// timed on, often): its timed wait sees the new holder within an
    /// interval, and a wake-up per hand-off would only take a CPU from the
    /// threads doing the work.
    pub(super) fn wake_timekeepers(&self, policy: Policy, designee: bool, starvation: bool) {
        if designee {
            if let Some(d) = self.designee(policy).filter(|d| !d.timed) {
                d.wake();
            }
        }
        if starvation {
            if let Some(i) = policy::next_to_starve(policy, self.census, self.queue.iter()) {
                if !self.queue[i].timed {
                    self.queue[i].wake();
                }
            }
        }
    }

    /// Notes why the drop request is being raised: a whole `interval` of
    /// holding, or for a `starving` waiter (see [`Asked`]).
    pub(super) fn note_request(&mut self, interval: bool, starving: bool) {
        self.asked.interval |= interval;
        self.asked.starving |= starving;
    }

    /// The pending drop request is answered, or moot: why it was raised.
    pub(super) fn request_answered(&mut self) -> Asked {
        std::mem::take(&mut self.asked)
    }

    /// `token`, of `class`, took the lock under the mutex (switch number
    /// `sn`): its interval (or slice) is timed from now. A CPU-class taker
    /// is the CPU class's turn, as the starvation bound counts it, and
    /// (`turns`: priority policy) begins its own turn of the CPU class,
    /// unless it is its turn already, if another CPU-class thread waits to
    /// take turns with it, or was just made to let go and will (a forced
    /// releaser waiting for this switch).
    pub(super) fn took(&mut self, token: Token, class: ThreadClass, sn: u64, turns: bool) {
        let now = self.clock.now();
        self.timers.new_holder(sn, now);
        if class != ThreadClass::Cpu {
            return;
        }
        self.timers.cpu_served(now);
        if !turns {
            return;
        }
        let rivals = self.census.cpu() > 0;
        let coming_back = self.switch_awaited();
        match self.timers.turn_mut() {
            Some(turn) if turn.owner == token.get() => {
                (turn.queued, turn.held, turn.away) = (None, true, None);
            }
            _ if rivals || coming_back => {
                self.timers.begin_turn(token.get(), rivals.then_some(now));
            }
            _ => self.timers.end_turn(),
        }
    }

    /// `token` let go of the lock under the mutex: made to, for an
    /// I/O-class thread (`preempted`), it keeps the CPU class's turn if it
    /// had it, and comes back for it; any other release ends its turn.
    pub(super) fn let_go(&mut self, token: Token, preempted: bool) {
        let now = self.clock.now();
        match self.timers.turn_mut() {
            Some(turn) if turn.owner == token.get() && preempted => (turn.held, turn.away) = (false, Some(now)),
            Some(turn) if turn.owner == token.get() => self.timers.end_turn(),
            _ => {}
        }
    }

    /// A lazily released call was taken over (switch interval
    /// `interval`): contended lazy releases are real ones for a while.
    pub(super) fn call_taken_over(&mut self, interval: Duration) {
        self.handovers.taken_over(&self.clock, interval);
    }

    /// Whether a contended lazy release now comes soon enough after a
    /// takeover to be a real one ([`policy::Handovers`]).
    pub(super) fn after_takeover(&self) -> bool {
        self.handovers.now(&self.clock)
    }

    /// A forced releaser starts (`true`) or stops waiting for a switch.
    pub(super) fn waiting_for_switch(&mut self, waiting: bool) {
        if waiting {
            self.switch_waiters += 1;
        } else {
            self.switch_waiters -= 1;
        }
    }

    /// Whether a forced releaser waits for a switch.
    pub(super) fn switch_awaited(&self) -> bool {
        self.switch_waiters > 0
    }

    /// `ticket`'s entry (the queue is in ticket order).
    fn entry_mut(&mut self, ticket: u64) -> &mut Queued {
        let at = self
            .queue
            .binary_search_by_key(&ticket, |q| q.ticket)
            .expect("a waiter's entry stays queued until it leaves");
        &mut self.queue[at]
    }

    /// The waiter a free lock goes to under `policy` ([`policy::designee`]).
    pub(super) fn designee(&self, policy: Policy) -> Option<&Queued> {
        policy::designee(policy, self.census, self.rotation(), self.queue.iter())
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
        policy::may_starve(policy, w.class, self.is_starving(w.ticket))
            && policy::next_to_starve(policy, self.census, self.queue.iter())
                .is_some_and(|i| self.queue[i].ticket == w.ticket)
    }

    /// Whether waiter `w` keeps time in the plain waiting room: it is the
    /// designee (it times the holder's interval, slice and lazily released
    /// call), or the waiter the starvation bound is timed on. Everyone else
    /// sleeps without a timeout: with N waiters each timing its own
    /// interval, as in CPython's `take_gil`, N wake-ups an interval came
    /// whatever the hand-offs did (a herd on a timer). A waiter that
    /// becomes one of the two is woken ([`WaitRoom::wake_timekeepers`]),
    /// unless its last wait had a timeout already.
    pub(super) fn keeps_time(&self, policy: Policy, w: &Waiter) -> bool {
        self.designee(policy).is_some_and(|d| d.ticket == w.ticket) || self.first_to_starve(policy, w)
    }

    /// Under loom: the model's clock ticks.
    #[cfg(gil_loom)]
    pub(super) fn tick(&mut self) {
        self.clock.tick();
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
    token: Token,
    class: ThreadClass,
    /// When it called `acquire`, for the wait-time accounts.
    started: Instant,
    /// Its place in the queue.
    ticket: u64,
    /// Its own condition variable, on its stack, which its queue entry
    /// points to: a release wakes exactly it.
    cond: &'c Condvar,
}

impl Waiter<'_> {
    /// The thread's token.
    pub(super) fn token(&self) -> Token {
        self.token
    }

    /// Its class while it waits.
    pub(super) fn class(&self) -> ThreadClass {
        self.class
    }

    /// When it called `acquire`.
    pub(super) fn started(&self) -> Instant {
        self.started
    }

    /// Its place in the queue.
    pub(super) fn ticket(&self) -> u64 {
        self.ticket
    }

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

/// The monitor's share of a [`WaitRoom`]: whether its thread watches the
/// lock. (What it times is the room's [`Timers`], as for everyone.)
#[derive(Default)]
pub(super) struct MonitorRoom {
    /// The lock is in the monitor thread's list: the process (`process::id`)
    /// whose monitor lists it. A fork child inherits its parent's value,
    /// and the parent's monitor thread is not there.
    registered: Option<u32>,
}

impl MonitorRoom {
    /// The process whose monitor thread lists the lock, if any.
    pub(super) fn registered(&self) -> Option<u32> {
        self.registered
    }

    /// The lock is in the list of `process`'s monitor (`None`: in none).
    pub(super) fn set_registered(&mut self, process: Option<u32>) {
        self.registered = process;
    }
}

/// The protocol's clock, as [`policy::due`] reads it.
impl Elapsed<Stamp> for Clock {
    fn now(&self) -> Stamp {
        Clock::now(self)
    }
    fn passed(&self, since: Stamp, d: Duration) -> bool {
        Clock::passed(self, since, d)
    }
    fn left(&self, since: Stamp, d: Duration) -> Duration {
        Clock::left(self, since, d)
    }
}
