//! The monitor (after the 2010 GIL-monitor proposal): one thread per process
//! keeps the time for every lock built with [`GilConfig::monitor`](crate::GilConfig::monitor), instead
//! of a timed wait in every waiter.
//!
//! # Waiting
//!
//! A waiter of a monitored lock joins the waiting room's queue with its own
//! condition variable, as every waiter does, and blocks without a timeout.
//! A release wakes exactly the *designee*: the first starving waiter, else
//! (priority policy) the first I/O-class waiter, else the first waiter.
//! A thread that is running when the lock comes free may take it first
//! until the designee has been overtaken for a whole switch interval;
//! from then on the lock is handed to the designee
//! ([`policy::handoff_bound`]). With a bound on laps, a thread may
//! overtake it only so many times ([`policy::may_overtake`]).
//!
//! # Keeping time
//!
//! The monitor thread looks at each lock that has waiters when something is
//! due, and does under the lock's mutex what waiters do for themselves
//! elsewhere:
//! * the holder has run a whole switch interval since it took the lock (or
//!   since the first waiter came) without a switch: a drop request, also
//!   while it is in a lazily released call (it answers at its next release);
//! * the first CPU-class waiter has waited [`STARVATION_INTERVALS`](crate::STARVATION_INTERVALS)
//!   intervals ([`policy::starvation_bound`]), counted from its arrival or
//!   the CPU class's last turn ([`policy::starvation_start`]), and nobody
//!   starves yet: it is marked starving, goes first, and the holder is
//!   asked to drop;
//! * the holder's lazily released system call has lasted the threshold: the
//!   lock is taken from it and handed to the designee.
//!
//! A lock joins the monitor's list when its first waiter comes and leaves it
//! at the first look that finds no waiter. With no lock in the list the
//! monitor sleeps without a timeout: no wake-ups at all in an idle process
//! ([`monitor_wakeups`]). Lazy releases made while others wait are one CAS
//! and, if the monitor is not due to look within the threshold anyway, a
//! signal to it; so is a waiter's arrival at a lock in the list, and a new
//! switch interval.
//!
//! The thread is started by the first wait on a monitored lock, so programs
//! that never contend never get it, and it exits once it has had nothing to
//! watch for `IDLE_EXIT` (100 ms): a library thread never keeps a process
//! alive (a process whose last thread calls `pthread_exit` ends only when
//! every thread has). The next first waiter starts a new one. In a child
//! process after `fork()` the parent's monitor is recognised by its process
//! id and never touched (its mutex may be held by a thread that did not
//! survive the fork); the child gets its own at its first wait, as the
//! parent did. No `pthread_atfork` handler is involved: one registered
//! lazily can miss a fork that races with its registration. If the thread
//! cannot be started, waiters keep the time themselves with the same code
//! ([`Gil::monitor_pass_locked`]).
//!
//! Under loom there is no thread: the model's clock thread runs the same
//! pass (`Gil::loom_tick`).

use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::time::Duration;

use super::room::{WaitRoom, Waiter};
use super::word::{generation, LOCKED, SYSCALL};
use super::Gil;
use crate::policy;
use crate::sync::MutexGuard;

impl Gil {
    /// A monitored lock just changed hands under the mutex: time the new holder.
    pub(super) fn watch_new_holder(&self, room: &mut WaitRoom) {
        let now = room.clock().now();
        room.monitor_mut().0.new_holder(self.inner.hot.switch_number(), now);
    }

    /// Waiter `w` has just joined: makes sure the monitor watches the lock.
    pub(super) fn monitor_joined(&self, room: &mut WaitRoom, w: &Waiter) {
        if room.queue().len() == 1 {
            // The first waiter: the holder's interval (and its call, if it
            // is in one) is timed from now, even if the lock is still in the
            // monitor's list with a schedule made for earlier waiters.
            let sn = self.inner.hot.switch_number();
            room.monitor_mut().0.first_waiter(sn, w.since());
        }
        if room.monitor().registered() != Some(process::id()) {
            let registered = process::watch(self).then(process::id);
            room.monitor_mut().0.set_registered(registered);
        } else {
            // Still in the monitor's list, but its schedule was made before
            // this waiter came: the holder may be in a system call nobody
            // timed (it began with no waiter), or the interval may have been
            // shortened since.
            self.ask_monitor_to_look();
        }
    }

    /// One round's wait of a waiter of a monitored lock: until it is woken
    /// (a release, a look of the monitor's), or, with an abort check to ask
    /// (`abortable`), for at most a switch interval. Without a monitor
    /// thread the waiter takes the monitor's look itself and waits until
    /// the next one is due. Whether the wait timed out.
    pub(super) fn wait_for_monitor(
        &self,
        room: &mut MutexGuard<'_, WaitRoom>,
        w: &Waiter<'_>,
        abortable: bool,
    ) -> bool {
        if room.monitor().registered().is_none() {
            // No monitor thread: keep the time ourselves.
            let next = self.monitor_pass_locked(room).unwrap_or_else(|| self.interval());
            w.wait(room, true, next)
        } else {
            w.wait(room, abortable, self.interval())
        }
    }

    /// One look at a monitored lock, under its mutex: raises what is due
    /// (see the module docs) and returns how soon to look again, or `None`
    /// if the lock has no waiter (it then leaves the monitor's list).
    pub(super) fn monitor_pass_locked(&self, room: &mut WaitRoom) -> Option<Duration> {
        if room.queue().is_empty() {
            room.monitor_mut().0.clear();
            return None;
        }
        let interval = self.interval();
        let now = room.clock().now();
        let mut next = interval;

        // A lazily released system call that outlasted the threshold.
        let s = self.inner.hot.word().load(Acquire);
        let mut new_episode = false;
        match self.inner.tuning.lazy_release() {
            Some(threshold) if s & SYSCALL != 0 => {
                let gen = generation(s);
                let (m, clock) = room.monitor_mut();
                let since;
                (new_episode, since) = m.episode_since(gen, clock);
                if new_episode {
                    next = next.min(threshold);
                } else if room.clock().passed(since, threshold) {
                    self.take_over_system_call(s, room);
                } else {
                    next = next.min(room.clock().left(since, threshold));
                }
            }
            _ => room.monitor_mut().0.end_episode(),
        }

        // The starvation bound: the first CPU-class waiter, while nobody
        // starves, timed from its arrival or the CPU class's last turn.
        let (mut ask, mut starved) = (false, false);
        if let Some(i) = policy::next_to_starve(self.inner.tuning.policy(), room.census(), room.queue().iter()) {
            let bound = policy::starvation_bound(interval);
            let since = policy::starvation_start(room.queue()[i].since(), room.cpu_served());
            if room.clock().passed(since, bound) {
                let ticket = room.queue()[i].ticket();
                room.mark_starving(ticket);
                self.inner.tally.starvation_promotion();
                ask = true;
                starved = true;
            } else {
                next = next.min(room.clock().left(since, bound));
            }
        }

        // The switch interval.
        let mut interval_due = false;
        let sn = self.inner.hot.switch_number();
        match room.monitor().watch() {
            Some((w, since)) if w == sn => {
                let hold = policy::runs_for(interval, self.inner.hot.holder_class().1);
                if room.clock().passed(since, hold) {
                    if policy::defers_request(new_episode, room.monitor().deferred()) {
                        room.monitor_mut().0.defer();
                    } else {
                        ask = true;
                        interval_due = true;
                        room.monitor_mut().0.rewatch(sn, now);
                    }
                } else {
                    next = next.min(room.clock().left(since, hold));
                }
            }
            _ => {
                room.monitor_mut().0.rewatch(sn, now);
            }
        }

        if ask {
            let s = self.inner.hot.word().load(Relaxed);
            if s & LOCKED == 0 {
                // Free: make sure whoever goes first now is awake.
                room.wake_next(self.inner.tuning.policy());
            } else if interval_due || !self.inner.hot.holder_class().1 {
                // Held (a holder in its slice only once the slice is
                // over), or reserved for a holder in a lazily released call:
                // then only the flag goes up, answered at its next release
                // (a thread in short calls most of the time is asked too).
                // A panicking host callback was caught; the flag is up, and
                // the monitor has nobody to hand the panic to.
                room.note_request(interval_due, starved);
                let _ = self.request_drop(None);
            }
        }
        Some(next)
    }

    /// Takes the lock from the holder's lazily released system call (state
    /// `s`) and hands it to the designee. The thread in the call finds it
    /// gone when it comes back, and waits like anyone else.
    fn take_over_system_call(&self, s: u64, room: &mut WaitRoom) {
        if !self.inner.hot.word().take_over_call(s, true) {
            return; // it came back (or the state moved): nothing to take
        }
        self.inner.tally.lazy_takeover();
        room.monitor_mut().0.end_episode();
        self.observe_takeover(None);
        room.wake_next(self.inner.tuning.policy());
    }

    /// Makes the monitor look at this lock as soon as something may be due:
    /// within the lazy-release threshold if the holder is in a system call,
    /// else within the switch interval. Nothing if it will look by then.
    pub(super) fn ask_monitor_to_look(&self) {
        let in_call = self.inner.hot.word().load(Relaxed) & SYSCALL != 0;
        let within = match self.inner.tuning.lazy_release() {
            Some(threshold) if in_call => threshold,
            _ => self.interval(),
        };
        process::kick(within);
    }

    /// Makes the monitor look within `within` (a slice's end).
    pub(super) fn ask_monitor_within(&self, within: Duration) {
        process::kick(within);
    }

    /// The monitor thread's look at this lock.
    #[cfg(not(gil_loom))]
    fn monitor_pass(&self) -> Option<Duration> {
        let slow = self.slow();
        let mut room = slow.lock();
        self.monitor_pass_locked(&mut room)
    }
}

/// How many times the monitor thread has woken up since the process (or,
/// after `fork()`, the child) started: a measure of its cost. It does not
/// change while no monitored lock has a waiter.
pub fn monitor_wakeups() -> u64 {
    process::wakeups()
}

// The process-wide monitor thread (and its loom stand-in): monitor/process.rs.
mod process;
