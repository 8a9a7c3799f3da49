//! Observers: the event hooks and the wait/hold histograms. With neither on,
//! the fast paths never get here (the `INSTR` bit of the lock word, see
//! `word.rs`); with one on, acquisitions and releases report themselves
//! here, and every callback runs marked as inside the lock (`callbacks.rs`).

use std::time::Instant;

use super::Gil;
use crate::accounting::{Asked, Release};
use crate::events::{now_ns, Event, EventHook, EventKind, EventMask, HookId, OwnedHook};
use crate::reason::ReleaseReason;
use crate::stats::Histograms;
use crate::ThreadStats;
use crate::{GilError, Token};

/// `Hot::instr`: an event hook is installed.
pub(super) const INSTR_HOOK: u8 = 1;
/// `Hot::instr`: histograms are on.
pub(super) const INSTR_HIST: u8 = 2;
/// `Hot::instr`: per-thread accounting is on.
pub(super) const INSTR_ACCT: u8 = 4;

impl Gil {
    /// Adds `hook` for the kinds of event in `mask`, beside any hooks
    /// already installed, and returns the handle that removes it (unique in
    /// the process: another lock's handle removes nothing here). See
    /// [`events`](crate::events) for where hooks run. Waits for no running
    /// hook.
    ///
    /// # Errors
    /// [`GilError::InvalidEventMask`] for an empty mask (a hook that would
    /// see nothing is a mistake); [`GilError::Reentrant`] from inside one of
    /// this lock's callbacks. Nothing changes.
    pub fn add_event_hook(&self, hook: EventHook, mask: EventMask) -> Result<HookId, GilError> {
        if mask.is_empty() {
            return Err(GilError::InvalidEventMask(0));
        }
        if self.in_callback() {
            return Err(GilError::Reentrant);
        }
        // Flag first: an emitter that sees the flag before the hook just
        // finds the list without it. Then the flag again from the list: a
        // removal of the last hook may have lowered it meanwhile.
        self.set_instr(INSTR_HOOK, true);
        let id = self.inner.observers.hooks().add(hook, mask);
        self.hooks_changed();
        Ok(id)
    }

    /// Removes the hook `id` added with [`add_event_hook`](Self::add_event_hook).
    /// Returns once no thread is still running it, so whatever it used may
    /// be freed; it waits for that hook only, not for other hooks running
    /// meanwhile. The hook (the closure) is dropped once no thread can
    /// reach it any more: at once, or when the last thread still running
    /// another hook of this lock leaves it.
    ///
    /// # Errors
    /// [`GilError::UnknownHook`] if no such hook is installed on this lock
    /// (it was removed already, it is another lock's, or it was added with
    /// [`add_owned_event_hook`](Self::add_owned_event_hook));
    /// [`GilError::Reentrant`] from inside one of this lock's callbacks (it
    /// would wait for itself to leave the hook). Nothing changes.
    pub fn remove_event_hook(&self, id: HookId) -> Result<(), GilError> {
        if self.in_callback() {
            return Err(GilError::Reentrant);
        }
        if !self.inner.observers.hooks().remove(id) {
            return Err(GilError::UnknownHook(id.get()));
        }
        self.hooks_changed();
        Ok(())
    }

    /// [`add_event_hook`](Self::add_event_hook) for a hook that only its
    /// owner may remove: the [`OwnedHook`] returned is the only handle
    /// that reaches it ([`remove_owned_event_hook`](Self::remove_owned_event_hook));
    /// [`remove_event_hook`](Self::remove_event_hook) of any number says
    /// [`GilError::UnknownHook`], and
    /// [`set_event_hook`](Self::set_event_hook) leaves it alone. A trace's
    /// hook is one.
    ///
    /// # Errors
    /// As [`add_event_hook`](Self::add_event_hook).
    pub fn add_owned_event_hook(&self, hook: EventHook, mask: EventMask) -> Result<OwnedHook, GilError> {
        if mask.is_empty() {
            return Err(GilError::InvalidEventMask(0));
        }
        if self.in_callback() {
            return Err(GilError::Reentrant);
        }
        // As in add_event_hook.
        self.set_instr(INSTR_HOOK, true);
        let hook = self.inner.observers.hooks().add_owned(hook, mask);
        self.hooks_changed();
        Ok(hook)
    }

    /// Removes a hook added with
    /// [`add_owned_event_hook`](Self::add_owned_event_hook), as
    /// [`remove_event_hook`](Self::remove_event_hook) does.
    ///
    /// # Errors
    /// The handle back with [`GilError::UnknownHook`] if it is another
    /// lock's hook, or with [`GilError::Reentrant`] from inside one of this
    /// lock's callbacks. Nothing changes.
    pub fn remove_owned_event_hook(&self, hook: OwnedHook) -> Result<(), (OwnedHook, GilError)> {
        if self.in_callback() {
            return Err((hook, GilError::Reentrant));
        }
        if let Err(hook) = self.inner.observers.hooks().remove_owned(hook) {
            let number = hook.get();
            return Err((hook, GilError::UnknownHook(number)));
        }
        self.hooks_changed();
        Ok(())
    }

    /// Installs `hook` for every kind of event (or, with `None`, removes
    /// it), replacing the hook installed by an earlier call of this method
    /// and leaving hooks added with [`add_event_hook`](Self::add_event_hook)
    /// alone. Returns once no thread is still running the hook it replaced,
    /// so whatever that hook used may be freed. See
    /// [`events`](crate::events) for where hooks run.
    ///
    /// # Errors
    /// [`GilError::Reentrant`] from inside one of this lock's callbacks (it
    /// would wait for itself to leave the hook); nothing changes.
    pub fn set_event_hook(&self, hook: Option<EventHook>) -> Result<(), GilError> {
        if self.in_callback() {
            return Err(GilError::Reentrant);
        }
        if hook.is_some() {
            self.set_instr(INSTR_HOOK, true);
        }
        self.inner.observers.hooks().set_replaceable(hook);
        self.hooks_changed();
        Ok(())
    }

    /// Whether any event hook is installed.
    pub fn has_event_hook(&self) -> bool {
        self.inner.observers.hooks().is_set()
    }

    /// How many event hooks are installed.
    pub fn event_hooks(&self) -> usize {
        self.inner.observers.hooks().len()
    }

    /// After a change of the hooks: the hook flag says whether any is
    /// installed (read under the serialising flag, so of two racing
    /// changes the last one to get here sets it from the final list).
    fn hooks_changed(&self) {
        let _serial = self.inner.observers.serial();
        self.inner
            .hot
            .set_instr(INSTR_HOOK, self.inner.observers.hooks().is_set());
    }

    /// Turns the wait-time and hold-time histograms on or off. Turning them
    /// on does not clear what was recorded before; see
    /// [`reset_histograms`](Self::reset_histograms).
    pub fn set_histograms(&self, on: bool) {
        self.set_instr(INSTR_HIST, on);
    }

    /// Whether the histograms are on.
    pub fn histograms_enabled(&self) -> bool {
        self.inner.hot.instr() & INSTR_HIST != 0
    }

    /// A snapshot of the histograms (all zero unless they were turned on).
    pub fn histograms(&self) -> Histograms {
        self.inner.observers.histograms()
    }

    /// Empties both histograms.
    pub fn reset_histograms(&self) {
        self.inner.observers.reset_histograms();
    }

    /// Turns per-thread accounting on or off (see [`accounting`](crate::accounting)).
    /// Turning it on again keeps what was recorded, but ends the records
    /// still open where it was turned off (or where they began, if later):
    /// a thread may have ended unseen while it was off (and its token be
    /// reused); threads still alive start new records at their next event.
    /// No time while it was off is charged.
    ///
    /// The thread holding the lock when accounting is turned on has no
    /// record until its next event; to be measured from now, it calls
    /// [`tag_thread`](Self::tag_thread) with its token right after.
    pub fn set_thread_stats(&self, on: bool) {
        let _serial = self.inner.observers.serial();
        let was = self.thread_stats_enabled();
        if on && !was {
            self.accounts().restart(now_ns());
        } else if !on && was {
            self.accounts().stop(now_ns());
        }
        self.inner.hot.set_instr(INSTR_ACCT, on);
    }

    /// Whether per-thread accounting is on.
    pub fn thread_stats_enabled(&self) -> bool {
        self.inner.hot.instr() & INSTR_ACCT != 0
    }

    /// `token`'s accounting: its current record, or if it has ended, its
    /// last one (while kept, see
    /// [`accounting::ENDED_KEPT`](crate::accounting::ENDED_KEPT)). `None` if
    /// the token has had no event while accounting was on (a name alone
    /// makes no record).
    pub fn thread_stats(&self, token: Token) -> Option<ThreadStats> {
        self.accounts().thread(token, now_ns())
    }

    /// Every thread's accounting: the live records and the kept ended
    /// ones, in the order they began.
    pub fn all_thread_stats(&self) -> Vec<ThreadStats> {
        self.accounts().all(now_ns())
    }

    /// Attaches a number of the host's to `token`'s current accounting
    /// record (CPython: the thread's ident), to tell threads apart after
    /// they end; the next life of the token starts without it. Call it
    /// from the thread using the token, after an acquisition. A different
    /// number on an open record ends it and starts a new thread's (see
    /// [`accounting`](crate::accounting)). Re-tagging with the same number
    /// is a look in the thread's own cache: cheap enough for every
    /// acquisition.
    ///
    /// If `token` holds the lock and has no record (accounting was turned
    /// on while it held the lock), its record begins now: holding the lock,
    /// tagged, with no acquisition counted (the acquisition came before the
    /// record). This is how the holder is measured from the moment it turns
    /// accounting on.
    ///
    /// # Errors
    /// [`GilError::UnknownThread`] if `token` has no current record and
    /// does not hold the lock (or accounting is off);
    /// [`GilError::ForeignThread`] if another thread made the record's
    /// latest event (a record has one writer: a tag from elsewhere could
    /// split it while its thread updates it). Nothing changes.
    pub fn tag_thread(&self, token: Token, tag: u64) -> Result<(), GilError> {
        // Exact for the calling token: only its own thread stores it in
        // `owner` (see `check_not_holder`).
        let holder = self.thread_stats_enabled() && self.inner.hot.holds(token);
        self.accounts().tag(token, tag, holder, now_ns())
    }

    /// Names `token`'s accounting record (see [`tag_thread`](Self::tag_thread)).
    /// A token without a current record gets no record from it: the name
    /// waits for the token's next record (the last
    /// [`accounting::PENDING_NAMES_KEPT`](crate::accounting::PENDING_NAMES_KEPT)
    /// such names are kept; a rename replaces).
    pub fn name_thread(&self, token: Token, name: impl Into<String>) {
        self.accounts().name(token, name.into());
    }

    /// Names an accounting record tagged `tag` (see
    /// [`tag_thread`](Self::tag_thread)): how a host names a thread it knows
    /// by its number, also once the thread has ended. With `since_ns` 0 the
    /// latest such record (a live one first); otherwise the first that
    /// began at or after `since_ns` ([`now_ns`](crate::now_ns) time), i.e.
    /// the thread the host saw start then, even if later threads reused its
    /// number. Returns that record's token and when it began (for naming
    /// the same life in a trace,
    /// `trace::Tracer::name_thread_at`),
    /// `None` if no record fits.
    pub fn name_tagged(&self, tag: u64, since_ns: u64, name: impl Into<String>) -> Option<(Token, u64)> {
        self.accounts().name_tagged(tag, since_ns, name.into())
    }

    /// Turns an `INSTR_*` bit on or off, and `state`'s `INSTR` bit with it.
    fn set_instr(&self, bit: u8, on: bool) {
        let _serial = self.inner.observers.serial();
        self.inner.hot.set_instr(bit, on);
    }

    /// Whether an event hook is on: check it before building an event.
    #[inline]
    pub(super) fn hooked(&self) -> bool {
        self.inner.hot.instr() & INSTR_HOOK != 0
    }

    /// Reports an event of `kind` to the hooks that want it, as a callback
    /// of this lock (see [`Gil::in_callback`]).
    pub(super) fn emit(&self, kind: EventKind, event: impl FnOnce() -> Event) {
        self.inner.observers.hooks().emit(kind, || self.enter_callback(), event);
    }

    /// Observers' share of an acquisition on a path that is not the fast
    /// one (which leaves observing to `try_fast_observed`).
    #[inline]
    pub(super) fn observe_acquire(&self, token: Token) {
        let instr = self.inner.hot.instr();
        if instr != 0 {
            self.observe_acquire_slow(instr, token);
        }
    }

    #[cold]
    fn observe_acquire_slow(&self, instr: u8, token: Token) {
        let now = now_ns();
        self.inner.observers.took(token);
        if instr & INSTR_HIST != 0 {
            self.inner.hot.hold_started(now);
        }
        if instr & INSTR_ACCT != 0 {
            self.accounts().acquired(token, now);
        }
        if instr & INSTR_HOOK != 0 {
            self.emit(EventKind::Acquired, || Event {
                kind: EventKind::Acquired,
                token,
                other: None,
                time_ns: now,
            });
        }
    }

    #[cold]
    pub(super) fn observe_release(&self, token: Token, reason: ReleaseReason) {
        let instr = self.inner.hot.instr();
        let now = now_ns();
        if instr & INSTR_HIST != 0 {
            // 0: histograms were turned on during this hold.
            let since = self.inner.hot.take_hold_start();
            if since != 0 {
                self.inner.observers.record_hold(now.saturating_sub(since));
            }
        }
        if instr & INSTR_ACCT != 0 {
            let how = match reason {
                ReleaseReason::Voluntary => Release::Voluntary,
                ReleaseReason::Forced => Release::Forced,
                ReleaseReason::Final => Release::Final,
            };
            self.accounts().released(token, how, now);
        }
        if instr & INSTR_HOOK != 0 {
            self.emit(EventKind::Released(reason), || Event {
                kind: EventKind::Released(reason),
                token,
                other: None,
                time_ns: now,
            });
        }
    }

    /// Reports that `token` started waiting (called once it is in the
    /// waiting room).
    pub(super) fn observe_wait_start(&self, token: Token) {
        let instr = self.inner.hot.instr();
        if instr & (INSTR_HOOK | INSTR_ACCT) == 0 {
            return;
        }
        let now = now_ns();
        if instr & INSTR_ACCT != 0 {
            self.accounts().wait_start(token, now);
        }
        if instr & INSTR_HOOK != 0 {
            self.emit(EventKind::WaitStart, || Event {
                kind: EventKind::WaitStart,
                token,
                other: None,
                time_ns: now,
            });
        }
    }

    /// Reports a fresh drop request by the waiter `by` (`None`: the
    /// monitor thread) on `named`, the holder or the last holder letting
    /// go. `None` while a holder lets go in its final release (which
    /// clears the last holder): then the request is the last observed
    /// taker's.
    pub(super) fn observe_drop_request(&self, named: Option<Token>, by: Option<Token>) {
        let instr = self.inner.hot.instr();
        if instr & (INSTR_HOOK | INSTR_ACCT) == 0 {
            return;
        }
        let now = now_ns();
        let asked = match named {
            Some(t) => Asked::Holder(t),
            None => self
                .inner
                .observers
                .last_taker()
                .map_or(Asked::Nobody, Asked::LettingGo),
        };
        if instr & INSTR_ACCT != 0 {
            self.accounts().drop_requested(asked, by, now);
        }
        let (Asked::Holder(asked) | Asked::LettingGo(asked)) = asked else {
            return;
        };
        if instr & INSTR_HOOK != 0 {
            self.emit(EventKind::DropRequested, || Event {
                kind: EventKind::DropRequested,
                token: asked,
                other: by,
                time_ns: now,
            });
        }
    }

    /// Accounts a wait that ended with the lock; called under the mutex.
    pub(super) fn waited(&self, started: Instant) {
        let waited = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.inner.tally.waited(waited);
        if self.inner.hot.instr() & INSTR_HIST != 0 {
            self.inner.observers.record_wait(waited);
        }
    }

    /// Reports a takeover of `from`'s lazily released call (by `to`, or by
    /// the monitor for whoever goes next).
    pub(super) fn observe_takeover(&self, to: Option<Token>) {
        if self.hooked() {
            if let Some(from) = self.inner.hot.syscall_owner() {
                self.emit(EventKind::LazyTakeover, || {
                    Event::now(EventKind::LazyTakeover, from, to)
                });
            }
        }
    }
}
