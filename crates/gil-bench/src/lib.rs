//! Benchmarks, a simulator and demos of gil-core.
//!
//! - [`sim`]: I/O threads (one, or many as in a thread-per-connection
//!   server) and CPU-bound threads sharing one lock, measured and traced;
//!   the `gil-bench` command sweeps it over policies and thread counts and
//!   draws the timelines.
//! - [`scale`]: hand-off rate and wake-ups per hand-off against the number
//!   of waiting threads (`gil-bench --scale`).
//! - [`workload`]: the pieces the simulator and the criterion benches
//!   (`benches/`) share.
//! - [`os`]: a stream pair and context-switch counts, per OS.
//! - The `gil-demo` command: one policy, printed counters.

pub mod os;
pub mod scale;
pub mod sim;
pub mod workload;
