//! One request in flight per thread: pread/pwrite (buffered, fadvise,
//! odirect), preadv2/pwritev2 with RWF_DONTCACHE (dontcache), or a
//! `ubio::File` (ubio, ubio:<backend>).

use super::data::{offsets, stamp};
use super::support::{fill, AlignedBuf, DIRECT_ALIGN};
use super::{EngineJob, LaneOutcome, Shared};
use crate::clock::monotonic_secs;
use crate::harness::mode::{BenchMode, ModeCaps, WorkloadKind};
use crate::path_context;
use std::fs::File;
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use ubio::sys::{self, Advice, RwFlags};

/// How a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    /// Create (or truncate) and write.
    Create,
    /// Write over an existing file.
    Overwrite,
    /// Create if missing, without truncating: a region of a shared file.
    Region,
}

impl Access {
    /// How a sequential write opens its file: fresh, or (a shared file)
    /// created by whichever stream comes first.
    pub(crate) fn create(shared: bool) -> Access {
        if shared {
            Access::Region
        } else {
            Access::Create
        }
    }
}

/// An open file of one mode.
enum Handle {
    /// pread/pwrite, or preadv2/pwritev2 with the row's RWF_* flags; with
    /// `advise_dontneed`, POSIX_FADV_DONTNEED after every block.
    Raw {
        file: File,
        caps: ModeCaps,
    },
    Ubio(Box<ubio::File>),
}

pub(crate) fn open_std(path: &Path, access: Access, flags: i32) -> io::Result<File> {
    let mut o = std::fs::OpenOptions::new();
    match access {
        Access::Read => o.read(true),
        Access::Create => o.write(true).create(true).truncate(true),
        Access::Overwrite => o.write(true),
        Access::Region => o.write(true).create(true),
    };
    o.custom_flags(flags)
        .open(path)
        .map_err(|e| path_context(e, &format!("open ({access:?})"), path))
}

impl Handle {
    fn open(mode: BenchMode, path: &Path, access: Access) -> io::Result<Handle> {
        let caps = mode.caps();
        Ok(match mode {
            BenchMode::Ubio(kind) => {
                let mut o = ubio::OpenOptions::new();
                match access {
                    Access::Read => o.read(true),
                    Access::Create => o.write(true).create(true).truncate(true),
                    Access::Overwrite => o.write(true),
                    Access::Region => o.write(true).create(true),
                };
                crate::harness::data_path::DataPath::from_env()?.apply(&mut o);
                Handle::Ubio(Box::new(o.backend(kind).open(path)?))
            }
            BenchMode::Tool(_) => unreachable!("{mode} does not run here"),
            _ if caps.uring => unreachable!("{mode} does not run here"),
            _ => Handle::Raw {
                file: open_std(path, access, caps.open_flags)?,
                caps,
            },
        })
    }

    /// What moved the data and why.
    fn describe(&self) -> (String, String) {
        let caps = match self {
            Handle::Raw { caps, .. } => caps,
            Handle::Ubio(f) => {
                let c = f.choice();
                return (c.backend.to_string(), c.reason.clone());
            }
        };
        let (b, r) = if caps.rw_flags == RwFlags::DONTCACHE.0 {
            ("RWF_DONTCACHE", "preadv2/pwritev2 with RWF_DONTCACHE")
        } else if caps.open_flags & libc::O_DIRECT != 0 {
            (
                "O_DIRECT",
                "pread/pwrite on an O_DIRECT descriptor, aligned buffers",
            )
        } else if caps.advise_dontneed {
            (
                "fadvise",
                "pread/pwrite, then posix_fadvise(DONTNEED) of every block (dd nocache)",
            )
        } else {
            ("std", "pread/pwrite through the page cache")
        };
        (b.to_owned(), r.to_owned())
    }

    /// Fills `buf` from `off` (files are whole blocks: a short file is an error).
    fn read_full(&self, buf: &mut [u8], off: u64, path: &Path) -> io::Result<()> {
        let mut done = 0usize;
        while done < buf.len() {
            let at = off + done as u64;
            let part = &mut buf[done..];
            let r = match self {
                Handle::Raw { file, caps } if caps.rw_flags == 0 => file.read_at(part, at),
                Handle::Raw { file, caps } => sys::preadv2(
                    file.as_fd(),
                    &mut [IoSliceMut::new(part)],
                    Some(at),
                    RwFlags(caps.rw_flags),
                ),
                Handle::Ubio(f) => f.read_at(part, at),
            };
            match r {
                Ok(0) => {
                    return Err(path_context(
                        io::ErrorKind::UnexpectedEof.into(),
                        &format!("read at {at}"),
                        path,
                    ))
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(path_context(e, "read", path)),
            }
        }
        self.fadvise_dontneed(off, buf.len() as u64, path)
    }

    fn write_all(&self, buf: &[u8], off: u64, path: &Path) -> io::Result<()> {
        let mut done = 0usize;
        while done < buf.len() {
            let at = off + done as u64;
            let part = &buf[done..];
            let r = match self {
                Handle::Raw { file, caps } if caps.rw_flags == 0 => file.write_at(part, at),
                Handle::Raw { file, caps } => sys::pwritev2(
                    file.as_fd(),
                    &[IoSlice::new(part)],
                    Some(at),
                    RwFlags(caps.rw_flags),
                ),
                Handle::Ubio(f) => f.write_at(part, at),
            };
            match r {
                Ok(0) => return Err(path_context(io::ErrorKind::WriteZero.into(), "write", path)),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(path_context(e, "write", path)),
            }
        }
        self.fadvise_dontneed(off, buf.len() as u64, path)
    }

    /// The plain-with-fadvise mode: drop the range just read or written.
    fn fadvise_dontneed(&self, off: u64, len: u64, path: &Path) -> io::Result<()> {
        if let Handle::Raw { file, caps } = self {
            if !caps.advise_dontneed {
                return Ok(());
            }
            sys::fadvise(file.as_fd(), off, len, Advice::DontNeed)
                .map_err(|e| path_context(e, "fadvise", path))?;
        }
        Ok(())
    }

    /// fsync (if written) and close; the ubio stats as JSON.
    fn finish(self, written: bool, path: &Path) -> io::Result<Option<serde_json::Value>> {
        match self {
            Handle::Raw { file, .. } => {
                if written {
                    file.sync_all()
                        .map_err(|e| path_context(e, "fsync", path))?;
                }
                Ok(None)
            }
            Handle::Ubio(f) => {
                if written {
                    f.sync_all()?;
                }
                let stats = f.close()?;
                Ok(Some(serde_json::to_value(&stats).unwrap_or_default()))
            }
        }
    }
}

/// One thread's files, one request at a time.
pub(super) fn lane(job: &EngineJob, thread: u32, shared: &Shared) -> io::Result<LaneOutcome> {
    let (kind, layout, mode) = (job.workload.kind, &job.layout, job.mode);
    let mut buf = AlignedBuf::new(layout.block_bytes as usize, DIRECT_ALIGN as usize);
    fill(&mut buf);
    let mut out = LaneOutcome::default();
    // Written files stay open until the end, then are fsynced (fio's end_fsync).
    let mut written: Vec<(Handle, PathBuf)> = Vec::new();
    for f in 0..layout.files_per_thread {
        if shared.stopped() {
            break;
        }
        let (src, id) = (layout.source(thread, f), layout.file_id(thread, f));
        let offs = offsets(kind, layout, id, job.workload.seed);
        match kind {
            WorkloadKind::SeqRead | WorkloadKind::RandRead => {
                let h = Handle::open(mode, &src, Access::Read)?;
                (out.backend, out.reason) = h.describe();
                for &off in &offs {
                    if shared.stopped() {
                        break;
                    }
                    h.read_full(&mut buf, off, &src)?;
                    shared.add(buf.len() as u64);
                }
                out.ubio_stats.extend(h.finish(false, &src)?);
            }
            WorkloadKind::SeqWrite | WorkloadKind::RandWrite => {
                let access = if kind == WorkloadKind::SeqWrite {
                    Access::create(layout.shared)
                } else {
                    Access::Overwrite
                };
                let h = Handle::open(mode, &src, access)?;
                (out.backend, out.reason) = h.describe();
                for &off in &offs {
                    if shared.stopped() {
                        break;
                    }
                    stamp(&mut buf, id, (off - layout.base(id)) / layout.block_bytes);
                    h.write_all(&buf, off, &src)?;
                    shared.add(buf.len() as u64);
                }
                written.push((h, src));
            }
            WorkloadKind::Copy => {
                let dst = layout.copy(thread, f);
                let r = Handle::open(mode, &src, Access::Read)?;
                let w = Handle::open(mode, &dst, Access::create(layout.shared))?;
                (out.backend, out.reason) = w.describe();
                for &off in &offs {
                    if shared.stopped() {
                        break;
                    }
                    r.read_full(&mut buf, off, &src)?;
                    w.write_all(&buf, off, &dst)?;
                    shared.add(buf.len() as u64);
                }
                out.ubio_stats.extend(r.finish(false, &src)?);
                written.push((w, dst));
            }
        }
    }
    out.io_end_mono_secs = monotonic_secs();
    for (h, path) in written {
        out.ubio_stats.extend(h.finish(true, &path)?);
    }
    Ok(out)
}
