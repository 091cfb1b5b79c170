//! Settings chosen by name (environment variables, command-line flags):
//! one list of the names per setting, parsed and printed from it.

/// A setting read back by name (UBIO_DIRECT_READS, UBIO_DIRECT_WRITES,
/// UBIO_SMALL_READAHEAD).
pub trait Setting: Sized + Copy + 'static {
    const ALL: &'static [Self];
    const WHAT: &'static str;
    /// The environment variable that sets it (the shim's, `ubio cat`'s
    /// and the bench's).
    const ENV: &'static str;
    fn name(self) -> &'static str;

    fn parse_setting(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .copied()
            .find(|w| w.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|w| w.name()).collect();
                format!(
                    "unknown {} '{s}' (expected one of: {})",
                    Self::WHAT,
                    names.join(", ")
                )
            })
    }
}

macro_rules! from_str_by_name {
    ($t:ty) => {
        impl std::str::FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                <$t as Setting>::parse_setting(s)
            }
        }
        impl $t {
            /// The environment variable that sets it.
            pub const ENV: &'static str = <$t as Setting>::ENV;

            /// As written in settings.
            pub fn name(self) -> &'static str {
                <$t as Setting>::name(self)
            }

            /// The setting [`Self::ENV`] names in an environment (`var`
            /// looks a variable up): None where unset, an error naming the
            /// variable and the choices where it names no setting.
            pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, String> {
                var(Self::ENV)
                    .map(|v| v.parse::<$t>())
                    .transpose()
                    .map_err(|e| format!("{}: {e}", Self::ENV))
            }
        }
    };
}
pub(crate) use from_str_by_name;
