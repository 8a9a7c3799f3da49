//! Helpers shared by the test binaries (each uses some of them).
#![allow(dead_code)]

use gil_core::Token;

/// The token numbered `n` (non-zero).
pub fn tok(n: usize) -> Token {
    Token::new(n).expect("tokens are non-zero")
}
