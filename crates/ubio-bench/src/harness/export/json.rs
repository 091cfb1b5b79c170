//! report.json: the whole [`Report`], pretty-printed, read back with
//! [`Report::from_json`].

use crate::harness::schema::Report;
use serde_json::Value;
use std::io;

/// The report as pretty JSON with a trailing newline.
pub fn render(report: &Report) -> io::Result<String> {
    let mut text = serde_json::to_string_pretty(report).map_err(io::Error::other)?;
    text.push('\n');
    Ok(text)
}

/// The leaves of a JSON value (everything that is not an object) with
/// their paths, nested keys joined by `separator`: the flat view of a
/// nested report part that runs.csv's columns and compare's config
/// differences both need.
pub(crate) fn leaves<'a>(value: &'a Value, separator: &str) -> Vec<(String, &'a Value)> {
    fn walk<'a>(prefix: String, value: &'a Value, sep: &str, out: &mut Vec<(String, &'a Value)>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}{sep}{k}")
                    };
                    walk(key, v, sep, out);
                }
            }
            v => out.push((prefix, v)),
        }
    }
    let mut out = Vec::new();
    walk(String::new(), value, separator, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::mock;
    use crate::harness::schema::SCHEMA_VERSION;

    #[test]
    fn round_trips() {
        let report = mock::report(7);
        let back = Report::from_json(&render(&report).unwrap()).unwrap();
        assert!(
            back == report,
            "the report read back differs from the one written"
        );
    }

    #[test]
    fn refuses_another_schema() {
        let mut value = serde_json::to_value(mock::report(7)).unwrap();
        value["schema"] = "fio".into();
        let err = Report::from_json(&value.to_string()).unwrap_err();
        assert!(err.contains("not a ubio bench report"), "{err}");
    }

    #[test]
    fn refuses_a_newer_version() {
        let mut value = serde_json::to_value(mock::report(7)).unwrap();
        value["schema_version"] = (SCHEMA_VERSION + 1).into();
        let err = Report::from_json(&value.to_string()).unwrap_err();
        assert!(err.contains("schema_version"), "{err}");
    }

    #[test]
    fn refuses_what_is_not_json() {
        assert!(Report::from_json("time,mb\n1,2\n")
            .unwrap_err()
            .contains("not JSON"));
    }
}
