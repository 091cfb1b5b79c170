//! Real programs under `ubio run`: identical output, files and exit status
//! with and without the shim, and (for a 1 GiB cp) the page-cache bounds of
//! the library's contract, sampled with cachestat() every millisecond.
//!
//! Needs the workspace built (`cargo build --release`: the `ubio` binary and
//! libubio_preload.so next to it); scripts/test.sh does that. A missing
//! program prints `SKIP name: reason` (a failure with UBIO_NO_SKIP=1).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;
use ubio::sys::{self, Advice};
use ubio_testenv::kept_pages::with_damon_retries;
use ubio_testenv::residency_sampler::{Peaks, ResidencySampler};
use ubio_testenv::{profile_dir, skip};

const MIB: u64 = 1 << 20;
const PAGE: u64 = 4096;

fn ubio_bin() -> PathBuf {
    let p = profile_dir().join("ubio");
    assert!(
        p.is_file() && profile_dir().join("libubio_preload.so").is_file(),
        "{} or libubio_preload.so missing: build the workspace first (cargo build --release)",
        p.display()
    );
    p
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A scratch directory on the ext4 of target/ (not /tmp, which may be tmpfs).
fn scratch() -> tempfile::TempDir {
    let base = profile_dir().join("shim-tests");
    fs::create_dir_all(&base).unwrap();
    tempfile::Builder::new()
        .prefix("shim-")
        .tempdir_in(base)
        .unwrap()
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as u8
        })
        .collect()
}

/// Input files: `a` (24 MiB and a bit: not page-aligned), `small`, `sub/`.
fn inputs(dir: &Path) {
    fs::write(dir.join("a"), pattern(1, 24 * MIB as usize + 1234)).unwrap();
    fs::write(dir.join("small"), pattern(2, 5000)).unwrap();
    fs::create_dir(dir.join("sub")).unwrap();
    fs::write(dir.join("sub/b"), pattern(3, 3 * MIB as usize + 7)).unwrap();
    fs::write(dir.join("sub/empty"), b"").unwrap();
}

/// Every file under `dir`, by relative path, with its contents.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(
                    p.strip_prefix(dir).unwrap().to_path_buf(),
                    fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

/// `backend`: the shim's backend (`ubio run --backend`), when `shim`.
fn run_sh(script: &str, input: &Path, cwd: &Path, shim: bool, backend: &str) -> Output {
    let mut c = if shim {
        let mut c = Command::new(ubio_bin());
        c.args(["run", "--backend", backend, "--", "sh", "-c", script]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    };
    c.current_dir(cwd)
        .env("IN", input)
        .env("UBIO", ubio_bin())
        .env_remove("UBIO_LOG")
        .output()
        .unwrap()
}

/// Run `script` (sh, with $IN the input directory, $UBIO the ubio binary and
/// a fresh working directory) without and with the shim: same stdout,
/// stderr, exit status and files written. Returns the exit status.
fn same(name: &str, tools: &[&str], script: &str) -> Option<i32> {
    same_with(name, tools, script, "auto")
}

/// As [`same`], with the shim on `backend`.
fn same_with(name: &str, tools: &[&str], script: &str, backend: &str) -> Option<i32> {
    for t in tools {
        if !have(t) {
            skip(name, &format!("{t} is not installed"));
            return None;
        }
    }
    let tmp = scratch();
    let input = tmp.path().join("in");
    fs::create_dir(&input).unwrap();
    inputs(&input);
    let mut results = Vec::new();
    for shim in [false, true] {
        let out = tmp.path().join(if shim { "shim" } else { "plain" });
        fs::create_dir(&out).unwrap();
        let o = run_sh(script, &input, &out, shim, backend);
        results.push((o, tree(&out)));
    }
    let (plain, shim) = (&results[0], &results[1]);
    let show = |o: &Output| {
        format!(
            "status {:?}\nstdout: {}\nstderr: {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    assert_eq!(
        (plain.0.status.code(), &plain.0.stdout, &plain.0.stderr),
        (shim.0.status.code(), &shim.0.stdout, &shim.0.stderr),
        "{name}: output differs\n-- plain:\n{}\n-- shim:\n{}",
        show(&plain.0),
        show(&shim.0)
    );
    let names = |t: &BTreeMap<PathBuf, Vec<u8>>| t.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&plain.1),
        names(&shim.1),
        "{name}: different files written"
    );
    for (p, data) in &plain.1 {
        assert!(shim.1[p] == *data, "{name}: {} differs", p.display());
    }
    assert!(
        !plain.1.is_empty() || !plain.0.stdout.is_empty(),
        "{name}: the script produced nothing to compare"
    );
    plain.0.status.code()
}

#[test]
fn shim_cp() {
    let st = same(
        "shim_cp",
        &["cp"],
        r#"cp "$IN/a" a && cp "$IN/small" s && cp -r "$IN/sub" sub && cp "$IN/a" a && echo ok"#,
    );
    assert!(st.is_none_or(|s| s == 0));
}

#[test]
fn shim_cat() {
    same(
        "shim_cat",
        &["cat", "sha256sum"],
        r#"cat "$IN/a" > a; cat "$IN/small" "$IN/a" "$IN/sub/empty" >> a; cat "$IN/sub/b" | sha256sum; cat < "$IN/small" > s"#,
    );
}

#[test]
fn shim_dd() {
    same(
        "shim_dd",
        &["dd", "sha256sum"],
        r#"dd if="$IN/a" of=big bs=1M status=none &&
           dd if="$IN/a" of=odd bs=4097 status=none &&
           dd if="$IN/a" of=mid bs=777 skip=5 seek=3 count=3000 conv=notrunc status=none &&
           dd if="$IN/a" bs=65537 skip=2 count=100 status=none | sha256sum &&
           dd if="$IN/small" of=sync bs=1M conv=fsync status=none && echo done"#,
    );
}

/// write() at a file position inside a cold file, on every backend: the
/// bytes land at the position (the direct backend once appended them).
#[test]
fn shim_dd_writes_at_the_position_on_every_backend() {
    for backend in ["auto", "kernel", "emulated", "direct", "buffered"] {
        same_with(
            &format!("shim_dd_{backend}"),
            &["dd", "sync"],
            r#"printf 0123456789 > f && sync f && "$UBIO" evict f > /dev/null &&
               printf ab | dd of=f bs=1 seek=2 conv=notrunc status=none && cat f"#,
            backend,
        );
    }
}

#[test]
fn shim_tar() {
    same(
        "shim_tar",
        &["tar"],
        r#"tar -C "$IN" -cf t.tar a small sub && mkdir x && tar -C x -xf t.tar && tar -tf t.tar | sort &&
           tar -C "$IN" -cf - sub | tar -C x -xf - --transform s/sub/piped/"#,
    );
}

#[test]
fn shim_rsync() {
    same(
        "shim_rsync",
        &["rsync"],
        r#"rsync -r "$IN/" r/ && rsync -r --inplace --no-whole-file "$IN/" r/ && echo synced"#,
    );
}

#[test]
fn shim_sha256sum() {
    same(
        "shim_sha256sum",
        &["sha256sum"],
        r#"sha256sum "$IN/a" "$IN/small" "$IN/sub/b""#,
    );
}

const PY_IO: &str = r#"
import hashlib, os, shutil, sys
src = os.path.join(os.environ["IN"], "a")
with open(src, "rb") as f, open("copy", "wb") as g:
    while True:
        b = f.read(1 << 20)
        if not b: break
        g.write(b)
shutil.copyfile(src, "copy2")              # sendfile on Linux
fd = os.open("pos", os.O_RDWR | os.O_CREAT, 0o644)
for i in range(64):
    os.pwrite(fd, bytes([i]) * 4099, i * 5000)
data = os.pread(fd, 1 << 20, 0)
os.close(fd)
with open("app", "ab") as f:
    f.write(b"x" * 100000)
with open("app", "ab") as f:
    f.write(b"y" * 3)
print(hashlib.sha256(data).hexdigest(), os.path.getsize("app"))
print(hashlib.sha256(open("copy2", "rb").read()).hexdigest())
"#;

#[test]
fn shim_python_io() {
    same(
        "shim_python_io",
        &["python3"],
        &format!("python3 -c '{}'", PY_IO.replace('\'', "\"")),
    );
}

const PY_THREADS: &str = r#"
import hashlib, os, threading
src = os.path.join(os.environ["IN"], "a")
shared = os.open(src, os.O_RDONLY)
sums = {}
def work(i):
    h = hashlib.sha256()
    off = i * 1000003
    with open("t%d" % i, "wb") as g:
        for k in range(40):
            b = os.pread(shared, 65536, off + k * 65536)
            h.update(b)
            g.write(b)
            g.flush()
    sums[i] = h.hexdigest()
ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in ts: t.start()
for t in ts: t.join()
os.close(shared)
for i in sorted(sums): print(i, sums[i])
"#;

#[test]
fn shim_threads() {
    same(
        "shim_threads",
        &["python3"],
        &format!("python3 -c '{}'", PY_THREADS.replace('\'', "\"")),
    );
}

#[test]
fn shim_fork() {
    same(
        "shim_fork",
        &["cat", "python3"],
        r#"cat "$IN/a" > b & cat "$IN/sub/b" > d; wait;
           (cat "$IN/small"; cat "$IN/small") > twice;
           python3 -c '
import os
fd = os.open("shared", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"parent-before\n")
pid = os.fork()
if pid == 0:
    os.write(fd, b"child\n" * 1000)
    os.close(fd)
    os._exit(3)
_, st = os.waitpid(pid, 0)
os.write(fd, b"parent-after\n")
os.close(fd)
print("child exit", os.waitstatus_to_exitcode(st))
'"#,
    );
}

#[test]
fn shim_keeps_failure_status() {
    let st = same(
        "shim_keeps_failure_status",
        &["cat"],
        r#"echo start; cat "$IN/missing""#,
    );
    assert!(st.is_none_or(|s| s == 1), "cat of a missing file exits 1");
}

#[test]
fn shim_run_errors() {
    let ubio = ubio_bin();
    let o = Command::new(&ubio)
        .args(["run", "--", "no-such-command-ubio"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&o.stderr).contains("command not found"));
    // A statically linked program runs (the shim cannot go into it; the
    // engine of `ubio run` covers it).
    let ldconfig = ["/sbin/ldconfig", "/usr/sbin/ldconfig"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(ldconfig) = ldconfig else {
        return skip("shim_run_errors", "no ldconfig (a static program) to try");
    };
    let o = Command::new(&ubio)
        .args(["run", "--", ldconfig, "--version"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!o.stdout.is_empty(), "ldconfig --version printed nothing");
}

#[test]
fn shim_log_file() {
    let tmp = scratch();
    let log = tmp.path().join("log");
    fs::write(tmp.path().join("f"), pattern(4, 3 * MIB as usize)).unwrap();
    let o = Command::new(ubio_bin())
        .args(["run", "--log", "--", "cp", "f", "g"])
        .current_dir(tmp.path())
        .env("UBIO_LOG_FILE", &log)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(o.stderr.is_empty(), "the log went to the program's stderr");
    let text = fs::read_to_string(&log).unwrap();
    assert!(text.contains("/g: backend"), "{text}");
}

fn cached_in(path: &Path, range: impl Into<sys::FileRange>) -> u64 {
    ubio::residency::count_path(path, range).unwrap().cached
}

/// The contract's bounds for a copy under the shim: the source's cache
/// within 64 MiB, the destination's dirty + writeback within two windows
/// (the default, 16 MiB) and a MiB.
fn assert_copy_bounds(src: &Peaks, dst: &Peaks) {
    assert!(
        src.max_cached <= 64 * MIB / PAGE,
        "source peak {} pages > 64 MiB",
        src.max_cached
    );
    assert!(
        dst.max_dirty_writeback <= (2 * 16 + 1) * MIB / PAGE,
        "destination dirty+writeback peak {} pages > 33 MiB",
        dst.max_dirty_writeback
    );
}

/// A 1 GiB copy by cp under the shim: the source's cache stays within
/// 64 MiB, the destination's dirty + writeback within two windows and a bit,
/// nothing of either is left cached after, and source pages cached before
/// the copy stay cached.
#[test]
fn shim_cp_residency() {
    cp_residency("shim_cp_residency", None);
}

/// The same where the shim reads ahead in small folios itself, as where
/// memory is fragmented (GNU cp copies with copy_file_range: the shim asks
/// for the source's pages ahead of each piece).
#[test]
fn shim_cp_residency_small_readahead() {
    cp_residency("shim_cp_residency_small_readahead", Some("always"));
}

/// `ubio run -- cp` of 1 GiB with UBIO_SMALL_READAHEAD set to `small`, if
/// given (its log must then say so).
fn cp_residency(name: &str, small: Option<&str>) {
    let tmp = scratch();
    let src = tmp.path().join("src");
    let dst = tmp.path().join("dst");
    {
        let mut f = fs::File::create(&src).unwrap();
        let block = pattern(5, MIB as usize);
        for _ in 0..1024 {
            f.write_all(&block).unwrap();
        }
        f.sync_all().unwrap();
        sys::fadvise(f.as_fd(), 0, 0, Advice::DontNeed).unwrap();
    }
    // Another user's pages: 8 MiB in the middle.
    let (hot_off, hot_len) = (512 * MIB, 8 * MIB);
    let log = tmp.path().join("log");
    with_damon_retries(name, || {
        {
            let f = fs::File::open(&src).unwrap();
            sys::fadvise(f.as_fd(), 0, 0, Advice::DontNeed).unwrap();
            let mut buf = vec![0u8; hot_len as usize];
            std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf, hot_off).unwrap();
        }
        let hot = cached_in(&src, sys::FileRange::at(hot_off, hot_len));
        fs::write(&dst, b"").unwrap();
        let s_src = ResidencySampler::start(&src, Duration::from_millis(1)).unwrap();
        let s_dst = ResidencySampler::start(&dst, Duration::from_millis(1)).unwrap();
        let mut cp = Command::new(ubio_bin());
        if let Some(when) = small {
            cp.env("UBIO_SMALL_READAHEAD", when)
                .env("UBIO_LOG", "debug")
                .env("UBIO_LOG_FILE", &log);
        }
        let st = cp
            .args(["run", "--", "cp"])
            .arg(&src)
            .arg(&dst)
            .status()
            .unwrap();
        let (p_src, p_dst) = (s_src.finish().unwrap(), s_dst.finish().unwrap());
        let (after_src, after_dst) = (
            cached_in(&src, sys::FileRange::WHOLE),
            cached_in(&dst, sys::FileRange::WHOLE),
        );
        let kept = cached_in(&src, sys::FileRange::at(hot_off, hot_len));
        assert!(st.success());
        println!(
            "{name}: source peak {} pages cached, after {} ({} of {} precached kept); \
             destination peak {} dirty+writeback, {} cached; after {} cached",
            p_src.max_cached,
            after_src,
            kept,
            hot,
            p_dst.max_dirty_writeback,
            p_dst.max_cached,
            after_dst
        );
        assert_copy_bounds(&p_src, &p_dst);
        assert_eq!(after_dst, 0, "destination pages left cached");
        assert_eq!(
            after_src - kept,
            0,
            "source pages outside the precached range left cached"
        );
        assert_eq!(fs::metadata(&dst).unwrap().len(), 1 << 30);
        // The copy's bytes (read after the residency checks).
        let block = pattern(5, MIB as usize);
        let mut got = fs::File::open(&dst).unwrap();
        let mut buf = vec![0u8; MIB as usize];
        for i in 0..1024 {
            std::io::Read::read_exact(&mut got, &mut buf).unwrap();
            assert!(buf == block, "the copy differs in its MiB {i}");
        }
        if small.is_some() {
            let text = fs::read_to_string(&log).unwrap();
            let src_line = text.lines().find(|l| l.contains("/src: backend"));
            assert!(
                src_line.is_some_and(|l| l.contains("small readahead")),
                "the source was not read ahead in small folios: {text}"
            );
        }
        if kept == hot {
            return Ok(());
        }
        Err(format!("{kept} of {hot} precached pages kept"))
    });
}

/// One read(2) and one write(2) of 512 MiB (`dd bs=512M count=1`) under the
/// shim: the library makes each call in pieces, so the source's cache stays
/// within 64 MiB and the destination's dirty + writeback within two windows
/// and a MiB, as for a stream of short calls, and nothing of either is left
/// cached. The same dd without the shim is the control: the sampler must see
/// its single calls cache and dirty most of the 512 MiB.
#[test]
fn shim_one_long_call_residency() {
    if !have("dd") {
        skip("shim_one_long_call_residency", "no dd");
        return;
    }
    let len = 512 * MIB;
    let tmp = scratch();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    let data = pattern(7, len as usize);
    fs::write(&src, &data).unwrap();
    let dd = |shim: bool| {
        for f in [&src, &dst] {
            if let Ok(f) = fs::File::open(f) {
                f.sync_all().unwrap();
                sys::fadvise(f.as_fd(), 0, 0, Advice::DontNeed).unwrap();
            }
        }
        let _ = fs::remove_file(&dst);
        fs::write(&dst, b"").unwrap();
        let s_src = ResidencySampler::start(&src, Duration::from_millis(1)).unwrap();
        let s_dst = ResidencySampler::start(&dst, Duration::from_millis(1)).unwrap();
        let mut cmd = Command::new(if shim { ubio_bin() } else { "dd".into() });
        if shim {
            cmd.args(["run", "--", "dd"]);
        }
        let st = cmd
            .arg(format!("if={}", src.display()))
            .arg(format!("of={}", dst.display()))
            .args(["bs=512M", "count=1", "status=none"])
            .status()
            .unwrap();
        let (p_src, p_dst) = (s_src.finish().unwrap(), s_dst.finish().unwrap());
        let after = cached_in(&src, sys::FileRange::WHOLE) + cached_in(&dst, sys::FileRange::WHOLE);
        assert!(st.success(), "dd (shim: {shim}): {st}");
        assert!(
            fs::read(&dst).unwrap() == data,
            "dd (shim: {shim}): the copy differs"
        );
        println!(
            "shim_one_long_call_residency (shim: {shim}): source peak {} pages cached, \
             destination peak {} dirty+writeback; after {after} cached",
            p_src.max_cached, p_dst.max_dirty_writeback
        );
        (p_src, p_dst, after)
    };
    let (c_src, c_dst, _) = dd(false);
    assert!(
        c_src.max_cached > len / 2 / PAGE && c_dst.max_dirty_writeback > len / 2 / PAGE,
        "control: plain dd's single calls cached {} and dirtied {} pages only",
        c_src.max_cached,
        c_dst.max_dirty_writeback
    );
    let (p_src, p_dst, after) = dd(true);
    assert_copy_bounds(&p_src, &p_dst);
    assert_eq!(after, 0, "pages left cached");
}

/// A C program whose SIGALRM handler writes to a file (every 200 us) while
/// the main loop copies a file: the handler's write goes straight to libc
/// (the shim is off inside handlers), sigaction reports the program's own
/// handler as installed, and nothing deadlocks.
const SIG_C: &str = r#"
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
static int logfd;
static void on_alarm(int s) { (void)s; write(logfd, "a", 1); }
int main(int argc, char **argv) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    if (argc < 3 || sigaction(SIGALRM, &sa, 0) != 0 || sigaction(SIGALRM, 0, &old) != 0) return 3;
    if (old.sa_handler != on_alarm || (old.sa_flags & SA_SIGINFO)) { puts("sigaction reports another handler"); return 2; }
    logfd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, 0);
    int in = open(argv[1], O_RDONLY), out = open("copy", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char buf[3000];
    ssize_t r;
    long total = 0;
    while ((r = read(in, buf, sizeof buf)) > 0) {
        for (ssize_t done = 0; done < r;) {
            ssize_t w = write(out, buf + done, r - done);
            if (w < 0) { perror("write"); return 1; }
            done += w;
        }
        total += r;
    }
    memset(&it, 0, sizeof it);
    setitimer(ITIMER_REAL, &it, 0);
    close(in);
    if (close(out) != 0) return 1;
    printf("copied %ld\n", total);
    return 0;
}
"#;

#[test]
fn shim_signal_handlers() {
    if !have("cc") {
        return skip("shim_signal_handlers", "no C compiler (cc)");
    }
    let tmp = scratch();
    let src = tmp.path().join("sig.c");
    fs::write(&src, SIG_C).unwrap();
    let bin = profile_dir().join("shim-tests").join("sigcopy");
    let st = Command::new("cc")
        .arg("-O2")
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "cc failed");
    same(
        "shim_signal_handlers",
        &[],
        &format!(r#"{} "$IN/a" "$IN/../sig.log.$$""#, bin.display()),
    );
}
