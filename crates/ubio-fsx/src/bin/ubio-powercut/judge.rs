//! Judging a replay point: a file's state against its model, the anomalies
//! among the states, and a backend's against the buffered backend's.

use crate::model::Model;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use ubio_fsx::guest::STALE;

/// A file's state at a replay point, as a few words: the states of two
/// backends are compared as sets of these. `zero_kinds`: what holds the
/// file's zero bytes, by its extents ([`guest::zero_kinds`]).
pub(crate) fn judge_file(
    m: &Model,
    acked: &[Range<u64>],
    got: Option<&[u8]>,
    zero_kinds: &[&str],
) -> (String, Vec<String>) {
    let mut bad = Vec::new();
    let Some(got) = got else {
        if !acked.is_empty() {
            bad.push(format!(
                "{}: absent, but {} acknowledged bytes",
                m.path.display(),
                total(acked)
            ));
        }
        return ("absent".into(), bad);
    };
    let old_len = m.old.as_ref().map_or(0, |o| o.len());
    if got.len() > old_len.max(m.new.len()) {
        bad.push(format!(
            "{}: {} bytes, longer than its old ({old_len}) and new ({}) content",
            m.path.display(),
            got.len(),
            m.new.len()
        ));
    }
    let (mut new, mut old, mut zero, mut stale, mut foreign) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut first_foreign, mut first_stale) = (None, None);
    for (i, &b) in got.iter().enumerate() {
        let is_new = m.new.get(i) == Some(&b);
        let is_old = m.old.as_ref().and_then(|o| o.get(i)) == Some(&b);
        match (is_new, is_old) {
            (true, false) => new += 1,
            (false, true) => old += 1,
            (true, true) => {}
            _ if b == 0 => zero += 1,
            _ if b == STALE => {
                stale += 1;
                first_stale.get_or_insert(i);
            }
            _ => {
                foreign += 1;
                first_foreign.get_or_insert(i);
            }
        }
    }
    if let Some(i) = first_foreign {
        bad.push(format!(
            "{}: {foreign} bytes that neither its old nor its new content held (first at {i})",
            m.path.display()
        ));
    }
    if let Some(i) = first_stale {
        bad.push(format!(
            "{}: {stale} bytes of the disk's old contents, from blocks nothing wrote (stale data; first at {i})",
            m.path.display()
        ));
    }
    for r in acked {
        let end = r.end.min(got.len() as u64);
        let missing = (r.end - r.start) - end.saturating_sub(r.start);
        let wrong = (r.start..end).find(|&i| m.new.get(i as usize) != Some(&got[i as usize]));
        if missing > 0 || wrong.is_some() {
            bad.push(format!(
                "{}: acknowledged bytes {}..{} not there ({} past the end, first wrong at {:?})",
                m.path.display(),
                r.start,
                r.end,
                missing,
                wrong
            ));
            break;
        }
    }
    let size = if got.is_empty() {
        "empty"
    } else if got.len() == m.new.len() {
        "full size"
    } else if got.len() < m.new.len() {
        "shorter"
    } else {
        "longer"
    };
    let mut what = vec![size.to_string()];
    if new > 0 {
        what.push("new".into());
    }
    if old > 0 {
        what.push("old".into());
    }
    if zero > 0 {
        what.push(format!("zeroes({})", zero_kinds.join(",")));
    }
    if stale > 0 {
        what.push("stale".into());
    }
    if foreign > 0 {
        what.push("foreign".into());
    }
    (what.join("+"), bad)
}

pub(crate) fn total(r: &[Range<u64>]) -> u64 {
    r.iter().map(|r| r.end - r.start).sum()
}

/// The outcome of one cell.
#[derive(Default)]
pub(crate) struct Cell {
    pub(crate) points: u64,
    pub(crate) entries: u64,
    pub(crate) states: BTreeSet<String>,
    /// Anomalous file states already shown with an example.
    pub(crate) examples: BTreeSet<String>,
    pub(crate) failures: Vec<String>,
}

/// A file state that is more than absent, a prefix, complete, or old and
/// new mixed: zeroes, stale or foreign bytes, a file longer than its data.
pub(crate) fn is_anomaly(state: &str) -> bool {
    ["zeroes", "stale", "foreign", "longer"]
        .iter()
        .any(|a| state.contains(a))
}

/// What an anomalous state is compared by with the buffered reference's:
/// the state without its new bytes. How much of a file's new data reached
/// the disk beside its zeroes depends on where writeback split the file
/// when the power went (buffered I/O writes a small file back at once, the
/// direct backend its body first and its tail block later), not on another
/// kind of byte: "full size+new+zeroes(unwritten)" is the anomaly of "full
/// size+zeroes(unwritten)" over less of the file. The old bytes stay in it:
/// zeroes beside old data are another anomaly than zeroes beside none.
pub(crate) fn anomaly_signature(state: &str) -> Option<String> {
    is_anomaly(state).then(|| {
        state
            .split('+')
            .filter(|part| *part != "new")
            .collect::<Vec<_>>()
            .join("+")
    })
}

/// An anomaly a backend showed that its workload's buffered run did not.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BeyondBuffered {
    pub(crate) workload: String,
    pub(crate) backend: &'static str,
    pub(crate) signature: String,
    /// A workload whose buffered run showed it on this filesystem: then
    /// the state is the filesystem's, which buffered writes reach too, and
    /// only timing kept it out of this workload's buffered run (ext4, on
    /// 6.1 and 6.12, commits a size and unwritten extents before the data
    /// once writeback starts; ubio starts it earlier). None: buffered I/O
    /// never showed it here: wider than buffered.
    pub(crate) buffered_elsewhere: Option<String>,
}

/// Compare each backend's anomalies (by signature: zeroes, foreign bytes, a
/// file longer than its data) with the buffered backend's: in the same
/// workload, then in any workload on the filesystem. A shorter prefix of
/// the new data is not an anomaly: it is what the direct backend's writes,
/// which reach the disk without delayed allocation, leave.
pub(crate) fn beyond_buffered(
    states: &BTreeMap<String, BTreeMap<&'static str, BTreeSet<String>>>,
) -> Vec<BeyondBuffered> {
    let anomalies = |set: &BTreeSet<String>| -> BTreeSet<String> {
        set.iter()
            .flat_map(|s| s.split(", "))
            .filter_map(anomaly_signature)
            .collect()
    };
    let buffered: BTreeMap<&String, BTreeSet<String>> = states
        .iter()
        .filter_map(|(name, by)| Some((name, anomalies(by.get("buffered")?))))
        .collect();
    let mut out = Vec::new();
    for (name, by) in states {
        let Some(reference) = buffered.get(name) else {
            continue;
        };
        for (&backend, s) in by {
            for signature in anomalies(s).difference(reference) {
                let buffered_elsewhere = buffered
                    .iter()
                    .find(|(_, b)| b.contains(signature))
                    .map(|(other, _)| other.to_string());
                out.push(BeyondBuffered {
                    workload: name.clone(),
                    backend,
                    signature: signature.clone(),
                    buffered_elsewhere,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{anomaly_signature, beyond_buffered, BeyondBuffered};
    use std::collections::{BTreeMap, BTreeSet};

    /// As the 6.1 ext4 cells of bench/runs/2026-11-27-integrity: the
    /// unwritten zeroes of emulated's `tails` were shown by buffered's
    /// `tree`, not its `tails` (a note); zeroes in a hole, which no
    /// buffered run showed, are wider.
    #[test]
    fn anomalies_buffered_showed_in_another_workload_are_noted_not_wider() {
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let mut states = BTreeMap::new();
        states.insert(
            "tree".to_string(),
            BTreeMap::from([
                (
                    "buffered",
                    set(&["absent", "full size+zeroes(unwritten), full size+new"]),
                ),
                ("emulated", set(&["absent", "full size+new"])),
            ]),
        );
        states.insert(
            "tails".to_string(),
            BTreeMap::from([
                ("buffered", set(&["absent", "full size+new"])),
                (
                    "emulated",
                    set(&["full size+zeroes(unwritten)", "full size+zeroes(hole)"]),
                ),
            ]),
        );
        assert_eq!(
            beyond_buffered(&states),
            vec![
                BeyondBuffered {
                    workload: "tails".into(),
                    backend: "emulated",
                    signature: "full size+zeroes(hole)".into(),
                    buffered_elsewhere: None,
                },
                BeyondBuffered {
                    workload: "tails".into(),
                    backend: "emulated",
                    signature: "full size+zeroes(unwritten)".into(),
                    buffered_elsewhere: Some("tree".into()),
                },
            ]
        );
    }

    #[test]
    fn anomalies_compare_without_their_new_bytes() {
        assert_eq!(anomaly_signature("full size+new"), None);
        assert_eq!(anomaly_signature("shorter+new"), None);
        assert_eq!(anomaly_signature("full size+new+old"), None);
        assert_eq!(
            anomaly_signature("full size+new+zeroes(unwritten)").as_deref(),
            Some("full size+zeroes(unwritten)")
        );
        // Old data beside zeroes, stale and foreign bytes, and the size
        // stay apart.
        assert_eq!(
            anomaly_signature("full size+new+old+zeroes(unwritten)").as_deref(),
            Some("full size+old+zeroes(unwritten)")
        );
        assert_eq!(
            anomaly_signature("shorter+new+zeroes(hole)").as_deref(),
            Some("shorter+zeroes(hole)")
        );
        assert_eq!(
            anomaly_signature("full size+new+stale").as_deref(),
            Some("full size+stale")
        );
        assert_eq!(anomaly_signature("longer+new").as_deref(), Some("longer"));
    }
}
