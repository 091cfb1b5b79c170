//! Where `ubio run` finds libubio_preload.so, the LD_PRELOAD shim, as an
//! absolute path (children in other directories load it too), first found
//! first:
//!
//! 1. UBIO_PRELOAD, if set;
//! 2. beside the binary (a build tree: target/<profile>/);
//! 3. ../lib/ubio/ and ../lib/ from the binary (an install prefix:
//!    scripts/install.sh puts it in PREFIX/lib);
//! 4. the directory compiled in with UBIO_SHIM_DIR (the Debian package:
//!    /usr/lib/<triplet>/ubio);
//! 5. the copy the binary carries (see build.rs), written once to the
//!    user's cache, `${XDG_CACHE_HOME:-~/.cache}/ubio/`, under a name that
//!    holds its hash: what `cargo install` gives, which installs binaries
//!    only.
//!
//! Installed files come first, so a package's shim is used over a stale
//! carried copy, and a build tree's over both.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

pub const LIB: &str = "libubio_preload.so";

/// The shim to preload.
pub fn find() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("UBIO_PRELOAD").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        return std::fs::canonicalize(&p)
            .with_context(|| format!("UBIO_PRELOAD={}: no such shim library", p.display()));
    }
    let exe = std::env::current_exe().context("cannot find the ubio binary's directory")?;
    let dir = exe.parent().context("the ubio binary has no directory")?;
    let mut places = vec![dir.to_owned(), dir.join("../lib/ubio"), dir.join("../lib")];
    places.extend(option_env!("UBIO_SHIM_DIR").map(PathBuf::from));
    if let Some(found) = places.iter().map(|d| d.join(LIB)).find(|c| c.is_file()) {
        return Ok(std::fs::canonicalize(&found)?);
    }
    carried(&exe, &places)
}

#[cfg(ubio_carries_shim)]
fn carried(_exe: &Path, _places: &[PathBuf]) -> Result<PathBuf> {
    static SHIM: &[u8] = include_bytes!(env!("UBIO_CARRIED_SHIM"));
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
        .context("no HOME or XDG_CACHE_HOME to write the shim this binary carries to (or set UBIO_PRELOAD)")?
        .join("ubio");
    write_once(&cache, SHIM)
}

#[cfg(not(ubio_carries_shim))]
fn carried(exe: &Path, places: &[PathBuf]) -> Result<PathBuf> {
    let looked: Vec<String> = places.iter().map(|p| p.display().to_string()).collect();
    anyhow::bail!(
        "{LIB} not found (looked in {}; this ubio carries no copy): reinstall the package that \
         installed {}, or set UBIO_PRELOAD",
        looked.join(", "),
        exe.display()
    )
}

/// `bytes` as `dir/libubio_preload-HASH.so`, written (whole, then renamed
/// into place) only if no such file holds them already.
#[cfg_attr(not(ubio_carries_shim), allow(dead_code))]
fn write_once(dir: &Path, bytes: &[u8]) -> Result<PathBuf> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    let path = dir.join(format!("libubio_preload-{:016x}.so", h.finish()));
    if std::fs::read(&path).is_ok_and(|have| have == bytes) {
        return Ok(path);
    }
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let tmp = dir.join(format!(".{LIB}.{}", std::process::id()));
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
        .with_context(|| format!("write the shim this binary carries to {}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_once_and_rewrites_what_differs() {
        let dir = tempfile::tempdir().unwrap();
        let a = write_once(dir.path(), b"shim one").unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), b"shim one");
        let mtime = std::fs::metadata(&a).unwrap().modified().unwrap();
        assert_eq!(write_once(dir.path(), b"shim one").unwrap(), a);
        assert_eq!(std::fs::metadata(&a).unwrap().modified().unwrap(), mtime);
        // A damaged copy is replaced; another shim gets another name.
        std::fs::write(&a, b"shim 0ne").unwrap();
        assert_eq!(write_once(dir.path(), b"shim one").unwrap(), a);
        assert_eq!(std::fs::read(&a).unwrap(), b"shim one");
        assert_ne!(write_once(dir.path(), b"shim two").unwrap(), a);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
