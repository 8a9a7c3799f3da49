//! Events: what the lock did, when, to whom — for tracers, timelines and
//! host-side statistics.
//!
//! A host installs one hook per lock with [`Gil::set_event_hook`](crate::Gil::set_event_hook).
//! Without a hook (or histograms) the lock pays nothing: observers set the
//! lock word's `INSTR` bit, which makes the uncontended compare-and-swaps
//! fail over to instrumented paths (see `gil/mod.rs` and
//! `scripts/instructions.sh`); with one, each event costs a clock read and
//! the hook's own work.
//!
//! Hooks run on the thread the event happens on, some of them under the
//! lock's internal mutex (a waiter's [`EventKind::WaitStart`], a
//! [`EventKind::DropRequested`]), so a hook must be short and must not
//! block. Calls on the same lock from inside a hook that would wait for it
//! return [`GilError::Reentrant`](crate::GilError::Reentrant).

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::reason::ReleaseReason;
use crate::Token;

/// What happened. `Event::token` is the thread it happened to; `Event::other`
/// the thread on the other side, where there is one.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// `token` found the lock taken and started waiting for it.
    WaitStart,
    /// `token` took the lock (after waiting or not; a reclaim after a lazy
    /// release included).
    Acquired,
    /// `token` let go of the lock for this reason. With lazy release a
    /// voluntary release only marks a system call; it is reported the same.
    Released(ReleaseReason),
    /// The holder `token` was asked to drop the lock; `other` is the waiter
    /// that asked, `None` if the monitor thread did.
    DropRequested,
    /// `token`'s forced release ended because another thread took the lock:
    /// `other`, the last holder when `token` noticed (normally the thread
    /// that took over; `None` if that one has already made its final release).
    ForcedSwitch,
    /// `token`'s lazily released system call outlasted the threshold, and the
    /// lock was taken over: by the waiter `other`, or by the monitor thread
    /// (`None`) on behalf of the waiters.
    LazyTakeover,
}

impl EventKind {
    /// A short, stable name (`wait_start`, `acquired`, `released_voluntary`,
    /// `released_forced`, `released_final`, `drop_requested`,
    /// `forced_switch`, `lazy_takeover`).
    pub const fn name(self) -> &'static str {
        match self {
            EventKind::WaitStart => "wait_start",
            EventKind::Acquired => "acquired",
            EventKind::Released(ReleaseReason::Voluntary) => "released_voluntary",
            EventKind::Released(ReleaseReason::Forced) => "released_forced",
            EventKind::Released(ReleaseReason::Final) => "released_final",
            EventKind::DropRequested => "drop_requested",
            EventKind::ForcedSwitch => "forced_switch",
            EventKind::LazyTakeover => "lazy_takeover",
        }
    }
}

/// One event, as given to an [`EventHook`].
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// The thread it happened to.
    pub token: Token,
    /// The thread on the other side (see [`EventKind`]).
    pub other: Option<Token>,
    /// When, in nanoseconds of [`now_ns`]'s clock.
    pub time_ns: u64,
}

impl Event {
    /// An event at the current time.
    pub fn now(kind: EventKind, token: Token, other: Option<Token>) -> Event {
        Event {
            kind,
            token,
            other,
            time_ns: now_ns(),
        }
    }
}

/// A lock's event hook; see the [module docs](self) for where it runs.
pub type EventHook = Arc<dyn Fn(&Event) + Send + Sync + 'static>;

/// Nanoseconds on a monotonic clock shared by every lock in the process
/// (its zero is the first call), so that events of several locks, and a
/// host's own timestamps taken with this function, line up.
pub fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The installed hook, replaceable at any time, with a guarantee callers of
/// C hooks need: once [`HookSlot::set`] returns, no thread is still inside
/// the hook it replaced, so the host may free what that hook uses.
///
/// Emitters announce themselves in `inflight` *before* loading the pointer;
/// `set` swaps the pointer and then waits for `inflight` to reach zero. An
/// emitter that loaded the old pointer was counted before the swap, so the
/// wait covers it; one that starts after the swap loads the new pointer.
pub(crate) struct HookSlot {
    hook: AtomicPtr<EventHook>,
    inflight: AtomicUsize,
}

impl HookSlot {
    pub(crate) fn new() -> HookSlot {
        HookSlot {
            hook: AtomicPtr::new(std::ptr::null_mut()),
            inflight: AtomicUsize::new(0),
        }
    }

    /// Calls the hook, if one is installed, with `event()`.
    pub(crate) fn emit(&self, event: impl FnOnce() -> Event) {
        self.inflight.fetch_add(1, SeqCst);
        let p = self.hook.load(SeqCst);
        if !p.is_null() {
            // SAFETY: `p` came from `Box::into_raw` in `set`, which frees
            // it only after the swap *and* after `inflight` (which counts
            // this call, registered before the load) dropped to zero.
            let hook = unsafe { &*p };
            let ev = event();
            // A panicking hook must not unwind through the lock's internals.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&ev)));
        }
        self.inflight.fetch_sub(1, SeqCst);
    }

    /// Installs `hook` (or none) and returns once no thread runs the old one.
    /// Never called from inside a hook (`Gil::set_event_hook` refuses:
    /// it would wait for itself).
    pub(crate) fn set(&self, hook: Option<EventHook>) {
        let new = hook.map_or(std::ptr::null_mut(), |h| Box::into_raw(Box::new(h)));
        let old = self.hook.swap(new, SeqCst);
        while self.inflight.load(SeqCst) != 0 {
            std::thread::yield_now();
        }
        if !old.is_null() {
            // SAFETY: `old` came from `Box::into_raw` here; it is no longer
            // reachable through `hook`, and no emitter is still using it
            // (see the type's docs).
            drop(unsafe { Box::from_raw(old) });
        }
    }

    /// In a child process after `fork()`: threads that were inside a hook
    /// in the parent do not exist here and will never leave it.
    pub(crate) fn reset_after_fork(&self) {
        self.inflight.store(0, SeqCst);
    }

    pub(crate) fn is_set(&self) -> bool {
        !self.hook.load(SeqCst).is_null()
    }
}

impl Drop for HookSlot {
    fn drop(&mut self) {
        let p = *self.hook.get_mut();
        if !p.is_null() {
            // SAFETY: `&mut self`: no emitter can be running.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}
