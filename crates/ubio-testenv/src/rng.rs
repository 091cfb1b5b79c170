//! splitmix64: the one seeded generator of the test environment, the
//! benchmark harness (random offsets, the data pattern, run order) and the
//! exerciser ubio-fsx (its whole sequence of operations follows from the
//! seed). Small, fast and reproducible; not for anything that needs to be
//! unpredictable.

/// A splitmix64 stream; the same seed gives the same numbers.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN_GAMMA);
        mix(self.0)
    }

    /// A number in `0..n` (`n` > 0), by multiply-shift (no modulo bias).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// True once in `one_in` calls on average.
    pub fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }

    /// A number in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Fill `buf` with the stream's numbers, each little endian (the last
    /// one cut to fit): seeded, incompressible data.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            chunk.copy_from_slice(&self.next_u64().to_le_bytes()[..chunk.len()]);
        }
    }
}

/// splitmix64's increment (2^64 / the golden ratio).
pub const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The splitmix64 finaliser: a good 64-bit mix of `x`.
pub fn mix(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_seeded_and_in_range() {
        let (mut a, mut b) = (SplitMix64(5), SplitMix64(5));
        assert_eq!(a.next_u64(), b.next_u64());
        let mut seen = [false; 10];
        for _ in 0..1000 {
            seen[a.below(10) as usize] = true;
            assert!((0.0..1.0).contains(&b.unit()));
        }
        assert!(seen.iter().all(|s| *s));
    }
}
