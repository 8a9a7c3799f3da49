//! The hand-off, under the waiting room's mutex: a waiter joins and leaves
//! the room, asks whose turn it is, raises the drop request; a new holder
//! takes over the lock's bookkeeping; a release with waiters wakes the
//! next and, with forced switching, waits for a switch. The room's own
//! bookkeeping is `room.rs`; the rules are [`crate::policy`]'s.
//!
//! The lock word's `WAITERS` bit ("the room is not empty: come through the
//! mutex") is changed here only: set when a waiter joins or a drop request
//! is raised, cleared when the last waiter leaves, and cleared and set back
//! around the watch of the room's only waiter ([`Gil::step_out_of_word`]).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use super::room::{Slow, WaitRoom, Waiter};
use super::word::WAITERS;
use super::Gil;
use crate::class::{self, ThreadClass};
use crate::events::{Event, EventKind};
use crate::laps;
use crate::policy::{self, Turn};
use crate::reason::ReleaseReason;
use crate::sync::{spin_while, Condvar, MutexGuard};
use crate::Token;

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
        let hot = &*self.inner.hot;
        let w = room.join(
            self.inner.tuning.policy(),
            (token, class),
            started,
            hot.acquisitions(),
            cond,
        );
        // Acquire: pairs with the previous releaser's Release, so `owner`
        // reads below see its clearing store, hence 0 or the current holder.
        hot.word().set_waiters();
        self.observe_wait_start(token);
        if room.queue().len() == 1 {
            // The first waiter: the holder's interval (and its call, if it
            // is in one) is timed from now, whatever was timed before (and
            // after the wait's event, so a trace never shows a request
            // sooner than an interval after it), and a turn left over from
            // before is checked.
            let now = room.clock().now();
            room.timers_mut().first_waiter(hot.switch_number(), now);
            room.first_waiter_came(hot.holder(), hot.last_holder());
        }
        w
    }

    /// `w` leaves the waiting room: with the lock, or without it (abort, a
    /// panicking callback). Without it, whoever should go next instead is
    /// woken, and if nobody is left a pending request is moot and a forced
    /// releaser waiting for a switch that can no longer come is let go.
    /// Whether it was starving.
    pub(super) fn leave(&self, slow: &Slow, room: &mut WaitRoom, w: &Waiter<'_>, with_lock: bool) -> bool {
        let policy = self.inner.tuning.policy();
        // Whether it kept time for the others (see `keeps_time`): then
        // whoever takes over that job is woken to do it.
        let was_designee = room.designee(policy).is_some_and(|d| d.ticket() == w.ticket());
        let was_timing_starvation = room.first_to_starve(policy, w);
        let starving = room.remove(w, with_lock);
        if !self.monitor_keeps_time(room) && room.census().waiters() > 0 {
            room.wake_timekeepers(policy, was_designee, was_timing_starvation || starving);
        }
        if room.census().waiters() == 0 {
            self.inner.hot.word().clear_waiters();
            if !with_lock {
                self.inner.room.clear_drop_request();
                room.request_answered();
                if room.switch_awaited() {
                    slow.notify_switch();
                }
            }
        } else if !with_lock && (!self.inner.hot.locked() || starving) {
            // We may have consumed the wake-up meant for taking the lock, or
            // held back the others while starving.
            room.wake_next(policy);
        }
        starving
    }

    /// Whether a thread that is not waiting may take the free lock now
    /// (`try_acquire`).
    pub(super) fn may_take_now(&self, token: Token, class: ThreadClass, room: &mut WaitRoom) -> bool {
        let turn = self.turn(room, None, token);
        let rotation = room.my_rotation(token, None);
        policy::may_take(
            self.inner.tuning.policy(),
            room.census(),
            (class, false),
            turn,
            rotation,
        )
    }

    /// Whether waiter `w` may take the free lock now.
    pub(super) fn may_take_queued(&self, room: &mut WaitRoom, w: &Waiter<'_>) -> bool {
        let turn = self.turn(room, Some(w.ticket()), w.token());
        let rotation = room.my_rotation(w.token(), Some(w.ticket()));
        let me = (w.class(), room.is_starving(w.ticket()));
        policy::may_take(self.inner.tuning.policy(), room.census(), me, turn, rotation)
    }

    /// Where the designee stands for `token`, the waiter with `ticket`
    /// (`None`: a thread not queued). Also starts timing a new designee.
    fn turn(&self, room: &mut WaitRoom, ticket: Option<u64>, token: Token) -> Turn {
        let tuning = &self.inner.tuning;
        let Some((d, class, joined_at, since)) = room.designee_since(tuning.policy()) else {
            return Turn::Open;
        };
        if Some(d) == ticket {
            return Turn::Mine;
        }
        let Some(bound) = policy::handoff_bound(tuning.policy(), tuning.monitored(), tuning.interval()) else {
            return Turn::Open;
        };
        let lapped = tuning.laps() > 0 && {
            let now = self.inner.hot.acquisitions();
            !policy::may_overtake(laps::since(self.id(), token.get(), joined_at, now), tuning.laps())
        };
        if lapped || room.clock().passed(since, bound) {
            Turn::Reserved(class)
        } else {
            Turn::Open
        }
    }

    /// The room's only waiter steps out of the lock word for a watch
    /// (`Gil::spin_while_io_holds`): `WAITERS` is cleared, so that the
    /// holder's calls meanwhile take the fast paths; whether it did (not
    /// while a drop request is pending, or others wait).
    pub(super) fn step_out_of_word(&self, room: &WaitRoom) -> bool {
        let out = room.census().waiters() == 1 && !self.inner.room.drop_requested();
        if out {
            self.inner.hot.word().clear_waiters();
        }
        out
    }

    /// The watcher that stepped out is back, under the mutex: `WAITERS` is
    /// set again before it looks at the word.
    pub(super) fn step_back_into_word(&self) {
        self.inner.hot.word().set_waiters();
    }

    /// Raises the drop request for waiter `w`. If the host's callback
    /// panicked, `w` leaves the room and the panic goes on.
    pub(super) fn request_drop_for(&self, slow: &Slow, room: &mut WaitRoom, w: &Waiter<'_>) {
        if let Err(panic) = self.request_drop(Some(w.token())) {
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
        let hot = &*self.inner.hot;
        // With a waiter in the room only a watcher clears it, under the
        // mutex held here: a load says whether one did, and spares the
        // usual request a write to the holder's cache line.
        if hot.word().load(Relaxed) & WAITERS == 0 {
            hot.word().set_waiters();
        }
        let fresh = self.inner.room.raise_drop_request();
        if fresh {
            self.inner.tally.drop_request();
        }
        let owner = hot.holder();
        if fresh && hot.instr() != 0 {
            // Without an owner the holder is letting go right now (it cleared
            // `owner` and waits for the mutex): the request is its. During a
            // final release nobody is named (see `observe_drop_request`).
            self.observe_drop_request(owner.or_else(|| hot.last_holder()), by);
        }
        // No owner: the holder is letting go (see above), or it is the
        // instant between a fast-path CAS and its `owner` store. The flag is
        // up either way; only the callback needs a live holder.
        let Some(holder) = owner else {
            return Ok(());
        };
        match self.inner.tuning.on_drop_request() {
            Some(callback) => {
                let _inside = self.enter_callback();
                catch_unwind(AssertUnwindSafe(|| callback(holder)))
            }
            None => Ok(()),
        }
    }

    /// The lock word was just won under the mutex: a new holder starts with
    /// no drop request (CPython clears the bit in `take_gil`), and forced
    /// releasers waiting for a switch are told to look. Its interval is
    /// timed from now; a CPU-class taker is the CPU class's turn (see
    /// `WaitRoom::took`); a waiter that `starved` starts its slice.
    pub(super) fn took_over_under_mutex(
        &self,
        token: Token,
        class: ThreadClass,
        starved: bool,
        slow: &Slow,
        room: &mut WaitRoom,
    ) {
        let hot = &*self.inner.hot;
        self.inner.room.clear_drop_request();
        room.request_answered();
        hot.became_holder(token, class);
        if self.inner.tuning.laps() > 0 {
            laps::record(self.id(), token.get(), hot.acquisitions());
        }
        if starved {
            hot.start_slice();
        }
        let turns = self.inner.tuning.policy() == crate::Policy::Priority;
        room.took(token, class, hot.switch_number(), turns);
        self.observe_acquire(token);
        if starved {
            self.time_the_slice(room);
        }
        if room.switch_awaited() {
            slow.notify_switch();
        }
    }

    /// A slice has just begun: makes sure somebody times its end. The
    /// monitor looks within the slice; without it, the designee (the
    /// waiter it ends for, and a timekeeper) is woken to time it, as it may
    /// be asleep in a wait of a whole interval.
    fn time_the_slice(&self, room: &WaitRoom) {
        if self.inner.tuning.monitored() {
            self.ask_monitor_within(policy::slice(self.interval()));
        } else {
            room.wake_next(self.inner.tuning.policy());
        }
    }

    /// A release with somebody waiting: frees the lock under the mutex,
    /// wakes whoever goes next, and with forced switching waits until
    /// another thread has taken it.
    #[cold]
    pub(super) fn release_slow(&self, token: Token, reason: ReleaseReason) {
        let hot = &*self.inner.hot;
        let policy = self.inner.tuning.policy();
        let slow = self.slow();
        let mut room = slow.lock();
        let requested = self.inner.room.take_drop_request();
        let asked = room.request_answered();
        let held_as = hot.holder_class().0;
        if let Some(class) = policy::class_after_request(policy, reason, requested, asked, held_as) {
            class::remember(self.id(), token.get(), class);
        }
        // Made to let go only for an I/O-class thread: back for its turn.
        let preempted = reason == ReleaseReason::Forced && requested && asked == policy::Asked::default();
        room.let_go(token, preempted);
        hot.word().unlock();
        room.wake_next(policy);
        if !policy::waits_for_switch(reason, requested) || room.census().waiters() == 0 {
            return;
        }
        // Forced switching: don't return (and maybe win the lock straight
        // back) before somebody else has taken it. With a spin limit, watch
        // for the switch before sleeping: the waiter that asked spins too,
        // and takes the lock within microseconds.
        room.waiting_for_switch(true);
        if let Some(limit) = self.inner.tuning.spin_limit() {
            MutexGuard::unlocked_spinning(&mut room, limit, || spin_while(limit, || hot.last_held_by(token)));
        }
        while hot.last_held_by(token) && room.census().waiters() > 0 {
            slow.wait_for_switch(&mut room);
        }
        room.waiting_for_switch(false);
        if !hot.last_held_by(token) {
            self.inner.tally.forced_switch();
            if self.hooked() {
                let to = hot.last_holder();
                self.emit(EventKind::ForcedSwitch, || {
                    Event::now(EventKind::ForcedSwitch, token, to)
                });
            }
        }
    }
}
