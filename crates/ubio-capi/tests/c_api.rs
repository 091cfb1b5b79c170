//! The C API as a C program sees it: `make install` into a temporary prefix,
//! tests/c/test_ubio.c compiled with cc against the installed header and
//! library through pkg-config, one run per case; the example linked both
//! ways; and a DESTDIR install.

mod common;

use common::{have, profile_dir, run, skip};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

struct Installed {
    prefix: PathBuf,
    test_bin: PathBuf,
}

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn make_install(prefix: &Path, destdir: Option<&Path>) {
    let mut cmd = Command::new("make");
    cmd.arg("-s")
        .arg("-C")
        .arg(crate_dir())
        .arg("install")
        .arg(format!("PREFIX={}", prefix.display()))
        .arg(format!(
            "TARGET_DIR={}",
            profile_dir().parent().unwrap().display()
        ));
    if let Some(d) = destdir {
        cmd.arg(format!("DESTDIR={}", d.display()));
    }
    run(&mut cmd);
}

fn pkg_config(prefix: &Path, args: &[&str]) -> Vec<String> {
    let out = run(Command::new("pkg-config")
        .args(args)
        .arg("ubio")
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")));
    out.split_whitespace().map(str::to_string).collect()
}

/// Installed once for all cases; None when a tool is missing (skipped).
fn installed(test: &str) -> Option<&'static Installed> {
    static INSTALLED: OnceLock<Option<Installed>> = OnceLock::new();
    if !["make", "cc", "pkg-config"].iter().all(|p| have(test, p)) {
        return None;
    }
    INSTALLED
        .get_or_init(|| {
            // Under target/, replaced by each run: a TempDir held in a static
            // is never dropped, so it left a 35 MB install in /tmp per run.
            let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("ubio-capi-install");
            if dir.exists() {
                std::fs::remove_dir_all(&dir).unwrap();
            }
            std::fs::create_dir_all(&dir).unwrap();
            let prefix = dir.join("prefix");
            make_install(&prefix, None);
            let test_bin = dir.join("test_ubio");
            run(Command::new("cc")
                .args(["-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o"])
                .arg(&test_bin)
                .arg(crate_dir().join("tests/c/test_ubio.c"))
                .args(pkg_config(&prefix, &["--cflags", "--libs"])));
            Some(Installed { prefix, test_bin })
        })
        .as_ref()
}

fn c_case(name: &str) {
    let test = format!("c_api::{name}");
    let Some(inst) = installed(&test) else { return };
    let Some(dir) = common::data_dir(&test) else {
        return;
    };
    let out = run(Command::new(&inst.test_bin)
        .arg(name)
        .arg(dir.path())
        .env("LD_LIBRARY_PATH", inst.prefix.join("lib")));
    assert!(out.contains(&format!("ok {name}")), "{name}: no 'ok' line");
}

#[test]
fn residency_contract_of_a_write_and_a_cold_read() {
    c_case("contract");
}

#[test]
fn errors_set_errno_and_a_message_naming_the_file() {
    c_case("errors");
}

#[test]
fn threads_share_a_handle() {
    c_case("threads");
}

#[test]
fn a_wrapped_descriptor_stays_the_callers() {
    c_case("wrap_fd");
}

#[test]
fn vectored_io_copy_and_probe() {
    c_case("vectored_copy_probe");
}

#[test]
fn a_wrapped_descriptor_keeps_posix_offsets() {
    c_case("descriptor_offset");
}

#[test]
fn one_long_call_keeps_the_contract() {
    c_case("long_calls");
}

/// The example builds against the installed library, shared and static
/// (pkg-config --static's Libs.private), and sums a file as read(2) does.
#[test]
fn example_links_shared_and_static_and_matches_plain_read() {
    let test = "c_api::example";
    let Some(inst) = installed(test) else { return };
    let Some(dir) = common::data_dir(test) else {
        return;
    };
    let example = crate_dir().join("examples/ubio-sum.c");
    let shared = dir.path().join("ubio-sum");
    run(Command::new("cc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&shared)
        .arg(&example)
        .args(pkg_config(&inst.prefix, &["--cflags", "--libs"])));
    let static_bin = dir.path().join("ubio-sum-static");
    let libs: Vec<String> = pkg_config(&inst.prefix, &["--static", "--libs"])
        .into_iter()
        .filter(|l| l != "-lubio")
        .collect();
    run(Command::new("cc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&static_bin)
        .arg(&example)
        .args(pkg_config(&inst.prefix, &["--cflags"]))
        .arg(inst.prefix.join("lib/libubio.a"))
        .args(libs));
    let data = dir.path().join("data");
    let bytes: Vec<u8> = (0..3u32 << 20).map(|i| (i * 7 + i / 4096) as u8).collect();
    std::fs::write(&data, &bytes).unwrap();
    let lib = inst.prefix.join("lib");
    let plain = run(Command::new(&shared)
        .arg("--plain")
        .arg(&data)
        .env("LD_LIBRARY_PATH", &lib));
    let via_shared = run(Command::new(&shared)
        .arg(&data)
        .env("LD_LIBRARY_PATH", &lib));
    let via_static = run(Command::new(&static_bin).arg(&data));
    assert!(
        plain.starts_with(&format!("{} bytes", bytes.len())),
        "{plain}"
    );
    assert_eq!(via_shared, plain);
    assert_eq!(via_static, plain);
    // The shared one really loads the installed libubio.so.0.
    let ldd = run(Command::new("ldd")
        .arg(&shared)
        .env("LD_LIBRARY_PATH", &lib));
    assert!(
        ldd.contains(&format!("libubio.so.0 => {}", lib.display())),
        "{ldd}"
    );
}

/// DESTDIR stages the files under the prefix; ubio.pc names the real prefix.
#[test]
fn make_install_honours_destdir() {
    let test = "c_api::destdir";
    if !have(test, "make") {
        return;
    }
    if !profile_dir().join("libubio_capi.so").exists() {
        skip(test, "libubio_capi.so not built");
        return;
    }
    let stage = tempfile::Builder::new()
        .prefix("ubio-capi-stage-")
        .tempdir()
        .unwrap();
    make_install(Path::new("/opt/ubio"), Some(stage.path()));
    let root = stage.path().join("opt/ubio");
    for f in [
        "lib/libubio.so",
        "lib/libubio.so.0",
        "lib/libubio.a",
        "include/ubio.h",
        "lib/pkgconfig/ubio.pc",
    ] {
        assert!(root.join(f).exists(), "{f} not installed under DESTDIR");
    }
    assert_eq!(
        std::fs::read_link(root.join("lib/libubio.so")).unwrap(),
        Path::new("libubio.so.0")
    );
    let pc = std::fs::read_to_string(root.join("lib/pkgconfig/ubio.pc")).unwrap();
    assert!(
        pc.contains("prefix=/opt/ubio\n") && pc.contains("Libs: -L${libdir} -lubio"),
        "{pc}"
    );
    assert!(
        !pc.contains('@'),
        "unsubstituted placeholder in ubio.pc:\n{pc}"
    );
}
