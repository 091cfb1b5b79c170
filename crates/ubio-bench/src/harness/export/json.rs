//! report.json: the whole [`Report`], pretty-printed, read back with
//! [`Report::from_json`].

use crate::harness::schema::Report;
use std::io;

/// The report as pretty JSON with a trailing newline.
pub fn render(report: &Report) -> io::Result<String> {
    let mut text = serde_json::to_string_pretty(report).map_err(io::Error::other)?;
    text.push('\n');
    Ok(text)
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
