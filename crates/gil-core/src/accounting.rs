//! Per-thread accounting: for each thread (token) of a lock, how long it
//! waited for the lock, held it and was released around calls, how often
//! it took the lock and was forced to drop it — what "which thread waits
//! for the GIL, and for how long" needs, cheap enough to leave on.
//!
//! Turned on with [`Gil::set_thread_stats`](crate::Gil::set_thread_stats);
//! off, it costs nothing (the lock word's `INSTR` bit stays down, as for the
//! other observers). On, every acquisition and release reads the clock and
//! updates the calling thread's own record: a few relaxed loads and stores,
//! no lock and no shared cache line (each record is written only by the
//! thread using its token; the record is found through a per-thread cache).
//!
//! A thread moves between three states, as in the traces
//! (`trace::ThreadState`, with the `trace` feature): *holding* the lock, *waiting* for it (to
//! get it, or in a forced release for someone else to take it), *in a call*
//! (released voluntarily, not yet asking again). Time is charged to the
//! state it was spent in; a snapshot includes the time in the current state
//! up to the snapshot. Time before the thread's first event after
//! accounting was turned on is not charged anywhere, nor is time while
//! accounting is off. Every record ends at or after it began, and the time
//! charged to its three states fits in its life.
//!
//! A record begins with its token's first event after accounting was
//! turned on — or, for the thread holding the lock then, when that thread
//! tags it ([`Gil::tag_thread`](crate::Gil::tag_thread)). Nothing else
//! makes one: a name given to a token without a record waits for the
//! token's next record (the last [`PENDING_NAMES_KEPT`] such names are
//! kept).
//!
//! A host tags a record with a number of its own (CPython: the thread's
//! ident) from the thread using the token, after an acquisition (a tag from
//! another thread is refused: a record has one writer); a different number
//! on an open record means the token was reused by a new thread whose
//! predecessor ended unseen, and starts a new record.
//!
//! A token's record ends with its final release and stays readable (the
//! last [`ENDED_KEPT`] ended records are kept); a token that comes back
//! after a final release (hosts reuse thread-state memory) starts a new
//! record. Tokens are never dereferenced: a record outliving its host
//! thread is only numbers.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering::{self, Acquire, Relaxed};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::{GilError, Token};

/// How many ended records a lock keeps for reading, oldest dropped first.
pub const ENDED_KEPT: usize = 1024;

/// How many names given to tokens without a record a lock keeps for those
/// tokens' next records, oldest dropped first (a rename of the same token
/// replaces its name and makes it the newest).
pub const PENDING_NAMES_KEPT: usize = 1024;

/// One thread's accounting, as read by [`Gil::thread_stats`](crate::Gil::thread_stats).
/// Each field is read without stopping the thread, so a snapshot of a busy
/// thread is not atomic as a whole; but `first_ns <= ended_ns`, and
/// `wait_time + hold_time + call_time` is at most the record's life (up to
/// `ended_ns`, or for a live record up to the snapshot).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadStats {
    /// The thread.
    pub token: Token,
    /// A number the host attached with [`Gil::tag_thread`](crate::Gil::tag_thread)
    /// (CPython: the thread's ident), 0 if none.
    pub tag: u64,
    /// The name the host gave with [`Gil::name_thread`](crate::Gil::name_thread), if any.
    pub name: Option<String>,
    /// Whether the thread has not made its final release yet (and
    /// accounting was not turned off and on again since the record began).
    pub alive: bool,
    /// When the record began (the token's first event after accounting was
    /// turned on, or after its previous life ended), in
    /// [`now_ns`](crate::now_ns) nanoseconds.
    pub first_ns: u64,
    /// When the record ended, if it did: the final release, a new tag, or
    /// (for a record still open when accounting was turned on again) when
    /// accounting was turned off. Never before `first_ns`.
    pub ended_ns: Option<u64>,
    /// Time waiting for the lock: from asking for it to getting it, and in
    /// forced releases until it was taken back.
    pub wait_time: Duration,
    /// Time holding the lock.
    pub hold_time: Duration,
    /// Time released voluntarily (around a blocking call) before asking
    /// again.
    pub call_time: Duration,
    /// Times it took the lock.
    pub acquisitions: u64,
    /// Acquisitions that followed another thread's (switches to it).
    pub switches_in: u64,
    /// Acquisitions that had to wait.
    pub waits: u64,
    /// Releases forced by a drop request.
    pub forced_releases: u64,
    /// Drop requests it raised while waiting.
    pub drop_requests_raised: u64,
    /// Drop requests it received while holding the lock.
    pub drop_requests_received: u64,
}

const NONE: u8 = 0;
const HOLDING: u8 = 1;
const WAITING: u8 = 2;
const IN_CALL: u8 = 3;
const ENDED: u8 = 4;

/// Whether time spent in `state` is charged (to `Record::ns[state]`).
#[inline]
fn timed(state: u8) -> bool {
    matches!(state, HOLDING | WAITING | IN_CALL)
}

/// One token's life.
///
/// The state, its start (`since`), the time and event counters and
/// `ended_ns` are written only by the thread using the token (single
/// writer: a load and a store each); `received` and `raised` may be bumped
/// by other threads and use read-modify-writes; `closed_ns` is written once,
/// by `Accounts::restart`, under the records' mutex.
///
/// Why a snapshot taken while the writer runs stays consistent: `since`
/// only moves forward, and each move charges exactly the time moved over
/// to the state left, so the charged times never add up to more than
/// `since - first_ns`. The writer stores `since`, then the charged time
/// (release), then the new state (release); a reader loads the state
/// (acquire), the times (acquire), then `since`: having seen a charge, it
/// sees the `since` that charge moved to, and never counts a stretch twice.
struct Record {
    token: usize,
    /// The thread (see [`this_thread`]) that made the latest event: the
    /// only one a tag is taken from.
    writer: AtomicU64,
    /// Set once the record is over (final release, new tag, closed by a
    /// restart): a thread's cached record serves only while it is not.
    over: AtomicBool,
    state: AtomicU8,
    since: AtomicU64,
    first_ns: u64,
    /// Where its writer ended it (`since` at the end), once `state` is `ENDED`.
    ended_ns: AtomicU64,
    /// Where `Accounts::restart` closed it (0: it did not).
    closed_ns: AtomicU64,
    /// Indexed by state: nanoseconds charged to `HOLDING`, `WAITING`, `IN_CALL`.
    ns: [AtomicU64; 4],
    acquisitions: AtomicU64,
    switches_in: AtomicU64,
    waits: AtomicU64,
    forced: AtomicU64,
    raised: AtomicU64,
    received: AtomicU64,
    tag: AtomicU64,
    name: Mutex<Option<String>>,
}

impl Record {
    fn new(token: usize, now: u64, writer: u64, name: Option<String>) -> Record {
        Record {
            token,
            writer: AtomicU64::new(writer),
            over: AtomicBool::new(false),
            state: AtomicU8::new(NONE),
            since: AtomicU64::new(now),
            first_ns: now,
            ended_ns: AtomicU64::new(0),
            closed_ns: AtomicU64::new(0),
            ns: Default::default(),
            acquisitions: AtomicU64::new(0),
            switches_in: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            forced: AtomicU64::new(0),
            raised: AtomicU64::new(0),
            received: AtomicU64::new(0),
            tag: AtomicU64::new(0),
            name: Mutex::new(name),
        }
    }

    /// Moves `since` forward to `now` (not back: the caller's clock reading
    /// may be older than the last move), charging the time moved over to
    /// the current state; returns where `since` is now. Writer only.
    #[inline]
    fn advance(&self, now: u64) -> u64 {
        let old = self.state.load(Relaxed);
        let since = self.since.load(Relaxed);
        let to = now.max(since);
        self.since.store(to, Relaxed);
        if timed(old) {
            let n = &self.ns[old as usize];
            n.store(n.load(Relaxed).wrapping_add(to - since), Ordering::Release);
        }
        to
    }

    /// Moves to `state` at `now`, charging the time since the last move to
    /// the state left. Writer only.
    #[inline]
    fn enter(&self, state: u8, now: u64) {
        self.advance(now);
        self.state.store(state, Ordering::Release);
    }

    /// Ends the record at `now` (or at its last move if later). Writer only.
    fn end_at(&self, now: u64) {
        let end = self.advance(now);
        self.ended_ns.store(end, Relaxed);
        self.state.store(ENDED, Ordering::Release);
        self.over.store(true, Relaxed);
    }

    fn snapshot(&self, until: u64) -> ThreadStats {
        // In this order; see the type's comment.
        let state = self.state.load(Acquire);
        let mut ns = [0u64; 4];
        for (i, n) in self.ns.iter().enumerate() {
            ns[i] = n.load(Acquire);
        }
        let since = self.since.load(Relaxed);
        let closed = self.closed_ns.load(Relaxed);
        let ended_ns = if state == ENDED {
            Some(self.ended_ns.load(Relaxed))
        } else if closed != 0 {
            // Closed by a restart while its writer may still have been in
            // an event: it ends where it was closed or where that event
            // left it, whichever is later.
            let end = closed.max(since);
            if timed(state) {
                ns[state as usize] += end - since;
            }
            Some(end)
        } else {
            if timed(state) {
                ns[state as usize] += until.saturating_sub(since);
            }
            None
        };
        ThreadStats {
            token: Token::new(self.token).expect("records are made for tokens"),
            tag: self.tag.load(Relaxed),
            name: self.name.lock().unwrap_or_else(PoisonError::into_inner).clone(),
            alive: ended_ns.is_none(),
            first_ns: self.first_ns,
            ended_ns,
            wait_time: Duration::from_nanos(ns[WAITING as usize]),
            hold_time: Duration::from_nanos(ns[HOLDING as usize]),
            call_time: Duration::from_nanos(ns[IN_CALL as usize]),
            acquisitions: self.acquisitions.load(Relaxed),
            switches_in: self.switches_in.load(Relaxed),
            waits: self.waits.load(Relaxed),
            forced_releases: self.forced.load(Relaxed),
            drop_requests_raised: self.raised.load(Relaxed),
            drop_requests_received: self.received.load(Relaxed),
        }
    }
}

/// A counter with a single writer: a load and a store.
#[inline]
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(by), Relaxed);
}

/// Whom a drop request asked, as the lock could tell at the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    /// The holder, or the last holder letting go of a voluntary or forced
    /// release: alive.
    Holder(Token),
    /// Nobody holds by name: the last observed acquisition's token, which
    /// is letting go in its final release (or, for an instant, the holder
    /// before the next one's name is stored).
    LettingGo(Token),
    /// No acquisition observed yet.
    Nobody,
}

/// What a release does to the releaser's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// Around a blocking call.
    Voluntary,
    /// On a drop request: waits for someone else to take the lock.
    Forced,
    /// The thread's last.
    Final,
}

/// Names given to tokens that have no record yet, for their next records:
/// at most [`PENDING_NAMES_KEPT`], the oldest dropped first.
#[derive(Default)]
struct PendingNames {
    /// Token → (when named, in `next` numbers; the name).
    names: HashMap<usize, (u64, String)>,
    /// (token, when named), oldest first; entries whose number no longer
    /// matches `names` (renamed or taken since) are skipped and, past twice
    /// the bound, swept out.
    order: VecDeque<(usize, u64)>,
    next: u64,
}

impl PendingNames {
    fn insert(&mut self, token: usize, name: String) {
        self.next += 1;
        let n = self.next;
        self.names.insert(token, (n, name));
        self.order.push_back((token, n));
        while self.names.len() > PENDING_NAMES_KEPT {
            let Some((t, n)) = self.order.pop_front() else { break };
            if self.names.get(&t).is_some_and(|(m, _)| *m == n) {
                self.names.remove(&t);
            }
        }
        if self.order.len() > 2 * PENDING_NAMES_KEPT {
            let names = &self.names;
            self.order.retain(|(t, n)| names.get(t).is_some_and(|(m, _)| m == n));
        }
    }

    fn take(&mut self, token: usize) -> Option<String> {
        if self.names.is_empty() {
            return None;
        }
        self.names.remove(&token).map(|(_, name)| name)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.names.len()
    }
}

/// The live records of a lock and the names waiting for records, under one
/// mutex.
#[derive(Default)]
struct Live {
    records: HashMap<usize, Arc<Record>>,
    pending: PendingNames,
}

impl Live {
    /// A new record for `token` beginning at `now`, made by `writer`, with
    /// the name waiting for it if any; not inserted.
    fn fresh(&mut self, token: usize, now: u64, writer: u64) -> Arc<Record> {
        Arc::new(Record::new(token, now, writer, self.pending.take(token)))
    }
}

/// The records of one lock.
pub(crate) struct Accounts {
    /// Unique in the process (an address could be reused by a later lock
    /// while threads still cache records of this one).
    id: usize,
    /// Locked before `ended` when both are.
    live: Mutex<Live>,
    ended: Mutex<VecDeque<Arc<Record>>>,
    /// The token of the last acquisition, for `switches_in` (acquisitions
    /// are serialised by the lock itself).
    last: AtomicUsize,
    /// Drop requests raised while no record could be named (see
    /// `drop_requested`), for the next acquisition to receive.
    unclaimed: AtomicU64,
    /// When accounting was turned off (0: on, or never turned on): records
    /// left open then are not charged time after it.
    off_ns: AtomicU64,
    /// After a fork: the next on the list of replaced `Accounts`, kept for
    /// the life of the process (see `Gil::reinit_after_fork`).
    pub(crate) next_retired: std::sync::atomic::AtomicPtr<Accounts>,
}

/// How many (lock, token) records a thread caches: one per lock it uses is
/// the common case.
const CACHE: usize = 4;

/// A thread's own accounting state.
struct Recent {
    /// The thread's number (0: not drawn yet), see [`this_thread`].
    thread: Cell<u64>,
    /// Recently used records: (`Accounts::id`, token, record), most recent
    /// first.
    records: RefCell<Vec<(usize, usize, Arc<Record>)>>,
}

impl Recent {
    #[inline]
    fn thread(&self) -> u64 {
        match self.thread.get() {
            0 => {
                static NEXT: AtomicU64 = AtomicU64::new(1);
                let n = NEXT.fetch_add(1, Relaxed);
                self.thread.set(n);
                n
            }
            n => n,
        }
    }
}

thread_local! {
    static RECENT: Recent = const {
        Recent {
            thread: Cell::new(0),
            records: RefCell::new(Vec::new()),
        }
    };
}

/// A number unique to the calling thread among all threads of the process
/// (never reused); 0 while the thread's locals are being destroyed.
fn this_thread() -> u64 {
    RECENT.try_with(Recent::thread).unwrap_or(0)
}

/// Puts `rec` (of lock `id`) first in this thread's cache.
fn cache(id: usize, rec: &Arc<Record>) {
    let _ = RECENT.try_with(|r| {
        let mut r = r.records.borrow_mut();
        r.retain(|(a, b, _)| *a != id || *b != rec.token);
        r.insert(0, (id, rec.token, rec.clone()));
        r.truncate(CACHE);
    });
}

/// Drops `rec` (of lock `id`) from this thread's cache.
fn uncache(id: usize, rec: &Arc<Record>) {
    let _ = RECENT.try_with(|r| {
        r.records
            .borrow_mut()
            .retain(|(a, _, x)| *a != id || !Arc::ptr_eq(x, rec))
    });
}

impl Accounts {
    pub(crate) fn new() -> Accounts {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        Accounts {
            id: NEXT.fetch_add(1, Relaxed),
            live: Mutex::new(Live::default()),
            ended: Mutex::new(VecDeque::new()),
            last: AtomicUsize::new(0),
            unclaimed: AtomicU64::new(0),
            off_ns: AtomicU64::new(0),
            next_retired: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    fn id(&self) -> usize {
        self.id
    }

    fn live(&self) -> MutexGuard<'_, Live> {
        // Nothing under these mutexes is left half-changed by a panic.
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn ended(&self) -> MutexGuard<'_, VecDeque<Arc<Record>>> {
        self.ended.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `rec` among the ended records (the oldest dropped past
    /// `ENDED_KEPT`).
    fn keep_ended(ended: &mut VecDeque<Arc<Record>>, rec: Arc<Record>) {
        if ended.len() == ENDED_KEPT {
            ended.pop_front();
        }
        ended.push_back(rec);
    }

    /// `token`'s live record, made now if it has none, through this
    /// thread's cache; the calling thread becomes its writer.
    fn record(&self, token: Token, now: u64) -> Arc<Record> {
        let (id, t) = (self.id(), token.get());
        let me = this_thread();
        let hit = RECENT
            .try_with(|r| {
                let mut r = r.records.borrow_mut();
                let i = r.iter().position(|(a, b, _)| *a == id && *b == t)?;
                if r[i].2.over.load(Relaxed) {
                    // Ended (maybe on another thread, the token may be back
                    // there) or closed by a restart.
                    r.remove(i);
                    return None;
                }
                if i != 0 {
                    let e = r.remove(i);
                    r.insert(0, e);
                }
                Some(r[0].2.clone())
            })
            .ok()
            .flatten();
        if let Some(rec) = hit {
            rec.writer.store(me, Relaxed);
            return rec;
        }
        let rec = {
            let mut live = self.live();
            match live.records.get(&t) {
                Some(rec) => rec.clone(),
                None => {
                    let rec = live.fresh(t, now, me);
                    live.records.insert(t, rec.clone());
                    rec
                }
            }
        };
        rec.writer.store(me, Relaxed);
        cache(id, &rec);
        rec
    }

    /// Runs `f` on `token`'s live record (made now if it has none). The
    /// common case — the record this thread used last — is a borrow of the
    /// thread's cache: no lock, no reference count touched.
    #[inline]
    fn with_record<R>(&self, token: Token, now: u64, f: impl FnOnce(&Record) -> R) -> R {
        let (id, t) = (self.id(), token.get());
        let mut f = Some(f);
        // `try_with`: a release may come while this thread's locals are
        // being destroyed (a host's guard in a thread-local); then the
        // shared map serves.
        let hit = RECENT
            .try_with(|r| {
                let recs = r.records.borrow();
                let (a, b, rec) = recs.first()?;
                if *a != id || *b != t || rec.over.load(Relaxed) {
                    return None;
                }
                // The token may have moved between threads: the latest
                // event's thread is the writer.
                rec.writer.store(r.thread(), Relaxed);
                f.take().map(|f| f(rec))
            })
            .ok()
            .flatten();
        match hit {
            Some(out) => out,
            None => {
                let rec = self.record(token, now);
                (f.take().expect("not called on a miss"))(&rec)
            }
        }
    }

    /// `token` started waiting for the lock.
    pub(crate) fn wait_start(&self, token: Token, now: u64) {
        self.with_record(token, now, |rec| {
            rec.enter(WAITING, now);
            bump(&rec.waits, 1);
        });
    }

    /// `token` took the lock.
    pub(crate) fn acquired(&self, token: Token, now: u64) {
        // Acquisitions are serialised by the lock: a load and a store.
        let switched = self.last.load(Relaxed) != token.get();
        self.last.store(token.get(), Relaxed);
        // Requests raised while nobody could be named are this holder's.
        let unclaimed = match self.unclaimed.load(Relaxed) {
            0 => 0,
            _ => self.unclaimed.swap(0, Relaxed),
        };
        self.with_record(token, now, |rec| {
            rec.enter(HOLDING, now);
            bump(&rec.acquisitions, 1);
            if switched {
                bump(&rec.switches_in, 1);
            }
            if unclaimed != 0 {
                rec.received.fetch_add(unclaimed, Relaxed);
            }
        });
    }

    /// `token` let go of the lock.
    pub(crate) fn released(&self, token: Token, how: Release, now: u64) {
        match how {
            Release::Voluntary => self.with_record(token, now, |rec| rec.enter(IN_CALL, now)),
            Release::Forced => self.with_record(token, now, |rec| {
                rec.enter(WAITING, now);
                bump(&rec.forced, 1);
            }),
            Release::Final => {
                let rec = self.record(token, now);
                rec.end_at(now);
                self.end(&rec);
            }
        }
    }

    /// A drop request was raised on the holder `asked`, by the waiter `by`
    /// (`None`: the monitor thread). Every request the lock counts is
    /// received by exactly one record, so the records add up to the lock's
    /// counter (the lock names the holder racily; see [`Asked`]):
    ///
    /// - [`Asked::Holder`]: its live record; else its latest ended one (it
    ///   finished a final release meanwhile); else one made now (its
    ///   acquisition has not been accounted yet).
    /// - [`Asked::LettingGo`]: its live or latest ended record, made by
    ///   nobody here: a thread in its final release may be gone by now.
    /// - Without either record, or [`Asked::Nobody`]: the next acquisition
    ///   receives it (see `unclaimed`).
    pub(crate) fn drop_requested(&self, asked: Asked, by: Option<Token>, now: u64) {
        let mut live = self.live();
        let (token, may_make) = match asked {
            Asked::Holder(t) => (t.get(), true),
            Asked::LettingGo(t) => (t.get(), false),
            Asked::Nobody => (0, false),
        };
        if let Some(rec) = live.records.get(&token) {
            rec.received.fetch_add(1, Relaxed);
        } else if let Some(rec) = self.ended().iter().rev().find(|r| r.token == token) {
            // Lock order: live, then ended (as `end` takes them).
            rec.received.fetch_add(1, Relaxed);
        } else if may_make {
            // Writer 0: the holder's next event makes it the writer.
            let rec = live.fresh(token, now, 0);
            rec.received.fetch_add(1, Relaxed);
            live.records.insert(token, rec);
        } else {
            self.unclaimed.fetch_add(1, Relaxed);
        }
        if let Some(rec) = by.and_then(|by| live.records.get(&by.get())) {
            rec.raised.fetch_add(1, Relaxed);
        }
    }

    /// Moves `rec`, which its writer just ended, from the live records to
    /// the ended ones — unless a restart moved it already.
    fn end(&self, rec: &Arc<Record>) {
        let mut live = self.live();
        if live.records.get(&rec.token).is_some_and(|r| Arc::ptr_eq(r, rec)) {
            live.records.remove(&rec.token);
            Self::keep_ended(&mut self.ended(), rec.clone());
        }
        drop(live);
        uncache(self.id(), rec);
    }

    /// Attaches the host's number to `token`'s live record.
    ///
    /// Only from the thread that made the record's latest event (its
    /// writer): another thread's [`GilError::ForeignThread`]. A record that
    /// carries another number belonged to an earlier thread whose end the
    /// lock did not see (the host dropped the token without a final
    /// release, then reused it): it is ended at the current state's start,
    /// which the new thread's record begins with (holding the lock, one
    /// acquisition, after an acquisition).
    ///
    /// No live record: if `holder` (accounting is on and `token` holds the
    /// lock, so the caller is its thread), one begins now, holding, with no
    /// acquisition counted (that happened before); else
    /// [`GilError::UnknownThread`].
    pub(crate) fn tag(&self, token: Token, tag: u64, holder: bool, now: u64) -> Result<(), GilError> {
        // The common case: the calling thread's own record, tagged already.
        let (id, t) = (self.id(), token.get());
        let tagged = RECENT
            .try_with(|r| {
                r.records.borrow().first().is_some_and(|(a, b, rec)| {
                    *a == id && *b == t && !rec.over.load(Relaxed) && rec.tag.load(Relaxed) == tag
                })
            })
            .unwrap_or(false);
        if tagged {
            return Ok(());
        }
        let me = this_thread();
        let mut live = self.live();
        let Some(rec) = live.records.get(&t).cloned() else {
            if !holder {
                return Err(GilError::UnknownThread);
            }
            let rec = live.fresh(t, now, me);
            rec.tag.store(tag, Relaxed);
            rec.state.store(HOLDING, Ordering::Release);
            live.records.insert(t, rec.clone());
            drop(live);
            cache(id, &rec);
            return Ok(());
        };
        let writer = rec.writer.load(Relaxed);
        if writer != me && writer != 0 && me != 0 {
            return Err(GilError::ForeignThread);
        }
        let old = rec.tag.load(Relaxed);
        if old == 0 || old == tag {
            rec.tag.store(tag, Relaxed);
            return Ok(());
        }
        // Split, under the records' mutex (no restart closes it meanwhile).
        let state = rec.state.load(Relaxed);
        let since = rec.since.load(Relaxed);
        let fresh = live.fresh(t, since, me);
        fresh.state.store(state, Ordering::Release);
        fresh.tag.store(tag, Relaxed);
        if state == HOLDING {
            // The acquisition that began this state is the new thread's.
            bump(&fresh.acquisitions, 1);
            rec.acquisitions
                .store(rec.acquisitions.load(Relaxed).saturating_sub(1), Relaxed);
        }
        rec.end_at(since);
        live.records.insert(t, fresh.clone());
        Self::keep_ended(&mut self.ended(), rec.clone());
        drop(live);
        uncache(id, &rec);
        cache(id, &fresh);
        Ok(())
    }

    /// When accounting is turned off: open records stop being charged time.
    pub(crate) fn stop(&self, now: u64) {
        self.off_ns.store(now.max(1), Relaxed);
    }

    /// The time snapshots charge up to.
    fn until(&self, now: u64) -> u64 {
        match self.off_ns.load(Relaxed) {
            0 => now,
            off => off.min(now),
        }
    }

    /// When accounting is turned on again: closes every live record where
    /// accounting went off (or where it began, if later: an event that
    /// raced with turning it off). Threads that ended while it was off left
    /// theirs open, and a later thread reusing such a token would continue
    /// it; threads still alive start a new record at their next event. The
    /// records' writers are not stopped: closing only marks the record
    /// (`closed_ns`, `over`), and a snapshot ends it no earlier than an
    /// event its writer was still making (see `Record::snapshot`).
    pub(crate) fn restart(&self, now: u64) {
        let at = self.until(now);
        self.off_ns.store(0, Relaxed);
        let mut live = self.live();
        let mut ended = self.ended();
        for (_, rec) in live.records.drain() {
            rec.closed_ns.store(at.max(rec.first_ns).max(1), Relaxed);
            rec.over.store(true, Relaxed);
            Self::keep_ended(&mut ended, rec);
        }
    }

    /// Names `token`'s live record, or if it has none, keeps the name for
    /// its next record (see [`PendingNames`]); makes no record.
    pub(crate) fn name(&self, token: Token, name: String) {
        let mut live = self.live();
        match live.records.get(&token.get()) {
            Some(rec) => *rec.name.lock().unwrap_or_else(PoisonError::into_inner) = Some(name),
            None => live.pending.insert(token.get(), name),
        }
    }

    /// How many records are live, and how many names wait for a record.
    #[cfg(test)]
    fn sizes(&self) -> (usize, usize) {
        let live = self.live();
        (live.records.len(), live.pending.len())
    }

    /// Names a record tagged `tag` and returns its token and when it
    /// began, or `None` if no record fits. With `since_ns` 0: the latest
    /// (a live one first). Otherwise the first that began at or after
    /// `since_ns`: the thread a host saw start then, even if its number has
    /// been reused by later threads since.
    pub(crate) fn name_tagged(&self, tag: u64, since_ns: u64, name: String) -> Option<(Token, u64)> {
        let live = self.live();
        let ended = self.ended();
        let tagged = || {
            live.records
                .values()
                .chain(ended.iter())
                .filter(|r| r.tag.load(Relaxed) == tag)
        };
        let rec = if since_ns == 0 {
            live.records
                .values()
                .filter(|r| r.tag.load(Relaxed) == tag)
                .max_by_key(|r| r.first_ns)
                .or_else(|| ended.iter().rev().find(|r| r.tag.load(Relaxed) == tag))?
        } else {
            tagged().filter(|r| r.first_ns >= since_ns).min_by_key(|r| r.first_ns)?
        };
        *rec.name.lock().unwrap_or_else(PoisonError::into_inner) = Some(name);
        Some((Token::new(rec.token)?, rec.first_ns))
    }

    /// `token`'s live record, or else its most recently ended one.
    pub(crate) fn thread(&self, token: Token, now: u64) -> Option<ThreadStats> {
        let until = self.until(now);
        let live = self.live();
        if let Some(rec) = live.records.get(&token.get()) {
            return Some(rec.snapshot(until));
        }
        let ended = self.ended();
        ended
            .iter()
            .rev()
            .find(|r| r.token == token.get())
            .map(|r| r.snapshot(until))
    }

    /// Every live record and every kept ended one, oldest first.
    pub(crate) fn all(&self, now: u64) -> Vec<ThreadStats> {
        let until = self.until(now);
        // Both at once: a record moving from one to the other is seen once.
        let live = self.live();
        let ended = self.ended();
        let mut out: Vec<ThreadStats> = ended.iter().map(|r| r.snapshot(until)).collect();
        out.extend(live.records.values().map(|r| r.snapshot(until)));
        out.sort_by_key(|s| (s.first_ns, s.token));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(n: usize) -> Token {
        Token::new(n).unwrap()
    }

    #[test]
    fn time_goes_to_the_state_it_was_spent_in() {
        let a = Accounts::new();
        a.wait_start(tok(1), 100);
        a.acquired(tok(1), 130); // waited 30
        a.released(tok(1), Release::Voluntary, 180); // held 50
        a.acquired(tok(1), 200); // in a call 20
        a.released(tok(1), Release::Forced, 210); // held 10
        a.acquired(tok(1), 215); // waited 5
        let s = a.thread(tok(1), 240).unwrap(); // holding 25 so far
        assert_eq!(s.wait_time, Duration::from_nanos(35));
        assert_eq!(s.hold_time, Duration::from_nanos(85));
        assert_eq!(s.call_time, Duration::from_nanos(20));
        assert_eq!((s.acquisitions, s.waits, s.forced_releases), (3, 1, 1));
        assert_eq!(s.switches_in, 1, "only the first acquisition followed another thread");
        assert!(s.alive && s.ended_ns.is_none());
        assert_eq!(s.first_ns, 100);
    }

    #[test]
    fn switches_in_count_acquisitions_after_another_thread() {
        let a = Accounts::new();
        for (t, at) in [(1, 10), (1, 20), (2, 30), (1, 40), (2, 50), (2, 60)] {
            a.acquired(tok(t), at);
            a.released(tok(t), Release::Voluntary, at + 1);
        }
        assert_eq!(a.thread(tok(1), 70).unwrap().switches_in, 2);
        assert_eq!(a.thread(tok(2), 70).unwrap().switches_in, 2);
    }

    #[test]
    fn a_final_release_ends_the_record_and_a_returning_token_starts_anew() {
        let a = Accounts::new();
        assert_eq!(
            a.tag(tok(7), 42, false, 5),
            Err(GilError::UnknownThread),
            "no record yet"
        );
        a.acquired(tok(7), 10);
        assert_eq!(a.tag(tok(7), 42, true, 11), Ok(()));
        a.name(tok(7), "worker".into());
        a.released(tok(7), Release::Final, 20);
        let s = a.thread(tok(7), 100).unwrap();
        assert!(!s.alive);
        assert_eq!(s.ended_ns, Some(20));
        assert_eq!(s.hold_time, Duration::from_nanos(10), "no time after the end");
        assert_eq!((s.tag, s.name.as_deref()), (42, Some("worker")));
        // Back again: a new life, the old one still listed.
        a.acquired(tok(7), 200);
        let s = a.thread(tok(7), 210).unwrap();
        assert!(s.alive);
        assert_eq!((s.acquisitions, s.first_ns, s.tag), (1, 200, 0));
        let all = a.all(210);
        assert_eq!(all.len(), 2);
        assert!(!all[0].alive && all[1].alive);
    }

    #[test]
    fn a_tag_names_the_latest_record_that_has_it() {
        let a = Accounts::new();
        a.acquired(tok(1), 10);
        a.tag(tok(1), 5, true, 11).unwrap();
        a.released(tok(1), Release::Final, 20);
        a.acquired(tok(2), 30); // the ident 5 reused by a later thread
        a.tag(tok(2), 5, true, 31).unwrap();
        assert_eq!(a.name_tagged(5, 0, "later".into()), Some((tok(2), 30)));
        assert_eq!(a.thread(tok(2), 40).unwrap().name.as_deref(), Some("later"));
        assert_eq!(a.thread(tok(1), 40).unwrap().name, None);
        assert_eq!(a.name_tagged(6, 0, "nobody".into()), None);
        // Seen starting at 5: the first life with the tag after that, not
        // the later thread that reused the number.
        assert_eq!(a.name_tagged(5, 5, "first".into()), Some((tok(1), 10)));
        assert_eq!(a.thread(tok(1), 40).unwrap().name.as_deref(), Some("first"));
        assert_eq!(a.name_tagged(5, 31, "none yet".into()), None);
        a.released(tok(2), Release::Final, 50);
        // Both ended: the most recently ended one.
        assert_eq!(a.name_tagged(5, 0, "again".into()), Some((tok(2), 30)));
    }

    #[test]
    fn another_tag_on_an_open_record_starts_a_new_thread() {
        let a = Accounts::new();
        a.acquired(tok(1), 10);
        assert_eq!(a.tag(tok(1), 5, true, 11), Ok(()));
        a.released(tok(1), Release::Voluntary, 20); // then dropped unseen
        a.acquired(tok(1), 100); // a new thread with the same token
        assert_eq!(a.tag(tok(1), 6, true, 101), Ok(()));
        let all = a.all(150);
        assert_eq!(all.len(), 2);
        let (old, new) = (&all[0], &all[1]);
        assert_eq!(
            (old.tag, old.alive, old.ended_ns, old.acquisitions),
            (5, false, Some(100), 1)
        );
        assert_eq!(old.call_time, Duration::from_nanos(80));
        assert_eq!((new.tag, new.alive, new.first_ns, new.acquisitions), (6, true, 100, 1));
        assert_eq!(new.hold_time, Duration::from_nanos(50));
        // The same tag again changes nothing.
        assert_eq!(a.tag(tok(1), 6, true, 140), Ok(()));
        assert_eq!(a.all(150).len(), 2);
    }

    #[test]
    fn off_no_time_is_charged_and_a_restart_ends_the_open_records() {
        let a = Accounts::new();
        a.acquired(tok(1), 10); // its final release went unseen
        a.stop(50);
        assert_eq!(a.thread(tok(1), 1000).unwrap().hold_time, Duration::from_nanos(40));
        a.restart(60);
        let s = a.thread(tok(1), 1000).unwrap();
        assert!(!s.alive);
        assert_eq!((s.ended_ns, s.hold_time), (Some(50), Duration::from_nanos(40)));
        a.acquired(tok(1), 70); // a new thread with the same token
        let s = a.thread(tok(1), 80).unwrap();
        assert_eq!((s.first_ns, s.acquisitions, s.alive), (70, 1, true));
    }

    #[test]
    fn drop_requests_are_counted_on_both_sides() {
        let a = Accounts::new();
        a.acquired(tok(1), 10);
        a.wait_start(tok(2), 11);
        a.drop_requested(Asked::Holder(tok(1)), Some(tok(2)), 12);
        a.drop_requested(Asked::Holder(tok(1)), None, 13); // the monitor asked
        assert_eq!(a.thread(tok(1), 20).unwrap().drop_requests_received, 2);
        assert_eq!(a.thread(tok(2), 20).unwrap().drop_requests_raised, 1);
    }

    #[test]
    fn a_request_on_a_holder_in_its_final_release_counts_on_its_last_record() {
        // The final release clears the holder's name, then ends its record,
        // before it lets go of the lock word; a waiter that saw the word
        // still held asks it in between.
        let a = Accounts::new();
        a.acquired(tok(1), 10);
        a.wait_start(tok(2), 11);
        a.drop_requested(Asked::LettingGo(tok(1)), Some(tok(2)), 15);
        a.released(tok(1), Release::Final, 20);
        // Its record ended; once by the last taker, once named as the
        // holder just before it let go.
        a.drop_requested(Asked::LettingGo(tok(1)), Some(tok(2)), 21);
        a.drop_requested(Asked::Holder(tok(1)), Some(tok(2)), 22);
        assert_eq!(a.thread(tok(1), 30).unwrap().drop_requests_received, 3);
        assert_eq!(a.thread(tok(2), 30).unwrap().drop_requests_raised, 3);
        assert_eq!(a.all(30).iter().filter(|s| s.alive).count(), 1, "no record made for 1");
    }

    #[test]
    fn a_request_before_the_holders_first_record_makes_it() {
        // The holder won the lock word; its acquisition is not accounted yet.
        let a = Accounts::new();
        a.wait_start(tok(2), 11);
        a.drop_requested(Asked::Holder(tok(1)), Some(tok(2)), 12);
        a.acquired(tok(1), 10);
        let s = a.thread(tok(1), 20).unwrap();
        assert_eq!((s.drop_requests_received, s.acquisitions), (1, 1));
        assert!(s.alive);
        assert_eq!(a.all(20).len(), 2, "one record per token");
    }

    #[test]
    fn a_request_no_record_can_take_is_the_next_holders() {
        let a = Accounts::new();
        a.wait_start(tok(2), 11);
        // No acquisition observed yet; then a thread letting go whose
        // record is gone.
        a.drop_requested(Asked::Nobody, Some(tok(2)), 12);
        a.drop_requested(Asked::LettingGo(tok(3)), Some(tok(2)), 12);
        assert!(a.thread(tok(3), 12).is_none(), "made no record");
        a.acquired(tok(1), 13);
        a.acquired(tok(2), 14);
        assert_eq!(a.thread(tok(1), 20).unwrap().drop_requests_received, 2);
        assert_eq!(a.thread(tok(2), 20).unwrap().drop_requests_received, 0);
    }

    #[test]
    fn only_the_last_ended_records_are_kept() {
        let a = Accounts::new();
        for t in 1..=ENDED_KEPT + 5 {
            a.acquired(tok(t), t as u64);
            a.released(tok(t), Release::Final, t as u64);
        }
        let all = a.all(u64::MAX);
        assert_eq!(all.len(), ENDED_KEPT);
        assert_eq!(all[0].token, tok(6));
        assert!(a.thread(tok(5), 0).is_none());
    }

    #[test]
    fn records_are_per_lock() {
        let (a, b) = (Accounts::new(), Accounts::new());
        a.acquired(tok(1), 10);
        b.acquired(tok(1), 10);
        b.acquired(tok(1), 20);
        assert_eq!(a.thread(tok(1), 30).unwrap().acquisitions, 1);
        assert_eq!(b.thread(tok(1), 30).unwrap().acquisitions, 2);
    }

    #[test]
    fn a_name_makes_no_record_and_waits_for_the_next_one() {
        let a = Accounts::new();
        a.name(tok(1), "early".into());
        a.name(tok(1), "renamed".into()); // replaces
        assert!(a.thread(tok(1), 10).is_none());
        assert!(a.all(10).is_empty());
        assert_eq!(a.sizes(), (0, 1));
        a.acquired(tok(1), 20);
        let s = a.thread(tok(1), 30).unwrap();
        assert_eq!((s.name.as_deref(), s.first_ns), (Some("renamed"), 20));
        assert_eq!(a.sizes(), (1, 0), "the name went to the record");
        // A live record is named directly.
        a.name(tok(1), "later".into());
        assert_eq!(a.thread(tok(1), 30).unwrap().name.as_deref(), Some("later"));
        assert_eq!(a.sizes(), (1, 0));
    }

    #[test]
    fn names_for_tokens_without_records_are_bounded() {
        let a = Accounts::new();
        a.name(tok(1), "first".into());
        for t in 2..1_000_002 {
            a.name(tok(t), format!("t{t}"));
            if t % 1024 == 0 {
                a.name(tok(3), "renamed often".into());
            }
        }
        let (live, pending) = a.sizes();
        assert_eq!(live, 0, "names make no records");
        assert!(pending <= PENDING_NAMES_KEPT, "{pending} names kept");
        {
            let live = a.live();
            assert!(live.pending.order.len() <= 2 * PENDING_NAMES_KEPT + 1);
        }
        assert!(a.all(0).is_empty());
        // The oldest went first; the newest waits for its record.
        a.acquired(tok(1), 10);
        a.acquired(tok(1_000_001), 20);
        assert_eq!(a.thread(tok(1), 30).unwrap().name, None);
        assert_eq!(a.thread(tok(1_000_001), 30).unwrap().name.as_deref(), Some("t1000001"));
    }

    #[test]
    fn a_restart_never_ends_a_record_before_it_began() {
        let a = Accounts::new();
        a.acquired(tok(1), 10);
        a.stop(50);
        // An event that raced with turning accounting off: its record
        // begins after the off time.
        a.acquired(tok(2), 70);
        a.restart(80);
        let s1 = a.thread(tok(1), 100).unwrap();
        assert_eq!(
            (s1.alive, s1.ended_ns, s1.hold_time),
            (false, Some(50), Duration::from_nanos(40))
        );
        let s2 = a.thread(tok(2), 100).unwrap();
        assert!(!s2.alive);
        assert!(s2.ended_ns.is_some_and(|e| e >= s2.first_ns), "{s2:?}");
        assert_eq!(s2.hold_time, Duration::ZERO, "no time while off");
    }

    #[test]
    fn a_clock_reading_older_than_the_last_event_charges_nothing_twice() {
        let a = Accounts::new();
        a.acquired(tok(1), 100);
        // Read before the acquisition's, reported after it.
        a.released(tok(1), Release::Voluntary, 90);
        let s = a.thread(tok(1), 150).unwrap();
        assert_eq!((s.hold_time, s.call_time), (Duration::ZERO, Duration::from_nanos(50)));
        a.released(tok(1), Release::Final, 95);
        let s = a.thread(tok(1), 200).unwrap();
        assert_eq!(s.ended_ns, Some(100));
        assert!(s.wait_time + s.hold_time + s.call_time <= Duration::from_nanos(100 - s.first_ns));
    }

    #[test]
    fn a_tag_from_another_thread_is_refused() {
        let a = Accounts::new();
        a.acquired(tok(1), 10);
        a.tag(tok(1), 5, true, 11).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                assert_eq!(a.tag(tok(1), 6, false, 12), Err(GilError::ForeignThread));
                assert_eq!(a.tag(tok(1), 5, false, 12), Err(GilError::ForeignThread));
                assert_eq!(a.tag(tok(2), 6, false, 12), Err(GilError::UnknownThread));
            });
        });
        let all = a.all(20);
        assert_eq!(all.len(), 1, "not split");
        assert_eq!((all[0].tag, all[0].alive), (5, true));
        // Its thread's next event moves the record: then only that thread
        // may tag it.
        std::thread::scope(|s| {
            s.spawn(|| {
                a.released(tok(1), Release::Voluntary, 30);
                a.acquired(tok(1), 40);
                assert_eq!(a.tag(tok(1), 7, false, 41), Ok(()), "a new thread on the token");
            });
        });
        assert_eq!(a.tag(tok(1), 8, false, 42), Err(GilError::ForeignThread));
        assert_eq!(a.all(50).len(), 2);
    }

    #[test]
    fn the_holder_without_a_record_begins_one_by_tagging() {
        let a = Accounts::new();
        assert_eq!(a.tag(tok(1), 9, false, 100), Err(GilError::UnknownThread));
        assert_eq!(a.tag(tok(1), 9, true, 100), Ok(()));
        let s = a.thread(tok(1), 150).unwrap();
        assert_eq!((s.alive, s.first_ns, s.tag, s.acquisitions), (true, 100, 9, 0));
        assert_eq!(s.hold_time, Duration::from_nanos(50));
        a.released(tok(1), Release::Voluntary, 160);
        a.acquired(tok(1), 170);
        let s = a.thread(tok(1), 170).unwrap();
        assert_eq!(
            (s.hold_time, s.call_time, s.acquisitions),
            (Duration::from_nanos(60), Duration::from_nanos(10), 1)
        );
        assert_eq!(a.all(170).len(), 1);
    }
}
