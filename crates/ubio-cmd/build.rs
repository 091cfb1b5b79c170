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
    // Run again when HEAD moves (a commit, a checkout): the worktree's HEAD,
    // the branches (a directory: cargo looks at every file in it, so a
    // branch packed now and loose after a commit is seen too), the packed
    // refs where there are any. Paths that exist only: cargo runs the
    // script again on every command for one that does not, and rebuilds
    // every binary above this crate (a relative --git-common-dir joined to
    // the git directory did that: 80 s of every CI run). Not the index:
    // `git describe --dirty` rewrites it in a fresh clone, and staging
    // changes nothing that `--dirty` reports.
    let git_dir = git(&["rev-parse", "--absolute-git-dir"])?;
    let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"])?;
    let common = Path::new(&common);
    let watch = [
        Path::new(&git_dir).join("HEAD"),
        common.join("refs/heads"),
        common.join("packed-refs"),
    ];
    for p in watch.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    Some(describe)
}
