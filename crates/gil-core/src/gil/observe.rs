//! Observers: the event hook and the wait/hold histograms. With neither on,
//! the fast paths never get here (the `INSTR` bit of the lock word, see
//! `word.rs`); with one on, acquisitions and releases report themselves
//! here, and every callback runs marked as inside the lock (`callbacks.rs`).

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use super::word::INSTR;
use super::{bump, saturating_nanos, Gil};
use crate::events::{now_ns, Event, EventHook, EventKind};
use crate::reason::ReleaseReason;
use crate::stats::Histograms;
use crate::{GilError, Token};

/// `Hot::instr`: an event hook is installed.
pub(super) const INSTR_HOOK: u8 = 1;
/// `Hot::instr`: histograms are on.
pub(super) const INSTR_HIST: u8 = 2;

impl Gil {
    /// Installs `hook` (or, with `None`, removes the current one). Returns
    /// once no thread is still running the hook it replaced, so whatever that
    /// hook used may be freed. See [`events`](crate::events) for where hooks
    /// run.
    ///
    /// # Errors
    /// [`GilError::Reentrant`] from inside one of this lock's callbacks (it
    /// would wait for itself to leave the hook); nothing changes.
    pub fn set_event_hook(&self, hook: Option<EventHook>) -> Result<(), GilError> {
        if self.in_callback() {
            return Err(GilError::Reentrant);
        }
        let on = hook.is_some();
        // Flag first when installing (an emitter that sees the flag but not
        // yet the hook just finds the slot empty), slot first when removing.
        if on {
            self.set_instr(INSTR_HOOK, true);
        }
        self.inner.hook.set(hook);
        if !on {
            self.set_instr(INSTR_HOOK, false);
        }
        Ok(())
    }

    /// Whether an event hook is installed.
    pub fn has_event_hook(&self) -> bool {
        self.inner.hook.is_set()
    }

    /// Turns the wait-time and hold-time histograms on or off. Turning them
    /// on does not clear what was recorded before; see
    /// [`reset_histograms`](Self::reset_histograms).
    pub fn set_histograms(&self, on: bool) {
        self.set_instr(INSTR_HIST, on);
    }

    /// Whether the histograms are on.
    pub fn histograms_enabled(&self) -> bool {
        self.inner.hot.instr.load(Relaxed) & INSTR_HIST != 0
    }

    /// A snapshot of the histograms (all zero unless they were turned on).
    pub fn histograms(&self) -> Histograms {
        Histograms {
            wait: self.inner.wait_hist.snapshot(),
            hold: self.inner.hold_hist.snapshot(),
        }
    }

    /// Empties both histograms.
    pub fn reset_histograms(&self) {
        self.inner.wait_hist.reset();
        self.inner.hold_hist.reset();
    }

    /// Turns an `INSTR_*` bit on or off, and `state`'s `INSTR` bit with it.
    fn set_instr(&self, bit: u8, on: bool) {
        let _serial = self
            .inner
            .observers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let hot = &*self.inner.hot;
        if on {
            hot.instr.fetch_or(bit, Relaxed);
        } else {
            hot.instr.fetch_and(!bit, Relaxed);
        }
        if hot.instr.load(Relaxed) != 0 {
            hot.state.fetch_or(INSTR, Relaxed);
        } else {
            hot.state.fetch_and(!INSTR, Relaxed);
        }
    }

    /// Whether an event hook is on: check it before building an event.
    #[inline]
    pub(super) fn hooked(&self) -> bool {
        self.inner.hot.instr.load(Relaxed) & INSTR_HOOK != 0
    }

    /// Reports an event to the hook, if one is installed, as a callback of
    /// this lock (see [`Gil::in_callback`]).
    pub(super) fn emit(&self, event: impl FnOnce() -> Event) {
        let _inside = self.enter_callback();
        self.inner.hook.emit(event);
    }

    /// Observers' share of an acquisition on a path that is not the fast
    /// one (which leaves observing to `try_fast_observed`).
    #[inline]
    pub(super) fn observe_acquire(&self, token: Token) {
        let instr = self.inner.hot.instr.load(Relaxed);
        if instr != 0 {
            self.observe_acquire_slow(instr, token);
        }
    }

    #[cold]
    fn observe_acquire_slow(&self, instr: u8, token: Token) {
        let now = now_ns();
        if instr & INSTR_HIST != 0 {
            self.inner.hot.acquired_at.store(now, Relaxed);
        }
        if instr & INSTR_HOOK != 0 {
            self.emit(|| Event {
                kind: EventKind::Acquired,
                token,
                other: None,
                time_ns: now,
            });
        }
    }

    #[cold]
    pub(super) fn observe_release(&self, token: Token, reason: ReleaseReason) {
        let instr = self.inner.hot.instr.load(Relaxed);
        let now = now_ns();
        if instr & INSTR_HIST != 0 {
            // 0: histograms were turned on during this hold.
            let since = self.inner.hot.acquired_at.swap(0, Relaxed);
            if since != 0 {
                self.inner.hold_hist.record(now.saturating_sub(since));
            }
        }
        if instr & INSTR_HOOK != 0 {
            self.emit(|| Event {
                kind: EventKind::Released(reason),
                token,
                other: None,
                time_ns: now,
            });
        }
    }

    /// Accounts a wait that ended with the lock; called under the mutex.
    pub(super) fn waited(&self, started: Instant) {
        let waited = saturating_nanos(started.elapsed());
        bump(&self.inner.wait_ns, waited);
        if self.inner.hot.instr.load(Relaxed) & INSTR_HIST != 0 {
            self.inner.wait_hist.record(waited);
        }
    }

    /// Reports a takeover of `from`'s lazily released call (by `to`, or by
    /// the monitor for whoever goes next).
    pub(super) fn observe_takeover(&self, to: Option<Token>) {
        if self.hooked() {
            if let Some(from) = Token::new(self.inner.hot.syscall_owner.load(Relaxed)) {
                self.emit(|| Event::now(EventKind::LazyTakeover, from, to));
            }
        }
    }
}
