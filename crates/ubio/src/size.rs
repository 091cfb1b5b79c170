//! Byte sizes as people write them ("16M", "1GiB", "4096") and read them
//! ("1.5 GiB"): one parser and one formatter for the command, the
//! LD_PRELOAD shim's environment and the benchmark reports.

/// Parse a size: a number with an optional K, M, G or T suffix (powers of
/// 1024; "KiB"/"KB"/"k" all accepted). The error says what was wrong.
pub fn parse(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid size '{s}': expected a number like 16M or 1G"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => {
            return Err(format!(
                "invalid size '{s}': unknown unit '{unit}' (use K, M, G or T)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("invalid size '{s}': too large"))
}

/// "1.5 GiB" style (powers of 1024).
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse("4096"), Ok(4096));
        assert_eq!(parse("16M"), Ok(16 << 20));
        assert_eq!(parse("1GiB"), Ok(1 << 30));
        assert_eq!(parse("2k"), Ok(2048));
        assert!(parse("12Q").is_err());
        assert!(parse("").is_err());
        assert!(parse("99999999999T").is_err());
    }

    #[test]
    fn human_readable() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(16 << 20), "16.0 MiB");
    }
}
