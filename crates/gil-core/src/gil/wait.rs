//! Waiting for the lock without the monitor: each waiter keeps its own time
//! with timed waits, as in CPython's `take_gil`. It raises the drop request
//! after a whole switch interval without a switch, times the holder's lazily
//! released system call and takes it over past the threshold, and (priority
//! policy) asks a CPU-class holder at once or marks itself starving; the
//! rules are [`crate::policy`]'s.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use super::room::{first_seen, Slow, WaitRoom, Waiter};
use super::word::{generation, LOCKED, SYSCALL};
use super::{bump, AbortCheck, Gil};
use crate::policy;
use crate::sync::{Condvar, MutexGuard, Stamp};
use crate::{GilError, Token};

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
        let mut room = slow.mutex.lock();
        let mut w = self.join(&mut room, token, started, &cond);
        let took;
        (room, took) = if self.inner.monitor {
            self.wait_monitored(slow, room, &w, &cond, &mut should_abort)
        } else {
            self.wait_timing_itself(slow, room, &mut w, &cond, &mut should_abort)
        };
        if !took {
            self.leave(slow, &mut room, &w, false);
            return Err(GilError::Aborted);
        }
        let starved = self.leave(slow, &mut room, &w, true);
        self.took_over_under_mutex(token, w.class, starved, slow, &mut room);
        self.waited(w.started);
        Ok(())
    }

    /// Waiter `w` waits in `room`, keeping its own time, until it has taken
    /// the lock word (true) or `should_abort` said to give up (false).
    fn wait_timing_itself<'s>(
        &self,
        slow: &'s Slow,
        mut room: MutexGuard<'s, WaitRoom>,
        w: &mut Waiter,
        cond: &Condvar,
        should_abort: &mut AbortCheck<'_>,
    ) -> (MutexGuard<'s, WaitRoom>, bool) {
        let policy = self.inner.policy;
        let hot = &*self.inner.hot;
        let token = w.token;
        // The lazy-release episode being timed: (generation, first seen).
        let mut episode: Option<(u64, Stamp)> = None;
        // The switch number of the holder already preempted by this waiter.
        let mut preempted: Option<u64> = None;
        // With lazy release: since when this waiter has waited for the
        // current holder (its switch number), across wake-ups.
        let mut waiting_on: Option<(u64, Stamp)> = None;
        // The switch number of the holder whose slice's end this waiter
        // has already asked for.
        let mut sliced: Option<u64> = None;
        // The switch number of the I/O-class holder this waiter has spun
        // for, and whether the last round did.
        let mut spun_on: Option<u64> = None;
        let mut spun = false;
        loop {
            let s = hot.word.load(Relaxed);
            if s & SYSCALL != 0 && self.reclaim(token).is_some() {
                // Our own system call (the fast path lost a race with a
                // waiter's arrival): just take it back.
                break;
            }
            let may_take = self.may_take_queued(&mut room, w);
            if may_take && self.grace_before_take(&mut room, w, s, &mut spun_on) {
                spun = true;
                continue;
            }
            if may_take && self.try_lock_word() {
                if spun {
                    self.took_after_spin();
                }
                break;
            }
            spun = false;
            // What this wait is for, and the switch number at its start.
            let mut holder_running = None;
            // Only the waiters that keep time wait with a timeout; the
            // others sleep until a release, or a change of who keeps time,
            // wakes them.
            let timed = should_abort.is_some() || room.keeps_time(policy, w);
            let timed_out = if s & SYSCALL != 0 {
                // The holder is in a system call: take it over once the call
                // has lasted the threshold.
                let threshold = self.inner.lazy_release.unwrap_or_default();
                let since = first_seen(&mut episode, generation(s), &room.clock);
                if room.clock.passed(since, threshold) && may_take && self.take_over_call(s, false) {
                    bump(&self.inner.lazy_takeovers, 1);
                    self.observe_takeover(Some(token));
                    break;
                }
                // The holder's switch interval runs on while it is in short
                // calls: a thread that is in a call most of the time but
                // never for long must still be asked to drop. The request
                // then only raises the flag (nobody runs to call back); the
                // holder answers at its next release.
                let sn = hot.switch_number.load(Relaxed);
                let held = first_seen(&mut waiting_on, sn, &room.clock);
                holder_running = Some(sn);
                let left = room
                    .clock
                    .left(since, threshold)
                    .min(room.clock.left(held, self.interval()));
                w.wait(cond, &mut room, timed, left);
                // A call that has outlasted the threshold is taken over (next
                // round), not asked to end.
                room.clock.passed(held, self.interval()) && !room.clock.passed(since, threshold)
            } else if s & LOCKED == 0 {
                // Free, but not ours to take (priority): wait to be woken.
                w.wait(cond, &mut room, timed, self.interval())
            } else {
                let (holder, slice) = self.holder_class();
                let sn = hot.switch_number.load(Relaxed);
                if policy::urgent(policy, w.class, holder, w.starving, slice) && preempted != Some(sn) {
                    preempted = Some(sn);
                    // A starving waiter asks for itself, not to preempt.
                    room.asked.starving |= w.starving;
                    if self.ask_at_once(slow, &mut room, w, !w.starving) {
                        continue;
                    }
                }
                spun = self.spin_while_io_holds(&mut room, w, (s, sn), &mut spun_on);
                if spun {
                    continue;
                }
                holder_running = Some(sn);
                // A holder in its slice is asked to drop when the slice is
                // over: once per slice, by whoever notices first.
                let slice_left = if sliced == Some(sn) {
                    None
                } else {
                    self.slice_left(&room, sn)
                };
                if let Some(left) = slice_left {
                    if left.is_zero() {
                        sliced = Some(sn);
                        true
                    } else {
                        w.wait(cond, &mut room, timed, left);
                        false // the next round asks
                    }
                } else if self.inner.lazy_release.is_some() {
                    // Every lazy release wakes a waiter (to time the call);
                    // such wake-ups must not restart the interval, or a
                    // thread making system calls all the time would never be
                    // asked to drop. So the interval runs from when this
                    // waiter started waiting on this holder.
                    let since = first_seen(&mut waiting_on, sn, &room.clock);
                    let left = room.clock.left(since, self.interval());
                    w.wait(cond, &mut room, timed, left);
                    room.clock.passed(since, self.interval())
                } else {
                    w.wait(cond, &mut room, timed, self.interval())
                }
            };
            // The starvation bound is checked at every wake-up: a waiter
            // woken by every release but losing every race (to threads
            // arriving as it wakes) never sees a wait time out. Only the
            // first CPU-class waiter, and only while nobody starves.
            if room.first_to_starve(policy, w)
                && room.clock.passed(
                    policy::starvation_start(w.since, room.cpu_served),
                    policy::starvation_bound(self.interval()),
                )
            {
                w.starving = true;
                room.entry_mut(w.ticket).starving = true;
                room.census.starving += 1;
                bump(&self.inner.starvation_promotions, 1);
                continue;
            }
            if !timed_out {
                continue;
            }
            if self.ask_abort(should_abort) {
                return (room, false);
            }
            // A whole interval passed with the holder running. Ask for a
            // drop only if nobody took the lock in the meantime: after a
            // switch the new holder gets its own full interval (CPython's
            // rule).
            let now = hot.word.load(Relaxed);
            if holder_running.is_some_and(|sn| sn == hot.switch_number.load(Relaxed)) && now & LOCKED != 0 {
                room.asked.interval = true;
                self.request_drop_for(slow, &mut room, w);
                if waiting_on.is_some() {
                    // Lazy release: the holder gets a whole interval to
                    // answer before it is asked again (as the timed waits of
                    // the other policies give it), not a wake-up a
                    // microsecond.
                    waiting_on = holder_running.map(|sn| (sn, room.clock.now()));
                }
                self.spin_for_release(&mut room);
            }
        }
        (room, true)
    }
}
