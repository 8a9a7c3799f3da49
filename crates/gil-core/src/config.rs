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

pub use crate::policy::{HANDOVER_INTERVALS, MAX_HANDOVER_INTERVALS, STARVATION_INTERVALS, TURN_INTERVALS};

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

/// The longest accepted spin: 10 ms. Spinning longer than a fraction of a
/// switch interval only burns the CPU the holder may need.
pub const MAX_SPIN_US: u64 = 10_000;

/// A key of the options text ([`crate::options`]): a number setting's
/// (see [`NUMBER_SETTINGS`]) or an observer's.
///
/// A new key goes at the end of [`Key::ALL`]: its place there is its bit
/// ([`Key::bit`]), which the C ABI's `GIL_OPTION_*` constants fix.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    /// `interval_us`: the switch interval.
    IntervalUs,
    /// `lazy_us`: the lazy-release threshold.
    LazyUs,
    /// `spin_us`: the spin limit.
    SpinUs,
    /// `laps`: the bound on laps.
    Laps,
    /// `stats`: per-thread accounting from the start.
    Stats,
    /// `trace`: a trace file.
    Trace,
    /// `trace_ring`: a ring trace's size.
    TraceRing,
}

impl Key {
    /// Every key, in the order [`Options`](crate::Options) writes them.
    pub const ALL: [Key; 7] = [
        Key::IntervalUs,
        Key::LazyUs,
        Key::SpinUs,
        Key::Laps,
        Key::Stats,
        Key::Trace,
        Key::TraceRing,
    ];

    /// The key as written in the text.
    pub const fn name(self) -> &'static str {
        match self {
            Key::IntervalUs => "interval_us",
            Key::LazyUs => "lazy_us",
            Key::SpinUs => "spin_us",
            Key::Laps => "laps",
            Key::Stats => "stats",
            Key::Trace => "trace",
            Key::TraceRing => "trace_ring",
        }
    }

    /// Whether the key asks for an observer (accounting or a trace) rather
    /// than setting the lock.
    pub const fn is_observer(self) -> bool {
        matches!(self, Key::Stats | Key::Trace | Key::TraceRing)
    }

    /// The number setting this key sets, `None` for an observer's key.
    pub fn setting(self) -> Option<&'static NumberSetting> {
        NUMBER_SETTINGS.iter().find(|s| s.key == self)
    }

    /// This key's bit in [`Options::given_mask`](crate::Options::given_mask) (and the C ABI's
    /// `GIL_OPTION_*`): `1 << ` its place in [`Key::ALL`].
    pub const fn bit(self) -> u32 {
        1 << self as u32
    }

    /// The key named `name` as written in the text (bytes, as a C host
    /// passes them), `None` if there is none.
    pub fn from_name(name: &[u8]) -> Option<Key> {
        Key::ALL.into_iter().find(|k| k.name().as_bytes() == name)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a preset must have for a text to give a key (`laps` on `classic`
/// would be ignored, so it is refused): the check and what it asks for.
#[derive(Debug, Clone, Copy)]
pub struct Needs {
    /// What the preset must have, for messages: "a policy with lazy
    /// release (lazy, ...)".
    pub what: &'static str,
    holds: fn(&Settings) -> bool,
}

/// A number setting: its key, the values it takes, and where it lives in
/// [`Settings`]. [`NUMBER_SETTINGS`] lists them, and everything that
/// handles number settings reads that list: the options grammar, the text
/// a lock prints ([`Options::from_settings`](crate::Options::from_settings)),
/// `Gil::new`'s range checks, the C ABI's `gil_setting_key` and
/// `gil_get_setting`. So a new one is a field of [`Settings`], its
/// [`GilConfig`] method, its [`Key`] and a row here; the lock's rule
/// reads the field.
#[derive(Debug, Clone, Copy)]
pub struct NumberSetting {
    /// Its key in the options text.
    pub key: Key,
    /// The least value a text may give: 0, but 1 for `lazy_us` (0 is
    /// lazy release off in the C ABI's `gil_config_t`).
    pub min: u64,
    /// The largest value accepted; `Gil::new` fails above.
    pub max: u64,
    /// Whether the value is in microseconds (for messages).
    pub micros: bool,
    /// What a preset must have for a text to give this key; `None`: any.
    pub needs: Option<Needs>,
    get: fn(&Settings) -> Option<u64>,
    set: fn(&mut Settings, u64),
}

/// The number settings, in [`Key::ALL`] order; see [`NumberSetting`].
pub const NUMBER_SETTINGS: &[NumberSetting] = &[
    NumberSetting {
        key: Key::IntervalUs,
        min: 0,
        max: MAX_SWITCH_INTERVAL_US,
        micros: true,
        needs: None,
        get: |s| Some(s.switch_interval_us),
        set: |s, v| s.switch_interval_us = v,
    },
    NumberSetting {
        key: Key::LazyUs,
        min: 1,
        max: MAX_SWITCH_INTERVAL_US,
        micros: true,
        needs: Some(Needs {
            what: "a policy with lazy release (lazy, priority-lazy, priority-lazy-monitor)",
            holds: |s| s.lazy_release_us.is_some(),
        }),
        get: |s| s.lazy_release_us,
        set: |s, v| s.lazy_release_us = Some(v),
    },
    NumberSetting {
        key: Key::SpinUs,
        min: 0,
        max: MAX_SPIN_US,
        micros: true,
        needs: None,
        get: |s| Some(s.spin_us),
        set: |s, v| s.spin_us = v,
    },
    NumberSetting {
        key: Key::Laps,
        min: 0,
        max: MAX_LAPS as u64,
        micros: false,
        needs: Some(Needs {
            what: "a policy that bounds overtaking (a priority or monitor preset; classic keeps CPython's rule)",
            holds: |s| s.policy != Policy::Classic || s.monitor,
        }),
        get: |s| Some(u64::from(s.laps)),
        set: |s, v| s.laps = u32::try_from(v).unwrap_or(u32::MAX),
    },
];

impl NumberSetting {
    /// The value in `settings`; `None` while it is not in effect (the
    /// lazy-release threshold of a lock without lazy release).
    pub fn get(&self, settings: &Settings) -> Option<u64> {
        (self.get)(settings)
    }

    /// Sets the value in `settings`, unchecked: [`Settings::check`] and
    /// `Gil::new` check it.
    pub fn set(&self, settings: &mut Settings, value: u64) {
        (self.set)(settings, value);
    }

    /// Whether a text may give this key on top of `settings`' preset (see
    /// [`NumberSetting::needs`]).
    pub fn taken_by(&self, settings: &Settings) -> bool {
        self.needs.is_none_or(|n| (n.holds)(settings))
    }

    /// `value` if it is at most [`max`](Self::max), else the error naming
    /// the setting.
    pub(crate) fn check(&self, value: u64) -> Result<u64, GilError> {
        if value <= self.max {
            Ok(value)
        } else {
            Err(GilError::InvalidSetting { key: self.key, value })
        }
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

impl Default for Settings {
    /// [`GilConfig::new`]'s: CPython's GIL with its 5 ms switch interval.
    fn default() -> Settings {
        Settings {
            switch_interval_us: DEFAULT_SWITCH_INTERVAL_US,
            policy: Policy::Classic,
            lazy_release_us: None,
            monitor: false,
            spin_us: 0,
            laps: 0,
        }
    }
}

impl Settings {
    /// Whether a lock can be built with these settings: each number
    /// setting within its range ([`NUMBER_SETTINGS`]).
    ///
    /// # Errors
    /// [`GilError::InvalidSetting`] naming the first one out of its range.
    pub fn check(&self) -> Result<(), GilError> {
        for setting in NUMBER_SETTINGS {
            if let Some(value) = setting.get(self) {
                setting.check(value)?;
            }
        }
        Ok(())
    }

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
    settings: Settings,
    on_drop_request: Option<DropRequestCallback>,
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
        self.settings
    }

    /// A configuration with these settings and no callback.
    pub fn with_settings(settings: Settings) -> Self {
        GilConfig {
            settings,
            on_drop_request: None,
        }
    }

    /// The callback and the settings, for `Gil::new`.
    pub(crate) fn into_parts(self) -> (Settings, Option<DropRequestCallback>) {
        (self.settings, self.on_drop_request)
    }

    /// How long a waiter waits before asking the holder to drop, in
    /// microseconds. 0 is accepted and behaves as 1 µs, as in CPython;
    /// above [`MAX_SWITCH_INTERVAL_US`] `Gil::new` fails.
    pub fn switch_interval_us(mut self, us: u64) -> Self {
        self.settings.switch_interval_us = us;
        self
    }

    /// The scheduling policy.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.settings.policy = policy;
        self
    }

    /// Lazy release around system calls (as PyPy's and Go's): with
    /// `Some(threshold_us)`, a [`ReleaseReason::Voluntary`](crate::ReleaseReason)
    /// release only marks the holder as "in a system call" (one CAS) and
    /// taking the lock back is one CAS if nobody took it meanwhile. A waiter
    /// takes the lock over only once the call has lasted `threshold_us`.
    /// `None` (the default): every release is real, as in CPython.
    pub fn lazy_release_us(mut self, threshold_us: Option<u64>) -> Self {
        self.settings.lazy_release_us = threshold_us;
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
        self.settings.monitor = on;
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
    /// Under [`Policy::Priority`] an I/O-class thread that has just asked a
    /// CPU-class holder to drop at once (a preemption) watches for the
    /// release at least 10 µs, with any limit and with none, if no other
    /// I/O-class thread waits: the holder, running, lets go within
    /// microseconds, and the look spares the I/O thread a wake-up at every
    /// round trip beside a CPU thread.
    ///
    /// 0 (the default): no spinning but that look (CPython has no spin). A
    /// thread that may use one CPU or fewer when it waits (its CPU
    /// affinity, or the process's cgroup CPU quota, re-read at a bounded rate: see
    /// [`Gil::spin_us_now`](crate::Gil::spin_us_now)) does not spin,
    /// whatever the limit. At most [`MAX_SPIN_US`]; `Gil::new` fails above.
    pub fn spin_us(mut self, us: u64) -> Self {
        self.settings.spin_us = us;
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
        self.settings.laps = laps;
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
            .field("settings", &self.settings)
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
    fn every_key_but_the_observers_has_one_row_in_key_order() {
        let keys: Vec<Key> = Key::ALL.into_iter().filter(|k| !k.is_observer()).collect();
        let rows: Vec<Key> = NUMBER_SETTINGS.iter().map(|s| s.key).collect();
        assert_eq!(rows, keys);
        for key in Key::ALL {
            assert_eq!(key.setting().is_some(), !key.is_observer(), "{key}");
            assert_eq!(Key::from_name(key.name().as_bytes()), Some(key));
        }
    }

    /// A preset that takes `setting`, with it in effect.
    fn taking(setting: &NumberSetting) -> Settings {
        let taken = PRESETS
            .iter()
            .map(|p| GilConfig::preset(p).unwrap().settings())
            .find(|s| setting.taken_by(s) && setting.get(s).is_some());
        taken.unwrap_or_else(|| panic!("no preset takes {}", setting.key))
    }

    #[test]
    fn a_lock_takes_each_setting_up_to_its_max_and_refuses_one_more() {
        for setting in NUMBER_SETTINGS {
            let mut s = taking(setting);
            setting.set(&mut s, setting.max);
            let gil = crate::Gil::new(GilConfig::with_settings(s)).unwrap();
            assert_eq!(setting.get(&gil.settings()), Some(setting.max), "{}", setting.key);
            setting.set(&mut s, setting.max + 1);
            assert_eq!(
                crate::Gil::new(GilConfig::with_settings(s)).err(),
                Some(GilError::InvalidSetting {
                    key: setting.key,
                    value: setting.max + 1
                }),
            );
            let message = s.check().unwrap_err().to_string();
            assert!(
                message.starts_with(&format!("{}={}", setting.key, setting.max + 1)),
                "{message}"
            );
        }
    }

    #[test]
    fn a_setting_reads_back_what_was_set() {
        for setting in NUMBER_SETTINGS {
            let mut s = taking(setting);
            for value in [setting.min, setting.max / 2, setting.max] {
                setting.set(&mut s, value);
                assert_eq!(setting.get(&s), Some(value), "{}", setting.key);
            }
        }
    }

    #[test]
    fn a_combination_no_preset_names_has_no_name() {
        let config = GilConfig::new().lazy_release_us(Some(50)).monitor(true);
        assert_eq!(config.settings().preset(), None);
    }
}
