//! The Python package as a Python program sees it: maturin builds the wheel,
//! pip installs it into a temporary directory, and pytest runs
//! tests/test_ubio.py against it. maturin and pytest come from the venv that
//! scripts/install-deps.sh makes (UBIO_PYENV, default ~/.cache/ubio/pyenv).

#[path = "../../crates/ubio-capi/tests/common/mod.rs"]
mod common;

use common::{run, skip, workspace};
use std::path::PathBuf;
use std::process::Command;

fn pyenv() -> PathBuf {
    std::env::var_os("UBIO_PYENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/ubio/pyenv")
        })
}

#[test]
fn pytest_passes_against_the_built_wheel() {
    let test = "pytest";
    let env = pyenv();
    let (python, maturin) = (env.join("bin/python"), env.join("bin/maturin"));
    let ready = Command::new(&python)
        .args(["-c", "import pytest"])
        .status()
        .is_ok_and(|s| s.success())
        && maturin.exists();
    if !ready {
        skip(
            test,
            &format!(
                "no maturin and pytest in {} (scripts/install-deps.sh makes it)",
                env.display()
            ),
        );
        return;
    }
    let Some(data) = common::data_dir(test) else {
        return;
    };
    let tmp = tempfile::Builder::new()
        .prefix("ubio-py-")
        .tempdir()
        .unwrap();
    let wheels = tmp.path().join("wheels");
    run(Command::new(&maturin)
        .args(["build", "--release", "--quiet", "--interpreter"])
        .arg(&python)
        .arg("--manifest-path")
        .arg(workspace().join("python/Cargo.toml"))
        // A target dir of its own: maturin's environment differs from
        // cargo's, and sharing target/release would rebuild pyo3 and the
        // module in both on every run.
        .arg("--target-dir")
        .arg(workspace().join("target/maturin"))
        .arg("--out")
        .arg(&wheels));
    let wheel = std::fs::read_dir(&wheels)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .expect("maturin made no wheel");
    let site = tmp.path().join("site");
    run(Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--target",
        ])
        .arg(&site)
        .arg(&wheel));
    // From the temporary directory, so that `import ubio` finds the
    // installed wheel, not python/ubio without its extension module.
    let out = run(Command::new(&python)
        .current_dir(tmp.path())
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-v", "-s", "-rs"])
        .arg(workspace().join("python/tests"))
        .env("PYTHONPATH", &site)
        .env("UBIO_PY_TEST_DIR", data.path()));
    let summary = out.lines().last().unwrap_or_default();
    assert!(
        summary.contains(" passed") && !summary.contains("failed") && !summary.contains("skipped"),
        "pytest: {summary}"
    );
}
