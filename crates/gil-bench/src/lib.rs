//! Benchmarks, a simulator and demos of gil-core.
//!
//! - [`sim`]: an I/O thread and CPU-bound threads sharing one lock, measured
//!   and traced; the `gil-bench` command sweeps it over policies and thread
//!   counts and draws the timelines.
//! - [`workload`]: the pieces the simulator and the criterion benches
//!   (`benches/`) share.
//! - The `gil-demo` command: one policy, printed counters.

pub mod sim;
pub mod workload;
