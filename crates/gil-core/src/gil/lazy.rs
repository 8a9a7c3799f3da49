//! Lazy release ([`GilConfig::lazy_release_us`](crate::GilConfig)): a
//! voluntary release only marks the holder as in a system call (`SYSCALL`
//! and a new generation in the lock word, see `word.rs`); the thread takes
//! the lock back with one CAS when the call returns, and a waiter takes it
//! over only once the call has lasted the threshold (`wait.rs`, or the
//! monitor's look in `monitor.rs`). A pending drop request makes the
//! release a real one, as CPython answers it with a forced switch, and so
//! does (priority policy) an I/O-class waiter: see
//! [`policy::lazy_hands_over`].

use std::sync::atomic::Ordering::Relaxed;

use super::word::{INSTR, WAITERS};
use super::{bump, Gil};
use crate::policy;
use crate::reason::ReleaseReason;
use crate::Token;

/// How a lazy voluntary release went.
pub(super) enum Lazy {
    /// The holder is marked as in a system call.
    Done,
    /// A drop request is pending: the release must be a real one.
    /// `observed`: it has been reported to observers already.
    Real { observed: bool },
    /// Called from inside one of the lock's callbacks: nothing changed.
    Reentrant,
}

impl Gil {
    /// A lazy voluntary release: mark the holder as in a system call, unless
    /// the release must be a real one (a drop request is pending).
    #[inline]
    pub(super) fn release_lazily(&self, token: Token) -> Lazy {
        let hot = &*self.inner.hot;
        // Written while still the holder: nobody else writes these now.
        hot.syscall_owner.store(token.get(), Relaxed);
        hot.owner.store(0, Relaxed);
        let s = hot.word.load(Relaxed);
        if s & (WAITERS | INSTR) == 0 {
            bump(&hot.lazy_releases, 1);
            if hot.word.enter_call(s, false).is_ok() {
                return Lazy::Done;
            }
            // A waiter (or an observer) came: undo the count.
            hot.lazy_releases
                .store(hot.lazy_releases.load(Relaxed).wrapping_sub(1), Relaxed);
        }
        self.release_lazily_contended(token)
    }

    /// `release_lazily` when observers are on or somebody waits.
    #[cold]
    fn release_lazily_contended(&self, token: Token) -> Lazy {
        let hot = &*self.inner.hot;
        if self.in_callback() {
            // See `release_contended`; `syscall_owner` means nothing
            // without SYSCALL, which is clear while `token` holds the lock.
            hot.owner.store(token.get(), Relaxed);
            return Lazy::Reentrant;
        }
        let s = hot.word.load(Relaxed);
        let observed = s & INSTR != 0;
        if observed {
            self.observe_release(token, ReleaseReason::Voluntary);
        }
        if self.mark_in_call(s, |s| s & WAITERS == 0) {
            return Lazy::Done;
        }
        // Somebody waits: under the mutex, so that who waits is known and,
        // without the monitor, the waiter that is woken starts timing the
        // call at once. A pending request, or (priority) an I/O-class
        // waiter, makes the release a real one.
        let slow = self.slow();
        let room = slow.mutex.lock();
        if self.inner.drop_request.load(Relaxed) || policy::lazy_hands_over(self.inner.policy, room.census) {
            drop(room);
            hot.owner.store(token.get(), Relaxed);
            return Lazy::Real { observed };
        }
        self.mark_in_call(hot.word.load(Relaxed), |_| true);
        if self.inner.monitor {
            // The monitor keeps the time: no wake-up, at most a signal to it.
            drop(room);
            self.ask_monitor_to_look();
        } else {
            room.wake_next(self.inner.policy);
        }
        Lazy::Done
    }
}
