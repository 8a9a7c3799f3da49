//! Why a holder lets go of the lock: the one input every policy reads.

/// Why the holder lets go of the lock. Policies depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReleaseReason {
    /// Around a blocking call (CPython: `Py_BEGIN_ALLOW_THREADS`). If a drop
    /// request is pending it is answered like a forced release, as CPython's
    /// `drop_gil` does. Under the priority policy the thread becomes
    /// I/O-class; with lazy release this only marks it "in a system call".
    Voluntary,
    /// Answering a drop request (CPython: `_Py_HandlePending`). Does not
    /// return until another thread has taken the lock, unless nobody waits.
    /// Under the priority policy the thread becomes CPU-class.
    Forced,
    /// The thread will never take the lock again (it is exiting). Never waits,
    /// and the token is forgotten as last holder so nobody reads a token that
    /// may be about to dangle.
    Final,
}
