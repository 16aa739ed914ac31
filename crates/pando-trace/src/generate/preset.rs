//! Named sets of generator parameters, and where each value comes from.
//!
//! Sources are the published measurements of the mainnet context
//! (Hangzhou/Lima, irmin's replay reports), named in docs/GENERATOR.md.
//! Where a value had to be chosen, the comment says so and why.

/// The parameters of a generated trace.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Preset {
    pub name: &'static str,
    /// Blocks (commits) in the trace.
    pub blocks: u64,
    /// Blocks per cycle. Mainnet: 8,192 (Hangzhou), 16,384 (Lima). Scaled
    /// down in smaller presets so that each crosses several cycle boundaries.
    pub cycle_blocks: u64,
    /// Implicit and originated accounts at genesis (chosen: mainnet had
    /// ~1.5M accounts at Lima; scaled to keep genesis a small part of the run).
    pub genesis_accounts: u64,
    /// New accounts per block on average (chosen: mainnet grew by roughly
    /// 1,000 accounts a day, i.e. ~0.35 per block at 30 s blocks; raised so
    /// that growth shows within a preset).
    pub new_accounts_per_block: f64,
    /// Big maps at genesis, and entries of each (directories of thousands to
    /// millions of entries, docs/GENERATOR.md).
    pub big_maps: u64,
    pub genesis_big_map_entries: u64,
    /// Delegates (bakers); mainnet has about 400.
    pub delegates: u64,
    /// Mean manager operations (transactions) per block. Chosen so that a
    /// median block makes several hundred writes and the heaviest reach the
    /// published heavy Lima block (2,363 mem, 3,892 reads, 3,180 writes).
    pub mean_transactions: f64,
    /// Objects written at a cycle boundary; every fifth cycle writes five
    /// times more ("over 30,000 objects every 5 cycles, fewer at each cycle").
    pub cycle_burst_objects: u64,
    /// Cycles of data kept before the old ones are removed (Tezos keeps
    /// `preserved_cycles + 2` cycles of seeds and snapshots).
    pub preserved_cycles: u64,
}

impl Preset {
    pub const TINY: Preset = Preset {
        name: "tiny",
        blocks: 200,
        cycle_blocks: 32,
        genesis_accounts: 2_000,
        new_accounts_per_block: 2.0,
        big_maps: 4,
        genesis_big_map_entries: 300,
        delegates: 20,
        mean_transactions: 8.0,
        cycle_burst_objects: 300,
        preserved_cycles: 3,
    };
    pub const SMALL: Preset = Preset {
        name: "small",
        blocks: 5_000,
        cycle_blocks: 512,
        genesis_accounts: 50_000,
        new_accounts_per_block: 5.0,
        big_maps: 16,
        genesis_big_map_entries: 5_000,
        delegates: 100,
        mean_transactions: 25.0,
        cycle_burst_objects: 6_000,
        preserved_cycles: 5,
    };
    pub const MEDIUM: Preset = Preset {
        name: "medium",
        blocks: 50_000,
        cycle_blocks: 4_096,
        genesis_accounts: 200_000,
        new_accounts_per_block: 5.0,
        big_maps: 32,
        genesis_big_map_entries: 20_000,
        delegates: 400,
        mean_transactions: 25.0,
        cycle_burst_objects: 30_000,
        preserved_cycles: 5,
    };
    pub const LARGE: Preset = Preset {
        name: "large",
        blocks: 300_000,
        cycle_blocks: 16_384,
        genesis_accounts: 500_000,
        new_accounts_per_block: 5.0,
        big_maps: 64,
        genesis_big_map_entries: 50_000,
        delegates: 400,
        mean_transactions: 25.0,
        cycle_burst_objects: 30_000,
        preserved_cycles: 5,
    };

    pub const ALL: [&'static Preset; 4] = [&Preset::TINY, &Preset::SMALL, &Preset::MEDIUM, &Preset::LARGE];

    pub fn named(name: &str) -> Option<&'static Preset> {
        Preset::ALL.into_iter().find(|p| p.name == name)
    }
}

/// Share of contents by size in bytes, powers of two (docs/GENERATOR.md): the
/// remaining 0.2% form a tail from 512 bytes to 256 KB (scripts and big map
/// values), drawn log-uniformly.
pub const VALUE_SIZE_SHARES: [(usize, f64); 9] =
    [(1, 0.007), (2, 0.297), (4, 0.485), (8, 0.014), (16, 0.039), (32, 0.053), (64, 0.094), (128, 0.007), (256, 0.002)];
/// Largest value of the tail.
pub const MAX_VALUE_BYTES: usize = 256 << 10;

/// Access skew: the share of account picks that go to the Zipf-distributed
/// hot set, to recently created accounts, and uniformly to any account
/// (cold reads). Chosen; docs/GENERATOR.md: "most blocks touch recent or hot
/// accounts, some touch old ones".
pub const PICK_HOT: f64 = 0.70;
pub const PICK_RECENT: f64 = 0.20;
/// Zipf exponent of the hot set (chosen: `contracts/global_counter` is read
/// on every transaction and a few big maps dominate, a steep skew).
pub const ZIPF_EXPONENT: f64 = 1.1;
