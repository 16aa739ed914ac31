//! The error type of pando-core: decoding failures of pure data.

/// Errors of the pure layer. Every variant says what was wrong with the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("invalid base58check context hash {text:?}: {reason}")]
    BadHashText { text: String, reason: &'static str },
    #[error("truncated input: needed {needed} more bytes at byte {at}")]
    Truncated { at: usize, needed: usize },
    #[error("LEB128 integer at byte {at} overflows 64 bits")]
    VarintOverflow { at: usize },
}
