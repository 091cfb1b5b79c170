//! GNU's backups (--backup=CONTROL, -b, -S SUFFIX): an existing destination
//! is renamed out of the way before it is replaced.

use super::try_help;
use anyhow::{bail, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    None,
    /// NAME~ (or NAME + --suffix).
    Simple,
    /// NAME.~N~, one more than the highest N there.
    Numbered,
    /// Numbered if a numbered backup exists, else simple.
    Existing,
}

#[derive(Debug, Clone)]
pub struct Backup {
    control: Control,
    suffix: OsString,
}

impl Backup {
    pub fn none() -> Backup {
        Backup {
            control: Control::None,
            suffix: "~".into(),
        }
    }

    /// --backup=CONTROL (None: -b, --backup or -S alone: $VERSION_CONTROL,
    /// else existing) with -S SUFFIX (else $SIMPLE_BACKUP_SUFFIX, else ~).
    pub fn new(control: Option<&str>, suffix: Option<OsString>) -> Result<Backup> {
        let env = std::env::var("VERSION_CONTROL")
            .ok()
            .filter(|v| !v.is_empty());
        let (word, from) = match control {
            Some(c) => (c.to_owned(), "backup type"),
            None => (env.unwrap_or_else(|| "existing".into()), "$VERSION_CONTROL"),
        };
        let words = [
            "none", "off", "simple", "never", "existing", "nil", "numbered", "t",
        ];
        let control = match super::words::spell_out(&word, &words) {
            "none" | "off" => Control::None,
            "simple" | "never" => Control::Simple,
            "numbered" | "t" => Control::Numbered,
            "existing" | "nil" => Control::Existing,
            _ => bail!(
                "invalid argument '{word}' for '{from}'\nValid arguments are:\n  - 'none', 'off'\n  - 'simple', 'never'\n  - 'existing', 'nil'\n  - 'numbered', 't'\n{}",
                try_help()
            ),
        };
        let suffix = suffix
            .or_else(|| std::env::var_os("SIMPLE_BACKUP_SUFFIX"))
            .filter(|s| !s.is_empty() && !s.to_string_lossy().contains('/'))
            .unwrap_or_else(|| "~".into());
        Ok(Backup { control, suffix })
    }

    /// Whether backups are made at all.
    pub fn is_on(&self) -> bool {
        self.control != Control::None
    }

    /// Whether the backup of `dst` would be numbered (so that every version
    /// is kept: a destination this command made may then be replaced).
    pub fn numbered(&self, dst: &Path) -> bool {
        match self.control {
            Control::Numbered => true,
            Control::Existing => highest_number(dst) > 0,
            Control::None | Control::Simple => false,
        }
    }

    /// The name to move an existing `dst` to, or None without backups.
    pub fn name(&self, dst: &Path) -> Option<PathBuf> {
        let numbered = |next: u64| {
            let mut n = dst.as_os_str().to_owned();
            n.push(format!(".~{next}~"));
            PathBuf::from(n)
        };
        let simple = || {
            let mut n = dst.as_os_str().to_owned();
            n.push(&self.suffix);
            PathBuf::from(n)
        };
        match self.control {
            Control::None => None,
            Control::Simple => Some(simple()),
            Control::Numbered => Some(numbered(highest_number(dst) + 1)),
            Control::Existing => match highest_number(dst) {
                0 => Some(simple()),
                n => Some(numbered(n + 1)),
            },
        }
    }
}

/// The highest N of the NAME.~N~ beside `dst` (0 if none).
fn highest_number(dst: &Path) -> u64 {
    let Some(name) = dst.file_name().and_then(|n| n.to_str()) else {
        return 0;
    };
    let dir = match dst.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let prefix = format!("{name}.~");
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| {
            n.strip_prefix(&prefix)?
                .strip_suffix('~')?
                .parse::<u64>()
                .ok()
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        let simple = Backup::new(Some("simple"), Some(".bak".into())).unwrap();
        assert_eq!(simple.name(&f), Some(dir.path().join("f.bak")));
        let existing = Backup::new(Some("existing"), None).unwrap();
        assert_eq!(existing.name(&f), Some(dir.path().join("f~")));
        let numbered = Backup::new(Some("t"), None).unwrap();
        assert_eq!(numbered.name(&f), Some(dir.path().join("f.~1~")));
        std::fs::write(dir.path().join("f.~7~"), b"").unwrap();
        assert_eq!(numbered.name(&f), Some(dir.path().join("f.~8~")));
        assert_eq!(existing.name(&f), Some(dir.path().join("f.~8~")));
        assert_eq!(Backup::new(Some("off"), None).unwrap().name(&f), None);
        assert!(Backup::new(Some("sometimes"), None).is_err());
    }
}
