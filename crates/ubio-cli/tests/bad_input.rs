//! Bad input for every command: missing files, directories where files are
//! expected and the reverse, permission denied, the same source and
//! destination, a full destination, special and /proc files, symlink loops,
//! huge sparse files, invalid sizes and flags. Each case checks the exit
//! status, that stderr names the file and the operation, that nothing
//! panicked, and that nothing was lost (sources unchanged, destinations
//! absent, complete or reported incomplete). Every command runs under
//! `timeout`, so a hang fails instead of stalling. (`ubio bench` did not
//! exist when this matrix was written.) `ubio demo` runs ubio-bench, which
//! a workspace build puts beside `ubio`; without it its cases are skipped.
//! Each test prints `BAD-INPUT <category> cases=N`.

mod common;
use common::*;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use ubio_testenv::scratchfs::{FsKind, ScratchFs};

/// What a case must end with.
enum Exit {
    Ok,
    /// Exit 1: the command ran and reported a failure.
    Fails,
    /// Exit 2: the command line was refused (clap).
    Usage,
    Code(i32),
}

/// A scratch tree: `f` (a small file), `d` (a directory), `priv` (0600,
/// root's), `ro` (a 0555 directory), `loop1`/`loop2` (a symlink loop),
/// `hard` (a hard link to `f`), `lnk` (a symlink to `f`), `fifo`.
struct Tree {
    dir: tempfile::TempDir,
    f_bytes: Vec<u8>,
    cases: usize,
}

impl Tree {
    fn new() -> Tree {
        let dir = workdir();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let p = |n| dir.path().join(n);
        let f_bytes = data(300_000, 3);
        std::fs::write(p("f"), &f_bytes).unwrap();
        std::fs::create_dir(p("d")).unwrap();
        std::fs::write(p("d/inner"), b"inner").unwrap();
        std::fs::write(p("priv"), b"secret").unwrap();
        std::fs::set_permissions(p("priv"), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::create_dir(p("ro")).unwrap();
        std::fs::set_permissions(p("ro"), std::fs::Permissions::from_mode(0o555)).unwrap();
        std::os::unix::fs::symlink("loop2", p("loop1")).unwrap();
        std::os::unix::fs::symlink("loop1", p("loop2")).unwrap();
        std::fs::hard_link(p("f"), p("hard")).unwrap();
        std::os::unix::fs::symlink("f", p("lnk")).unwrap();
        ubio::sys::mkfifo(&p("fifo"), 0o644).unwrap();
        Tree {
            dir,
            f_bytes,
            cases: 0,
        }
    }

    fn p(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Run `ubio ARGS` (as nobody if `nobody`) in the tree, bounded by
    /// `timeout`, and check the common rules: the exit, every fragment of
    /// `says` in stderr, no panic, and `f` unchanged.
    fn case(&mut self, args: &[&str], nobody: bool, exit: Exit, says: &[&str]) -> Output {
        let out = self
            .bounded_ubio(nobody)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        self.check(&format!("ubio {}", args.join(" ")), &out, exit, says);
        out
    }

    /// As [`Tree::case`], for `ubio demo` (which runs ubio-bench), if
    /// ubio-bench is beside `ubio`.
    fn demo_case(&mut self, args: &[&str], nobody: bool, exit: Exit, says: &[&str]) {
        if harness_beside() {
            self.case(args, nobody, exit, says);
        }
    }

    /// `ubio` (as nobody if `nobody`) in the tree, killed by `timeout` if
    /// it runs for a minute.
    fn bounded_ubio(&self, nobody: bool) -> Command {
        let mut c = Command::new("timeout");
        c.args(["-s", "KILL", "60"]);
        if nobody {
            c.args([
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
            ]);
        }
        c.arg(UBIO).current_dir(self.dir.path());
        c
    }

    fn check(&mut self, what: &str, out: &Output, exit: Exit, says: &[&str]) {
        self.cases += 1;
        let err = stderr(out);
        assert_ne!(
            out.status.code(),
            Some(137),
            "{what}: hung (killed by timeout)"
        );
        assert!(!err.contains("panicked"), "{what}: panicked:\n{err}");
        // GNU's form: strerror's text alone, never Rust's "(os error N)".
        let gnu = ["cp", "cat", "stat", "evict", "probe"];
        if gnu.iter().any(|c| what.starts_with(&format!("ubio {c} "))) {
            assert!(!err.contains("(os error"), "{what}: not GNU's form:\n{err}");
        }
        let code = out.status.code();
        match exit {
            Exit::Ok => assert_eq!(code, Some(0), "{what}: {err}"),
            Exit::Fails => assert_eq!(code, Some(1), "{what}: {err}"),
            Exit::Usage => assert_eq!(code, Some(2), "{what}: {err}"),
            Exit::Code(c) => assert_eq!(code, Some(c), "{what}: {err}"),
        }
        for s in says {
            assert!(err.contains(s), "{what}: stderr must say {s:?}:\n{err}");
        }
        assert!(
            std::fs::read(self.p("f")).unwrap() == self.f_bytes,
            "{what}: source f changed"
        );
    }

    fn absent(&self, name: &str) {
        assert!(
            self.p(name).symlink_metadata().is_err(),
            "{name} must not exist"
        );
    }

    fn report(&self, category: &str) {
        println!("BAD-INPUT {category} cases={}", self.cases);
    }
}

/// ubio-bench is beside `ubio` (else one SKIP line for this test binary).
fn harness_beside() -> bool {
    static HERE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HERE.get_or_init(|| {
        let bench = Path::new(UBIO).with_file_name("ubio-bench");
        let here = bench.is_file();
        if !here {
            skip(
                "bad_input ubio demo",
                &format!(
                    "{} is not built (cargo build --release -p ubio-bench)",
                    bench.display()
                ),
            );
        }
        here
    })
}

#[test]
fn missing_files() {
    let mut t = Tree::new();
    t.case(
        &["probe", "nope"],
        false,
        Exit::Fails,
        &["cannot probe 'nope': No such file or directory"],
    );
    t.case(
        &["cat", "nope"],
        false,
        Exit::Fails,
        &["ubio cat: nope: No such file or directory"],
    );
    t.case(
        &["cat", "nope", "f"],
        false,
        Exit::Fails,
        &["ubio cat: nope: No such file"],
    );
    t.case(
        &["cp", "nope", "x"],
        false,
        Exit::Fails,
        &["ubio cp: cannot stat 'nope': No such file or directory"],
    );
    t.absent("x");
    // A last source that goes nowhere is named too, not only an exit of 1.
    t.case(
        &["cp", "--parents", "nope/x", "d"],
        false,
        Exit::Fails,
        &["ubio cp: cannot stat 'nope': No such file or directory"],
    );
    t.case(
        &["cp", "/", "d"],
        false,
        Exit::Fails,
        &["ubio cp: cannot copy '/': it has no file name"],
    );
    t.case(
        &["cp", "f", "no/such/dir/x"],
        false,
        Exit::Fails,
        &["cannot create regular file 'no/such/dir/x': No such file or directory"],
    );
    t.case(
        &["stat", "nope"],
        false,
        Exit::Fails,
        &["ubio stat: cannot stat 'nope': No such file or directory"],
    );
    t.case(
        &["evict", "nope"],
        false,
        Exit::Fails,
        &["ubio evict: cannot stat 'nope': No such file or directory"],
    );
    t.case(
        &["run", "--", "./nope"],
        false,
        Exit::Code(127),
        &["./nope: command not found"],
    );
    t.demo_case(
        &["demo", "--dir", "nope"],
        false,
        Exit::Fails,
        &["--dir nope", "No such file"],
    );
    t.report("missing-files");
}

#[test]
fn directories_and_files_swapped() {
    let mut t = Tree::new();
    t.case(
        &["cat", "d"],
        false,
        Exit::Fails,
        &["ubio cat: d: Is a directory"],
    );
    t.case(
        &["stat", "d"],
        false,
        Exit::Fails,
        &["d: is a directory (use -r)"],
    );
    t.case(
        &["evict", "d"],
        false,
        Exit::Fails,
        &["d: is a directory (use -r)"],
    );
    t.case(&["probe", "d"], false, Exit::Ok, &[]);
    t.case(
        &["cp", "d", "x"],
        false,
        Exit::Fails,
        &["ubio cp: -r not specified; omitting directory 'd'"],
    );
    t.absent("x");
    // A file onto a directory goes into it, as with GNU cp.
    t.case(&["cp", "f", "d"], false, Exit::Ok, &[]);
    assert!(std::fs::read(t.p("d/f")).unwrap() == t.f_bytes);
    t.case(
        &["cp", "-r", "d", "f"],
        false,
        Exit::Fails,
        &["cannot overwrite non-directory 'f' with directory 'd'"],
    );
    t.case(
        &["cp", "f", "f/x"],
        false,
        Exit::Fails,
        &["ubio cp: cannot stat 'f/x': Not a directory"],
    );
    t.case(
        &["cp", "f", "lnk", "f"],
        false,
        Exit::Fails,
        &["ubio cp: target 'f': Not a directory"],
    );
    t.case(
        &["run", "--", "./d"],
        false,
        Exit::Code(126),
        &["./d: Is a directory"],
    );
    t.demo_case(&["demo", "--dir", "f"], false, Exit::Fails, &["f"]);
    t.report("dir-file-swapped");
}

#[test]
fn permission_denied() {
    if !root_or_skip("permission_denied") {
        return;
    }
    let mut t = Tree::new();
    t.case(
        &["cat", "priv"],
        true,
        Exit::Fails,
        &["ubio cat: priv: Permission denied"],
    );
    t.case(
        &["cp", "priv", "d2"],
        true,
        Exit::Fails,
        &["ubio cp: cannot open 'priv' for reading: Permission denied"],
    );
    t.absent("d2");
    t.case(
        &["cp", "f", "ro/x"],
        true,
        Exit::Fails,
        &["ubio cp: cannot create regular file 'ro/x': Permission denied"],
    );
    t.absent("ro/x");
    t.case(
        &["stat", "priv"],
        true,
        Exit::Fails,
        &["ubio stat: cannot open 'priv': Permission denied"],
    );
    t.case(
        &["evict", "priv"],
        true,
        Exit::Fails,
        &["ubio evict: cannot open 'priv': Permission denied"],
    );
    t.case(
        &["probe", "priv"],
        true,
        Exit::Fails,
        &["ubio probe: cannot probe 'priv': Permission denied"],
    );
    t.case(
        &["run", "--", "./priv"],
        true,
        Exit::Code(126),
        &["ubio run: cannot run './priv': Permission denied"],
    );
    t.demo_case(&["demo", "--dir", "ro"], true, Exit::Fails, &["ro"]);
    assert_eq!(std::fs::read(t.p("priv")).unwrap(), b"secret");
    t.report("permission-denied");
}

#[test]
fn same_source_and_destination() {
    let mut t = Tree::new();
    let same = "are the same file";
    t.case(
        &["cp", "f", "f"],
        false,
        Exit::Fails,
        &["ubio cp: 'f' and 'f' are the same file"],
    );
    t.case(
        &["cp", "f", "hard"],
        false,
        Exit::Fails,
        &["'f' and 'hard' are the same file"],
    );
    t.case(
        &["cp", "f", "lnk"],
        false,
        Exit::Fails,
        &["'f' and 'lnk' are the same file"],
    );
    t.case(
        &["cp", "lnk", "f"],
        false,
        Exit::Fails,
        &["'lnk' and 'f' are the same file"],
    );
    t.case(&["cp", "-f", "f", "hard"], false, Exit::Fails, &[same]);
    t.case(&["cp", "f", "."], false, Exit::Fails, &[same]);
    t.case(
        &["cp", "-r", "d", "d"],
        false,
        Exit::Fails,
        &["into itself"],
    );
    t.report("same-file");
}

#[test]
fn destination_on_a_full_filesystem() {
    if !root_or_skip("destination_on_a_full_filesystem") {
        return;
    }
    let mut t = Tree::new();
    let fs = ScratchFs::create(FsKind::Ext4, 16 << 20, &Default::default()).unwrap();
    let big = t.p("big");
    let big_bytes = data(24 << 20, 5);
    write_cold(&big, &big_bytes);
    let dst = fs.mount_point().join("copy");
    let dst_s = dst.to_str().unwrap().to_owned();
    for backend in ubio::BackendKind::ALL {
        t.case(
            &["cp", "--backend", backend.name(), "big", &dst_s],
            false,
            Exit::Fails,
            &[
                "No space left on device",
                &format!("{dst_s} is incomplete"),
                "big is unchanged",
            ],
        );
        assert!(std::fs::read(&big).unwrap() == big_bytes, "big changed");
    }
    // cp of a device: like GNU cp, it copies until the end of the source or
    // until the destination is full, and then says so.
    let zero = fs.mount_point().join("zero").to_str().unwrap().to_owned();
    t.case(
        &["cp", "/dev/zero", &zero],
        false,
        Exit::Fails,
        &["No space left on device", "is incomplete"],
    );
    std::fs::remove_file(&zero).unwrap();
    // cat onto a full filesystem: the write to stdout fails, clearly.
    let out_path = fs.mount_point().join("cat-out");
    let out = t
        .bounded_ubio(false)
        .args(["cat", "big"])
        .stdout(std::fs::File::create(&out_path).unwrap())
        .output()
        .unwrap();
    t.check(
        "ubio cat big > full",
        &out,
        Exit::Fails,
        &["ubio cat: write error: No space left on device"],
    );
    t.report("full-destination");
}

#[test]
fn special_files() {
    let mut t = Tree::new();
    let out = t.case(&["cat", "/dev/null"], false, Exit::Ok, &[]);
    assert!(out.stdout.is_empty());
    t.case(&["cp", "/dev/null", "x"], false, Exit::Ok, &[]);
    assert_eq!(std::fs::metadata(t.p("x")).unwrap().len(), 0);
    t.case(
        &["stat", "/dev/null"],
        false,
        Exit::Fails,
        &["/dev/null: not a regular file"],
    );
    t.case(
        &["evict", "/dev/null"],
        false,
        Exit::Fails,
        &["/dev/null: not a regular file"],
    );
    t.case(&["probe", "/dev/null"], false, Exit::Ok, &[]);
    // cat /dev/zero is endless, as with cat: the reader takes what it wants.
    let (got, out) = head_then_close(ubio().args(["cat", "/dev/zero"]), 4 << 20);
    assert!(got.iter().all(|&b| b == 0));
    t.check("ubio cat /dev/zero | head", &out, Exit::Ok, &[]);
    // A fifo, fed by another process.
    for cmd in ["cat", "cp"] {
        let fifo = t.p("fifo");
        let writer = std::thread::spawn(move || std::fs::write(fifo, b"through a fifo").unwrap());
        let out = if cmd == "cat" {
            t.case(&["cat", "fifo"], false, Exit::Ok, &[])
        } else {
            t.case(&["cp", "fifo", "from-fifo"], false, Exit::Ok, &[])
        };
        writer.join().unwrap();
        let got = if cmd == "cat" {
            out.stdout
        } else {
            std::fs::read(t.p("from-fifo")).unwrap()
        };
        assert_eq!(got, b"through a fifo", "{cmd} fifo");
    }
    t.report("special-files");
}

#[test]
fn proc_files() {
    let mut t = Tree::new();
    // Size 0 in stat, contents when read: both commands copy all of it.
    let out = t.case(&["cat", "/proc/self/status"], false, Exit::Ok, &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("Name:\tubio\n") && text.contains("\nPid:\t") && text.ends_with('\n'),
        "{text}"
    );
    t.case(&["cp", "/proc/self/status", "status"], false, Exit::Ok, &[]);
    let copy = std::fs::read_to_string(t.p("status")).unwrap();
    assert!(
        copy.starts_with("Name:\tubio\n") && copy.contains("\nVmRSS:"),
        "cp of a /proc file: {copy:?}"
    );
    t.case(&["cp", "/proc/cpuinfo", "cpuinfo"], false, Exit::Ok, &[]);
    assert!(std::fs::read_to_string(t.p("cpuinfo"))
        .unwrap()
        .contains("processor"));
    let out = t.case(&["stat", "/proc/self/status"], false, Exit::Ok, &[]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("/proc/self/status"));
    t.case(&["evict", "/proc/self/status"], false, Exit::Ok, &[]);
    t.case(&["probe", "/proc/self/status"], false, Exit::Ok, &[]);
    t.case(
        &["cat", "/proc/self/mem"],
        false,
        Exit::Fails,
        &["/proc/self/mem", "Input/output error"],
    );
    t.report("proc-files");
}

#[test]
fn symlink_loops() {
    let mut t = Tree::new();
    let eloop = "Too many levels of symbolic links";
    t.case(
        &["probe", "loop1"],
        false,
        Exit::Fails,
        &["cannot probe 'loop1'", eloop],
    );
    t.case(
        &["cat", "loop1"],
        false,
        Exit::Fails,
        &["ubio cat: loop1: Too many levels of symbolic links"],
    );
    t.case(&["cp", "loop1", "x"], false, Exit::Fails, &["loop1", eloop]);
    t.absent("x");
    t.case(
        &["cp", "f", "loop1"],
        false,
        Exit::Fails,
        &["ubio cp: cannot stat 'loop1'", eloop],
    );
    t.case(
        &["stat", "loop1"],
        false,
        Exit::Fails,
        &["ubio stat: cannot stat 'loop1'", eloop],
    );
    t.case(
        &["evict", "loop1"],
        false,
        Exit::Fails,
        &["ubio evict: cannot stat 'loop1'", eloop],
    );
    t.case(
        &["run", "--", "./loop1"],
        false,
        Exit::Code(126),
        &["./loop1", eloop],
    );
    // With -r a loop is a symlink like any other: copied as one.
    std::fs::rename(t.p("loop1"), t.p("d/loop1")).unwrap();
    std::fs::rename(t.p("loop2"), t.p("d/loop2")).unwrap();
    t.case(&["cp", "-r", "d", "d-copy"], false, Exit::Ok, &[]);
    assert_eq!(
        std::fs::read_link(t.p("d-copy/loop1")).unwrap(),
        Path::new("loop2")
    );
    t.case(&["stat", "-r", "d"], false, Exit::Ok, &[]);
    t.report("symlink-loops");
}

#[test]
fn huge_sparse_file() {
    let mut t = Tree::new();
    let sparse = t.p("sparse");
    let f = std::fs::File::create(&sparse).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(b"head", 0).unwrap();
    f.write_all_at(b"middle", 1 << 39).unwrap();
    f.set_len(1 << 40).unwrap();
    drop(f);
    let out = t.case(&["stat", "sparse"], false, Exit::Ok, &[]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("1.0 TiB"));
    t.case(&["evict", "sparse"], false, Exit::Ok, &[]);
    t.case(&["probe", "sparse"], false, Exit::Ok, &[]);
    // Holes are skipped (SEEK_DATA/SEEK_HOLE): 1 TiB copies at once.
    t.case(&["cp", "sparse", "sparse-copy"], false, Exit::Ok, &[]);
    let meta = std::fs::metadata(t.p("sparse-copy")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(meta.len(), 1 << 40);
    assert!(
        meta.blocks() * 512 < 1 << 20,
        "copy not sparse: {} blocks",
        meta.blocks()
    );
    let copy = std::fs::File::open(t.p("sparse-copy")).unwrap();
    let mut buf = [0u8; 6];
    copy.read_exact_at(&mut buf, 1 << 39).unwrap();
    assert_eq!(&buf, b"middle");
    // cat of it: the reader takes the head and goes away.
    let (head, out) = head_then_close(ubio().arg("cat").arg(&sparse), 1 << 20);
    assert_eq!(&head[..4], b"head");
    t.check("ubio cat sparse | head", &out, Exit::Ok, &[]);
    t.report("huge-sparse");
}

#[test]
fn invalid_sizes_and_flags() {
    let mut t = Tree::new();
    let cases: &[&[&str]] = &[
        &["cp", "--window", "0", "f", "x"],
        &["cp", "--window", "1x", "f", "x"],
        &["cp", "--window", "-1", "f", "x"],
        &["cp", "--window", "99999999999T", "f", "x"],
        &["cp", "--block", "1x", "f", "x"],
        &["cp", "--backend", "nope", "f", "x"],
        &["cp", "--sparse", "sometimes", "f", "x"],
        &["cp", "--bogus", "f", "x"],
        &["cp"],
        &["cat", "--backend", "nope", "f"],
        &["cat", "--bogus", "f"],
        &["cat"],
        &["stat", "--bogus", "f"],
        &["stat"],
        &["evict", "--bogus", "f"],
        &["probe", "--bogus"],
        &["run", "--window", "0", "--", "true"],
        &["run", "--window", "1x", "--", "true"],
        &["run", "--backend", "nope", "--", "true"],
        &["run"],
        &["demo", "--limit", "1x"],
        &["demo", "--rounds", "0"],
        &["demo", "--rounds", "-3"],
        &["demo", "--bogus"],
        &["bogus"],
    ];
    for args in cases {
        if args[0] == "demo" && !harness_beside() {
            continue;
        }
        // GNU cp and cat exit 1 on a bad command line; the others clap's 2.
        let exit = if matches!(args[0], "cp" | "cat") {
            Exit::Fails
        } else {
            Exit::Usage
        };
        // cp reads its command line as GNU's does, and says so as GNU does.
        let says = if args[0] == "cp" {
            "Try 'ubio cp --help' for more information."
        } else {
            "error: "
        };
        t.case(args, false, exit, &[says]);
        if args.contains(&"cp") {
            t.absent("x");
        }
    }
    // Refused by the command itself, after parsing.
    t.case(
        &["cp", "f"],
        false,
        Exit::Fails,
        &["ubio cp: missing destination file operand after 'f'"],
    );
    t.case(
        &["cp", "--preserve=context", "f", "x"],
        false,
        Exit::Fails,
        &["ubio cp: cannot preserve security context without an SELinux-enabled kernel"],
    );
    t.case(
        &["cp", "--block", "0", "f", "x"],
        false,
        Exit::Fails,
        &["invalid --block 0", "must be at least 1 byte"],
    );
    t.demo_case(
        &["demo", "--limit", "0"],
        false,
        Exit::Fails,
        &["--limit 0 B is too small"],
    );
    t.demo_case(
        &["demo", "--dataset", "0"],
        false,
        Exit::Fails,
        &["--dataset 0 B is too small"],
    );
    t.demo_case(
        &["demo", "--modes", "nope"],
        false,
        Exit::Fails,
        &["unknown mode 'nope'"],
    );
    t.demo_case(
        &["demo", "--limit", "999T"],
        false,
        Exit::Fails,
        &["not enough free space"],
    );
    t.absent("x");
    t.report("invalid-flags");
}
