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
/// must be short and must not call into the same lock (that deadlocks).
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
}

impl Policy {
    /// Every policy, in a stable order.
    pub const ALL: &'static [Policy] = &[Policy::Classic];

    /// The policy's name, as accepted by [`FromStr`].
    pub const fn name(self) -> &'static str {
        match self {
            Policy::Classic => "classic",
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
        write!(f, "unknown GIL policy {:?}; known policies:", self.0)?;
        for p in Policy::ALL {
            write!(f, " {}", p.name())?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownPolicy {}

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

/// Checks a switch interval; see [`MAX_SWITCH_INTERVAL_US`].
pub(crate) fn check_switch_interval(us: u64) -> Result<u64, GilError> {
    if us <= MAX_SWITCH_INTERVAL_US {
        Ok(us)
    } else {
        Err(GilError::InvalidSwitchInterval(us))
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
    pub(crate) on_drop_request: Option<DropRequestCallback>,
}

impl GilConfig {
    /// The defaults: 5 ms switch interval, [`Policy::Classic`], no callback.
    pub fn new() -> Self {
        Self::default()
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
            .field("on_drop_request", &self.on_drop_request.is_some())
            .finish()
    }
}
