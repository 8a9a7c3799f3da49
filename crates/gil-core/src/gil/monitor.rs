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
//! due: one look ([`Gil::look_locked`]) hands what it sees to
//! [`policy::due`], which says what is due (a drop request after the
//! holder's interval or slice, a takeover of a long lazily released call,
//! a starving CPU-class waiter, the end of the CPU class's turn) and when
//! to look next. A waiter of a lock without the monitor takes the same
//! look when it wakes: the rules and the timers are the same, only who
//! looks differs.
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
//! cannot be started, waiters keep the time themselves with the same look
//! ([`Gil::look_locked`]).
//!
//! Under loom there is no thread: the model's clock thread runs the same
//! pass (`Gil::loom_tick`).

use std::time::Duration;

use super::room::WaitRoom;
use super::word::SYSCALL;
use super::Gil;

impl Gil {
    /// A waiter has just joined: makes sure the monitor watches the lock.
    pub(super) fn monitor_joined(&self, room: &mut WaitRoom) {
        if room.monitor().registered() != Some(process::id()) {
            let registered = process::watch(self).then(process::id);
            room.monitor_mut().set_registered(registered);
        } else {
            // Still in the monitor's list, but its schedule was made before
            // this waiter came: the holder may be in a system call nobody
            // timed (it began with no waiter), or the interval may have been
            // shortened since.
            self.ask_monitor_to_look();
        }
    }

    /// Whether a monitor thread keeps this lock's time now: a monitored
    /// lock whose waiters could not start one keep it themselves.
    pub(super) fn monitor_keeps_time(&self, room: &WaitRoom) -> bool {
        self.inner.tuning.monitored() && room.monitor().registered().is_some()
    }

    /// The monitor's look at a lock, under its mutex (see [`Gil::look_locked`]):
    /// raises the drop request if one is due, and returns how soon to look
    /// again, or `None` if the lock has no waiter (it then leaves the
    /// monitor's list). A panicking host callback was caught; the flag is
    /// up, and the monitor has nobody to hand the panic to.
    pub(super) fn monitor_pass_locked(&self, room: &mut WaitRoom) -> Option<Duration> {
        let due = self.look_locked(room);
        if due.ask.is_some() {
            let _ = self.request_drop(None);
        }
        if due.next.is_none() {
            room.monitor_mut().set_registered(None);
        }
        due.next
    }

    /// Makes the monitor look at this lock as soon as something may be due:
    /// within the lazy-release threshold if the holder is in a system call,
    /// else within the switch interval. Nothing if it will look by then.
    pub(super) fn ask_monitor_to_look(&self) {
        let in_call = self.inner.hot.word().load(std::sync::atomic::Ordering::Relaxed) & SYSCALL != 0;
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
