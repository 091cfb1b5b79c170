//! The refusals that protect data, and the cases GNU cp allows on the same
//! file, as GNU cp 9.1 has them: each case runs GNU's cp and ubio invoked
//! as `cp` (a symlink of that name) in fresh, identical directories; the
//! exit status, stdout, stderr and the resulting directory (names, types,
//! symlink targets, contents, which names share an inode) must be the same.
//!
//! The same-file matrix is the one GNU's tests/cp/same-file.sh runs (six
//! pairs of names, nineteen option sets; all of them run here, including
//! the seven that GNU's script leaves out as unportable elsewhere); the
//! others are GNU's refusals: writing through a symlink this very command
//! made or a dangling one, a backup that would destroy the source, a
//! destination made by this command overwritten by a later source, a
//! source named twice, a directory copied into itself. And a destination
//! that a link would replace stays when the link cannot be made.

mod common;
use common::gnu::{assert_all_as_gnu, assert_as_gnu_but, assert_as_gnu_in, Case, Known};
use common::{root_or_skip, workdir, Tmpfs, UBIO};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use ubio_testenv::scratchfs::{FsKind, ScratchFs};

/// GNU's same-file.sh matrix: each pair of names with each option set,
/// backups numbered (VERSION_CONTROL=numbered, as the script sets it).
#[test]
fn same_file_matrix() {
    let pairs = [
        ("foo symlink", "ln -s foo symlink"),
        ("symlink foo", "ln -s foo symlink"),
        ("foo foo", ""),
        ("sl1 sl2", "ln -s foo sl1; ln -s foo sl2"),
        ("foo hardlink", "ln foo hardlink"),
        ("hlsl sl2", "ln -s foo sl2; ln sl2 hlsl"),
    ];
    let options = [
        "", "-d", "-f", "-df", "--rem", "-b", "-bd", "-bf", "-bdf", "-l", "-dl", "-fl", "-dfl",
        "-bl", "-bdl", "-bfl", "-bdfl", "-s", "-sf",
    ];
    let mut cases = Vec::new();
    for (args, setup) in pairs {
        for opt in options {
            let setup = format!("echo XYZ > foo; {setup}");
            let mut a: Vec<&str> = Vec::new();
            if !opt.is_empty() {
                a.push(opt);
            }
            a.extend(args.split(' '));
            cases.push((setup, a));
        }
    }
    let cases: Vec<_> = cases
        .iter()
        .map(|(s, a)| (s.as_str(), a.clone(), vec![("VERSION_CONTROL", "numbered")]))
        .collect();
    assert_eq!(cases.len(), 114);
    assert_all_as_gnu(&cases);
}

/// Refusals that keep data from being lost, and what GNU does instead.
#[test]
fn refusals_that_protect_data() {
    // d/b leads to d/a, which --parents makes for a/f.
    let via_b = "mkdir a b d; head -c 32M /dev/zero | tr '\\0' A > a/f; echo B > b/f; ln -s a d/b";
    let cases: Vec<Case> = vec![
        // b/1 would be written through the symlink c/1 made a moment
        // before, to a file outside the destination.
        (
            "mkdir a b c; ln -s ../t a/1; echo x > b/1",
            vec!["-dR", "a/1", "b/1", "c"],
            vec![],
        ),
        // A dangling symlink as the destination: not written through...
        ("echo data > f; ln -s no-such d", vec!["f", "d"], vec![]),
        (
            "echo data > f; mkdir t; ln -s ../no-such t/f",
            vec!["f", "t"],
            vec![],
        ),
        // ...unless POSIX is asked for.
        (
            "echo data > f; ln -s no-such d",
            vec!["f", "d"],
            vec![("POSIXLY_CORRECT", "1")],
        ),
        // The backup of a would replace the source a~.
        (": > a; echo A > a~", vec!["--b=simple", "a~", "a"], vec![]),
        (
            ": > a; echo A > a~",
            vec!["--backup=numbered", "a~", "a"],
            vec![],
        ),
        (
            "echo A > a.bak; : > a",
            vec!["-b", "-S", ".bak", "a.bak", "a"],
            vec![("VERSION_CONTROL", "simple")],
        ),
        // Two sources with one name: the second would replace the first's copy.
        (
            "mkdir a b c; echo 1 > a/f; echo 2 > b/f",
            vec!["a/f", "b/f", "c"],
            vec![],
        ),
        (
            "mkdir a b c; echo 1 > a/f; echo 2 > b/f",
            vec!["--backup=numbered", "a/f", "b/f", "c"],
            vec![],
        ),
        (
            "mkdir a b c; echo 1 > a/f; echo 2 > b/f",
            vec!["--backup=simple", "a/f", "b/f", "c"],
            vec![],
        ),
        (
            "mkdir a b c d; echo 1 > a/f; echo 2 > b/f",
            vec!["-r", "a", "b", "d"],
            vec![],
        ),
        // Two destinations that are one file: a symlink to what an earlier
        // source's copy makes (GNU writes through it once that copy is
        // made), or to a file there already, or hard links. Written one
        // after the other, as GNU's cp writes them, never both at once
        // (8 MiB: long enough for two workers to meet).
        (
            "mkdir x y d; echo A > x/a; echo B > y/b; ln -s a d/b",
            vec!["x/a", "y/b", "d"],
            vec![],
        ),
        (
            "mkdir x y d; head -c 8M /dev/zero | tr '\\0' A > x/a; head -c 8M /dev/zero | tr '\\0' B > y/b; echo old > d/a; ln -s a d/b",
            vec!["x/a", "y/b", "d"],
            vec![],
        ),
        (
            "mkdir x y d; head -c 8M /dev/zero | tr '\\0' A > x/a; head -c 8M /dev/zero | tr '\\0' B > y/b; echo old > d/a; ln d/a d/b",
            vec!["x/a", "y/b", "d"],
            vec![],
        ),
        // The same, the symlink met first (its copy in flight while the
        // plain name of that file comes); a source that a copy in flight
        // writes (through a symlink, or a hard link, made before); a
        // source read by a copy in flight that a later source overwrites
        // (--parents). 32 MiB for the first copy: long enough for the
        // second to meet it (the build before these waits failed each of
        // them 3 times in 3 by hand).
        (
            "mkdir x y d; head -c 32M /dev/zero | tr '\\0' A > x/a; head -c 8M /dev/zero | tr '\\0' B > y/b; echo old > d/b; ln -s b d/a",
            vec!["x/a", "y/b", "d"],
            vec![],
        ),
        (
            "mkdir c; head -c 32M /dev/zero | tr '\\0' A > a; echo b > b; ln -s ../b c/a",
            vec!["a", "b", "c"],
            vec![],
        ),
        (
            "mkdir c; head -c 32M /dev/zero | tr '\\0' A > a; echo b > b; ln b c/a",
            vec!["a", "b", "c"],
            vec![],
        ),
        (
            "mkdir -p d/x x; head -c 32M /dev/zero | tr '\\0' A > d/x/f; echo new > x/f",
            vec!["--parents", "d/x/f", "x/f", "d"],
            vec![],
        ),
        // A destination that a copy in flight creates, reached again by
        // another path through a symlinked directory (d/b -> a): GNU's
        // later source replaces it (or backs it up), never both at once;
        // and a source reached through the destination, which a copy in
        // flight creates: read once that copy is made (32 MiB: the build
        // before these waits failed each of them 3 times in 3).
        (via_b, vec!["--parents", "a/f", "b/f", "d"], vec![]),
        (via_b, vec!["--backup=numbered", "--parents", "a/f", "b/f", "d"], vec![]),
        (via_b, vec!["-b", "--parents", "a/f", "b/f", "d"], vec![]),
        (
            "mkdir -p a/s b/s d; head -c 32M /dev/zero | tr '\\0' A > a/s/f; echo B > b/s/f; ln -s a d/b",
            vec!["-r", "--parents", "a/s", "b/s", "d"],
            vec![],
        ),
        (
            "mkdir a d; head -c 32M /dev/zero | tr '\\0' A > a/f; ln -s d/f b",
            vec!["a/f", "b", "d"],
            vec![],
        ),
        (
            "mkdir a d; head -c 32M /dev/zero | tr '\\0' A > a/f; ln -s d/a l",
            vec!["-rH", "a", "l", "d"],
            vec![],
        ),
        // One source twice.
        ("mkdir d; echo 1 > f", vec!["f", "f", "d"], vec![]),
        ("mkdir d; echo 1 > f", vec!["f", "./f", "d"], vec![]),
        ("mkdir d; echo 1 > f", vec!["-b", "f", "f", "d"], vec![]),
        ("mkdir d s; echo 1 > s/f", vec!["-r", "s", "s", "d"], vec![]),
        // -d onto a symlink to itself, and through symlinks to the source.
        (
            "echo 1 > foo; ln -s foo symlink",
            vec!["-d", "symlink", "foo"],
            vec![],
        ),
        (
            "echo 1 > foo; ln -s foo s2; ln -s s2 s1",
            vec!["s1", "foo"],
            vec![],
        ),
        (
            "echo 1 > foo; ln -s foo s2; ln -s s2 s1",
            vec!["-b", "s1", "s2"],
            vec![],
        ),
        (
            "echo 1 > c; ln -s c b; ln -s b a",
            vec!["-b", "a", "b"],
            vec![],
        ),
        // A directory into itself (more in a_directory_into_itself_as_gnu),
        // and through a cycle of symlinks.
        ("mkdir a", vec!["-r", "a", "a/b"], vec![]),
        ("mkdir -p a; echo 1 > a/f", vec!["-r", "a", "a/x/y"], vec![]),
        (
            "mkdir -p a/b; ln -s .. a/b/up",
            vec!["-rL", "a", "c"],
            vec![],
        ),
        // A symlink to a directory where a directory would be made: not
        // copied into (it leads out of the destination); the destination
        // named as a directory and --parents' way are followed.
        (
            "mkdir -p s/y/z t/q out; echo 1 > s/y/z/f; ln -s ../../out t/q/y",
            vec!["-r", "s/y", "t/q"],
            vec![],
        ),
        (
            "mkdir -p s/y/z t/q/y out; echo 1 > s/y/z/f; ln -s ../../../out t/q/y/z",
            vec!["-a", "s/y", "t/q"],
            vec![],
        ),
        (
            "mkdir -p s/y t out; echo 1 > s/y/f; ln -s ../out t/y",
            vec!["-rT", "s/y", "t/y"],
            vec![],
        ),
        (
            "mkdir -p s/y t out; echo 1 > s/y/f; ln -s ../out t/y",
            vec!["-r", "s/y/.", "t/y"],
            vec![],
        ),
        (
            "mkdir -p s/y t out; echo 1 > s/y/f; ln -s ../out t/s",
            vec!["-r", "--parents", "s/y", "t"],
            vec![],
        ),
        // A file onto a directory and back.
        ("mkdir d; echo 1 > f; mkdir -p e/f", vec!["f", "e"], vec![]),
        ("mkdir -p d/x; echo 1 > x", vec!["-r", "d/x", "."], vec![]),
        (
            "mkdir d; echo 1 > d/x; mkdir -p e/d; ln -s y e/d/x",
            vec!["-r", "d", "e"],
            vec![],
        ),
        // cp -f -b f f: a backup of f, not a copy onto itself.
        ("echo 1 > f", vec!["-fb", "f", "f"], vec![]),
        (
            "echo 1 > f",
            vec!["--force", "--backup=numbered", "f", "f"],
            vec![],
        ),
        // Hard links among sources and to an earlier copy.
        (
            "mkdir d; echo 1 > f; ln f g",
            vec!["-d", "f", "g", "d"],
            vec![],
        ),
        (
            "mkdir d; echo 1 > f; ln -s f s",
            vec!["-H", "--preserve=links", "f", "s", "d"],
            vec![],
        ),
        (
            "mkdir d; echo 1 > f; ln -s f s",
            vec!["-L", "--preserve=links", "f", "s", "d"],
            vec![],
        ),
        // --preserve=links never makes a copy a name of a source's data,
        // nor writes into a destination that has other names (X, Y: their
        // data stays theirs, as GNU's).
        (
            "mkdir s t; echo data > s/f; ln s/f s/g; mkdir t/s; ln s/f t/s/g",
            vec!["-a", "s", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo data > s/f; ln s/f s/g; mkdir t/s; ln -s ../../s/f t/s/g",
            vec!["--preserve=links", "-R", "s", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo data > s/f; ln s/f s/g; mkdir t/s; echo old > X; ln X t/s/f",
            vec!["-a", "s", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo data > s/f; mkdir t/s; echo old > X; ln X t/s/f",
            vec!["-a", "s", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo data > s/f; mkdir t/s; echo old > X; ln X t/s/f",
            vec!["-a", "-b", "s", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo data > s/f; mkdir t/s; echo old > X; ln X t/s/f",
            vec!["-R", "s", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo data > s/f; mkdir t/s; echo old > Y; ln Y Y2; ln -s ../../Y t/s/f",
            vec!["-a", "s", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo data > s/f; mkdir t/s; echo old > Y; ln -s ../../Y t/s/f",
            vec!["--preserve=links", "-R", "s", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo 1 > s/f; ln s/f s/g; echo 2 > s/o; mkdir t/s; ln s/o t/s/f",
            vec!["-a", "s", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo 1 > s/f; ln s/f s/g; echo 2 > s/o; mkdir t/s; ln s/o t/s/f; touch -d '+1 hour' s/o",
            vec!["-au", "s", "t"],
            vec![],
        ),
        (
            "mkdir d; echo 1 > a",
            vec!["--backup=numbered", "--preserve=links", "a", "a", "d"],
            vec![],
        ),
    ];
    // Where ubio differs from GNU today (issue 24), and why.
    let known: &[Known] = &[
        ("echo 1 > foo; ln -s foo s2; ln -s s2 s1", "-b s1 s2", "backups: the backup made before a failed copy is not put back (left as NAME~; nothing is lost)"),
        ("echo 1 > c; ln -s c b; ln -s b a", "-b a b", "backups: the backup made before a failed copy is not put back (left as NAME~; nothing is lost)"),
        ("mkdir d; echo 1 > a", "--backup=numbered --preserve=links a a d", "backups: the backup made before a failed copy is not put back (left as NAME~; nothing is lost)"),
        // ubio's choice, not a gap: -u kept t/s/f, a name of the source s/o;
        // GNU links t/s/g (a copy of s/f) to it, so the copy holds s/o's
        // data and is one more name of it. ubio copies s/g on its own.
        ("mkdir s t; echo 1 > s/f; ln s/f s/g; echo 2 > s/o; mkdir t/s; ln s/o t/s/f; touch -d '+1 hour' s/o", "-au s t", "safety: no link to a destination -u kept that is a name of a source (GNU links the copy to it: it then holds that source's data)"),
    ];
    assert_as_gnu_but(&cases, known);
}

/// A filesystem where inodes are numbered in the order they are made (a
/// tmpfs of its own, of `size`), for cases whose outcome depends on the
/// walk's order: GNU's cp takes a directory's names in inode order, ubio's
/// in name order, so a setup that makes its names in name order is walked
/// alike by both. None (a skip) without root.
fn in_made_order(test: &str, size: &str) -> Option<(Tmpfs, tempfile::TempDir)> {
    if !root_or_skip(test) {
        return None;
    }
    let dir = workdir();
    Some((Tmpfs::sized(&dir.path().join("fs"), size), dir))
}

/// What `cp ARGS` did in `dir` (GNU's cp, or ubio as cp): exit status,
/// stderr, and what each of `names` holds then ("gone" where nothing).
fn run_in(
    cp: &str,
    dir: &Path,
    args: &[&str],
    names: &[&str],
) -> (Option<i32>, String, Vec<String>) {
    let out = Command::new(cp)
        .arg0("cp")
        .args(args)
        .env("LC_ALL", "C")
        .current_dir(dir)
        .output()
        .unwrap();
    let holds = |n: &&str| {
        let p = dir.join(n);
        match p.symlink_metadata() {
            Err(_) => "gone".to_owned(),
            Ok(m) if m.is_symlink() => {
                format!("symlink {}", std::fs::read_link(&p).unwrap().display())
            }
            Ok(m) if m.is_file() => format!("file {:?}", std::fs::read_to_string(&p).unwrap()),
            Ok(m) => format!("{:?}", m.file_type()),
        }
    };
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).replace("/bin/cp", "cp"),
        names.iter().map(holds).collect(),
    )
}

/// Only these names in `dir` (no temporary name left behind).
fn assert_names(dir: &Path, names: &[&str]) {
    let mut here: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    here.sort();
    assert_eq!(here, names, "in {}", dir.display());
}

/// A destination that a hard link would replace (-l -f, --preserve=links)
/// stays as it was when the link cannot be made (here: the link would
/// cross to another filesystem), with GNU's message: the link is made at a
/// temporary name and renamed over the destination, as GNU does, never
/// after removing it.
#[test]
fn a_hard_link_that_cannot_be_made_leaves_the_destination_as_gnu() {
    if !root_or_skip("a_hard_link_that_cannot_be_made_leaves_the_destination_as_gnu") {
        return;
    }
    let cases: [&[&str]; 3] = [
        &["-l", "-f", "s/x/a", "t/y/b"],
        &["-R", "--preserve=links", "s/x", "s/y", "t"],
        &["-a", "s/x", "s/y", "t"],
    ];
    let dir = workdir();
    for (n, args) in cases.iter().enumerate() {
        let mut seen = Vec::new();
        for cp in ["/bin/cp", UBIO] {
            let root = dir.path().join(format!("{n}{}", seen.len()));
            for d in ["s/x", "s/y", "t"] {
                std::fs::create_dir_all(root.join(d)).unwrap();
            }
            std::fs::write(root.join("s/x/a"), b"new\n").unwrap();
            std::fs::hard_link(root.join("s/x/a"), root.join("s/y/b")).unwrap();
            let _other_fs = Tmpfs::at(&root.join("t/y"));
            std::fs::write(root.join("t/y/b"), b"old\n").unwrap();
            let (code, err, holds) = run_in(cp, &root, args, &["t/y/b"]);
            assert_eq!(
                (code, &holds[..]),
                (Some(1), &["file \"old\\n\"".to_owned()][..]),
                "{cp} {args:?}: {err}"
            );
            assert!(
                err.contains("cannot create hard link 't/y/b'")
                    && err.contains("Invalid cross-device link"),
                "{cp} {args:?}: {err}"
            );
            assert_names(&root.join("t/y"), &["b"]);
            seen.push(err);
        }
        assert_eq!(seen[0], seen[1], "cp {args:?}: GNU's stderr, then ubio's");
    }
}

/// The same for a symlink (-s -f; -d of a symlink; -r of a fifo) that
/// cannot be made (no inode left, and the old destination has another
/// name, so removing it frees none): the destination stays. GNU's -s -f
/// does the same; GNU's -d and -r remove the destination first and lose it,
/// where ubio keeps it (its choice: nothing lost), with GNU's message.
#[test]
fn a_symlink_that_cannot_be_made_leaves_the_destination() {
    if !root_or_skip("a_symlink_that_cannot_be_made_leaves_the_destination") {
        return;
    }
    let fs = ScratchFs::create(
        FsKind::Ext4,
        FsKind::Ext4.min_size_bytes(),
        &Default::default(),
    )
    .unwrap();
    let src = workdir();
    std::fs::write(src.path().join("a"), b"new\n").unwrap();
    std::os::unix::fs::symlink("a", src.path().join("sym")).unwrap();
    ubio::sys::mkfifo(&src.path().join("fifo"), 0o644).unwrap();
    let a = src.path().join("a");
    let (sym, fifo) = (src.path().join("sym"), src.path().join("fifo"));
    let a = a.to_str().unwrap();
    let cases: [(&[&str], bool); 3] = [
        (&["-s", "-f", a, "b"], true),
        (&["-d", sym.to_str().unwrap(), "b"], false),
        (&["-r", fifo.to_str().unwrap(), "b"], false),
    ];
    // One directory per run, all made before the inodes run out.
    let dirs: Vec<_> = (0..cases.len() * 2)
        .map(|i| {
            let d = fs.mount_point().join(i.to_string());
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("b"), b"old\n").unwrap();
            std::fs::hard_link(d.join("b"), d.join("b2")).unwrap();
            d
        })
        .collect();
    let fill = fs.mount_point().join("fill");
    std::fs::create_dir(&fill).unwrap();
    for i in 0.. {
        match std::fs::File::create(fill.join(i.to_string())) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling the inodes: {e}"),
        }
    }
    for (n, (args, gnu_keeps)) in cases.iter().enumerate() {
        let gnu = run_in("/bin/cp", &dirs[2 * n], args, &["b"]);
        let ours = run_in(UBIO, &dirs[2 * n + 1], args, &["b"]);
        let old = vec!["file \"old\\n\"".to_owned()];
        assert_eq!(
            (ours.0, &ours.2),
            (Some(1), &old),
            "cp {args:?}: {}",
            ours.1
        );
        assert!(
            ours.1.contains("No space left on device"),
            "cp {args:?}: {}",
            ours.1
        );
        assert_eq!(
            (gnu.0, &gnu.1),
            (ours.0, &ours.1),
            "cp {args:?}: GNU's, then ubio's"
        );
        assert_eq!(
            gnu.2 == old,
            *gnu_keeps,
            "cp {args:?}: GNU left {:?}",
            gnu.2
        );
        assert_names(&dirs[2 * n + 1], &["b", "b2"]);
    }
}

/// A symlink followed (-L in the tree, -H or -L on the command line) to a
/// file or directory this same command makes: GNU's cp copies one file
/// after the other, so it finds what the walk made before the symlink
/// complete and copies all of it, and what comes after it missing
/// ("cannot stat"). ubio copies on workers: the walk waits for the copy in
/// flight that makes what the symlink leads to (by its place, or the
/// directory with copies in flight below it), never reading it half
/// written nor calling it missing (see `in_made_order`).
#[test]
fn a_followed_symlink_to_a_copy_in_flight_as_gnu() {
    let Some((fs, _dir)) = in_made_order("a_followed_symlink_to_a_copy_in_flight_as_gnu", "1g")
    else {
        return;
    };
    // 32 MiB first, so that the walk meets its copy (the build before
    // called the symlink missing, or read the copy half made).
    let big = "head -c 32M /dev/zero | tr '\\0' A";
    let setups = [
        // The symlink after its target, before it, in a subdirectory, a
        // chain, and a chain through a symlink in the destination.
        format!("mkdir s; {big} > s/a; ln -s ../d/a s/l"),
        format!("mkdir s; ln -s ../d/b s/a; {big} > s/b"),
        format!("mkdir -p s/a; {big} > s/a/f; ln -s ../d/a/f s/l"),
        format!("mkdir -p s/a s/b; {big} > s/a/f; ln -s ../../d/a/f s/b/l"),
        format!("mkdir s; {big} > s/a; ln -s ../d/a s/b; ln -s b s/c"),
        format!("mkdir -p s d/s; ln -s a d/s/m; {big} > s/a; ln -s ../d/s/m s/b"),
        // A symlink to a directory that the walk made, its copies in
        // flight, and one to a directory not made yet.
        format!("mkdir -p s/a; {big} > s/a/f; echo g > s/a/g; ln -s ../d/a s/b"),
        format!("mkdir -p s/a/x; {big} > s/a/x/f; ln -s ../d/a s/b"),
        format!("mkdir s; ln -s ../d/b s/a; mkdir s/b; {big} > s/b/f"),
    ];
    let mut cases: Vec<Case> = Vec::new();
    for setup in &setups {
        cases.push((setup, vec!["-rL", "s", "d"], vec![]));
    }
    // The directory's mode and times with -p: set once its copies are in.
    cases.push((&setups[6], vec!["-rLp", "s", "d"], vec![]));
    cases.push((&setups[7], vec!["-rLp", "s", "d"], vec![]));
    // --parents; the symlink on the command line (-H, -L).
    let parents = format!("mkdir s d; {big} > s/a; ln -s ../d/s/a s/l");
    cases.push((&parents, vec!["-rL", "--parents", "s", "d"], vec![]));
    let on_line = format!("mkdir s d; {big} > s/a; ln -s d/s/a l; ln -s d/s m");
    cases.push((&on_line, vec!["-rH", "s", "l", "d"], vec![]));
    cases.push((&on_line, vec!["-rL", "s", "m", "d"], vec![]));
    assert_as_gnu_in(fs.path(), &cases, &[]);
}

/// The same met for certain: the walk stops at -i's question about d/s/b
/// until the copy of s/a has begun, then comes to s/l, which leads to
/// that copy. ubio reads it once it is complete (the build before read it
/// half made: "file changed as we read it", or a short copy).
#[test]
fn a_followed_symlink_reads_a_copy_in_flight_whole() {
    use std::io::{Read, Write};
    let dir = workdir();
    let root = dir.path();
    for d in ["s", "d/s"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let a = common::data(64 << 20, 7);
    std::fs::write(root.join("s/a"), &a).unwrap();
    std::fs::write(root.join("s/b"), b"b\n").unwrap();
    std::os::unix::fs::symlink("../d/s/a", root.join("s/l")).unwrap();
    std::fs::write(root.join("d/s/b"), b"old\n").unwrap();
    let mut child = Command::new(UBIO)
        .args(["cp", "-i", "-rL", "s", "d"])
        .env("LC_ALL", "C")
        .current_dir(root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let mut asked = Vec::new();
    while !asked.ends_with(b"? ") {
        let mut byte = [0u8];
        assert_eq!(err.read(&mut byte).unwrap(), 1, "no question: {asked:?}");
        asked.push(byte[0]);
    }
    assert_eq!(
        String::from_utf8_lossy(&asked),
        "ubio cp: overwrite 'd/s/b'? "
    );
    // The copy of s/a has begun (it is not done: 64 MiB).
    let copy = root.join("d/s/a");
    let start = std::time::Instant::now();
    while copy.metadata().map_or(true, |m| m.len() == 0) {
        assert!(start.elapsed().as_secs() < 60, "d/s/a never began");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"n\n").unwrap();
    drop(stdin);
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!((status.code(), rest.as_str()), (Some(0), ""));
    assert!(
        std::fs::read(root.join("d/s/l")).unwrap() == a,
        "d/s/l is not s/a"
    );
    assert!(std::fs::read(&copy).unwrap() == a, "d/s/a is not s/a");
    assert_eq!(std::fs::read(root.join("d/s/b")).unwrap(), b"old\n");
}

/// A directory copied into itself: GNU's cp makes the copy, copies into it
/// what its walk takes before it meets the copy as a source, then says so
/// and stops (the directories made get their metadata). What comes before
/// depends on the walk's order (see `in_made_order`; the copy is made
/// last).
#[test]
fn a_directory_into_itself_as_gnu() {
    let Some((fs, _dir)) = in_made_order("a_directory_into_itself_as_gnu", "16m") else {
        return;
    };
    let cases: Vec<Case> = vec![
        ("mkdir d; echo f > d/f", vec!["-r", "d", "d/sub"], vec![]),
        ("mkdir d; echo f > d/f", vec!["-rv", "d", "d/sub"], vec![]),
        (
            "mkdir d; echo f > d/f; chmod 750 d",
            vec!["-rp", "d", "d/sub"],
            vec![],
        ),
        // Into an existing d/a: the copy is d/a/d, met below d/a.
        ("mkdir -p d/a; echo z > d/z", vec!["-r", "d", "d/a"], vec![]),
        ("mkdir -p a; echo 1 > a/f", vec!["-r", "a", "a"], vec![]),
    ];
    let known: &[Known] = &[(
        "mkdir -p a; echo 1 > a/f",
        "-r a a",
        "walk order: GNU takes a's names in inode order (f, then the a/a it made), ubio by name (a/a first): GNU copies f into a/a before it stops, ubio nothing",
    )];
    assert_as_gnu_in(fs.path(), &cases, known);
}
