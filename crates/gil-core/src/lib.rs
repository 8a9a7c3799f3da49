//! A global interpreter lock with CPython's "new GIL" protocol, as a library.
//!
//! One [`Gil`] is one interpreter's lock. Host threads are named by an
//! opaque [`Token`] (CPython: its `PyThreadState*`). A thread runs while it
//! holds the lock, lets go around blocking calls
//! ([`ReleaseReason::Voluntary`]), and gives it up when another thread has
//! waited long enough ([`ReleaseReason::Forced`]).
//!
//! ```
//! use gil_core::{Gil, GilConfig, ReleaseReason, Token};
//!
//! let gil = Gil::new(GilConfig::new())?;
//! let me = Token::new(1).unwrap();
//! gil.acquire(me)?;
//! // ... run bytecode, polling the cheap flag now and then:
//! if gil.drop_requested() {
//!     gil.release(me, ReleaseReason::Forced)?; // returns once someone else took it
//!     gil.acquire(me)?;
//! }
//! gil.release(me, ReleaseReason::Voluntary)?; // around a blocking call
//! # Ok::<(), gil_core::GilError>(())
//! ```
//!
//! # The protocol (classic policy)
//!
//! * A thread that finds the lock held waits on a condition variable for one
//!   *switch interval* (default 5 ms). If the interval ends and nobody took
//!   the lock in the meantime (the *switch number* did not move), it raises a
//!   *drop request*: a flag the holder can poll
//!   ([`Gil::drop_requested`]) and, if configured, a host callback
//!   ([`GilConfig::on_drop_request`]) called with the holder's token while
//!   that token still holds the lock.
//! * The holder answers with a forced release. With *forced switching* the
//!   release does not return until another thread has taken the lock (so the
//!   CPU-bound dropper cannot win it straight back), unless nobody waits any
//!   more.
//! * A release wakes one waiter. The lock is not FIFO: a thread arriving
//!   while it is free takes it, as in CPython.
//!
//! # Policies against the convoy effect
//!
//! The classic protocol makes an I/O thread that releases the lock around
//! each system call wait a whole switch interval to get it back from a
//! CPU-bound thread. These options change that, alone or together
//! ([`GilConfig::preset`] names the combinations, [`PRESETS`] lists them:
//! `classic`, `priority`, `lazy`, `priority-lazy`, `monitor`,
//! `priority-monitor`, `priority-lazy-monitor`):
//!
//! * [`Policy::Priority`] (rules in `policy.rs`, classes in `class.rs`): a
//!   thread that was forced to drop (or released voluntarily only after
//!   holding a whole interval while someone waited) is CPU-class, one that
//!   released voluntarily is I/O-class, one forced out only for a starving
//!   waiter keeps its class; I/O-class waiters go first and ask a
//!   CPU-class holder to drop at once; CPU against CPU keeps the interval,
//!   and a CPU-class thread preempted by an I/O-class one gets the lock back
//!   before other CPU-class waiters, its turn lasting [`TURN_INTERVALS`]
//!   intervals once another waits, after which they take turns in order of
//!   arrival; after [`STARVATION_INTERVALS`] intervals without a turn for the CPU
//!   class, its longest waiter is served first and then keeps the lock for
//!   a fifth of an interval (its slice): one bound for the whole class, so
//!   CPU-bound threads take turns and k of them cost the I/O-class
//!   threads what one does.
//! * Lazy release ([`GilConfig::lazy_release_us`]): a voluntary release only
//!   marks the holder as in a system call; coming back is one CAS; another
//!   thread takes the lock over only if the call lasts longer than the
//!   threshold. Calls that return at once (the common case) cost no switch
//!   at all.
//! * The monitor thread ([`GilConfig::monitor`]): one thread per process
//!   keeps the time for every lock that has waiters (switch interval,
//!   starvation bound, lazy-release threshold) instead of a timed wait in
//!   each waiter; no wake-ups at all while no lock has a waiter
//!   ([`monitor_wakeups`]).
//! * Order among waiters: a release wakes the first waiter in line (the
//!   first starving one, else under the priority policy the first I/O-class
//!   one). A running thread may take the free lock before it, but once it
//!   has been overtaken for a whole switch interval the lock is handed to
//!   it; with [`GilConfig::laps`], a thread that has taken the lock that
//!   many times since it joined the line waits behind it. Not under
//!   `classic` without the monitor, which
//!   keeps CPython's rule: whoever gets there first.
//! * A bounded spin ([`GilConfig::spin_us`]): a waiter that has just asked
//!   the holder to drop watches the lock word for a few microseconds before
//!   it sleeps.
//!
//! # One line of text for every host
//!
//! [`Options`] parses a lock's configuration from text, the grammar every
//! host shares (`PRESET[,KEY=VALUE...]`, e.g.
//! `priority-lazy,lazy_us=30,laps=3,trace=gil-%p.svg`): see [`options`].
//! A runtime's defaults for each preset are data in [`host`] (CPython's
//! `priority` spins 50 µs): a host asks for them with
//! [`Options::parse_for`], and every report prints the text a lock's
//! settings are ([`Options::from_settings`]), which builds the same lock
//! on every host.
//!
//! # Observing the lock
//!
//! [`Gil::set_event_hook`] reports each wait, acquisition, release (with its
//! reason), drop request, forced switch and lazy-release takeover
//! ([`events`]); [`Gil::set_histograms`] keeps wait-time and hold-time
//! histograms. With neither on, the fast paths carry no check at all (an
//! `INSTR` bit in the lock word diverts them only when observers are on).
//!
//! # Mapping to CPython 3.13 (`Python/ceval_gil.c`)
//!
//! | CPython                                         | here                                                                 |
//! |-------------------------------------------------|----------------------------------------------------------------------|
//! | `struct _gil_runtime_state`                     | [`Gil`], one per interpreter that owns a GIL                        |
//! | `gil->locked`                                   | [`Gil::is_locked`]: held by a running thread (a lazily released lock is [`Gil::is_reserved`], not held) |
//! | `gil->last_holder`                              | [`Gil::last_holder`]; plus [`Gil::holder`], the holder right now    |
//! | `gil->switch_number`                            | [`Gil::switch_number`], bumped when a different token takes it      |
//! | `gil->interval`                                 | [`Gil::switch_interval_us`], 0 behaving as 1 µs                      |
//! | `gil->mutex`, `gil->cond`                       | the waiting room (`gil/room.rs`): its mutex and the waiters' condition variables (one per queued waiter) |
//! | `_PY_GIL_DROP_REQUEST_BIT` in the holder's eval breaker | [`Gil::drop_requested`] and the [`DropRequestCallback`]      |
//! | `FORCE_SWITCHING`: `switch_cond`, `switch_mutex` | a second condition variable on the same mutex; the forced releaser waits while it is still `last_holder` (`gil/handoff.rs`, `release_slow`) |
//! | `take_gil()`                                    | [`Gil::acquire`] (and [`Gil::acquire_or_abort`] for threads that must exit): the uncontended path in `gil/mod.rs` on `gil/word.rs`'s lock word, the waiting loop in `gil/wait.rs`, timed by each waiter or by the monitor (`gil/monitor.rs`) |
//! | `drop_gil(…, final_release)`                    | [`Gil::release`] with a [`ReleaseReason`] (`gil/mod.rs`; with waiters `gil/handoff.rs`; lazily `gil/lazy.rs`) |
//! | `recreate_gil()` after fork                     | [`Gil::reinit_after_fork`] (`gil/fork.rs`)                           |
//! | (the 2010 priority and monitor proposals)       | the rules in `policy.rs`, used by the waiting loop whoever times it  |
//!
//! Differences, all deliberate: acquire and release are a single CAS each
//! when nobody waits (CPython always takes the mutex); misuse returns a
//! [`GilError`] instead of `Py_FatalError`; a final release forgets the
//! token as `last_holder` so a reader never sees a dead thread's pointer.
//!
//! # Misuse
//!
//! | misuse                                       | result                                  |
//! |----------------------------------------------|-----------------------------------------|
//! | release by a token that does not hold it     | [`GilError::NotHolder`], nothing changes |
//! | acquire by the token that holds it           | [`GilError::AlreadyHeld`] (no deadlock) |
//! | `close` while held or awaited                | [`GilError::Busy`], the lock handed back (a lazy reservation alone is ended, [`Gil::settle`]) |
//! | a call on the lock from inside its own hook, drop-request callback or abort check | [`GilError::Reentrant`] (no deadlock) |
//! | acquire after the token's final release      | allowed: treated as a new thread (hosts reuse thread-state addresses) |
//! | a setting above its range ([`NUMBER_SETTINGS`]) | [`GilError::InvalidSetting`] |
//!
//! # Model checking
//!
//! Built with `RUSTFLAGS="--cfg gil_loom"`, the crate's primitives are
//! loom's and `tests/loom.rs` explores every interleaving of the protocol.

pub mod accounting;
pub mod cancel;
mod class;
mod config;
mod error;
mod escape;
pub mod events;
mod gil;
pub mod host;
mod laps;
pub mod options;
mod policy;
mod reason;
mod stats;
mod sync;
mod token;
#[cfg(feature = "trace")]
pub mod trace;

pub use accounting::ThreadStats;
pub use cancel::NoCancel;
// Everything config.rs makes public (the configuration, its settings,
// limits and presets) is the crate's: a new setting's limit needs no line here.
pub use config::*;
pub use error::GilError;
pub use events::{now_ns, Event, EventHook, EventKind, EventMask, HookId, OwnedHook};
pub use gil::monitor::monitor_wakeups;
pub use gil::{Counters, Gil};
pub use host::{Host, UnknownHost};
pub use options::{Options, OptionsError};
pub use reason::ReleaseReason;
pub use stats::{HistogramSnapshot, Histograms, FINE_SUB_BUCKETS, HISTOGRAM_BUCKETS, HISTOGRAM_FINE_BUCKETS};
pub use token::Token;

/// This crate's version, from `Cargo.toml`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
