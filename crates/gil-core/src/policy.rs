//! Every scheduling rule of the lock and its constants, as plain functions
//! of what the waiting room knows (times, classes, flags): who may take a
//! free lock, and who must go through the waiting room to take it; who is
//! woken; who asks the holder to drop at once, and when the monitor asks;
//! who watches a holder's quick calls instead of sleeping, and for how
//! long; which class a releaser becomes, and whether it waits for a switch;
//! when a CPU-class waiter is starving, and whose turn it is among the
//! CPU-class threads; and, in one function ([`due`]), what is due at a look
//! at the lock and when to look next. Every waiter and the monitor ask
//! these, so each rule is written once; the unit tests below state them one
//! by one.
//!
//! What the priority policy guarantees, rule by rule:
//!
//! - An I/O-class thread back from a call asks a CPU-class holder to drop
//!   at once ([`preempts`]) and goes before CPU-class waiters
//!   ([`may_take`], [`designee`]).
//! - The CPU-class thread it preempted gets the lock back before other
//!   CPU-class waiters: its turn ([`CpuTurn`]) goes on until another one
//!   has waited [`turn_length`] ([`TURN_INTERVALS`] intervals); then the
//!   next in order of arrival takes its turn. CPU-class threads thus share
//!   the lock among themselves in turns, in the I/O threads' time off it,
//!   and a preemption costs the other CPU-class threads nothing. With no
//!   I/O thread preempting, a holder is asked after one switch interval,
//!   as in CPython.
//! - Starvation bound: while I/O-class threads keep the lock busy, the
//!   CPU class as a whole waits at most [`starvation_bound`]
//!   ([`STARVATION_INTERVALS`] intervals, 20 ms) for a turn, then keeps the
//!   lock for a slice ([`slice`], a fifth of an interval): about 5 % of
//!   a busy lock (`docs/servers.md`).
//!
//! The rules of [`Policy::Priority`] come from the 2010 GIL-priority
//! proposal (see `class.rs` for how a thread's class is earned); the other
//! policies are CPython's: anyone may take a free lock, and only a whole
//! switch interval without a switch asks the holder to drop.

use std::time::{Duration, Instant};

use crate::class::ThreadClass;
use crate::{Policy, ReleaseReason};

/// After this many switch intervals without a turn for the CPU class, the
/// CPU-class waiter that has waited longest under [`Policy::Priority`] is
/// served before I/O-class ones (20 ms by default): the starvation bound.
/// With a slice of a fifth of an interval the CPU class keeps about 5 % of
/// a lock that I/O-class threads keep busy (`docs/servers.md`).
pub const STARVATION_INTERVALS: u64 = 4;

/// How many switch intervals a CPU-class thread's turn lasts once another
/// CPU-class thread waits for one, while I/O-class threads preempt it
/// (without them, the switch interval alone ends a holder's run, as in
/// CPython). Each change of turn wakes a thread that has slept through the
/// others' turns, and on the measured machine the scheduler then often
/// keeps the I/O thread or its peer waiting for a CPU for milliseconds;
/// with turns of one interval that made the I/O thread's p99 3.6 ms beside
/// two CPU threads, with four intervals 0.8 ms, the same work as separate
/// processes 1.8 ms (`docs/policies.md`, "CPU threads' turns").
pub const TURN_INTERVALS: u32 = 4;

/// How long a CPU-class thread's turn lasts once contested: see
/// [`TURN_INTERVALS`].
pub(crate) fn turn_length(interval: Duration) -> Duration {
    interval.saturating_mul(TURN_INTERVALS)
}

/// How long a CPU-class waiter watching an I/O-class holder ([`watches`])
/// leaves the lock free before taking it (within the spin limit): longer
/// than the calls that return at once (a 100-byte send or a poll that finds
/// data ready takes a few microseconds in Python), so that the I/O thread
/// takes it straight back instead of asking for it back
/// (`docs/policies.md`, "The spin's grace", has the measurements).
pub(crate) const SPIN_GRACE: Duration = Duration::from_micros(20);

/// How long an I/O-class thread back from a quick call may hold the lock
/// while a CPU-class waiter keeps watching ([`Watch`]): a longer hold is
/// the thread's own work between calls (Python code), not a step from one
/// call to the next (`docs/policies.md`, "The watch over quick calls", has
/// the measurements).
pub(crate) const WATCH_HOLD: Duration = Duration::from_micros(10);

/// How long an I/O-class waiter that has just asked a running CPU-class
/// holder to drop at once (a preemption, [`preempts`]) watches the lock
/// word before it sleeps, at least, whatever the spin limit
/// ([`ask_spin`]). The holder, running, answers between two units of its
/// work, within microseconds; asleep, the I/O thread would instead wait to
/// be woken, and a machine that halts an idle CPU (a virtual machine,
/// above all) takes tens of microseconds to do that, on every round trip
/// of an I/O thread beside a CPU thread. Once per preemption, this look
/// costs at most its length; longer spins for every waiter cost the
/// I/O thread beside two CPU threads, this one does not. Only the room's
/// one I/O-class waiter looks: with others waiting, the lock is not its
/// next, and a look would hold a CPU that they, their peers and a holder
/// the kernel has put aside need (`docs/policies.md`, "The preempting
/// look", has the measurements).
pub(crate) const PREEMPT_LOOK: Duration = Duration::from_micros(10);

/// How long a waiter that has just asked the holder to drop at once
/// watches the lock word for the release before sleeping, given the spin
/// limit (`spin`, `None` without one) and who waits (`census`, the asker
/// included): the spin limit, and for a preemption ([`preempts`]) by the
/// only I/O-class waiter at least [`PREEMPT_LOOK`]. The caller leaves out
/// every spin while the CPUs it may use are one or fewer.
pub(crate) fn ask_spin(spin: Option<Duration>, preemption: bool, census: Census) -> Option<Duration> {
    if preemption && census.io <= 1 {
        Some(spin.map_or(PREEMPT_LOOK, |limit| limit.max(PREEMPT_LOOK)))
    } else {
        spin
    }
}

/// How many threads wait, by class: the waiting room's census, kept under
/// its mutex.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Census {
    /// I/O-class waiters (every waiter, unless the policy is priority).
    io: usize,
    /// CPU-class waiters.
    cpu: usize,
    /// CPU-class waiters past the starvation bound.
    starving: usize,
}

impl Census {
    pub(crate) fn waiters(self) -> usize {
        self.io + self.cpu
    }

    /// CPU-class waiters.
    pub(crate) fn cpu(self) -> usize {
        self.cpu
    }

    pub(crate) fn join(&mut self, class: ThreadClass) {
        match class {
            ThreadClass::Io => self.io += 1,
            ThreadClass::Cpu => self.cpu += 1,
        }
    }

    /// One of the waiters has passed the starvation bound.
    pub(crate) fn starve(&mut self) {
        self.starving += 1;
    }

    pub(crate) fn leave(&mut self, class: ThreadClass, starving: bool) {
        match class {
            ThreadClass::Io => self.io -= 1,
            ThreadClass::Cpu => self.cpu -= 1,
        }
        if starving {
            self.starving -= 1;
        }
    }
}

/// The class a thread has after releasing for `reason`, if the policy keeps
/// classes: forced out, it is CPU-bound; letting go on its own, I/O-bound.
#[inline]
pub(crate) fn class_after(policy: Policy, reason: ReleaseReason) -> Option<ThreadClass> {
    match policy {
        Policy::Priority => Some(match reason {
            ReleaseReason::Forced => ThreadClass::Cpu,
            ReleaseReason::Voluntary | ReleaseReason::Final => ThreadClass::Io,
        }),
        _ => None,
    }
}

/// Whether a CPU-class thread never takes the lock on the uncontended
/// paths, under `policy` with a spin limit (`spin`): with priority and
/// spinning. Such a thread goes through the waiting room, which leaves a
/// lock an I/O-class thread let go of free for [`SPIN_GRACE`] first
/// ([`Watch`]). Taken at once, the lock would go to it whenever it came
/// back during one of the I/O thread's short calls (a send, a read of data
/// already there), and the I/O thread would preempt it right after: two
/// hand-offs per call. (Where spinning cannot help now, the room gives no
/// grace, and the detour costs such a thread only the room's mutex.)
///
/// A flag for the CPU class rather than a class to compare with: the
/// uncontended path tests the thread's class first, which a lock without
/// classes knows at compile time, and the test vanishes there.
pub(crate) fn cpu_through_room(policy: Policy, spin: bool) -> bool {
    policy == Policy::Priority && spin
}

/// Why the pending drop request was raised, as far as it says something
/// about the holder (priority policy).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Asked {
    /// The holder ran a whole switch interval while someone waited.
    pub(crate) interval: bool,
    /// A starving waiter asked: about the holder, that says nothing.
    pub(crate) starving: bool,
}

/// The class a releaser has after answering a drop request (`requested`)
/// raised for `asked`, where it differs from [`class_after`]'s; `held_as`
/// is the class it held the lock as.
///
/// - It kept the lock a whole interval while someone waited and had to be
///   asked: CPU-bound, even if it lets go around a call now. Left
///   I/O-class, a thread whose calls return at once would preempt its
///   successor as soon as it is back, again and again.
/// - It was forced out only because a CPU-class waiter starved: it keeps
///   the class it had. Made CPU-class, a thread that only ever runs short
///   stretches between calls (a request handler in a busy server) would
///   wait behind every I/O-class thread until it starved in turn and forced
///   out the next handler: a chain of starvation-bound waits, the
///   many-connection tail.
///
/// A request raised to preempt a CPU-class holder leaves [`class_after`]'s
/// verdict: the holder was CPU-class already.
pub(crate) fn class_after_request(
    policy: Policy,
    reason: ReleaseReason,
    requested: bool,
    asked: Asked,
    held_as: ThreadClass,
) -> Option<ThreadClass> {
    if policy != Policy::Priority || !requested || reason == ReleaseReason::Final {
        return None;
    }
    if asked.interval {
        Some(ThreadClass::Cpu)
    } else if asked.starving && reason == ReleaseReason::Forced {
        Some(held_as)
    } else {
        None
    }
}

/// Whether a releaser with waiters waits until another thread has taken
/// the lock (CPython's forced switching, `FORCE_SWITCHING`): after a
/// forced release always, after a voluntary one that answers a drop
/// request (`requested`) too, so that it cannot win the lock straight
/// back; after a final release never.
pub(crate) fn waits_for_switch(reason: ReleaseReason, requested: bool) -> bool {
    match reason {
        ReleaseReason::Final => false,
        ReleaseReason::Forced => true,
        ReleaseReason::Voluntary => requested,
    }
}

/// Whether a lazy voluntary release is made a real one because of who
/// waits, or of how the lock's calls went lately:
///
/// - under the priority policy, an I/O-class waiter. It wants the lock for
///   a short stretch too; keeping the lock reserved for the caller's call
///   would make it wait for the threshold and a takeover, and with many
///   such threads (a thread-per-connection server) serialise them all
///   behind takeovers. With only CPU-class waiters (the case lazy release
///   is for) the call keeps its reservation. Without classes (the classic
///   policy) the lock cannot tell the two apart;
/// - under any policy, `after_takeover`: a call was taken over a short
///   while ago ([`Handovers`]). This lock's calls outlast the threshold, so a
///   reservation only delays the waiter by the threshold, and the
///   takeover then wakes it just when the call's own thread is being woken
///   by its reply: a kernel trace (2 CPUs, `priority-lazy-monitor`, one
///   I/O thread beside two CPU threads) showed both wake-ups placed on the
///   same idle CPU, the CPU thread run first and the I/O thread queued
///   behind it for 2.5 ms while the other CPU idled.
pub(crate) fn lazy_hands_over(policy: Policy, census: Census, after_takeover: bool) -> bool {
    after_takeover || (policy == Policy::Priority && census.io > 0)
}

/// The lazy-release threshold a look at the lock applies (`threshold`: the
/// lock's, if lazy release is on): none, a takeover at the first look, in
/// a stretch of hand-overs after a takeover (`after_takeover`, see
/// [`Handovers`]). There the lock's calls outlast the threshold, and a
/// thread that finds one in a call without having waited for it (it came
/// after the call began, or was on its way back from a forced switch) only
/// waits out the threshold, to be woken by the takeover just when the
/// call's own thread is woken by its reply: the collision the hand-overs
/// avoid for waiters already there (on a 2-vCPU machine,
/// `priority-lazy-monitor` beside one CPU thread served 0.45-0.62x the
/// round trips of the same work as processes, its p99 4 ms). Such a
/// takeover does not restart the stretch ([`Handovers::taken_over`] is for
/// the calls that outlasted the threshold): when the calls turn short, the
/// stretch ends as before.
pub(crate) fn takeover_threshold(threshold: Option<Duration>, after_takeover: bool) -> Option<Duration> {
    threshold.map(|t| if after_takeover { Duration::ZERO } else { t })
}

/// Lazy presets: once a lazily released call has been taken over, a lazy
/// release that finds a waiter is a real one for this many switch
/// intervals, doubling while takeovers keep coming (up to
/// [`MAX_HANDOVER_INTERVALS`]): the waiter is then woken when a call
/// begins, not by a takeover just as the call's own thread wakes.
pub const HANDOVER_INTERVALS: u32 = 1;

/// The longest stretch of real releases after takeovers, in switch
/// intervals (see [`HANDOVER_INTERVALS`]).
pub const MAX_HANDOVER_INTERVALS: u32 = 64;

/// After a takeover, contended lazy releases are real ones for a while
/// ([`lazy_hands_over`]): one switch interval ([`HANDOVER_INTERVALS`])
/// after a first takeover, twice as long as the last stretch after one
/// that comes within two stretches of the last (the calls still outlast
/// the threshold), up to [`MAX_HANDOVER_INTERVALS`]. The first lazy
/// release after a stretch reserves again, to see whether they still do;
/// as the stretches double, such takeovers (each a wake-up at the wrong
/// moment) become rare. Timed rather than counted, so that a thread whose
/// short calls alternate with long ones (a write, then a read that waits
/// for the reply) keeps the long stretch; a thread whose calls all turn
/// short gets its lazy release back after at most the longest stretch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Handovers<S> {
    /// The last stretch: since when, and how long.
    stretch: Option<(S, Duration)>,
}

impl<S> Default for Handovers<S> {
    fn default() -> Self {
        Handovers { stretch: None }
    }
}

impl<S: Copy> Handovers<S> {
    /// A call was taken over at the time `clock` gives.
    pub(crate) fn taken_over<C: Elapsed<S>>(&mut self, clock: &C, interval: Duration) {
        let first = interval
            .saturating_mul(HANDOVER_INTERVALS)
            .max(Duration::from_micros(1));
        let longest = interval.saturating_mul(MAX_HANDOVER_INTERVALS).max(first);
        let length = match self.stretch {
            Some((since, last)) if !clock.passed(since, last.saturating_mul(2)) => last.saturating_mul(2).min(longest),
            _ => first,
        };
        self.stretch = Some((clock.now(), length));
    }

    /// Whether a contended lazy release now is a real one.
    pub(crate) fn now<C: Elapsed<S>>(&self, clock: &C) -> bool {
        self.stretch.is_some_and(|(since, length)| !clock.passed(since, length))
    }
}

/// Where the waiting room's designee (see [`designee`]) stands, as seen by a
/// thread that wants the free lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Nobody is queued, or the designee has not waited past the hand-off
    /// bound ([`handoff_bound`]): a running thread may take the lock before
    /// it, as the class rules allow.
    Open,
    /// The caller is the designee.
    Mine,
    /// The designee, of this class, has waited past the hand-off bound, or
    /// the caller has overtaken it its bound on laps already
    /// ([`may_overtake`]): the lock is kept for it.
    Reserved(ThreadClass),
}

/// Whether a thread of `class` (`starving`: marked so while waiting) may take
/// a free lock now, with the designee at `turn`; `my_rotation`: the CPU
/// class's turn is nobody's or the caller's ([`Rotation`]).
///
/// - The designee may (it is chosen by the same rules).
/// - A designee past the hand-off bound gets the lock handed to it: nobody
///   else may take it, except (priority policy) an I/O-class thread past a
///   CPU-class designee, which the starvation bound protects instead.
/// - Otherwise a starving waiter goes before anyone, then (priority policy)
///   I/O-class threads before CPU-class ones, and of those only the one
///   whose turn it is (see [`due`]); under classic anyone may.
pub(crate) fn may_take(
    policy: Policy,
    census: Census,
    (class, starving): (ThreadClass, bool),
    turn: Turn,
    my_rotation: bool,
) -> bool {
    match turn {
        Turn::Mine => return true,
        Turn::Reserved(d) if !(policy == Policy::Priority && class == ThreadClass::Io && d == ThreadClass::Cpu) => {
            return false
        }
        _ => {}
    }
    match policy {
        Policy::Priority if census.starving > 0 => starving,
        Policy::Priority => class == ThreadClass::Io || (census.io == 0 && my_rotation),
        _ => true,
    }
}

/// How long the designee may be overtaken by running threads before the
/// lock is handed to it ([`Turn::Reserved`]), counted from when it became
/// the designee: one switch interval, the lock's own unit of "long enough".
/// `None`: no bound, CPython's rule, kept by the classic policy without the
/// monitor.
///
/// A thread that is running when the lock comes free (back from a short
/// system call, or the releaser itself) takes it sooner than a sleeping
/// waiter can wake: that keeps the lock busy, and lets a request handler
/// whose `send` returned at once finish its request. Unbounded, the same
/// waiter can be overtaken again and again, and with many I/O threads that
/// is the tail of the latency. Timed from when the waiter joined instead
/// (Go's mutex), a busy server would be first come, first served at every
/// acquisition, a handler going to the back of the queue after each short
/// call, and every hand-off would wait for a sleeping thread to wake.
pub(crate) fn handoff_bound(policy: Policy, monitor: bool, interval: Duration) -> Option<Duration> {
    (policy == Policy::Priority || monitor).then_some(interval)
}

/// Whether a running thread that has taken the lock `laps` times since the
/// designee joined the line may take it before the designee (where
/// [`handoff_bound`] applies), with a `bound` on laps
/// ([`GilConfig::laps`](crate::GilConfig::laps), 0: none): fewer than
/// `bound` times.
///
/// The hand-off bound limits how long the *designee* is overtaken; a waiter
/// deep in a long line is overtaken again at every place in it. Threads
/// whose calls return within microseconds find the lock free often enough
/// to keep taking it, and a few of them make most of the round trips.
/// Counted in laps,
/// every other thread takes the lock at most `bound` + 1 times while a
/// waiter waits (once in line ahead of it, then by overtaking the designee
/// of the moment, who joined before it), so a waiter's wait is bounded by
/// the number of threads, as in a fair queue, not by the clock: a line
/// can be long because many requests are in flight, not because anyone is
/// overtaken.
pub(crate) fn may_overtake(laps: usize, bound: u32) -> bool {
    bound == 0 || laps < bound as usize
}

/// Whether a waiter of class `waiter` asks a running holder of class
/// `holder` to drop at once instead of waiting out the switch interval.
/// Not a holder in its `slice`: a CPU-class thread that took the lock after
/// starving keeps it until its slice is over ([`slice`]), so the CPU-bound
/// threads beside busy I/O threads run a fifth of an interval in every
/// [`STARVATION_INTERVALS`] and a fifth, not just long enough to notice the
/// next I/O-class waiter's request.
pub(crate) fn preempts(policy: Policy, waiter: ThreadClass, holder: ThreadClass, slice: bool) -> bool {
    policy == Policy::Priority && waiter == ThreadClass::Io && holder == ThreadClass::Cpu && !slice
}

/// How long a CPU-class thread served after starving keeps the lock before
/// it is asked to drop: its slice, a fifth of a switch interval (1 ms by
/// default). With the starvation bound that gives the CPU-bound threads
/// together about one part in 5 x [`STARVATION_INTERVALS`] + 1 (5 %) of a
/// lock that I/O-class threads keep busy, and an I/O-class thread that
/// arrives during a slice waits at most a fifth of an interval for it.
pub(crate) fn slice(interval: Duration) -> Duration {
    interval / 5
}

/// How long a holder runs, timed by the monitor from when it took the lock
/// or from when the first waiter came, before it is asked to drop: a
/// switch interval, or in its `slice` the slice ([`slice`]).
pub(crate) fn runs_for(interval: Duration, slice: bool) -> Duration {
    if slice {
        self::slice(interval)
    } else {
        interval
    }
}

/// Whether the monitor puts off a due drop request once because the holder
/// is in a lazily released call that this look saw first (`new_call`),
/// unless it put it off already (`deferred`): the call may be long (a late
/// look), and then the next look, within the threshold, takes it over
/// instead; if it is short, that look asks.
pub(crate) fn defers_request(new_call: bool, deferred: bool) -> bool {
    new_call && !deferred
}

/// Whether a waiter in the plain waiting room asks the holder to drop at
/// once: it preempts (see [`preempts`]), or it is starving and waits for
/// nobody; neither during the holder's `slice`.
pub(crate) fn urgent(policy: Policy, waiter: ThreadClass, holder: ThreadClass, starving: bool, slice: bool) -> bool {
    policy == Policy::Priority && !slice && (starving || preempts(policy, waiter, holder, slice))
}

/// Whether a waiter can become starving at all: a CPU-class one, not
/// starving yet, under the priority policy (nobody starves elsewhere: every
/// waiter asks for a drop after one interval).
pub(crate) fn may_starve(policy: Policy, class: ThreadClass, starving: bool) -> bool {
    policy == Policy::Priority && class == ThreadClass::Cpu && !starving
}

/// How long a CPU-class waiter waits before it is served first: the
/// starvation bound.
pub(crate) fn starvation_bound(interval: Duration) -> Duration {
    interval.saturating_mul(STARVATION_INTERVALS as u32)
}

/// Since when the starvation bound runs for a CPU-class waiter that
/// `joined` the queue then: from then, or from when a CPU-class thread last
/// took the lock while others waited (`class_served`), whichever is later.
///
/// The bound is the CPU class's, not each thread's: while I/O-class threads
/// keep the lock busy, the CPU-bound threads *together* get one slice per
/// bound, in turn (see [`next_to_starve`]), so k of them cost the I/O
/// threads what one does (one slice per bound: about 5 % of the lock),
/// and each waits at most k bounds. Timed per thread, two spinners
/// beside a busy server took twice the share of one, three three times.
pub(crate) fn starvation_start<S: Ord>(joined: S, class_served: Option<S>) -> S {
    match class_served {
        Some(served) => served.max(joined),
        None => joined,
    }
}

/// What the queue's rules need to know of an entry.
pub(crate) trait Candidate {
    fn class(&self) -> ThreadClass;
    fn starving(&self) -> bool;
    fn ticket(&self) -> u64;
}

/// The waiter a free lock goes to, and the one a release wakes: the first
/// starving waiter, else (priority policy) the first I/O-class waiter, else
/// the waiter whose turn it is (`rotation`; nobody while its owner is not
/// queued), else the first waiter. `queue` is in arrival order.
pub(crate) fn designee<'q, C: Candidate + 'q>(
    policy: Policy,
    census: Census,
    rotation: Rotation,
    queue: impl Iterator<Item = &'q C> + Clone,
) -> Option<&'q C> {
    if census.starving > 0 {
        if let Some(c) = queue.clone().find(|c| c.starving()) {
            return Some(c);
        }
    }
    if policy == Policy::Priority {
        if let Some(c) = queue.clone().find(|c| c.class() == ThreadClass::Io) {
            return Some(c);
        }
        match rotation {
            Rotation::Open => {}
            Rotation::Queued(ticket) => return queue.clone().find(|c| c.ticket() == ticket),
            Rotation::Away => return None,
        }
    }
    queue.clone().next()
}

/// The queued waiter the starvation bound is timed on: the first CPU-class
/// waiter, the one that has waited longest, and only while nobody starves
/// (priority policy only). One starving waiter at a time, first come first
/// served: the CPU class's slices go round its threads in turn.
pub(crate) fn next_to_starve<'q, C: Candidate + 'q>(
    policy: Policy,
    census: Census,
    queue: impl Iterator<Item = &'q C>,
) -> Option<usize> {
    if policy != Policy::Priority || census.starving > 0 || census.cpu == 0 {
        return None;
    }
    queue
        .enumerate()
        .find(|(_, c)| c.class() == ThreadClass::Cpu && !c.starving())
        .map(|(i, _)| i)
}

/// Whether a waiter watches the lock word, without the mutex, while an
/// I/O-class thread holds the lock or was the last to hold it, before it
/// takes the lock or sleeps (with a spin limit; classes only exist under
/// the priority policy): a CPU-class `waiter`, not `starving` (its turn
/// is coming), while the `holder` is I/O-class and not in a lazily
/// released call (`in_call`), once per holder (`watched`: this waiter has
/// watched this holder already), and only if the CPU class's turn lets it
/// take the lock (`my_rotation`, see [`Rotation`]): another CPU-class
/// waiter would spin for a lock it may not take, on a CPU the I/O thread
/// needs. The I/O thread took the lock from the CPU class and lets go
/// around its next call, within microseconds: the waiter takes the lock
/// then without a sleep and a wake-up, and that release wakes nobody (see
/// [`Watch`]).
pub(crate) fn watches(
    (waiter, starving): (ThreadClass, bool),
    holder: ThreadClass,
    in_call: bool,
    watched: bool,
    my_rotation: bool,
) -> bool {
    waiter == ThreadClass::Cpu && !starving && holder == ThreadClass::Io && !in_call && !watched && my_rotation
}

/// A CPU-class waiter's watch over an I/O-class holder ([`watches`]), look
/// by look: whether to keep watching. It stops when the lock changes hands
/// to another thread, when a free lock has stayed free for [`SPIN_GRACE`]
/// (the waiter takes it), or when the I/O thread holds it longer than it
/// may: the spin limit at first, then, once the thread is seen back from
/// a call, [`WATCH_HOLD`] per hold. A free lock always gets its whole
/// grace: taken sooner, the take would land in a call that returns at
/// once, and the I/O thread would preempt the waiter right after.
///
/// Each hold of up to `WATCH_HOLD` renews the watch, up to
/// [`Watch::length`] in all: the waiter keeps watching while the I/O
/// thread goes in and out of quick calls, rather than sleep and be woken
/// by one of its releases (and take the lock in the middle of a quick
/// call). A longer hold is the thread's own work, and the waiter sleeps:
/// watching there would gain nothing and would keep its CPU in the
/// process's address space, where each `munmap` of the holder interrupts
/// it to flush its TLB (an asyncio server unmaps a receive buffer per
/// read).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Watch {
    /// Since when the lock has been seen free, if it is.
    free_since: Option<Instant>,
    /// When the I/O thread was last seen taking the lock.
    taken_at: Instant,
    /// How long it may hold the lock with the waiter watching.
    hold: Duration,
    /// Its takes so far: a hold between two calls can be shorter than the
    /// time from one look to the next, and a lock seen free at both looks
    /// may have been taken back in between.
    takes: u64,
}

impl Watch {
    /// A watch with spin limit `limit` starting `now`, the lock taken
    /// `takes` times so far.
    pub(crate) fn new(limit: Duration, now: Instant, takes: u64) -> Watch {
        Watch {
            free_since: None,
            taken_at: now,
            hold: limit,
            takes,
        }
    }

    /// The longest a watch with spin limit `limit` lasts: twice the limit,
    /// and a last grace.
    pub(crate) fn length(limit: Duration) -> Duration {
        2 * limit + SPIN_GRACE
    }

    /// One look at `now`: whether the lock has `switched` to another
    /// thread, how many times it has been taken (`takes`), and whether it
    /// is `locked`. Whether to keep watching.
    pub(crate) fn look(&mut self, now: Instant, switched: bool, takes: u64, locked: bool) -> bool {
        if switched {
            return false;
        }
        // A take counted, or seen as the word locked again (the count is
        // bumped just after the word is taken): back from a call, and a
        // free lock's grace starts again.
        let taken = std::mem::replace(&mut self.takes, takes) != takes;
        if taken || (locked && self.free_since.is_some()) {
            self.free_since = None;
            self.taken_at = now;
            self.hold = self.hold.min(WATCH_HOLD);
        }
        if locked {
            return now.saturating_duration_since(self.taken_at) < self.hold;
        }
        let since = *self.free_since.get_or_insert(now);
        now.saturating_duration_since(since) < SPIN_GRACE
    }
}

// ---- The clock --------------------------------------------------------------

/// Reading a clock: what [`due`] needs of one, over stamps of type `S`
/// (the protocol's clock, or a test's).
pub(crate) trait Elapsed<S> {
    /// Now.
    fn now(&self) -> S;
    /// Whether `d` has passed since `since`.
    fn passed(&self, since: S, d: Duration) -> bool;
    /// How much of `d` is left since `since` (more than zero).
    fn left(&self, since: S, d: Duration) -> Duration;
}

/// The CPU class's turn (priority policy): the CPU-class thread whose turn
/// it is to run beside the I/O-class threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CpuTurn<S> {
    /// The thread whose turn it is (its token).
    pub(crate) owner: usize,
    /// Its place in the queue while it waits there.
    pub(crate) queued: Option<u64>,
    /// It holds the lock (taken under the waiting room's mutex).
    pub(crate) held: bool,
    /// Since when it has been on its way back, made to let go for an
    /// I/O-class thread: the turn is still its own, for a switch interval
    /// at most ([`due`]).
    pub(crate) away: Option<S>,
    /// Since when another CPU-class thread has waited for a turn: the turn
    /// ends [`turn_length`] after that ([`due`]).
    pub(crate) contested: Option<S>,
}

/// Where the CPU class's turn stands, for [`may_take`] and [`designee`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rotation {
    /// Nobody's turn: the first CPU-class waiter goes.
    Open,
    /// The turn of the waiter queued with this ticket.
    Queued(u64),
    /// The turn of a thread that is not queued: it holds the lock, or was
    /// made to let go for an I/O-class thread and is on its way back.
    Away,
}

/// The lock's one timing state: what is being timed, and since when. Kept
/// under the waiting room's mutex; whoever looks at the lock (the monitor,
/// or a waiter that keeps the time) hands it to [`due`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timers<S> {
    /// The holder being timed (its switch number), and since when: it took
    /// the lock, the first waiter came, or it was last asked to drop.
    holder: Option<(u64, S)>,
    /// The lazily released call being timed (its generation), and since
    /// when it has been seen.
    call: Option<(u64, S)>,
    /// The holder's request was put off once, for a call first seen at
    /// that look ([`defers_request`]).
    deferred: bool,
    /// When a CPU-class thread last took the lock while others waited: the
    /// starvation bound runs from then ([`starvation_start`]).
    cpu_served: Option<S>,
    /// The CPU class's turn (priority policy).
    turn: Option<CpuTurn<S>>,
}

impl<S> Default for Timers<S> {
    fn default() -> Self {
        Timers {
            holder: None,
            call: None,
            deferred: false,
            cpu_served: None,
            turn: None,
        }
    }
}

/// The holder, as a look sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holding {
    /// Nobody holds the lock.
    Free,
    /// A thread runs with it: its switch number, its class, whether it is
    /// in its slice, and whether it is the CPU class's turn's owner.
    Running {
        sn: u64,
        class: ThreadClass,
        slice: bool,
        owns_turn: bool,
    },
    /// Its holder is in a lazily released call: its switch number and the
    /// call's generation.
    InCall { sn: u64, gen: u64 },
}

/// What one look at the lock sees besides the timers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scene<S> {
    pub(crate) interval: Duration,
    /// The lazy-release threshold, if lazy release is on.
    pub(crate) threshold: Option<Duration>,
    pub(crate) holder: Holding,
    pub(crate) census: Census,
    /// When the waiter the starvation bound is timed on joined
    /// ([`next_to_starve`]), if there is one.
    pub(crate) to_starve: Option<S>,
}

/// What is due at a look, and when to look next.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Due {
    /// Raise the drop request, for these reasons.
    pub(crate) ask: Option<Asked>,
    /// Take the lock from the holder's lazily released call.
    pub(crate) take_over: bool,
    /// Mark the waiter the starvation bound is timed on as starving.
    pub(crate) starve: bool,
    /// The CPU class's turn is over: the next CPU-class waiter goes.
    pub(crate) turn_over: bool,
    /// How soon something may be due next; `None`: nobody waits, nothing
    /// is timed.
    pub(crate) next: Option<Duration>,
}

impl<S: Copy> Timers<S> {
    /// A hand-off: the holder with switch number `sn` is timed from `now`.
    pub(crate) fn new_holder(&mut self, sn: u64, now: S) {
        self.holder = Some((sn, now));
    }

    /// The first waiter came at `now`: the holder `sn`, and its call, are
    /// timed afresh from then.
    pub(crate) fn first_waiter(&mut self, sn: u64, now: S) {
        self.holder = Some((sn, now));
        self.call = None;
        self.deferred = false;
    }

    /// A CPU-class thread took the lock while others waited: the CPU
    /// class's turn, as the starvation bound counts it.
    pub(crate) fn cpu_served(&mut self, now: S) {
        self.cpu_served = Some(now);
    }

    /// The CPU class's turn, if one is under way.
    pub(crate) fn turn(&self) -> Option<&CpuTurn<S>> {
        self.turn.as_ref()
    }

    /// The CPU class's turn, to update.
    pub(crate) fn turn_mut(&mut self) -> Option<&mut CpuTurn<S>> {
        self.turn.as_mut()
    }

    /// The turn goes to `owner` (its token), which holds the lock,
    /// contested since `contested`.
    pub(crate) fn begin_turn(&mut self, owner: usize, contested: Option<S>) {
        self.turn = Some(CpuTurn {
            owner,
            queued: None,
            held: true,
            away: None,
            contested,
        });
    }

    /// The turn is over: the next CPU-class thread to take the lock starts one.
    pub(crate) fn end_turn(&mut self) {
        self.turn = None;
    }
}

/// One look at the lock, at the time `clock` gives: what is due now under
/// the rules below, and how soon to look again. Updates `timers` (what it
/// starts timing, what it stops timing); the caller does what is due. The
/// monitor thread looks at each lock it watches; on a lock without it, the
/// waiters that keep the time look each time they wake.
///
/// 1. **Takeover** (lazy release): the holder's lazily released call has
///    lasted the threshold: the lock is taken from it, for the designee.
/// 2. **Starvation** (priority): the CPU-class waiter timed for the
///    starvation bound has waited [`starvation_bound`] since it came or
///    since the CPU class last took the lock ([`starvation_start`]): it
///    starves, goes before anyone, and the holder is asked to drop (unless
///    it is in its slice, which it keeps).
/// 3. **Interval**: the holder has run a switch interval ([`runs_for`]: in
///    its slice, the slice) since it took the lock, since the first waiter
///    came, or since it was last asked: it is asked to drop, also while it
///    is in a lazily released call (it answers at its next release), but
///    once put off if that call is first seen now ([`defers_request`]).
/// 4. **The CPU class's turn** (priority): a CPU-class thread keeps its
///    turn while I/O-class threads preempt it, until another CPU-class
///    thread has waited [`turn_length`] for one; then the turn is over,
///    and its owner, if it runs, is asked to drop. The CPU-class waiters
///    so take turns in order of arrival, and an I/O-class
///    thread that preempts one costs the others nothing: the lock goes
///    back to the one it preempted.
pub(crate) fn due<S: Copy + Ord, C: Elapsed<S>>(clock: &C, scene: &Scene<S>, timers: &mut Timers<S>) -> Due {
    let mut due = Due::default();
    if scene.census.waiters() == 0 {
        timers.holder = None;
        timers.call = None;
        timers.deferred = false;
        return due;
    }
    let now = clock.now();
    let interval = scene.interval;
    let mut next = interval;
    let mut ask = Asked::default();

    // 1. A lazily released call that has outlasted the threshold.
    let mut new_call = false;
    match (scene.holder, scene.threshold) {
        (Holding::InCall { gen, .. }, Some(threshold)) => match timers.call {
            Some((g, since)) if g == gen => {
                if clock.passed(since, threshold) {
                    due.take_over = true;
                    timers.call = None;
                } else {
                    next = next.min(clock.left(since, threshold));
                }
            }
            _ if threshold.is_zero() => due.take_over = true,
            _ => {
                new_call = true;
                timers.call = Some((gen, now));
                next = next.min(threshold);
            }
        },
        _ => timers.call = None,
    }

    // 2. The starvation bound.
    if let Some(joined) = scene.to_starve {
        let since = starvation_start(joined, timers.cpu_served);
        let bound = starvation_bound(interval);
        if clock.passed(since, bound) {
            due.starve = true;
            ask.starving = true;
        } else {
            next = next.min(clock.left(since, bound));
        }
    }

    // 3. The holder's interval (or slice).
    let (sn, slice) = match scene.holder {
        Holding::Running { sn, slice, .. } => (Some(sn), slice),
        Holding::InCall { sn, .. } => (Some(sn), false),
        Holding::Free => (None, false),
    };
    match (sn, timers.holder) {
        // Taken over: the holder changes now.
        _ if due.take_over => {}
        (Some(sn), Some((timed, since))) if timed == sn => {
            let hold = runs_for(interval, slice);
            if clock.passed(since, hold) {
                if defers_request(new_call, timers.deferred) {
                    timers.deferred = true;
                } else {
                    ask.interval = true;
                    timers.deferred = false;
                    timers.holder = Some((sn, now));
                }
            } else {
                next = next.min(clock.left(since, hold));
            }
        }
        (Some(sn), _) => {
            timers.deferred = false;
            timers.holder = Some((sn, now));
        }
        (None, _) => {}
    }

    // 4. The CPU class's turn. An owner that was preempted and has not
    // come back within an interval is not coming (it let go on the
    // uncontended path, which the room never sees): its turn is over.
    if let Some(CpuTurn {
        queued: None,
        held: false,
        away: Some(since),
        ..
    }) = timers.turn
    {
        if clock.passed(since, interval) {
            timers.turn = None;
            due.turn_over = true;
        } else {
            next = next.min(clock.left(since, interval));
        }
    }
    if let Some(turn) = timers.turn.as_mut() {
        let queued_as_cpu = usize::from(turn.queued.is_some());
        let rivals = scene.census.cpu > queued_as_cpu;
        match (rivals, turn.contested) {
            (false, _) => turn.contested = None,
            (true, None) => {
                turn.contested = Some(now);
                next = next.min(turn_length(interval));
            }
            (true, Some(since)) if clock.passed(since, turn_length(interval)) => {
                if let Holding::Running { owns_turn: true, .. } = scene.holder {
                    ask.interval = true;
                }
                timers.turn = None;
                due.turn_over = true;
            }
            (true, Some(since)) => next = next.min(clock.left(since, turn_length(interval))),
        }
    }

    // Nobody to ask if the lock is free (the starving waiter just goes
    // first), and a holder in its slice keeps it: only its slice's end
    // asks it.
    let in_slice = matches!(scene.holder, Holding::Running { slice: true, .. });
    if scene.holder != Holding::Free && (ask.interval || (ask.starving && !in_slice)) {
        due.ask = Some(ask);
    }
    due.next = Some(next);
    due
}

#[cfg(test)]
mod tests {
    use super::*;
    use ThreadClass::{Cpu, Io};

    const POLICIES: [Policy; 2] = [Policy::Classic, Policy::Priority];

    fn census(io: usize, cpu: usize, starving: usize) -> Census {
        Census { io, cpu, starving }
    }

    #[derive(Debug, PartialEq)]
    struct Entry(u32, ThreadClass, bool);

    impl Candidate for Entry {
        fn class(&self) -> ThreadClass {
            self.1
        }
        fn starving(&self) -> bool {
            self.2
        }
        fn ticket(&self) -> u64 {
            self.0.into()
        }
    }

    #[test]
    fn census_counts_waiters_by_class_and_starving() {
        let mut c = Census::default();
        c.join(Io);
        c.join(Cpu);
        c.join(Cpu);
        c.starving += 1;
        assert_eq!((c.waiters(), c.io, c.cpu, c.starving), (3, 1, 2, 1));
        c.leave(Cpu, true);
        c.leave(Io, false);
        assert_eq!(c, census(0, 1, 0));
    }

    #[test]
    fn only_priority_keeps_classes_and_forced_means_cpu() {
        assert_eq!(class_after(Policy::Classic, ReleaseReason::Forced), None);
        assert_eq!(class_after(Policy::Priority, ReleaseReason::Forced), Some(Cpu));
        assert_eq!(class_after(Policy::Priority, ReleaseReason::Voluntary), Some(Io));
        assert_eq!(class_after(Policy::Priority, ReleaseReason::Final), Some(Io));
    }

    #[test]
    fn a_release_asked_for_after_a_whole_interval_is_cpu_bound() {
        let interval = Asked {
            interval: true,
            starving: false,
        };
        for reason in [ReleaseReason::Voluntary, ReleaseReason::Forced] {
            assert_eq!(
                class_after_request(Policy::Priority, reason, true, interval, Io),
                Some(Cpu)
            );
        }
        // Not asked, asked only to preempt, a final release, or classic: no verdict.
        let v = ReleaseReason::Voluntary;
        assert_eq!(class_after_request(Policy::Priority, v, false, interval, Io), None);
        assert_eq!(
            class_after_request(Policy::Priority, v, true, Asked::default(), Cpu),
            None
        );
        let f = ReleaseReason::Final;
        assert_eq!(class_after_request(Policy::Priority, f, true, interval, Io), None);
        assert_eq!(class_after_request(Policy::Classic, v, true, interval, Io), None);
    }

    #[test]
    fn a_holder_forced_out_for_a_starving_waiter_keeps_its_class() {
        let starving = Asked {
            interval: false,
            starving: true,
        };
        let f = ReleaseReason::Forced;
        assert_eq!(class_after_request(Policy::Priority, f, true, starving, Io), Some(Io));
        assert_eq!(class_after_request(Policy::Priority, f, true, starving, Cpu), Some(Cpu));
        // A whole interval as well: CPU-bound after all.
        let both = Asked {
            interval: true,
            starving: true,
        };
        assert_eq!(class_after_request(Policy::Priority, f, true, both, Io), Some(Cpu));
        // A voluntary release is I/O-class as ever (class_after).
        let v = ReleaseReason::Voluntary;
        assert_eq!(class_after_request(Policy::Priority, v, true, starving, Cpu), None);
    }

    #[test]
    fn a_lazy_release_hands_over_to_waiting_io_threads_only_under_priority() {
        assert!(lazy_hands_over(Policy::Priority, census(1, 0, 0), false));
        assert!(lazy_hands_over(Policy::Priority, census(1, 3, 0), false));
        assert!(!lazy_hands_over(Policy::Priority, census(0, 3, 1), false));
        assert!(!lazy_hands_over(Policy::Classic, census(2, 0, 0), false));
    }

    #[test]
    fn handovers_double_while_takeovers_keep_coming_and_start_over_after_a_pause() {
        let iv = Duration::from_millis(5);
        let us = 5_000; // one interval
        let mut clock = At(1);
        let mut h = Handovers::default();
        assert!(!h.now(&clock), "no takeover yet: releases reserve");
        h.taken_over(&clock, iv);
        assert!(h.now(&clock));
        clock.0 += us;
        assert!(!h.now(&clock), "one interval after a first takeover: reserve again");
        h.taken_over(&clock, iv); // the probe's call was taken over too
        clock.0 += us;
        assert!(h.now(&clock), "the second stretch is two intervals");
        clock.0 += us;
        assert!(!h.now(&clock));
        for _ in 0..20 {
            h.taken_over(&clock, iv);
        }
        let max = u64::from(MAX_HANDOVER_INTERVALS);
        clock.0 += us * (max - 1);
        assert!(h.now(&clock), "stretches double up to the longest");
        clock.0 += us;
        assert!(!h.now(&clock), "and no further");
        clock.0 += us * max * 2;
        h.taken_over(&clock, iv);
        clock.0 += us;
        assert!(!h.now(&clock), "a takeover after a long pause starts from one interval");
    }

    #[test]
    fn a_lazy_release_after_a_takeover_hands_over_under_every_policy() {
        for policy in POLICIES {
            assert!(lazy_hands_over(policy, census(0, 1, 0), true));
            assert!(lazy_hands_over(policy, census(2, 0, 0), true));
        }
    }

    #[test]
    fn classic_lets_anyone_take_a_free_lock() {
        for c in [census(0, 0, 0), census(3, 2, 1)] {
            for class in [Io, Cpu] {
                assert!(may_take(Policy::Classic, c, (class, false), Turn::Open, true));
            }
        }
    }

    #[test]
    fn priority_serves_io_before_cpu_and_starving_before_all() {
        let p = Policy::Priority;
        assert!(may_take(p, census(1, 1, 0), (Io, false), Turn::Open, true));
        assert!(!may_take(p, census(1, 1, 0), (Cpu, false), Turn::Open, true));
        assert!(may_take(p, census(0, 2, 0), (Cpu, false), Turn::Open, true));
        // A starving waiter goes before anyone, I/O-class ones included.
        assert!(!may_take(p, census(1, 1, 1), (Io, false), Turn::Open, true));
        assert!(may_take(p, census(1, 1, 1), (Cpu, true), Turn::Open, true));
    }

    #[test]
    fn an_overdue_designee_is_handed_the_lock() {
        for p in POLICIES {
            // Nobody else takes it, whatever the class rules say...
            assert!(!may_take(p, census(2, 0, 0), (Io, false), Turn::Reserved(Io), true));
            assert!(!may_take(p, census(0, 2, 0), (Cpu, false), Turn::Reserved(Cpu), true));
            // ...and the designee itself always may.
            assert!(may_take(p, census(1, 1, 1), (Cpu, true), Turn::Mine, true));
            assert!(may_take(p, census(2, 0, 0), (Io, false), Turn::Mine, true));
        }
        // Priority: an I/O-class thread still passes a CPU-class designee
        // (the starvation bound protects that one), unless it starves.
        assert!(may_take(
            Policy::Priority,
            census(0, 1, 0),
            (Io, false),
            Turn::Reserved(Cpu),
            true
        ));
        assert!(!may_take(
            Policy::Classic,
            census(0, 1, 0),
            (Io, false),
            Turn::Reserved(Cpu),
            true
        ));
        assert!(!may_take(
            Policy::Priority,
            census(0, 1, 1),
            (Io, false),
            Turn::Reserved(Cpu),
            true
        ));
    }

    #[test]
    fn the_handoff_bound_is_one_interval_except_under_plain_classic() {
        let i = Duration::from_millis(5);
        assert_eq!(handoff_bound(Policy::Classic, false, i), None);
        assert_eq!(handoff_bound(Policy::Classic, true, i), Some(i));
        assert_eq!(handoff_bound(Policy::Priority, false, i), Some(i));
        assert_eq!(handoff_bound(Policy::Priority, true, i), Some(i));
    }

    #[test]
    fn only_an_io_waiter_preempts_and_only_a_cpu_holder() {
        let p = Policy::Priority;
        assert!(preempts(p, Io, Cpu, false));
        assert!(!preempts(p, Io, Io, false));
        assert!(!preempts(p, Cpu, Cpu, false));
        assert!(!preempts(p, Cpu, Io, false));
        assert!(!preempts(Policy::Classic, Io, Cpu, false));
        assert!(urgent(p, Cpu, Io, true, false));
        assert!(urgent(p, Io, Cpu, false, false));
        assert!(!urgent(p, Cpu, Cpu, false, false));
        assert!(!urgent(Policy::Classic, Cpu, Io, true, false));
    }

    #[test]
    fn nobody_asks_a_holder_in_its_slice_at_once() {
        let p = Policy::Priority;
        assert!(!preempts(p, Io, Cpu, true));
        assert!(!urgent(p, Io, Cpu, false, true));
        assert!(!urgent(p, Cpu, Cpu, true, true));
    }

    #[test]
    fn only_cpu_waiters_under_priority_starve_and_only_once() {
        assert!(may_starve(Policy::Priority, Cpu, false));
        assert!(!may_starve(Policy::Priority, Cpu, true));
        assert!(!may_starve(Policy::Priority, Io, false));
        assert!(!may_starve(Policy::Classic, Cpu, false));
    }

    #[test]
    fn a_running_thread_overtakes_the_designee_fewer_than_bound_times() {
        assert!((0..3).all(|laps| may_overtake(laps, 3)));
        assert!(!may_overtake(3, 3));
        assert!(!may_overtake(16, 1));
        // No bound: any number.
        assert!(may_overtake(usize::MAX, 0));
    }

    #[test]
    fn a_slice_is_a_fifth_of_an_interval() {
        assert_eq!(slice(Duration::from_millis(5)), Duration::from_millis(1));
        assert!(slice(Duration::from_millis(5)) < Duration::from_millis(5));
    }

    /// The documented floor: one slice per starvation bound is about 5 % of
    /// a busy lock for the CPU class (between 1/25 and 1/20), and a
    /// request that meets a slice waits at most a fifth of an interval.
    #[test]
    fn the_cpu_class_keeps_about_a_twentieth_of_a_busy_lock() {
        let i = Duration::from_millis(5);
        let share = slice(i).as_secs_f64() / (starvation_bound(i) + slice(i)).as_secs_f64();
        assert!((1.0 / 25.0..=1.0 / 20.0).contains(&share), "share {share}");
        assert!(slice(i) <= i / 5);
    }

    #[test]
    fn the_starvation_bound_is_a_number_of_intervals() {
        let i = Duration::from_millis(5);
        assert_eq!(starvation_bound(i), i * STARVATION_INTERVALS as u32);
        assert_eq!(starvation_bound(Duration::MAX), Duration::MAX);
    }

    #[test]
    fn the_designee_is_the_first_starving_then_first_io_then_first() {
        let q = [
            Entry(0, Cpu, false),
            Entry(1, Io, false),
            Entry(2, Cpu, true),
            Entry(3, Io, false),
        ];
        assert_eq!(
            designee(Policy::Priority, census(2, 2, 1), Rotation::Open, q.iter()),
            Some(&q[2])
        );
        assert_eq!(
            designee(Policy::Priority, census(2, 2, 0), Rotation::Open, q.iter()),
            Some(&q[1])
        );
        // Classic: first come, first served.
        assert_eq!(
            designee(Policy::Classic, census(4, 0, 0), Rotation::Open, q.iter()),
            Some(&q[0])
        );
        assert_eq!(
            designee::<Entry>(Policy::Priority, census(0, 0, 0), Rotation::Open, [].iter()),
            None
        );
    }

    #[test]
    fn the_first_cpu_waiter_is_timed_while_nobody_starves() {
        let q = [
            Entry(0, Io, false),
            Entry(1, Cpu, false),
            Entry(2, Cpu, false),
            Entry(3, Io, false),
        ];
        assert_eq!(next_to_starve(Policy::Priority, census(2, 2, 0), q.iter()), Some(1));
        assert_eq!(next_to_starve(Policy::Classic, census(4, 0, 0), q.iter()), None);
        // No CPU-class waiter: nobody to time.
        assert_eq!(next_to_starve(Policy::Priority, census(1, 0, 0), q[..1].iter()), None);
        // One starves already: the next one waits for its turn.
        let q = [Entry(0, Cpu, true), Entry(1, Cpu, false)];
        assert_eq!(next_to_starve(Policy::Priority, census(0, 2, 1), q.iter()), None);
    }

    #[test]
    fn the_starvation_bound_runs_from_the_cpu_class_last_turn() {
        // Joined before the class was last served: timed from that turn.
        assert_eq!(starvation_start(10, Some(25)), 25);
        // Joined after it, or the class never served: from joining.
        assert_eq!(starvation_start(30, Some(25)), 30);
        assert_eq!(starvation_start(10, None::<u32>), 10);
    }

    #[test]
    fn only_priority_with_a_spin_limit_sends_the_cpu_class_through_the_room() {
        assert!(cpu_through_room(Policy::Priority, true));
        assert!(!cpu_through_room(Policy::Priority, false));
        assert!(!cpu_through_room(Policy::Classic, true));
        assert!(!cpu_through_room(Policy::Classic, false));
    }

    #[test]
    fn a_forced_release_or_an_answered_request_waits_for_a_switch() {
        assert!(waits_for_switch(ReleaseReason::Forced, false));
        assert!(waits_for_switch(ReleaseReason::Forced, true));
        assert!(waits_for_switch(ReleaseReason::Voluntary, true));
        assert!(!waits_for_switch(ReleaseReason::Voluntary, false));
        assert!(!waits_for_switch(ReleaseReason::Final, true));
    }

    #[test]
    fn only_a_cpu_waiter_watches_an_io_holder_once_and_not_in_a_call() {
        assert!(watches((Cpu, false), Io, false, false, true));
        // An I/O-class waiter, a starving one, a CPU-class holder, a holder
        // in a lazily released call, a holder watched already, a waiter
        // whose class's turn it is not: no watch.
        assert!(!watches((Io, false), Io, false, false, true));
        assert!(!watches((Cpu, true), Io, false, false, true));
        assert!(!watches((Cpu, false), Cpu, false, false, true));
        assert!(!watches((Cpu, false), Io, true, false, true));
        assert!(!watches((Cpu, false), Io, false, true, true));
        assert!(!watches((Cpu, false), Io, false, false, false));
    }

    const LIMIT: Duration = Duration::from_micros(50);

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn a_lone_preempting_ask_looks_at_least_preempt_look_and_others_spin_the_limit() {
        // A preemption by the only I/O-class waiter (CPU-class ones may
        // wait too) looks PREEMPT_LOOK without a spin limit, and the
        // longer of the two with one.
        for alone in [census(1, 0, 0), census(1, 2, 1)] {
            assert_eq!(ask_spin(None, true, alone), Some(PREEMPT_LOOK));
            assert_eq!(ask_spin(Some(us(5)), true, alone), Some(PREEMPT_LOOK));
            assert_eq!(ask_spin(Some(us(50)), true, alone), Some(us(50)));
        }
        // With another I/O-class waiter, and for any other ask (the end of
        // an interval, a starving waiter), only the spin limit, if any.
        for (preemption, who) in [
            (true, census(2, 0, 0)),
            (true, census(16, 1, 0)),
            (false, census(1, 0, 0)),
        ] {
            assert_eq!(ask_spin(None, preemption, who), None);
            assert_eq!(ask_spin(Some(us(5)), preemption, who), Some(us(5)));
            assert_eq!(ask_spin(Some(us(50)), preemption, who), Some(us(50)));
        }
    }

    #[test]
    fn a_watch_lasts_twice_the_limit_and_a_grace() {
        assert_eq!(Watch::length(LIMIT), 2 * LIMIT + SPIN_GRACE);
    }

    #[test]
    fn a_watch_stops_when_the_lock_changes_hands() {
        let t0 = Instant::now();
        let mut w = Watch::new(LIMIT, t0, 7);
        assert!(w.look(t0, false, 7, true));
        assert!(!w.look(t0 + us(1), true, 8, true));
    }

    #[test]
    fn a_holder_seen_from_the_start_may_hold_the_spin_limit() {
        let t0 = Instant::now();
        let mut w = Watch::new(LIMIT, t0, 7);
        assert!(w.look(t0 + LIMIT - us(1), false, 7, true));
        assert!(!w.look(t0 + LIMIT, false, 7, true));
    }

    #[test]
    fn a_free_lock_gets_its_whole_grace_then_is_taken() {
        let t0 = Instant::now();
        let mut w = Watch::new(LIMIT, t0, 7);
        let freed = t0 + us(3);
        assert!(w.look(freed, false, 7, false));
        assert!(w.look(freed + SPIN_GRACE - us(1), false, 7, false));
        assert!(!w.look(freed + SPIN_GRACE, false, 7, false));
    }

    #[test]
    fn a_holder_back_from_a_call_may_hold_only_the_watch_hold() {
        let t0 = Instant::now();
        // Seen free, then locked again: back from a call (the count is
        // bumped just after the word is taken).
        let mut w = Watch::new(LIMIT, t0, 7);
        assert!(w.look(t0 + us(1), false, 7, false));
        let back = t0 + us(5);
        assert!(w.look(back, false, 7, true));
        assert!(w.look(back + WATCH_HOLD - us(1), false, 7, true));
        assert!(!w.look(back + WATCH_HOLD, false, 7, true));
        // A take counted between two looks that both saw the lock free
        // renews the grace and shortens the hold too.
        let mut w = Watch::new(LIMIT, t0, 7);
        assert!(w.look(t0 + us(1), false, 7, false));
        let again = t0 + us(1) + SPIN_GRACE - us(1);
        assert!(w.look(again, false, 8, false));
        assert!(w.look(again + SPIN_GRACE - us(1), false, 8, false));
        assert!(!w.look(again + SPIN_GRACE, false, 8, false));
    }

    #[test]
    fn each_quick_hold_renews_the_watch() {
        let t0 = Instant::now();
        let mut w = Watch::new(LIMIT, t0, 0);
        // Calls that return at once, one every 8 µs, each hold 4 µs: the
        // watch goes on well past the spin limit (the caller's bound,
        // `Watch::length`, ends it).
        let mut t = t0;
        for take in 1..=20 {
            assert!(w.look(t, false, take - 1, false), "free at {take}");
            t += us(4);
            assert!(w.look(t, false, take, true), "held at {take}");
            t += us(4);
        }
        assert!(t - t0 > LIMIT);
    }

    #[test]
    fn the_monitor_asks_a_holder_after_an_interval_or_its_slice() {
        let i = Duration::from_millis(5);
        assert_eq!(runs_for(i, false), i);
        assert_eq!(runs_for(i, true), slice(i));
    }

    #[test]
    fn the_monitor_puts_off_a_request_once_for_a_call_it_just_saw() {
        assert!(defers_request(true, false));
        assert!(!defers_request(true, true));
        assert!(!defers_request(false, false));
        assert!(!defers_request(false, true));
    }

    /// A test clock: microseconds.
    struct At(u64);

    impl Elapsed<u64> for At {
        fn now(&self) -> u64 {
            self.0
        }
        fn passed(&self, since: u64, d: Duration) -> bool {
            Duration::from_micros(self.0.saturating_sub(since)) >= d
        }
        fn left(&self, since: u64, d: Duration) -> Duration {
            d.saturating_sub(Duration::from_micros(self.0.saturating_sub(since)))
                .max(Duration::from_micros(1))
        }
    }

    const INTERVAL: Duration = Duration::from_millis(5);

    fn scene(holder: Holding, census: Census) -> Scene<u64> {
        Scene {
            interval: INTERVAL,
            threshold: None,
            holder,
            census,
            to_starve: None,
        }
    }

    fn running(sn: u64, class: ThreadClass) -> Holding {
        Holding::Running {
            sn,
            class,
            slice: false,
            owns_turn: false,
        }
    }

    const INTERVAL_DUE: Option<Asked> = Some(Asked {
        interval: true,
        starving: false,
    });

    #[test]
    fn with_nobody_waiting_nothing_is_timed() {
        let mut t = Timers::default();
        t.new_holder(1, 0);
        let due = due(&At(1_000_000), &scene(running(1, Io), census(0, 0, 0)), &mut t);
        assert_eq!(due, Due::default());
        assert!(t.holder.is_none());
    }

    #[test]
    fn a_holder_is_asked_after_an_interval_then_after_each_further_one() {
        let mut t = Timers::default();
        let sc = scene(running(1, Io), census(1, 0, 0));
        t.first_waiter(1, 0);
        let early = due(&At(4_000), &sc, &mut t);
        assert_eq!((early.ask, early.next), (None, Some(Duration::from_millis(1))));
        assert_eq!(due(&At(5_000), &sc, &mut t).ask, INTERVAL_DUE);
        // Asked: it gets a whole interval to answer before the next request.
        assert_eq!(due(&At(9_999), &sc, &mut t).ask, None);
        assert_eq!(due(&At(10_000), &sc, &mut t).ask, INTERVAL_DUE);
    }

    #[test]
    fn a_new_holder_gets_a_whole_interval() {
        let mut t = Timers::default();
        t.first_waiter(1, 0);
        // Switch number 2 is seen first at 4 ms: timed from then.
        let sc = scene(running(2, Io), census(1, 0, 0));
        assert_eq!(due(&At(4_000), &sc, &mut t).ask, None);
        assert_eq!(due(&At(8_999), &sc, &mut t).ask, None);
        assert_eq!(due(&At(9_000), &sc, &mut t).ask, INTERVAL_DUE);
    }

    #[test]
    fn a_holder_in_its_slice_is_asked_when_the_slice_is_over() {
        let mut t = Timers::default();
        t.new_holder(3, 0);
        let holder = Holding::Running {
            sn: 3,
            class: Cpu,
            slice: true,
            owns_turn: false,
        };
        let sc = scene(holder, census(1, 0, 0));
        assert_eq!(due(&At(999), &sc, &mut t).ask, None);
        assert_eq!(due(&At(1_000), &sc, &mut t).ask, INTERVAL_DUE);
    }

    #[test]
    fn a_lazily_released_call_is_taken_over_after_the_threshold() {
        let mut t = Timers::default();
        t.first_waiter(1, 0);
        let mut sc = scene(Holding::InCall { sn: 1, gen: 7 }, census(0, 1, 0));
        sc.threshold = Some(Duration::from_micros(100));
        let first = due(&At(10), &sc, &mut t);
        assert!(!first.take_over);
        assert_eq!(first.next, Some(Duration::from_micros(100)));
        assert!(!due(&At(109), &sc, &mut t).take_over);
        let late = due(&At(110), &sc, &mut t);
        assert!(late.take_over);
        assert_eq!(late.ask, None, "the holder loses the lock: nothing to ask");
        // Another call (a new generation) is timed afresh.
        sc.holder = Holding::InCall { sn: 1, gen: 8 };
        assert!(!due(&At(300), &sc, &mut t).take_over);
    }

    #[test]
    fn in_a_stretch_of_hand_overs_a_call_is_taken_over_at_the_first_look() {
        let threshold = Some(Duration::from_micros(100));
        assert_eq!(takeover_threshold(threshold, false), threshold);
        assert_eq!(takeover_threshold(threshold, true), Some(Duration::ZERO));
        assert_eq!(takeover_threshold(None, true), None, "no lazy release, no takeover");
        let mut t = Timers::default();
        t.first_waiter(1, 0);
        let mut sc = scene(Holding::InCall { sn: 1, gen: 7 }, census(0, 1, 0));
        sc.threshold = takeover_threshold(threshold, true);
        let first = due(&At(10), &sc, &mut t);
        assert!(first.take_over, "a call first seen now is taken over at once");
        assert_eq!(first.ask, None);
        // Nobody waiting: nothing is taken.
        let nobody = scene(Holding::InCall { sn: 1, gen: 8 }, census(0, 0, 0));
        assert!(!due(&At(20), &nobody, &mut t).take_over);
    }

    #[test]
    fn a_holder_in_short_calls_is_still_asked_once_put_off_for_a_new_call() {
        let mut t = Timers::default();
        t.first_waiter(1, 0);
        let mut sc = scene(Holding::InCall { sn: 1, gen: 1 }, census(0, 1, 0));
        sc.threshold = Some(Duration::from_micros(100));
        // Interval over, but this call is seen for the first time: put off.
        let put_off = due(&At(5_000), &sc, &mut t);
        assert_eq!(put_off.ask, None);
        assert_eq!(put_off.next, Some(Duration::from_micros(100)));
        // The next look finds a short call again (a new generation): asked.
        sc.holder = Holding::InCall { sn: 1, gen: 2 };
        assert_eq!(due(&At(5_050), &sc, &mut t).ask, INTERVAL_DUE);
    }

    #[test]
    fn a_cpu_waiter_starves_after_the_bound_and_asks_unless_in_a_slice() {
        let bound = starvation_bound(INTERVAL).as_micros() as u64;
        for (holder, asks) in [
            (running(9, Io), true),
            (
                Holding::Running {
                    sn: 9,
                    class: Cpu,
                    slice: true,
                    owns_turn: false,
                },
                false,
            ),
            (Holding::Free, false),
        ] {
            let mut t = Timers::default();
            let mut sc = scene(holder, census(1, 1, 0));
            sc.to_starve = Some(0);
            let early = due(&At(bound - 1), &sc, &mut t);
            assert!(!early.starve);
            let late = due(&At(bound), &sc, &mut t);
            assert!(late.starve);
            let starving = Some(Asked {
                interval: false,
                starving: true,
            });
            assert_eq!(late.ask, if asks { starving } else { None }, "{holder:?}");
        }
    }

    #[test]
    fn the_starvation_bound_counts_from_the_cpu_class_last_turn() {
        let bound = starvation_bound(INTERVAL).as_micros() as u64;
        let mut t = Timers::default();
        t.cpu_served(1_000);
        let mut sc = scene(Holding::Free, census(0, 1, 0));
        sc.to_starve = Some(0);
        assert!(!due(&At(bound), &sc, &mut t).starve);
        assert!(due(&At(bound + 1_000), &sc, &mut t).starve);
    }

    fn turn_holder(owns_turn: bool) -> Holding {
        Holding::Running {
            sn: 4,
            class: if owns_turn { Cpu } else { Io },
            slice: false,
            owns_turn,
        }
    }

    #[test]
    fn a_turn_lasts_a_number_of_intervals() {
        assert_eq!(turn_length(INTERVAL), INTERVAL * TURN_INTERVALS);
        assert_eq!(turn_length(Duration::MAX), Duration::MAX);
    }

    #[test]
    fn the_cpu_turn_ends_its_length_after_a_rival_came_and_its_owner_is_asked() {
        let length = turn_length(INTERVAL).as_micros() as u64;
        let mut t = Timers::default();
        t.begin_turn(7, None);
        // A rival CPU-class waiter: the turn is contested from this look.
        // The owner keeps being preempted (a new switch number each look),
        // so only the turn can end its run.
        let mut sc = scene(turn_holder(true), census(0, 1, 0));
        assert_eq!(due(&At(0), &sc, &mut t).ask, None);
        sc.holder = Holding::Running {
            sn: 5,
            class: Cpu,
            slice: false,
            owns_turn: true,
        };
        let early = due(&At(length - 1), &sc, &mut t);
        assert_eq!((early.ask, early.turn_over), (None, false));
        sc.holder = Holding::Running {
            sn: 6,
            class: Cpu,
            slice: false,
            owns_turn: true,
        };
        let over = due(&At(length), &sc, &mut t);
        assert_eq!((over.ask, over.turn_over), (INTERVAL_DUE, true));
        assert!(t.turn().is_none());
    }

    #[test]
    fn a_turn_that_ends_while_an_io_thread_holds_asks_nobody() {
        let length = turn_length(INTERVAL).as_micros() as u64;
        let mut t = Timers::default();
        t.begin_turn(7, Some(0));
        t.new_holder(4, length - 1_000);
        let over = due(&At(length), &scene(turn_holder(false), census(0, 2, 0)), &mut t);
        assert_eq!((over.ask, over.turn_over), (None, true));
    }

    #[test]
    fn an_owner_not_back_within_an_interval_loses_its_turn() {
        let mut t = Timers::default();
        t.begin_turn(7, None);
        let turn = t.turn_mut().expect("a turn");
        (turn.held, turn.away) = (false, Some(0));
        // An I/O-class thread holds; nobody else waits for the turn.
        let sc = scene(turn_holder(false), census(1, 0, 0));
        let early = due(&At(4_999), &sc, &mut t);
        assert!(!early.turn_over);
        assert_eq!(early.next, Some(Duration::from_micros(1)));
        let late = due(&At(5_000), &sc, &mut t);
        assert!(late.turn_over);
        assert!(t.turn().is_none());
    }

    #[test]
    fn an_uncontested_turn_goes_on() {
        let mut t = Timers::default();
        t.begin_turn(7, Some(0));
        t.turn_mut().expect("a turn").queued = Some(3);
        t.new_holder(4, 0);
        // The only CPU-class waiter is the owner itself, queued.
        let sc = scene(turn_holder(false), census(1, 1, 0));
        let d = due(&At(60_000), &sc, &mut t);
        assert!(!d.turn_over);
        assert_eq!(t.turn().expect("still a turn").contested, None);
    }

    #[test]
    fn the_next_look_is_at_the_soonest_due() {
        let mut t = Timers::default();
        t.first_waiter(1, 0);
        t.begin_turn(7, Some(0));
        let mut sc = scene(running(1, Io), census(0, 2, 0));
        sc.to_starve = Some(5_000);
        assert_eq!(TURN_INTERVALS, 4, "the figures below");
        // Interval at 5 ms, the turn at 20 ms, starvation at 25 ms.
        assert_eq!(due(&At(2_500), &sc, &mut t).next, Some(Duration::from_micros(2_500)));
        assert!(t.turn().is_some());
        // Asked at 5, 10 and 16 ms; at 17 ms the turn's end is next, at 20 ms.
        for at in [5_000, 10_000, 16_000] {
            assert_eq!(due(&At(at), &sc, &mut t).ask, INTERVAL_DUE);
        }
        assert_eq!(due(&At(17_000), &sc, &mut t).next, Some(Duration::from_millis(3)));
        // The turn is over at 20 ms (its owner asked): the holder's next
        // interval at 21 ms, then starvation at 25 ms.
        let over = due(&At(20_000), &sc, &mut t);
        assert!(over.turn_over);
        assert_eq!(over.next, Some(Duration::from_millis(1)));
        assert_eq!(due(&At(21_000), &sc, &mut t).next, Some(Duration::from_millis(4)));
    }

    #[test]
    fn a_cpu_waiter_other_than_the_owner_may_not_take_while_the_turn_is_on() {
        let p = Policy::Priority;
        assert!(!may_take(p, census(0, 2, 0), (Cpu, false), Turn::Open, false));
        assert!(may_take(p, census(0, 2, 0), (Cpu, false), Turn::Open, true));
        // I/O-class threads and starving waiters are not held back by it.
        assert!(may_take(p, census(0, 2, 0), (Io, false), Turn::Open, false));
        assert!(may_take(p, census(0, 2, 1), (Cpu, true), Turn::Open, false));
    }

    #[test]
    fn the_designee_among_cpu_waiters_is_the_turns_owner() {
        let q = [Entry(0, Cpu, false), Entry(1, Cpu, false), Entry(2, Cpu, false)];
        let p = Policy::Priority;
        let c = census(0, 3, 0);
        assert_eq!(designee(p, c, Rotation::Queued(2), q.iter()), Some(&q[2]));
        // The owner is on its way back: nobody else is woken for the lock.
        assert_eq!(designee(p, c, Rotation::Away, q.iter()), None);
        assert_eq!(designee(p, c, Rotation::Open, q.iter()), Some(&q[0]));
        // An I/O-class waiter still goes first.
        let q = [Entry(0, Cpu, false), Entry(1, Io, false)];
        assert_eq!(designee(p, census(1, 1, 0), Rotation::Queued(0), q.iter()), Some(&q[1]));
    }
}
