//! Which of a lock's callbacks the calling thread is inside: event hooks,
//! the host's drop-request callback and an `acquire_or_abort` check all run
//! while the lock's internal mutex is held or while the lock is in the
//! middle of changing hands, so a call on the same lock from inside one of
//! them would wait for itself. Such calls return [`GilError::Reentrant`](crate::GilError::Reentrant)
//! instead of hanging.
//!
//! Every callback also runs with the thread's cancellation disabled
//! ([`NoCancel`]): a cancellation point reached inside one (`write`,
//! `printf`, `pthread_testcancel`) with a deferred `pthread_cancel` pending
//! would unwind through the lock's frames, its internal mutex held, and
//! abort the process at the library's panic boundary. The request stays
//! pending and is acted on at the thread's next cancellation point after
//! the lock's call returns.
//!
//! The record is per OS thread and costs nothing on the paths with no
//! observer: it is written only around a callback and read only on paths
//! that a call from inside a callback necessarily takes (a callback runs
//! while the lock is held, awaited or observed, so the lock word's
//! uncontended compare-and-swaps fail and the call reaches a cold path).

use std::cell::Cell;

use super::Gil;
use crate::cancel::NoCancel;
use crate::sync::thread_cell;

/// How many nested callbacks (of different locks) a thread can be inside
/// and still have each detected; deeper ones run unrecorded.
const DEPTH: usize = 8;

thread_cell! {
    /// The locks (`Gil::id`) whose callbacks this thread is inside, 0 in
    /// unused slots.
    static INSIDE: Cell<[usize; DEPTH]> = Cell::new([0; DEPTH]);
}

/// Marks the calling thread as inside one of a lock's callbacks, with its
/// cancellation disabled, until it is dropped (also when the callback
/// unwinds).
pub(super) struct Inside {
    slot: Option<usize>,
    _no_cancel: NoCancel,
}

impl Drop for Inside {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            INSIDE.with(|c| {
                let mut locks = c.get();
                locks[i] = 0;
                c.set(locks);
            });
        }
    }
}

impl Gil {
    /// Call before running a callback of this lock; keep the result alive
    /// for as long as the callback runs.
    pub(super) fn enter_callback(&self) -> Inside {
        let no_cancel = NoCancel::new();
        let id = self.id();
        let slot = INSIDE.with(|c| {
            let mut locks = c.get();
            let free = locks.iter().position(|&l| l == 0)?;
            locks[free] = id;
            c.set(locks);
            Some(free)
        });
        Inside {
            slot,
            _no_cancel: no_cancel,
        }
    }

    /// Whether the calling thread is inside one of this lock's callbacks
    /// (an event hook, the drop-request callback, an abort check). Calls
    /// that could wait for the lock or its internal mutex return
    /// [`GilError::Reentrant`](crate::GilError::Reentrant) there; a host
    /// may ask first.
    pub fn in_callback(&self) -> bool {
        let id = self.id();
        INSIDE.with(|c| c.get().contains(&id))
    }
}
