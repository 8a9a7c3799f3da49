//! One look at the lock's clock: what the holder, its lazily released call
//! and the waiters look like now, handed to [`policy::due`] with the room's
//! timers, and what is due done. The monitor thread looks at each lock it
//! watches (`monitor.rs`); on a lock without it, each waiter that keeps the
//! time looks whenever it wakes (`wait.rs`). Neither times anything itself.

use std::sync::atomic::Ordering::Acquire;

use super::room::WaitRoom;
use super::word::{generation, LOCKED, SYSCALL};
use super::Gil;
use crate::policy::{self, Due, Holding, Scene};

impl Gil {
    /// One look at the lock under its mutex: does what [`policy::due`]
    /// says is due (takes over a long call, marks a starving waiter, wakes
    /// whoever goes next on a free lock) and notes why a drop request is
    /// due, but leaves raising it to the caller (`Due::ask`): a waiter and
    /// the monitor answer a panicking host callback differently.
    pub(super) fn look_locked(&self, room: &mut WaitRoom) -> Due {
        let hot = &*self.inner.hot;
        let tuning = &self.inner.tuning;
        let policy = tuning.policy();
        // As few loads as the look needs (each is a step loom explores).
        let s = hot.word().load(Acquire);
        let holder = if s & SYSCALL != 0 {
            Holding::InCall {
                sn: hot.switch_number(),
                gen: generation(s),
            }
        } else if s & LOCKED != 0 {
            let (class, slice) = hot.holder_class();
            let owns_turn = room
                .turn_owner()
                .is_some_and(|owner| hot.holder().is_some_and(|t| t.get() == owner));
            Holding::Running {
                sn: hot.switch_number(),
                class,
                slice,
                owns_turn,
            }
        } else {
            Holding::Free
        };
        let to_starve = policy::next_to_starve(policy, room.census(), room.queue().iter());
        let handing_over = room.after_takeover();
        let scene = Scene {
            interval: self.interval(),
            threshold: policy::takeover_threshold(tuning.lazy_release(), handing_over),
            holder,
            census: room.census(),
            to_starve: to_starve.map(|i| room.queue()[i].since()),
        };
        let due = room.due(&scene);
        // The starving waiter first: a takeover wakes whoever goes first
        // then, and that must be the waiter starving from now on.
        if let (true, Some(i)) = (due.starve, to_starve) {
            let ticket = room.queue()[i].ticket();
            room.mark_starving(ticket);
            self.inner.tally.starvation_promotion();
        }
        if due.take_over {
            // In a stretch of hand-overs the takeover is at once, and does
            // not restart the stretch (see `policy::takeover_threshold`).
            self.take_over_system_call(s, room, !handing_over);
        }
        if let Some(asked) = due.ask {
            room.note_request(asked.interval, asked.starving);
        }
        if (due.starve || due.turn_over) && holder == Holding::Free {
            // Whoever goes first now must be awake to take the free lock.
            room.wake_next(policy);
        }
        due
    }

    /// Takes the lock from the holder's lazily released system call (state
    /// `s`) and hands it to the designee. The thread in the call finds it
    /// gone when it comes back, and waits like anyone else. `outlasted`:
    /// the call outlasted the threshold (it starts or extends a stretch of
    /// hand-overs).
    fn take_over_system_call(&self, s: u64, room: &mut WaitRoom, outlasted: bool) {
        if !self.inner.hot.word().take_over_call(s, true) {
            return; // it came back (or the state moved): nothing to take
        }
        self.inner.tally.lazy_takeover();
        if outlasted {
            room.call_taken_over(self.interval());
        }
        self.observe_takeover(None);
        room.wake_next(self.inner.tuning.policy());
    }
}
