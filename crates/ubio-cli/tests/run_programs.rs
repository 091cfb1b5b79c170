//! Real programs under `ubio run` on a 256 MiB file: the shim and the
//! engine together cover stdio readers and writers, inherited descriptors,
//! statically linked programs (a Go copy and a musl stdio copy, built here),
//! interpreters, compressors and a forking pipeline. For each: the same
//! output and exit status as without ubio; the input's and the outputs'
//! page cache (cachestat every 2 ms) within 64 MiB and nothing left after
//! exit; the outputs' dirty + writeback within the engine's stated bound;
//! pages cached before kept. And `ubio run --pid` on a running reader and
//! writer (the writer through its alias `ubio attach`), with the same
//! checks, leaving the process undisturbed.
//!
//! Needs the workspace built (`ubio` and libubio_preload.so next to it).

mod common;

use common::engine::*;
use common::{skip, workdir, UBIO};
use std::collections::hash_map::DefaultHasher;
use std::fs::File;
use std::hash::Hasher;
use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use ubio::sys;
use ubio_testenv::kept_pages::with_damon_retries;
use ubio_testenv::residency_sampler::{Peaks, ResidencySampler};

/// One test at a time: each measures the page cache of its own files, but
/// 2 cores shared by several 256 MiB streams would only make it slow.
static SERIAL: Mutex<()> = Mutex::new(());

/// Text-like data that compressors get through quickly, different along
/// the whole file.
fn write_input(path: &Path) {
    use std::io::Write;
    let mut f = File::create(path).unwrap();
    let mut block = vec![0u8; MIB as usize];
    for i in 0..SIZE / MIB {
        for (j, b) in block.iter_mut().enumerate() {
            let x = (j as u64 * 2654435761 + i * 97) >> 7;
            *b = b"abcdefghij klmnop\nqrstuvwxyz 0123456789"[(x % 39) as usize];
        }
        f.write_all(&block).unwrap();
    }
    f.sync_all().unwrap();
}

fn hash_file(path: &Path) -> (u64, u64) {
    let mut f = File::open(path).unwrap();
    let mut h = DefaultHasher::new();
    let mut buf = vec![0u8; MIB as usize];
    let mut len = 0;
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        len += n as u64;
        h.write(&buf[..n]);
    }
    (len, h.finish())
}

/// The programs the suite builds: a static Go copy, a static musl stdio
/// copy and a static musl kernel copy (None where no musl-gcc), and the
/// kernel copy linked dynamically (None where no gcc).
struct Built {
    gocopy: PathBuf,
    cstdio: Option<PathBuf>,
    kcopy: Option<PathBuf>,
    kcopy_dyn: Option<PathBuf>,
}

/// Compile `src` (in tests/run_programs) to `out` with `cc` and `flags`.
fn compile(cc: &str, flags: &[&str], src: &Path, out: PathBuf) -> PathBuf {
    let res = Command::new(cc)
        .args(flags)
        .args(["-O2", "-o"])
        .arg(&out)
        .arg(src)
        .output()
        .unwrap();
    assert!(
        res.status.success(),
        "{cc}: {}",
        String::from_utf8_lossy(&res.stderr)
    );
    out
}

fn build(dir: &Path) -> Result<Built, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/run_programs");
    let gocopy = build_gocopy(dir)?;
    let musl = |name: &str| {
        have("musl-gcc").then(|| {
            let c = src.join(name).with_extension("c");
            compile("musl-gcc", &["-static"], &c, dir.join(name))
        })
    };
    let kcopy_dyn =
        have("gcc").then(|| compile("gcc", &[], &src.join("kcopy.c"), dir.join("kcopy-dyn")));
    Ok(Built {
        gocopy,
        cstdio: musl("cstdio"),
        kcopy: musl("kcopy"),
        kcopy_dyn,
    })
}

/// What a test that makes loop devices and runs the built programs starts
/// with: the lock that runs these tests one at a time, root (else a skip),
/// a scratch directory holding the programs (else a skip).
fn root_and_programs(
    name: &str,
) -> Option<(std::sync::MutexGuard<'static, ()>, tempfile::TempDir, Built)> {
    let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !common::root_or_skip(name) {
        return None;
    }
    let dir = workdir();
    match build(dir.path()) {
        Ok(built) => Some((serial, dir, built)),
        Err(e) => {
            skip(name, &e);
            None
        }
    }
}

/// A program run by `sh -c` in the scratch directory, reading `in` and
/// writing the files `outputs` (and maybe stdout).
struct Case {
    name: &'static str,
    needs: &'static [&'static str],
    cmd: String,
    outputs: &'static [&'static str],
}

fn cases(b: &Built) -> Vec<Case> {
    let c = |name, needs, cmd: &str, outputs| Case {
        name,
        needs,
        cmd: cmd.to_string(),
        outputs,
    };
    let mut v = vec![
        c("sha256sum (stdio reader)", &["sha256sum"][..], "sha256sum in", &[][..]),
        c("md5sum < in (stdin)", &["md5sum"], "md5sum < in", &[]),
        c("base64 > out (stdio writer, stdout redirected)", &["base64"], "base64 in > out", &["out"]),
        c("gzip -c", &["gzip"], "gzip -1 -c in > out.gz", &["out.gz"]),
        c("zstd", &["zstd"], "zstd -q -1 -T1 in -o out.zst", &["out.zst"]),
        c("xz", &["xz"], "xz -0 -T1 -c in > out.xz", &["out.xz"]),
        c("tar", &["tar"], "tar cf out.tar in", &["out.tar"]),
        c("cat | gzip (forking pipeline)", &["gzip"], "cat in | gzip -1 > out.gz", &["out.gz"]),
        c("cp", &["cp"], "cp in out", &["out"]),
        c(
            "python3 copy",
            &["python3"],
            "python3 -c 'import shutil; shutil.copyfileobj(open(\"in\",\"rb\"), open(\"out\",\"wb\"), 1<<20)'",
            &["out"],
        ),
        c(
            "perl copy",
            &["perl"],
            "perl -e 'open(I,\"<\",\"in\") or die; open(O,\">\",\"out\") or die; while (read(I,$b,1<<20)) { print O $b } close(O) or die'",
            &["out"],
        ),
        c(
            "node copy",
            &["node"],
            "node -e 'const fs=require(\"fs\"); fs.createReadStream(\"in\").pipe(fs.createWriteStream(\"out\"))'",
            &["out"],
        ),
    ];
    let go = b.gocopy.display().to_string();
    // Go's io.Copy between two files is one copy_file_range of up to
    // 2 GiB, which moves no position until it returns: the engine finds it
    // from the pages (ubio-engine/src/silent.rs). More such copies, on ext4 and xfs:
    // long_kernel_copies_on_ext4_and_xfs.
    v.push(c(
        "static Go io.Copy (one copy_file_range)",
        &[],
        &format!("{go} in out"),
        &["out"],
    ));
    v.push(c(
        "static Go read/write loop",
        &[],
        &format!("{go} -rw in out"),
        &["out"],
    ));
    v.push(c(
        "static Go, < in > out",
        &[],
        &format!("{go} -rw - - < in > out"),
        &["out"],
    ));
    if let Some(p) = &b.cstdio {
        v.push(c(
            "static musl fread/fwrite, < in > out",
            &[],
            &format!("{} < in > out", p.display()),
            &["out"],
        ));
    }
    v
}

struct Run {
    out: Output,
    outputs: Vec<(u64, u64)>,
}

fn run_case(dir: &Path, case: &Case, ubio: bool) -> (Run, Option<(Peaks, Peaks)>, Vec<u64>) {
    let input = dir.join("in");
    let outs: Vec<PathBuf> = case.outputs.iter().map(|o| dir.join(o)).collect();
    for o in &outs {
        let _ = std::fs::remove_file(o);
    }
    evict(&input);
    let samplers = ubio.then(|| {
        (
            ResidencySampler::follow_all(vec![input.clone()], SAMPLE_EVERY),
            ResidencySampler::follow_all(outs.clone(), SAMPLE_EVERY),
        )
    });
    let mut cmd = if ubio {
        let mut c = Command::new(UBIO);
        c.args([
            "run",
            "--window",
            &std::env::var("RUN_WINDOW").unwrap_or("16M".into()),
            "--",
            "sh",
            "-c",
            &case.cmd,
        ]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", &case.cmd]);
        c
    };
    let out = cmd.current_dir(dir).stdin(Stdio::null()).output().unwrap();
    let peaks = samplers.map(|(i, o)| (i.finish().unwrap(), o.finish().unwrap()));
    // Left after exit: measured before anything reads the outputs.
    let left: Vec<u64> = std::iter::once(&input)
        .chain(outs.iter())
        .map(|p| if p.exists() { cached(p) } else { 0 })
        .collect();
    let outputs = outs
        .iter()
        .map(|o| {
            let h = if o.exists() {
                hash_file(o)
            } else {
                (u64::MAX, 0)
            };
            let _ = std::fs::remove_file(o);
            h
        })
        .collect();
    (Run { out, outputs }, peaks, left)
}

#[test]
fn programs_under_ubio_run() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = workdir();
    let built = match build(dir.path()) {
        Ok(b) => b,
        Err(e) => return skip("programs_under_ubio_run", &e),
    };
    if built.cstdio.is_none() {
        skip("programs_under_ubio_run (musl)", "no musl-gcc (musl-tools)");
    }
    write_input(&dir.path().join("in"));
    let mut failures = Vec::new();
    let mut ran = 0;
    // RUN_PROGRAMS_ONLY=zstd runs the cases whose name holds that text.
    let only = std::env::var("RUN_PROGRAMS_ONLY").unwrap_or_default();
    for case in cases(&built).into_iter().filter(|c| c.name.contains(&only)) {
        if let Some(t) = case.needs.iter().find(|t| !have(t)) {
            skip(case.name, &format!("{t} not installed"));
            continue;
        }
        let t = Instant::now();
        let (plain, _, _) = run_case(dir.path(), &case, false);
        let (under, peaks, left) = run_case(dir.path(), &case, true);
        let (pin, pout) = peaks.unwrap();
        ran += 1;
        eprintln!(
            "{:<48} {:>5.1} s: input peak {:>5.1} MiB, outputs peak {:>5.1} MiB, dirty+writeback peak {:>5.1} MiB, left {:?} B",
            case.name,
            t.elapsed().as_secs_f64(),
            (pin.max_cached * PAGE) as f64 / MIB as f64,
            (pout.max_cached * PAGE) as f64 / MIB as f64,
            (pout.max_dirty_writeback * PAGE) as f64 / MIB as f64,
            left,
        );
        let mut fail = |what: String| failures.push(format!("{}: {what}", case.name));
        if under.out.status.code() != plain.out.status.code() || plain.out.status.code() != Some(0)
        {
            fail(format!(
                "exit status {:?} under ubio, {:?} without; stderr: {}",
                under.out.status,
                plain.out.status,
                String::from_utf8_lossy(&under.out.stderr)
            ));
        }
        if under.out.stdout != plain.out.stdout {
            fail("stdout differs".into());
        }
        if under.outputs != plain.outputs {
            fail(format!(
                "outputs differ: {:?} vs {:?}",
                under.outputs, plain.outputs
            ));
        }
        if under.out.stderr != plain.out.stderr {
            fail(format!(
                "stderr differs: {}",
                String::from_utf8_lossy(&under.out.stderr)
            ));
        }
        for what in beyond_bounds(&pin, &pout, &left) {
            fail(what);
        }
    }
    assert!(
        ran >= 16 || !only.is_empty() || !failures.is_empty(),
        "only {ran} programs ran"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Wait until `pid` has `file` open as fd 3.
fn wait_open(pid: u32, file: &Path) {
    let file = &std::fs::canonicalize(file.parent().unwrap())
        .unwrap()
        .join(file.file_name().unwrap());
    while std::fs::read_link(format!("/proc/{pid}/fd/3"))
        .ok()
        .as_deref()
        != Some(file)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn fds_of(pid: u32) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            format!(
                "{:?} -> {:?}",
                e.file_name(),
                std::fs::read_link(e.path()).ok()
            )
        })
        .collect();
    v.sort();
    v
}

/// A python3 program, not under ubio, paced so that ubio attaches early:
/// it opens `file` as fd 3 (read or write), waits for "go" on stdin, then
/// streams 256 MiB in 1 MiB pieces with a short pause each.
fn paced(dir: &Path, write: bool) -> std::process::Child {
    let body = if write {
        // About 100 MB/s: a device that keeps up (the engine's bound holds
        // only then; the other helpers' I/O shares this disk).
        "b=bytes(range(256))*4096\nfor i in range(256):\n    os.write(3,b); time.sleep(0.01)\nprint(os.lseek(3,0,1))"
    } else {
        "n=0\nwhile True:\n    b=os.read(3,1<<20)\n    if not b: break\n    n+=len(b); time.sleep(0.004)\nprint(n)"
    };
    let mode = if write {
        "os.O_WRONLY|os.O_CREAT|os.O_TRUNC"
    } else {
        "os.O_RDONLY"
    };
    let name = if write { "out" } else { "in" };
    let script = format!(
        "import os,sys,time\nfd=os.open('{name}',{mode},0o644)\nos.dup2(fd,3)\nsys.stdin.readline()\n{body}\n"
    );
    // The interpreter itself (python3 may be a wrapper script that execs
    // it later, with descriptors of its own).
    let exe = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let exe = String::from_utf8(exe.stdout).unwrap();
    Command::new(exe.trim())
        .args(["-c", &script])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn attach_to_a_running_reader_and_writer() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !have("python3") {
        return skip("attach_to_a_running_reader_and_writer", "no python3");
    }
    let dir = workdir();
    let input = dir.path().join("in");
    write_input(&input);
    for write in [false, true] {
        let what = if write { "writer" } else { "reader" };
        let file = dir.path().join(if write { "out" } else { "in" });
        evict(&input);
        let mut prog = paced(dir.path(), write);
        let pid = prog.id();
        wait_open(pid, &file);
        let sampler = ResidencySampler::follow_all(vec![file.clone()], SAMPLE_EVERY);
        // Both spellings: `ubio attach PID` is `ubio run --pid PID`.
        let how: &[&str] = if write {
            &["attach"]
        } else {
            &["run", "--pid"]
        };
        let ubio = Command::new(UBIO)
            .args(how)
            .arg(pid.to_string())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Let the engine see the file before the stream starts.
        std::thread::sleep(Duration::from_millis(100));
        use std::io::Write;
        prog.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let out = prog.wait_with_output().unwrap();
        let attached = ubio.wait_with_output().unwrap();
        let peaks = sampler.finish().unwrap();
        let left = cached(&file);
        eprintln!(
            "--pid {what}: peak {:.1} MiB cached, {:.1} MiB dirty+writeback; left {left} B",
            (peaks.max_cached * PAGE) as f64 / MIB as f64,
            (peaks.max_dirty_writeback * PAGE) as f64 / MIB as f64
        );
        assert!(out.status.success(), "{what}: {:?}", out.status);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            SIZE.to_string(),
            "{what}"
        );
        assert!(
            attached.status.success(),
            "ubio run --pid: {:?} {}",
            attached.status,
            String::from_utf8_lossy(&attached.stderr)
        );
        assert!(
            peaks.max_cached * PAGE <= PEAK_LIMIT,
            "{what}: peak {peaks:?}"
        );
        assert!(
            peaks.max_dirty_writeback * PAGE <= WRITE_BOUND,
            "{what}: peak {peaks:?}"
        );
        assert_eq!(left, 0, "{what}: left cached after exit");
    }
}

#[test]
fn leaving_on_ctrl_c_leaves_the_process_alone() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !have("python3") {
        return skip("leaving_on_ctrl_c_leaves_the_process_alone", "no python3");
    }
    let dir = workdir();
    std::fs::write(dir.path().join("in"), vec![7u8; 4 << 20]).unwrap();
    let mut prog = paced(dir.path(), false);
    let pid = prog.id();
    wait_open(pid, &dir.path().join("in"));
    let before = fds_of(pid);
    let ubio = Command::new(UBIO)
        .args(["run", "--pid", &pid.to_string()])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    sys::kill(ubio.id(), libc::SIGINT).unwrap();
    let attached = ubio.wait_with_output().unwrap();
    assert!(attached.status.success(), "{:?}", attached.status);
    // Still waiting for its "go", with the same descriptors.
    assert!(
        prog.try_wait().unwrap().is_none(),
        "the process was disturbed"
    );
    assert_eq!(fds_of(pid), before);
    use std::io::Write;
    prog.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let out = prog.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        (4 << 20).to_string()
    );
}

/// Cached pages of `path` in `range` (cachestat).
fn cached_in(path: &Path, range: std::ops::Range<u64>) -> u64 {
    let r = sys::FileRange::Bytes(range);
    ubio::residency::count_path(path, r).unwrap().cached * PAGE
}

/// Read `range` of `path` (another process's reads, as far as `ubio run`'s
/// program is concerned).
fn read_range(path: &Path, range: std::ops::Range<u64>) {
    use std::os::unix::fs::FileExt;
    let f = File::open(path).unwrap();
    let mut buf = vec![0u8; MIB as usize];
    let mut at = range.start;
    while at < range.end {
        at += f.read_at(&mut buf, at).unwrap() as u64;
    }
}

/// Pages another process cached before the program ran (the middle 64 MiB
/// of the input) stay cached through a whole stream under `ubio run`: for a
/// static program (the engine's path) and for cat (the shim's). A control
/// file cached the same way and untouched meanwhile tells what this VM's
/// own reclaim of cold pages (DAMON) took during the run.
#[test]
fn pages_cached_before_stay_cached() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = workdir();
    let built = match build(dir.path()) {
        Ok(b) => b,
        Err(e) => return skip("pages_cached_before_stay_cached", &e),
    };
    let input = dir.path().join("in");
    let control = dir.path().join("control");
    write_input(&input);
    std::fs::copy(&input, &control).unwrap();
    let middle = 96 * MIB..160 * MIB;
    let mut cases = vec![
        (
            "engine: static Go read/write loop",
            format!("{} -rw in out", built.gocopy.display()),
        ),
        (
            "engine: static Go io.Copy (one copy_file_range)",
            format!("{} in out", built.gocopy.display()),
        ),
        ("shim: cat", "cat in > out".to_string()),
    ];
    if let Some(p) = &built.cstdio {
        cases.push((
            "engine: static musl stdio, < in > out",
            format!("{} < in > out", p.display()),
        ));
    }
    if let Some(p) = &built.kcopy {
        cases.push((
            "engine: static musl splice, explicit offsets",
            format!("{} splice in out", p.display()),
        ));
    }
    // DAMON may reclaim a few of the cached pages just before the stream's
    // first snapshot (they are then rightly taken as the stream's own):
    // retried, as the other kept-pages checks are.
    for (name, cmd) in cases {
        with_damon_retries(name, || {
            check_kept(&dir, &input, &control, middle.clone(), name, &cmd)
        });
    }
}

/// One case of [`pages_cached_before_stay_cached`].
fn check_kept(
    dir: &tempfile::TempDir,
    input: &Path,
    control: &Path,
    middle: std::ops::Range<u64>,
    name: &str,
    cmd: &str,
) -> Result<(), String> {
    evict(input);
    evict(control);
    let _ = std::fs::remove_file(dir.path().join("out"));
    read_range(input, middle.clone());
    read_range(control, middle.clone());
    let before = cached_in(input, middle.clone());
    let before_all = cached(input);
    let control_before = cached_in(control, middle.clone());
    if before != middle.end - middle.start {
        // Reclaim (DAMON, or another process's pressure) took pages between
        // the read and the count: the case cannot be judged, try again.
        return Err(format!(
            "{name}: the read cached only {} of the middle's {} KiB",
            before / 1024,
            (middle.end - middle.start) / 1024
        ));
    }
    let out = Command::new(UBIO)
        .args(["run", "--", "sh", "-c", cmd])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let after = cached_in(input, middle.clone());
    let after_all = cached(input);
    let reclaimed = control_before - cached_in(control, middle.clone());
    eprintln!(
        "{name}: middle {} -> {} MiB cached (control lost {} MiB), whole input {:.1} -> {:.1} MiB",
        before / MIB,
        after / MIB,
        reclaimed / MIB,
        before_all as f64 / MIB as f64,
        after_all as f64 / MIB as f64
    );
    assert!(
        out.status.success(),
        "{name}: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        hash_file(&dir.path().join("out")),
        hash_file(input),
        "{name}: copy differs"
    );
    kept(&format!("{name}: cached before"), before, after, reclaimed)?;
    // The stream's own pages went: nothing beyond what was cached before,
    // for the shim; the engine keeps what the stream passed before it
    // first saw the file when the rest of the file is not cold (best
    // effort, docs/guide/commands.md, "The engine"): the first read and its
    // readahead, a few MiB.
    let slack = if name.starts_with("engine") {
        FIRST_SIGHT
    } else {
        0
    };
    assert!(
        after_all <= before_all + slack,
        "{name}: {after_all} B cached after, {before_all} B before"
    );
    Ok(())
}

/// Pages another process writes past the end of file after the engine
/// first saw it are that process's: a reader that moves no position (the
/// static splice with explicit offsets, which then reads them too) takes
/// none of them as its own, and they stay cached; its own pages go. The
/// tree holds the input open (fd 3 of its shell) while the test appends
/// and waits for a signal file before the copy starts. A control file
/// written the same way tells what DAMON reclaimed meanwhile.
#[test]
fn pages_appended_by_others_stay_cached() {
    const NAME: &str = "pages_appended_by_others_stay_cached";
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = workdir();
    let built = match build(dir.path()) {
        Ok(b) => b,
        Err(e) => return skip(NAME, &e),
    };
    let Some(kcopy) = &built.kcopy else {
        return skip(NAME, "no musl-gcc (musl-tools)");
    };
    with_damon_retries(NAME, || check_appended(dir.path(), kcopy));
}

/// One attempt of [`pages_appended_by_others_stay_cached`].
fn check_appended(dir: &Path, kcopy: &Path) -> Result<(), String> {
    use std::io::Write;
    const APPENDED: u64 = 64 * MIB;
    let (input, control, go, log) = (
        dir.join("in"),
        dir.join("control"),
        dir.join("go"),
        dir.join("log"),
    );
    for f in [&go, &control, &dir.join("out")] {
        let _ = std::fs::remove_file(f);
    }
    write_input(&input);
    evict(&input);
    let cmd = format!(
        "exec 3<in; while [ ! -e go ]; do sleep 0.01; done; {} splice in out",
        kcopy.display()
    );
    let mut ubio = Command::new(UBIO)
        .args(["run", "--", "sh", "-c", &cmd])
        .current_dir(dir)
        .env("UBIO_LOG", "debug")
        .stdin(Stdio::null())
        .stderr(File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // The engine's first sight of the input (its end of file: SIZE).
    let seen = format!("{}: seen in pid", input.canonicalize().unwrap().display());
    let t = Instant::now();
    while !std::fs::read_to_string(&log).unwrap().contains(&seen) {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the engine did not see the input: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let more = common::data(APPENDED as usize, 3);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&input)
        .unwrap();
    f.write_all(&more).unwrap();
    f.sync_all().unwrap();
    let mut c = File::create(&control).unwrap();
    c.write_all(&more).unwrap();
    c.sync_all().unwrap();
    let theirs = SIZE..SIZE + APPENDED;
    let before = cached_in(&input, theirs.clone());
    let control_before = cached(&control);
    assert_eq!(before, APPENDED, "the appended pages are not cached");
    File::create(&go).unwrap();
    let status = ubio.wait().unwrap();
    let after = cached_in(&input, theirs.clone());
    let own = cached_in(&input, 0..SIZE);
    let reclaimed = control_before - cached(&control);
    eprintln!(
        "appended by another process: {} -> {} MiB cached (control lost {} MiB); the reader's own {} MiB left",
        before / MIB,
        after / MIB,
        reclaimed / MIB,
        own / MIB
    );
    assert!(
        status.success(),
        "{status:?}: {}",
        std::fs::read_to_string(&log).unwrap()
    );
    assert_eq!(
        hash_file(&dir.join("out")),
        hash_file(&input),
        "the copy differs"
    );
    assert_eq!(own, 0, "the reader's own pages were left cached");
    kept("appended by another process", before, after, reclaimed)
}

/// Of `before` bytes others had cached, `after` are cached: Err if more
/// went than the control file lost to the VM's own reclaim (`reclaimed`).
fn kept(what: &str, before: u64, after: u64, reclaimed: u64) -> Result<(), String> {
    match after + reclaimed < before {
        true => Err(format!(
            "{what}: {} of {} KiB were dropped (the control lost {} KiB)",
            (before - after) / 1024,
            before / 1024,
            reclaimed / 1024
        )),
        false => Ok(()),
    }
}

/// One look at a file being written: when, how long it was, its dirty +
/// writeback and its cached bytes.
#[derive(Debug, Clone, Copy)]
struct WriteSample {
    at: Duration,
    size: u64,
    dirty_writeback: u64,
    cached: u64,
}

/// Sample `path` (once it exists) every 2 ms until stopped.
fn sample_writes(path: PathBuf) -> ubio_testenv::sampler_thread::SamplerThread<Vec<WriteSample>> {
    use std::sync::atomic::Ordering;
    ubio_testenv::sampler_thread::SamplerThread::spawn(move |stop| {
        let t0 = Instant::now();
        let mut v = Vec::new();
        let mut file = None;
        loop {
            let last = stop.load(Ordering::Acquire);
            if file.is_none() {
                file = File::open(&path).ok();
            }
            if let Some(f) = &file {
                let c = sys::cachestat(f.as_fd(), sys::FileRange::WHOLE)?;
                v.push(WriteSample {
                    at: t0.elapsed(),
                    size: f.metadata()?.len(),
                    dirty_writeback: (c.nr_dirty + c.nr_writeback) * PAGE,
                    cached: c.nr_cache * PAGE,
                });
            }
            if last {
                return Ok(v);
            }
            std::thread::sleep(SAMPLE_EVERY);
        }
    })
}

/// Writers on a device throttled to RATE (blkio v1 on a loop device with
/// direct I/O, ext4): the bound of dirty + writeback is what the design
/// says. The shim makes cp wait: within the window plus one step, exactly.
/// The engine cannot make a static writer wait: it starts writeback as soon
/// as half a window is written and drops what is written back, so at any
/// moment dirty + writeback is at most what was written minus what a device
/// of RATE completed since the first write, counted from REACTION later,
/// plus the window (without the engine nothing would be written back for
/// 30 s: dirty_expire_centisecs; the kernel's background threshold is GiBs
/// away); and nothing is left cached at the end. The same for copies the
/// kernel makes in one long call or with offsets (no position moves).
#[test]
fn writers_on_a_throttled_device() {
    use ubio_testenv::scratchfs::{FsKind, ScratchFs};
    const RATE: u64 = 32 * MIB;
    const LEN: u64 = 64 * MIB;
    const WINDOW: u64 = 16 * MIB;
    /// From the first write to writeback under way at RATE: half a window
    /// written (microseconds at memory speed), a look (at most 10 ms), the
    /// throttle's first slice (blk-throttle accounts in 100 ms slices).
    const REACTION: Duration = Duration::from_millis(250);
    let Some((_serial, _dir, built)) = root_and_programs("writers_on_a_throttled_device") else {
        return;
    };
    let fs = ScratchFs::create(FsKind::Ext4, 256 * MIB, &Default::default()).unwrap();
    // The input on the same filesystem: copy_file_range copies within one.
    let input = fs.mount_point().join("in");
    common::write_cold(&input, &common::data(LEN as usize, 3));
    let out = fs.mount_point().join("out");
    let mut cases = vec![
        (
            "engine: static Go read/write loop",
            vec![built.gocopy.clone().into_os_string(), "-rw".into()],
        ),
        ("shim: cp", vec!["cp".into()]),
        (
            "engine: static Go io.Copy (one copy_file_range)",
            vec![built.gocopy.clone().into_os_string()],
        ),
    ];
    if let Some(k) = &built.kcopy {
        cases.push((
            "engine: static musl splice, explicit offsets",
            vec![k.clone().into_os_string(), "splice".into()],
        ));
    }
    for (name, prog) in cases {
        evict(&input);
        let _ = std::fs::remove_file(&out);
        fs.set_write_bps(RATE).unwrap();
        let sampler = sample_writes(out.clone());
        let t = Instant::now();
        let status = ubio_run_copy(&prog, &input, &out);
        let took = t.elapsed();
        let samples = sampler.finish().unwrap();
        fs.set_write_bps(0).unwrap();
        let input_left = cached(&input);
        assert!(status.success(), "{name}: {status:?}");
        assert_eq!(hash_file(&out), hash_file(&input), "{name}: copy differs");
        let first = samples
            .iter()
            .find(|s| s.size > 0)
            .expect("no write seen")
            .at;
        let peak = samples.iter().map(|s| s.dirty_writeback).max().unwrap();
        let peak_cached = samples.iter().map(|s| s.cached).max().unwrap();
        let left = samples.last().unwrap().cached;
        eprintln!(
            "{name}: {LEN_MIB} MiB at {rate} MiB/s in {:.2} s: dirty+writeback peak {:.1} MiB, cached peak {:.1} MiB, left {left} B ({} samples)",
            took.as_secs_f64(),
            peak as f64 / MIB as f64,
            peak_cached as f64 / MIB as f64,
            samples.len(),
            LEN_MIB = LEN / MIB,
            rate = RATE / MIB,
        );
        assert_eq!(left, 0, "{name}: left cached after exit");
        assert_eq!(input_left, 0, "{name}: input left cached after exit");
        if name.starts_with("shim") {
            // Exact: the writer waits for its writeback a window ahead.
            assert!(
                peak <= WINDOW + 2 * MIB,
                "{name}: dirty+writeback peak {peak} B"
            );
            continue;
        }
        for s in &samples {
            let since = s.at.saturating_sub(first).saturating_sub(REACTION);
            let completed = (RATE as f64 * since.as_secs_f64()) as u64;
            let bound = s.size.saturating_sub(completed) + WINDOW;
            assert!(
                s.dirty_writeback <= bound,
                "{name}: at {:?} after the first write, {} MiB written, {:.1} MiB dirty+writeback > bound {:.1} MiB",
                s.at - first,
                s.size / MIB,
                s.dirty_writeback as f64 / MIB as f64,
                bound as f64 / MIB as f64
            );
        }
    }
}

/// Copies made by the kernel in one long call (copy_file_range, sendfile)
/// or in calls with explicit offsets (splice through a pipe), which move no
/// position while they run: `(name, program and its first arguments)`, to
/// which IN and OUT are added. Skips what cannot be built here.
fn kernel_copies(b: &Built, test: &str) -> Vec<(&'static str, Vec<std::ffi::OsString>)> {
    let mut v = vec![(
        "static Go io.Copy (copy_file_range)",
        vec![b.gocopy.clone().into_os_string()],
    )];
    match &b.kcopy {
        Some(k) => {
            for (name, mode) in [
                ("static musl copy_file_range", "cfr"),
                ("static musl sendfile", "sendfile"),
                ("static musl splice, explicit offsets", "splice"),
            ] {
                v.push((name, vec![k.clone().into_os_string(), mode.into()]));
            }
        }
        None => skip(&format!("{test} (musl)"), "no musl-gcc (musl-tools)"),
    }
    match &b.kcopy_dyn {
        // `env` is dynamic and gets the shim; the copy is exec'ed without it.
        Some(k) => v.push((
            "dynamic copy_file_range, shim not loaded",
            vec![
                "env".into(),
                "-u".into(),
                "LD_PRELOAD".into(),
                k.clone().into_os_string(),
                "cfr".into(),
            ],
        )),
        None => skip(&format!("{test} (dynamic)"), "no gcc"),
    }
    v
}

/// `ubio run --window 16M -- PROG... IN OUT`.
fn ubio_run_copy(
    prog: &[std::ffi::OsString],
    input: &Path,
    out: &Path,
) -> std::process::ExitStatus {
    Command::new(UBIO)
        .args(["run", "--window", "16M", "--"])
        .args(prog)
        .arg(input)
        .arg(out)
        .stdin(Stdio::null())
        .status()
        .unwrap()
}

/// [`ubio_run_copy`] (`under_ubio`; else the program alone) on a cold IN,
/// with the input's and the output's page cache sampled: (exit status,
/// input peaks, output peaks, bytes of each left cached after exit).
fn kernel_copy_sampled(
    prog: &[std::ffi::OsString],
    input: &Path,
    out: &Path,
    under_ubio: bool,
) -> (std::process::ExitStatus, Peaks, Peaks, [u64; 2]) {
    let _ = std::fs::remove_file(out);
    evict(input);
    let sin = ResidencySampler::follow_all(vec![input.to_path_buf()], SAMPLE_EVERY);
    let sout = ResidencySampler::follow_all(vec![out.to_path_buf()], SAMPLE_EVERY);
    let status = match under_ubio {
        true => ubio_run_copy(prog, input, out),
        false => Command::new(&prog[0])
            .args(&prog[1..])
            .arg(input)
            .arg(out)
            .stdin(Stdio::null())
            .status()
            .unwrap(),
    };
    let (pin, pout) = (sin.finish().unwrap(), sout.finish().unwrap());
    let left = [cached(input), if out.exists() { cached(out) } else { 0 }];
    (status, pin, pout, left)
}

/// One long in-kernel copy per program (Go's io.Copy, copy_file_range and
/// sendfile of the whole file in one call, splice with explicit offsets;
/// static and a dynamic one without the shim), on ext4 and on xfs made
/// without reflink (with it, copy_file_range clones and caches nothing:
/// checked too), each on a loop device: the input's and the output's page
/// cache within 64 MiB at every sample, the output's dirty + writeback
/// within the engine's bound, nothing cached after exit, the copy exact.
/// The first copy without ubio shows that the bounds can fail.
#[test]
fn long_kernel_copies_on_ext4_and_xfs() {
    use ubio_testenv::scratchfs::{FsKind, ScratchFs, ScratchOpts};
    const NAME: &str = "long_kernel_copies_on_ext4_and_xfs";
    let Some((_serial, _dir, built)) = root_and_programs(NAME) else {
        return;
    };
    let copies = kernel_copies(&built, NAME);
    let filesystems: [(&str, FsKind, &[&str]); 3] = [
        ("ext4", FsKind::Ext4, &[]),
        ("xfs", FsKind::Xfs, &["-m", "reflink=0"]),
        ("xfs with reflink", FsKind::Xfs, &["-m", "reflink=1"]),
    ];
    let mut failures = Vec::new();
    for (fs_name, kind, mkfs_args) in filesystems {
        let opts = ScratchOpts {
            mkfs_args: mkfs_args.iter().map(|a| a.to_string()).collect(),
            ..ScratchOpts::default()
        };
        // Room for the input, the output and a deleted output whose blocks
        // ext4 frees only at its next journal commit.
        let fs = ScratchFs::create(kind, 1024 * MIB, &opts).unwrap();
        // The bound on dirty + writeback holds where the device keeps up
        // with the engine's writeback. With the block layer's writeback
        // throttling on, this loop device's reads, late whenever its worker
        // waits for the CPU, held the writeback back for 0.1-2.9 s (the
        // engine's starts waited in wbt_wait) while the copy wrote on at
        // 850 MB/s: dirty + writeback up to 176 MiB with the engine that
        // started writeback in its looks, up to 210 MiB with the one that
        // starts it on its own thread.
        fs.no_writeback_throttling().unwrap();
        let input = fs.mount_point().join("in");
        let out = fs.mount_point().join("out");
        write_input(&input);
        let want = hash_file(&input);
        let reflink = fs_name.contains("reflink");
        if !reflink && fs_name == "ext4" {
            let (name, prog) = &copies[0];
            let (status, pin, pout, _) = kernel_copy_sampled(prog, &input, &out, false);
            let beyond = beyond_bounds(&pin, &pout, &[]);
            eprintln!("{fs_name:<16} {name:<42} without ubio: {beyond:?}");
            if !status.success() || beyond.is_empty() {
                failures.push(format!(
                    "{fs_name}: {name} without ubio ({status:?}) kept the bounds: \
                     the test cannot tell"
                ));
            }
        }
        for (name, prog) in &copies {
            // A clone: only the calls that clone.
            if reflink && !(name.contains("copy_file_range") || name.contains("io.Copy")) {
                continue;
            }
            let t = Instant::now();
            let (status, pin, pout, left) = kernel_copy_sampled(prog, &input, &out, true);
            eprintln!(
                "{fs_name:<16} {name:<42} {:>5.1} s: input peak {:>5.1} MiB, output peak {:>5.1} MiB, dirty+writeback peak {:>5.1} MiB, left {left:?} B",
                t.elapsed().as_secs_f64(),
                (pin.max_cached * PAGE) as f64 / MIB as f64,
                (pout.max_cached * PAGE) as f64 / MIB as f64,
                (pout.max_dirty_writeback * PAGE) as f64 / MIB as f64,
            );
            let mut fail = |what: String| failures.push(format!("{fs_name}: {name}: {what}"));
            if !status.success() {
                fail(format!("{status:?}"));
                continue;
            }
            if hash_file(&out) != want {
                fail("the copy differs".into());
            }
            for what in beyond_bounds(&pin, &pout, &left) {
                fail(what);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The in-kernel copy slower than the disk (its source on a loop device
/// whose reads are throttled to RATE, ext4), so that the engine writes back
/// and drops the output while the call is still copying: the output's
/// dirty + writeback stays within the window plus what the copy adds
/// between two looks, its cache drops behind it (the peak is a fraction of
/// the copy: not a test that passes because everything fits), the input's
/// cache within 64 MiB, nothing left after exit.
#[test]
fn kernel_copies_from_a_slow_source() {
    use ubio_testenv::scratchfs::{FsKind, ScratchFs};
    const NAME: &str = "kernel_copies_from_a_slow_source";
    const RATE: u64 = 64 * MIB;
    const LEN: u64 = 128 * MIB;
    const WINDOW: u64 = 16 * MIB;
    /// What the copy adds at RATE in a look and the device's latency (the
    /// engine's rule: docs/guide/commands.md, "The engine"), a quarter of a second on a
    /// busy machine.
    const SLACK: u64 = RATE / 4;
    let Some((_serial, _dir, built)) = root_and_programs(NAME) else {
        return;
    };
    let fs = ScratchFs::create(FsKind::Ext4, 512 * MIB, &Default::default()).unwrap();
    let input = fs.mount_point().join("in");
    let out = fs.mount_point().join("out");
    common::write_cold(&input, &common::data(LEN as usize, 5));
    let want = hash_file(&input);
    // The dynamic copy is the static one's twin here.
    let copies: Vec<_> = kernel_copies(&built, NAME)
        .into_iter()
        .filter(|(name, _)| name.starts_with("static"))
        .collect();
    for (name, prog) in copies {
        evict(&input);
        let _ = std::fs::remove_file(&out);
        let sin = ResidencySampler::follow_all(vec![input.clone()], SAMPLE_EVERY);
        let sampler = sample_writes(out.clone());
        fs.set_read_bps(RATE).unwrap();
        let t = Instant::now();
        let status = ubio_run_copy(&prog, &input, &out);
        let took = t.elapsed();
        fs.set_read_bps(0).unwrap();
        let samples = sampler.finish().unwrap();
        let pin = sin.finish().unwrap();
        let peak = samples.iter().map(|s| s.dirty_writeback).max().unwrap_or(0);
        let peak_cached = samples.iter().map(|s| s.cached).max().unwrap_or(0);
        let left = [cached(&input), cached(&out)];
        eprintln!(
            "{name}: {} MiB at {} MiB/s in {:.2} s: input peak {:.1} MiB; output dirty+writeback peak {:.1} MiB, cached peak {:.1} MiB; left {left:?} B",
            LEN / MIB,
            RATE / MIB,
            took.as_secs_f64(),
            (pin.max_cached * PAGE) as f64 / MIB as f64,
            peak as f64 / MIB as f64,
            peak_cached as f64 / MIB as f64,
        );
        assert!(status.success(), "{name}: {status:?}");
        assert!(
            took >= Duration::from_secs_f64(0.8 * (LEN / RATE) as f64),
            "{name}: the throttle did not slow the copy ({took:?})"
        );
        assert_eq!(hash_file(&out), want, "{name}: the copy differs");
        assert!(
            peak <= WINDOW + SLACK,
            "{name}: dirty+writeback peak {peak} B > window + {} MiB",
            SLACK / MIB
        );
        assert!(
            peak_cached <= WINDOW + SLACK,
            "{name}: output's cache peak {peak_cached} B"
        );
        assert!(
            pin.max_cached * PAGE <= PEAK_LIMIT,
            "{name}: input peak {} MiB",
            pin.max_cached * PAGE / MIB
        );
        assert_eq!(
            left,
            [0, 0],
            "{name}: left cached after exit (input, output)"
        );
    }
}

/// A copy killed inside its one long call (the source throttled so that
/// the call lasts seconds): the engine sees the descriptors go without a
/// position ever having moved, writes back what the call wrote and drops
/// it and what it read; `ubio run` dies of the same signal.
#[test]
fn a_copy_killed_in_its_call_leaves_nothing() {
    use std::os::unix::process::ExitStatusExt;
    use ubio_testenv::scratchfs::{FsKind, ScratchFs};
    const NAME: &str = "a_copy_killed_in_its_call_leaves_nothing";
    let Some((_serial, _dir, built)) = root_and_programs(NAME) else {
        return;
    };
    let Some(kcopy) = built.kcopy else {
        return skip(NAME, "no musl-gcc (musl-tools)");
    };
    let fs = ScratchFs::create(FsKind::Ext4, 256 * MIB, &Default::default()).unwrap();
    let input = fs.mount_point().join("in");
    let out = fs.mount_point().join("out");
    common::write_cold(&input, &common::data(128 << 20, 9));
    fs.set_read_bps(16 * MIB).unwrap();
    let mut ubio = Command::new(UBIO)
        .args(["run", "--"])
        .arg(&kcopy)
        .arg("cfr")
        .arg(&input)
        .arg(&out)
        .spawn()
        .unwrap();
    // The copy's pid: ubio's child.
    let child = loop {
        use ubio::procfs::{all_pids, pid_stat};
        let kid = all_pids()
            .unwrap()
            .into_iter()
            .find(|&p| pid_stat(p).ok().map(|s| s.ppid) == Some(ubio.id()));
        if let Some(p) = kid {
            break p;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let t = Instant::now();
    while std::fs::metadata(&out).map_or(0, |m| m.len()) < 32 * MIB {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the copy did not start"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    sys::kill(child, libc::SIGKILL).unwrap();
    let status = ubio.wait().unwrap();
    fs.set_read_bps(0).unwrap();
    let written = std::fs::metadata(&out).unwrap().len();
    let (cin, cout) = (common::count(&input), common::count(&out));
    eprintln!(
        "killed after {} MiB of 128: input {} pages cached, output {} cached ({:?} dirty)",
        written / MIB,
        cin.cached,
        cout.cached,
        cout.dirty
    );
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    assert!(written < 128 * MIB, "the copy ended before the kill");
    assert_eq!(
        (cin.cached, cout.cached),
        (0, 0),
        "left cached after the kill"
    );
}
