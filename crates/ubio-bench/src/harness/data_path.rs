//! The ubio modes' data-path settings, from the environment variables that
//! `ubio run`'s shim and `ubio cat`/`ubio cp` read (UBIO_DIRECT_READS,
//! UBIO_DIRECT_WRITES, UBIO_SMALL_READAHEAD): so that one run measures a
//! path of ubio's (every aligned read direct, say) against the others, the
//! same way for the library's modes and the commands the harness runs.
//! Unset: the library's defaults. The report's environment records them.

use std::collections::BTreeMap;
use std::io;
use ubio::{DirectReads, DirectWrites, SmallReadahead};

/// The settings a run's ubio modes take; `None`: the library's default.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DataPath {
    pub direct_reads: Option<DirectReads>,
    pub direct_writes: Option<DirectWrites>,
    pub small_readahead: Option<SmallReadahead>,
}

impl DataPath {
    /// From the environment (an empty variable is unset, as for the
    /// shim). A value that names no setting is an error naming the
    /// variable and the choices (a run must not measure the default while
    /// its reader thinks it measured something else).
    pub fn from_env() -> io::Result<DataPath> {
        Self::from_vars(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    fn from_vars(var: impl Fn(&str) -> Option<String> + Copy) -> io::Result<DataPath> {
        let invalid = |e| io::Error::new(io::ErrorKind::InvalidInput, e);
        Ok(DataPath {
            direct_reads: DirectReads::from_env(var).map_err(invalid)?,
            direct_writes: DirectWrites::from_env(var).map_err(invalid)?,
            small_readahead: SmallReadahead::from_env(var).map_err(invalid)?,
        })
    }

    /// Sets what was given on `o`.
    pub fn apply(&self, o: &mut ubio::OpenOptions) {
        if let Some(w) = self.direct_reads {
            o.direct_reads(w);
        }
        if let Some(w) = self.direct_writes {
            o.direct_writes(w);
        }
        if let Some(w) = self.small_readahead {
            o.small_readahead(w);
        }
    }

    /// The variables set, by name, for the report.
    pub fn named(&self) -> BTreeMap<String, String> {
        [
            (DirectReads::ENV, self.direct_reads.map(|w| w.name())),
            (DirectWrites::ENV, self.direct_writes.map(|w| w.name())),
            (SmallReadahead::ENV, self.small_readahead.map(|w| w.name())),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(set: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + Copy + 'a {
        move |name| {
            set.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn unset_is_the_librarys_default_and_names_nothing() {
        let d = DataPath::from_vars(vars(&[])).unwrap();
        assert_eq!(d, DataPath::default());
        assert!(d.named().is_empty());
    }

    #[test]
    fn set_variables_are_parsed_and_named_back() {
        let d = DataPath::from_vars(vars(&[
            (DirectReads::ENV, "always"),
            (SmallReadahead::ENV, "always"),
        ]))
        .unwrap();
        assert_eq!(d.direct_reads, Some(DirectReads::Always));
        assert_eq!(d.direct_writes, None);
        assert_eq!(
            d.named(),
            BTreeMap::from([
                (DirectReads::ENV.to_owned(), "always".to_owned()),
                (SmallReadahead::ENV.to_owned(), "always".to_owned())
            ])
        );
    }

    #[test]
    fn a_wrong_value_names_the_variable_and_the_choices() {
        let e = DataPath::from_vars(vars(&[(DirectWrites::ENV, "sometimes")])).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("UBIO_DIRECT_WRITES: "), "{msg}");
        assert!(
            msg.contains("sometimes") && msg.contains("when-faster"),
            "{msg}"
        );
    }
}
