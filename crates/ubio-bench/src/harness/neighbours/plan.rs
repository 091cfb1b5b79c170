//! What a neighbours run measures, and in which order.
//!
//! A *cell* is one service load (pgbench read-only or read-write against
//! PostgreSQL, wrk against nginx) either alone or beside one stream (tar,
//! restic, rsync, an image copy) in one mode (plain, `ubio run`, under the
//! policy daemon, or with the tool's own option). A *block* is one pressure
//! (global or cgroup) and one service, set up once: its rounds each run
//! every cell of the block once, in a new random order, and the blocks
//! themselves come in a random order. One seed gives the whole plan (the
//! report keeps it), as [`crate::harness::schedule`] does for the modes of
//! a benchmark: on a VM that hands free memory back to its host, what ran
//! before a run decides where its pages come from.

use crate::harness::schedule::shuffle;
use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A service: a program of Debian's, started by the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Service {
    Postgres,
    Nginx,
}

impl Service {
    pub const ALL: [Service; 2] = [Service::Postgres, Service::Nginx];

    pub fn name(self) -> &'static str {
        match self {
            Service::Postgres => "postgres",
            Service::Nginx => "nginx",
        }
    }

    /// The loads that drive it.
    pub fn loads(self) -> &'static [Load] {
        match self {
            Service::Postgres => &[Load::PgbenchRo, Load::PgbenchRw],
            Service::Nginx => &[Load::Wrk],
        }
    }
}

/// What drives a service, and whose latency is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Load {
    /// `pgbench -S`: point selects by primary key.
    PgbenchRo,
    /// pgbench's default TPC-B-like transaction (3 updates, an insert, a
    /// select, a commit that waits for the WAL's fsync).
    PgbenchRw,
    /// wrk, a random file of the set per request.
    Wrk,
}

impl Load {
    pub const ALL: [Load; 3] = [Load::PgbenchRo, Load::PgbenchRw, Load::Wrk];

    pub fn name(self) -> &'static str {
        match self {
            Load::PgbenchRo => "pgbench-ro",
            Load::PgbenchRw => "pgbench-rw",
            Load::Wrk => "wrk",
        }
    }

    pub fn service(self) -> Service {
        match self {
            Load::PgbenchRo | Load::PgbenchRw => Service::Postgres,
            Load::Wrk => Service::Nginx,
        }
    }

    /// What its rate counts.
    pub fn unit(self) -> &'static str {
        match self {
            Load::PgbenchRo | Load::PgbenchRw => "transactions/s",
            Load::Wrk => "requests/s",
        }
    }
}

/// A large stream beside the service, by a program of Debian's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stream {
    /// `tar -cf` of the tree into an archive.
    Tar,
    /// `restic backup` of the tree into a new repository (Go, static: the
    /// shim cannot enter it, the engine follows it).
    Restic,
    /// `rsync` of the image file.
    Rsync,
    /// `cp` of the image file (own option: `dd iflag=nocache
    /// oflag=nocache`).
    Image,
}

impl Stream {
    pub const ALL: [Stream; 4] = [Stream::Tar, Stream::Restic, Stream::Rsync, Stream::Image];

    pub fn name(self) -> &'static str {
        match self {
            Stream::Tar => "tar",
            Stream::Restic => "restic",
            Stream::Rsync => "rsync",
            Stream::Image => "image-cp",
        }
    }

    /// Whether it reads the tree (else the image file).
    pub fn reads_tree(self) -> bool {
        matches!(self, Stream::Tar | Stream::Restic)
    }
}

/// How a stream runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The command as it is.
    Plain,
    /// `ubio run -- COMMAND`.
    UbioRun,
    /// The command as it is, its cgroup a scope of `ubio policy run`.
    Policy,
    /// The tool's own option for the page cache, where it has one.
    Own,
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::Plain, Mode::UbioRun, Mode::Policy, Mode::Own];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Plain => "plain",
            Mode::UbioRun => "ubio-run",
            Mode::Policy => "policy",
            Mode::Own => "own",
        }
    }

    /// ubio applies the contract (for the summary's words).
    pub fn is_ubio(self) -> bool {
        matches!(self, Mode::UbioRun | Mode::Policy)
    }
}

/// How memory is made scarce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pressure {
    /// A balloon leaves the memory to the whole machine (kswapd reclaims).
    Global,
    /// The service and the stream each in a memory cgroup with a limit.
    Cgroup,
}

impl Pressure {
    pub const ALL: [Pressure; 2] = [Pressure::Global, Pressure::Cgroup];

    pub fn name(self) -> &'static str {
        match self {
            Pressure::Global => "global",
            Pressure::Cgroup => "cgroup",
        }
    }
}

macro_rules! display_by_name {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    )*};
}
display_by_name!(Service, Load, Stream, Mode, Pressure);

/// Parses a comma-separated list of names (each once) against `all`.
pub fn parse_list<T: Copy + PartialEq + fmt::Display>(
    what: &str,
    list: &str,
    all: &[T],
) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for word in list.split(',').map(str::trim) {
        let Some(&t) = all.iter().find(|t| t.to_string() == word) else {
            let names: Vec<String> = all.iter().map(T::to_string).collect();
            return Err(format!(
                "unknown {what} '{word}' (one of: {})",
                names.join(", ")
            ));
        };
        if out.contains(&t) {
            return Err(format!("{what} '{word}' listed twice"));
        }
        out.push(t);
    }
    Ok(out)
}

/// A stream in a mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Beside {
    pub stream: Stream,
    pub mode: Mode,
}

/// One measured configuration of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Cell {
    pub load: Load,
    /// None: the load alone (its baseline).
    pub beside: Option<Beside>,
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.beside {
            None => write!(f, "{} alone", self.load),
            Some(b) => write!(f, "{} + {} ({})", self.load, b.stream, b.mode),
        }
    }
}

/// One pressure and one service, set up once, and its rounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    pub pressure: Pressure,
    pub service: Service,
    /// Round 1's order first; every round holds every cell once.
    pub rounds: Vec<Vec<Cell>>,
}

/// What to plan.
#[derive(Clone)]
pub struct Want<'a> {
    pub pressures: &'a [Pressure],
    pub loads: &'a [Load],
    pub streams: &'a [Stream],
    pub modes: &'a [Mode],
    pub rounds: u32,
    /// The streams that have an own option (see [`Mode::Own`]).
    pub has_own: &'a dyn Fn(Stream) -> bool,
}

/// The cells of one service: each of its loads alone, and beside every
/// stream in every mode it can run in.
pub fn cells(service: Service, w: &Want) -> Vec<Cell> {
    let mut out = Vec::new();
    for &load in w.loads.iter().filter(|l| l.service() == service) {
        out.push(Cell { load, beside: None });
        for &stream in w.streams {
            for &mode in w.modes {
                if mode == Mode::Own && !(w.has_own)(stream) {
                    continue;
                }
                out.push(Cell {
                    load,
                    beside: Some(Beside { stream, mode }),
                });
            }
        }
    }
    out
}

/// The blocks in the order they run, from `seed`.
pub fn plan(seed: u64, w: &Want) -> Vec<Block> {
    let mut rng = SplitMix64(seed);
    let mut services: Vec<Service> = Service::ALL
        .into_iter()
        .filter(|s| w.loads.iter().any(|l| l.service() == *s))
        .collect();
    services.sort();
    let mut blocks: Vec<Block> = w
        .pressures
        .iter()
        .flat_map(|&pressure| {
            services.iter().map(move |&service| Block {
                pressure,
                service,
                rounds: Vec::new(),
            })
        })
        .collect();
    shuffle(&mut rng, &mut blocks);
    for b in &mut blocks {
        let cells = cells(b.service, w);
        b.rounds = (0..w.rounds)
            .map(|_| {
                let mut order = cells.clone();
                shuffle(&mut rng, &mut order);
                order
            })
            .collect();
    }
    blocks
}

/// Every run of a plan in order: (block index, round 1-based, cell).
pub fn runs(blocks: &[Block]) -> impl Iterator<Item = (usize, u32, Cell)> + '_ {
    blocks.iter().enumerate().flat_map(|(i, b)| {
        b.rounds
            .iter()
            .zip(1..)
            .flat_map(move |(order, round)| order.iter().map(move |&c| (i, round, c)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn want(rounds: u32) -> Want<'static> {
        Want {
            pressures: &Pressure::ALL,
            loads: &Load::ALL,
            streams: &Stream::ALL,
            modes: &Mode::ALL,
            rounds,
            has_own: &|s| s == Stream::Image,
        }
    }

    #[test]
    fn every_cell_once_per_round_and_own_only_where_it_exists() {
        let w = want(3);
        let pg = cells(Service::Postgres, &w);
        // Per load: alone, 4 streams x 3 modes, and the image copy's own.
        assert_eq!(pg.len(), 2 * (1 + 4 * 3 + 1));
        assert_eq!(cells(Service::Nginx, &w).len(), 14);
        assert!(pg
            .iter()
            .filter_map(|c| c.beside)
            .all(|b| b.mode != Mode::Own || b.stream == Stream::Image));
        let blocks = plan(5, &w);
        assert_eq!(blocks.len(), 4, "two pressures x two services");
        for b in &blocks {
            assert_eq!(b.rounds.len(), 3);
            let all: BTreeSet<Cell> = cells(b.service, &w).into_iter().collect();
            for order in &b.rounds {
                assert_eq!(order.len(), all.len());
                assert_eq!(order.iter().copied().collect::<BTreeSet<_>>(), all);
            }
        }
        assert_eq!(runs(&blocks).count(), 3 * 2 * (28 + 14));
    }

    #[test]
    fn the_seed_repeats_the_plan_and_orders_differ() {
        let w = want(4);
        assert_eq!(plan(9, &w), plan(9, &w));
        assert_ne!(plan(9, &w), plan(10, &w));
        let b = &plan(9, &w)[0];
        assert!(b.rounds.windows(2).any(|r| r[0] != r[1]), "{b:?}");
        // Every block comes first for some seed.
        let firsts: BTreeSet<(Pressure, Service)> = (0..40)
            .map(|s| {
                let b = &plan(s, &w)[0];
                (b.pressure, b.service)
            })
            .collect();
        assert_eq!(firsts.len(), 4);
    }

    #[test]
    fn a_service_without_loads_has_no_block() {
        let w = Want {
            loads: &[Load::Wrk],
            pressures: &[Pressure::Cgroup],
            ..want(1)
        };
        let blocks = plan(1, &w);
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].service, Service::Nginx);
    }

    #[test]
    fn lists_parse_by_name() {
        assert_eq!(
            parse_list("mode", "plain, ubio-run", &Mode::ALL),
            Ok(vec![Mode::Plain, Mode::UbioRun])
        );
        let e = parse_list("stream", "tar,zip", &Stream::ALL).unwrap_err();
        assert!(
            e.contains("unknown stream 'zip'") && e.contains("image-cp"),
            "{e}"
        );
        assert!(parse_list("load", "wrk,wrk", &Load::ALL)
            .unwrap_err()
            .contains("twice"));
        assert_eq!(
            Cell {
                load: Load::Wrk,
                beside: Some(Beside {
                    stream: Stream::Restic,
                    mode: Mode::Policy
                })
            }
            .to_string(),
            "wrk + restic (policy)"
        );
    }
}
