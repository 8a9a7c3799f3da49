//! Traces: who held the lock when, as a picture.
//!
//! A [`Tracer`] is an event hook that records a lock's [`Event`]s into a
//! bounded buffer: either the first events, stopping when it is full
//! ([`Tracer::new`]), or the last ones, overwriting the oldest
//! ([`Tracer::new_ring`]: run it all along, finish it when something
//! interesting happened). [`Tracer::finish`] turns the recording into a [`Trace`],
//! which rebuilds each thread's timeline ([`Trace::rows`]) — *running*
//! (holding the lock), *waiting* for it, or *in a system call* (released
//! voluntarily) — and writes it as Chrome trace-event JSON (opens in
//! Perfetto or `chrome://tracing`; flow arrows join each drop request to the
//! forced switch it caused, and a `waiting threads` counter track shows the
//! queue) or as an SVG timeline, one row per thread with drop requests
//! marked, like the classic GIL visualisations. [`Trace::summaries`] totals
//! each row for a report ([`Trace::write_summary_table`] prints them).
//!
//! ```
//! use gil_core::trace::Tracer;
//! use gil_core::{Gil, GilConfig, ReleaseReason, Token};
//!
//! let gil = Gil::new(GilConfig::new())?;
//! let tracer = Tracer::new(Tracer::DEFAULT_MAX_EVENTS);
//! gil.set_event_hook(Some(tracer.hook())).expect("not inside a hook");
//! let me = Token::new(1).unwrap();
//! tracer.name_thread(me, "main");
//! gil.acquire(me)?;
//! gil.release(me, ReleaseReason::Final)?;
//! gil.set_event_hook(None).expect("not inside a hook");
//! let trace = tracer.finish();
//! assert_eq!(trace.rows()[0].name, "main");
//! let mut svg = Vec::new();
//! trace.write_svg(&mut svg).unwrap();
//! # Ok::<(), gil_core::GilError>(())
//! ```

mod chrome;
mod file;
mod summary;
mod svg;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

use crate::events::{now_ns, Event, EventHook, EventKind};
pub use crate::options::TraceFormat;
use crate::reason::ReleaseReason;
use crate::Token;
pub use summary::RowSummary;

/// Records the events of one lock (install [`Tracer::hook`] on it), up to a
/// bound: the first events ([`Tracer::new`]) or the last ones
/// ([`Tracer::new_ring`]). (Events carry no lock: one tracer on two locks
/// would mix their threads' rows.)
pub struct Tracer {
    start_ns: u64,
    max_events: usize,
    ring: bool,
    buf: Mutex<Recording>,
}

#[derive(Default)]
struct Recording {
    /// A deque so that a ring overwrites its oldest event in O(1).
    events: VecDeque<Event>,
    /// Events that did not fit (the newest, or in a ring the oldest).
    dropped: u64,
    /// When the first event that did not fit happened (not in a ring).
    truncated_at_ns: Option<u64>,
    /// In a ring: the latest time of an overwritten event.
    overwritten_until_ns: Option<u64>,
    /// Names given, each token's in time order (the order they apply in).
    names: HashMap<Token, Vec<(u64, String)>>,
    /// How many names `names` holds: at most [`Tracer::names_bound`].
    name_count: usize,
    title: Option<String>,
}

impl Tracer {
    /// A buffer bound that suits most uses: 1 Mi events, 32 MiB.
    pub const DEFAULT_MAX_EVENTS: usize = 1 << 20;

    /// A tracer that keeps the first `max_events` events (at least one) and
    /// stops when it is full: the trace then ends at the first lost event.
    /// The trace starts now.
    pub fn new(max_events: usize) -> Arc<Tracer> {
        Tracer::with_mode(max_events, false)
    }

    /// A tracer that keeps the last `max_events` events (at least one),
    /// overwriting the oldest when it is full: the trace ends when it is
    /// finished and starts at its oldest kept event (or now, if none was
    /// overwritten). Recording stays O(1) per event.
    pub fn new_ring(max_events: usize) -> Arc<Tracer> {
        Tracer::with_mode(max_events, true)
    }

    fn with_mode(max_events: usize, ring: bool) -> Arc<Tracer> {
        Arc::new(Tracer {
            start_ns: now_ns(),
            max_events: max_events.max(1),
            ring,
            buf: Mutex::new(Recording::default()),
        })
    }

    /// Whether this tracer keeps the last events ([`Tracer::new_ring`])
    /// rather than the first.
    pub fn is_ring(&self) -> bool {
        self.ring
    }

    /// The most events it keeps.
    pub fn max_events(&self) -> usize {
        self.max_events
    }

    /// The hook to install with [`Gil::set_event_hook`](crate::Gil::set_event_hook).
    /// Each event costs a short critical section on the tracer's own mutex.
    pub fn hook(self: &Arc<Self>) -> EventHook {
        let me = Arc::clone(self);
        Arc::new(move |e: &Event| me.record(e))
    }

    /// Records one event (what the hook does).
    pub fn record(&self, event: &Event) {
        let mut buf = self.lock();
        if buf.events.len() < self.max_events {
            buf.events.push_back(*event);
        } else if self.ring {
            // The pop frees the slot the push takes: no reallocation.
            if let Some(old) = buf.events.pop_front() {
                let until = buf.overwritten_until_ns.map_or(old.time_ns, |t| t.max(old.time_ns));
                buf.overwritten_until_ns = Some(until);
            }
            buf.events.push_back(*event);
            buf.dropped += 1;
        } else {
            buf.dropped += 1;
            buf.truncated_at_ns.get_or_insert(event.time_ns);
        }
    }

    /// Names `token`'s row in the pictures (default: `thread N (0x...)`, N
    /// counting rows in order of appearance). A token that makes its final
    /// release and comes back has a row per life (hosts reuse thread-state
    /// addresses); the name goes to the life the token is in now, or to its
    /// first if it has not shown up yet.
    pub fn name_thread(&self, token: Token, name: impl Into<String>) {
        self.name_thread_at(token, now_ns(), name);
    }

    /// Names the life of `token` that had begun at `at_ns` (in
    /// [`now_ns`] nanoseconds), e.g. a thread that has ended since, whose
    /// token may be in a new life now: the latest life begun by then, or
    /// the first if none had. A later name for the same life wins.
    ///
    /// The names kept are bounded by the events kept ([`Tracer::names_kept`]
    /// stays at most twice [`Tracer::max_events`], however many tokens are
    /// named or renamed): past that, the tracer keeps the latest name of
    /// each life its kept events show, and for tokens none of them refers
    /// to (not seen yet, or whose events a ring overwrote) the latest name
    /// of each, the most recently given first, up to `max_events` in all.
    pub fn name_thread_at(&self, token: Token, at_ns: u64, name: impl Into<String>) {
        let mut rec = self.lock();
        let names = rec.names.entry(token).or_default();
        // Kept in time order: names are applied in that order.
        let i = names.partition_point(|(t, _)| *t <= at_ns);
        names.insert(i, (at_ns, name.into()));
        rec.name_count += 1;
        if rec.name_count > self.names_bound() {
            // Amortised O(1) a name: a compaction costs O(max_events) and
            // leaves room for at least max_events more.
            rec.compact_names(self.max_events);
        }
    }

    /// How many names the tracer holds (every call of
    /// [`Tracer::name_thread_at`] adds one, until it drops those the trace
    /// would not show: see there). At most twice [`Tracer::max_events`].
    pub fn names_kept(&self) -> usize {
        self.lock().name_count
    }

    /// The most names kept before the ones the trace would not show go.
    fn names_bound(&self) -> usize {
        self.max_events.saturating_mul(2)
    }

    /// A title for the pictures (e.g. the policy and the workload).
    pub fn set_title(&self, title: impl Into<String>) {
        self.lock().title = Some(title.into());
    }

    /// Events recorded so far.
    pub fn len(&self) -> usize {
        self.lock().events.len()
    }

    /// Whether nothing was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ends the trace now and returns what was recorded (and empties the
    /// tracer). Uninstall the hook first: events recorded later are not part
    /// of the returned trace.
    pub fn finish(&self) -> Trace {
        let end_ns = now_ns();
        let rec = std::mem::take(&mut *self.lock());
        let mut events = Vec::from(rec.events);
        // Events are stamped before they reach the buffer's mutex, so two
        // threads' events may be stored slightly out of order.
        events.sort_by_key(|e| e.time_ns);
        // A ring that overwrote events knows nothing of the time before its
        // oldest kept event; nor of the time before the latest overwritten
        // one, in the rare case that arrived out of order: every event after
        // `start_ns` must be in the trace, or rows would show a thread in a
        // state it had left.
        let start_ns = match rec.overwritten_until_ns {
            Some(lost) => events.first().map_or(lost, |e| e.time_ns.max(lost)).max(self.start_ns),
            None => self.start_ns,
        };
        Trace {
            start_ns,
            end_ns: rec.truncated_at_ns.unwrap_or(end_ns).max(start_ns),
            events,
            dropped: rec.dropped,
            ring: self.ring,
            names: rec.names,
            title: rec.title,
        }
    }

    /// In a child process after `fork()`, once the hook is uninstalled:
    /// drops this tracer, unless a thread of the parent was recording into
    /// it when the process forked. That thread is gone and the recording may
    /// be half-updated, so it is then leaked instead, never touched again.
    pub fn discard_after_fork(self: Arc<Self>) {
        if matches!(self.buf.try_lock(), Err(TryLockError::WouldBlock)) {
            std::mem::forget(self);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Recording> {
        // A panic while holding this mutex leaves a Vec in a valid state.
        self.buf.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Recording {
    /// Drops the names a trace finished now would not show (a later name
    /// given to the same life of a token replaces an earlier one), then, if
    /// more than `keep` are left, those of tokens no kept event refers to,
    /// the least recently given first. The lives of the tokens with kept
    /// events are never more than the events, at most `keep`.
    fn compact_names(&mut self, keep: usize) {
        let mut events: Vec<&Event> = self
            .events
            .iter()
            .filter(|e| self.names.contains_key(&e.token))
            .collect();
        // As `Tracer::finish` orders them (a stable sort).
        events.sort_by_key(|e| e.time_ns);
        // Each named token's lives, as `Trace::timeline` splits rows: a new
        // one at the token's first event, and at its first after a final
        // release. (The value: when each began, and whether the last ended.)
        // The names' hasher, not a new one: a thread's first `RandomState`
        // calls getrandom(), a cancellation point (see `crate::cancel`), and
        // naming is no place for one.
        let mut lives: HashMap<Token, (Vec<u64>, bool)> = HashMap::with_hasher(self.names.hasher().clone());
        for e in events {
            let (starts, ended) = lives.entry(e.token).or_insert((Vec::new(), true));
            if *ended {
                starts.push(e.time_ns);
                *ended = false;
            }
            if e.kind == EventKind::Released(ReleaseReason::Final) {
                *ended = true;
            }
        }
        let mut kept = 0;
        let mut unseen: Vec<(u64, Token)> = Vec::new();
        for (token, names) in &mut self.names {
            match lives.get(token) {
                Some((starts, _)) => {
                    // Names are in time order, so each life's are adjacent:
                    // keep the last of each run.
                    let life: Vec<usize> = names.iter().map(|(at, _)| life_at(starts, *at)).collect();
                    let mut i = 0;
                    names.retain(|_| {
                        i += 1;
                        life.get(i) != Some(&life[i - 1])
                    });
                    kept += names.len();
                }
                None => {
                    // All would go to the token's first life: the last wins.
                    names.drain(..names.len().saturating_sub(1));
                    if let Some((at, _)) = names.last() {
                        unseen.push((*at, *token));
                    }
                }
            }
        }
        let room = keep.saturating_sub(kept);
        if unseen.len() > room {
            unseen.sort_unstable_by(|a, b| b.cmp(a));
            for (_, token) in &unseen[room..] {
                self.names.remove(token);
            }
            unseen.truncate(room);
        }
        self.names.retain(|_, names| !names.is_empty());
        self.name_count = kept + unseen.len();
    }
}

/// Which of a token's lives, begun at `starts` (in order of their rows), a
/// name given at `at_ns` goes to: the latest begun by then, or the first if
/// none had.
fn life_at(starts: &[u64], at_ns: u64) -> usize {
    starts.iter().rposition(|&s| s <= at_ns).unwrap_or(0)
}

impl fmt::Debug for Tracer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracer")
            .field("start_ns", &self.start_ns)
            .field("max_events", &self.max_events)
            .field("ring", &self.ring)
            .field("events", &self.len())
            .finish()
    }
}

/// A finished recording.
#[derive(Debug, Clone)]
pub struct Trace {
    /// When the trace started and ended, in [`now_ns`] nanoseconds. If the
    /// buffer filled up, the trace ends at the first event that did not fit;
    /// if a ring overwrote events, it starts at the oldest one it kept.
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
    /// The events, in time order.
    pub events: Vec<Event>,
    /// Events lost because the buffer was full: the newest ones, or in a
    /// ring the oldest ones (overwritten).
    pub dropped: u64,
    /// Whether it was recorded by a ring ([`Tracer::new_ring`]).
    pub ring: bool,
    /// Names given with [`Tracer::name_thread`], with when (see there),
    /// each token's in time order; not those the tracer dropped because
    /// the trace would not show them ([`Tracer::name_thread_at`]).
    pub names: HashMap<Token, Vec<(u64, String)>>,
    /// The title given with [`Tracer::set_title`].
    pub title: Option<String>,
}

/// What a thread is doing, as far as the lock can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThreadState {
    /// Holds the lock.
    Running,
    /// Wants the lock: waiting to get it, or waiting in a forced release
    /// for someone else to take it.
    Waiting,
    /// Let go of it voluntarily (a blocking call) and has not asked again.
    Syscall,
}

impl ThreadState {
    /// Every state, in the order pictures stack them.
    pub const ALL: [ThreadState; 3] = [ThreadState::Running, ThreadState::Waiting, ThreadState::Syscall];

    /// A short, stable name: `running`, `waiting`, `syscall`.
    pub const fn name(self) -> &'static str {
        match self {
            ThreadState::Running => "running",
            ThreadState::Waiting => "waiting",
            ThreadState::Syscall => "syscall",
        }
    }
}

/// A stretch of time a thread spent in one state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// The state.
    pub state: ThreadState,
    /// From, in [`now_ns`] nanoseconds.
    pub start_ns: u64,
    /// To (exclusive).
    pub end_ns: u64,
}

/// Something that happened at one instant to a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MarkKind {
    /// The thread, holding the lock, was asked to drop it.
    DropRequested,
    /// The thread's forced release ended: someone else took the lock.
    ForcedSwitch,
    /// The thread's lazily released system call was taken over.
    LazyTakeover,
}

impl MarkKind {
    /// A short, stable name, the same as the event's.
    pub const fn name(self) -> &'static str {
        match self {
            MarkKind::DropRequested => EventKind::DropRequested.name(),
            MarkKind::ForcedSwitch => EventKind::ForcedSwitch.name(),
            MarkKind::LazyTakeover => EventKind::LazyTakeover.name(),
        }
    }
}

/// One instant on a thread's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// What happened.
    pub kind: MarkKind,
    /// When, in [`now_ns`] nanoseconds.
    pub time_ns: u64,
}

/// One thread's timeline. A token that makes its final release and shows up
/// again later (hosts reuse thread-state addresses) gets a new row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The thread.
    pub token: Token,
    /// Its name in the pictures.
    pub name: String,
    /// Its states, in time order, not overlapping. Time before its first
    /// event is left out unless that event says what it was doing (a
    /// release: it was running).
    pub spans: Vec<Span>,
    /// Its marks, in time order.
    pub marks: Vec<Mark>,
    /// When the thread made its final release (its life ended), if it did
    /// before the trace's end; the pictures mark the time after it.
    pub ended_ns: Option<u64>,
}

struct Building {
    row: Row,
    current: Option<(ThreadState, u64)>,
    /// When this life of the token began (its first event, or the trace's
    /// start if that event says it was running already).
    first_ns: u64,
    /// Whether an event other than a mark has been seen.
    seen: bool,
    ended: bool,
}

impl Building {
    /// Moves to `state` at `t` (`None`: the thread is gone).
    fn enter(&mut self, state: Option<ThreadState>, t: u64) {
        if state.is_some() && self.current.map(|(s, _)| s) == state {
            return; // e.g. a forced release, then a wait: one stretch of waiting
        }
        if let Some((s, from)) = self.current.take() {
            if t > from {
                self.row.spans.push(Span {
                    state: s,
                    start_ns: from,
                    end_ns: t,
                });
            }
        }
        self.current = state.map(|s| (s, t));
    }
}

/// The rows, and which row each event went to: what the writers need to
/// place things that join rows (flow arrows) or count events per row.
pub(super) struct Timeline {
    /// As [`Trace::rows`].
    pub(super) rows: Vec<Row>,
    /// For each of the trace's events, in order, the index of its row in
    /// `rows`; `None` for events after the trace's end.
    pub(super) event_rows: Vec<Option<usize>>,
}

impl Trace {
    /// Every thread's timeline, in order of first appearance.
    pub fn rows(&self) -> Vec<Row> {
        self.timeline().rows
    }

    /// The rows and each event's row: the one place that decides which life
    /// of a token an event belongs to.
    pub(super) fn timeline(&self) -> Timeline {
        let mut rows: Vec<Building> = Vec::new();
        let mut live: HashMap<Token, usize> = HashMap::new();
        // Each token's row that ended last with its final release.
        let mut ended: HashMap<Token, usize> = HashMap::new();
        let mut event_rows = vec![None; self.events.len()];
        for (n, e) in self.events.iter().enumerate() {
            if e.time_ns > self.end_ns {
                break;
            }
            let t = e.time_ns.max(self.start_ns);
            // Marks say nothing of the state (see below).
            let is_mark = matches!(
                e.kind,
                EventKind::DropRequested | EventKind::ForcedSwitch | EventKind::LazyTakeover
            );
            if is_mark && !live.contains_key(&e.token) {
                if let Some(&i) = ended.get(&e.token) {
                    // A drop request raised while the thread made its final
                    // release names it (nobody else held the lock): the
                    // mark belongs to the life that just ended, not to a
                    // new one.
                    event_rows[n] = Some(i);
                    let kind = match e.kind {
                        EventKind::ForcedSwitch => MarkKind::ForcedSwitch,
                        EventKind::LazyTakeover => MarkKind::LazyTakeover,
                        _ => MarkKind::DropRequested,
                    };
                    rows[i].row.marks.push(Mark { kind, time_ns: t });
                    continue;
                }
            }
            let i = *live.entry(e.token).or_insert_with(|| {
                rows.push(Building {
                    row: Row {
                        token: e.token,
                        name: format!("thread {} ({:#x})", rows.len() + 1, e.token.get()),
                        spans: Vec::new(),
                        marks: Vec::new(),
                        ended_ns: None,
                    },
                    current: None,
                    first_ns: t,
                    seen: false,
                    ended: false,
                });
                rows.len() - 1
            });
            event_rows[n] = Some(i);
            let b = &mut rows[i];
            // Marks say nothing of the state: a trace that starts between a
            // drop request and the forced release answering it (as a ring's
            // often does) still shows the holder running until the release.
            let first = !b.seen && !is_mark;
            b.seen |= !is_mark;
            // A first state event that only a running holder can cause: it
            // ran from the start. (A thread in a lazily released call
            // reclaims the lock, an acquisition, before it can release.)
            if first && matches!(e.kind, EventKind::Released(_)) {
                b.current = Some((ThreadState::Running, self.start_ns));
                b.first_ns = self.start_ns;
            }
            let mark = |kind| Mark { kind, time_ns: t };
            match e.kind {
                EventKind::WaitStart => b.enter(Some(ThreadState::Waiting), t),
                EventKind::Acquired => b.enter(Some(ThreadState::Running), t),
                EventKind::Released(ReleaseReason::Voluntary) => b.enter(Some(ThreadState::Syscall), t),
                EventKind::Released(ReleaseReason::Forced) => b.enter(Some(ThreadState::Waiting), t),
                EventKind::Released(ReleaseReason::Final) => {
                    b.enter(None, t);
                    b.ended = true;
                    b.row.ended_ns = Some(t);
                    live.remove(&e.token);
                    ended.insert(e.token, i);
                }
                EventKind::DropRequested => b.row.marks.push(mark(MarkKind::DropRequested)),
                EventKind::ForcedSwitch => b.row.marks.push(mark(MarkKind::ForcedSwitch)),
                EventKind::LazyTakeover => b.row.marks.push(mark(MarkKind::LazyTakeover)),
            }
        }
        for b in &mut rows {
            if !b.ended {
                b.enter(None, self.end_ns);
            }
        }
        // Names: each to the life of its token that had begun when it was
        // given (the latest such), or to the first life if none had.
        let mut lives: HashMap<Token, Vec<usize>> = HashMap::new();
        for (i, b) in rows.iter().enumerate() {
            lives.entry(b.row.token).or_default().push(i);
        }
        for (token, names) in &self.names {
            let Some(lives) = lives.get(token) else { continue };
            let starts: Vec<u64> = lives.iter().map(|&i| rows[i].first_ns).collect();
            for (at, name) in names {
                rows[lives[life_at(&starts, *at)]].row.name = name.clone();
            }
        }
        Timeline {
            rows: rows.into_iter().map(|b| b.row).collect(),
            event_rows,
        }
    }

    /// Writes the trace as Chrome trace-event JSON: one complete event
    /// (`"ph": "X"`) per span, one instant event per mark, thread names as
    /// metadata; a flow arrow (`"ph": "s"` to `"ph": "f"`, named
    /// `drop_request`) from each drop request to where the thread that took
    /// over acquired the lock, for requests answered by a forced switch; and
    /// a counter (`"ph": "C"`, `waiting threads`) of the threads waiting for
    /// the lock. Perfetto (ui.perfetto.dev) and `chrome://tracing` open it.
    pub fn write_chrome_json(&self, out: &mut dyn Write) -> io::Result<()> {
        chrome::write(self, out)
    }

    /// Writes the trace as a standalone SVG timeline: one row per thread,
    /// running / waiting / in a system call in three colours, drop
    /// requests, forced switches and lazy-release takeovers marked, a time
    /// axis in milliseconds. Stretches shorter than a pixel are drawn as the
    /// share of that pixel each state had, so the file stays small however
    /// long the trace is.
    pub fn write_svg(&self, out: &mut dyn Write) -> io::Result<()> {
        svg::write(self, out)
    }

    /// Writes the trace to `path` in `format` (see [`TraceFormat::from_path`]),
    /// whole: into a new file beside it (`.NAME.*.tmp`), renamed over `path`
    /// once complete, so `path` never holds part of a trace, also when
    /// another trace is written to it at the same time (the last renamed
    /// stays). On an error `path` is left as it was. A pending deferred
    /// `pthread_cancel` is not acted on inside (see [`crate::cancel`]).
    pub fn write_to(&self, path: &Path, format: TraceFormat) -> io::Result<()> {
        file::write_whole(path, |out| self.write_as(out, format))
    }

    fn write_as(&self, out: &mut dyn Write, format: TraceFormat) -> io::Result<()> {
        match format {
            TraceFormat::ChromeJson => self.write_chrome_json(out),
            TraceFormat::Svg => self.write_svg(out),
        }
    }

    /// Each row's totals, in the order and with the names of
    /// [`Trace::rows`]: time running, waiting and in calls (sums of its
    /// spans), acquisitions, drop requests and forced switches.
    pub fn summaries(&self) -> Vec<RowSummary> {
        summary::summaries(self)
    }

    /// Writes [`Trace::summaries`] as a plain-text table with aligned
    /// columns (thread, running ms, waiting ms, in calls ms, acquisitions,
    /// drop requests, forced switches), after a note line with the title,
    /// the trace's length, and the events lost, if any.
    pub fn write_summary_table(&self, out: &mut dyn Write) -> io::Result<()> {
        summary::write_table(self, out)
    }

    /// The trace's length in nanoseconds.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

/// A trace recorded into a file chosen when it starts: the path is checked
/// at once (a file is created and removed beside it; an existing file is
/// left as it is, and a missing one stays missing, until the trace is
/// written), so a path that cannot be written fails then, not when the
/// trace ends, and a process that dies before leaves no empty file. The
/// trace is written whole ([`Trace::write_to`]): two sessions on one path
/// never mix their traces.
/// What the C ABI's `gil_trace_start` and `gil_trace_stop` (and so
/// CPython's `_rustgil.trace_start`) run on.
#[derive(Debug)]
pub struct TraceSession {
    tracer: Arc<Tracer>,
    path: PathBuf,
    format: TraceFormat,
}

impl TraceSession {
    /// A recorder of at most `max_events` events (0: about a million) for
    /// `path`, whose name says the format ([`TraceFormat::from_path`]).
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`] if the name asks for no known format
    /// (nothing is created); the file's creation error otherwise, whose
    /// kind may be `InvalidInput` too (`EINVAL`, Windows' error 87 for a
    /// device name): [`TraceFormat::from_path`] first tells them apart.
    pub fn create(path: &Path, max_events: usize) -> io::Result<TraceSession> {
        TraceSession::open(path, max_events, false)
    }

    /// Like [`TraceSession::create`], but the recorder is a ring
    /// ([`Tracer::new_ring`]): it keeps the last `max_events` events (0:
    /// about a million) before [`TraceSession::finish`].
    ///
    /// # Errors
    /// As [`TraceSession::create`].
    pub fn create_ring(path: &Path, max_events: usize) -> io::Result<TraceSession> {
        TraceSession::open(path, max_events, true)
    }

    fn open(path: &Path, max_events: usize, ring: bool) -> io::Result<TraceSession> {
        let format = TraceFormat::from_path(path)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a trace file name ends in .json or .svg"))?;
        file::check_writable(path)?;
        let max = if max_events == 0 {
            Tracer::DEFAULT_MAX_EVENTS
        } else {
            max_events
        };
        Ok(TraceSession {
            tracer: Tracer::with_mode(max, ring),
            path: path.to_path_buf(),
            format,
        })
    }

    /// The recorder: install its [`Tracer::hook`], name threads with it.
    pub fn tracer(&self) -> &Arc<Tracer> {
        &self.tracer
    }

    /// Once the hook is uninstalled: writes the trace to the file, whole
    /// ([`Trace::write_to`]), and says how many events it holds.
    ///
    /// # Errors
    /// The write's error (the file is then left as it was).
    pub fn finish(self) -> io::Result<usize> {
        let trace = self.tracer.finish();
        trace.write_to(&self.path, self.format)?;
        Ok(trace.events.len())
    }

    /// In a child process after `fork()`, once the hook is uninstalled: the
    /// parent's trace is the parent's to write; see
    /// [`Tracer::discard_after_fork`]. The file stays as it is.
    pub fn discard_after_fork(self) {
        self.tracer.discard_after_fork();
    }
}

/// Escapes `s` for XML text and attribute values.
fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 forbids most control characters even escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('?'),
            '\u{fffe}' | '\u{ffff}' => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(n: usize) -> Token {
        Token::new(n).unwrap()
    }

    fn ev(kind: EventKind, token: usize, time_ns: u64) -> Event {
        Event {
            kind,
            token: tok(token),
            other: None,
            time_ns,
        }
    }

    fn trace(events: Vec<Event>, start_ns: u64, end_ns: u64) -> Trace {
        Trace {
            start_ns,
            end_ns,
            events,
            dropped: 0,
            ring: false,
            names: HashMap::new(),
            title: None,
        }
    }

    fn span(state: ThreadState, start_ns: u64, end_ns: u64) -> Span {
        Span {
            state,
            start_ns,
            end_ns,
        }
    }

    #[test]
    fn rows_follow_each_threads_states() {
        use EventKind::*;
        use ThreadState::*;
        let t = trace(
            vec![
                ev(Released(ReleaseReason::Voluntary), 1, 10), // held since the start
                ev(Acquired, 2, 11),
                ev(WaitStart, 1, 20),
                ev(DropRequested, 2, 25),
                ev(Released(ReleaseReason::Forced), 2, 26),
                ev(Acquired, 1, 27),
                ev(ForcedSwitch, 2, 28),
                ev(WaitStart, 2, 29),
            ],
            0,
            40,
        );
        let rows = t.rows();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0].spans,
            vec![
                span(Running, 0, 10),
                span(Syscall, 10, 20),
                span(Waiting, 20, 27),
                span(Running, 27, 40)
            ]
        );
        assert_eq!(rows[1].spans, vec![span(Running, 11, 26), span(Waiting, 26, 40)]);
        let kinds: Vec<_> = rows[1].marks.iter().map(|m| m.kind).collect();
        assert_eq!(kinds, vec![MarkKind::DropRequested, MarkKind::ForcedSwitch]);
        assert!(rows[0].marks.is_empty());
    }

    #[test]
    fn a_mark_before_the_first_release_does_not_hide_that_it_ran() {
        use EventKind::*;
        use ThreadState::*;
        let t = trace(
            vec![
                ev(DropRequested, 1, 5),
                ev(Released(ReleaseReason::Forced), 1, 6),
                ev(LazyTakeover, 2, 7),
                ev(Acquired, 2, 8),
            ],
            0,
            10,
        );
        let rows = t.rows();
        assert_eq!(rows[0].spans, vec![span(Running, 0, 6), span(Waiting, 6, 10)]);
        // A takeover says the thread was in a call, but not since when.
        assert_eq!(rows[1].spans, vec![span(Running, 8, 10)]);
    }

    #[test]
    fn a_drop_request_naming_a_thread_after_its_final_release_marks_that_life() {
        use EventKind::*;
        let t = trace(
            vec![
                ev(Acquired, 7, 1),
                ev(Released(ReleaseReason::Final), 7, 2),
                ev(DropRequested, 7, 3),
                ev(Acquired, 7, 5),
            ],
            0,
            9,
        );
        let rows = t.rows();
        assert_eq!(rows.len(), 2, "the request opens no life of its own");
        assert_eq!(rows[0].marks.len(), 1);
        assert_eq!(rows[0].marks[0].kind, MarkKind::DropRequested);
        assert_eq!(rows[1].spans, vec![span(ThreadState::Running, 5, 9)]);
        assert!(rows[1].marks.is_empty());
    }

    #[test]
    fn a_reused_token_gets_a_new_row_after_its_final_release() {
        use EventKind::*;
        let mut t = trace(
            vec![
                ev(Acquired, 7, 1),
                ev(Released(ReleaseReason::Final), 7, 2),
                ev(Acquired, 7, 5),
                ev(Acquired, 8, 6),
            ],
            0,
            9,
        );
        // Named while its second life ran: the name is that life's.
        t.names.insert(tok(7), vec![(7, "worker".into())]);
        // Named before it showed up: its first life.
        t.names.insert(tok(8), vec![(0, "early".into())]);
        let rows = t.rows();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].name, "thread 1 (0x7)");
        assert_eq!(rows[0].spans, vec![span(ThreadState::Running, 1, 2)]);
        assert_eq!(rows[1].name, "worker");
        assert_eq!(rows[1].spans, vec![span(ThreadState::Running, 5, 9)]);
        assert_eq!(rows[2].name, "early");
    }

    #[test]
    fn a_full_buffer_ends_the_trace_at_the_first_lost_event() {
        let tracer = Tracer::new(2);
        let base = tracer.start_ns;
        tracer.record(&ev(EventKind::Acquired, 1, base + 1));
        tracer.record(&ev(EventKind::Released(ReleaseReason::Voluntary), 1, base + 2));
        tracer.record(&ev(EventKind::Acquired, 1, base + 3));
        tracer.record(&ev(EventKind::Released(ReleaseReason::Voluntary), 1, base + 4));
        let t = tracer.finish();
        assert_eq!((t.events.len(), t.dropped, t.end_ns), (2, 2, base + 3));
        let rows = t.rows();
        assert_eq!(
            rows[0].spans.last(),
            Some(&span(ThreadState::Syscall, base + 2, base + 3))
        );
    }

    #[test]
    fn a_ring_keeps_the_last_events_and_starts_at_the_oldest_kept() {
        let tracer = Tracer::new_ring(4);
        assert!(tracer.is_ring());
        let base = tracer.start_ns;
        let events: Vec<Event> = (1..=10)
            .map(|i| {
                let kind = if i % 2 == 1 {
                    EventKind::Acquired
                } else {
                    EventKind::Released(ReleaseReason::Voluntary)
                };
                ev(kind, 1, base + i)
            })
            .collect();
        for e in &events {
            tracer.record(e);
        }
        assert_eq!(tracer.len(), 4);
        let before_finish = now_ns();
        let t = tracer.finish();
        assert_eq!(t.events, events[6..]);
        assert_eq!(t.dropped, 6);
        assert!(t.ring);
        assert_eq!(t.start_ns, base + 7);
        // It ends when finished, not at the first overwritten event.
        assert!(t.end_ns >= before_finish);
    }

    #[test]
    fn a_ring_that_overwrote_nothing_starts_with_the_tracer() {
        let tracer = Tracer::new_ring(4);
        let base = tracer.start_ns;
        tracer.record(&ev(EventKind::Acquired, 1, base + 5));
        let t = tracer.finish();
        assert_eq!((t.start_ns, t.dropped, t.events.len()), (base, 0, 1));
    }

    #[test]
    fn a_ring_trace_claims_no_time_before_its_oldest_kept_event() {
        use EventKind::*;
        let tracer = Tracer::new_ring(2);
        let base = tracer.start_ns;
        tracer.record(&ev(Acquired, 1, base + 1));
        tracer.record(&ev(Released(ReleaseReason::Voluntary), 1, base + 2));
        tracer.record(&ev(Acquired, 1, base + 3));
        tracer.record(&ev(WaitStart, 2, base + 4));
        tracer.record(&ev(Released(ReleaseReason::Voluntary), 1, base + 5));
        let t = tracer.finish();
        let rows = t.rows();
        assert_eq!(t.start_ns, base + 4);
        let row = |n| rows.iter().find(|r| r.token == tok(n)).unwrap();
        // Thread 1's first kept event is a release: it ran, but only from
        // the oldest kept event on, as far as the trace knows.
        assert_eq!(row(1).spans[0], span(ThreadState::Running, base + 4, base + 5));
        assert_eq!(row(2).spans, vec![span(ThreadState::Waiting, base + 4, t.end_ns)]);
    }

    #[test]
    fn a_ring_starts_after_an_overwritten_event_that_arrived_late() {
        use EventKind::*;
        let tracer = Tracer::new_ring(2);
        let base = tracer.start_ns;
        // Stamped at +5 but stored before an event stamped at +3.
        tracer.record(&ev(Acquired, 1, base + 5));
        tracer.record(&ev(Released(ReleaseReason::Voluntary), 2, base + 3));
        tracer.record(&ev(Acquired, 2, base + 6));
        let t = tracer.finish();
        assert_eq!((t.dropped, t.events.len()), (1, 2));
        assert_eq!(t.start_ns, base + 5);
    }

    #[test]
    fn sessions_record_into_a_ring_only_when_asked() {
        let dir = std::env::temp_dir().join(format!("gil-trace-ring-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ring = TraceSession::create_ring(&dir.join("r.json"), 3).unwrap();
        let plain = TraceSession::create(&dir.join("p.json"), 3).unwrap();
        assert!(ring.tracer().is_ring());
        assert_eq!(ring.tracer().max_events(), 3);
        assert!(!plain.tracer().is_ring());
        let base = ring.tracer().start_ns;
        for i in 1..=5 {
            ring.tracer().record(&ev(EventKind::Acquired, i, base + i as u64));
        }
        assert_eq!(ring.finish().unwrap(), 3);
        let json = std::fs::read_to_string(dir.join("r.json")).unwrap();
        assert!(json.contains("\"dropped_events\":2,\"ring\":true"), "{json}");
        drop(plain);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn formats_come_from_the_extension() {
        assert_eq!(
            TraceFormat::from_path(Path::new("a/b.JSON")),
            Some(TraceFormat::ChromeJson)
        );
        assert_eq!(TraceFormat::from_path(Path::new("t.svg")), Some(TraceFormat::Svg));
        assert_eq!(TraceFormat::from_path(Path::new("t.txt")), None);
        assert_eq!(TraceFormat::from_path(Path::new("svg")), None);
    }

    #[test]
    fn xml_escape_escapes_markup_and_control_characters() {
        assert_eq!(xml_escape("a<b>&\"c'\u{1}\u{fffe}"), "a&lt;b&gt;&amp;&quot;c&apos;??");
    }
}
