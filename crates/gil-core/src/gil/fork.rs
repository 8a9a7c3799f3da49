//! After `fork()`: the child re-creates the lock with the forking thread as
//! its holder (CPython's `recreate_gil`); every other thread is gone.

use std::sync::atomic::AtomicPtr;
use std::sync::atomic::Ordering::{Relaxed, Release};

use super::room::Slow;
use super::Gil;
use crate::accounting::Accounts;
use crate::Token;

/// Every `Slow` and every `Accounts` replaced after a fork, kept for the
/// life of the process (see [`Gil::reinit_after_fork`]): a thread lost in
/// the fork may have held one of their mutexes. Lists rooted in statics
/// keep them reachable, so leak checkers do not report a deliberate leak
/// as lost. They are lock-free: after a fork any lock may be held by a
/// thread that is gone.
static RETIRED: AtomicPtr<Slow> = AtomicPtr::new(std::ptr::null_mut());
static RETIRED_ACCOUNTS: AtomicPtr<Accounts> = AtomicPtr::new(std::ptr::null_mut());

/// Pushes `old` onto `list`, linking it through its `next` field.
///
/// # Safety
/// `old` came from `Box::into_raw` and is never freed (it is only ever put
/// on such a list), so it stays valid for the process's life.
unsafe fn retire<T>(list: &AtomicPtr<T>, old: *mut T, next: fn(&T) -> &AtomicPtr<T>) {
    // SAFETY: by this function's contract.
    let entry = unsafe { &*old };
    let mut head = list.load(Relaxed);
    loop {
        next(entry).store(head, Relaxed);
        match list.compare_exchange_weak(head, old, Release, Relaxed) {
            Ok(_) => return,
            Err(now) => head = now,
        }
    }
}

impl Gil {
    /// In a child process after `fork()`: makes this a freshly initialised
    /// lock held by `token` (the forking thread); every other thread is
    /// forgotten, counters restart (at one acquisition and one switch, as
    /// CPython's `recreate_gil` + `take_gil`). Interval, policy, callback and
    /// event hooks are kept (a hook that takes locks of its own must cope
    /// with a fork: a thread of the parent may have held them), and so are
    /// the observers' switches; per-thread accounting starts afresh.
    ///
    /// Call it only where no other thread can touch the lock — in the child,
    /// before starting threads. Elsewhere it breaks mutual exclusion (it is
    /// still memory-safe).
    ///
    /// The internal mutex and condition variables may have been held or
    /// waited on by threads that do not exist in the child. They are not
    /// reset in place: new ones are allocated and the old ones kept, unused,
    /// for the life of the process (a few hundred bytes per fork): a
    /// pthread mutex locked by a thread that died in the fork can neither be
    /// used nor even destroyed.
    pub fn reinit_after_fork(&self, token: Token) {
        // The old `Slow` and `Accounts` are deliberately kept forever, see
        // above.
        let slow = self.inner.room.replace_after_fork();
        // SAFETY: `Room` only ever holds a pointer from `Box::into_raw`, and
        // one it has replaced is only ever retired, never freed.
        unsafe { retire(&RETIRED, slow, |s| s.next_retired()) };
        let accounts = self.inner.observers.replace_after_fork();
        // SAFETY: as for `slow`, with `Observers`.
        unsafe { retire(&RETIRED_ACCOUNTS, accounts, |a| &a.next_retired) };
        self.inner.tally.reset();
        self.inner.hot.reset_after_fork(token);
    }
}
