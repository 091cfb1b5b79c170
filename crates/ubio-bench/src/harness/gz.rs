//! Results kept gzipped: the runs committed under bench/runs keep their
//! JSON as `report.json.gz`, `matrix.json.gz` (and the scripts' `*.jsonl.gz`)
//! while a matrix's points still name `points/<id>/report.json`. Every
//! result the harness reads by path goes through [`read_to_string`]: a name
//! ending in `.gz` is decompressed, and a missing file is looked for with
//! `.gz` added. Every file it writes goes through [`write_target`] and
//! [`encode`] (in `export::write_atomically`): a file rewritten beside its
//! `.gz` (a committed matrix continued, a report rendered again in its own
//! directory) is written gzipped to that `.gz`, never as a second,
//! uncompressed copy.

use crate::path_context;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::borrow::Cow;
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// `path` with `.gz` added to its name.
pub fn gz_path(path: &Path) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(".gz");
    PathBuf::from(name)
}

fn is_gz(path: &Path) -> bool {
    path.extension() == Some(std::ffi::OsStr::new("gz"))
}

/// `path` where it exists, else `path.gz` where that exists.
pub fn existing(path: &Path) -> Option<PathBuf> {
    if path.exists() {
        return Some(path.to_owned());
    }
    let gz = gz_path(path);
    (!is_gz(path) && gz.exists()).then_some(gz)
}

/// Whether `path`'s file name is `name` or `name.gz`.
pub fn is_named(path: &Path, name: &str) -> bool {
    path.file_name().is_some_and(|f| {
        let f = f.to_string_lossy();
        f == name || f.strip_suffix(".gz") == Some(name)
    })
}

/// The text of `path`, or of `path.gz` when `path` is missing; a `.gz` is
/// decompressed. The error names the file (NotFound: `path` as asked).
pub fn read_to_string(path: &Path) -> io::Result<String> {
    let Some(found) = existing(path) else {
        return Err(path_context(
            io::Error::from(io::ErrorKind::NotFound),
            "read",
            path,
        ));
    };
    let bytes = std::fs::read(&found).map_err(|e| path_context(e, "read", &found))?;
    if !is_gz(&found) {
        return String::from_utf8(bytes).map_err(|e| {
            path_context(
                io::Error::new(io::ErrorKind::InvalidData, e),
                "read",
                &found,
            )
        });
    }
    let mut text = String::new();
    GzDecoder::new(&bytes[..])
        .read_to_string(&mut text)
        .map_err(|e| path_context(e, "decompress", &found))?;
    Ok(text)
}

/// Where a write of `path` goes: `path.gz` when only that exists (or
/// `path` itself ends in `.gz`), else `path`.
pub fn write_target(path: &Path) -> PathBuf {
    let gz = gz_path(path);
    if !is_gz(path) && !path.exists() && gz.exists() {
        gz
    } else {
        path.to_owned()
    }
}

/// `bytes` as they are written to `path`: gzipped when its name ends in `.gz`.
pub fn encode<'a>(path: &Path, bytes: &'a [u8]) -> io::Result<Cow<'a, [u8]>> {
    if !is_gz(path) {
        return Ok(Cow::Borrowed(bytes));
    }
    let mut e = GzEncoder::new(Vec::new(), Compression::best());
    e.write_all(bytes)?;
    Ok(Cow::Owned(e.finish()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_read_from_its_gz_and_rewritten_there() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("report.json");
        let gz = gz_path(&plain);
        std::fs::write(&gz, encode(&gz, b"{\"a\": 1}\n").unwrap()).unwrap();
        assert_ne!(
            std::fs::read(&gz).unwrap(),
            b"{\"a\": 1}\n",
            "stored compressed"
        );
        assert_eq!(read_to_string(&plain).unwrap(), "{\"a\": 1}\n");
        assert_eq!(read_to_string(&gz).unwrap(), "{\"a\": 1}\n");
        assert_eq!(existing(&plain), Some(gz.clone()));
        assert_eq!(write_target(&plain), gz);
        assert!(is_named(&gz, "report.json") && is_named(&plain, "report.json"));
        assert!(!is_named(&plain, "matrix.json"));
        // Once the plain file exists, it is the one read and written.
        std::fs::write(&plain, "plain").unwrap();
        assert_eq!(read_to_string(&plain).unwrap(), "plain");
        assert_eq!(write_target(&plain), plain);
        let missing = dir.path().join("none.json");
        let e = read_to_string(&missing).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("none.json"), "{e}");
    }
}
