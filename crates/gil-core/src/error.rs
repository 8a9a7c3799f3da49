//! Errors: every misuse of the lock is reported as a value.

use std::fmt;

/// What went wrong in a call on a [`Gil`](crate::Gil).
///
/// Every variant leaves the lock exactly as it was before the call: a failed
/// call changes nothing (except [`GilError::Aborted`], which by design
/// returns without the lock).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GilError {
    /// `release` (or `handle_drop_request`) by a token that does not hold
    /// the lock.
    NotHolder,
    /// `acquire` or `try_acquire` by the token that already holds the lock.
    /// The lock is not re-entrant: the call would otherwise deadlock.
    AlreadyHeld,
    /// A number setting above its range
    /// ([`NumberSetting::max`](crate::NumberSetting::max)): a lock cannot
    /// be built with it.
    InvalidSetting {
        /// The setting's key.
        key: crate::Key,
        /// The value given.
        value: u64,
    },
    /// `close` of a lock that is held or awaited.
    Busy,
    /// `acquire_or_abort` gave up because its abort check said so.
    Aborted,
    /// An event mask with no kind of event in it, or with bits that name
    /// none (the bits given).
    InvalidEventMask(u32),
    /// `remove_event_hook` of a handle that names no installed hook (it was
    /// removed already, or never added to this lock).
    UnknownHook(u64),
    /// A call on the lock from inside one of its own callbacks (an event
    /// hook, the drop-request callback, an abort check), which would wait
    /// for the calling thread itself. Nothing changed.
    Reentrant,
    /// `tag_thread` of a token with no accounting record (no event of it
    /// while accounting was on, and it does not hold the lock).
    UnknownThread,
    /// `tag_thread` from a thread other than the one that made the token's
    /// latest accounting event: a record has one writer. Nothing changed.
    ForeignThread,
}

impl GilError {
    /// Whether this is a setting out of its range, one a lock cannot be
    /// built with (the C ABI's `GIL_ERR_INVALID_CONFIG`).
    pub fn is_invalid_setting(&self) -> bool {
        matches!(self, GilError::InvalidSetting { .. })
    }

    /// One error of each kind, for bindings to check that they map every
    /// kind (the C ABI's result codes). A new variant must be added here:
    /// the match below stops compiling until it is.
    #[doc(hidden)]
    pub fn every_kind() -> Vec<GilError> {
        let all = vec![
            GilError::NotHolder,
            GilError::AlreadyHeld,
            GilError::InvalidSetting {
                key: crate::Key::IntervalUs,
                value: 0,
            },
            GilError::Busy,
            GilError::Aborted,
            GilError::InvalidEventMask(0),
            GilError::UnknownHook(0),
            GilError::Reentrant,
            GilError::UnknownThread,
            GilError::ForeignThread,
        ];
        for e in &all {
            match e {
                GilError::NotHolder
                | GilError::AlreadyHeld
                | GilError::InvalidSetting { .. }
                | GilError::Busy
                | GilError::Aborted
                | GilError::InvalidEventMask(_)
                | GilError::UnknownHook(_)
                | GilError::Reentrant
                | GilError::UnknownThread
                | GilError::ForeignThread => {}
            }
        }
        all
    }
}

impl fmt::Display for GilError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GilError::NotHolder => f.write_str("the calling token does not hold the lock"),
            GilError::AlreadyHeld => f.write_str("the calling token already holds the lock (it is not re-entrant)"),
            GilError::InvalidSetting { key, value } => {
                let (max, unit) = match key.setting() {
                    Some(s) => (s.max, if s.micros { " µs" } else { "" }),
                    None => (0, ""),
                };
                write!(f, "{key}={value}{unit} is out of range (at most {max}{unit})")
            }
            GilError::InvalidEventMask(0) => f.write_str("an event mask must name at least one kind of event"),
            GilError::InvalidEventMask(bits) => write!(
                f,
                "event mask {bits:#x} has bits that name no kind of event (valid: {:#x})",
                crate::EventMask::ALL.bits()
            ),
            GilError::UnknownHook(id) => write!(f, "no event hook {id} is installed on this lock"),
            GilError::Busy => f.write_str("the lock is held or awaited"),
            GilError::Aborted => f.write_str("the wait for the lock was aborted by the caller's check"),
            GilError::Reentrant => f.write_str(
                "called from inside one of the lock's own callbacks (event hook, drop-request callback, abort check)",
            ),
            GilError::UnknownThread => f.write_str("the token has no accounting record"),
            GilError::ForeignThread => f.write_str(
                "the token's accounting record belongs to another thread (tag it from the thread using the token)",
            ),
        }
    }
}

impl std::error::Error for GilError {}
