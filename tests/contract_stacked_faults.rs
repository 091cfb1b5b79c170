//! Writeback errors are not lost through a stacked filesystem: a stream
//! written through an overlay (its real file found, or not: the fallback)
//! and through a FUSE passthrough (bindfs), over an ext4 whose device starts
//! failing writes, gets the EIO back from a write, flush or close, naming
//! the file, and the data flushed before the fault reads back intact.
//! Host only (the guests have neither overlay nor bindfs); 64 MiB streams.

mod common;

use common::*;
use std::io::{Read, Write};
use std::path::Path;
use ubio_testenv::scratchfs::{FsKind, ScratchFs};
use ubio_testenv::stackfs::{Bindfs, Overlay};

const SEED: u64 = 11;
const PREFIX: u64 = 8 * MIB;
const LIMIT: u64 = 64 * MIB;

/// An ext4 whose writes can be made to fail, or a SKIP.
fn eio_fs(test: &str) -> Option<ScratchFs> {
    if ubio::sys::geteuid() != 0 {
        skip(test, "loop devices and mounts need root");
        return None;
    }
    match ScratchFs::create_eio(FsKind::Ext4, 256 * MIB) {
        Ok(fs) => Some(fs),
        Err(e) => {
            skip(test, &e.to_string());
            None
        }
    }
}

/// Write and flush `PREFIX` bytes of the pattern to `path` with ubio's
/// `auto`, make the device fail, write on until an error comes back from a
/// write, flush or close, and check it.
fn check_eio_reaches_the_caller(what: &str, fs: &ScratchFs, path: &Path) {
    let mut f = ubio::File::create(path).unwrap();
    let mut buf = vec![0u8; MIB as usize];
    let mut off = 0;
    while off < PREFIX {
        fill_pattern(SEED, off, &mut buf);
        f.write_all(&buf).unwrap();
        off += MIB;
    }
    f.sync_all().unwrap();
    fs.fail_writes().unwrap();
    let (err, call) = loop {
        if off >= LIMIT {
            break match f.flush() {
                Err(e) => (e, "flush"),
                Ok(()) => match f.close() {
                    Err(e) => (e, "close"),
                    Ok(stats) => panic!("{what}: no error after writing {off} bytes: {stats:?}"),
                },
            };
        }
        fill_pattern(SEED, off, &mut buf);
        if let Err(e) = f.write_all(&buf) {
            drop(f);
            break (e, "write");
        }
        off += MIB;
    };
    eprintln!("{what}: {call} failed after {} MiB: {err}", off / MIB);
    let errno = ubio::error::raw_os_error(&err);
    assert!(
        errno.is_some_and(|e| e == libc::EIO || e == libc::EROFS),
        "{what}: {call}: {err} (expected EIO or EROFS)"
    );
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{what}: the error must name the file: {err}"
    );
    // The prefix, flushed before the fault, reads back intact.
    let mut got = vec![0u8; PREFIX as usize];
    let mut want = vec![0u8; PREFIX as usize];
    fill_pattern(SEED, 0, &mut want);
    match std::fs::File::open(path).and_then(|mut r| r.read_exact(&mut got)) {
        Ok(()) => assert!(got == want, "{what}: data flushed before the fault changed"),
        // Since 6.12 ext4 refuses every open after a journal abort.
        Err(e) if e.raw_os_error() == Some(libc::EIO) => {
            eprintln!("{what}: the filesystem shut down; the prefix cannot be read back")
        }
        Err(e) => panic!("{what}: read back {}: {e}", path.display()),
    }
}

#[test]
fn writeback_eio_through_an_overlay_reaches_the_caller() {
    let Some(fs) = eio_fs("eio_overlay") else {
        return;
    };
    let o = Overlay::mount(fs.mount_point()).unwrap();
    check_eio_reaches_the_caller("overlay", &fs, &o.mnt.join("f"));
}

/// The fallback (real file not found) waits with fdatasync() through the
/// overlay, which reports the real file's writeback errors.
#[test]
fn writeback_eio_through_an_overlay_fallback_reaches_the_caller() {
    let Some(fs) = eio_fs("eio_overlay_fallback") else {
        return;
    };
    let o = Overlay::mount_hidden(fs.mount_point()).unwrap();
    let path = o.mnt.join("f");
    let probe = ubio::probe_path(&o.mnt).unwrap();
    assert!(
        probe.real_file.as_ref().is_some_and(|r| !r.available),
        "the layers were meant to be hidden: {probe:?}"
    );
    check_eio_reaches_the_caller("overlay fallback", &fs, &path);
}

/// bindfs writes through to its backing file, whose writeback fails in the
/// daemon's name: only an fsync through the mount carries the error back.
#[test]
fn writeback_eio_through_fuse_reaches_the_caller() {
    let Some(fs) = eio_fs("eio_fuse") else {
        return;
    };
    let b = match Bindfs::mount(fs.mount_point(), &[]) {
        Ok(b) => b,
        Err(e) => {
            skip("eio_fuse", &format!("bindfs: {e}"));
            return;
        }
    };
    check_eio_reaches_the_caller("fuse", &fs, &b.mnt.join("f"));
}
