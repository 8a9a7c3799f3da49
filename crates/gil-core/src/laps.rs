//! How often a thread has taken a lock lately, for the bound on laps
//! ([`crate::GilConfig::laps`], [`crate::policy::may_overtake`]): the
//! lock's acquisition numbers of this thread's last [`MAX_LAPS`]
//! acquisitions through the waiting room (recorded only on locks with a
//! bound, where a lock whose policy ignores the bound records them
//! unread: one thread-local write per contended acquisition).
//!
//! Like a thread's class (`class.rs`), this is remembered per OS thread,
//! keyed by lock and token: nothing is stored in the lock per token, and
//! nothing needs cleaning up. Only acquisitions made while somebody waited
//! are recorded (the fast path, taken only when nobody waits, records
//! nothing), which are the only ones the bound asks about: those made
//! since the first waiter in line joined it.

use std::cell::Cell;

use crate::config::MAX_LAPS;

/// How many acquisitions are remembered: the largest bound accepted.
const KEPT: usize = MAX_LAPS as usize;
use crate::sync::thread_cell;

thread_cell! {
    /// (lock address, token, acquisition numbers, newest first; 0: none).
    static RECENT: Cell<(usize, usize, [u64; KEPT])> = Cell::new((0, 0, [0; KEPT]));
}

/// Records that `token` took `lock` as the lock's acquisition number `n`.
pub(crate) fn record(lock: usize, token: usize, n: u64) {
    RECENT.with(|c| {
        let (l, t, mut recent) = c.get();
        if l != lock || t != token {
            recent = [0; KEPT];
        }
        recent.rotate_right(1);
        recent[0] = n;
        c.set((lock, token, recent));
    });
}

/// How many of `token`'s recorded acquisitions of `lock` came after
/// acquisition number `since` (at most [`MAX_LAPS`]). Numbers above `now`
/// (the lock's count) are from before a `fork` reset it and do not count.
pub(crate) fn since(lock: usize, token: usize, since: u64, now: u64) -> usize {
    RECENT.with(|c| {
        let (l, t, recent) = c.get();
        if l != lock || t != token {
            return 0;
        }
        recent.iter().filter(|&&n| n > since && n <= now).count()
    })
}

#[cfg(all(test, not(gil_loom)))]
mod tests {
    use super::*;

    #[test]
    fn counts_the_acquisitions_after_a_number_up_to_the_bound() {
        let (lock, token) = (0x1000, 7);
        assert_eq!(since(lock, token, 0, 100), 0, "nothing recorded yet");
        for n in [10, 20, 30] {
            record(lock, token, n);
        }
        assert_eq!(since(lock, token, 5, 100), 3);
        assert_eq!(since(lock, token, 15, 100), 2);
        assert_eq!(since(lock, token, 30, 100), 0);
        // Only the last MAX_LAPS are kept.
        for n in 31..31 + KEPT as u64 + 5 {
            record(lock, token, n);
        }
        assert_eq!(since(lock, token, 0, 1000), KEPT);
        // Another token, or another lock, of the same OS thread: nothing.
        assert_eq!(since(lock, token + 1, 0, 1000), 0);
        assert_eq!(since(lock + 8, token, 0, 1000), 0);
    }

    #[test]
    fn another_token_starts_afresh_and_numbers_past_the_count_are_stale() {
        let (lock, token) = (0x2000, 1);
        record(lock, token, 50);
        record(lock, token + 1, 60);
        assert_eq!(since(lock, token + 1, 0, 100), 1, "the old token's record is gone");
        assert_eq!(since(lock, token, 0, 100), 0);
        // After a fork the lock counts from 1 again.
        record(lock, token, 90);
        assert_eq!(since(lock, token, 0, 3), 0);
    }
}
