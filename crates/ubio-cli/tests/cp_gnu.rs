//! `ubio cp` against GNU cp: each GNU option ubio cp has runs through both
//! commands on the same small tree (files with their own modes and times, a
//! subdirectory, symlinks, a hard-linked pair, and for -x a tmpfs mounted
//! inside), each in its own copy of the tree, and the two trees must then be
//! the same: type, mode, size, content, link targets, which names share an
//! inode (with each other and with the sources), mtimes where preserved,
//! backup names; and the same exit status, stdout and stderr (GNU's `cp: `
//! is `ubio cp: `).

mod common;
use common::*;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};

/// The source tree, in `root/src`, and `root/dst` (an empty directory), and
/// `root/old` (an older and a newer version of two of the source files).
fn make_tree(root: &Path) {
    let p = |n: &str| root.join(n);
    std::fs::create_dir_all(p("src/sub")).unwrap();
    std::fs::create_dir(p("dst")).unwrap();
    std::fs::write(p("src/a"), b"alpha\n").unwrap();
    std::fs::write(p("src/b"), data(70_000, 9)).unwrap();
    std::fs::write(p("src/sub/c"), b"see\n").unwrap();
    std::fs::write(p("src/h1"), b"hard\n").unwrap();
    std::fs::hard_link(p("src/h1"), p("src/h2")).unwrap();
    std::os::unix::fs::symlink("a", p("src/ln")).unwrap();
    std::os::unix::fs::symlink("sub", p("src/lnsub")).unwrap();
    std::os::unix::fs::symlink("../nowhere", p("src/sub/dangling")).unwrap();
    xattr::set(p("src/a"), "user.color", b"blue").unwrap();
    xattr::set(p("src/sub"), "user.tag", b"\x00binary\xff").unwrap();
    for (name, mode) in [("src/a", 0o640), ("src/b", 0o755), ("src/sub", 0o750)] {
        std::fs::set_permissions(p(name), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    // Times far in the past, different per file (set last, deepest first).
    let names = [
        "src/sub/dangling",
        "src/sub/c",
        "src/a",
        "src/b",
        "src/h1",
        "src/ln",
        "src/lnsub",
        "src/sub",
        "src",
    ];
    for (i, name) in names.iter().enumerate() {
        let t = 1_000_000_000 + 1000 * i as i64;
        ubio::sys::set_times_nofollow(&p(name), (t + 7, 0), (t, 123_456_789)).unwrap();
    }
}

/// Destination files that are older than the sources (`dst/b`) and newer
/// (`dst/a`), for -u, -n, -i and backups.
fn existing_dst(root: &Path) {
    std::fs::write(root.join("dst/a"), b"newer\n").unwrap();
    std::fs::write(root.join("dst/b"), b"older\n").unwrap();
    ubio::sys::set_times_nofollow(&root.join("dst/a"), (2_000_000_000, 0), (2_000_000_000, 0))
        .unwrap();
    ubio::sys::set_times_nofollow(&root.join("dst/b"), (900_000_000, 0), (900_000_000, 0)).unwrap();
}

/// One name in a tree, as compared.
#[derive(Debug, PartialEq)]
struct Entry {
    kind: &'static str,
    mode: u32,
    size: u64,
    /// Length and FNV-1a hash of a file's bytes.
    content: Option<(usize, u64)>,
    link: Option<String>,
    /// The first name (in sorted order) with the same inode, if another.
    same_inode_as: Option<String>,
    mtime: Option<(i64, i64)>,
    /// user.* extended attributes (of the name itself, not a link's target).
    xattrs: Vec<(String, Vec<u8>)>,
}

/// Every name below `root` (its path replaced by `{ROOT}` in link
/// targets), with the mtimes of names below `mtimes_below` if given.
fn snapshot(root: &Path, mtimes_below: Option<&str>) -> BTreeMap<String, Entry> {
    let mut names = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.symlink_metadata().unwrap().is_dir() {
                stack.push(path.clone());
            }
            names.push(path);
        }
    }
    names.sort();
    let mut first_of_inode: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let mut out = BTreeMap::new();
    let root_s = root.to_str().unwrap();
    for path in names {
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        let m = path.symlink_metadata().unwrap();
        let ft = m.file_type();
        let kind = if ft.is_dir() {
            "dir"
        } else if ft.is_symlink() {
            "symlink"
        } else if ft.is_file() {
            "file"
        } else {
            "other"
        };
        let same_inode_as = if ft.is_dir() {
            None
        } else {
            let first = first_of_inode
                .entry((m.dev(), m.ino()))
                .or_insert_with(|| rel.clone());
            (*first != rel).then(|| first.clone())
        };
        let timed = mtimes_below.is_some_and(|b| rel.starts_with(b));
        out.insert(
            rel,
            Entry {
                kind,
                mode: m.mode() & 0o7777,
                // (A symlink's size is its target's length: compared as the target.)
                size: if ft.is_file() { m.len() } else { 0 },
                content: ft.is_file().then(|| fnv(&std::fs::read(&path).unwrap())),
                link: ft.is_symlink().then(|| {
                    std::fs::read_link(&path)
                        .unwrap()
                        .to_str()
                        .unwrap()
                        .replace(root_s, "{ROOT}")
                }),
                same_inode_as,
                mtime: timed.then(|| (m.mtime(), m.mtime_nsec())),
                xattrs: user_xattrs(&path),
            },
        );
    }
    out
}

fn user_xattrs(path: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = xattr::list(path)
        .unwrap()
        .filter_map(|n| n.into_string().ok())
        .filter(|n| n.starts_with("user."))
        .map(|n| {
            let v = xattr::get(path, &n).unwrap().unwrap_or_default();
            (n, v)
        })
        .collect();
    out.sort();
    out
}

fn fnv(bytes: &[u8]) -> (usize, u64) {
    let hash = bytes.iter().fold(0xcbf29ce484222325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    });
    (bytes.len(), hash)
}

/// What a run of one command left: exit status, stdout, stderr, tree.
#[derive(Debug, PartialEq)]
struct Result {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    tree: BTreeMap<String, Entry>,
}

/// A case: the arguments after `cp` ({ROOT} is the tree's root; the
/// command runs there), what to prepare, stdin, which mtimes must match.
struct Case<'a> {
    args: &'a [&'a str],
    setup: fn(&Path) -> Option<Tmpfs>,
    stdin: &'a str,
    mtimes_below: Option<&'a str>,
}

fn plain(_: &Path) -> Option<Tmpfs> {
    None
}

fn with_existing(root: &Path) -> Option<Tmpfs> {
    existing_dst(root);
    None
}

fn run_one(dir: &Path, label: &str, cmd: &[&str], case: &Case) -> Result {
    let root = dir.join(label);
    std::fs::create_dir(&root).unwrap();
    make_tree(&root);
    let mount = (case.setup)(&root);
    let root_s = root.to_str().unwrap();
    let args: Vec<String> = case
        .args
        .iter()
        .map(|a| a.replace("{ROOT}", root_s))
        .collect();
    let mut child = Command::new(cmd[0])
        .args(&cmd[1..])
        .args(&args)
        .current_dir(&root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(case.stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let tree = snapshot(&root, case.mtimes_below);
    drop(mount);
    // Lines sorted: GNU walks directories in readdir order, ubio sorted.
    let text = |b: &[u8]| {
        let text = String::from_utf8_lossy(b)
            .replace(root_s, "{ROOT}")
            .replace("ubio cp", "cp")
            .replace(['‘', '’'], "'");
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort();
        lines.join("\n")
    };
    Result {
        code: out.status.code(),
        stdout: text(&out.stdout),
        // GNU prompts and reports as "cp: ", ubio as "ubio cp: ".
        stderr: text(&out.stderr),
        tree,
    }
}

/// Runs `case` with GNU cp and with ubio cp and asserts the same result.
fn same_as_gnu(case: Case) {
    let dir = workdir();
    let gnu = run_one(dir.path(), "gnu", &["cp"], &case);
    let ubio = run_one(dir.path(), "ubio", &[UBIO, "cp"], &case);
    let what = format!("cp {}", case.args.join(" "));
    assert_eq!(
        ubio.code, gnu.code,
        "{what}: exit status\nGNU: {}\nubio: {}",
        gnu.stderr, ubio.stderr
    );
    assert_eq!(ubio.stderr, gnu.stderr, "{what}: stderr");
    assert_eq!(ubio.stdout, gnu.stdout, "{what}: stdout");
    for (name, g) in &gnu.tree {
        match ubio.tree.get(name) {
            Some(u) => assert_eq!(u, g, "{what}: {name} differs (left: ubio, right: GNU)"),
            None => panic!("{what}: ubio did not make {name}: {g:?}"),
        }
    }
    let extra: Vec<_> = ubio
        .tree
        .keys()
        .filter(|k| !gnu.tree.contains_key(*k))
        .collect();
    assert!(extra.is_empty(), "{what}: only ubio made {extra:?}");
    // The test must be able to fail: something was compared.
    assert!(
        gnu.tree.len() > 10,
        "{what}: tree too small: {:?}",
        gnu.tree.keys()
    );
}

fn case<'a>(args: &'a [&'a str]) -> Case<'a> {
    Case {
        args,
        setup: plain,
        stdin: "",
        mtimes_below: None,
    }
}

#[test]
fn recursive() {
    same_as_gnu(case(&["-r", "src", "dst/copy"]));
    same_as_gnu(case(&["-R", "-v", "src", "dst"]));
    // The contents of a directory into another: `cp -a src/. dst`.
    same_as_gnu(case(&["-a", "-v", "src/.", "dst"]));
    same_as_gnu(case(&["-r", "src/", "dst"]));
    same_as_gnu(case(&["-r", "src/sub/..", "dst"]));
}

#[test]
fn archive() {
    same_as_gnu(Case {
        mtimes_below: Some("dst/"),
        ..case(&["-a", "src", "dst/copy"])
    });
    same_as_gnu(Case {
        mtimes_below: Some("dst/"),
        ..case(&["-a", "--no-preserve=mode", "src", "dst/copy"])
    });
}

#[test]
fn preserve_and_no_preserve() {
    same_as_gnu(Case {
        mtimes_below: Some("dst/"),
        ..case(&["-p", "src/a", "src/b", "src/ln", "dst"])
    });
    same_as_gnu(Case {
        mtimes_below: Some("dst/"),
        ..case(&["-r", "--preserve=timestamps,links", "src", "dst/copy"])
    });
    same_as_gnu(case(&["-r", "--preserve=mode", "src", "dst/copy"]));
    same_as_gnu(case(&["-r", "--preserve=xattr", "src", "dst/copy"]));
    same_as_gnu(case(&["-a", "--no-preserve=xattr", "src", "dst/copy"]));
    same_as_gnu(case(&["-r", "--preserve", "src", "dst/copy"]));
    same_as_gnu(case(&["--preserve=links", "-r", "src", "dst/copy"]));
    same_as_gnu(case(&["-rp", "--no-preserve=mode", "src", "dst/copy"]));
    same_as_gnu(case(&["-r", "--no-preserve=mode", "src", "dst/copy"]));
}

#[test]
fn dereference() {
    same_as_gnu(case(&["-rL", "src", "dst/copy"]));
    same_as_gnu(case(&["-rH", "src/lnsub", "src/ln", "dst"]));
    same_as_gnu(case(&["-P", "src/ln", "dst/x"]));
    same_as_gnu(case(&["-d", "src/ln", "src/h1", "src/h2", "dst"]));
    same_as_gnu(case(&["src/ln", "dst/x"]));
}

#[test]
fn update_no_clobber_interactive() {
    same_as_gnu(Case {
        setup: with_existing,
        ..case(&["-u", "-v", "src/a", "src/b", "src/sub/c", "dst"])
    });
    same_as_gnu(Case {
        setup: with_existing,
        mtimes_below: Some("dst/"),
        ..case(&["-up", "src/a", "src/b", "dst"])
    });
    same_as_gnu(Case {
        setup: with_existing,
        ..case(&["-n", "src/a", "src/b", "src/sub/c", "dst"])
    });
    for answer in ["n\n", "y\n", ""] {
        same_as_gnu(Case {
            setup: with_existing,
            stdin: answer,
            ..case(&["-i", "src/a", "dst"])
        });
    }
    same_as_gnu(Case {
        setup: with_existing,
        stdin: "y\nn\n",
        ..case(&["-i", "src/a", "src/b", "dst"])
    });
}

#[test]
fn target_directory_and_no_target_directory() {
    same_as_gnu(case(&["-t", "dst", "src/a", "src/b"]));
    same_as_gnu(case(&["--target-directory=dst", "-r", "src/sub", "src/a"]));
    same_as_gnu(case(&["-rT", "src", "dst"]));
    same_as_gnu(case(&["-T", "src/a", "dst/a2"]));
    // Errors: GNU's messages and status.
    same_as_gnu(case(&["-t", "src/a", "src/b"]));
    same_as_gnu(case(&["-t", "nope", "src/b"]));
    same_as_gnu(case(&["-T", "src/a", "src/b", "dst"]));
    same_as_gnu(case(&["src/a", "src/b", "nodir"]));
    same_as_gnu(case(&["src/a", "src/b", "src/sub/c"]));
}

#[test]
fn parents() {
    same_as_gnu(case(&["--parents", "src/sub/c", "src/a", "dst"]));
    same_as_gnu(Case {
        mtimes_below: Some("dst/"),
        ..case(&["--parents", "-p", "-v", "src/sub/c", "dst"])
    });
    same_as_gnu(case(&["--parents", "-r", "src/sub", "dst"]));
    same_as_gnu(case(&["--parents", "src/a", "src/b"]));
}

#[test]
fn backups() {
    for args in [
        &["-b", "src/a", "src/b", "dst"][..],
        &["--backup=numbered", "src/a", "src/b", "dst"],
        // (GNU cp 9.1 puts a -S backup made in a target directory into
        // the current directory: name the destination file here.)
        &["--backup=simple", "-S", ".bak", "src/a", "dst/a"],
        &["--suffix=.orig", "src/a", "dst/a"],
        &["--backup=existing", "src/a", "dst"],
        &["--backup=none", "src/a", "dst"],
        &["--backup=t", "-v", "-r", "src", "dst"],
    ] {
        same_as_gnu(Case {
            setup: with_existing,
            ..case(args)
        });
    }
    // Numbered backups count on from the highest there.
    same_as_gnu(Case {
        setup: |root| {
            existing_dst(root);
            std::fs::write(root.join("dst/a.~4~"), b"four\n").unwrap();
            None
        },
        ..case(&["-b", "src/a", "dst"])
    });
    same_as_gnu(Case {
        setup: with_existing,
        ..case(&["--backup=sometimes", "src/a", "dst"])
    });
}

#[test]
fn remove_destination_and_force() {
    // dst/a is a hard link of dst/keep: overwriting writes through it,
    // removing it first leaves dst/keep alone.
    fn linked(root: &Path) -> Option<Tmpfs> {
        std::fs::write(root.join("dst/keep"), b"keep me\n").unwrap();
        std::fs::hard_link(root.join("dst/keep"), root.join("dst/a")).unwrap();
        std::fs::set_permissions(
            root.join("dst/keep"),
            std::fs::Permissions::from_mode(0o444),
        )
        .unwrap();
        None
    }
    for args in [
        &["--remove-destination", "src/a", "dst"][..],
        &["src/a", "dst"],
        &["-f", "src/a", "dst"],
    ] {
        same_as_gnu(Case {
            setup: linked,
            ..case(args)
        });
    }
}

#[test]
fn links() {
    same_as_gnu(case(&["-rl", "src", "dst/copy"]));
    same_as_gnu(case(&["-l", "src/a", "src/ln", "dst"]));
    same_as_gnu(Case {
        setup: with_existing,
        ..case(&["-l", "src/a", "dst"])
    });
    same_as_gnu(Case {
        setup: with_existing,
        ..case(&["-lf", "src/a", "dst"])
    });
    same_as_gnu(case(&["-s", "{ROOT}/src/a", "{ROOT}/src/sub", "dst"]));
    same_as_gnu(case(&["-rs", "{ROOT}/src", "dst/copy"]));
    same_as_gnu(case(&["-s", "src/a", "here"]));
    same_as_gnu(case(&["-s", "src/a", "dst/x"]));
}

#[test]
fn one_file_system() {
    if !root_or_skip("one_file_system") {
        return;
    }
    fn mounted(root: &Path) -> Option<Tmpfs> {
        let at = root.join("src/sub/mnt");
        let mount = Tmpfs::at(&at);
        std::fs::write(at.join("on-tmpfs"), b"other fs\n").unwrap();
        Some(mount)
    }
    same_as_gnu(Case {
        setup: mounted,
        ..case(&["-rx", "src", "dst/copy"])
    });
    same_as_gnu(Case {
        setup: mounted,
        ..case(&["-r", "src", "dst/copy"])
    });
    same_as_gnu(Case {
        setup: mounted,
        ..case(&["-a", "--one-file-system", "src/sub", "dst"])
    });
}

/// The messages people grep for, as GNU cp prints them.
#[test]
fn common_errors() {
    same_as_gnu(case(&["nope", "dst"]));
    same_as_gnu(case(&["src", "dst"]));
    same_as_gnu(case(&["src/a", "src/a"]));
    same_as_gnu(case(&["src/a"]));
    same_as_gnu(case(&["src/a", "nodir/x"]));
    same_as_gnu(case(&["-r", "src", "src/a"]));
}

/// Permission denied, as nobody (root reads everything).
#[test]
fn permission_denied_as_nobody() {
    if !root_or_skip("permission_denied_as_nobody") {
        return;
    }
    let dir = workdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, b"secret").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    std::fs::write(dir.path().join("open"), b"open").unwrap();
    for (args, says) in [
        (
            &["secret", "ro/x"][..],
            "cp: cannot open 'secret' for reading: Permission denied\n",
        ),
        (
            &["open", "ro/x"],
            "cp: cannot create regular file 'ro/x': Permission denied\n",
        ),
    ] {
        for cmd in [&["cp"][..], &[UBIO, "cp"]] {
            let out = Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .args(cmd)
                .args(args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(1), "{cmd:?} {args:?}");
            assert_eq!(
                stderr(&out).replace("ubio cp: ", "cp: "),
                says,
                "{cmd:?} {args:?}"
            );
        }
    }
}
