//! `queue_depth` requests in flight per thread through io_uring: READ and
//! WRITE with RWF_DONTCACHE in the SQE's rw_flags (dontcache-uring), or on
//! O_DIRECT descriptors (odirect-uring). A copy links each block's READ to
//! its WRITE (IOSQE_IO_LINK) in one buffer slot.
//!
//! Every buffer slot stays allocated until the kernel has completed every
//! request that uses it: on an error the lane stops submitting, waits for
//! what is in flight, and only then returns.

use super::data::{offsets, stamp};
use super::support::{fill, AlignedBuf, DIRECT_ALIGN};
use super::sync_io::{open_std, Access};
use super::{EngineJob, LaneOutcome, Shared};
use crate::clock::monotonic_secs;
use crate::harness::mode::WorkloadKind;
use crate::path_context;
use io_uring::{opcode, squeue, types, IoUring};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use ubio::sys::RwFlags;

/// One block to move: from file `file` of the thread at `off`.
struct Op {
    file: usize,
    off: u64,
}

pub(super) fn lane(job: &EngineJob, thread: u32, shared: &Shared) -> io::Result<LaneOutcome> {
    let (kind, layout) = (job.workload.kind, &job.layout);
    let caps = job.mode.caps();
    let direct = caps.open_flags & libc::O_DIRECT != 0;
    let (open_flags, rw_flags) = (caps.open_flags, caps.rw_flags as i32);
    let qd = job.workload.queue_depth.clamp(1, 4096) as usize;
    let block = layout.block_bytes as usize;

    // Sources (read, or written for write workloads) and copies.
    let src_access = match kind {
        WorkloadKind::SeqWrite => Access::create(layout.shared),
        WorkloadKind::RandWrite => Access::Overwrite,
        _ => Access::Read,
    };
    let mut srcs: Vec<(File, PathBuf, u64)> = Vec::new();
    let mut dsts: Vec<(File, PathBuf)> = Vec::new();
    for f in 0..layout.files_per_thread {
        let p = layout.source(thread, f);
        srcs.push((
            open_std(&p, src_access, open_flags)?,
            p,
            layout.file_id(thread, f),
        ));
        if kind == WorkloadKind::Copy {
            let d = layout.copy(thread, f);
            dsts.push((open_std(&d, Access::create(layout.shared), open_flags)?, d));
        }
    }
    let mut ops = srcs.iter().enumerate().flat_map(|(i, (_, _, id))| {
        offsets(kind, layout, *id, job.workload.seed)
            .into_iter()
            .map(move |off| Op { file: i, off })
    });

    let mut ring = IoUring::new((2 * qd).next_power_of_two() as u32)
        .map_err(|e| io::Error::new(e.kind(), format!("io_uring_setup({}): {e}", 2 * qd)))?;
    let mut slots: Vec<AlignedBuf> = (0..qd)
        .map(|_| {
            let mut b = AlignedBuf::new(block, DIRECT_ALIGN as usize);
            fill(&mut b);
            b
        })
        .collect();
    // Completions still due per slot, and the op of each busy slot.
    let mut pending = vec![0u32; qd];
    let mut busy: Vec<Option<Op>> = (0..qd).map(|_| None).collect();
    let mut free: Vec<usize> = (0..qd).rev().collect();
    let mut failure: Option<io::Error> = None;
    // Completions of one wait, reused: no allocation per wait.
    let mut done: Vec<(u64, i32)> = Vec::with_capacity(2 * qd);

    loop {
        while failure.is_none() && !shared.stopped() {
            let Some(slot) = free.pop() else { break };
            let Some(op) = ops.next() else {
                free.push(slot);
                break;
            };
            let (src, _, id) = &srcs[op.file];
            let buf = &mut slots[slot];
            let ptr = buf.as_mut_ptr();
            let ud = slot as u64;
            let read = |fd: &File| {
                opcode::Read::new(types::Fd(fd.as_raw_fd()), ptr, block as u32)
                    .offset(op.off)
                    .rw_flags(rw_flags)
                    .build()
                    .user_data(ud)
            };
            let write = |fd: &File| {
                opcode::Write::new(types::Fd(fd.as_raw_fd()), ptr, block as u32)
                    .offset(op.off)
                    .rw_flags(rw_flags)
                    .build()
                    .user_data(ud)
            };
            // One request per block; for a copy a read linked to its write.
            // Built on the stack: nothing is allocated per request.
            let (first, linked) = match kind {
                WorkloadKind::SeqRead | WorkloadKind::RandRead => (read(src), None),
                WorkloadKind::SeqWrite | WorkloadKind::RandWrite => {
                    stamp(buf, *id, (op.off - layout.base(*id)) / layout.block_bytes);
                    (write(src), None)
                }
                WorkloadKind::Copy => (
                    read(src).flags(squeue::Flags::IO_LINK),
                    Some(write(&dsts[op.file].0)),
                ),
            };
            // SAFETY: the buffer (`slots[slot]`) and the descriptors (`srcs`,
            // `dsts`) outlive the requests: the slot is not reused, and this
            // function does not return, until every completion for it has
            // been reaped (the loop below drains before returning, also on
            // error). The ring has room for 2 entries per slot.
            let requests = 1 + u32::from(linked.is_some());
            let pushed = unsafe {
                let mut sq = ring.submission();
                match linked {
                    None => sq.push(&first),
                    Some(second) => sq.push_multiple(&[first, second]),
                }
            };
            pushed.map_err(|_| io::Error::other("io_uring submission queue full"))?;
            pending[slot] = requests;
            busy[slot] = Some(op);
        }
        if pending.iter().all(|&p| p == 0) {
            break;
        }
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // Nothing can be reaped safely without the ring: give up
                // only if nothing is in flight, else keep trying.
                failure.get_or_insert(io::Error::new(e.kind(), format!("io_uring_enter: {e}")));
                continue;
            }
        }
        done.clear();
        done.extend(ring.completion().map(|c| (c.user_data(), c.result())));
        for &(ud, res) in &done {
            let slot = ud as usize;
            pending[slot] -= 1;
            let path = busy[slot]
                .as_ref()
                .map(|op| srcs[op.file].1.clone())
                .unwrap_or_default();
            if res < 0 {
                let e = io::Error::from_raw_os_error(-res);
                if failure.is_none() && e.raw_os_error() != Some(libc::ECANCELED) {
                    failure = Some(path_context(e, &format!("{} (io_uring)", job.mode), &path));
                }
            } else if res as usize != block && failure.is_none() {
                failure = Some(path_context(
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("{res} of {block} bytes"),
                    ),
                    "short io_uring request",
                    &path,
                ));
            }
            if pending[slot] == 0 {
                if failure.is_none() {
                    shared.add(block as u64);
                }
                busy[slot] = None;
                free.push(slot);
            }
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let io_end = monotonic_secs();
    let written: Vec<(File, PathBuf)> = match kind {
        WorkloadKind::SeqWrite | WorkloadKind::RandWrite => {
            srcs.into_iter().map(|(f, p, _)| (f, p)).collect()
        }
        WorkloadKind::Copy => dsts,
        _ => Vec::new(),
    };
    for (f, p) in &written {
        f.sync_all().map_err(|e| path_context(e, "fsync", p))?;
    }
    let (backend, reason) = if direct {
        (
            "O_DIRECT (io_uring)",
            format!("io_uring READ/WRITE on O_DIRECT descriptors, {qd} in flight"),
        )
    } else {
        (
            "RWF_DONTCACHE (io_uring)",
            format!("io_uring READ/WRITE with RWF_DONTCACHE, {qd} in flight"),
        )
    };
    Ok(LaneOutcome {
        backend: backend.to_owned(),
        reason,
        ubio_stats: Vec::new(),
        io_end_mono_secs: io_end,
        end_mono_secs: 0.0,
    })
}

/// One real request of `len` bytes at offset 0 of `path` (which holds at
/// least that much), as the lane would make it: proves io_uring works here
/// and, for !`direct`, that RWF_DONTCACHE does.
pub(super) fn probe(path: &std::path::Path, direct: bool, len: usize) -> io::Result<()> {
    let mode = if direct {
        "odirect-uring"
    } else {
        "dontcache-uring"
    };
    let unsupported =
        |what: String| io::Error::new(io::ErrorKind::Unsupported, format!("{mode}: {what}"));
    let file = open_std(path, Access::Read, if direct { libc::O_DIRECT } else { 0 })
        .map_err(|e| unsupported(e.to_string()))?;
    let mut ring = IoUring::new(2).map_err(|e| unsupported(format!("io_uring_setup: {e}")))?;
    let mut buf = AlignedBuf::new(len, DIRECT_ALIGN as usize);
    let flags = if direct {
        0
    } else {
        RwFlags::DONTCACHE.0 as i32
    };
    let sqe = opcode::Read::new(types::Fd(file.as_raw_fd()), buf.as_mut_ptr(), len as u32)
        .rw_flags(flags)
        .build()
        .user_data(1);
    // SAFETY: `buf` and `file` live until the completion is reaped below
    // (submit_and_wait(1) returns only once it has arrived, or fails before
    // submitting anything).
    unsafe { ring.submission().push(&sqe) }.map_err(|_| io::Error::other("io_uring queue full"))?;
    loop {
        match ring.submit_and_wait(1) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(unsupported(format!("io_uring_enter: {e}"))),
        }
    }
    let res = ring
        .completion()
        .next()
        .map(|c| c.result())
        .unwrap_or(-libc::EIO);
    match res {
        r if r >= 0 => Ok(()),
        r if -r == libc::EOPNOTSUPP && !direct => Err(unsupported(
            "RWF_DONTCACHE is not supported here (needs Linux 6.14+ and ext4 or xfs; not btrfs, tmpfs \
             or overlayfs): leave it out of --modes or use another directory"
                .into(),
        )),
        r => Err(unsupported(format!("a test read failed: {}", io::Error::from_raw_os_error(-r)))),
    }
}
