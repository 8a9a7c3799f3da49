//! Waiting for the lock: one loop for every waiter, whoever keeps the time.
//! Each round the waiter takes back its own lazily released call, takes
//! the free lock if the rules let it (an I/O-class last holder first gets
//! its grace), asks a holder at once where the rules say so, or watches an
//! I/O-class holder's quick calls; then it waits. On a monitored lock the
//! monitor keeps the time and the waiter sleeps until woken; otherwise the
//! waiters that keep the time (the designee, and the CPU-class waiter the
//! starvation bound is timed on: `WaitRoom::keeps_time`) take a look at the
//! lock's clock each time they wake ([`Gil::look_locked`], the same look the
//! monitor takes) and sleep until the next thing is due; the others sleep
//! until woken. The rules are [`crate::policy`]'s.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use super::room::{Slow, WaitRoom, Waiter};
use super::word::{LOCKED, SYSCALL};
use super::{AbortCheck, Gil};
use crate::policy;
use crate::sync::{spin_while, Condvar, MutexGuard};
use crate::{GilError, Token};

/// What a waiter carries from one round of its wait to the next.
struct Rounds {
    /// The switch number of the holder this waiter has asked to drop at
    /// once (to preempt it, or starving).
    asked_at_once: Option<u64>,
    /// The switch number of the I/O-class holder this waiter has watched.
    watched: Option<u64>,
    /// The last round ended in a watch: a take now is one after a spin.
    spun: bool,
}

impl Gil {
    /// The slow path of `acquire`: `token` joins the waiting room, waits
    /// (timing itself, or with the monitor keeping the time) until it may
    /// take the lock or is told to give up, and leaves the room.
    #[cold]
    pub(super) fn acquire_slow(&self, token: Token, mut should_abort: AbortCheck<'_>) -> Result<(), GilError> {
        if self.in_callback() {
            // The lock is held, awaited or observed while its callback runs:
            // waiting here would wait for this very thread.
            return Err(GilError::Reentrant);
        }
        let started = Instant::now();
        let slow = self.slow();
        let cond = Condvar::new();
        let mut room = slow.lock();
        let w = self.join(&mut room, token, started, &cond);
        if !self.wait_in_room(slow, &mut room, &w, &mut should_abort) {
            self.leave(slow, &mut room, &w, false);
            return Err(GilError::Aborted);
        }
        let starved = self.leave(slow, &mut room, &w, true);
        self.took_over_under_mutex(token, w.class(), starved, slow, &mut room);
        self.waited(w.started());
        Ok(())
    }

    /// Waiter `w` waits in `room` until it has taken the lock word (true)
    /// or `should_abort` said to give up (false).
    fn wait_in_room(
        &self,
        slow: &Slow,
        room: &mut MutexGuard<'_, WaitRoom>,
        w: &Waiter<'_>,
        should_abort: &mut AbortCheck<'_>,
    ) -> bool {
        let policy = self.inner.tuning.policy();
        let hot = &*self.inner.hot;
        let mut rounds = Rounds {
            asked_at_once: None,
            watched: None,
            spun: false,
        };
        if self.inner.tuning.monitored() {
            self.monitor_joined(room);
        }
        loop {
            let s = hot.word().load(Relaxed);
            if s & SYSCALL != 0 && hot.reclaim(w.token()).is_some() {
                // Our own system call (the fast path lost a race with a
                // waiter's arrival): just take it back.
                return true;
            }
            let may_take = self.may_take_queued(room, w);
            if may_take && self.grace_before_take(room, w, s, &mut rounds.watched) {
                rounds.spun = true;
                continue;
            }
            if may_take && hot.word().try_lock() {
                if rounds.spun {
                    // A take by a waiter that watched an I/O-class holder
                    // just before.
                    self.inner.tally.cpu_spin_take();
                }
                return true;
            }
            rounds.spun = false;
            if s & (LOCKED | SYSCALL) == LOCKED {
                // A running holder: ask it at once if the rules say so,
                // then watch it if it is an I/O-class thread.
                let (holder, slice) = hot.holder_class();
                let sn = hot.switch_number();
                let starving = room.is_starving(w.ticket());
                if policy::urgent(policy, w.class(), holder, starving, slice) && rounds.asked_at_once != Some(sn) {
                    rounds.asked_at_once = Some(sn);
                    // A starving waiter asks for itself, not to preempt.
                    room.note_request(false, starving);
                    if self.ask_at_once(slow, room, w, !starving) {
                        continue;
                    }
                }
                if self.spin_while_io_holds(room, w, (s, sn), &mut rounds.watched) {
                    rounds.spun = true;
                    continue;
                }
            }
            let abortable = should_abort.is_some();
            // A lazily released call in a stretch of hand-overs is taken
            // over at the first look, so this waiter looks itself rather
            // than wait for the monitor's (`policy::takeover_threshold`).
            let in_call_handing_over = s & SYSCALL != 0 && room.after_takeover();
            let timed_out = if self.monitor_keeps_time(room) && !in_call_handing_over {
                // The monitor looks at the lock; a release or its look
                // wakes us (and an abort check is asked each interval).
                w.wait(room, abortable, self.interval())
            } else if room.keeps_time(policy, w) || self.inner.tuning.monitored() {
                // We keep the time (a monitored lock whose waiters could not
                // start the monitor: every waiter): look, then sleep until
                // the next thing is due.
                let due = self.look_locked(room);
                if due.ask.is_some() {
                    self.request_drop_for(slow, room, w);
                    if self.spin_for_release(room, self.inner.tuning.ask_spin(false, room.census())) {
                        continue;
                    }
                } else if due.take_over || due.starve || due.turn_over {
                    continue; // the rules changed: look again
                }
                let next = due.next.unwrap_or_else(|| self.interval());
                w.wait(room, true, if abortable { next.min(self.interval()) } else { next })
            } else {
                // Somebody else keeps the time: until a release, or a
                // change of who keeps time, wakes us.
                w.wait(room, abortable, self.interval())
            };
            if timed_out && self.ask_abort(should_abort) {
                return false;
            }
        }
    }

    /// Asks an `acquire_or_abort` check whether to give up, as a callback of
    /// this lock.
    fn ask_abort(&self, check: &mut AbortCheck<'_>) -> bool {
        match check {
            Some(check) => {
                let _inside = self.enter_callback();
                check()
            }
            None => false,
        }
    }

    /// Asks the holder to drop at once for waiter `w` (a preemption,
    /// counted as one if `preemption`), then watches for the release as
    /// long as [`policy::ask_spin`] says: whether it spun.
    fn ask_at_once(&self, slow: &Slow, room: &mut MutexGuard<'_, WaitRoom>, w: &Waiter<'_>, preemption: bool) -> bool {
        if preemption {
            self.inner.tally.preemption();
        }
        self.request_drop_for(slow, room, w);
        self.spin_for_release(room, self.inner.tuning.ask_spin(preemption, room.census()))
    }

    /// After a drop request, for up to `limit` (`None`: not at all):
    /// watches the lock word, without the mutex, for the holder to let go
    /// before sleeping (see `GilConfig::spin_us`). Whether it spun.
    fn spin_for_release(&self, room: &mut MutexGuard<'_, WaitRoom>, limit: Option<Duration>) -> bool {
        let Some(limit) = limit else {
            return false;
        };
        MutexGuard::unlocked_spinning(room, limit, || spin_while(limit, || self.inner.hot.locked()));
        true
    }

    /// With a spin limit: waiter `w`, while an I/O-class thread holds the
    /// lock or was the last to hold it (state `s`, switch number `sn`),
    /// watches the lock word, without the mutex, before it takes the lock
    /// or sleeps, if [`policy::watches`] says so; [`policy::Watch`] says
    /// for how long. Once per holder (`watched` keeps its switch number),
    /// one waiter at a time. A waiter alone in the room watches with
    /// `WAITERS` cleared, so that the I/O thread's calls meanwhile cost what
    /// they cost with nobody waiting (the module docs of `word.rs`).
    /// Whether it watched.
    fn spin_while_io_holds(
        &self,
        room: &mut MutexGuard<'_, WaitRoom>,
        w: &Waiter<'_>,
        (s, sn): (u64, u64),
        watched: &mut Option<u64>,
    ) -> bool {
        let Some(limit) = self.inner.tuning.spin_limit() else {
            return false;
        };
        let hot = &*self.inner.hot;
        let watches = policy::watches(
            (w.class(), room.is_starving(w.ticket())),
            hot.holder_class().0,
            s & SYSCALL != 0,
            *watched == Some(sn),
            room.my_rotation(w.token(), Some(w.ticket())),
        );
        if !watches || !self.inner.room.begin_watch() {
            return false;
        }
        *watched = Some(sn);
        // Alone in the room, the watcher steps out of the lock word: it
        // needs no wake-up, and with `WAITERS` clear the I/O thread's takes
        // and releases around its calls stay on the fast path instead of
        // queueing through the mutex each time. A drop request puts it
        // back (`request_drop`); so does the watcher, under the mutex,
        // before it looks at the word again.
        let stepped_out = self.step_out_of_word(room);
        MutexGuard::unlocked_spinning(room, limit, || {
            let mut watch = policy::Watch::new(limit, Instant::now(), hot.acquisitions());
            spin_while(policy::Watch::length(limit), || {
                let switched = hot.switch_number() != sn;
                let takes = hot.acquisitions();
                watch.look(Instant::now(), switched, takes, hot.locked())
            });
        });
        if stepped_out {
            self.step_back_into_word();
        }
        // After `WAITERS` is back: `is_idle` sees one or the other.
        self.inner.room.end_watch();
        true
    }

    /// At the top of a wait loop, `w` allowed to take the lock: if it is
    /// free (state `s`), a CPU-class waiter first leaves an I/O-class last
    /// holder its grace ([`Gil::spin_while_io_holds`]). Whether it watched
    /// (then the loop looks again).
    fn grace_before_take(
        &self,
        room: &mut MutexGuard<'_, WaitRoom>,
        w: &Waiter<'_>,
        s: u64,
        watched: &mut Option<u64>,
    ) -> bool {
        if s & LOCKED != 0 {
            return false;
        }
        let sn = self.inner.hot.switch_number();
        self.spin_while_io_holds(room, w, (s, sn), watched)
    }
}
