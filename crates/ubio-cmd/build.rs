//! The version the programs print: the crate's, with the source tree's `git
//! describe` beside it ("0.1.0 (git v0.1.0-12-g7dd5c53)"). A build from a
//! tarball (a Debian source package) has no .git: the packaging script passes
//! the description in UBIO_GIT_DESCRIBE. The description is taken when this
//! script runs: after a commit, a checkout or a change to git's index.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=UBIO_GIT_DESCRIBE");
    let given = std::env::var("UBIO_GIT_DESCRIBE")
        .ok()
        .filter(|d| !d.trim().is_empty());
    let describe = given.or_else(git_describe).unwrap_or_default();
    let version = std::env::var("CARGO_PKG_VERSION").expect("cargo sets it");
    let long = if describe.is_empty() {
        version
    } else {
        format!("{version} (git {describe})")
    };
    println!("cargo:rustc-env=UBIO_GIT_DESCRIBE_BUILD={describe}");
    println!("cargo:rustc-env=UBIO_VERSION_LONG={long}");
}

fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

fn git_describe() -> Option<String> {
    let describe = git(&[
        "describe", "--tags", "--always", "--dirty", "--match", "v[0-9]*",
    ])?;
    // Run again when HEAD moves (a commit, a checkout): HEAD, the branch it
    // names, packed refs; in a worktree HEAD is the worktree's own. Not the
    // index: `git describe --dirty` rewrites it when its stat data is stale
    // (always in a fresh clone), which made the next cargo command rebuild
    // ubio-cmd and every binary above it (80 s of CI); staging changes
    // nothing `--dirty` reports.
    let (git_dir, common) = (
        git(&["rev-parse", "--absolute-git-dir"])?,
        git(&["rev-parse", "--git-common-dir"])?,
    );
    let common = Path::new(&git_dir).join(common);
    let mut watch = vec![
        Path::new(&git_dir).join("HEAD"),
        common.join("packed-refs"),
    ];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(common.join(branch));
    }
    for p in watch {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    Some(describe)
}
