//! Transfers that move no file position, found from the pages they leave.
//!
//! One long in-kernel copy (copy_file_range, sendfile: Go's `io.Copy`
//! between two files is one copy_file_range of up to 2 GiB) moves the
//! positions only when it returns, and a transfer with explicit offsets
//! (splice, copy_file_range or sendfile given an offset) never moves them.
//! The engine, which follows positions, would see nothing until the file is
//! closed, and a gigabyte would sit dirty in the meantime.
//!
//! What shows such a transfer while it runs, and what it costs to look:
//! - /proc/PID/syscall and /proc/PID/stack show a call only while the task
//!   sleeps in it ("running" otherwise, which a copy from cached pages
//!   mostly is), need ptrace rights (the stack: root), one file per thread,
//!   and tell nothing of how far the call got.
//! - The destination's size grows as the copy goes (one fstat), but not
//!   where the file was preallocated or is overwritten in place.
//! - The pages: the destination's new pages are dirty until written back
//!   and cached after, the source's are cached, and both appear in order
//!   from where the copy started. cachestat() of a range says so; its cost
//!   grows with the pages in the range, so the walk asks about one chunk at
//!   a time, and where nothing moves it costs one call per file per look.
//!
//! So the engine walks the pages: from the furthest point it knows (the
//! furthest position, or where the last walk ended), chunk by chunk, while
//! a chunk holds more pages than the residency snapshot gave to others (or,
//! for a writer, dirty ones); ranges cached by others before are passed
//! over without a look. The destination is written up to where its pages
//! reach (not past its end of file); the source is read up to where its
//! pages reach less the lookahead the kernel's readahead may have filled
//! ahead of the copy. Those ranges go to the same policies as motion of a
//! position (drop-behind, write-behind, residency), and are remembered, so
//! that a position that passes them later hands only the rest.

use rangemap::RangeSet;
use std::ops::Range;
use ubio::residency::CHUNK;
use ubio::sys::page_size;

/// A range's pages as the walk sees them, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pages {
    pub cached: u64,
    pub dirty_writeback: u64,
}

/// Where a walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walk {
    /// The end of the last chunk that held the transfer's pages (`from`
    /// when none did).
    pub reach: u64,
    /// Some of those pages were dirty or under writeback.
    pub dirty: bool,
}

/// Chunks one walk looks at, at most (8 GiB); the next look goes on.
const MAX_CHUNKS: u32 = 4096;

/// How far the pages of a transfer reach past `from`, chunk by chunk.
/// `others(r)`: bytes of `r` cached before the stream (the residency
/// snapshot); `past_others(at)`: the first offset from `at` not in such a
/// range; `look(r)`: the pages of `r` now (None: cannot look).
pub fn walk(
    from: u64,
    writer: bool,
    others: impl Fn(&Range<u64>) -> u64,
    past_others: impl Fn(u64) -> u64,
    mut look: impl FnMut(Range<u64>) -> Option<Pages>,
) -> Walk {
    let page = page_size();
    let mut w = Walk {
        reach: from,
        dirty: false,
    };
    // The page at `from` may be the one a stream is in the middle of.
    let mut at = from.div_ceil(page) * page;
    for i in 0..MAX_CHUNKS {
        // Others' pages: the transfer adds none there; look past them.
        let start = past_others(at);
        let r = start..start / CHUNK * CHUNK + CHUNK;
        let Some(p) = look(r.clone()) else { break };
        if p.cached > others(&r) || (writer && p.dirty_writeback > 0) {
            w.dirty |= p.dirty_writeback > 0;
            w.reach = r.end;
        } else if i > 0 || start.is_multiple_of(CHUNK) {
            break;
        }
        // (The rest of the chunk at `from` may be empty although the
        // transfer went on: the drop behind it takes whole chunks, and
        // pages written back with a large folio that straddled `from`.)
        at = r.end;
    }
    w
}

/// What one file's transfers without motion have handed to the policies.
#[derive(Debug, Default)]
pub struct Silent {
    /// Where the next walk starts (unless a position is further).
    walked_to: u64,
    /// Handed to the policies up to here.
    handed_to: u64,
    /// Everything handed from the pages: a position that passes these
    /// later (the call returned) hands only the rest.
    handed: RangeSet<u64>,
}

impl Silent {
    /// Where to walk from: past the furthest position and the last walk,
    /// but not past the end of file of a writer (`size`): a file truncated
    /// and written again starts over.
    pub fn start(&mut self, furthest_position: u64, size: Option<u64>) -> u64 {
        if let Some(size) = size.filter(|&s| s < self.walked_to) {
            self.walked_to = size;
            self.handed_to = self.handed_to.min(size);
            self.handed.remove(size..u64::MAX);
        }
        self.walked_to.max(furthest_position)
    }

    /// How far walks went (for a reader: as far as its pages reached).
    pub fn walked_to(&self) -> u64 {
        self.walked_to
    }

    /// Handed to the policies up to here.
    pub fn handed_to(&self) -> u64 {
        self.handed_to
    }

    /// The parts of `range` (a position's motion) not handed already.
    pub fn fresh(&self, range: Range<u64>) -> Vec<Range<u64>> {
        self.handed.gaps(&range).collect()
    }

    /// Decide from a walk what the transfer wrote (`write`: up to where its
    /// pages reach) or read (up to `lookahead` short of it), within `end`
    /// (a writer's end of file; for a reader, the end of file when the
    /// engine first saw it: pages past it were written by someone else),
    /// past `furthest_position` and what was handed before; record and
    /// return it (None: nothing new).
    pub fn infer(
        &mut self,
        furthest_position: u64,
        walk: Walk,
        write: bool,
        end: u64,
        lookahead: u64,
    ) -> Option<Range<u64>> {
        let to = match write {
            true => walk.reach,
            false => walk.reach.saturating_sub(lookahead),
        }
        .min(end);
        // A writer is still filling the page at its end of file: look there
        // again next time.
        self.walked_to = self.walked_to.max(if write { to } else { walk.reach });
        let from = self.handed_to.max(furthest_position);
        if to <= from {
            return None;
        }
        self.handed_to = to;
        self.handed.insert(from..to);
        Some(from..to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Walk a file whose chunk i holds its first `cached[i]` bytes, `dirty[i]`
    /// of them dirty, and where `theirs` was cached before the stream.
    fn walk_over(
        from: u64,
        writer: bool,
        cached: &[u64],
        dirty: &[u64],
        theirs: Option<Range<u64>>,
    ) -> Walk {
        let set: RangeSet<u64> = theirs.into_iter().collect();
        let mut looks = 0;
        let w = walk(
            from,
            writer,
            |r| {
                set.overlapping(r)
                    .map(|o| o.end.min(r.end) - o.start.max(r.start))
                    .sum()
            },
            |at| set.get(&at).map_or(at, |r| r.end),
            |r| {
                looks += 1;
                // Chunk i holds its first cached[i] bytes (others' included).
                let i = (r.start / CHUNK) as usize;
                let held = i as u64 * CHUNK..i as u64 * CHUNK + cached.get(i).copied().unwrap_or(0);
                Some(Pages {
                    cached: held.end.min(r.end).saturating_sub(held.start.max(r.start)),
                    dirty_writeback: dirty.get(i).copied().unwrap_or(0),
                })
            },
        );
        assert!(looks <= cached.len() + 1, "looked {looks} times");
        w
    }

    #[test]
    fn a_copy_is_followed_to_the_end_of_its_pages() {
        let full = CHUNK;
        let w = walk_over(0, false, &[full, full, full, MIB], &[], None);
        assert_eq!(
            w,
            Walk {
                reach: 4 * CHUNK,
                dirty: false
            }
        );
        // Nothing new: the walk stops at once, where it started.
        let w = walk_over(4 * CHUNK, false, &[full, full, full, MIB], &[], None);
        assert_eq!(w.reach, 4 * CHUNK);
    }

    #[test]
    fn a_writer_is_followed_by_its_dirty_pages_also_over_others() {
        // Chunk 1 was cached by others and is being overwritten: dirty.
        let w = walk_over(
            0,
            true,
            &[CHUNK, CHUNK, CHUNK],
            &[0, 4096, 4096],
            Some(CHUNK..2 * CHUNK),
        );
        // The reader does not look at others' chunk; the writer's walk
        // passes it too and sees the dirty chunk after it.
        assert_eq!(
            w,
            Walk {
                reach: 3 * CHUNK,
                dirty: true
            }
        );
    }

    /// The drop of what was written up to the middle of a chunk takes the
    /// whole chunk, also pages the copy wrote after it that were written
    /// back with a large folio: the walk goes on to the next chunk.
    #[test]
    fn a_hole_in_the_chunk_at_the_start_does_not_stop_the_walk() {
        let w = walk_over(
            CHUNK + MIB,
            true,
            &[0, 0, CHUNK, MIB],
            &[0, 0, 4096, 4096],
            None,
        );
        assert_eq!(
            w,
            Walk {
                reach: 4 * CHUNK,
                dirty: true
            }
        );
        // But a whole chunk without pages does.
        let w = walk_over(CHUNK, true, &[0, 0, CHUNK], &[0, 0, 4096], None);
        assert_eq!(w.reach, CHUNK);
    }

    #[test]
    fn others_pages_are_passed_over_not_taken() {
        // Others cached chunks 1-2 wholly; the copy went on to chunk 3.
        let c = [CHUNK; 5];
        let w = walk_over(
            0,
            false,
            &[c[0], c[1], c[2], c[3], 0],
            &[],
            Some(CHUNK..3 * CHUNK),
        );
        assert_eq!(w.reach, 4 * CHUNK);
        // The copy has not passed them yet: the walk ends before them.
        let w = walk_over(
            0,
            false,
            &[CHUNK, CHUNK, CHUNK, 0],
            &[],
            Some(CHUNK..3 * CHUNK),
        );
        assert_eq!(w.reach, CHUNK);
        // A chunk only partly others' counts only beyond their pages.
        let w = walk_over(0, false, &[MIB, 0], &[], Some(0..MIB));
        assert_eq!(w.reach, 0);
    }

    #[test]
    fn a_read_ends_a_lookahead_short_of_its_pages_a_write_at_its_end_of_file() {
        let mut s = Silent::default();
        let w = Walk {
            reach: 40 * MIB,
            dirty: false,
        };
        assert_eq!(s.infer(0, w, false, u64::MAX, 18 * MIB), Some(0..22 * MIB));
        assert_eq!(s.start(0, None), 40 * MIB);
        // Readahead only (a reader waiting elsewhere): nothing read.
        let mut r = Silent::default();
        let w = Walk {
            reach: 10 * MIB + 16 * MIB,
            dirty: false,
        };
        assert_eq!(r.infer(10 * MIB, w, false, u64::MAX, 18 * MIB), None);
        // Pages past a reader's end of file at first sight are others'.
        let mut r = Silent::default();
        let w = Walk {
            reach: 64 * MIB,
            dirty: false,
        };
        assert_eq!(r.infer(0, w, false, 20 * MIB, 18 * MIB), Some(0..20 * MIB));

        let mut s = Silent::default();
        let w = Walk {
            reach: 6 * CHUNK,
            dirty: true,
        };
        assert_eq!(
            s.infer(0, w, true, 5 * CHUNK + 4096, 18 * MIB),
            Some(0..5 * CHUNK + 4096)
        );
        assert_eq!(s.start(0, Some(5 * CHUNK + 4096)), 5 * CHUNK + 4096);
    }

    #[test]
    fn a_position_that_catches_up_hands_only_the_rest() {
        let mut s = Silent::default();
        let w = Walk {
            reach: 8 * MIB,
            dirty: true,
        };
        s.infer(0, w, true, 7 * MIB, 0);
        // The call returned: the position jumps from 0 to 9 MiB.
        assert_eq!(s.fresh(0..9 * MIB), vec![7 * MIB..9 * MIB]);
        // A later walk starts past the position.
        assert_eq!(s.start(9 * MIB, Some(9 * MIB)), 9 * MIB);
        let w = Walk {
            reach: 12 * MIB,
            dirty: true,
        };
        assert_eq!(
            s.infer(9 * MIB, w, true, 11 * MIB, 0),
            Some(9 * MIB..11 * MIB)
        );
    }

    #[test]
    fn a_truncated_file_starts_over() {
        let mut s = Silent::default();
        let w = Walk {
            reach: 8 * MIB,
            dirty: true,
        };
        s.infer(0, w, true, 8 * MIB, 0);
        assert_eq!(s.start(0, Some(0)), 0);
        assert_eq!(s.fresh(0..MIB), vec![0..MIB]);
        let w = Walk {
            reach: 2 * MIB,
            dirty: true,
        };
        assert_eq!(s.infer(0, w, true, 2 * MIB, 0), Some(0..2 * MIB));
    }
}
