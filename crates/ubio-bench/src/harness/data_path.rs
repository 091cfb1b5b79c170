//! The ubio modes' data-path settings, from the environment variables that
//! `ubio run`'s shim and `ubio cat`/`ubio cp` read (UBIO_DIRECT_READS,
//! UBIO_DIRECT_WRITES, UBIO_SMALL_READAHEAD): so that one run measures a
//! path of ubio's (every aligned read direct, say) against the others, the
//! same way for the library's modes and the commands the harness runs.
//! Unset: the library's defaults. The report's environment records them.

use std::collections::BTreeMap;
use std::io;

/// The variables, as the shim and the command read them.
const READS: &str = "UBIO_DIRECT_READS";
const WRITES: &str = "UBIO_DIRECT_WRITES";
const SMALL_READAHEAD: &str = "UBIO_SMALL_READAHEAD";

/// The settings a run's ubio modes take; `None`: the library's default.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DataPath {
    pub direct_reads: Option<ubio::DirectReads>,
    pub direct_writes: Option<ubio::DirectWrites>,
    pub small_readahead: Option<ubio::SmallReadahead>,
}

impl DataPath {
    /// From the environment. A value that names no setting is an error
    /// naming the variable and the choices (a run must not measure the
    /// default while its reader thinks it measured something else).
    pub fn from_env() -> io::Result<DataPath> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    fn from_vars(var: impl Fn(&str) -> Option<String>) -> io::Result<DataPath> {
        fn parse<T: std::str::FromStr<Err = String>>(
            name: &str,
            value: Option<String>,
        ) -> io::Result<Option<T>> {
            value
                .map(|v| v.parse::<T>())
                .transpose()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{name}: {e}")))
        }
        Ok(DataPath {
            direct_reads: parse(READS, var(READS))?,
            direct_writes: parse(WRITES, var(WRITES))?,
            small_readahead: parse(SMALL_READAHEAD, var(SMALL_READAHEAD))?,
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
            (READS, self.direct_reads.map(|w| w.name())),
            (WRITES, self.direct_writes.map(|w| w.name())),
            (SMALL_READAHEAD, self.small_readahead.map(|w| w.name())),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(set: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
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
        let d =
            DataPath::from_vars(vars(&[(READS, "always"), (SMALL_READAHEAD, "always")])).unwrap();
        assert_eq!(d.direct_reads, Some(ubio::DirectReads::Always));
        assert_eq!(d.direct_writes, None);
        assert_eq!(
            d.named(),
            BTreeMap::from([
                (READS.to_owned(), "always".to_owned()),
                (SMALL_READAHEAD.to_owned(), "always".to_owned())
            ])
        );
    }

    #[test]
    fn a_wrong_value_names_the_variable_and_the_choices() {
        let e = DataPath::from_vars(vars(&[(WRITES, "sometimes")])).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("UBIO_DIRECT_WRITES: "), "{msg}");
        assert!(
            msg.contains("sometimes") && msg.contains("when-faster"),
            "{msg}"
        );
    }
}
