//! Thread classes for the priority policy (after the 2010 GIL-priority
//! proposal): a thread that had to be asked to drop the lock is CPU-bound; a
//! thread that let go of it on its own, around a blocking call, is I/O-bound.
//! "Had to be asked" means a forced release, or a voluntary one made while a
//! drop request raised for a whole switch interval of holding was pending:
//! a thread whose blocking calls return at once (or whose lazily released
//! calls are short) can hold the lock for intervals on end, and must not
//! come back I/O-class and preempt the thread it handed over to. A request
//! raised to preempt it or for a starving waiter does not count: a thread
//! forced out only because a CPU-class waiter starved keeps the class it
//! had (see `policy::class_after_request`).
//!
//! The class is a property of a thread between its release and its next
//! acquisition, so it is remembered per OS thread, keyed by lock and token:
//! nothing is stored in the lock per token, and nothing needs cleaning up.
//! A thread seen for the first time (or using several locks in turn) counts
//! as I/O-bound.

use std::cell::Cell;

use crate::sync::thread_cell;

/// Which queue a waiter joins, and whether an I/O waiter may preempt a holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum ThreadClass {
    /// Released voluntarily last time: served first.
    Io = 0,
    /// Was forced to drop last time: served after I/O-class waiters.
    Cpu = 1,
}

impl ThreadClass {
    pub(crate) fn from_u8(v: u8) -> ThreadClass {
        if v == ThreadClass::Io as u8 {
            ThreadClass::Io
        } else {
            ThreadClass::Cpu
        }
    }
}

thread_cell! {
    /// (lock address, token, class) of this OS thread's last release.
    static LAST_RELEASE: Cell<(usize, usize, u8)> = Cell::new((0, 0, 0));
}

/// Records the class `token` has after releasing `lock` for `reason`.
#[inline]
pub(crate) fn remember(lock: usize, token: usize, class: ThreadClass) {
    LAST_RELEASE.with(|c| c.set((lock, token, class as u8)));
}

/// The class `token` has now on `lock`, as far as this thread remembers.
#[inline]
pub(crate) fn recall(lock: usize, token: usize) -> ThreadClass {
    LAST_RELEASE.with(|c| {
        let (l, t, class) = c.get();
        if l == lock && t == token {
            ThreadClass::from_u8(class)
        } else {
            ThreadClass::Io
        }
    })
}
