//! The kernel's `name value` tables: /proc/vmstat, /proc/meminfo and a
//! memory cgroup's memory.stat, read into maps (one parser for all three).

use std::collections::HashMap;
use std::io;

/// /proc/vmstat: event counters and levels, as the kernel prints them.
pub fn vmstat() -> io::Result<HashMap<String, u64>> {
    let text = std::fs::read_to_string("/proc/vmstat")
        .map_err(|e| io::Error::new(e.kind(), format!("read /proc/vmstat: {e}")))?;
    Ok(parse_pairs(&text, 1))
}

/// /proc/meminfo in bytes ("MemTotal", "Cached", "Dirty", ...).
pub fn meminfo() -> io::Result<HashMap<String, u64>> {
    let text = std::fs::read_to_string("/proc/meminfo")
        .map_err(|e| io::Error::new(e.kind(), format!("read /proc/meminfo: {e}")))?;
    Ok(parse_pairs(
        &text.replace(':', " ").replace(" kB", ""),
        1024,
    ))
}

/// One field of /proc/meminfo, in bytes ("MemFree", ...); an error names
/// it where the kernel has no such field.
pub fn meminfo_field(name: &str) -> io::Result<u64> {
    meminfo()?
        .get(name)
        .copied()
        .ok_or_else(|| io::Error::other(format!("/proc/meminfo has no {name}")))
}

/// `name value` lines, values times `unit`; lines that are not are skipped.
pub fn parse_pairs(text: &str, unit: u64) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let k = f.next()?;
            let v: u64 = f.next()?.parse().ok()?;
            Some((k.to_owned(), v * unit))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_machine() {
        let vm = vmstat().unwrap();
        assert!(
            vm.contains_key("pgsteal_kswapd") && vm.contains_key("pgscan_direct"),
            "{vm:?}"
        );
        let mem = meminfo().unwrap();
        assert!(
            mem["MemTotal"] > 1 << 20 && mem.contains_key("Dirty"),
            "{mem:?}"
        );
    }

    #[test]
    fn parses_pairs_and_skips_the_rest() {
        let m = parse_pairs("cache 4096\ntotal_dirty 8\nnot a number\n\n", 2);
        assert_eq!((m["cache"], m["total_dirty"], m.len()), (8192, 16, 2));
    }
}
