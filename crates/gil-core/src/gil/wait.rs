//! Waiting for the lock: one loop for every waiter, whoever keeps the time.
//! Each round the waiter takes back its own lazily released call, takes
//! the free lock if the rules let it (an I/O-class last holder first gets
//! its grace), asks a holder at once where the rules say so, or watches an
//! I/O-class holder's quick calls; then it waits. How it waits is the one
//! part that differs ([`Timing`]): on a monitored lock the monitor keeps
//! the time (`monitor.rs`); otherwise each waiter keeps its own with timed
//! waits, as in CPython's `take_gil`: it raises the drop request after a
//! whole switch interval without a switch, times the holder's lazily
//! released system call and takes it over past the threshold, and
//! (priority policy) marks itself starving. The rules are
//! [`crate::policy`]'s.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use super::room::{first_seen, Slow, WaitRoom, Waiter};
use super::word::{generation, LOCKED, SYSCALL};
use super::{AbortCheck, Gil};
use crate::policy;
use crate::sync::{spin_while, Condvar, MutexGuard, Stamp};
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
    /// Who keeps the time.
    timing: Timing,
}

/// Who keeps a waiter's time: the part of the wait that differs.
enum Timing {
    /// The monitor thread (`monitor.rs`): the waiter sleeps until woken.
    Monitor,
    /// The waiter itself, with timed waits.
    Own(OwnClock),
}

/// What a waiter that keeps its own time remembers from round to round.
#[derive(Default)]
struct OwnClock {
    /// The lazy-release episode being timed: (generation, first seen).
    episode: Option<(u64, Stamp)>,
    /// With lazy release: since when this waiter has waited for the
    /// current holder (its switch number), across wake-ups.
    waiting_on: Option<(u64, Stamp)>,
    /// The switch number of the holder whose slice's end this waiter has
    /// already asked for.
    sliced: Option<u64>,
    /// The holder this round's wait timed (its switch number), if any: it
    /// is asked to drop if the wait runs out.
    timing_holder: Option<u64>,
}

/// How a round's wait ended.
enum Woke {
    /// The waiter took the lock (over a lazily released call).
    Took,
    /// It looks again.
    Again,
    /// Its timed wait ran out.
    TimedOut,
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
        let mut w = self.join(&mut room, token, started, &cond);
        if !self.wait_in_room(slow, &mut room, &mut w, &mut should_abort) {
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
        w: &mut Waiter<'_>,
        should_abort: &mut AbortCheck<'_>,
    ) -> bool {
        let policy = self.inner.tuning.policy();
        let hot = &*self.inner.hot;
        let mut rounds = Rounds {
            asked_at_once: None,
            watched: None,
            spun: false,
            timing: if self.inner.tuning.monitored() {
                self.monitor_joined(room, w);
                Timing::Monitor
            } else {
                Timing::Own(OwnClock::default())
            },
        };
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
                if policy::urgent(policy, w.class(), holder, w.starving(), slice) && rounds.asked_at_once != Some(sn) {
                    rounds.asked_at_once = Some(sn);
                    // A starving waiter asks for itself, not to preempt.
                    room.note_request(false, w.starving());
                    if self.ask_at_once(slow, room, w, !w.starving()) {
                        continue;
                    }
                }
                if self.spin_while_io_holds(room, w, (s, sn), &mut rounds.watched) {
                    rounds.spun = true;
                    continue;
                }
            }
            let woke = match &mut rounds.timing {
                Timing::Monitor => {
                    if self.wait_for_monitor(room, w, should_abort.is_some()) {
                        Woke::TimedOut
                    } else {
                        Woke::Again
                    }
                }
                Timing::Own(clock) => self.wait_timing_itself(clock, room, w, s, may_take, should_abort.is_some()),
            };
            match woke {
                Woke::Took => return true,
                Woke::Again => continue,
                Woke::TimedOut => {}
            }
            if self.ask_abort(should_abort) {
                return false;
            }
            if let Timing::Own(clock) = &mut rounds.timing {
                self.ask_after_interval(clock, slow, room, w);
            }
        }
    }

    /// One round's wait of waiter `w`, keeping its own time, with the lock
    /// word at `s` (not ours to take, or taken: `may_take` says whether the
    /// rules let `w` take a free lock). Only the waiters that keep time
    /// wait with a timeout (and any waiter with an abort check to ask,
    /// `abortable`); the others sleep until a release, or a change of who
    /// keeps time, wakes them.
    fn wait_timing_itself(
        &self,
        clock: &mut OwnClock,
        room: &mut MutexGuard<'_, WaitRoom>,
        w: &mut Waiter<'_>,
        s: u64,
        may_take: bool,
        abortable: bool,
    ) -> Woke {
        let policy = self.inner.tuning.policy();
        let hot = &*self.inner.hot;
        clock.timing_holder = None;
        let timed = abortable || room.keeps_time(policy, w);
        let timed_out = if s & SYSCALL != 0 {
            // The holder is in a system call: take it over once the call
            // has lasted the threshold.
            let threshold = self.inner.tuning.lazy_release().unwrap_or_default();
            let since = first_seen(&mut clock.episode, generation(s), room.clock());
            if room.clock().passed(since, threshold) && may_take && hot.word().take_over_call(s, false) {
                self.inner.tally.lazy_takeover();
                self.observe_takeover(Some(w.token()));
                return Woke::Took;
            }
            // The holder's switch interval runs on while it is in short
            // calls: a thread that is in a call most of the time but
            // never for long must still be asked to drop. The request
            // then only raises the flag (nobody runs to call back); the
            // holder answers at its next release.
            let sn = hot.switch_number();
            let held = first_seen(&mut clock.waiting_on, sn, room.clock());
            clock.timing_holder = Some(sn);
            let left = room
                .clock()
                .left(since, threshold)
                .min(room.clock().left(held, self.interval()));
            w.wait(room, timed, left);
            // A call that has outlasted the threshold is taken over (next
            // round), not asked to end.
            room.clock().passed(held, self.interval()) && !room.clock().passed(since, threshold)
        } else if s & LOCKED == 0 {
            // Free, but not ours to take (priority): wait to be woken.
            w.wait(room, timed, self.interval())
        } else {
            let sn = hot.switch_number();
            clock.timing_holder = Some(sn);
            // A holder in its slice is asked to drop when the slice is
            // over: once per slice, by whoever notices first.
            let slice_left = if clock.sliced == Some(sn) {
                None
            } else {
                self.slice_left(room, sn)
            };
            if let Some(left) = slice_left {
                if left.is_zero() {
                    clock.sliced = Some(sn);
                    true
                } else {
                    w.wait(room, timed, left);
                    false // the next round asks
                }
            } else if self.inner.tuning.lazy_release().is_some() {
                // Every lazy release wakes a waiter (to time the call);
                // such wake-ups must not restart the interval, or a
                // thread making system calls all the time would never be
                // asked to drop. So the interval runs from when this
                // waiter started waiting on this holder.
                let since = first_seen(&mut clock.waiting_on, sn, room.clock());
                let left = room.clock().left(since, self.interval());
                w.wait(room, timed, left);
                room.clock().passed(since, self.interval())
            } else {
                w.wait(room, timed, self.interval())
            }
        };
        // The starvation bound is checked at every wake-up: a waiter
        // woken by every release but losing every race (to threads
        // arriving as it wakes) never sees a wait time out. Only the
        // first CPU-class waiter, and only while nobody starves.
        if room.first_to_starve(policy, w)
            && room.clock().passed(
                policy::starvation_start(w.since(), room.cpu_served()),
                policy::starvation_bound(self.interval()),
            )
        {
            w.mark_starving();
            room.mark_starving(w.ticket());
            self.inner.tally.starvation_promotion();
            return Woke::Again;
        }
        if timed_out {
            Woke::TimedOut
        } else {
            Woke::Again
        }
    }

    /// A whole interval passed with the holder running (the one this
    /// round's wait timed). Waiter `w` asks for a drop only if nobody took
    /// the lock in the meantime: after a switch the new holder gets its own
    /// full interval (CPython's rule).
    fn ask_after_interval(&self, clock: &mut OwnClock, slow: &Slow, room: &mut MutexGuard<'_, WaitRoom>, w: &Waiter) {
        let hot = &*self.inner.hot;
        let now = hot.word().load(Relaxed);
        let running = clock.timing_holder;
        if running.is_some_and(|sn| sn == hot.switch_number()) && now & LOCKED != 0 {
            room.note_request(true, false);
            self.request_drop_for(slow, room, w);
            if clock.waiting_on.is_some() {
                // Lazy release: the holder gets a whole interval to
                // answer before it is asked again (as the timed waits of
                // the other policies give it), not a wake-up a
                // microsecond.
                clock.waiting_on = running.map(|sn| (sn, room.clock().now()));
            }
            self.spin_for_release(room);
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
    /// counted as one if `preemption`), then spins for the release if
    /// configured: whether it spun.
    fn ask_at_once(&self, slow: &Slow, room: &mut MutexGuard<'_, WaitRoom>, w: &Waiter<'_>, preemption: bool) -> bool {
        if preemption {
            self.inner.tally.preemption();
        }
        self.request_drop_for(slow, room, w);
        self.spin_for_release(room)
    }

    /// After a drop request, with a spin limit: watches the lock word,
    /// without the mutex, for the holder to let go before sleeping (see
    /// `GilConfig::spin_us`). Whether it spun.
    fn spin_for_release(&self, room: &mut MutexGuard<'_, WaitRoom>) -> bool {
        let Some(limit) = self.inner.tuning.spin_limit() else {
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
            w.class(),
            w.starving(),
            hot.holder_class().0,
            s & SYSCALL != 0,
            *watched == Some(sn),
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
        let stepped_out = room.census().waiters() == 1 && !self.inner.room.drop_requested();
        if stepped_out {
            hot.word().clear_waiters();
        }
        MutexGuard::unlocked_spinning(room, limit, || {
            let mut watch = policy::Watch::new(limit, Instant::now(), hot.acquisitions());
            spin_while(policy::Watch::length(limit), || {
                let switched = hot.switch_number() != sn;
                let takes = hot.acquisitions();
                watch.look(Instant::now(), switched, takes, hot.locked())
            });
        });
        if stepped_out {
            hot.word().set_waiters();
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
