//! The synchronisation primitives gil-core is built from, switched between
//! the real ones and loom's model-checked ones by `--cfg gil_loom`.
//!
//! Everything the protocol touches goes through this module, so a loom run
//! explores every interleaving of exactly the code that ships.
//!
//! The real mutex and condition variables are the very primitives
//! CPython's `Python/condvar.h` builds its GIL on, one module per OS:
//! POSIX threads' (`pthread/`, which also picks how each POSIX system
//! times a wait) and Windows' SRWLOCK + CONDITION_VARIABLE
//! (`windows.rs`). The
//! choice is about faithfulness, not speed (the fast paths never touch
//! them): who a signal wakes, and how a timed-out waiter queues again,
//! decide who gets the lock when three threads want it. With parking_lot's
//! condition variable (FIFO, with waiters requeued onto the mutex) the
//! classic policy handed the lock to an I/O thread competing with two
//! CPU-bound threads about twice as often as CPython 3.13 does
//! (`docs/faithfulness.md`); with glibc's it behaves like CPython.
//!
//! Time is the one place the two worlds differ on purpose, and it is here
//! too (`time.rs`): a [`Clock`] read into [`Stamp`]s, timed waits
//! (`Condvar::wait_for`) and a bounded spin (`spin_while`). loom has no clock, so under loom the
//! clock counts the model's ticks (see `Gil::loom_tick`): any duration has
//! passed once it has ticked, and a wait "times out" only when a tick wakes
//! it. Whether a timeout happens before a notification is then a
//! nondeterministic choice that loom explores. The protocol reads the same
//! under both.

mod cpus;
pub(crate) use self::cpus::{refresh_quota, spinning_helps};

#[cfg(gil_loom)]
mod loom;
#[cfg(gil_loom)]
pub(crate) use self::loom::*;

#[cfg(not(gil_loom))]
mod time;

#[cfg(all(not(gil_loom), unix))]
mod pthread;
#[cfg(all(not(gil_loom), unix))]
pub(crate) use self::pthread::*;

#[cfg(all(not(gil_loom), windows))]
mod windows;
#[cfg(all(not(gil_loom), windows))]
pub(crate) use self::windows::*;

#[cfg(all(not(gil_loom), not(unix), not(windows)))]
compile_error!("gil-core needs POSIX threads or Windows: its lock is built on their mutexes and condition variables, as CPython's GIL is");

/// Declares a thread-local `Cell` that the protocol reads on its paths:
/// std's with a `const` initialiser, so an access is a plain load with no
/// first-use check and no destructor registered; loom's under loom, which
/// takes no `const { }` initialiser and models the thread's copy.
macro_rules! thread_cell {
    ($(#[$attr:meta])* static $name:ident: $ty:ty = $init:expr;) => {
        #[cfg(not(gil_loom))]
        std::thread_local! { $(#[$attr])* static $name: $ty = const { $init }; }
        #[cfg(gil_loom)]
        loom::thread_local! { $(#[$attr])* static $name: $ty = $init; }
    };
}
pub(crate) use thread_cell;

/// Data guarded by a mutex that timed waits on it take their time from
/// (under loom, the tick count a wait compares before and after).
pub(crate) trait Clocked {
    #[cfg_attr(not(gil_loom), allow(dead_code, reason = "real timed waits read the system clock"))]
    fn clock(&self) -> &Clock;
}
