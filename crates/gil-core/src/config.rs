//! How a lock is built: switch interval, scheduling policy, host callback.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::{GilError, Token};

/// CPython's default switch interval: 5 ms.
pub const DEFAULT_SWITCH_INTERVAL_US: u64 = 5_000;

/// The largest accepted switch interval: one hour. Anything longer is not a
/// scheduling interval any more, and would overflow the deadline arithmetic
/// of some hosts.
pub const MAX_SWITCH_INTERVAL_US: u64 = 3_600_000_000;

/// Called with the holder's token when a waiter asks it to drop the lock.
///
/// It runs on the *waiting* thread, under the lock's internal mutex, while
/// the token it is given still holds the lock — so the host may touch the
/// holder's per-thread state (CPython sets a bit in its eval breaker). It
/// must be short; calls on the same lock from inside it that would wait
/// return [`GilError::Reentrant`] instead of deadlocking. It runs with the
/// thread's cancellation disabled ([`NoCancel`](crate::NoCancel)): a
/// pending `pthread_cancel` of the waiter acts at its next cancellation
/// point after the lock's call returns.
pub type DropRequestCallback = Arc<dyn Fn(Token) + Send + Sync + 'static>;

/// The scheduling policy: who gets the lock next, and when a holder is asked
/// to give it up.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Policy {
    /// CPython 3.2–3.13's "new GIL", exactly: a waiter asks for a drop after
    /// one switch interval without a switch; a forced drop waits until
    /// another thread has taken the lock. See the crate docs for the mapping.
    #[default]
    Classic,
    /// Two classes of threads: one that was forced to drop the lock is
    /// CPU-class, one that released it voluntarily is I/O-class. I/O-class
    /// waiters are served before CPU-class ones, and an I/O-class waiter
    /// arriving while a CPU-class thread holds the lock asks it to drop at
    /// once. CPU against CPU keeps the switch interval. The starvation
    /// bound is the CPU class's: once no CPU-class thread has had the lock
    /// for [`STARVATION_INTERVALS`] switch intervals while one waited, the
    /// CPU-class waiter that has waited longest is served before everybody
    /// (within that bound plus the time the holder takes to answer a drop
    /// request), and then keeps the lock for a fifth of a switch interval
    /// (nobody asks it to drop at once during that slice). So the CPU-bound
    /// threads beside busy I/O threads hold the lock together about a fifth
    /// of an interval in every [`STARVATION_INTERVALS`] and a fifth (5 %),
    /// in turn: with k of them, each waits at most about k bounds. Within a class, waiters are
    /// served in arrival order; a running thread may take the free lock
    /// before the first in line for at most one switch interval, then the
    /// lock is handed to it (and, with [`GilConfig::laps`], only a bounded
    /// number of times).
    Priority,
}

pub use crate::policy::STARVATION_INTERVALS;

/// The largest accepted [`GilConfig::laps`] bound: 16.
pub const MAX_LAPS: u32 = 16;

/// The bound on laps that suits a thread-per-connection server
/// ([`GilConfig::laps`]): a request handler, once served, comes back from a
/// `recv`, then from a `send` or two that return at once.
pub const SERVER_LAPS: u32 = 3;

impl Policy {
    /// Every policy, in a stable order.
    pub const ALL: &'static [Policy] = &[Policy::Classic, Policy::Priority];

    /// The policy's name, as accepted by [`FromStr`].
    pub const fn name(self) -> &'static str {
        match self {
            Policy::Classic => "classic",
            Policy::Priority => "priority",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A policy name that [`Policy::from_str`] does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPolicy(pub String);

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known: Vec<&str> = Policy::ALL.iter().map(|p| p.name()).collect();
        write!(f, "unknown GIL policy {:?}; known: {}", self.0, known.join(", "))
    }
}

impl std::error::Error for UnknownPolicy {}

/// A preset name that [`GilConfig::preset`] does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPreset(pub String);

impl fmt::Display for UnknownPreset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown GIL preset {:?}; known: {}", self.0, PRESETS.join(", "))
    }
}

impl std::error::Error for UnknownPreset {}

impl FromStr for Policy {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Policy::ALL
            .iter()
            .copied()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownPolicy(s.to_owned()))
    }
}

/// Checks a lazy-release threshold: the same range as the switch interval.
pub(crate) fn check_lazy_threshold(us: Option<u64>) -> Result<Option<u64>, GilError> {
    match us {
        Some(v) if v > MAX_SWITCH_INTERVAL_US => Err(GilError::InvalidLazyThreshold(v)),
        other => Ok(other),
    }
}

/// The longest accepted spin: 10 ms. Spinning longer than a fraction of a
/// switch interval only burns the CPU the holder may need.
pub const MAX_SPIN_US: u64 = 10_000;

/// Checks a spin limit; see [`MAX_SPIN_US`].
pub(crate) fn check_spin(us: u64) -> Result<u64, GilError> {
    if us <= MAX_SPIN_US {
        Ok(us)
    } else {
        Err(GilError::InvalidSpin(us))
    }
}

/// Checks a bound on laps; see [`MAX_LAPS`].
pub(crate) fn check_laps(laps: u32) -> Result<u32, GilError> {
    if laps <= MAX_LAPS {
        Ok(laps)
    } else {
        Err(GilError::InvalidLaps(laps))
    }
}

/// Checks a switch interval; see [`MAX_SWITCH_INTERVAL_US`].
pub(crate) fn check_switch_interval(us: u64) -> Result<u64, GilError> {
    if us <= MAX_SWITCH_INTERVAL_US {
        Ok(us)
    } else {
        Err(GilError::InvalidSwitchInterval(us))
    }
}

/// The default lazy-release threshold of the presets that use one, in µs.
pub const DEFAULT_LAZY_RELEASE_US: u64 = 50;

/// Named configurations for hosts that pick one by name (CPython's
/// `PYTHON_RUST_GIL`, the C ABI's `gil_config_preset`), in a stable order.
/// A host's own default for one is [`Host::preset_options`](crate::Host::preset_options).
pub const PRESETS: &[&str] = &[
    "classic",
    "priority",
    "lazy",
    "priority-lazy",
    "monitor",
    "priority-monitor",
    "priority-lazy-monitor",
];

/// A configuration's values, read back from a [`GilConfig`] or a live
/// [`Gil`](crate::Gil) (whose switch interval may have changed since).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// The switch interval in microseconds (0 behaves as 1 µs).
    pub switch_interval_us: u64,
    /// The scheduling policy.
    pub policy: Policy,
    /// The lazy-release threshold in microseconds, `None` if it is off.
    pub lazy_release_us: Option<u64>,
    /// Whether the monitor thread keeps the time.
    pub monitor: bool,
    /// The spin limit in microseconds (0: no spinning).
    pub spin_us: u64,
    /// The bound on laps (0: none), see [`GilConfig::laps`].
    pub laps: u32,
}

impl Settings {
    /// The name of the preset ([`PRESETS`]) these settings are, leaving
    /// the switch interval, the spin limit, the lazy-release threshold and
    /// the bound on laps aside (they can be set on top of any preset);
    /// `None` for a combination no preset names (classic with lazy release
    /// and the monitor).
    pub fn preset(&self) -> Option<&'static str> {
        PRESETS.iter().copied().find(|name| {
            let p = GilConfig::preset(name).map(|c| c.settings());
            p.is_ok_and(|p| {
                p.policy == self.policy
                    && p.lazy_release_us.is_some() == self.lazy_release_us.is_some()
                    && p.monitor == self.monitor
            })
        })
    }
}

/// Everything a [`Gil`](crate::Gil) is built from.
///
/// ```
/// use gil_core::{Gil, GilConfig, Policy};
/// let gil = Gil::new(GilConfig::new().switch_interval_us(1_000).policy(Policy::Classic))?;
/// assert_eq!(gil.switch_interval_us(), 1_000);
/// # Ok::<(), gil_core::GilError>(())
/// ```
#[derive(Clone, Default)]
pub struct GilConfig {
    pub(crate) switch_interval_us: Option<u64>,
    pub(crate) policy: Policy,
    pub(crate) lazy_release_us: Option<u64>,
    pub(crate) monitor: bool,
    pub(crate) spin_us: u64,
    pub(crate) laps: u32,
    pub(crate) on_drop_request: Option<DropRequestCallback>,
}

impl GilConfig {
    /// The defaults: 5 ms switch interval, [`Policy::Classic`], no lazy
    /// release, no callback.
    pub fn new() -> Self {
        Self::default()
    }

    /// A named configuration (see [`PRESETS`]):
    /// `classic` (CPython's GIL), `priority` ([`Policy::Priority`]),
    /// `lazy` (classic + lazy release), `priority-lazy` (both), and with
    /// `-monitor` the same timed by the monitor thread
    /// ([`monitor`](Self::monitor)): `monitor` (classic timing, FIFO
    /// waiters), `priority-monitor`, `priority-lazy-monitor`. The lazy ones
    /// use [`DEFAULT_LAZY_RELEASE_US`].
    ///
    /// `lazy` has no thread classes, so it cannot tell a waiting I/O thread
    /// from a CPU-bound one: it always keeps a call reserved for its thread,
    /// and with several I/O threads (a thread-per-connection server) they
    /// wait for each other's takeovers and lose much of their throughput
    /// (`docs/policies.md`). It stays as the reference for lazy release
    /// without classes (PyPy's design); `priority-lazy` hands the lock to a
    /// waiting I/O-class thread instead.
    ///
    /// # Errors
    /// [`UnknownPreset`] for any other name.
    pub fn preset(name: &str) -> Result<GilConfig, UnknownPreset> {
        let c = GilConfig::new();
        Ok(match name {
            "classic" => c,
            "priority" => c.policy(Policy::Priority),
            "lazy" => c.lazy_release_us(Some(DEFAULT_LAZY_RELEASE_US)),
            "priority-lazy" => c
                .policy(Policy::Priority)
                .lazy_release_us(Some(DEFAULT_LAZY_RELEASE_US)),
            "monitor" => c.monitor(true),
            "priority-monitor" => c.policy(Policy::Priority).monitor(true),
            "priority-lazy-monitor" => c
                .policy(Policy::Priority)
                .lazy_release_us(Some(DEFAULT_LAZY_RELEASE_US))
                .monitor(true),
            _ => return Err(UnknownPreset(name.to_owned())),
        })
    }

    /// What this configuration sets, defaults applied (the callback aside):
    /// how to learn a preset's values without building a lock.
    pub fn settings(&self) -> Settings {
        Settings {
            switch_interval_us: self.switch_interval_us.unwrap_or(DEFAULT_SWITCH_INTERVAL_US),
            policy: self.policy,
            lazy_release_us: self.lazy_release_us,
            monitor: self.monitor,
            spin_us: self.spin_us,
            laps: self.laps,
        }
    }

    /// How long a waiter waits before asking the holder to drop, in
    /// microseconds. 0 is accepted and behaves as 1 µs, as in CPython;
    /// above [`MAX_SWITCH_INTERVAL_US`] `Gil::new` fails.
    pub fn switch_interval_us(mut self, us: u64) -> Self {
        self.switch_interval_us = Some(us);
        self
    }

    /// The scheduling policy.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Lazy release around system calls (as PyPy's and Go's): with
    /// `Some(threshold_us)`, a [`ReleaseReason::Voluntary`](crate::ReleaseReason)
    /// release only marks the holder as "in a system call" (one CAS) and
    /// taking the lock back is one CAS if nobody took it meanwhile. A waiter
    /// takes the lock over only once the call has lasted `threshold_us`.
    /// `None` (the default): every release is real, as in CPython.
    pub fn lazy_release_us(mut self, threshold_us: Option<u64>) -> Self {
        self.lazy_release_us = threshold_us;
        self
    }

    /// Timing by the monitor thread (after the 2010 GIL-monitor proposal):
    /// waiters block without a timeout and are served in arrival order
    /// (within a class, under [`Policy::Priority`]; a running thread may
    /// overtake the first in line for at most one switch interval, as under
    /// that policy without the monitor); one thread per
    /// process keeps the time for every lock that has waiters: it asks a
    /// holder to drop after a switch interval without a switch, marks
    /// starving CPU-class waiters, and takes over lazily released system
    /// calls that outlast the threshold. It is started on the first wait and
    /// sleeps without a timeout while no lock has a waiter. Default: off
    /// (every waiter times its own wait, as in CPython).
    pub fn monitor(mut self, on: bool) -> Self {
        self.monitor = on;
        self
    }

    /// A bounded spin: a thread waiting for a hand-off watches the lock for
    /// up to `us` microseconds before it sleeps, so that the hand-off needs
    /// no sleep and no wake-up when it comes at once:
    ///
    /// - a waiter that has just asked the holder to drop (a priority
    ///   preemption, or the end of a switch interval);
    /// - a holder that dropped on request, waiting for the switch (forced
    ///   switching);
    /// - priority policy: a CPU-class waiter while an I/O-class thread holds
    ///   the lock (one such waiter at a time, once per holder). The I/O
    ///   thread lets go around its next call; if the lock stays free for
    ///   20 µs (the call did not return at once), the CPU thread takes it
    ///   back, and that release wakes nobody. This is what keeps a CPU
    ///   thread on its CPU beside an I/O thread, as a separate process
    ///   would be ([`Counters::cpu_spin_takes`](crate::Counters)), without
    ///   making every quick call of the I/O thread a hand-off. The waiter
    ///   keeps watching while that thread goes in and out of quick calls,
    ///   as long as it holds the lock no more than 10 µs after each, for
    ///   at most twice the limit in all. A CPU-class thread then also
    ///   takes the lock only through the waiting room, where a lock an
    ///   I/O-class thread let go of gets the same grace.
    ///
    /// 0 (the default): no spinning, as CPython. A thread that may use one
    /// CPU or fewer when it waits (its CPU affinity, or the process's
    /// cgroup CPU quota, re-read at a bounded rate: see
    /// [`Gil::spin_us_now`](crate::Gil::spin_us_now)) does not spin,
    /// whatever the limit. At most [`MAX_SPIN_US`]; `Gil::new` fails above.
    pub fn spin_us(mut self, us: u64) -> Self {
        self.spin_us = us;
        self
    }

    /// Bounded laps, for fairness among many threads that release the lock
    /// around short calls: a running thread may take the free lock before
    /// the first waiter in line (under [`Policy::Priority`] or with the
    /// monitor; the designee) only while it has taken the lock fewer than
    /// `laps` times since that waiter joined the line; after that it waits
    /// its turn behind it. As every waiter behind the designee joined after
    /// it, every other thread then takes the lock at most `laps` + 1 times
    /// while any waiter waits: a wait is bounded by the number of threads,
    /// as in a fair queue. 0 (the default): no bound; the switch-interval
    /// bound on overtaking the designee still applies. At most
    /// [`MAX_LAPS`]; `Gil::new` fails above. [`SERVER_LAPS`] (3) lets a
    /// request handler finish a request once served. Ignored by
    /// [`Policy::Classic`] without the monitor (CPython's rule: whoever
    /// gets there first).
    ///
    /// The price is throughput when the lock is saturated: a thread turned
    /// away waits for the designee to wake instead of using the free lock.
    /// With 16-256 simulated threads whose calls return at once, 3 laps put
    /// the p99 at 2-2.9x the p50 (87-1100x without) at 0.90-1.00x the
    /// round trips; in the HTTP server with 50-200 connections (where the
    /// requests in flight make the line long, but nobody laps anyone for
    /// long) it cut the p99 by up to 24 % and cost up to 19 % of the
    /// requests/s (`docs/simulator.md`, table 3e; `docs/servers.md`), which
    /// is why it is not on by default.
    pub fn laps(mut self, laps: u32) -> Self {
        self.laps = laps;
        self
    }

    /// The host's drop-request callback; see [`DropRequestCallback`].
    pub fn on_drop_request(mut self, callback: impl Fn(Token) + Send + Sync + 'static) -> Self {
        self.on_drop_request = Some(Arc::new(callback));
        self
    }
}

impl fmt::Debug for GilConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GilConfig")
            .field(
                "switch_interval_us",
                &self.switch_interval_us.unwrap_or(DEFAULT_SWITCH_INTERVAL_US),
            )
            .field("policy", &self.policy)
            .field("lazy_release_us", &self.lazy_release_us)
            .field("monitor", &self.monitor)
            .field("spin_us", &self.spin_us)
            .field("laps", &self.laps)
            .field("on_drop_request", &self.on_drop_request.is_some())
            .finish()
    }
}

#[cfg(all(test, not(gil_loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_preset_names_itself_whatever_is_set_on_top() {
        for &name in PRESETS {
            let config = GilConfig::preset(name).unwrap();
            assert_eq!(config.settings().preset(), Some(name));
            let lazy = config.settings().lazy_release_us.map(|_| 7);
            let tuned = config.switch_interval_us(123).spin_us(9).lazy_release_us(lazy).laps(3);
            assert_eq!(
                tuned.settings().preset(),
                Some(name),
                "{name} with interval, spin, threshold, laps"
            );
            let gil = crate::Gil::new(tuned.clone()).unwrap();
            assert_eq!(
                gil.settings(),
                tuned.settings(),
                "{name}: a lock reads back its configuration"
            );
        }
    }

    #[test]
    fn a_combination_no_preset_names_has_no_name() {
        let config = GilConfig::new().lazy_release_us(Some(50)).monitor(true);
        assert_eq!(config.settings().preset(), None);
    }
}
