//! The command's help, and scripts/install.sh: `ubio --help` describes every
//! command and each command's help has examples; the install script puts the
//! binary, the shim, the man pages and the completions under DESTDIR/PREFIX
//! (with --bench ubio-bench and its own), `man -l` renders every page, bash
//! completes `ubio c<TAB>` to cat and cp, the installed `ubio run` finds the
//! installed shim and the installed `ubio bench` the installed ubio-bench.

mod common;
use common::*;

use std::path::Path;
use std::process::Command;

const COMMANDS: [&str; 8] = [
    "probe", "cat", "cp", "stat", "evict", "run", "attach", "policy",
];
/// Commands that run ubio-bench (documented by its own pages).
const HARNESS: [&str; 2] = ["bench", "demo"];

#[test]
fn help_describes_every_command_and_shows_examples() {
    let out = ubio().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let bench_beside = Path::new(UBIO).with_file_name("ubio-bench").is_file();
    if !bench_beside {
        skip(
            "help of ubio bench and ubio demo",
            "ubio-bench is not built (cargo build --release -p ubio-bench)",
        );
    }
    for cmd in COMMANDS.into_iter().chain(HARNESS) {
        let line = help
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{cmd} ")))
            .unwrap_or_else(|| panic!("`ubio --help` does not list {cmd}:\n{help}"));
        let summary = line.trim_start()[cmd.len()..].trim();
        assert!(summary.len() > 10, "{cmd} has no summary: {line:?}");
        let example = if HARNESS.contains(&cmd) {
            if !bench_beside {
                continue;
            }
            "Examples:\n  ubio-bench "
        } else {
            "Examples:\n  ubio "
        };
        let out = ubio().args([cmd, "--help"]).output().unwrap();
        assert!(out.status.success(), "ubio {cmd} --help");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains(example),
            "ubio {cmd} --help has no example:\n{text}"
        );
    }
    assert!(!help.contains("__worker") && !help.contains("__generate-docs"));
}

fn run_bash(script: &str) -> String {
    let out = Command::new("bash").args(["-c", script]).output().unwrap();
    assert!(out.status.success(), "bash: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The words bash's completion offers for the command line `words` (the
/// last one being completed).
fn complete(script: &Path, words: &[&str]) -> Vec<String> {
    let line = words.join(" ");
    let array = words
        .iter()
        .map(|w| format!("'{w}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let cword = words.len() - 1;
    let out = run_bash(&format!(
        "source '{}'; COMP_WORDS=({array}); COMP_CWORD={cword}; COMP_LINE='{line}'; \
         COMP_POINT=${{#COMP_LINE}}; _ubio ubio '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        words[cword],
        words[cword - 1],
    ));
    out.lines().map(str::to_owned).collect()
}

#[test]
fn install_script_installs_binary_shim_man_pages_and_completions() {
    let bin_dir = Path::new(UBIO).parent().unwrap();
    if !bin_dir.join("libubio_preload.so").is_file() || !bin_dir.join("ubio-bench").is_file() {
        skip(
            "install_script",
            "the shim or ubio-bench is not built (cargo build --release -p ubio-preload -p ubio-bench)",
        );
        return;
    }
    let stage = workdir();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/install.sh");
    let out = Command::new(script)
        .args(["--no-build", "--bench"])
        .env("UBIO_BIN_DIR", bin_dir)
        .env("DESTDIR", stage.path())
        .env("PREFIX", "/opt/ubio-test")
        .output()
        .unwrap();
    assert!(out.status.success(), "install.sh failed: {}", stderr(&out));
    let root = stage.path().join("opt/ubio-test");

    // The binary, and `ubio run` finding the shim in ../lib.
    let ubio = root.join("bin/ubio");
    let out = Command::new(&ubio)
        .args(["run", "--", "sh", "-c", "echo \"$LD_PRELOAD\""])
        .output()
        .unwrap();
    assert!(out.status.success(), "installed ubio run: {}", stderr(&out));
    let shim = root.join("lib/libubio_preload.so").canonicalize().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        shim.to_str().unwrap(),
        "ubio run did not preload the installed shim"
    );
    // `ubio bench` runs the ubio-bench installed beside it.
    let out = Command::new(&ubio)
        .args(["bench", "--version"])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "installed ubio bench: {}",
        stderr(&out)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("ubio-bench "));

    // Man pages: one per command, each rendered by man(1).
    let man1 = root.join("share/man/man1");
    let mut pages: Vec<String> = std::fs::read_dir(&man1)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    pages.sort();
    for cmd in COMMANDS {
        assert!(
            pages.contains(&format!("ubio-{cmd}.1")),
            "no man page for {cmd}: {pages:?}"
        );
    }
    // The harness's pages are ubio-bench's own, not stubs of ubio's.
    for page in [
        "ubio.1",
        "ubio-bench.1",
        "ubio-bench-run.1",
        "ubio-bench-demo.1",
    ] {
        assert!(pages.iter().any(|p| p == page), "no {page}: {pages:?}");
    }
    assert!(!pages.iter().any(|p| p == "ubio-demo.1"), "{pages:?}");
    if Command::new("man").arg("--version").output().is_err() {
        skip("install_script man -l", "man is not installed (man-db)");
    } else {
        for page in &pages {
            let out = Command::new("man")
                .arg("-l")
                .arg(man1.join(page))
                .env("MANPAGER", "cat")
                .env("MANWIDTH", "100")
                .output()
                .unwrap();
            // Words only: man justifies lines with extra spaces.
            let text = String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            assert!(out.status.success(), "man -l {page}: {}", stderr(&out));
            assert!(
                out.stderr.is_empty(),
                "man -l {page} warns: {}",
                stderr(&out)
            );
            let name = page.trim_end_matches(".1");
            assert!(
                text.contains("NAME") && text.contains(&format!("{name} - ")),
                "man -l {page}:\n{text}"
            );
            if page == "ubio-cp.1" {
                for want in [
                    "--backup",
                    "--parents",
                    "--preserve",
                    "--one-file-system",
                    "EXAMPLES",
                ] {
                    assert!(text.contains(want), "ubio-cp(1) lacks {want}:\n{text}");
                }
            }
        }
    }

    // Completions: bash completes commands and cp's options.
    let bash = root.join("share/bash-completion/completions/ubio");
    let registered = run_bash(&format!("source '{}'; complete -p ubio", bash.display()));
    assert!(registered.contains("-F _ubio ubio"), "{registered}");
    assert_eq!(complete(&bash, &["ubio", "c"]), ["cat", "cp"]);
    assert_eq!(complete(&bash, &["ubio", "cp", "--pa"]), ["--parents"]);
    assert_eq!(complete(&bash, &["ubio", "ev"]), ["evict"]);
    let bench_bash = root.join("share/bash-completion/completions/ubio-bench");
    assert!(run_bash(&format!(
        "source '{}'; complete -p ubio-bench",
        bench_bash.display()
    ))
    .contains("ubio-bench"));
    let zsh = std::fs::read_to_string(root.join("share/zsh/site-functions/_ubio")).unwrap();
    assert!(zsh.starts_with("#compdef ubio") && zsh.contains("--parents"));
    let fish =
        std::fs::read_to_string(root.join("share/fish/vendor_completions.d/ubio.fish")).unwrap();
    assert!(fish.contains("complete -c ubio") && fish.contains("parents"));

    // The policy daemon's unit runs the installed binary, hardened; the
    // example configuration passes the daemon's own check.
    let unit = root.join("lib/systemd/system/ubio-policy.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    for want in [
        "ExecStart=/opt/ubio-test/bin/ubio policy run --config /etc/ubio/policy.toml",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "CapabilityBoundingSet=CAP_SYS_ADMIN CAP_SYS_PTRACE CAP_DAC_READ_SEARCH CAP_FOWNER",
    ] {
        assert!(text.contains(want), "the unit lacks {want}:\n{text}");
    }
    assert!(!text.contains("@BINDIR@"));
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        skip(
            "install_script systemd-analyze verify",
            "systemd-analyze is not installed",
        );
    } else {
        // Verified where the binary really is (the staged copy).
        let staged = stage.path().join("ubio-policy.service");
        let bin = root.join("bin").display().to_string();
        std::fs::write(&staged, text.replace("/opt/ubio-test/bin", &bin)).unwrap();
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&staged)
            .output()
            .unwrap();
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "systemd-analyze verify: {}",
            stderr(&out)
        );
    }
    let example = root.join("share/doc/ubio/policy.toml.example");
    let out = Command::new(&ubio)
        .args(["policy", "check"])
        .arg(&example)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ubio policy check {}: {}",
        example.display(),
        stderr(&out)
    );
}

/// `cargo install` installs the binary alone: `ubio run` then loads the
/// shim the binary carries, written once to the user's cache, and it
/// manages the program's files (its log line, and the file left uncached).
#[test]
fn a_lone_ubio_runs_the_shim_it_carries() {
    let (dir, ubio) = lone_ubio();
    let home = dir.path().join("home");
    let cache = home.join(".cache/ubio");
    let preload = |args: &[&str]| {
        let out = Command::new(&ubio)
            .args(["run", "--"])
            .args(args)
            .env("HOME", &home)
            .env_remove("XDG_CACHE_HOME")
            .env_remove("UBIO_PRELOAD")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        out
    };
    let out = preload(&["sh", "-c", "echo \"$LD_PRELOAD\""]);
    let shim = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert_eq!(shim.parent(), Some(cache.as_path()), "{}", shim.display());
    let carried = std::fs::read(&shim).unwrap();
    assert!(carried.starts_with(b"\x7fELF"), "not a shared object");
    // Written once: a second run finds the same file.
    preload(&["true"]);
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1);

    let cold = dir.path().join("cold");
    write_cold(&cold, &data(64 << 20, 7));
    let out = Command::new(&ubio)
        .args(["run", "--log", "--", "cat"])
        .arg(&cold)
        .env("HOME", &home)
        .env_remove("UBIO_PRELOAD")
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("ubio-preload[") && l.contains("/cold: backend")),
        "no shim log line for the file:\n{err}"
    );
    let left = count(&cold).cached * ubio::sys::page_size();
    assert!(left < 8 << 20, "{left} bytes of 64 MiB left cached:\n{err}");
}
