//! How the data moves: `--direct-reads`, `--direct-writes` and
//! `--small-readahead` of the commands that stream files (`cat`, `cp`):
//! when the emulated backend moves data through O_DIRECT instead of the
//! page cache, and when it reads ahead in small folios itself. The same
//! names as the shim's environment (UBIO_DIRECT_READS, UBIO_DIRECT_WRITES,
//! UBIO_SMALL_READAHEAD), which set them here too.

use ubio::{DirectReads, DirectWrites, SmallReadahead};

#[derive(clap::Args, Clone, Copy, Debug)]
pub struct DataPathArgs {
    /// When the emulated backend reads through O_DIRECT: never,
    /// under-reclaim, when-faster (it races the page cache per stream) or
    /// always.
    #[arg(
        long,
        value_name = "WHEN",
        env = DirectReads::ENV,
        default_value = "when-faster"
    )]
    direct_reads: DirectReads,
    /// When the emulated backend writes whole aligned blocks through
    /// O_DIRECT: never, when-faster (it races the page cache per stream,
    /// writeback counted in) or always.
    #[arg(
        long,
        value_name = "WHEN",
        env = DirectWrites::ENV,
        default_value = "when-faster"
    )]
    direct_writes: DirectWrites,
    /// When the emulated backend reads ahead in small folios itself instead
    /// of through the kernel's readahead: never, when-fragmented (where the
    /// device's readahead reaches 2 MiB folios, while kswapd reclaims for
    /// high-order allocations) or always.
    #[arg(
        long,
        value_name = "WHEN",
        env = SmallReadahead::ENV,
        default_value = "when-fragmented"
    )]
    small_readahead: SmallReadahead,
}

impl DataPathArgs {
    pub fn apply<'o>(&self, open: &'o mut ubio::OpenOptions) -> &'o mut ubio::OpenOptions {
        open.direct_reads(self.direct_reads)
            .direct_writes(self.direct_writes)
            .small_readahead(self.small_readahead)
    }
}
