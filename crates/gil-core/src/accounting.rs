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
//! ([`crate::trace::ThreadState`]): *holding* the lock, *waiting* for it (to
//! get it, or in a forced release for someone else to take it), *in a call*
//! (released voluntarily, not yet asking again). Time is charged to the
//! state it was spent in; a snapshot includes the time in the current state
//! up to the snapshot. Time before the thread's first event after
//! accounting was turned on is not charged anywhere.
//!
//! A host tags a record with a number of its own (CPython: the thread's
//! ident) from the thread using the token, after an acquisition; a
//! different number on an open record means the token was reused by a new
//! thread whose predecessor ended unseen, and starts a new record.
//!
//! A token's record ends with its final release and stays readable (the
//! last [`ENDED_KEPT`] ended records are kept); a token that comes back
//! after a final release (hosts reuse thread-state memory) starts a new
//! record. Tokens are never dereferenced: a record outliving its host
//! thread is only numbers.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::Token;

/// How many ended records a lock keeps for reading, oldest dropped first.
pub const ENDED_KEPT: usize = 1024;

/// One thread's accounting, as read by [`Gil::thread_stats`](crate::Gil::thread_stats).
/// Each field is read without stopping the thread, so a snapshot of a busy
/// thread is not atomic as a whole.
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
    /// Whether the thread has not made its final release yet.
    pub alive: bool,
    /// When the record began (the token's first event after accounting was
    /// turned on, or after its previous life ended), in
    /// [`now_ns`](crate::now_ns) nanoseconds.
    pub first_ns: u64,
    /// When the final release ended it, if it did.
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

/// One token's life. The state, its start and the time and event counters
/// are written only by the thread using the token (single writer: a
/// load and a store each); `received` and `raised` may be bumped by other
/// threads and use read-modify-writes.
struct Record {
    token: usize,
    state: AtomicU8,
    since: AtomicU64,
    first_ns: u64,
    ended_ns: AtomicU64,
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
    fn new(token: usize, now: u64) -> Record {
        Record {
            token,
            state: AtomicU8::new(NONE),
            since: AtomicU64::new(now),
            first_ns: now,
            ended_ns: AtomicU64::new(0),
            ns: Default::default(),
            acquisitions: AtomicU64::new(0),
            switches_in: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            forced: AtomicU64::new(0),
            raised: AtomicU64::new(0),
            received: AtomicU64::new(0),
            tag: AtomicU64::new(0),
            name: Mutex::new(None),
        }
    }

    /// Moves to `state` at `now`, charging the time since the last move to
    /// the state left.
    fn enter(&self, state: u8, now: u64) {
        let old = self.state.load(Relaxed);
        let since = self.since.load(Relaxed);
        if old != NONE && old != ENDED {
            bump(&self.ns[old as usize], now.saturating_sub(since));
        }
        self.since.store(now, Relaxed);
        self.state.store(state, Relaxed);
    }

    fn snapshot(&self, now: u64) -> ThreadStats {
        let state = self.state.load(Relaxed);
        let since = self.since.load(Relaxed);
        let mut ns = [0u64; 4];
        for (i, n) in self.ns.iter().enumerate() {
            ns[i] = n.load(Relaxed);
        }
        if state != NONE && state != ENDED {
            ns[state as usize] += now.saturating_sub(since);
        }
        let ended = self.ended_ns.load(Relaxed);
        ThreadStats {
            token: Token::new(self.token).expect("records are made for tokens"),
            tag: self.tag.load(Relaxed),
            name: self.name.lock().unwrap_or_else(PoisonError::into_inner).clone(),
            alive: state != ENDED,
            first_ns: self.first_ns,
            ended_ns: (state == ENDED).then_some(ended),
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

/// The records of one lock.
pub(crate) struct Accounts {
    /// Unique in the process (an address could be reused by a later lock
    /// while threads still cache records of this one).
    id: usize,
    live: Mutex<HashMap<usize, Arc<Record>>>,
    ended: Mutex<VecDeque<Arc<Record>>>,
    /// The token of the last acquisition, for `switches_in` (acquisitions
    /// are serialised by the lock itself).
    last: AtomicUsize,
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

thread_local! {
    /// This thread's recently used records: (`Accounts::id`, token,
    /// record), most recent first.
    static RECENT: RefCell<Vec<(usize, usize, Arc<Record>)>> = const { RefCell::new(Vec::new()) };
}

impl Accounts {
    pub(crate) fn new() -> Accounts {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        Accounts {
            id: NEXT.fetch_add(1, Relaxed),
            live: Mutex::new(HashMap::new()),
            ended: Mutex::new(VecDeque::new()),
            last: AtomicUsize::new(0),
            off_ns: AtomicU64::new(0),
            next_retired: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    fn id(&self) -> usize {
        self.id
    }

    fn live(&self) -> MutexGuard<'_, HashMap<usize, Arc<Record>>> {
        // Nothing under these mutexes is left half-changed by a panic.
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn ended(&self) -> MutexGuard<'_, VecDeque<Arc<Record>>> {
        self.ended.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `token`'s live record, made now if it has none, through this
    /// thread's cache.
    fn record(&self, token: Token, now: u64) -> Arc<Record> {
        let (id, t) = (self.id(), token.get());
        let hit = RECENT
            .try_with(|r| {
                let mut r = r.borrow_mut();
                let i = r.iter().position(|(a, b, _)| *a == id && *b == t)?;
                if r[i].2.state.load(Relaxed) == ENDED {
                    // The token ended on another thread and may be back there.
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
            return rec;
        }
        let rec = self
            .live()
            .entry(t)
            .or_insert_with(|| Arc::new(Record::new(t, now)))
            .clone();
        let _ = RECENT.try_with(|r| {
            let mut r = r.borrow_mut();
            r.insert(0, (id, t, rec.clone()));
            r.truncate(CACHE);
        });
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
                let r = r.borrow();
                let (a, b, rec) = r.first()?;
                if *a != id || *b != t || rec.state.load(Relaxed) == ENDED {
                    return None;
                }
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
        self.with_record(token, now, |rec| {
            rec.enter(HOLDING, now);
            bump(&rec.acquisitions, 1);
            if switched {
                bump(&rec.switches_in, 1);
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
                rec.enter(ENDED, now);
                rec.ended_ns.store(now, Relaxed);
                self.end(&rec);
            }
        }
    }

    /// A drop request was raised on `holder`, by the waiter `by` (`None`:
    /// the monitor thread).
    pub(crate) fn drop_requested(&self, holder: Token, by: Option<Token>, now: u64) {
        self.live()
            .get(&holder.get())
            .map(|rec| rec.received.fetch_add(1, Relaxed));
        if let Some(by) = by {
            self.record(by, now).raised.fetch_add(1, Relaxed);
        }
    }

    /// Moves `rec` from the live records to the ended ones.
    fn end(&self, rec: &Arc<Record>) {
        {
            let mut live = self.live();
            if live.get(&rec.token).is_some_and(|r| Arc::ptr_eq(r, rec)) {
                live.remove(&rec.token);
            }
        }
        let mut ended = self.ended();
        if ended.len() == ENDED_KEPT {
            ended.pop_front();
        }
        ended.push_back(rec.clone());
        let _ = RECENT.try_with(|r| {
            r.borrow_mut()
                .retain(|(a, _, x)| *a != self.id() || !Arc::ptr_eq(x, rec))
        });
    }

    /// Attaches the host's number to `token`'s live record; `false` if it
    /// has none (no event of it since accounting was turned on). A record
    /// that carries another number belonged to an earlier thread whose end
    /// the lock did not see (the host dropped the token without a final
    /// release, then reused it): it is ended at the current state's start,
    /// which the new thread's record begins with (holding the lock, one
    /// acquisition, after an acquisition).
    pub(crate) fn tag(&self, token: Token, tag: u64) -> bool {
        // The common case: the calling thread's own record, tagged already.
        let (id, t) = (self.id(), token.get());
        let tagged = RECENT
            .try_with(|r| {
                r.borrow().first().is_some_and(|(a, b, rec)| {
                    *a == id && *b == t && rec.state.load(Relaxed) != ENDED && rec.tag.load(Relaxed) == tag
                })
            })
            .unwrap_or(false);
        if tagged {
            return true;
        }
        let Some(rec) = self.live().get(&token.get()).cloned() else {
            return false;
        };
        let old = rec.tag.load(Relaxed);
        if old == 0 || old == tag {
            rec.tag.store(tag, Relaxed);
            return true;
        }
        let state = rec.state.load(Relaxed);
        let since = rec.since.load(Relaxed);
        let fresh = Arc::new(Record::new(token.get(), since));
        fresh.state.store(state, Relaxed);
        fresh.tag.store(tag, Relaxed);
        if state == HOLDING {
            // The acquisition that began this state is the new thread's.
            bump(&fresh.acquisitions, 1);
            rec.acquisitions
                .store(rec.acquisitions.load(Relaxed).saturating_sub(1), Relaxed);
        }
        rec.enter(ENDED, since);
        rec.ended_ns.store(since, Relaxed);
        self.live().insert(token.get(), fresh);
        self.end(&rec);
        true
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

    /// When accounting is turned on again: ends every live record where
    /// accounting went off. Threads that ended while it was off left theirs
    /// open, and a later thread reusing such a token would continue it;
    /// threads still alive start a new record at their next event.
    pub(crate) fn restart(&self, now: u64) {
        let now = self.until(now);
        self.off_ns.store(0, Relaxed);
        let open: Vec<Arc<Record>> = self.live().drain().map(|(_, r)| r).collect();
        let mut ended = self.ended();
        for rec in open {
            rec.enter(ENDED, now);
            rec.ended_ns.store(now, Relaxed);
            if ended.len() == ENDED_KEPT {
                ended.pop_front();
            }
            ended.push_back(rec);
        }
    }

    /// Names `token`'s live record (made now if it has none).
    pub(crate) fn name(&self, token: Token, name: String, now: u64) {
        let rec = self.record(token, now);
        *rec.name.lock().unwrap_or_else(PoisonError::into_inner) = Some(name);
    }

    /// Names a record tagged `tag` and returns its token and when it
    /// began, or `None` if no record fits. With `since_ns` 0: the latest
    /// (a live one first). Otherwise the first that began at or after
    /// `since_ns`: the thread a host saw start then, even if its number has
    /// been reused by later threads since.
    pub(crate) fn name_tagged(&self, tag: u64, since_ns: u64, name: String) -> Option<(Token, u64)> {
        let live = self.live();
        let ended = self.ended();
        let tagged = || live.values().chain(ended.iter()).filter(|r| r.tag.load(Relaxed) == tag);
        let rec = if since_ns == 0 {
            live.values()
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
        let now = self.until(now);
        if let Some(rec) = self.live().get(&token.get()) {
            return Some(rec.snapshot(now));
        }
        self.ended()
            .iter()
            .rev()
            .find(|r| r.token == token.get())
            .map(|r| r.snapshot(now))
    }

    /// Every live record and every kept ended one, oldest first.
    pub(crate) fn all(&self, now: u64) -> Vec<ThreadStats> {
        let now = self.until(now);
        let mut out: Vec<ThreadStats> = self.ended().iter().map(|r| r.snapshot(now)).collect();
        out.extend(self.live().values().map(|r| r.snapshot(now)));
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
        assert!(!a.tag(tok(7), 42), "no record yet");
        a.acquired(tok(7), 10);
        assert!(a.tag(tok(7), 42));
        a.name(tok(7), "worker".into(), 12);
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
        a.tag(tok(1), 5);
        a.released(tok(1), Release::Final, 20);
        a.acquired(tok(2), 30); // the ident 5 reused by a later thread
        a.tag(tok(2), 5);
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
        assert!(a.tag(tok(1), 5));
        a.released(tok(1), Release::Voluntary, 20); // then dropped unseen
        a.acquired(tok(1), 100); // a new thread with the same token
        assert!(a.tag(tok(1), 6));
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
        assert!(a.tag(tok(1), 6));
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
        a.drop_requested(tok(1), Some(tok(2)), 12);
        a.drop_requested(tok(1), None, 13); // the monitor asked
        assert_eq!(a.thread(tok(1), 20).unwrap().drop_requests_received, 2);
        assert_eq!(a.thread(tok(2), 20).unwrap().drop_requests_raised, 1);
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
}
