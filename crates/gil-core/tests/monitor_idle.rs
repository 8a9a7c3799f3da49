//! The monitor thread does not wake up while no lock has a waiter, and does
//! not outlive its work: it exits when idle, and the next wait starts a new
//! one. Alone in its test binary: any other monitored lock in the process
//! would wake it.
#![cfg(not(gil_loom))]

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use gil_core::{monitor_wakeups, Gil, GilConfig, ReleaseReason};

mod common;
use common::tok;

/// How many threads of this process are named `gil-monitor`.
fn monitor_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == "gil-monitor")
        .count()
}

/// Two threads take turns on `gil` through drop requests, which only the
/// monitor raises on a monitored lock.
fn contend(gil: &Arc<Gil>) {
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
}

#[test]
fn an_idle_monitor_neither_wakes_up_nor_stays() {
    let gil = Arc::new(Gil::new(GilConfig::preset("priority-monitor").unwrap().switch_interval_us(1_000)).unwrap());
    assert_eq!(monitor_wakeups(), 0, "no monitor before the first wait");
    assert_eq!(monitor_threads(), 0, "no monitor thread before the first wait");
    // Contend for a while: the monitor starts and works.
    contend(&gil);
    assert!(monitor_wakeups() > 0, "the monitor kept the time");
    // Its last look finds no waiter (within one interval), then it sleeps.
    // On a busy machine that look may come late: wait until the count has
    // stood still for 200 ms (a monitor that kept waking up would never
    // get there, and the check below says so).
    let mut idle_from = monitor_wakeups();
    for _ in 0..150 {
        thread::sleep(Duration::from_millis(200));
        let now = monitor_wakeups();
        if now == idle_from {
            break;
        }
        idle_from = now;
    }
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
    // Idle for longer than its idle limit: the thread is gone (a library
    // thread must not keep a process alive), within a generous bound.
    let mut waited = Duration::ZERO;
    while monitor_threads() > 0 && waited < Duration::from_secs(30) {
        thread::sleep(Duration::from_millis(10));
        waited += Duration::from_millis(10);
    }
    assert_eq!(monitor_threads(), 0, "the idle monitor thread did not exit");
    // The next contention starts a new one, which keeps the time again.
    contend(&gil);
    assert!(monitor_wakeups() > idle_from, "a new monitor kept the time");
}
