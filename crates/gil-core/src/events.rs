//! Events: what the lock did, when, to whom — for tracers, timelines and
//! host-side statistics.
//!
//! Any number of hooks may watch a lock at once, each added with
//! [`Gil::add_event_hook`](crate::Gil::add_event_hook) for the kinds in its
//! [`EventMask`] and removed by the [`HookId`] that returned
//! ([`Gil::set_event_hook`](crate::Gil::set_event_hook) keeps one
//! replaceable hook of all kinds, as before). A hook that no other code
//! may remove (a trace's) is added with
//! [`Gil::add_owned_event_hook`](crate::Gil::add_owned_event_hook): its
//! [`OwnedHook`] is the only way to remove it. A trace, a profiler and a
//! host's own hook run side by side; each event is built once and given to
//! every hook that wants it, in the order they were added.
//!
//! Adding a hook waits for nothing; removing one waits only for the calls
//! of that hook still running (so that what it uses may be freed), not for
//! other hooks: a hook that blocks delays no edit but its own removal.
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
//! return [`GilError::Reentrant`](crate::GilError::Reentrant). A hook runs
//! with the thread's cancellation disabled (see [`NoCancel`](crate::NoCancel)):
//! a pending `pthread_cancel` is acted on at the thread's next cancellation
//! point after the lock's call returns, not inside the hook.

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
    /// that asked, `None` if the monitor thread did. A request raised while
    /// the holder lets go in its final release names that thread. There is
    /// one such event for each request the counters count, unless the
    /// request came before any acquisition was observed.
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
/// what removes it. Numbers come from one counter for the whole process, so
/// no two hooks, of one lock or of two, ever share one: a handle of another
/// lock, or of a hook already removed, removes nothing.
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

/// The handle of a hook added with
/// [`Gil::add_owned_event_hook`](crate::Gil::add_owned_event_hook), and the
/// only way to remove it
/// ([`Gil::remove_owned_event_hook`](crate::Gil::remove_owned_event_hook)):
/// it cannot be copied, cloned or made from a number, and
/// [`Gil::remove_event_hook`](crate::Gil::remove_event_hook) of any
/// [`HookId`] never reaches its hook. For a hook that other code on the
/// lock must not remove (a trace's). Dropping it leaves the hook installed
/// for the life of the lock.
#[must_use = "the hook can be removed only with this handle"]
#[derive(Debug, PartialEq, Eq)]
pub struct OwnedHook(u64);

impl OwnedHook {
    /// The hook's number (never 0), for messages: no [`HookId`] of it
    /// removes the hook.
    pub const fn get(&self) -> u64 {
        self.0
    }
}

/// The next hook's number, for every lock in the process (see [`HookId`]).
static NEXT_HOOK: AtomicU64 = AtomicU64::new(1);

/// One installed hook.
struct Entry {
    number: u64,
    /// Added with `add_owned`: only an [`OwnedHook`] removes it.
    owned: bool,
    mask: EventMask,
    hook: EventHook,
    /// Emitters inside the hook, or deciding whether to enter it.
    calls: AtomicUsize,
    /// Set by the removal before it waits for `calls`: no call enters after.
    removed: AtomicBool,
}

impl Entry {
    /// Runs the hook unless it has been removed. Counted in `calls` first,
    /// then `removed` read: a removal stores `removed`, then reads `calls`
    /// (all `SeqCst`), so either this call sees the flag and stays out, or
    /// the removal sees it counted and waits for it to leave.
    fn call(&self, ev: &Event) {
        self.calls.fetch_add(1, SeqCst);
        if !self.removed.load(SeqCst) {
            // A panicking hook must not unwind through the lock's internals,
            // nor keep the other hooks from the event.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.hook)(ev)));
        }
        self.calls.fetch_sub(1, SeqCst);
    }
}

/// The installed hooks: an immutable list, replaced whole when a hook is
/// added or removed.
struct Hooks {
    entries: Vec<Arc<Entry>>,
    /// The union of the entries' masks.
    mask: EventMask,
    /// The list retired before this one (see `HookList::retired`).
    next_retired: AtomicPtr<Hooks>,
}

/// The hooks of one lock, added and removed at any time, with a guarantee
/// callers of C hooks need: once a removal returns, no thread is still
/// inside the hook removed, so the host may free what that hook uses.
///
/// Two things are waited for, separately. The *hook*: each entry counts
/// the emitters inside it and has a `removed` flag (see [`Entry::call`]);
/// a removal waits for its own entry only, so a hook that runs long delays
/// no edit of the others. The *list's memory*: emitters announce
/// themselves in `readers` before loading the list and leave after its
/// last hook; an edit swaps the list and retires the old one, freed once
/// `readers` is seen at zero after the swap (an emitter that loaded it
/// was counted before the swap) — by that edit, a later one, or the last
/// emitter to leave. Nobody waits for that.
/// Edits are serialised by `editing`, a flag rather than a mutex so that a
/// fork child can clear it (a mutex held by a thread lost in the fork could
/// never be taken again).
pub(crate) struct HookList {
    list: AtomicPtr<Hooks>,
    readers: AtomicUsize,
    /// Replaced lists an emitter may still be reading, linked through
    /// `next_retired`. Changed only under `editing`.
    retired: AtomicPtr<Hooks>,
    editing: AtomicBool,
    /// The number of the hook installed through `set_event_hook`, 0 if none.
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
            readers: AtomicUsize::new(0),
            retired: AtomicPtr::new(std::ptr::null_mut()),
            editing: AtomicBool::new(false),
            replaceable: AtomicU64::new(0),
        }
    }

    /// Calls each hook that wants `kind` with `event()` (built once, only
    /// if some hook wants it), with `enter()`'s value alive around the
    /// calls (made only then).
    pub(crate) fn emit<G>(&self, kind: EventKind, enter: impl FnOnce() -> G, event: impl FnOnce() -> Event) {
        self.readers.fetch_add(1, SeqCst);
        let p = self.list.load(SeqCst);
        if !p.is_null() {
            // SAFETY: `p` came from `Box::into_raw` in `replace`; it is freed
            // only after it was swapped out *and* `readers` was seen at zero
            // after that, and this call was counted before the load.
            let hooks = unsafe { &*p };
            if hooks.mask.contains(kind) {
                let _entered = enter();
                let ev = event();
                for entry in &hooks.entries {
                    if entry.mask.contains(kind) {
                        entry.call(&ev);
                    }
                }
            }
        }
        if self.readers.fetch_sub(1, SeqCst) == 1 && !self.retired.load(SeqCst).is_null() {
            // The last reader out frees what the edits retired, unless an
            // edit is under way (it frees them itself, or the next one does).
            if self.editing.compare_exchange(false, true, SeqCst, SeqCst).is_ok() {
                let _edit = Editing(&self.editing);
                self.reclaim();
            }
        }
    }

    /// Adds `hook` for the kinds in `mask` (not empty: the caller checks).
    pub(crate) fn add(&self, hook: EventHook, mask: EventMask) -> HookId {
        let _edit = self.edit();
        HookId(self.add_locked(hook, mask, false))
    }

    /// Adds `hook` for the kinds in `mask`, removable only by the handle
    /// returned.
    pub(crate) fn add_owned(&self, hook: EventHook, mask: EventMask) -> OwnedHook {
        let _edit = self.edit();
        OwnedHook(self.add_locked(hook, mask, true))
    }

    /// Removes the hook `id` (not an owned one); `false` if no such hook is
    /// installed. Returns once no thread runs it.
    pub(crate) fn remove(&self, id: HookId) -> bool {
        let entry = self.detach(id.0, false);
        entry.map(Self::wait_out).is_some()
    }

    /// Removes the owned hook `hook`; gives it back if it is not one of
    /// this list's. Returns once no thread runs it.
    pub(crate) fn remove_owned(&self, hook: OwnedHook) -> Result<(), OwnedHook> {
        match self.detach(hook.0, true) {
            Some(entry) => {
                Self::wait_out(entry);
                Ok(())
            }
            None => Err(hook),
        }
    }

    /// Replaces the hook installed through this call (`Gil::set_event_hook`),
    /// leaving the others; `None` only removes it. Returns once no thread
    /// runs the hook replaced.
    pub(crate) fn set_replaceable(&self, hook: Option<EventHook>) {
        let old = {
            let _edit = self.edit();
            let old = self.replaceable.swap(0, SeqCst);
            let old = if old == 0 { None } else { self.detach_locked(old, false) };
            if let Some(hook) = hook {
                let number = self.add_locked(hook, EventMask::ALL, false);
                self.replaceable.store(number, SeqCst);
            }
            old
        };
        if let Some(entry) = old {
            Self::wait_out(entry);
        }
    }

    /// Under `edit()`: adds an entry, returns its number.
    fn add_locked(&self, hook: EventHook, mask: EventMask, owned: bool) -> u64 {
        let number = NEXT_HOOK.fetch_add(1, SeqCst);
        let entry = Arc::new(Entry {
            number,
            owned,
            mask,
            hook,
            calls: AtomicUsize::new(0),
            removed: AtomicBool::new(false),
        });
        self.replace(|entries| entries.push(entry));
        number
    }

    /// Takes the hook `number` (owned or not, as `owned` says) out of the
    /// list; its entry, to wait for, or `None` if it is not installed.
    fn detach(&self, number: u64, owned: bool) -> Option<Arc<Entry>> {
        let _edit = self.edit();
        self.detach_locked(number, owned)
    }

    /// `detach` under `edit()`.
    fn detach_locked(&self, number: u64, owned: bool) -> Option<Arc<Entry>> {
        let cur = self.list.load(SeqCst);
        if cur.is_null() {
            return None;
        }
        // SAFETY: only edits free the list, and this is one.
        let hooks = unsafe { &*cur };
        let entry = hooks
            .entries
            .iter()
            .find(|e| e.number == number && e.owned == owned)?
            .clone();
        entry.removed.store(true, SeqCst);
        self.replace(|entries| entries.retain(|e| !Arc::ptr_eq(e, &entry)));
        if self.replaceable.load(SeqCst) == number {
            self.replaceable.store(0, SeqCst);
        }
        Some(entry)
    }

    /// Waits until no thread runs a detached entry's hook (none can enter
    /// it any more: see [`Entry::call`]). Not under `edit()`: a removal
    /// waits for its own hook, never blocking edits of the others.
    fn wait_out(entry: Arc<Entry>) {
        while entry.calls.load(SeqCst) != 0 {
            std::thread::yield_now();
        }
    }

    /// Builds the next list from the current one with `edit`, publishes it,
    /// and retires the old one. Under `edit()`.
    fn replace(&self, edit: impl FnOnce(&mut Vec<Arc<Entry>>)) {
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
            let mask = entries.iter().fold(EventMask(0), |m, e| m | e.mask);
            Box::into_raw(Box::new(Hooks {
                entries,
                mask,
                next_retired: AtomicPtr::new(std::ptr::null_mut()),
            }))
        };
        let old = self.list.swap(new, SeqCst);
        if !old.is_null() {
            // SAFETY: `old` came from `Box::into_raw` here and is freed only
            // by `reclaim`, after this.
            unsafe { &*old }.next_retired.store(self.retired.load(SeqCst), SeqCst);
            self.retired.store(old, SeqCst);
        }
        self.reclaim();
    }

    /// Frees the retired lists if no emitter can be reading one. Under
    /// `edit()`, so after every list on `retired` was swapped out of `list`:
    /// an emitter that loaded one counted itself in `readers` before that
    /// swap, and stays counted until it has left the list.
    fn reclaim(&self) {
        if self.readers.load(SeqCst) != 0 {
            return;
        }
        let mut p = self.retired.swap(std::ptr::null_mut(), SeqCst);
        while !p.is_null() {
            // SAFETY: from `Box::into_raw` in `replace`, unreachable through
            // `list` and `retired`, and no emitter reads it (see above).
            let hooks = unsafe { Box::from_raw(p) };
            p = hooks.next_retired.load(SeqCst);
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
        self.readers.store(0, SeqCst);
        self.editing.store(false, SeqCst);
        let p = self.list.load(SeqCst);
        if !p.is_null() {
            // SAFETY: the child's only thread is here: nothing frees the list.
            for entry in &unsafe { &*p }.entries {
                entry.calls.store(0, SeqCst);
            }
        }
        self.reclaim();
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
        // Every emitter has left: `readers` is zero.
        self.reclaim();
    }
}
