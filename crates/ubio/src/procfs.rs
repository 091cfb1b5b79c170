//! What ubio reads in /proc, in one place for the library, the engine, the
//! test environment and the benchmark harness: the kernel's `name value`
//! tables (/proc/vmstat, /proc/meminfo, a memory cgroup's memory.stat),
//! /proc/zoneinfo's watermarks, a process's stat, status and cgroup files,
//! a descriptor's fdinfo, and the pids.
//!
//! Each table has a `parse_*` function over its text (tested on samples, and
//! usable on files of another /proc) and a reader of this machine's file
//! whose error names the file.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io;

/// Read a /proc file whole; the error names it.
pub fn read(path: &str) -> io::Result<String> {
    std::fs::read_to_string(path).map_err(|e| io::Error::new(e.kind(), format!("read {path}: {e}")))
}

/// `name value` lines, values times `unit`; lines that are not are skipped
/// (/proc/vmstat, memory.stat; /proc/meminfo through [`meminfo`]).
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

/// /proc/vmstat: event counters and levels, as the kernel prints them.
pub fn vmstat() -> io::Result<HashMap<String, u64>> {
    Ok(parse_pairs(&read("/proc/vmstat")?, 1))
}

/// /proc/meminfo's text, in bytes ("MemTotal", "Cached", "Dirty", ...).
pub fn parse_meminfo(text: &str) -> HashMap<String, u64> {
    parse_pairs(&text.replace(':', " ").replace(" kB", ""), 1024)
}

/// /proc/meminfo in bytes.
pub fn meminfo() -> io::Result<HashMap<String, u64>> {
    Ok(parse_meminfo(&read("/proc/meminfo")?))
}

/// One field of /proc/meminfo, in bytes ("MemFree", ...); an error names
/// it where the kernel has no such field.
pub fn meminfo_field(name: &str) -> io::Result<u64> {
    meminfo()?
        .get(name)
        .copied()
        .ok_or_else(|| io::Error::other(format!("/proc/meminfo has no {name}")))
}

/// One zone of /proc/zoneinfo, in pages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Zone {
    /// "Normal", or "Normal (node 1)" beyond node 0.
    pub name: String,
    pub free: u64,
    pub high: u64,
    pub managed: u64,
}

/// The zones of /proc/zoneinfo's text: free pages, the high watermark (the
/// zone's own `high` line, not the per-CPU lists' `high:`) and the managed
/// pages.
pub fn parse_zoneinfo(text: &str) -> Vec<Zone> {
    let mut zones: Vec<Zone> = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("Node"), Some(node), Some("zone")) => {
                let node = node.trim_end_matches(',');
                let zone = words.next().unwrap_or("?");
                zones.push(Zone {
                    name: if node == "0" {
                        zone.to_string()
                    } else {
                        format!("{zone} (node {node})")
                    },
                    ..Zone::default()
                });
            }
            (Some(key), Some(a), b) => {
                let Some(z) = zones.last_mut() else { continue };
                let num = |s: Option<&str>| s.and_then(|s| s.parse::<u64>().ok());
                match key {
                    "pages" if a == "free" => z.free = num(b).unwrap_or(0),
                    "high" => z.high = num(Some(a)).unwrap_or(0),
                    "managed" => z.managed = num(Some(a)).unwrap_or(0),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    zones
}

/// /proc/zoneinfo.
pub fn zones() -> io::Result<Vec<Zone>> {
    Ok(parse_zoneinfo(&read("/proc/zoneinfo")?))
}

/// The fields of /proc/PID/stat that ubio reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PidStat {
    /// R, S, D, Z...
    pub state: char,
    pub ppid: u32,
    /// CPU time in user and system mode, in clock ticks (sysconf CLK_TCK).
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// The same of its children that it has waited for (and theirs).
    pub cutime_ticks: u64,
    pub cstime_ticks: u64,
    /// When the process started, in clock ticks since boot (CLOCK_BOOTTIME).
    pub start_ticks: u64,
}

/// `pid (comm) state ppid ...`: the command name may hold spaces and
/// parentheses, so fields are counted after the last `)`; utime, stime,
/// cutime and cstime are fields 14 to 17, starttime 22.
pub fn parse_pid_stat(text: &str) -> Option<PidStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i)?.parse::<u64>().ok();
    Some(PidStat {
        state: f.first()?.chars().next()?,
        ppid: u32::try_from(num(1)?).ok()?,
        utime_ticks: num(11)?,
        stime_ticks: num(12)?,
        cutime_ticks: num(13)?,
        cstime_ticks: num(14)?,
        start_ticks: num(19)?,
    })
}

/// /proc/PID/stat.
pub fn pid_stat(pid: u32) -> io::Result<PidStat> {
    let path = format!("/proc/{pid}/stat");
    parse_pid_stat(&read(&path)?).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{path}: not understood"),
        )
    })
}

/// The fields of /proc/PID/status that ubio reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PidStatus {
    /// Real, effective, saved, filesystem.
    pub uids: [u32; 4],
    pub gids: [u32; 4],
    /// Supplementary groups.
    pub groups: Vec<u32>,
    /// VmSize, VmLck, VmRSS and VmHWM in bytes (None: a kernel thread, a
    /// zombie).
    pub size: Option<u64>,
    pub locked: Option<u64>,
    pub rss: Option<u64>,
    pub rss_peak: Option<u64>,
    /// The file mode creation mask (Linux 4.7+).
    pub umask: Option<u32>,
    /// The effective capabilities, a bit per CAP_* number.
    pub cap_eff: Option<u64>,
    /// The process's pid in each pid namespace it is in, the outermost
    /// first (NSpid, Linux 4.1+): more than one in a container's own.
    pub ns_pids: Vec<u32>,
    /// Entries of the descriptor table the kernel has for the process
    /// (FDSize): it grows past the highest number opened, never shrinks.
    pub fd_table_size: Option<u64>,
}

/// /proc/PID/status's text.
pub fn parse_pid_status(text: &str) -> PidStatus {
    let mut st = PidStatus::default();
    let four = |v: &str| {
        let mut a = [0u32; 4];
        for (i, x) in v.split_whitespace().take(4).enumerate() {
            a[i] = x.parse().unwrap_or(0);
        }
        a
    };
    let kib = |v: &str| -> Option<u64> {
        Some(v.trim().trim_end_matches("kB").trim().parse::<u64>().ok()? * 1024)
    };
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        match k {
            "Uid" => st.uids = four(v),
            "Gid" => st.gids = four(v),
            "Groups" => {
                st.groups = v
                    .split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect()
            }
            "VmSize" => st.size = kib(v),
            "VmLck" => st.locked = kib(v),
            "VmRSS" => st.rss = kib(v),
            "VmHWM" => st.rss_peak = kib(v),
            "Umask" => st.umask = u32::from_str_radix(v.trim(), 8).ok(),
            "CapEff" => st.cap_eff = u64::from_str_radix(v.trim(), 16).ok(),
            "FDSize" => st.fd_table_size = v.trim().parse().ok(),
            "NSpid" => {
                st.ns_pids = v
                    .split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect()
            }
            _ => {}
        }
    }
    st
}

/// /proc/PID/status.
pub fn pid_status(pid: u32) -> io::Result<PidStatus> {
    Ok(parse_pid_status(&read(&format!("/proc/{pid}/status"))?))
}

/// /proc/self/status.
pub fn own_status() -> io::Result<PidStatus> {
    Ok(parse_pid_status(&read("/proc/self/status")?))
}

/// One line of /proc/PID/cgroup: `4:memory:/process_api/abc` (v1) or
/// `0::/user.slice/...` (v2, `controllers` empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupLine {
    pub hierarchy: u32,
    /// Comma-separated v1 controllers (`memory`, `cpu,cpuacct`, `name=systemd`);
    /// empty for the unified hierarchy.
    pub controllers: String,
    /// As the reader's cgroup namespace shows it: a path outside the
    /// reader's namespace root starts with `/..`.
    pub path: String,
}

impl CgroupLine {
    /// The unified (v2) hierarchy's line.
    pub fn is_unified(&self) -> bool {
        self.hierarchy == 0 && self.controllers.is_empty()
    }

    /// A v1 line of hierarchy holding `controller`.
    pub fn has_controller(&self, controller: &str) -> bool {
        self.controllers.split(',').any(|c| c == controller)
    }
}

/// /proc/PID/cgroup's text.
pub fn parse_cgroup(text: &str) -> Vec<CgroupLine> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, ctl, path) = (f.next()?, f.next()?, f.next()?);
            Some(CgroupLine {
                hierarchy: id.parse().ok()?,
                controllers: ctl.to_string(),
                path: path.to_string(),
            })
        })
        .collect()
}

/// /proc/PID/cgroup ("self" for this process).
pub fn pid_cgroup(pid: &str) -> io::Result<Vec<CgroupLine>> {
    Ok(parse_cgroup(&read(&format!("/proc/{pid}/cgroup"))?))
}

/// A descriptor's state as /proc/PID/fdinfo/FD shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdInfo {
    /// The file position of the open file description.
    pub pos: u64,
    /// Its status flags (O_ACCMODE, O_APPEND, O_DIRECT...).
    pub flags: i32,
    pub mnt_id: u64,
    pub ino: u64,
}

/// fdinfo's text: `pos:\t123\nflags:\t0100002\nmnt_id:\t25\nino:\t42\n...`
/// (flags in octal).
pub fn parse_fdinfo(text: &str) -> Option<FdInfo> {
    let (mut pos, mut flags, mut mnt_id, mut ino) = (None, None, 0, 0);
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k {
            "pos" => pos = v.parse().ok(),
            "flags" => flags = i32::from_str_radix(v, 8).ok(),
            "mnt_id" => mnt_id = v.parse().unwrap_or(0),
            "ino" => ino = v.parse().unwrap_or(0),
            _ => {}
        }
    }
    Some(FdInfo {
        pos: pos?,
        flags: flags?,
        mnt_id,
        ino,
    })
}

/// /proc/PID/fdinfo/FD (None: gone, or not understood).
pub fn fdinfo(pid: u32, fd: i32) -> Option<FdInfo> {
    parse_fdinfo(&std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).ok()?)
}

/// Every pid in /proc.
pub fn all_pids() -> io::Result<Vec<u32>> {
    Ok(std::fs::read_dir("/proc")
        .map_err(|e| io::Error::new(e.kind(), format!("list /proc: {e}")))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect())
}

/// The pid most recently handed out in this pid namespace (the last field
/// of /proc/loadavg): while it stays the same, no process was created.
pub fn last_pid() -> Option<u32> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .nth(4)?
        .parse()
        .ok()
}

/// A process's command name (/proc/PID/comm), without the newline.
pub fn comm(pid: u32) -> Option<String> {
    let c = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(c.trim_end_matches('\n').to_string())
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
        assert!(zones().unwrap().iter().any(|z| z.managed > 0));
        let me = pid_stat(std::process::id()).unwrap();
        assert_eq!(me.ppid, std::os::unix::process::parent_id());
        assert!(own_status().unwrap().rss.is_some_and(|r| r > 0));
        assert!(pid_cgroup("self")
            .unwrap()
            .iter()
            .any(|l| l.path.starts_with('/')));
        assert!(all_pids().unwrap().contains(&std::process::id()));
        assert!(last_pid().is_some());
    }

    #[test]
    fn parses_pairs_and_skips_the_rest() {
        let m = parse_pairs("cache 4096\ntotal_dirty 8\nnot a number\n\n", 2);
        assert_eq!((m["cache"], m["total_dirty"], m.len()), (8192, 16, 2));
        let m = parse_meminfo("MemTotal:       24564112 kB\nHugePages_Total:       0\n");
        assert_eq!((m["MemTotal"], m["HugePages_Total"]), (24564112 * 1024, 0));
    }

    #[test]
    fn zoneinfo_watermarks_are_the_zones_own() {
        let text = "Node 0, zone      DMA\n  pages free     3840\n        min      13\n        high     19\n        managed  3840\n    pagesets\n    cpu: 0\n              count: 0\n              high:  0\nNode 1, zone   Normal\n  pages free     100\n        high     50\n        managed  900\n";
        assert_eq!(
            parse_zoneinfo(text),
            vec![
                Zone {
                    name: "DMA".into(),
                    free: 3840,
                    high: 19,
                    managed: 3840
                },
                Zone {
                    name: "Normal (node 1)".into(),
                    free: 100,
                    high: 50,
                    managed: 900
                },
            ]
        );
    }

    #[test]
    fn a_command_name_with_spaces_and_parentheses_is_passed_over() {
        let s = "42 (a (b) c) S 7 42 42 0 -1 4194560 100 0 0 0 25 13 5 2 20 0 1 0 99 0 0";
        assert_eq!(
            parse_pid_stat(s),
            Some(PidStat {
                state: 'S',
                ppid: 7,
                utime_ticks: 25,
                stime_ticks: 13,
                cutime_ticks: 5,
                cstime_ticks: 2,
                start_ticks: 99
            })
        );
        assert_eq!(parse_pid_stat("42 (x"), None);
    }

    #[test]
    fn status_ids_memory_and_umask() {
        let s = "Name:\tx\nUmask:\t0022\nCapEff:\t0000000000280000\nNSpid:\t4242\t7\nFDSize:\t256\nUid:\t1000\t0\t0\t0\nGid:\t100\t100\t100\t100\nGroups:\t4 24 \nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\nVmLck:\t       0 kB\n";
        let st = parse_pid_status(s);
        assert_eq!(st.uids, [1000, 0, 0, 0]);
        assert_eq!(st.gids, [100; 4]);
        assert_eq!(st.groups, vec![4, 24]);
        assert_eq!(
            (st.rss, st.rss_peak, st.locked),
            (Some(1 << 20), Some(2 << 20), Some(0))
        );
        assert_eq!(st.umask, Some(0o022));
        assert_eq!(
            st.cap_eff,
            Some(1 << 19 | 1 << 21),
            "CAP_SYS_PTRACE and CAP_SYS_ADMIN"
        );
        assert_eq!(st.ns_pids, vec![4242, 7]);
        assert_eq!(st.fd_table_size, Some(256));
        assert_eq!(parse_pid_status("Name:\tkthreadd\n").rss, None);
    }

    #[test]
    fn cgroup_lines_of_both_versions() {
        let l = parse_cgroup("4:memory:/process_api/abc\n1:name=systemd:/\n0::/user.slice/x\n");
        assert!(l[0].has_controller("memory") && !l[0].is_unified());
        assert_eq!(l[0].path, "/process_api/abc");
        assert!(!l[1].has_controller("systemd"));
        assert!(l[2].is_unified() && l[2].path == "/user.slice/x");
    }

    #[test]
    fn fdinfo_is_parsed() {
        let t = "pos:\t8192\nflags:\t0100001\nmnt_id:\t31\nino:\t1234\n";
        assert_eq!(
            parse_fdinfo(t),
            Some(FdInfo {
                pos: 8192,
                flags: 0o100001,
                mnt_id: 31,
                ino: 1234
            })
        );
        assert_eq!(parse_fdinfo("flags:\t0\n"), None);
    }
}
