//! `ubio bench ...` and `ubio demo ...` run ubio-bench, found beside `ubio`
//! or on PATH, with the rest of the command line, its exit status and
//! UBIO_EXE naming this `ubio`; without it they say how to get it. A
//! stand-in ubio-bench (a shell script) shows what it was given; the real
//! one, where the workspace built it, answers `ubio bench --help`.

mod common;
use common::*;

use std::path::Path;
use std::process::{Command, Output};

/// A stand-in ubio-bench in `dir` that prints its arguments and UBIO_EXE,
/// and exits 3.
fn stand_in(dir: &Path) {
    let script = dir.join("ubio-bench");
    std::fs::write(
        &script,
        "#!/bin/sh\necho \"args: $*\"\necho \"UBIO_EXE=$UBIO_EXE\"\nexit 3\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn run(ubio: &Path, path: &str, args: &[&str]) -> Output {
    Command::new(ubio)
        .args(args)
        .env("PATH", path)
        .output()
        .unwrap()
}

#[test]
fn bench_and_demo_run_the_ubio_bench_beside() {
    let (dir, ubio) = lone_ubio();
    stand_in(dir.path());
    let me = ubio.canonicalize().unwrap();
    for (args, given) in [
        (
            &["bench", "run", "--modes", "ubio", "-v"][..],
            "run --modes ubio -v",
        ),
        (&["bench", "--help"][..], "--help"),
        (&["bench"][..], ""),
        (
            &["demo", "--copy", "--limit", "1G"][..],
            "demo --copy --limit 1G",
        ),
        (&["demo", "-h"][..], "demo -h"),
    ] {
        let out = run(&ubio, "/usr/bin:/bin", args);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {}", stderr(&out));
        assert!(
            text.contains(&format!("args: {given}\n")),
            "{args:?}: {text}"
        );
        assert!(
            text.contains(&format!("UBIO_EXE={}\n", me.display())),
            "{args:?}: {text}"
        );
    }
}

#[test]
fn bench_runs_the_ubio_bench_on_path() {
    let (dir, ubio) = lone_ubio();
    let elsewhere = workdir();
    stand_in(elsewhere.path());
    let path = format!("/usr/bin:{}:/bin", elsewhere.path().display());
    let out = run(&ubio, &path, &["bench", "compare", "a", "b"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("args: compare a b\n"));
    drop(dir);
}

#[test]
fn without_ubio_bench_bench_and_demo_say_how_to_get_it() {
    let (_dir, ubio) = lone_ubio();
    for args in [&["bench", "run"][..], &["bench", "--help"], &["demo"]] {
        let out = run(&ubio, "/usr/bin:/bin", args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        let first = format!(
            "ubio {}: the benchmark harness is a separate program, ubio-bench",
            args[0]
        );
        for says in [
            first.as_str(),
            "apt install ubio-bench",
            "cargo install --path crates/ubio-bench",
        ] {
            assert!(err.contains(says), "{args:?} must say {says:?}:\n{err}");
        }
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn the_real_ubio_bench_answers_ubio_bench_help() {
    let bench = Path::new(UBIO).with_file_name("ubio-bench");
    if !bench.is_file() {
        skip(
            "the_real_ubio_bench_answers_ubio_bench_help",
            "ubio-bench is not built (cargo build --release -p ubio-bench)",
        );
        return;
    }
    let out = ubio().args(["bench", "--help"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let help = String::from_utf8_lossy(&out.stdout);
    for cmd in ["run", "compare", "report", "suite", "demo"] {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("{cmd} "))),
            "{cmd} in\n{help}"
        );
    }
    assert!(!help.contains("__worker"), "{help}");
}

/// The product carries none of the harness: no worker subcommand, no
/// balloon, none of the test cgroups' teardown (`memory.force_empty`; the
/// engine itself reads memory limits, so their names are no sign).
#[test]
fn ubio_has_no_harness_inside() {
    let out = ubio().args(["__worker", "victim", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let binary = std::fs::read(UBIO).unwrap();
    for word in ["ubio_testenv", "ubio_bench", "memory.force_empty"] {
        assert!(
            !binary.windows(word.len()).any(|w| w == word.as_bytes()),
            "the ubio binary contains {word:?}"
        );
    }
}
