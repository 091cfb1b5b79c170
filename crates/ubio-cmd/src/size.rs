//! Byte sizes on the command lines ("16M", "1GiB", "4096") and in output.

/// Parse a size: a number with an optional K, M, G or T suffix (the
/// library's parser, shared with the LD_PRELOAD shim).
pub use ubio::size::parse;

/// Parse a size that must be more than 0 (a window or a block: 0 would
/// mean nothing can be in flight, or nothing moves).
pub fn parse_nonzero(s: &str) -> Result<u64, String> {
    match parse(s)? {
        0 => Err(format!("invalid size '{s}': must be more than 0")),
        n => Ok(n),
    }
}

/// "1.5 GiB" style: the library's formatter, which the bench reports use
/// too, so both programs print sizes one way everywhere.
pub use ubio::size::human;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonzero_sizes() {
        assert!(parse_nonzero("0").unwrap_err().contains("more than 0"));
        assert_eq!(parse_nonzero("1k"), Ok(1024));
    }
}
