//! Plain-file behaviour (cases 5 and 6 of the library issue): any offset,
//! length and buffer on every backend, holes, sparse files, extension past
//! EOF, short reads at EOF, O_APPEND; and non-regular files pass through.

mod common;

use common::*;
use std::io::{self, IoSlice, IoSliceMut, Read, Seek, SeekFrom, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use ubio::BackendKind;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(1);
        splitmix(self.0)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A buffer deliberately misaligned in memory by `skew` bytes.
fn skewed(data: &[u8], skew: usize) -> Vec<u8> {
    let mut v = vec![0u8; data.len() + skew];
    v[skew..].copy_from_slice(data);
    v
}

fn check_read(model: &[u8], got: &[u8], off: u64, want_len: usize, what: &str) {
    let size = model.len() as u64;
    let expect = if off >= size {
        0
    } else {
        (size - off).min(want_len as u64) as usize
    };
    assert_eq!(
        got.len(),
        expect,
        "{what}: read of {want_len} at {off} (size {size}) returned {}",
        got.len()
    );
    if expect > 0 {
        let m = &model[off as usize..off as usize + expect];
        if got != m {
            let i = got.iter().zip(m).position(|(a, b)| a != b).unwrap();
            panic!(
                "{what}: byte {} differs: got {:#x}, model {:#x}",
                off + i as u64,
                got[i],
                m[i]
            );
        }
    }
}

/// Case 5: random unaligned positional, stream and vectored reads and
/// writes, truncation up and down, holes and writes past EOF, checked
/// against an in-memory model after every read and at the end.
#[test]
fn unaligned_io_behaves_as_a_plain_file() {
    for t in targets("unaligned", GIB) {
        for backend in all_backends() {
            let path = t.path(&format!("model-{backend}"));
            let mut opts = ubio::OpenOptions::new();
            opts.read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .window(MIB);
            let Some(mut f) = open_or_refused(&mut opts, backend, &path, &t) else {
                continue;
            };
            let what = format!("{} {backend}", t.name);
            let mut rng = Rng(0xC0FFEE ^ backend as u64);
            let mut model: Vec<u8> = Vec::new();
            let mut pos = 0u64;
            for _ in 0..400 {
                let op = rng.below(10);
                let off = rng.below(6 * MIB);
                let len = 1 + rng.below(300 * KIB) as usize;
                match op {
                    0 | 1 => {
                        let mut data = vec![0u8; len];
                        fill_pattern(rng.next(), off, &mut data);
                        let buf = skewed(&data, 1 + rng.below(63) as usize);
                        f.write_all_at(&buf[buf.len() - len..], off).unwrap();
                        if model.len() < off as usize + len {
                            model.resize(off as usize + len, 0);
                        }
                        model[off as usize..off as usize + len].copy_from_slice(&data);
                    }
                    2 | 3 => {
                        let skew = 1 + rng.below(63) as usize;
                        let mut buf = vec![0u8; len + skew];
                        let n = f.read_at(&mut buf[skew..], off).unwrap();
                        check_read(&model, &buf[skew..skew + n], off, len, &what);
                    }
                    4 => {
                        // Stream write at the current position, then a stream read.
                        let mut data = vec![0u8; len];
                        fill_pattern(rng.next(), pos, &mut data);
                        f.write_all(&data).unwrap();
                        if model.len() < pos as usize + len {
                            model.resize(pos as usize + len, 0);
                        }
                        model[pos as usize..pos as usize + len].copy_from_slice(&data);
                        pos = f.seek(SeekFrom::Start(off)).unwrap();
                        let mut buf = vec![0u8; len];
                        let n = f.read(&mut buf).unwrap();
                        check_read(&model, &buf[..n], off, len, &what);
                        pos += n as u64;
                    }
                    5 => {
                        // Truncate up (a hole) or down.
                        let new = rng.below(7 * MIB);
                        f.get_ref().set_len(new).unwrap();
                        model.resize(new as usize, 0);
                    }
                    6 => {
                        // A write past EOF leaves a hole that reads as zeros.
                        let at = model.len() as u64 + rng.below(2 * MIB);
                        let mut data = vec![0u8; len.min(8192)];
                        fill_pattern(rng.next(), at, &mut data);
                        f.write_all_at(&data, at).unwrap();
                        model.resize(at as usize + data.len(), 0);
                        model[at as usize..].copy_from_slice(&data);
                    }
                    7 => {
                        // Vectored: three pieces of odd sizes.
                        let (a, b) = (len / 3, len / 2);
                        let mut data = vec![0u8; len];
                        fill_pattern(rng.next(), off, &mut data);
                        let iov = [
                            IoSlice::new(&data[..a]),
                            IoSlice::new(&data[a..b]),
                            IoSlice::new(&data[b..]),
                        ];
                        let n = f.write_vectored_at(&iov, off).unwrap();
                        if model.len() < off as usize + n {
                            model.resize(off as usize + n, 0);
                        }
                        model[off as usize..off as usize + n].copy_from_slice(&data[..n]);
                        let (mut x, mut y, mut z) =
                            (vec![0u8; a], vec![0u8; b - a], vec![0u8; len - b]);
                        let n = f
                            .read_vectored_at(
                                &mut [
                                    IoSliceMut::new(&mut x),
                                    IoSliceMut::new(&mut y),
                                    IoSliceMut::new(&mut z),
                                ],
                                off,
                            )
                            .unwrap();
                        let got: Vec<u8> = [x, y, z].concat();
                        check_read(&model, &got[..n], off, len, &what);
                    }
                    8 => f.flush().unwrap(),
                    _ => {
                        // A read that straddles EOF is short, one past EOF is empty.
                        let size = model.len() as u64;
                        let at = size.saturating_sub(rng.below(5000));
                        let mut buf = vec![0u8; len];
                        let n = f.read_at(&mut buf, at).unwrap();
                        check_read(&model, &buf[..n], at, len, &what);
                        assert_eq!(
                            f.read_at(&mut buf, size + rng.below(100)).unwrap(),
                            0,
                            "{what}: read past EOF"
                        );
                    }
                }
            }
            f.sync_all().unwrap();
            f.close().unwrap();
            let on_disk = std::fs::read(&path).unwrap();
            assert_eq!(on_disk.len(), model.len(), "{what}: final size");
            check_read(
                &model,
                &on_disk,
                0,
                model.len(),
                &format!("{what} final contents"),
            );
            std::fs::remove_file(&path).unwrap();
        }
    }
}

/// Case 5: O_APPEND handles append whatever the offset, as plain files do.
#[test]
fn append_mode_appends() {
    for t in targets("append", GIB) {
        for backend in all_backends() {
            let path = t.path(&format!("append-{backend}"));
            std::fs::write(&path, b"existing,").unwrap();
            let mut opts = ubio::OpenOptions::new();
            opts.append(true);
            let Some(mut f) = open_or_refused(&mut opts, backend, &path, &t) else {
                continue;
            };
            let mut model = b"existing,".to_vec();
            let mut rng = Rng(7);
            for i in 0..50 {
                let mut data = vec![0u8; 1 + rng.below(70_000) as usize];
                fill_pattern(i, 0, &mut data);
                if i % 2 == 0 {
                    f.write_all(&data).unwrap();
                } else {
                    // pwrite on an O_APPEND file appends on Linux.
                    f.write_all_at(&data, 0).unwrap();
                }
                model.extend_from_slice(&data);
            }
            f.close().unwrap();
            let got = std::fs::read(&path).unwrap();
            assert!(
                got == model,
                "{} {backend}: appended contents differ (len {} vs {})",
                t.name,
                got.len(),
                model.len()
            );
            std::fs::remove_file(&path).unwrap();
        }
    }
}

/// Case 5: a sparse file reads back its holes as zeros and keeps them.
#[test]
fn sparse_files_keep_their_holes() {
    for t in targets("sparse", GIB) {
        for backend in all_backends() {
            let path = t.path(&format!("sparse-{backend}"));
            let mut opts = ubio::OpenOptions::new();
            opts.read(true).write(true).create(true).truncate(true);
            let Some(f) = open_or_refused(&mut opts, backend, &path, &t) else {
                continue;
            };
            f.write_all_at(b"head", 0).unwrap();
            f.write_all_at(b"tail", 100 * MIB).unwrap();
            f.flush_writeback().unwrap();
            let mut buf = vec![1u8; MIB as usize];
            f.read_exact_at(&mut buf, 50 * MIB).unwrap();
            assert!(
                buf.iter().all(|&b| b == 0),
                "{} {backend}: hole is not zeros",
                t.name
            );
            f.close().unwrap();
            let meta = std::fs::metadata(&path).unwrap();
            use std::os::unix::fs::MetadataExt;
            assert_eq!(meta.len(), 100 * MIB + 4);
            assert!(
                meta.blocks() * 512 < 10 * MIB,
                "{} {backend}: the hole was filled ({} blocks)",
                t.name,
                meta.blocks()
            );
            std::fs::remove_file(&path).unwrap();
        }
    }
}

fn pipe() -> (std::fs::File, std::fs::File) {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors are fresh and owned here.
    unsafe {
        (
            OwnedFd::from_raw_fd(fds[0]).into(),
            OwnedFd::from_raw_fd(fds[1]).into(),
        )
    }
}

fn assert_passthrough(f: &ubio::File, what: &str, reason_has: &str) {
    let c = f.choice();
    assert!(!c.managed, "{what} must pass through: {c:?}");
    assert_eq!(c.backend, BackendKind::Buffered, "{what}");
    assert!(
        c.reason.contains(reason_has),
        "{what}: reason {:?} should mention {reason_has:?}",
        c.reason
    );
}

/// Case 6: a pipe passes through unchanged (whatever backend was asked for).
#[test]
fn pipes_pass_through() {
    for backend in all_backends() {
        let (r, w) = pipe();
        let mut w = ubio::OpenOptions::new()
            .backend(backend)
            .wrap(w, None)
            .unwrap();
        let mut r = ubio::OpenOptions::new()
            .backend(backend)
            .wrap(r, None)
            .unwrap();
        assert_passthrough(&w, "pipe writer", "not a regular file");
        assert_passthrough(&r, "pipe reader", "not a regular file");
        let writer = std::thread::spawn(move || {
            for i in 0..1000u32 {
                w.write_all(format!("line {i}\n").as_bytes()).unwrap();
            }
            w.close().unwrap();
        });
        let mut got = String::new();
        r.read_to_string(&mut got).unwrap();
        writer.join().unwrap();
        let want: String = (0..1000u32).map(|i| format!("line {i}\n")).collect();
        assert_eq!(got, want, "{backend}");
    }
}

/// Case 6: a socket passes through unchanged.
#[test]
fn sockets_pass_through() {
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut a = ubio::OpenOptions::new()
        .wrap(OwnedFd::from(a).into(), None)
        .unwrap();
    let mut b = ubio::OpenOptions::new()
        .wrap(OwnedFd::from(b).into(), None)
        .unwrap();
    assert_passthrough(&a, "socket", "not a regular file");
    a.write_all(b"ping").unwrap();
    let mut buf = [0u8; 4];
    b.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping");
}

/// Case 6: character devices pass through unchanged.
#[test]
fn character_devices_pass_through() {
    let mut zero = ubio::File::open("/dev/zero").unwrap();
    assert_passthrough(&zero, "/dev/zero", "not a regular file");
    let mut buf = vec![7u8; MIB as usize];
    zero.read_exact(&mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0));
    let mut null = ubio::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .unwrap();
    null.write_all(&buf).unwrap();
    null.close().unwrap();
}

/// Case 6: /proc and /sys files pass through and read as with std.
#[test]
fn proc_and_sys_files_pass_through() {
    for p in [
        "/proc/version",
        "/proc/filesystems",
        "/proc/self/cmdline",
        "/sys/kernel/mm/transparent_hugepage/enabled",
    ] {
        if !std::path::Path::new(p).exists() {
            continue;
        }
        let mut f = ubio::File::open(p).unwrap();
        let fs = if p.starts_with("/proc") {
            "proc"
        } else {
            "sysfs"
        };
        assert_passthrough(&f, p, fs);
        let mut got = Vec::new();
        f.read_to_end(&mut got).unwrap();
        assert_eq!(got, std::fs::read(p).unwrap(), "{p}");
        assert!(!got.is_empty(), "{p} read empty");
    }
}

/// `Stream::write_at(fd, .., None)` is write(2) on a descriptor someone else
/// owns (the LD_PRELOAD shim): the data goes at the file position, which then
/// moves past it, on every backend; O_APPEND descriptors append.
#[test]
fn stream_writes_at_the_file_position() {
    use std::os::fd::AsFd;
    for t in targets("stream_position", GIB) {
        for backend in all_backends() {
            for append in [false, true] {
                let path = t.path(&format!("position-{backend}-{append}"));
                std::fs::write(&path, b"0123456789").unwrap();
                std::fs::File::open(&path).unwrap().sync_all().unwrap();
                evict(&path); // cold, so `direct` really writes with O_DIRECT
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .append(append)
                    .open(&path)
                    .unwrap();
                let opts = ubio::StreamOptions {
                    backend,
                    ..Default::default()
                };
                let stream = match ubio::Stream::new(file.as_fd(), &opts) {
                    Ok(s) => s,
                    Err(e) if e.kind() == io::ErrorKind::Unsupported => continue,
                    Err(e) => panic!("{e}"),
                };
                (&file).seek(SeekFrom::Start(2)).unwrap();
                let (at, n) = stream
                    .write_at(file.as_fd(), &[IoSlice::new(b"ab")], None)
                    .unwrap();
                let pos = (&file).stream_position().unwrap();
                stream.finish(file.as_fd()).unwrap();
                let got = std::fs::read(&path).unwrap();
                let what = format!("{} {backend} append={append}", t.name);
                if append {
                    assert_eq!((at, n, pos), (10, 2, 12), "{what}");
                    assert_eq!(got, b"0123456789ab", "{what}");
                } else {
                    assert_eq!((at, n, pos), (2, 2, 4), "{what}");
                    assert_eq!(got, b"01ab456789", "{what}");
                }
                std::fs::remove_file(&path).unwrap();
            }
        }
    }
}
