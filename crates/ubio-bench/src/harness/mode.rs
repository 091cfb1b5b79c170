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

    /// The dataset's size times this is what the workload puts on disk
    /// and in the page cache: 2 for a copy (source and copy), else 1.
    pub fn copies(self) -> u64 {
        if self == WorkloadKind::Copy {
            2
        } else {
            1
        }
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
/// modes run an external command per file (a copy or a read, see
/// [`Tool::caps`]); a backed mode is a baseline run right after its pages'
/// memory was faulted in and released (see [`crate::backing`]).
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
    /// An external command per file (copies or reads, per the tool).
    Tool(Tool),
    /// A mode that fills the page cache, run right after memory of the
    /// size of the pages it will take was faulted in and released
    /// ("buffered+backed", "cp+backed"): on a VM that hands free memory
    /// back to its host (free page reporting), the baseline's figure when
    /// its pages need no host fault, as on bare metal.
    Backed(Backable),
}

/// The modes that have a backed twin: those whose data goes through the
/// page cache as a plain program's does (`page_cache` in the table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backable {
    Buffered,
    Tool(Tool),
}

impl Backable {
    /// The mode it is the twin of.
    pub fn mode(self) -> BenchMode {
        match self {
            Backable::Buffered => BenchMode::Buffered,
            Backable::Tool(t) => BenchMode::Tool(t),
        }
    }

    /// The twin of `mode`, if its row says it fills the page cache.
    pub fn of(mode: BenchMode) -> Option<Backable> {
        if !mode.caps().page_cache {
            return None;
        }
        match mode {
            BenchMode::Buffered => Some(Backable::Buffered),
            BenchMode::Tool(t) => Some(Backable::Tool(t)),
            _ => None,
        }
    }
}

/// External commands: copy tools (cp, xcp, rsync, ...) and read tools
/// (cat, dd, ...), each run once per file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    /// coreutils `cp`.
    Cp,
    /// `nocache cp` (the nocache package's LD_PRELOAD wrapper).
    NocacheCp,
    /// `dd iflag=nocache oflag=nocache bs=<block>`.
    DdNocache,
    /// `rsync` (whole-file, to a local path).
    Rsync,
    /// `xcp` (a parallel cp in Rust, from crates.io).
    Xcp,
    /// `ubio cp`.
    UbioCp,
    /// `ubio run -- cp` (the LD_PRELOAD shim around coreutils cp).
    UbioRunCp,
    /// `cat FILE > /dev/null`.
    Cat,
    /// `dd if=FILE of=/dev/null bs=<block>`.
    Dd,
    /// `ubio cat FILE > /dev/null`.
    UbioCat,
    /// `ubio run -- cat FILE > /dev/null`.
    UbioRunCat,
}

/// What a tool is and needs: its row of the tool table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolCaps {
    /// The one workload it runs: `Copy` (SRC to DST, then the harness
    /// fsyncs DST) or `SeqRead` (FILE to /dev/null).
    pub workload: WorkloadKind,
    /// Programs it needs on PATH (besides the ubio binary).
    pub programs: &'static [&'static str],
    /// How to get a missing program, for the message that leaves it out.
    pub install: &'static str,
    /// It is ubio's (runs the ubio binary).
    pub ubio: bool,
    /// It runs under `ubio run` (the shim must work here).
    pub shim: bool,
    /// Its data goes through the page cache as a plain program's does: a
    /// baseline, with a backed twin.
    pub page_cache: bool,
    /// How prose names it, where that differs from its mode name.
    pub label: Option<&'static str>,
}

impl Tool {
    pub const ALL: [Tool; 11] = [
        Tool::Cp,
        Tool::NocacheCp,
        Tool::DdNocache,
        Tool::Rsync,
        Tool::Xcp,
        Tool::UbioCp,
        Tool::UbioRunCp,
        Tool::Cat,
        Tool::Dd,
        Tool::UbioCat,
        Tool::UbioRunCat,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Tool::Cp => "cp",
            Tool::NocacheCp => "nocache-cp",
            Tool::DdNocache => "dd-nocache",
            Tool::Rsync => "rsync",
            Tool::Xcp => "xcp",
            Tool::UbioCp => "ubio-cp",
            Tool::UbioRunCp => "ubio-run-cp",
            Tool::Cat => "cat",
            Tool::Dd => "dd",
            Tool::UbioCat => "ubio-cat",
            Tool::UbioRunCat => "ubio-run-cat",
        }
    }

    /// The tool's row of the table.
    pub fn caps(self) -> ToolCaps {
        const APT: &str =
            "Debian packages coreutils, nocache, rsync; scripts/install-deps.sh installs them";
        let copy = ToolCaps {
            workload: WorkloadKind::Copy,
            programs: &["cp"],
            install: APT,
            ubio: false,
            shim: false,
            page_cache: true,
            label: None,
        };
        let read = ToolCaps {
            workload: WorkloadKind::SeqRead,
            programs: &["cat"],
            ..copy
        };
        match self {
            Tool::Cp => copy,
            Tool::NocacheCp => ToolCaps {
                label: Some("nocache cp"),
                programs: &["nocache", "cp"],
                page_cache: false,
                ..copy
            },
            Tool::DdNocache => ToolCaps {
                programs: &["dd"],
                page_cache: false,
                ..copy
            },
            Tool::Rsync => ToolCaps {
                programs: &["rsync"],
                ..copy
            },
            Tool::Xcp => ToolCaps {
                programs: &["xcp"],
                install: "`cargo install xcp` (scripts/install-deps.sh does it)",
                ..copy
            },
            Tool::UbioCp => ToolCaps {
                label: Some("ubio cp"),
                programs: &[],
                ubio: true,
                page_cache: false,
                ..copy
            },
            Tool::UbioRunCp => ToolCaps {
                label: Some("ubio run -- cp"),
                ubio: true,
                shim: true,
                page_cache: false,
                ..copy
            },
            Tool::Cat => read,
            Tool::Dd => ToolCaps {
                programs: &["dd"],
                ..read
            },
            Tool::UbioCat => ToolCaps {
                label: Some("ubio cat"),
                programs: &[],
                ubio: true,
                page_cache: false,
                ..read
            },
            Tool::UbioRunCat => ToolCaps {
                label: Some("ubio run -- cat"),
                ubio: true,
                shim: true,
                page_cache: false,
                ..read
            },
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
    /// Its data goes through the page cache as a plain program's does: a
    /// baseline of the comparisons, with a backed twin.
    pub page_cache: bool,
    /// Before each run, memory of the size of the pages the run will take
    /// is faulted in and released ([`crate::backing`]).
    pub prefault: bool,
    /// ubio's own (in process or a ubio command).
    pub ubio: bool,
    /// How prose names it, where that differs from its mode name.
    pub label: Option<&'static str>,
}

impl ModeCaps {
    const PLAIN: ModeCaps = ModeCaps {
        open_flags: 0,
        rw_flags: 0,
        advise_dontneed: false,
        uring: false,
        aligned: false,
        fio: None,
        page_cache: false,
        prefault: false,
        ubio: false,
        label: None,
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
                label: Some("buffered I/O"),
                fio: fio("psync", false, false, false),
                page_cache: true,
                ..plain
            },
            BenchMode::Dontcache => ModeCaps {
                label: Some("RWF_DONTCACHE"),
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
                label: Some("O_DIRECT"),
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
            BenchMode::Ubio(_) => ModeCaps {
                ubio: true,
                ..plain
            },
            BenchMode::Tool(t) => {
                let t = t.caps();
                ModeCaps {
                    page_cache: t.page_cache,
                    ubio: t.ubio,
                    label: t.label,
                    ..plain
                }
            }
            // The twin moves its bytes as the mode it twins; fio has no
            // backed variant.
            BenchMode::Backed(b) => ModeCaps {
                prefault: true,
                fio: None,
                ..b.mode().caps()
            },
        }
    }
}

impl BenchMode {
    /// How prose names the mode: "buffered I/O", "RWF_DONTCACHE", "ubio
    /// cp", "cp (pages backed first)"; else its mode name.
    pub fn label(self) -> String {
        match (self, self.caps().label) {
            (BenchMode::Backed(b), _) => format!("{} (pages backed first)", b.mode().label()),
            (_, Some(label)) => label.to_owned(),
            (m, None) => m.to_string(),
        }
    }

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
    /// request); for copies, buffered, ubio and every copy tool.
    pub fn defaults(kind: WorkloadKind) -> Vec<BenchMode> {
        match kind {
            WorkloadKind::Copy => [BenchMode::Buffered, BenchMode::Ubio(BackendKind::Auto)]
                .into_iter()
                .chain(Tool::ALL.map(BenchMode::Tool))
                .filter(|m| m.supports(kind))
                .collect(),
            _ => BenchMode::in_process()
                .into_iter()
                .filter(|m| !matches!(m, BenchMode::Ubio(b) if *b != BackendKind::Auto))
                .collect(),
        }
    }

    /// Whether the mode can run `kind` (a tool runs its one workload).
    pub fn supports(self, kind: WorkloadKind) -> bool {
        match self {
            BenchMode::Tool(t) => t.caps().workload == kind,
            BenchMode::Backed(b) => b.mode().supports(kind),
            _ => true,
        }
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
            BenchMode::Backed(b) => write!(f, "{}{BACKED_SUFFIX}", b.mode()),
        }
    }
}

/// What a backed twin's name ends with ("cp+backed").
pub const BACKED_SUFFIX: &str = "+backed";

impl FromStr for BenchMode {
    type Err = String;
    fn from_str(s: &str) -> Result<BenchMode, String> {
        if let Some(base) = s.strip_suffix(BACKED_SUFFIX) {
            let mode: BenchMode = base.parse()?;
            return Backable::of(mode).map(BenchMode::Backed).ok_or_else(|| {
                format!(
                    "'{s}': only modes whose data goes through the page cache as a plain \
                     program's does (buffered, cp, rsync, xcp, cat, dd) have a backed twin"
                )
            });
        }
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
        if let Some(tool) = Tool::ALL.into_iter().find(|t| t.name() == s) {
            return Ok(BenchMode::Tool(tool));
        }
        match s.split_once(':') {
            Some(("ubio", k)) => Ok(BenchMode::Ubio(k.parse()?)),
            _ => Err(format!(
                "unknown mode '{s}' (expected buffered, dontcache, dontcache-uring, odirect, \
                 odirect-uring, fadvise, ubio, ubio:<backend>; for copies cp, nocache-cp, \
                 dd-nocache, rsync, xcp, ubio-cp, ubio-run-cp; for seq-read cat, dd, ubio-cat, \
                 ubio-run-cat; any of buffered, cp, rsync, xcp, cat, dd with +backed)"
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
        all.extend(Tool::ALL.map(BenchMode::Tool));
        let twins: Vec<BenchMode> = all
            .iter()
            .filter_map(|&m| Backable::of(m).map(BenchMode::Backed))
            .collect();
        assert_eq!(
            twins.len(),
            6,
            "buffered, cp, rsync, xcp, cat, dd: {twins:?}"
        );
        all.extend(twins);
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
        assert!(BenchMode::defaults(WorkloadKind::Copy).contains(&BenchMode::Tool(Tool::Rsync)));
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
        assert_eq!(
            BenchMode::Ubio(BackendKind::Auto).caps(),
            ModeCaps {
                ubio: true,
                ..ModeCaps::PLAIN
            }
        );
    }

    #[test]
    fn tools_run_their_one_workload() {
        assert!(BenchMode::Tool(Tool::Cp).supports(WorkloadKind::Copy));
        assert!(!BenchMode::Tool(Tool::Cp).supports(WorkloadKind::SeqRead));
        assert!(BenchMode::Tool(Tool::UbioRunCat).supports(WorkloadKind::SeqRead));
        assert!(!BenchMode::Tool(Tool::Cat).supports(WorkloadKind::Copy));
        assert!(BenchMode::Buffered.supports(WorkloadKind::Copy));
        let twin: BenchMode = "cat+backed".parse().unwrap();
        assert!(twin.supports(WorkloadKind::SeqRead) && !twin.supports(WorkloadKind::Copy));
    }

    #[test]
    fn only_page_cache_modes_have_a_backed_twin() {
        let twin: BenchMode = "buffered+backed".parse().unwrap();
        assert_eq!(twin, BenchMode::Backed(Backable::Buffered));
        let caps = twin.caps();
        assert!(caps.prefault && caps.page_cache && caps.fio.is_none());
        assert!(!BenchMode::Buffered.caps().prefault);
        for bad in [
            "ubio+backed",
            "ubio-cp+backed",
            "dontcache+backed",
            "nocache-cp+backed",
        ] {
            let err = bad.parse::<BenchMode>().unwrap_err();
            assert!(err.contains("backed twin"), "{bad}: {err}");
        }
        assert!("nope+backed"
            .parse::<BenchMode>()
            .unwrap_err()
            .contains("unknown mode"));
        assert!(BenchMode::Tool(Tool::UbioCat).caps().ubio);
        assert!(!BenchMode::Tool(Tool::Cat).caps().ubio);
    }
}
