//! What a benchmark run measures: the workload (what I/O, how much, how
//! parallel) and the mode (which code path moves the bytes).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use ubio::BackendKind;

/// The I/O pattern of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// Each thread reads its files front to back.
    SeqRead,
    /// Each thread writes its files front to back (fresh files), then fsyncs.
    SeqWrite,
    /// Each thread reads blocks at random block-aligned offsets of its files.
    RandRead,
    /// Each thread overwrites blocks at random block-aligned offsets, then fsyncs.
    RandWrite,
    /// Each thread copies its files to new files, then fsyncs the copies.
    Copy,
}

impl WorkloadKind {
    pub const ALL: [WorkloadKind; 5] = [
        WorkloadKind::SeqRead,
        WorkloadKind::SeqWrite,
        WorkloadKind::RandRead,
        WorkloadKind::RandWrite,
        WorkloadKind::Copy,
    ];

    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::SeqRead => "seq-read",
            WorkloadKind::SeqWrite => "seq-write",
            WorkloadKind::RandRead => "rand-read",
            WorkloadKind::RandWrite => "rand-write",
            WorkloadKind::Copy => "copy",
        }
    }

    /// Whether the workload writes (and so has a time to durability).
    pub fn writes(self) -> bool {
        !matches!(self, WorkloadKind::SeqRead | WorkloadKind::RandRead)
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for WorkloadKind {
    type Err = String;
    fn from_str(s: &str) -> Result<WorkloadKind, String> {
        WorkloadKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!("unknown workload '{s}' (expected seq-read, seq-write, rand-read, rand-write or copy)")
            })
    }
}

/// How the bytes move.
///
/// The in-process modes run in the harness's own worker threads; the tool
/// modes run an external command per file (copies only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum BenchMode {
    /// Plain read/pread and write/pwrite: what an unmodified program does.
    Buffered,
    /// preadv2/pwritev2 with RWF_DONTCACHE (Linux 6.14+), one request in flight.
    Dontcache,
    /// io_uring READV/WRITEV (or READ/WRITE) with RWF_DONTCACHE, `queue_depth` in flight.
    DontcacheUring,
    /// O_DIRECT pread/pwrite, one request in flight, aligned buffers.
    Odirect,
    /// O_DIRECT through io_uring, `queue_depth` in flight.
    OdirectUring,
    /// Buffered I/O with posix_fadvise(DONTNEED) after every block, the way
    /// `dd iflag=nocache oflag=nocache` does it.
    Fadvise,
    /// A `ubio::File` with the given backend (`ubio` = auto).
    Ubio(BackendKind),
    /// Copies only: an external command per file.
    Tool(CopyTool),
}

/// External copy commands compared in copy workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CopyTool {
    /// coreutils `cp`.
    Cp,
    /// `nocache cp` (the nocache package's LD_PRELOAD wrapper).
    NocacheCp,
    /// `dd iflag=nocache oflag=nocache bs=<block>`.
    DdNocache,
    /// `rsync` (whole-file, to a local path).
    Rsync,
    /// `ubio cp`.
    UbioCp,
    /// `ubio run -- cp` (the LD_PRELOAD shim around coreutils cp).
    UbioRunCp,
}

impl CopyTool {
    pub const ALL: [CopyTool; 6] = [
        CopyTool::Cp,
        CopyTool::NocacheCp,
        CopyTool::DdNocache,
        CopyTool::Rsync,
        CopyTool::UbioCp,
        CopyTool::UbioRunCp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CopyTool::Cp => "cp",
            CopyTool::NocacheCp => "nocache-cp",
            CopyTool::DdNocache => "dd-nocache",
            CopyTool::Rsync => "rsync",
            CopyTool::UbioCp => "ubio-cp",
            CopyTool::UbioRunCp => "ubio-run-cp",
        }
    }
}

/// fio's job for a mode: the same I/O path, run by fio for the cross-check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FioJob {
    pub ioengine: &'static str,
    /// With the workload's queue depth in flight (else one request).
    pub queued: bool,
    /// `--direct=1`.
    pub direct: bool,
    /// `--uncached=1`: RWF_DONTCACHE, right only from fio 3.40
    /// ([`FIO_UNCACHED_SINCE`]); fio 3.33 sends 0x40, now RWF_ATOMIC.
    pub uncached: bool,
}

/// The first fio whose `uncached=1` sends RWF_DONTCACHE (0x80).
pub const FIO_UNCACHED_SINCE: (u32, u32) = (3, 40);

/// What a mode does, in one table that the engine, the fio cross-check
/// and the reports consult instead of matching modes by name (as fio's
/// ioengine ops do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModeCaps {
    /// Extra open(2) flags of the data files.
    pub open_flags: i32,
    /// RWF_* flags of every read and write.
    pub rw_flags: u32,
    /// posix_fadvise(DONTNEED) after every block.
    pub advise_dontneed: bool,
    /// io_uring with the workload's queue depth in flight (else one request).
    pub uring: bool,
    /// Buffers, offsets and sizes aligned for O_DIRECT.
    pub aligned: bool,
    /// fio's mirror of the mode, if fio has one.
    pub fio: Option<FioJob>,
}

impl ModeCaps {
    const PLAIN: ModeCaps = ModeCaps {
        open_flags: 0,
        rw_flags: 0,
        advise_dontneed: false,
        uring: false,
        aligned: false,
        fio: None,
    };
}

const DONTCACHE: u32 = ubio::sys::RwFlags::DONTCACHE.0;

impl BenchMode {
    /// The mode's row of the capability table.
    pub fn caps(self) -> ModeCaps {
        let fio = |ioengine, queued, direct, uncached| {
            Some(FioJob {
                ioengine,
                queued,
                direct,
                uncached,
            })
        };
        let plain = ModeCaps::PLAIN;
        match self {
            BenchMode::Buffered => ModeCaps {
                fio: fio("psync", false, false, false),
                ..plain
            },
            BenchMode::Dontcache => ModeCaps {
                rw_flags: DONTCACHE,
                fio: fio("pvsync2", false, false, true),
                ..plain
            },
            BenchMode::DontcacheUring => ModeCaps {
                rw_flags: DONTCACHE,
                uring: true,
                fio: fio("io_uring", true, false, true),
                ..plain
            },
            BenchMode::Odirect => ModeCaps {
                open_flags: libc::O_DIRECT,
                aligned: true,
                fio: fio("psync", false, true, false),
                ..plain
            },
            BenchMode::OdirectUring => ModeCaps {
                open_flags: libc::O_DIRECT,
                aligned: true,
                uring: true,
                fio: fio("io_uring", true, true, false),
                ..plain
            },
            BenchMode::Fadvise => ModeCaps {
                advise_dontneed: true,
                ..plain
            },
            BenchMode::Ubio(_) | BenchMode::Tool(_) => plain,
        }
    }
}

impl BenchMode {
    /// The modes that need no external tool, in the order a full run compares them.
    pub fn in_process() -> Vec<BenchMode> {
        use BackendKind::*;
        vec![
            BenchMode::Buffered,
            BenchMode::Dontcache,
            BenchMode::DontcacheUring,
            BenchMode::Odirect,
            BenchMode::OdirectUring,
            BenchMode::Fadvise,
            BenchMode::Ubio(Auto),
            BenchMode::Ubio(Kernel),
            BenchMode::Ubio(Emulated),
            BenchMode::Ubio(Direct),
            BenchMode::Ubio(Buffered),
        ]
    }

    /// The modes a benchmark compares when none are named: every in-process
    /// mode with ubio's automatic choice only (the ubio:<backend> ones on
    /// request); for copies, buffered, ubio and every tool.
    pub fn defaults(kind: WorkloadKind) -> Vec<BenchMode> {
        match kind {
            WorkloadKind::Copy => [BenchMode::Buffered, BenchMode::Ubio(BackendKind::Auto)]
                .into_iter()
                .chain(CopyTool::ALL.map(BenchMode::Tool))
                .collect(),
            _ => BenchMode::in_process()
                .into_iter()
                .filter(|m| !matches!(m, BenchMode::Ubio(b) if *b != BackendKind::Auto))
                .collect(),
        }
    }

    /// Whether the mode can run `kind` (tools only copy).
    pub fn supports(self, kind: WorkloadKind) -> bool {
        !matches!(self, BenchMode::Tool(_)) || kind == WorkloadKind::Copy
    }
}

impl BenchMode {
    /// A comma-separated list of modes ("buffered, ubio:kernel"), each
    /// once, in the order given. The error quotes the list.
    pub fn parse_list(list: &str) -> Result<Vec<BenchMode>, String> {
        let mut modes = Vec::new();
        for item in list.split(',').map(str::trim) {
            if item.is_empty() {
                return Err(format!(
                    "{list:?}: empty entry (expected a comma-separated list such as buffered,ubio)"
                ));
            }
            let mode: BenchMode = item.parse()?;
            if modes.contains(&mode) {
                return Err(format!("{list:?}: {mode} is listed twice"));
            }
            modes.push(mode);
        }
        Ok(modes)
    }
}

impl fmt::Display for BenchMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchMode::Buffered => f.write_str("buffered"),
            BenchMode::Dontcache => f.write_str("dontcache"),
            BenchMode::DontcacheUring => f.write_str("dontcache-uring"),
            BenchMode::Odirect => f.write_str("odirect"),
            BenchMode::OdirectUring => f.write_str("odirect-uring"),
            BenchMode::Fadvise => f.write_str("fadvise"),
            BenchMode::Ubio(BackendKind::Auto) => f.write_str("ubio"),
            BenchMode::Ubio(k) => write!(f, "ubio:{k}"),
            BenchMode::Tool(t) => f.write_str(t.name()),
        }
    }
}

impl FromStr for BenchMode {
    type Err = String;
    fn from_str(s: &str) -> Result<BenchMode, String> {
        let simple = match s {
            "buffered" => Some(BenchMode::Buffered),
            "dontcache" => Some(BenchMode::Dontcache),
            "dontcache-uring" => Some(BenchMode::DontcacheUring),
            "odirect" => Some(BenchMode::Odirect),
            "odirect-uring" => Some(BenchMode::OdirectUring),
            "fadvise" => Some(BenchMode::Fadvise),
            "ubio" => Some(BenchMode::Ubio(BackendKind::Auto)),
            _ => None,
        };
        if let Some(m) = simple {
            return Ok(m);
        }
        if let Some(tool) = CopyTool::ALL.into_iter().find(|t| t.name() == s) {
            return Ok(BenchMode::Tool(tool));
        }
        match s.split_once(':') {
            Some(("ubio", k)) => Ok(BenchMode::Ubio(k.parse()?)),
            _ => Err(format!(
                "unknown mode '{s}' (expected buffered, dontcache, dontcache-uring, odirect, \
                 odirect-uring, fadvise, ubio, ubio:<backend>, or for copies cp, nocache-cp, \
                 dd-nocache, rsync, ubio-cp, ubio-run-cp)"
            )),
        }
    }
}

impl From<BenchMode> for String {
    fn from(m: BenchMode) -> String {
        m.to_string()
    }
}

impl TryFrom<String> for BenchMode {
    type Error = String;
    fn try_from(s: String) -> Result<BenchMode, String> {
        s.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_round_trips_through_its_name() {
        let mut all = BenchMode::in_process();
        all.extend(CopyTool::ALL.map(BenchMode::Tool));
        for m in all {
            assert_eq!(m.to_string().parse::<BenchMode>(), Ok(m), "{m}");
        }
        for k in WorkloadKind::ALL {
            assert_eq!(k.name().parse::<WorkloadKind>(), Ok(k));
        }
    }

    #[test]
    fn unknown_names_say_what_is_expected() {
        let err = "odirect-sync".parse::<BenchMode>().unwrap_err();
        assert!(err.contains("odirect-uring"), "{err}");
        assert!("ubio:nope".parse::<BenchMode>().is_err());
        assert!("seq"
            .parse::<WorkloadKind>()
            .unwrap_err()
            .contains("seq-read"));
    }

    #[test]
    fn defaults_are_ubio_auto_and_the_rest_or_tools_for_copies() {
        assert!(BenchMode::defaults(WorkloadKind::Copy).contains(&BenchMode::Tool(CopyTool::Rsync)));
        assert!(!BenchMode::defaults(WorkloadKind::SeqRead)
            .iter()
            .any(|m| matches!(m, BenchMode::Tool(_))));
        let names: Vec<String> = BenchMode::defaults(WorkloadKind::SeqRead)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            names.join(","),
            "buffered,dontcache,dontcache-uring,odirect,odirect-uring,fadvise,ubio"
        );
    }

    #[test]
    fn lists_parse_once_each_in_order() {
        use BackendKind::Kernel;
        assert_eq!(
            BenchMode::parse_list("buffered, ubio:kernel"),
            Ok(vec![BenchMode::Buffered, BenchMode::Ubio(Kernel)])
        );
        assert!(BenchMode::parse_list("ubio,buffered,ubio")
            .unwrap_err()
            .contains("listed twice"));
        assert!(BenchMode::parse_list("buffered,buffered").is_err());
        assert!(BenchMode::parse_list("buffered,,ubio")
            .unwrap_err()
            .contains("empty entry"));
        assert!(BenchMode::parse_list("")
            .unwrap_err()
            .contains("empty entry"));
        assert!(BenchMode::parse_list("fast")
            .unwrap_err()
            .contains("unknown mode 'fast'"));
    }

    #[test]
    fn the_table_says_what_each_mode_does() {
        let dc = BenchMode::DontcacheUring.caps();
        assert!(dc.uring && dc.rw_flags == DONTCACHE && dc.open_flags == 0);
        assert!(dc.fio.is_some_and(|f| f.uncached && f.queued && !f.direct));
        let od = BenchMode::Odirect.caps();
        assert!(od.aligned && od.open_flags & libc::O_DIRECT != 0 && !od.uring);
        assert!(BenchMode::Fadvise.caps().advise_dontneed);
        assert_eq!(BenchMode::Fadvise.caps().fio, None);
        assert_eq!(BenchMode::Ubio(BackendKind::Auto).caps(), ModeCaps::PLAIN);
    }

    #[test]
    fn tools_only_copy() {
        assert!(BenchMode::Tool(CopyTool::Cp).supports(WorkloadKind::Copy));
        assert!(!BenchMode::Tool(CopyTool::Cp).supports(WorkloadKind::SeqRead));
        assert!(BenchMode::Buffered.supports(WorkloadKind::Copy));
    }
}
