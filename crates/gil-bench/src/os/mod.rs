//! What the benchmarks need from the OS and get differently on each: a
//! connected pair of byte streams for the I/O threads and their echo
//! peers, and the process's context switches. One module per OS.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use self::unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use self::windows::*;
