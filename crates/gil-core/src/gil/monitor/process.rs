//! The process-wide monitor thread: one per process, started by the first
//! wait on a monitored lock, keeping the time for every lock that has
//! waiters (see the parent module for what it does at each look). Under
//! loom the model's clock thread plays it, and this is a stand-in.

#[cfg(gil_loom)]
mod imp {
    use std::time::Duration;

    use crate::gil::Gil;

    /// Under loom the model's clock thread plays the monitor.
    pub(crate) fn watch(_gil: &Gil) -> bool {
        true
    }

    pub(crate) fn kick(_within: Duration) {}

    pub(crate) fn wakeups() -> u64 {
        0
    }

    /// One process under loom.
    pub(crate) fn id() -> u32 {
        1
    }
}

#[cfg(not(gil_loom))]
mod imp {
    use std::sync::atomic::{fence, AtomicPtr, AtomicU64, Ordering::*};
    use std::time::Duration;

    use crate::events::now_ns;
    use crate::gil::Gil;
    use crate::sync::{Condvar, Mutex};

    /// How long the monitor thread stays with no lock to watch before it
    /// exits. A library thread must never keep a process alive: a program
    /// whose last thread ends with `pthread_exit` (a fork child's only
    /// thread returning, say) ends at most this long after its last wait.
    /// Long enough that a program whose contention comes and goes starts
    /// the thread again at most a few times a second.
    pub(crate) const IDLE_EXIT: Duration = Duration::from_millis(100);

    /// One process's monitor. The thread comes and goes (`running`); this
    /// stays for the life of the process. A child after `fork()` makes its
    /// own: the parent's may have its mutex held by a thread that did not
    /// survive the fork, so it is never touched again (a few hundred bytes
    /// per forked child that waits, kept).
    struct Monitor {
        /// The process this monitor belongs to.
        pid: u32,
        /// The parent's monitor, in a fork child: kept reachable, so leak
        /// checkers do not report a deliberate leak as lost.
        _parent: AtomicPtr<Monitor>,
        registry: Mutex<Registry>,
        cond: Condvar,
    }

    #[derive(Default)]
    struct Registry {
        /// Locks that got their first waiter since the monitor last looked.
        incoming: Vec<Gil>,
        /// A lazy release asked for a look now.
        kicked: bool,
        /// The monitor thread exists and has not decided to exit.
        running: bool,
    }

    /// The monitor of the process that stored it; after `fork()`, in the
    /// child, the parent's (its `pid` tells). Never freed.
    static MONITOR: AtomicPtr<Monitor> = AtomicPtr::new(std::ptr::null_mut());
    static WAKEUPS: AtomicU64 = AtomicU64::new(0);

    // A kick may be skipped only if the monitor's next look will see what
    // the kicker changed. A look that started before the change may have
    // read the lock before it, so the monitor's promise ("I look again by
    // NEXT_LOOK_NS") is tied to the look that made it: LOOKS numbers the
    // looks, PROMISE_LOOK names the look whose promise NEXT_LOOK_NS is (0:
    // none, as while a look runs). A kicker that reads LOOKS = n after its
    // change, with PROMISE_LOOK = n, knows look n + 1 starts by the promise
    // and sees the change (SeqCst fences on both sides, after the change
    // and after LOOKS moves, order the two). Without the link a kick made
    // during a look was lost whenever the previous promise had expired,
    // and a lock whose holder went into a system call then waited a whole
    // switch interval for its takeover.
    static LOOKS: AtomicU64 = AtomicU64::new(0);
    static PROMISE_LOOK: AtomicU64 = AtomicU64::new(0);
    /// When the monitor looks next (`now_ns`), if PROMISE_LOOK says so.
    static NEXT_LOOK_NS: AtomicU64 = AtomicU64::new(u64::MAX);

    /// This process's id, asked of the OS at each call (`getpid()` on
    /// POSIX systems, which a fork child must not have cached).
    fn getpid() -> u32 {
        std::process::id()
    }

    /// This process's monitor, if it has one yet.
    fn current() -> Option<&'static Monitor> {
        let p = MONITOR.load(Acquire);
        // SAFETY: a published monitor is never freed.
        let monitor = unsafe { p.as_ref() }?;
        (monitor.pid == getpid()).then_some(monitor)
    }

    /// This process's monitor, made if need be (without its thread).
    fn this_process() -> &'static Monitor {
        let pid = getpid();
        let seen = MONITOR.load(Acquire);
        // SAFETY: a published monitor is never freed.
        if let Some(monitor) = unsafe { seen.as_ref() } {
            if monitor.pid == pid {
                return monitor;
            }
        }
        let fresh = Box::into_raw(Box::new(Monitor {
            pid,
            _parent: AtomicPtr::new(seen),
            registry: Mutex::new(Registry::default()),
            cond: Condvar::new(),
        }));
        match MONITOR.compare_exchange(seen, fresh, AcqRel, Acquire) {
            Ok(_) => {
                if !seen.is_null() {
                    // A fork child: its counts start afresh, and the
                    // parent's promise is no promise here.
                    WAKEUPS.store(0, Relaxed);
                    PROMISE_LOOK.store(0, SeqCst);
                }
                // SAFETY: just published; never freed from now on.
                unsafe { &*fresh }
            }
            Err(winner) => {
                // SAFETY: `fresh` came from `Box::into_raw` above and was
                // never published, so nobody else can see it.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: a published monitor is never freed. Only threads
                // of this process store here after the fork, so it is ours.
                unsafe { &*winner }
            }
        }
    }

    /// Which process a lock's registration belongs to: a registration
    /// copied into a fork child names the parent, whose monitor thread is
    /// not there.
    pub(crate) fn id() -> u32 {
        getpid()
    }

    pub(crate) fn wakeups() -> u64 {
        if current().is_some() {
            WAKEUPS.load(Relaxed)
        } else {
            0
        }
    }

    /// Puts `gil` (which has just got its first waiter; its mutex is held)
    /// in the monitor's list, starting the monitor thread if none runs.
    /// `false` if it cannot be started.
    pub(crate) fn watch(gil: &Gil) -> bool {
        let monitor = this_process();
        let mut registry = monitor.registry.lock();
        if !registry.running {
            // Spawned under the registry's mutex: the thread's first act is
            // to take it, and by then `running` and the lock are in place.
            // It keeps the library mapped until it has ended (see
            // `spawn_detached`): a program may unload it meanwhile.
            let spawned = crate::sync::spawn_detached("gil-monitor", move || run(monitor));
            if spawned.is_err() {
                return false; // waiters keep the time themselves
            }
            registry.running = true;
            PROMISE_LOOK.store(0, SeqCst);
        }
        registry.incoming.push(gil.handle());
        monitor.cond.notify_one();
        true
    }

    /// Makes the monitor look within `within` at what the caller changed
    /// just before, unless a look that will see it is due by then anyway.
    pub(crate) fn kick(within: Duration) {
        let due = now_ns().saturating_add(u64::try_from(within.as_nanos()).unwrap_or(u64::MAX));
        // Orders the caller's change before the read of LOOKS (see LOOKS).
        fence(SeqCst);
        let look = LOOKS.load(SeqCst);
        if look != 0 && PROMISE_LOOK.load(SeqCst) == look && NEXT_LOOK_NS.load(SeqCst) <= due {
            return;
        }
        let Some(monitor) = current() else {
            return; // no monitor in this process: waiters keep the time
        };
        let mut registry = monitor.registry.lock();
        if !registry.running {
            return; // no thread, so no lock in its list to look at
        }
        registry.kicked = true;
        // The next look starts as soon as the monitor wakes (LOOKS only
        // moves under the registry's mutex): no more kicks until then.
        NEXT_LOOK_NS.store(due, SeqCst);
        PROMISE_LOOK.store(LOOKS.load(SeqCst), SeqCst);
        monitor.cond.notify_one();
    }

    // Never inlined into the thread's start: in a fork child this thread
    // is gone and what only its stack pointed at (`watched`) looks lost to
    // valgrind, whose suppression (crates/gil-ffi/tests/c/valgrind.supp)
    // knows the allocation by this function's frame. Inlined, the frame
    // vanished and the C tests' fork child failed at random (whether the
    // list held a lock at the fork).
    #[inline(never)]
    fn run(monitor: &'static Monitor) {
        let mut watched: Vec<Gil> = Vec::new();
        let mut registry = monitor.registry.lock();
        loop {
            watched.append(&mut registry.incoming);
            registry.kicked = false;
            PROMISE_LOOK.store(0, SeqCst);
            let look = LOOKS.fetch_add(1, SeqCst) + 1;
            // Orders the new look number before this look's reads of the
            // locks (see LOOKS).
            fence(SeqCst);
            drop(registry);
            // Each lock is looked at under its own mutex, never under the
            // registry's: waiters take theirs first, then the registry's.
            let mut next: Option<Duration> = None;
            watched.retain(|gil| match gil.monitor_pass() {
                Some(d) => {
                    next = Some(next.map_or(d, |n| n.min(d)));
                    true
                }
                None => false,
            });
            registry = monitor.registry.lock();
            if !registry.incoming.is_empty() || registry.kicked {
                continue;
            }
            match next {
                None => {
                    // Nothing to watch: sleep until a lock gets a waiter,
                    // and exit if none does for a while. Decided under the
                    // registry's mutex, so a lock registering after this
                    // finds `running` false and starts a new thread.
                    let timed_out = monitor.cond.wait_timeout(&mut registry, IDLE_EXIT);
                    if timed_out && registry.incoming.is_empty() && !registry.kicked {
                        registry.running = false;
                        return;
                    }
                }
                Some(d) => {
                    let due = now_ns().saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
                    NEXT_LOOK_NS.store(due, SeqCst);
                    PROMISE_LOOK.store(look, SeqCst);
                    monitor.cond.wait_timeout(&mut registry, d);
                }
            }
            WAKEUPS.fetch_add(1, Relaxed);
        }
    }
}

pub(super) use imp::*;
