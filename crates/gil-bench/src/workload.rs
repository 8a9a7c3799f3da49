//! The workloads the simulator and the criterion benches share: a counter
//! that proves mutual exclusion, the CPU work unit and the CPU-bound thread
//! body, and the echo peer of the I/O threads.

use std::hint::black_box;
use std::io::{self, Read, Write};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use gil_core::{Gil, ReleaseReason, Token};

use crate::os::{stream_pair, Stream};

// ---- proof of exclusion -------------------------------------------------------

/// A counter only ever bumped by whoever holds the lock under test, with a
/// plain load and a plain store instead of a read-modify-write. If two
/// threads were ever inside at once, bumps would be lost and the total would
/// come out short: the exact total after a run proves mutual exclusion (and
/// the lock's acquire/release ordering, which publishes each holder's
/// store to the next).
#[derive(Default)]
pub struct ExclusiveCounter(CachePadded<AtomicU64>);

impl ExclusiveCounter {
    /// Adds one. Call only while holding the lock under test.
    #[inline]
    pub fn bump(&self) {
        self.0.store(self.0.load(Relaxed) + 1, Relaxed);
    }

    /// The total so far, set back to 0 (between runs, by the bench thread).
    pub fn take(&self) -> u64 {
        self.0.swap(0, Acquire)
    }
}

// ---- CPU work -----------------------------------------------------------------

/// xorshift rounds in one [`work_unit`].
const WORK_ROUNDS: u32 = 500;

/// A unit of "bytecode": pure arithmetic, about a microsecond; the
/// CPU-bound threads poll for drop requests between units, as an
/// interpreter does between instructions.
#[inline]
pub fn work_unit(seed: u64) -> u64 {
    let mut x = black_box(seed) | 1;
    for _ in 0..WORK_ROUNDS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    black_box(x)
}

/// A CPU-bound thread on the GIL: takes the lock, then does work units while
/// `more(units_done)` says so, each one counted in `shared` under the lock,
/// answering drop requests between units; at the end a final release (so the
/// lock is idle after the run even with lazy release). Returns the units done.
pub fn gil_cpu_thread(gil: &Gil, me: Token, shared: &ExclusiveCounter, mut more: impl FnMut(u64) -> bool) -> u64 {
    let mut done = 0;
    let mut seed = me.get() as u64;
    gil.acquire(me).expect("acquire");
    while more(done) {
        seed = work_unit(seed);
        shared.bump();
        done += 1;
        if gil.drop_requested() {
            gil.handle_drop_request(me).expect("answer a drop request");
        }
    }
    gil.release(me, ReleaseReason::Final).expect("release");
    done
}

/// The control's CPU-bound thread: the same work units, without the lock,
/// as a separate process would do them (it shares the CPUs, not the lock).
/// Returns the units done.
pub fn free_cpu_thread(me: Token, mut more: impl FnMut(u64) -> bool) -> u64 {
    let mut done = 0;
    let mut seed = me.get() as u64;
    while more(done) {
        seed = work_unit(seed);
        done += 1;
    }
    black_box(seed);
    done
}

// ---- I/O ------------------------------------------------------------------------

/// The other end of an I/O thread's socket: a thread that does not use any
/// lock, reads whole messages of a fixed length and writes each one back,
/// at once or after a delay (a server's think time).
pub struct EchoPeer {
    handle: JoinHandle<io::Result<u64>>,
}

impl EchoPeer {
    /// A connected socket pair; the peer serves one end until the other is
    /// closed, sleeping `delay` (if not zero) before each answer. Returns the
    /// other end.
    pub fn spawn(message_len: usize, delay: Duration) -> io::Result<(Stream, EchoPeer)> {
        let (ours, theirs) = stream_pair()?;
        let handle = thread::Builder::new()
            .name("echo-peer".into())
            .spawn(move || echo(theirs, message_len, delay))?;
        Ok((ours, EchoPeer { handle }))
    }

    /// Waits for the peer to see the socket closed; returns how many
    /// messages it echoed, or the peer's I/O error.
    pub fn join(self) -> io::Result<u64> {
        self.handle
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the echo peer panicked")))
    }
}

fn echo(mut stream: Stream, message_len: usize, delay: Duration) -> io::Result<u64> {
    let mut buf = vec![0u8; message_len];
    let mut echoed = 0;
    loop {
        // A whole message before answering, so that neither side ever
        // writes while the other is writing too (no buffer deadlock).
        match stream.read_exact(&mut buf) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(echoed),
            Err(e) => return Err(e),
        }
        if !delay.is_zero() {
            // A sleep, not a spin: on 2 cores a spinning peer would take
            // the CPU threads' core. The kernel's timer slack adds ~50 µs.
            thread::sleep(delay);
        }
        stream.write_all(&buf)?;
        echoed += 1;
    }
}

/// Stamps a message with `seq`: in its first 8 bytes and its last byte, so
/// that an echo of another message, or one shifted or cut short, differs.
pub fn stamp(message: &mut [u8], seq: u64) {
    let head = seq.to_le_bytes();
    let n = head.len().min(message.len());
    message[..n].copy_from_slice(&head[..n]);
    let fill = seq as u8;
    if let Some(last) = message.get_mut(n..).and_then(|rest| rest.last_mut()) {
        *last = fill;
    }
}
