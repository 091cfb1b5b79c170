//! A writer meeting a fault below it (a full or failing device): where the
//! error comes back to a `ubio::File`.

use std::io::{self, Write};

/// An error that came back to a writer: the error, the call that returned
/// it ("write", "flush", "fsync" or "close") and the bytes written before
/// it.
pub type Met = (io::Error, &'static str, u64);

/// Write bytes `from..end` with `f`, 1 MiB a call, `fill(off, piece)`
/// giving each piece's bytes, until an error comes back: from a write, the
/// flush, or (an unmanaged file, the buffered backend: its writeback
/// errors only fsync sees) fsync; then close. Ok with close's stats when
/// none came back.
pub fn write_until_error(
    mut f: ubio::File,
    from: u64,
    end: u64,
    mut fill: impl FnMut(u64, &mut [u8]),
) -> Result<ubio::Stats, Met> {
    const MIB: u64 = 1 << 20;
    // Page-aligned: O_DIRECT takes its writes as they are (the emulated
    // backend's direct writes, where they are on).
    let mut buf = ubio::AlignedBuf::page_aligned(MIB as usize);
    let mut off = from;
    while off < end {
        let piece = &mut buf[..MIB.min(end - off) as usize];
        fill(off, piece);
        f.write_all(piece).map_err(|e| (e, "write", off))?;
        off += piece.len() as u64;
    }
    f.flush().map_err(|e| (e, "flush", off))?;
    if !f.stats().managed {
        f.sync_all().map_err(|e| (e, "fsync", off))?;
    }
    f.close().map_err(|e| (e, "close", off))
}
