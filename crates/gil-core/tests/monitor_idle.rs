//! The monitor thread does not wake up while no lock has a waiter. Alone in
//! its test binary: any other monitored lock in the process would wake it.
#![cfg(not(gil_loom))]

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use gil_core::{monitor_wakeups, Gil, GilConfig, ReleaseReason, Token};

fn tok(n: usize) -> Token {
    Token::new(n).expect("non-zero")
}

#[test]
fn no_wakeups_while_no_lock_has_a_waiter() {
    let gil = Arc::new(Gil::new(GilConfig::preset("priority-monitor").unwrap().switch_interval_us(1_000)).unwrap());
    assert_eq!(monitor_wakeups(), 0, "no monitor before the first wait");
    // Contend for a while: the monitor starts and works.
    let workers: Vec<_> = [1, 2]
        .into_iter()
        .map(|n| {
            let gil = gil.clone();
            thread::spawn(move || {
                let me = tok(n);
                gil.acquire(me).unwrap();
                let mut switches = 0;
                while switches < 5 {
                    if gil.handle_drop_request(me).unwrap() {
                        switches += 1;
                    }
                }
                gil.release(me, ReleaseReason::Final).unwrap();
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert!(monitor_wakeups() > 0, "the monitor kept the time");
    // Its last look finds no waiter (within one interval), then it sleeps.
    thread::sleep(Duration::from_millis(100));
    let idle_from = monitor_wakeups();
    // The lock is still used, without contention.
    for _ in 0..1000 {
        gil.acquire(tok(3)).unwrap();
        gil.release(tok(3), ReleaseReason::Voluntary).unwrap();
    }
    thread::sleep(Duration::from_millis(500));
    assert_eq!(
        monitor_wakeups(),
        idle_from,
        "the monitor woke up with no waiter anywhere"
    );
}
