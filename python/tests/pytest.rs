//! The Python package as a Python program sees it: maturin builds the wheel,
//! pip installs it into a directory of its own, then pytest runs
//! tests/test_ubio.py against it, and CPython's own tests of file objects
//! (tests/cpython_io.py: Lib/test/test_fileio.py and the file-touching
//! classes of test_io.py, of the interpreter that builds the package) run
//! against ubio.FileIO and ubio.open with every backend. maturin and pytest
//! come from the venv that scripts/install-deps.sh makes (UBIO_PYENV,
//! default ~/.cache/ubio/pyenv).

#[path = "../../crates/ubio-capi/tests/common/mod.rs"]
mod common;

use common::{run, skip, workspace};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use ubio_testenv::pyenv;

/// The venv's interpreter, with the wheel installed into `site` (put it on
/// PYTHONPATH).
struct Installed {
    python: PathBuf,
    site: PathBuf,
}

/// Built and installed once for both tests; None after a skip.
fn installed(test: &str) -> Option<&'static Installed> {
    static INSTALLED: OnceLock<Option<Installed>> = OnceLock::new();
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
        return None;
    }
    INSTALLED
        .get_or_init(|| {
            // Under target/, replaced by each run (a TempDir in a static is
            // never dropped).
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ubio-py");
            if dir.exists() {
                std::fs::remove_dir_all(&dir).unwrap();
            }
            let wheels = dir.join("wheels");
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
            let site = dir.join("site");
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
            Some(Installed { python, site })
        })
        .as_ref()
}

#[test]
fn pytest_passes_against_the_built_wheel() {
    let test = "pytest";
    let Some(py) = installed(test) else { return };
    let Some(data) = common::data_dir(test) else {
        return;
    };
    // From the data directory, so that `import ubio` finds the installed
    // wheel, not python/ubio without its extension module.
    let out = run(Command::new(&py.python)
        .current_dir(data.path())
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-v", "-s", "-rs"])
        .arg(workspace().join("python/tests/test_ubio.py"))
        .env("PYTHONPATH", &py.site)
        .env("UBIO_PY_TEST_DIR", data.path()));
    let summary = out.lines().last().unwrap_or_default();
    assert!(
        summary.contains(" passed") && !summary.contains("failed") && !summary.contains("skipped"),
        "pytest: {summary}"
    );
}

/// CPython's Lib/test/test_fileio.py and the file-touching classes of
/// test_io.py, unmodified but for FileIO and open, pass against ubio's with
/// every backend (tests/cpython_io.py lists each skip and expected failure
/// with its reason). Two backends at a time, each in its own directory.
#[test]
fn cpython_file_object_tests_pass_against_ubio() {
    let test = "cpython_file_object_tests";
    let Some(py) = installed(test) else { return };
    let Some(data) = common::data_dir(test) else {
        return;
    };
    let tests = match cpython_tests(&py.python) {
        Ok(t) => t,
        Err(why) => return skip(test, &why),
    };
    let script = workspace().join("python/tests/cpython_io.py");
    // The slowest first (direct: every small unaligned write is a
    // read-modify-write of a block), the others beside it.
    let mut queue = vec!["buffered", "emulated", "auto", "kernel", "direct"];
    let spawn = |backend: &'static str| {
        let dir = data.path().join(backend);
        std::fs::create_dir(&dir).unwrap();
        // Output to a file: a child is never held up by a full pipe.
        let log = data.path().join(format!("{backend}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(&py.python);
        cmd.current_dir(&dir)
            .arg(&script)
            .arg(backend)
            .env("PYTHONPATH", &py.site)
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        if let Some(t) = &tests {
            cmd.env("UBIO_CPYTHON_TESTS", t);
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("{script:?}: {e}"));
        (backend, child, log)
    };
    let mut running = Vec::new();
    let mut failed = Vec::new();
    while !queue.is_empty() || !running.is_empty() {
        // Two at a time: this machine has two cores.
        while running.len() < 2 {
            let Some(backend) = queue.pop() else { break };
            running.push(spawn(backend));
        }
        let done = running
            .iter_mut()
            .position(|(_, child, _)| child.try_wait().unwrap().is_some());
        let Some(i) = done else {
            std::thread::sleep(std::time::Duration::from_millis(100));
            continue;
        };
        let (backend, mut child, log) = running.swap_remove(i);
        let status = child.wait().unwrap();
        let out = std::fs::read_to_string(&log).unwrap();
        print!("{out}");
        let summary = out.lines().last().unwrap_or_default().to_string();
        println!("CPYTHON-RESULT {backend}: {summary}");
        if !status.success() {
            failed.push(format!("{backend}: {summary}"));
        }
    }
    assert!(failed.is_empty(), "CPython's tests failed: {failed:?}");
}

/// Where CPython's tests for `python` are: None when the interpreter ships
/// them (python.org and pyenv builds install Lib/test); for Debian's
/// python3.X, the directory into which Debian's libpython3.X-testsuite of
/// the same upstream version was unpacked (downloaded once with apt-get
/// into ~/.cache/ubio/cpython-tests); Err(why) when neither can be had.
fn cpython_tests(python: &Path) -> Result<Option<PathBuf>, String> {
    let has = |extra: Option<&Path>| {
        let mut cmd = Command::new(python);
        cmd.args(["-c", "from test import test_fileio, test_io"]);
        if let Some(p) = extra {
            cmd.env("UBIO_CPYTHON_TESTS", p).env("PYTHONPATH", p);
        }
        cmd.output().is_ok_and(|o| o.status.success())
    };
    if has(None) {
        return Ok(None);
    }
    let info = Command::new(python)
        .args([
            "-c",
            "import os, sys, platform; print(os.path.realpath(sys._base_executable), platform.python_version(), '%d.%d' % sys.version_info[:2])",
        ])
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    let info = String::from_utf8_lossy(&info.stdout).to_string();
    let [exe, version, short] = info.split_whitespace().collect::<Vec<_>>()[..] else {
        return Err(format!("cannot ask {} its version", python.display()));
    };
    let owned = Command::new("dpkg").args(["-S", exe]).output();
    if !owned.is_ok_and(|o| o.status.success()) {
        return Err(format!(
            "{exe} ({version}) ships no Lib/test and is not Debian's (whose libpython{short}-testsuite has them)"
        ));
    }
    let package = format!("libpython{short}-testsuite");
    let madison = Command::new("apt-cache")
        .args(["madison", &package])
        .output()
        .map_err(|e| format!("apt-cache: {e}"))?;
    // "libpython3.11-testsuite | 3.11.2-6+deb12u9 | http://... Packages"
    let candidate = String::from_utf8_lossy(&madison.stdout)
        .lines()
        .filter_map(|l| l.split('|').nth(1).map(str::trim).map(str::to_string))
        .find(|v| v.split('-').next() == Some(version))
        .ok_or_else(|| format!("no {package} of upstream version {version} (apt-get update?)"))?;
    let cache = PathBuf::from(std::env::var_os("HOME").unwrap())
        .join(".cache/ubio/cpython-tests")
        .join(&candidate);
    let lib = cache.join(format!("usr/lib/python{short}"));
    if !has(Some(&lib)) {
        std::fs::create_dir_all(&cache).unwrap();
        let got = Command::new("apt-get")
            .current_dir(&cache)
            .args(["download", &format!("{package}={candidate}")])
            .status();
        if !got.is_ok_and(|s| s.success()) {
            return Err(format!("apt-get download {package}={candidate} failed"));
        }
        let deb = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "deb"))
            .ok_or("apt-get download left no .deb")?;
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&cache));
        if !has(Some(&lib)) {
            return Err(format!(
                "{} holds no test_fileio and test_io",
                lib.display()
            ));
        }
    }
    Ok(Some(lib))
}
