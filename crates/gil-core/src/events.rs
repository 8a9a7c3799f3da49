//! Events: what the lock did, when, to whom — for tracers, timelines and
//! host-side statistics.
//!
//! Any number of hooks may watch a lock at once, each added with
//! [`Gil::add_event_hook`](crate::Gil::add_event_hook) for the kinds in its
//! [`EventMask`] and removed by the [`HookId`] that returned
//! ([`Gil::set_event_hook`](crate::Gil::set_event_hook) keeps one
//! replaceable hook of all kinds, as before). A trace, a profiler and a
//! host's own hook run side by side; each event is built once and given to
//! every hook that wants it, in the order they were added.
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

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::SeqCst};
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

/// Which kinds of event a hook wants: a set of bits, one per
/// [`EventKind`] (each release reason its own bit). The bits are part of the
/// C ABI (`GIL_EVENT_MASK_*`) and never change.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventMask(u32);

impl EventMask {
    /// [`EventKind::WaitStart`].
    pub const WAIT_START: EventMask = EventMask(1 << 0);
    /// [`EventKind::Acquired`].
    pub const ACQUIRED: EventMask = EventMask(1 << 1);
    /// [`EventKind::Released`] with [`ReleaseReason::Voluntary`].
    pub const RELEASED_VOLUNTARY: EventMask = EventMask(1 << 2);
    /// [`EventKind::Released`] with [`ReleaseReason::Forced`].
    pub const RELEASED_FORCED: EventMask = EventMask(1 << 3);
    /// [`EventKind::Released`] with [`ReleaseReason::Final`].
    pub const RELEASED_FINAL: EventMask = EventMask(1 << 4);
    /// [`EventKind::DropRequested`].
    pub const DROP_REQUESTED: EventMask = EventMask(1 << 5);
    /// [`EventKind::ForcedSwitch`].
    pub const FORCED_SWITCH: EventMask = EventMask(1 << 6);
    /// [`EventKind::LazyTakeover`].
    pub const LAZY_TAKEOVER: EventMask = EventMask(1 << 7);
    /// Every release, whatever its reason.
    pub const RELEASED: EventMask = EventMask(0b111 << 2);
    /// Every kind of event.
    pub const ALL: EventMask = EventMask(0xff);

    /// The mask with these bits, or `None` if a bit names no kind of event.
    pub const fn from_bits(bits: u32) -> Option<EventMask> {
        if bits & !Self::ALL.0 == 0 {
            Some(EventMask(bits))
        } else {
            None
        }
    }

    /// The bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// The bit of one kind of event.
    pub const fn of(kind: EventKind) -> EventMask {
        match kind {
            EventKind::WaitStart => Self::WAIT_START,
            EventKind::Acquired => Self::ACQUIRED,
            EventKind::Released(ReleaseReason::Voluntary) => Self::RELEASED_VOLUNTARY,
            EventKind::Released(ReleaseReason::Forced) => Self::RELEASED_FORCED,
            EventKind::Released(ReleaseReason::Final) => Self::RELEASED_FINAL,
            EventKind::DropRequested => Self::DROP_REQUESTED,
            EventKind::ForcedSwitch => Self::FORCED_SWITCH,
            EventKind::LazyTakeover => Self::LAZY_TAKEOVER,
        }
    }

    /// Whether `kind` is in the mask.
    pub const fn contains(self, kind: EventKind) -> bool {
        self.0 & Self::of(kind).0 != 0
    }

    /// Whether no kind is in the mask.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl std::ops::BitOr for EventMask {
    type Output = EventMask;
    fn bitor(self, rhs: EventMask) -> EventMask {
        EventMask(self.0 | rhs.0)
    }
}

impl std::fmt::Debug for EventMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EventMask({:#04x})", self.0)
    }
}

/// The handle of a hook added with [`Gil::add_event_hook`](crate::Gil::add_event_hook):
/// what removes it. Unique per lock for the life of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HookId(u64);

impl HookId {
    /// The handle's number (never 0), e.g. to hand to C code.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The handle with this number (which need not name a hook: removing
    /// it then says so).
    pub const fn from_raw(raw: u64) -> HookId {
        HookId(raw)
    }
}

/// The installed hooks: an immutable list, replaced whole when a hook is
/// added or removed.
struct Hooks {
    entries: Vec<(HookId, EventMask, EventHook)>,
    /// The union of the entries' masks.
    mask: EventMask,
}

/// The hooks of one lock, added and removed at any time, with a guarantee
/// callers of C hooks need: once a removal returns, no thread is still
/// inside the hook removed, so the host may free what that hook uses.
///
/// Emitters announce themselves in `inflight` *before* loading the list;
/// an edit swaps the list and then waits for `inflight` to reach zero. An
/// emitter that loaded the old list was counted before the swap, so the
/// wait covers it; one that starts after the swap loads the new list.
/// Edits are serialised by `editing`, a flag rather than a mutex so that a
/// fork child can clear it (a mutex held by a thread lost in the fork could
/// never be taken again).
pub(crate) struct HookList {
    list: AtomicPtr<Hooks>,
    inflight: AtomicUsize,
    editing: AtomicBool,
    next_id: AtomicU64,
    /// The hook installed through `set_event_hook`, 0 if none.
    replaceable: AtomicU64,
}

/// Serialises edits of a [`HookList`] while alive.
struct Editing<'a>(&'a AtomicBool);

impl Drop for Editing<'_> {
    fn drop(&mut self) {
        self.0.store(false, SeqCst);
    }
}

impl HookList {
    pub(crate) fn new() -> HookList {
        HookList {
            list: AtomicPtr::new(std::ptr::null_mut()),
            inflight: AtomicUsize::new(0),
            editing: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            replaceable: AtomicU64::new(0),
        }
    }

    /// Calls each hook that wants `kind` with `event()` (built once, only
    /// if some hook wants it).
    pub(crate) fn emit(&self, kind: EventKind, event: impl FnOnce() -> Event) {
        self.inflight.fetch_add(1, SeqCst);
        let p = self.list.load(SeqCst);
        if !p.is_null() {
            // SAFETY: `p` came from `Box::into_raw` in `replace`, which frees
            // it only after the swap *and* after `inflight` (which counts
            // this call, registered before the load) dropped to zero.
            let hooks = unsafe { &*p };
            if hooks.mask.contains(kind) {
                let ev = event();
                for (_, mask, hook) in &hooks.entries {
                    if mask.contains(kind) {
                        // A panicking hook must not unwind through the lock's
                        // internals, nor keep the other hooks from the event.
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&ev)));
                    }
                }
            }
        }
        self.inflight.fetch_sub(1, SeqCst);
    }

    /// Adds `hook` for the kinds in `mask` (not empty: the caller checks).
    pub(crate) fn add(&self, hook: EventHook, mask: EventMask) -> HookId {
        let _edit = self.edit();
        let id = HookId(self.next_id.fetch_add(1, SeqCst));
        self.replace(|entries| entries.push((id, mask, hook)));
        id
    }

    /// Removes the hook `id`; `false` if no such hook is installed. Returns
    /// once no thread runs it.
    pub(crate) fn remove(&self, id: HookId) -> bool {
        let _edit = self.edit();
        self.remove_locked(id)
    }

    /// Replaces the hook installed through this call (`Gil::set_event_hook`),
    /// leaving the others; `None` only removes it.
    pub(crate) fn set_replaceable(&self, hook: Option<EventHook>) {
        let _edit = self.edit();
        let old = HookId(self.replaceable.swap(0, SeqCst));
        if old.0 != 0 {
            self.remove_locked(old);
        }
        if let Some(hook) = hook {
            let id = HookId(self.next_id.fetch_add(1, SeqCst));
            self.replace(|entries| entries.push((id, EventMask::ALL, hook)));
            self.replaceable.store(id.0, SeqCst);
        }
    }

    fn remove_locked(&self, id: HookId) -> bool {
        let mut found = false;
        self.replace(|entries| {
            let before = entries.len();
            entries.retain(|(i, _, _)| *i != id);
            found = entries.len() != before;
        });
        if found && self.replaceable.load(SeqCst) == id.0 {
            self.replaceable.store(0, SeqCst);
        }
        found
    }

    /// Builds the next list from the current one with `edit`, publishes it,
    /// and frees the old one once no emitter can be using it. Under `edit()`.
    fn replace(&self, edit: impl FnOnce(&mut Vec<(HookId, EventMask, EventHook)>)) {
        let cur = self.list.load(SeqCst);
        let mut entries = if cur.is_null() {
            Vec::new()
        } else {
            // SAFETY: only edits (serialised, and this is one) free the list.
            unsafe { &*cur }.entries.clone()
        };
        edit(&mut entries);
        let new = if entries.is_empty() {
            std::ptr::null_mut()
        } else {
            let mask = entries.iter().fold(EventMask(0), |m, (_, k, _)| m | *k);
            Box::into_raw(Box::new(Hooks { entries, mask }))
        };
        let old = self.list.swap(new, SeqCst);
        while self.inflight.load(SeqCst) != 0 {
            std::thread::yield_now();
        }
        if !old.is_null() {
            // SAFETY: `old` came from `Box::into_raw` here; it is no longer
            // reachable through `list`, and no emitter is still using it
            // (see the type's docs).
            drop(unsafe { Box::from_raw(old) });
        }
    }

    fn edit(&self) -> Editing<'_> {
        while self.editing.compare_exchange_weak(false, true, SeqCst, SeqCst).is_err() {
            std::thread::yield_now();
        }
        Editing(&self.editing)
    }

    /// In a child process after `fork()`: threads that were inside a hook,
    /// or editing the list, in the parent do not exist here and will never
    /// leave.
    pub(crate) fn reset_after_fork(&self) {
        self.inflight.store(0, SeqCst);
        self.editing.store(false, SeqCst);
    }

    /// Whether any hook is installed.
    pub(crate) fn is_set(&self) -> bool {
        !self.list.load(SeqCst).is_null()
    }

    /// How many hooks are installed.
    pub(crate) fn len(&self) -> usize {
        let _edit = self.edit();
        let p = self.list.load(SeqCst);
        if p.is_null() {
            0
        } else {
            // SAFETY: only edits free the list, and we hold the edit flag.
            unsafe { &*p }.entries.len()
        }
    }
}

impl Drop for HookList {
    fn drop(&mut self) {
        let p = *self.list.get_mut();
        if !p.is_null() {
            // SAFETY: `&mut self`: no emitter can be running.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}
