//! The lock's settings, as built from its [`GilConfig`]: fixed for its
//! life but for the switch interval, which
//! [`Gil::set_switch_interval_us`](crate::Gil::set_switch_interval_us)
//! may change. Each is read where it decides something; none is written
//! elsewhere.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use crate::config::DropRequestCallback;
use crate::policy;
use crate::sync::AtomicU64;
use crate::{GilConfig, GilError, Policy, Settings};

/// A lock's settings (see the module docs).
pub(super) struct Tuning {
    /// The settings as built; their switch interval is `interval_us`'s.
    settings: Settings,
    /// The switch interval in microseconds, as set (0 behaves as 1 µs).
    interval_us: AtomicU64,
    /// `Some(threshold)` when lazy release is on.
    lazy_release: Option<Duration>,
    /// How long a thread waiting for a hand-off spins before sleeping
    /// (`GilConfig::spin_us`), while spinning can help ([`Tuning::spin_limit`]).
    spin: Option<Duration>,
    /// A CPU-class thread always takes the lock through the waiting room
    /// ([`policy::cpu_through_room`]).
    cpu_through_room: bool,
    on_drop_request: Option<DropRequestCallback>,
}

impl Tuning {
    /// The settings `config` asks for.
    ///
    /// # Errors
    /// As [`Gil::new`](crate::Gil::new): a setting out of its range
    /// ([`Settings::check`]).
    pub(super) fn new(config: GilConfig) -> Result<Tuning, GilError> {
        let (s, on_drop_request) = config.into_parts();
        s.check()?;
        Ok(Tuning {
            settings: s,
            interval_us: AtomicU64::new(s.switch_interval_us),
            lazy_release: s.lazy_release_us.map(Duration::from_micros),
            spin: (s.spin_us > 0).then(|| Duration::from_micros(s.spin_us)),
            cpu_through_room: policy::cpu_through_room(s.policy, s.spin_us > 0),
            on_drop_request,
        })
    }

    #[inline]
    pub(super) fn policy(&self) -> Policy {
        self.settings.policy
    }

    /// The lazy-release threshold, `None` if lazy release is off.
    #[inline]
    pub(super) fn lazy_release(&self) -> Option<Duration> {
        self.lazy_release
    }

    /// Whether the monitor thread keeps the time.
    #[inline]
    pub(super) fn monitored(&self) -> bool {
        self.settings.monitor
    }

    /// Whether a CPU-class thread always takes the lock through the
    /// waiting room.
    #[inline]
    pub(super) fn cpu_through_room(&self) -> bool {
        self.cpu_through_room
    }

    /// The bound on laps (0: none).
    pub(super) fn laps(&self) -> u32 {
        self.settings.laps
    }

    /// The host's drop-request callback, if any.
    pub(super) fn on_drop_request(&self) -> Option<&DropRequestCallback> {
        self.on_drop_request.as_ref()
    }

    /// The spin limit as configured, in microseconds (0: no spinning).
    pub(super) fn spin_us(&self) -> u64 {
        self.settings.spin_us
    }

    /// The spin limit in effect for the calling thread now: none while the
    /// CPUs it may use are one or fewer (see `Gil::spin_us_now`), which is
    /// re-read at a bounded rate.
    pub(super) fn spin_limit(&self) -> Option<Duration> {
        self.spin.filter(|_| crate::sync::spinning_helps())
    }

    /// How long the calling thread, having just asked the holder to drop
    /// at once (a preemption if `preemption`) while `census` wait, watches
    /// for the release before it sleeps ([`policy::ask_spin`]): none while
    /// the CPUs it may use are one or fewer, as every spin.
    pub(super) fn ask_spin(&self, preemption: bool, census: policy::Census) -> Option<Duration> {
        policy::ask_spin(self.spin, preemption, census).filter(|_| crate::sync::spinning_helps())
    }

    /// The switch interval in microseconds, as set.
    pub(super) fn interval_us(&self) -> u64 {
        self.interval_us.load(Relaxed)
    }

    /// The switch interval in effect (0 set means 1 µs).
    pub(super) fn interval(&self) -> Duration {
        Duration::from_micros(self.interval_us().max(1))
    }

    /// Sets the switch interval.
    ///
    /// # Errors
    /// [`GilError::InvalidSetting`] if out of range; unchanged then.
    pub(super) fn set_interval_us(&self, us: u64) -> Result<(), GilError> {
        let settings = Settings {
            switch_interval_us: us,
            ..self.settings
        };
        settings.check()?;
        self.interval_us.store(us, Relaxed);
        Ok(())
    }

    /// The settings as they stand.
    pub(super) fn settings(&self) -> Settings {
        Settings {
            switch_interval_us: self.interval_us(),
            ..self.settings
        }
    }
}
