//! The spin on a CPU set narrowed after the lock was made (issue 47): a
//! `priority` lock with a spin limit is made while the process may use
//! every CPU, then every thread is pinned to CPU 0. An I/O thread releases
//! the lock around a round trip through a pipe to a peer thread that
//! answers after `DELAY_US` (as a network peer does), beside a CPU thread
//! that polls drop requests. Prints the I/O thread's round trips, the CPU
//! thread's work and the I/O thread's mean wait for the lock.
//!
//! ```text
//! cargo run --release -p gil-bench --example narrowed -- [SPIN_US] [SECONDS] [DELAY_US]
//! ```
//!
//! Defaults: 200 µs, 2 s, 100 µs. Linux only (`sched_setaffinity`).

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("narrowed: Linux only (it pins threads with sched_setaffinity)");
    std::process::exit(2);
}

#[cfg(target_os = "linux")]
mod linux {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use gil_core::{Gil, GilConfig, Policy, ReleaseReason, Token};

    fn arg<T: std::str::FromStr>(n: usize, default: T) -> T {
        match std::env::args().nth(n) {
            None => default,
            Some(s) => s.parse().unwrap_or_else(|_| {
                eprintln!("narrowed: argument {n} must be a number, not '{s}'");
                std::process::exit(2);
            }),
        }
    }

    /// A pipe's (read end, write end).
    fn pipe() -> (i32, i32) {
        let mut fds = [0i32; 2];
        // SAFETY: `fds` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
        (fds[0], fds[1])
    }

    fn write_byte(fd: i32, b: u8) {
        // SAFETY: one readable byte.
        assert_eq!(unsafe { libc::write(fd, (&raw const b).cast(), 1) }, 1);
    }

    fn read_byte(fd: i32) -> u8 {
        let mut b = 0u8;
        // SAFETY: one writable byte.
        assert_eq!(unsafe { libc::read(fd, (&raw mut b).cast(), 1) }, 1);
        b
    }

    pub(super) fn main() {
        let spin_us: u64 = arg(1, 200);
        let seconds: f64 = arg(2, 2.0);
        let delay_us: u64 = arg(3, 100);
        let gil = Arc::new(Gil::new(GilConfig::new().policy(Policy::Priority).spin_us(spin_us)).unwrap());
        // Narrowed after Gil::new; the threads made below inherit it.
        // SAFETY: an all-zero cpu_set_t is a valid set; CPU 0 < CPU_SETSIZE.
        let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::CPU_SET(0, &mut one) };
        // SAFETY: `one` is a valid set of that size; 0 is this thread.
        assert_eq!(unsafe { libc::sched_setaffinity(0, size_of_val(&one), &one) }, 0);

        let stop = Arc::new(AtomicBool::new(false));
        let (ops, work, waited) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
        );
        let (to_peer_r, to_peer_w) = pipe();
        let (back_r, back_w) = pipe();
        let peer = std::thread::spawn(move || {
            while read_byte(to_peer_r) != 0 {
                std::thread::sleep(Duration::from_micros(delay_us));
                write_byte(back_w, 1);
            }
        });
        let cpu = {
            let (gil, stop, work) = (gil.clone(), stop.clone(), work.clone());
            std::thread::spawn(move || {
                let me = Token::new(2).unwrap();
                gil.acquire(me).unwrap();
                let mut n = 0u64;
                while !stop.load(Relaxed) {
                    for _ in 0..100 {
                        n = std::hint::black_box(n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
                    }
                    work.fetch_add(1, Relaxed);
                    gil.handle_drop_request(me).unwrap();
                }
                gil.release(me, ReleaseReason::Final).unwrap();
            })
        };
        let io = {
            let (gil, stop, ops, waited) = (gil.clone(), stop.clone(), ops.clone(), waited.clone());
            std::thread::spawn(move || {
                let me = Token::new(1).unwrap();
                gil.acquire(me).unwrap();
                while !stop.load(Relaxed) {
                    gil.release(me, ReleaseReason::Voluntary).unwrap();
                    write_byte(to_peer_w, 1);
                    read_byte(back_r);
                    let t = Instant::now();
                    gil.acquire(me).unwrap();
                    waited.fetch_add(t.elapsed().as_nanos() as u64, Relaxed);
                    ops.fetch_add(1, Relaxed);
                }
                gil.release(me, ReleaseReason::Final).unwrap();
            })
        };
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Relaxed);
        io.join().unwrap();
        cpu.join().unwrap();
        write_byte(to_peer_w, 0);
        peer.join().unwrap();
        let n = ops.load(Relaxed);
        println!(
            "spin_us={spin_us} spin_us_now={} io_round_trips={n} cpu_work={} io_mean_wait_us={:.1}",
            gil.spin_us_now(),
            work.load(Relaxed),
            waited.load(Relaxed) as f64 / n.max(1) as f64 / 1000.0
        );
    }
}
