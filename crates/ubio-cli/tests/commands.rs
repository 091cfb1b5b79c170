//! `ubio probe`, `ubio cat` and `ubio cp` as a user runs them.

mod common;
use common::*;

use std::path::PathBuf;

const MIB: usize = 1 << 20;

#[test]
fn probe_json_reports_the_choice() {
    let dir = workdir();
    let out = ubio()
        .args(["probe", "--json"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in ["kernel", "fs", "cachestat", "auto", "auto_reason"] {
        assert!(v.get(key).is_some(), "probe --json lacks {key}: {v}");
    }
    assert!(v["fs"]["dontcache"]["available"].is_boolean());
    let text = ubio().arg("probe").arg(dir.path()).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("auto backend:") && text.contains("RWF_DONTCACHE:"),
        "{text}"
    );
    // The note on large readahead where, and only where, the device's
    // readahead reaches 2 MiB (this VM's disk: 8 MiB; tmpfs: none).
    let noted = |v: &serde_json::Value, text: &str| {
        let large = v["fs"]["read_ahead_kb"]
            .as_u64()
            .is_some_and(|kb| kb >= 2048);
        assert_eq!(text.contains("asks for 2 MiB folios"), large, "{text}");
    };
    noted(&v, &text);
    let shm = ubio()
        .args(["probe", "--json", "/dev/shm"])
        .output()
        .unwrap();
    let shm_text = ubio().args(["probe", "/dev/shm"]).output().unwrap();
    noted(
        &serde_json::from_slice(&shm.stdout).unwrap(),
        &String::from_utf8_lossy(&shm_text.stdout),
    );
}

#[test]
fn probe_of_a_missing_path_names_it() {
    let out = ubio()
        .args(["probe", "/nonexistent/ubio"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ubio probe: cannot probe '/nonexistent/ubio': No such file or directory"),
        "{err}"
    );
}

#[test]
fn cat_concatenates_and_leaves_no_cache() {
    let dir = workdir();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let (da, db) = (data(3 * MIB + 17, 1), data(MIB + 5, 2));
    write_cold(&a, &da);
    write_cold(&b, &db);
    let out = ubio().arg("cat").arg(&a).arg(&b).output().unwrap();
    assert!(out.status.success());
    assert!(out.stdout == [da, db].concat(), "cat output differs");
    assert_eq!(count(&a).cached, 0, "cat left the file cached");
}

#[test]
fn cat_reports_a_missing_file_and_goes_on() {
    let dir = workdir();
    let a = dir.path().join("a");
    write_cold(&a, b"hello\n");
    let out = ubio()
        .arg("cat")
        .arg("/nonexistent/x")
        .arg(&a)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(out.stdout, b"hello\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ubio cat: /nonexistent/x: No such file or directory"),
        "{err}"
    );
}

#[test]
fn cat_into_a_closed_pipe_exits_zero() {
    let dir = workdir();
    let big = dir.path().join("big");
    write_cold(&big, &data(64 * MIB, 3));
    let (_, out) = head_then_close(ubio().arg("cat").arg(&big), 10);
    assert_quiet_success(&out);
}

#[test]
fn cp_copies_exactly_and_caches_neither_file() {
    let dir = workdir();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    let bytes = data(40 * MIB + 123, 4);
    write_cold(&src, &bytes);
    std::fs::set_permissions(&src, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    let out = ubio()
        .arg("cp")
        .arg("--json")
        .arg(&src)
        .arg(&dst)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["bytes"], bytes.len() as u64);
    assert_eq!(count(&src).cached, 0, "source left cached");
    assert_eq!(count(&dst).cached, 0, "destination left cached");
    assert!(std::fs::read(&dst).unwrap() == bytes, "copy differs");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&dst).unwrap().permissions().mode() & 0o777,
        0o640
    );
}

#[test]
fn cp_into_a_directory_uses_the_source_name() {
    let dir = workdir();
    let src = dir.path().join("name");
    write_cold(&src, b"x");
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    assert!(ubio()
        .arg("cp")
        .arg(&src)
        .arg(&sub)
        .status()
        .unwrap()
        .success());
    assert_eq!(std::fs::read(sub.join("name")).unwrap(), b"x");
}

#[test]
fn cp_refuses_to_copy_a_file_onto_itself() {
    let dir = workdir();
    let src = dir.path().join("same");
    write_cold(&src, b"keep me");
    let out = ubio().arg("cp").arg(&src).arg(&src).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("are the same file"));
    assert_eq!(std::fs::read(&src).unwrap(), b"keep me", "source damaged");
}

#[test]
fn cp_of_a_missing_source_names_it() {
    let dir = workdir();
    let out = ubio()
        .arg("cp")
        .arg(dir.path().join("nope"))
        .arg(dir.path().join("d"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "ubio cp: cannot stat '{}': No such file or directory",
            dir.path().join("nope").display()
        )),
        "{err}"
    );
    assert!(!dir.path().join("d").exists(), "a destination was created");
}

/// A copy onto a full filesystem fails, names the destination as incomplete,
/// and leaves the source intact.
#[test]
fn cp_onto_a_full_filesystem_reports_an_incomplete_destination() {
    if !root_or_skip("cp_onto_a_full_filesystem") {
        return;
    }
    let small = ubio_testenv::scratchfs::ScratchFs::create(
        ubio_testenv::scratchfs::FsKind::Ext4,
        32 << 20,
        &Default::default(),
    )
    .unwrap();
    let dir = workdir();
    let src = dir.path().join("big");
    let bytes = data(64 * MIB, 5);
    write_cold(&src, &bytes);
    let dst: PathBuf = small.mount_point().join("copy");
    let out = ubio().arg("cp").arg(&src).arg(&dst).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("No space left on device"), "{err}");
    assert!(
        err.contains(&format!("{} is incomplete", dst.display())),
        "{err}"
    );
    assert!(std::fs::read(&src).unwrap() == bytes, "source changed");
}

#[test]
fn probe_into_a_closed_pipe_exits_zero() {
    for json in [false, true] {
        let (_, out) = head_then_close(ubio().arg("probe").args(json.then_some("--json")), 0);
        assert_quiet_success(&out);
    }
}

/// `ubio cat` says what GNU cat says (with `ubio cat: ` for `cat: `) and
/// exits as it does: a missing file, a directory, a bad option.
#[test]
fn cat_messages_and_status_as_gnu_cat() {
    let dir = workdir();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    std::fs::write(dir.path().join("f"), b"f\n").unwrap();
    for args in [&["nope", "f"][..], &["d"], &["f", "d", "nope"], &["f"]] {
        let run = |cmd: &mut std::process::Command| {
            let out = cmd.args(args).current_dir(dir.path()).output().unwrap();
            let err = stderr(&out).replace("ubio cat: ", "cat: ");
            (out.status.code(), out.stdout, err)
        };
        let gnu = run(&mut std::process::Command::new("cat"));
        let ours = run(ubio().arg("cat"));
        assert_eq!(ours, gnu, "cat {args:?}");
    }
    let out = ubio().args(["cat", "--bogus", "f"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "a bad option: GNU cat's status");
}

/// ubio is cp only under the names `cp` and `ubio-cp` (a symlink or a copy
/// by that name on a PATH); renamed any other way it is ubio, so that
/// `ubio-after evict f` evicts f instead of copying a file named `evict`.
#[test]
fn only_the_names_cp_and_ubio_cp_are_cp() {
    let dir = workdir();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, b"data\n").unwrap();
    let run = |name: &str, args: &[&str]| {
        let exe = bin.join(name);
        if !exe.exists() {
            // A copy (a hard link where it can be), as a rename leaves it.
            if std::fs::hard_link(UBIO, &exe).is_err() {
                std::fs::copy(UBIO, &exe).unwrap();
            }
        }
        std::process::Command::new(&exe)
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    for name in ["cp", "ubio-cp"] {
        let out = run(name, &["f", name]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        assert_eq!(std::fs::read(dir.path().join(name)).unwrap(), b"data\n");
        // GNU's form ("cp (GNU coreutils) 9.1"), saying whose cp it is.
        let version = String::from_utf8_lossy(&run(name, &["--version"]).stdout).into_owned();
        assert!(
            version.starts_with("cp (ubio) 0."),
            "{name} --version: {version}"
        );
    }
    let version = String::from_utf8_lossy(&run("ubio", &["cp", "--version"]).stdout).into_owned();
    assert!(
        version.starts_with("cp (ubio) 0."),
        "ubio cp --version: {version}"
    );
    for name in [
        "ubio",
        "ubio-after",
        "ubio.old",
        "cp.old",
        "ubio-cp2",
        "xcp",
    ] {
        let out = run(name, &["evict", "f"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name} evict f: {}",
            stderr(&out)
        );
        assert!(!dir.path().join("evict").exists(), "{name} evict f copied");
        let out = run(name, &["f", "g"]);
        assert_eq!(out.status.code(), Some(2), "{name} f g");
        assert!(
            stderr(&out).contains("unrecognized subcommand 'f'"),
            "{name}: {}",
            stderr(&out)
        );
        assert!(!dir.path().join("g").exists(), "{name} f g copied");
        let version = String::from_utf8_lossy(&run(name, &["--version"]).stdout).into_owned();
        assert!(
            version.starts_with("ubio 0."),
            "{name} --version: {version}"
        );
    }
    assert_eq!(std::fs::read(&f).unwrap(), b"data\n");
}
