//! A fork child inherits its parent's monitor registrations but not the
//! monitor thread. Alone in its test binary: the test forks while no other
//! thread may be inside the lock (a monitor looking at some other test's
//! lock would look at this one too, holding its mutex).
#![cfg(all(not(gil_loom), unix))]

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use gil_core::{Event, EventKind, Gil, GilConfig, ReleaseReason};

mod common;
use common::{a_waiter_gets_the_holder_asked, in_fork_child, tok};

#[test]
fn a_lock_the_parents_monitor_listed_is_timed_in_a_fork_child() {
    // A one-second interval keeps the lock in the parent's monitor list for
    // a while after its waiters are gone (it leaves at the monitor's next
    // look). A fork child inherits that registration, but not the thread:
    // the child's waiters must get a monitor of their own. The lock is idle
    // at the fork, so the child may use it without `reinit_after_fork`.
    let gil = Arc::new(
        Gil::new(
            GilConfig::preset("priority-monitor")
                .unwrap()
                .switch_interval_us(1_000_000),
        )
        .unwrap(),
    );
    let waits = Arc::new(AtomicUsize::new(0));
    let w = waits.clone();
    gil.set_event_hook(Some(Arc::new(move |e: &Event| {
        if e.kind == EventKind::WaitStart {
            w.fetch_add(1, SeqCst);
        }
    })))
    .unwrap();
    gil.acquire(tok(1)).unwrap();
    let w = {
        let gil = gil.clone();
        thread::spawn(move || {
            gil.acquire(tok(2)).unwrap();
            gil.release(tok(2), ReleaseReason::Final).unwrap();
        })
    };
    while waits.load(SeqCst) == 0 {
        thread::sleep(Duration::from_micros(200));
    }
    // The monitor's first look at the lock (it has a waiter: it stays
    // listed until a look finds none, in about a second).
    thread::sleep(Duration::from_millis(200));
    gil.release(tok(1), ReleaseReason::Final).unwrap();
    w.join().unwrap();
    assert!(gil.is_idle());
    // Let the monitor's look at the new waiter end (its next is ~1 s away),
    // so no thread holds the lock's mutex at the fork.
    thread::sleep(Duration::from_millis(50));
    in_fork_child(|| {
        gil.set_switch_interval_us(1_000).unwrap();
        let holder = tok(0xC);
        gil.acquire(holder).unwrap();
        // Only a monitor can ask the holder to drop.
        a_waiter_gets_the_holder_asked(&gil, holder)
    });
}
