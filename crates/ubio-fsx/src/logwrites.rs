//! Reading and replaying a dm-log-writes log (the kernel's
//! drivers/md/dm-log-writes.c and Documentation/admin-guide/device-mapper/
//! log-writes.rst): every write that reached the device, in the order it
//! completed, with its flush and FUA flags, and the marks userspace put in
//! between (`dmsetup message DEV 0 mark NAME`). Replaying the entries up to
//! a flush or FUA point onto a fresh device gives what the disk held if the
//! power had gone right after that point.
//!
//! The layout (little endian): block 0 holds the superblock (magic, version,
//! entry count, block size); each entry is one block of header (sector and
//! length in blocks, flags, data length; a mark's name follows the header
//! in that block) followed by its data blocks (none for a discard or a
//! mark). This is xfstests' replay-log's job; Debian packages no xfstests,
//! so the guest replays with this instead.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;

pub const MAGIC: u64 = 0x006A_7366_7773_6872;
pub const VERSION: u64 = 1;
pub const FLUSH: u64 = 1 << 0;
pub const FUA: u64 = 1 << 1;
pub const DISCARD: u64 = 1 << 2;
pub const MARK: u64 = 1 << 3;
pub const METADATA: u64 = 1 << 4;

/// One entry of the log; `data` is the written blocks (empty for a flush,
/// a discard or a mark).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub index: u64,
    /// Where, in blocks of [`Log::block`] bytes, and how many.
    pub sector: u64,
    pub nr_sectors: u64,
    pub flags: u64,
    pub mark: Option<String>,
    pub data: Vec<u8>,
}

impl Entry {
    /// A point where a power cut leaves exactly what was replayed so far.
    pub fn is_durability_point(&self) -> bool {
        self.flags & (FLUSH | FUA) != 0
    }

    /// What the entry is, in a few words, for a log excerpt.
    pub fn describe(&self) -> String {
        let mut kinds = Vec::new();
        for (bit, name) in [
            (FLUSH, "FLUSH"),
            (FUA, "FUA"),
            (DISCARD, "DISCARD"),
            (MARK, "MARK"),
            (METADATA, "METADATA"),
        ] {
            if self.flags & bit != 0 {
                kinds.push(name);
            }
        }
        let kinds = if kinds.is_empty() {
            "WRITE".to_string()
        } else {
            kinds.join("|")
        };
        match &self.mark {
            Some(m) => format!("#{} {kinds} {m:?}", self.index),
            None => format!(
                "#{} {kinds} sector {} x {}",
                self.index, self.sector, self.nr_sectors
            ),
        }
    }
}

/// An open log, read from its start.
pub struct Log {
    reader: BufReader<File>,
    pub block: u64,
    pub entries: u64,
    next: u64,
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

impl Log {
    pub fn open(file: File) -> io::Result<Log> {
        let mut sb = [0u8; 28];
        file.read_exact_at(&mut sb, 0)?;
        if le64(&sb, 0) != MAGIC {
            return Err(bad("not a dm-log-writes log (magic)".into()));
        }
        if le64(&sb, 8) != VERSION {
            return Err(bad(format!("log version {}, not {VERSION}", le64(&sb, 8))));
        }
        let entries = le64(&sb, 16);
        let block = u32::from_le_bytes(sb[24..28].try_into().unwrap()) as u64;
        if !(512..=65536).contains(&block) || !block.is_power_of_two() {
            return Err(bad(format!("log block size {block}")));
        }
        let mut reader = BufReader::with_capacity(4 << 20, file);
        io::copy(&mut (&mut reader).take(block), &mut io::sink())?;
        Ok(Log {
            reader,
            block,
            entries,
            next: 0,
        })
    }

    /// The next entry, or None after the last.
    pub fn next_entry(&mut self) -> io::Result<Option<Entry>> {
        if self.next >= self.entries {
            return Ok(None);
        }
        let mut head = vec![0u8; self.block as usize];
        self.reader.read_exact(&mut head)?;
        let (sector, nr_sectors, flags, data_len) = (
            le64(&head, 0),
            le64(&head, 8),
            le64(&head, 16),
            le64(&head, 24),
        );
        if flags == 0 && nr_sectors == 0 {
            return Err(bad(format!(
                "entry {}: all zeroes (a torn log?)",
                self.next
            )));
        }
        let mark = (flags & MARK != 0).then(|| {
            let len = (data_len as usize).min(head.len() - 32);
            String::from_utf8_lossy(&head[32..32 + len]).into_owned()
        });
        let mut data = Vec::new();
        if flags & (DISCARD | MARK) == 0 && nr_sectors > 0 {
            data = vec![0u8; (nr_sectors * self.block) as usize];
            self.reader.read_exact(&mut data)?;
        }
        let e = Entry {
            index: self.next,
            sector,
            nr_sectors,
            flags,
            mark,
            data,
        };
        self.next += 1;
        Ok(Some(e))
    }
}

/// Apply `e` to the replay target (a file standing for the device): its
/// data written where it went, a discard as zeroes (as replay-log does
/// where the target cannot discard), nothing for a mark or a flush alone.
pub fn apply(target: &File, block: u64, e: &Entry) -> io::Result<()> {
    let at = e.sector * block;
    if e.flags & DISCARD != 0 {
        let zeros = vec![0u8; (1 << 20).min(e.nr_sectors * block) as usize];
        let mut done = 0;
        while done < e.nr_sectors * block {
            let n = (zeros.len() as u64).min(e.nr_sectors * block - done);
            target.write_all_at(&zeros[..n as usize], at + done)?;
            done += n;
        }
        return Ok(());
    }
    if !e.data.is_empty() {
        target.write_all_at(&e.data, at)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn entry(out: &mut Vec<u8>, block: usize, sector: u64, flags: u64, mark: &str, data: &[u8]) {
        let mut head = vec![0u8; block];
        let n = if flags & (MARK | DISCARD) != 0 && data.is_empty() {
            0
        } else {
            data.len() / block
        };
        let nr = if flags & DISCARD != 0 { 4 } else { n as u64 };
        head[0..8].copy_from_slice(&sector.to_le_bytes());
        head[8..16].copy_from_slice(&nr.to_le_bytes());
        head[16..24].copy_from_slice(&flags.to_le_bytes());
        head[24..32].copy_from_slice(&(mark.len() as u64).to_le_bytes());
        head[32..32 + mark.len()].copy_from_slice(mark.as_bytes());
        out.extend_from_slice(&head);
        if flags & (MARK | DISCARD) == 0 {
            out.extend_from_slice(data);
        }
    }

    /// A log written as the kernel writes it replays to the same device.
    #[test]
    fn replays_writes_discards_and_reads_marks() {
        let block = 512usize;
        let mut log = vec![0u8; block];
        log[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        log[8..16].copy_from_slice(&VERSION.to_le_bytes());
        log[16..24].copy_from_slice(&5u64.to_le_bytes());
        log[24..28].copy_from_slice(&(block as u32).to_le_bytes());
        entry(&mut log, block, 2, 0, "", &[7u8; 1024]);
        entry(&mut log, block, 0, MARK, "commit 1", &[]);
        entry(&mut log, block, 0, FLUSH, "", &[]);
        entry(&mut log, block, 3, DISCARD, "", &[]);
        entry(&mut log, block, 8, FUA, "", &[9u8; 512]);
        let dir = tempfile::tempdir().unwrap();
        let lp = dir.path().join("log");
        File::create(&lp).unwrap().write_all(&log).unwrap();
        let target = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("dev"))
            .unwrap();
        target.write_all_at(&[1u8; 8 * 512], 0).unwrap();
        let mut l = Log::open(File::open(&lp).unwrap()).unwrap();
        let mut points = Vec::new();
        let mut marks = Vec::new();
        while let Some(e) = l.next_entry().unwrap() {
            apply(&target, l.block, &e).unwrap();
            if e.is_durability_point() {
                points.push(e.index);
            }
            marks.extend(e.mark.clone());
        }
        assert_eq!(points, vec![2, 4]);
        assert_eq!(marks, vec!["commit 1".to_string()]);
        let mut dev = vec![0u8; 9 * 512];
        target.read_exact_at(&mut dev, 0).unwrap();
        assert_eq!(&dev[..1024], &[1u8; 1024][..]);
        assert_eq!(&dev[1024..1536], &[7u8; 512][..]); // sector 2, not discarded
        assert_eq!(&dev[1536..3584], &[0u8; 2048][..]); // sectors 3-6 discarded
        assert_eq!(&dev[8 * 512..], &[9u8; 512][..]);
    }
}
