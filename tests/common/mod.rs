//! Shared support for the integration tests: the filesystems every case runs
//! on, a deterministic data pattern, residency helpers and loud skips.
#![allow(dead_code)]

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use ubio::sys::{self, Advice};
use ubio_testenv::scratchfs::{FsKind, ScratchFs, ScratchOpts};
pub use ubio_testenv::skip;

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;
pub const PAGE: u64 = 4096;

/// A directory on one filesystem kind, removed (and unmounted) on drop.
pub struct Target {
    pub name: &'static str,
    pub dir: PathBuf,
    _tmp: tempfile::TempDir,
    _fs: Option<ScratchFs>,
}

impl Target {
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
    /// tmpfs: the page cache is the storage, nothing may be dropped.
    pub fn pages_are_storage(&self) -> bool {
        self.name == "tmpfs"
    }
}

/// Guest mode (UBIO_TEST_ONLY_DIR=1, set by scripts/guest/run.sh inside its
/// QEMU guest): every case runs only on the filesystem mounted at
/// UBIO_TEST_DIR, whatever it is (f2fs included), and the fault cases make
/// scratch filesystems of that kind only. The guest runs every test of its
/// binaries (contract_cache, contract_io, contract_faults): a test that needs
/// what the guest lacks (cgroups, a network, FUSE) returns early here, saying so.
pub fn guest_mode() -> bool {
    std::env::var_os("UBIO_TEST_ONLY_DIR").is_some_and(|v| v == "1")
}

pub fn guest_dir() -> PathBuf {
    std::env::var_os("UBIO_TEST_DIR")
        .map(PathBuf::from)
        .expect("UBIO_TEST_ONLY_DIR=1 needs UBIO_TEST_DIR (the filesystem to test)")
}

/// The size of the big streams: 1 GiB; in guest mode UBIO_TEST_STREAM_MB
/// MiB if set, at least 128 MiB: twice the 64 MiB read bound and four times
/// the write bound (2 windows + 1 MiB), so an unmanaged stream breaks both.
pub fn stream_bytes() -> u64 {
    let mb = std::env::var("UBIO_TEST_STREAM_MB")
        .ok()
        .filter(|_| guest_mode())
        .map(|v| v.parse::<u64>().expect("UBIO_TEST_STREAM_MB: a number"));
    match mb {
        Some(mb) => {
            assert!(mb >= 128, "UBIO_TEST_STREAM_MB={mb}: at least 128");
            mb * MIB
        }
        None => GIB,
    }
}

/// The filesystem kinds the fault cases make scratch filesystems of: ext4,
/// xfs and btrfs; in guest mode only the kind mounted at UBIO_TEST_DIR.
pub fn fault_kinds(test: &str) -> Vec<FsKind> {
    if !guest_mode() {
        return FsKind::ALL.to_vec();
    }
    let fs = fs_name(&guest_dir());
    if fs == "nfs" {
        // The faults are injected in a filesystem the test makes on a loop
        // device; under NFS they would have to be the server's.
        eprintln!("{test}: device faults are injected under local filesystems only, not under nfs");
        return Vec::new();
    }
    match fs.parse::<FsKind>() {
        Ok(kind) => vec![kind],
        Err(e) => {
            skip(&format!("{test}/{fs}"), &e.to_string());
            Vec::new()
        }
    }
}

/// The filesystems every case runs on: ext4 (a directory in the working
/// tree, or UBIO_TEST_DIR), xfs and btrfs (loop-mounted images made here),
/// and tmpfs (/dev/shm). `fs_bytes` sizes the loop images. In guest mode,
/// only UBIO_TEST_DIR, named by its filesystem type.
pub fn targets(test: &str, fs_bytes: u64) -> Vec<Target> {
    let mut out = Vec::new();
    if guest_mode() {
        let tmp = tempfile::Builder::new()
            .prefix("ubio-test-")
            .tempdir_in(guest_dir())
            .unwrap();
        out.push(Target {
            name: Box::leak(fs_name(tmp.path()).into_boxed_str()),
            dir: tmp.path().to_path_buf(),
            _tmp: tmp,
            _fs: None,
        });
        return out;
    }
    let base = std::env::var_os("UBIO_TEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    std::fs::create_dir_all(&base).unwrap();
    let tmp = tempfile::Builder::new()
        .prefix("ubio-test-")
        .tempdir_in(&base)
        .unwrap();
    let fs = fs_name(tmp.path());
    if fs == "ext4" {
        out.push(Target {
            name: "ext4",
            dir: tmp.path().to_path_buf(),
            _tmp: tmp,
            _fs: None,
        });
    } else {
        skip(
            &format!("{test}/ext4"),
            &format!(
                "{} is {fs}, not ext4 (point UBIO_TEST_DIR at an ext4 directory)",
                base.display()
            ),
        );
    }
    for kind in [FsKind::Xfs, FsKind::Btrfs] {
        match scratch(kind, fs_bytes) {
            Ok(t) => out.push(t),
            Err(e) => skip(&format!("{test}/{kind}"), &e.to_string()),
        }
    }
    match tempfile::Builder::new()
        .prefix("ubio-test-")
        .tempdir_in("/dev/shm")
    {
        Ok(tmp) if fs_name(tmp.path()) == "tmpfs" => out.push(Target {
            name: "tmpfs",
            dir: tmp.path().to_path_buf(),
            _tmp: tmp,
            _fs: None,
        }),
        Ok(_) => skip(&format!("{test}/tmpfs"), "/dev/shm is not tmpfs"),
        Err(e) => skip(&format!("{test}/tmpfs"), &format!("/dev/shm: {e}")),
    }
    out
}

fn scratch(kind: FsKind, bytes: u64) -> io::Result<Target> {
    let backing = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target");
    let fs = ScratchFs::create(
        kind,
        bytes.max(kind.min_size_bytes()),
        &ScratchOpts::default().backing_dir(&backing).direct_io(true),
    )?;
    let tmp = tempfile::Builder::new()
        .prefix("ubio-test-")
        .tempdir_in(fs.mount_point())?;
    Ok(Target {
        name: kind.name(),
        dir: tmp.path().to_path_buf(),
        _tmp: tmp,
        _fs: Some(fs),
    })
}

pub fn fs_name(path: &Path) -> String {
    let f = File::open(path).unwrap();
    sys::fs_magic(f.as_fd()).unwrap().name()
}

/// Every backend, for the cases that run all of them.
pub fn all_backends() -> [ubio::BackendKind; 5] {
    ubio::BackendKind::ALL
}

/// Open with `opts` and `backend`; Ok(None) when the backend is refused for
/// this filesystem, after checking that the refusal is the clear error the
/// contract asks for and that the probe agrees it cannot run there.
pub fn open_or_refused(
    opts: &mut ubio::OpenOptions,
    backend: ubio::BackendKind,
    path: &Path,
    target: &Target,
) -> Option<ubio::File> {
    match opts.backend(backend).open(path) {
        Ok(f) => Some(f),
        Err(e) => {
            let msg = e.to_string();
            assert_eq!(
                e.kind(),
                io::ErrorKind::Unsupported,
                "{backend} on {}: unexpected error {msg}",
                target.name
            );
            assert!(
                msg.contains(&format!("backend '{backend}'")),
                "refusal must name the backend: {msg}"
            );
            assert!(
                msg.contains(target.name),
                "refusal must name the filesystem: {msg}"
            );
            assert!(
                msg.contains(&path.display().to_string()),
                "refusal must name the file: {msg}"
            );
            let probe = ubio::probe_path(path).unwrap();
            let possible = match backend {
                ubio::BackendKind::Kernel => probe.fs.dontcache.available,
                ubio::BackendKind::Direct => probe.fs.direct_io.available,
                _ => true,
            };
            assert!(
                !possible,
                "{backend} refused on {} although the probe says it works: {msg}",
                target.name
            );
            eprintln!("refused as expected: {msg}");
            None
        }
    }
}

/// Deterministic content: the byte at absolute file offset `off` (a hash of
/// the 8-byte word it falls in, so any range can be checked independently).
pub fn fill_pattern(seed: u64, off: u64, buf: &mut [u8]) {
    // Whole words between the unaligned edges: one store each, 4x faster than
    // a variable-length copy per word (it matters most in the TCG guest).
    let head = ((8 - (off & 7)) & 7).min(buf.len() as u64) as usize;
    let (first, rest) = buf.split_at_mut(head);
    fill_pattern_bytewise(seed, off, first);
    let mut at = off + head as u64;
    let mut words = rest.chunks_exact_mut(8);
    for w in &mut words {
        w.copy_from_slice(&splitmix(seed ^ (at >> 3)).to_le_bytes());
        at += 8;
    }
    fill_pattern_bytewise(seed, at, words.into_remainder());
}

fn fill_pattern_bytewise(seed: u64, off: u64, buf: &mut [u8]) {
    let mut i = 0usize;
    while i < buf.len() {
        let at = off + i as u64;
        let word = splitmix(seed ^ (at >> 3)).to_le_bytes();
        let from = (at & 7) as usize;
        let n = (8 - from).min(buf.len() - i);
        buf[i..i + n].copy_from_slice(&word[from..from + n]);
        i += n;
    }
}

pub fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Write `size` bytes of the pattern with plain buffered I/O, fsync, and
/// drop the file's pages: a cold file on disk.
pub fn make_cold_file(path: &Path, seed: u64, size: u64) {
    use std::io::Write;
    let mut f = File::create(path).unwrap();
    let mut buf = vec![0u8; MIB as usize];
    let mut off = 0;
    while off < size {
        let n = (size - off).min(MIB) as usize;
        fill_pattern(seed, off, &mut buf[..n]);
        f.write_all(&buf[..n]).unwrap();
        off += n as u64;
    }
    f.sync_all().unwrap();
    evict(path);
}

/// Drop a file's clean pages (only that file: never the global drop_caches).
pub fn evict(path: &Path) {
    let f = File::open(path).unwrap();
    sys::fadvise(f.as_fd(), 0, 0, Advice::DontNeed).unwrap();
}

/// Read the whole file with plain reads and compare with the pattern;
/// returns the size read. Panics at the first differing byte.
pub fn verify_pattern(path: &Path, seed: u64, expect_size: u64) {
    let mut f = File::open(path).unwrap();
    let mut buf = vec![0u8; MIB as usize];
    let mut off = 0u64;
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        assert_pattern(&path.display().to_string(), seed, off, &buf[..n]);
        off += n as u64;
    }
    assert_eq!(off, expect_size, "{}: size", path.display());
}

/// `got`, read at file offset `off`, is the pattern of `seed` there;
/// panics at the first differing byte, naming `what`.
pub fn assert_pattern(what: &str, seed: u64, off: u64, got: &[u8]) {
    let mut want = vec![0u8; got.len()];
    fill_pattern(seed, off, &mut want);
    if let Some(i) = got.iter().zip(&want).position(|(a, b)| a != b) {
        panic!(
            "{what}: byte {} is {:#x}, expected {:#x}",
            off + i as u64,
            got[i],
            want[i]
        );
    }
}

/// Pages of the file now in the page cache (mincore() before Linux 6.5,
/// which has no cachestat()).
pub fn cached_pages(path: &Path) -> u64 {
    ubio::residency::count_path(path, sys::FileRange::WHOLE)
        .unwrap()
        .cached
}

/// Pages of `[off, off + len)` in the page cache: cachestat() (mincore()
/// before Linux 6.5). Counting must not touch what it counts: mmap(), which
/// mincore() needs, makes an NFS client revalidate the file's data, and
/// after a write that reopen finds the file changed and drops its whole
/// cache (nfs_clear_invalid_mapping() from mmap, traced in the 6.12 guest;
/// plain buffered writes lose the pages the same way).
pub fn resident_in(path: &Path, off: u64, len: u64) -> u64 {
    ubio::residency::count_path(path, sys::FileRange::at(off, len))
        .unwrap()
        .cached
}

/// Bring `[off, off + len)` into the page cache with plain reads, as
/// another user of the file would, and nothing else: readahead is off on
/// its descriptor (POSIX_FADV_RANDOM), so what is cached when the read
/// returns is all it caches. Readahead it set off could land after a test
/// counted the pages as another user's, and count as the stream's (btrfs
/// in the 6.1 guest, 4 MiB of readahead: 614-809 pages after the count,
/// all "cached by direct reads" and "left after close").
pub fn precache(path: &Path, off: u64, len: u64) {
    use std::os::unix::fs::FileExt;
    let f = File::open(path).unwrap();
    sys::fadvise(f.as_fd(), 0, 0, Advice::Random).unwrap();
    let mut buf = vec![0u8; len as usize];
    f.read_exact_at(&mut buf, off).unwrap();
}
