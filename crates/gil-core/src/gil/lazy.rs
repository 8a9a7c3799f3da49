//! Lazy release ([`GilConfig::lazy_release_us`](crate::GilConfig)): a
//! voluntary release only marks the holder as in a system call (`SYSCALL`
//! and a new generation in the lock word, see `word.rs`); the thread takes
//! the lock back with one CAS when the call returns, and a waiter takes it
//! over only once the call has lasted the threshold (`wait.rs`, or the
//! monitor's look in `monitor.rs`). A pending drop request makes the
//! release a real one, as CPython answers it with a forced switch, and so
//! does (priority policy) an I/O-class waiter, and so do the releases
//! that follow a takeover: see [`policy::lazy_hands_over`].

use std::sync::atomic::Ordering::Relaxed;

use super::word::{INSTR, WAITERS};
use super::Gil;
use crate::policy;
use crate::reason::ReleaseReason;
use crate::{GilError, Token};

impl Gil {
    /// A lazy voluntary release: mark the holder as in a system call, unless
    /// the release must be a real one (a drop request is pending).
    #[inline]
    pub(super) fn release_lazily(&self, token: Token) -> Result<(), GilError> {
        let hot = &*self.inner.hot;
        hot.letting_go_lazily(token);
        let s = hot.word().load(Relaxed);
        // A waiter (or an observer) came: the contended path then.
        if s & (WAITERS | INSTR) == 0 && hot.enter_call(s, false).is_ok() {
            return Ok(());
        }
        self.release_lazily_contended(token)
    }

    /// `release_lazily` when observers are on or somebody waits.
    #[cold]
    fn release_lazily_contended(&self, token: Token) -> Result<(), GilError> {
        let hot = &*self.inner.hot;
        if self.in_callback() {
            // See `release_contended`.
            hot.lazy_release_undone(token);
            return Err(GilError::Reentrant);
        }
        let s = hot.word().load(Relaxed);
        let observed = s & INSTR != 0;
        if observed {
            self.observe_release(token, ReleaseReason::Voluntary);
        }
        if hot.mark_in_call(s, |s| s & WAITERS == 0) {
            return Ok(());
        }
        // Somebody waits: under the mutex, so that who waits is known and,
        // without the monitor, the waiter that is woken starts timing the
        // call at once. A pending request, or (priority) an I/O-class
        // waiter, makes the release a real one.
        let slow = self.slow();
        let room = slow.lock();
        let policy = self.inner.tuning.policy();
        let after_takeover = room.after_takeover();
        if self.inner.room.drop_requested() || policy::lazy_hands_over(policy, room.census(), after_takeover) {
            drop(room);
            hot.lazy_release_undone(token);
            return self.release_now(token, ReleaseReason::Voluntary, observed);
        }
        hot.mark_in_call(hot.word().load(Relaxed), |_| true);
        if self.inner.tuning.monitored() {
            // The monitor keeps the time: no wake-up, at most a signal to it.
            drop(room);
            self.ask_monitor_to_look();
        } else {
            room.wake_next(policy);
        }
        Ok(())
    }
}
