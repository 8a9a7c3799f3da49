//! Thread identity as the host sees it.

use std::num::NonZeroUsize;

/// An opaque, non-zero value that names one host thread (CPython passes its
/// `PyThreadState*`).
///
/// The lock compares tokens and hands them back (to the drop-request
/// callback, to `holder()`), but never dereferences them. Two threads must
/// not use the same token at the same time; a token may be reused after its
/// thread's final release (hosts recycle thread-state memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct Token(NonZeroUsize);

impl Token {
    /// A token from a raw value; `None` for zero, which means "no thread".
    #[inline]
    pub const fn new(raw: usize) -> Option<Token> {
        match NonZeroUsize::new(raw) {
            Some(v) => Some(Token(v)),
            None => None,
        }
    }

    /// A token from a pointer's address; `None` for a null pointer.
    #[inline]
    pub fn from_ptr<T: ?Sized>(ptr: *const T) -> Option<Token> {
        Token::new(ptr.cast::<()>() as usize)
    }

    /// The raw value this token was made from.
    #[inline]
    pub const fn get(self) -> usize {
        self.0.get()
    }
}
