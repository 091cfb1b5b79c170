//! When the destination is the source, or a name that reaches it: what cp
//! may do without losing the source's data. ubio's own rules, written to
//! give GNU cp 9.1's decisions as its tests/cp/same-file.sh matrix shows
//! them (tests/cp_safety.rs compares the two on every case).

use super::LinkMode;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

/// What to do with a destination that may be the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Same {
    /// Not the same file, or replacing the destination leaves the source
    /// whole (it is another name of it, unlinked or moved to a backup
    /// first): go on as with any existing destination.
    No,
    /// The destination already is what a link (-l, -d) would make: done.
    Done,
    /// `cp -bf f f`: the source itself is moved to its backup, and copied
    /// (or, with -l, linked) back from there.
    FromBackup,
    /// "'SRC' and 'DST' are the same file".
    Refuse,
}

/// The facts the decision needs: the source as named (`src_l`, lstat), as
/// followed (`src_followed`, stat; None if it cannot be), as the copy uses
/// it (`src`: followed or not, as the walk decided), and the destination
/// as named and as followed.
pub struct Names<'a> {
    pub src_l: &'a Metadata,
    pub src_followed: Option<&'a Metadata>,
    pub src: &'a Metadata,
    pub dst_l: &'a Metadata,
    pub dst_followed: Option<&'a Metadata>,
}

fn id(m: &Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

/// What the options do to an existing destination first.
pub struct Replacing {
    pub link: LinkMode,
    /// The source is a file whose data is copied (not a symlink recreated).
    pub data: bool,
    pub backup: bool,
    pub remove_destination: bool,
    pub force: bool,
}

pub fn decide(n: &Names, r: &Replacing) -> Same {
    let dst = id(n.dst_l);
    // The destination is the source's own and only name: unlinking it or
    // moving it away takes the data with it.
    let itself = dst == id(n.src_l) && !n.src_l.is_symlink() && n.src_l.nlink() == 1;
    // The source is a symlink to the destination: without the destination
    // it dangles.
    let points_at_dst = n.src_l.is_symlink() && n.src_followed.map(id) == Some(dst);
    match r.link {
        // A symlink to the source in place of the source.
        LinkMode::Symbolic if n.src_followed.map(id) == Some(dst) => Same::Refuse,
        LinkMode::Symbolic => Same::No,
        LinkMode::Hard if itself && r.backup && r.force => Same::FromBackup,
        LinkMode::Hard if dst == id(n.src) || (points_at_dst && !r.backup) => Same::Done,
        LinkMode::Hard => Same::No,
        // Data written through the destination would land on the source.
        LinkMode::Copy if r.data => {
            if n.dst_followed.map(id) != Some(id(n.src)) {
                Same::No
            } else if itself {
                if r.backup && r.force {
                    Same::FromBackup
                } else {
                    Same::Refuse
                }
            } else if !points_at_dst && (r.remove_destination || r.backup) {
                Same::No
            } else {
                Same::Refuse
            }
        }
        // A symlink (or fifo) recreated: the destination is unlinked first.
        LinkMode::Copy if dst == id(n.src_l) => {
            if r.backup {
                Same::No
            } else {
                Same::Done
            }
        }
        LinkMode::Copy if points_at_dst && !r.backup => Same::Refuse,
        LinkMode::Copy => Same::No,
    }
}
