//! A deterministic generator of Tezos-like traces.
//!
//! It keeps a structured model of the context it describes (accounts and
//! their fields, big maps and their entries, cycle data, delegate stakes),
//! so every recorded read result is what a correct store must answer, and
//! emits blocks shaped after the published mainnet measurements
//! (docs/GENERATOR.md; parameters and their sources in [`preset`]).
//!
//! Invariants:
//! - The same preset and seed give the same bytes, on any machine
//!   (ChaCha8 random numbers, no hash-map iteration order in the output).
//! - Contexts are linear within a block: each write consumes the current
//!   context (`Forget`) and makes the next (`Keep`); reads use it (`Keep`);
//!   the commit consumes the last one. `Generator::run` names commits with
//!   opaque identifiers (`gen-<seed>-<block>`), which replays cannot check;
//!   [`run_with_hashes`] applies each block to a scratch store as it goes
//!   and names every commit by its real Tezos hash (`Co...`), so that any
//!   replay, pando's or irmin's, checks each one.

pub mod model;
pub mod preset;

use crate::replay::{ReplayError, Replayer};
use pando_core::trace::{ContextId, Key, Row, Scope};
use pando_store::Store;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal, Zipf};

use model::{Account, BigMap, Field, hex_step};
pub use preset::Preset;

/// Counts of what was generated.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    pub blocks: u64,
    pub rows: u64,
    pub writes: u64,
    pub reads: u64,
    pub removes: u64,
    pub copies: u64,
}

/// Runs `generator` to its end, applying each block to `scratch` (a store
/// used for nothing else) before passing its rows to `sink`, with every
/// commit and checkout naming the commit's real hash in base58 (`Co...`),
/// as irmin's trace writer does.
pub fn run_with_hashes<E: From<ReplayError>>(
    generator: &mut Generator,
    scratch: &Store,
    sink: &mut dyn FnMut(&Row) -> Result<(), E>,
) -> Result<Summary, E> {
    let mut replayer = Replayer::new(scratch);
    // The generator refers only to the previous block's commit: its
    // placeholder name and its real one.
    let mut previous: Option<(Vec<u8>, Vec<u8>)> = None;
    while generator.block < generator.preset.blocks {
        for row in generator.next_block() {
            if !matches!(row, Row::Checkout { .. } | Row::Commit { .. }) {
                // Written, then applied: no large row is held twice.
                sink(&row)?;
                replayer.apply(row)?;
                continue;
            }
            // A checkout or a commit (small rows): applied as generated,
            // written with the real names.
            replayer.apply(row.clone())?;
            let mut row = row;
            let mut committed = None;
            match &mut row {
                Row::Checkout { hash, .. } => rename(hash.value_mut(), &previous),
                Row::Commit { hash, parents, .. } => {
                    for parent in parents.iter_mut() {
                        rename(parent.value_mut(), &previous);
                    }
                    let real = replayer.last_commit.expect("the commit was applied").to_base58().into_bytes();
                    committed = Some((std::mem::replace(hash.value_mut(), real.clone()), real));
                }
                _ => unreachable!("checked above"),
            }
            sink(&row)?;
            if committed.is_some() {
                previous = committed;
            }
        }
    }
    Ok(generator.summary.clone())
}

/// Names the previous commit by its real hash where `id` is its placeholder.
fn rename(id: &mut Vec<u8>, previous: &Option<(Vec<u8>, Vec<u8>)>) {
    if let Some((placeholder, real)) = previous
        && id == placeholder
    {
        *id = real.clone();
    }
}

pub struct Generator {
    preset: Preset,
    seed: u64,
    rng: ChaCha8Rng,
    accounts: Vec<Account>,
    big_maps: Vec<BigMap>,
    /// Account ids of the delegates.
    delegates: Vec<u32>,
    ctx: ContextId,
    next_ctx: ContextId,
    block: u64,
    global_counter: u64,
    summary: Summary,
}

fn key(steps: &[&[u8]]) -> Key {
    steps.iter().map(|s| s.to_vec()).collect()
}

impl Generator {
    pub fn new(preset: &Preset, seed: u64) -> Generator {
        Generator {
            preset: preset.clone(),
            seed,
            rng: ChaCha8Rng::seed_from_u64(seed),
            accounts: Vec::new(),
            big_maps: Vec::new(),
            delegates: Vec::new(),
            ctx: 0,
            next_ctx: 1,
            block: 0,
            global_counter: 0,
            summary: Summary::default(),
        }
    }

    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// Generates every block, handing each row to `sink`.
    pub fn run<E>(&mut self, sink: &mut dyn FnMut(&Row) -> Result<(), E>) -> Result<Summary, E> {
        while self.block < self.preset.blocks {
            for row in self.next_block() {
                sink(&row)?;
            }
        }
        Ok(self.summary.clone())
    }

    fn commit_id(&self, block: u64) -> Vec<u8> {
        format!("gen-{:x}-{block}", self.seed).into_bytes()
    }

    /// The rows of the next block, ending with its commit.
    pub fn next_block(&mut self) -> Vec<Row> {
        let mut rows = Vec::with_capacity(1024);
        let n = self.block;
        if n == 0 {
            self.ctx = 0;
            self.genesis(&mut rows);
        } else {
            self.ctx = self.fresh_ctx();
            rows.push(Row::Checkout { hash: Scope::Keep(self.commit_id(n - 1)), ctx: Scope::Keep(self.ctx) });
            self.block_body(&mut rows);
            if n.is_multiple_of(self.preset.cycle_blocks) {
                self.cycle_boundary(&mut rows, n / self.preset.cycle_blocks);
            }
        }
        let parents = if n == 0 { vec![] } else { vec![Scope::Forget(self.commit_id(n - 1))] };
        rows.push(Row::Commit {
            hash: Scope::Keep(self.commit_id(n)),
            date: 1_600_000_000 + 30 * n as i64,
            message: format!("block {n}").into_bytes(),
            parents,
            in_ctx: Scope::Forget(self.ctx),
        });
        self.block += 1;
        self.summary.blocks += 1;
        self.summary.rows += rows.len() as u64;
        rows
    }

    fn fresh_ctx(&mut self) -> ContextId {
        let id = self.next_ctx;
        self.next_ctx += 1;
        id
    }

    fn add(&mut self, rows: &mut Vec<Row>, key: Key, value: Vec<u8>) {
        let out = self.fresh_ctx();
        rows.push(Row::Add { key, value, in_ctx: Scope::Forget(self.ctx), out_ctx: Scope::Keep(out) });
        self.ctx = out;
        self.summary.writes += 1;
    }

    fn remove(&mut self, rows: &mut Vec<Row>, key: Key) {
        let out = self.fresh_ctx();
        rows.push(Row::Remove { key, in_ctx: Scope::Forget(self.ctx), out_ctx: Scope::Keep(out) });
        self.ctx = out;
        self.summary.removes += 1;
    }

    fn copy(&mut self, rows: &mut Vec<Row>, source: Key, target: Key) {
        let out = self.fresh_ctx();
        rows.push(Row::Copy { source, target, in_ctx: Scope::Forget(self.ctx), out_ctx: Scope::Keep(out) });
        self.ctx = out;
        self.summary.copies += 1;
    }

    fn find(&mut self, rows: &mut Vec<Row>, key: Key, found: bool) {
        rows.push(Row::Find { key, found, ctx: Scope::Keep(self.ctx) });
        self.summary.reads += 1;
    }

    fn mem(&mut self, rows: &mut Vec<Row>, key: Key, found: bool) {
        rows.push(Row::Mem { key, found, ctx: Scope::Keep(self.ctx) });
        self.summary.reads += 1;
    }

    fn mem_tree(&mut self, rows: &mut Vec<Row>, key: Key, found: bool) {
        rows.push(Row::MemTree { key, found, ctx: Scope::Keep(self.ctx) });
        self.summary.reads += 1;
    }

    /// A value whose size follows the published distribution.
    fn value(&mut self) -> Vec<u8> {
        let len = model::value_size(&mut self.rng);
        let mut value = vec![0u8; len];
        self.rng.fill(&mut value[..]);
        value
    }

    fn small_value(&mut self, len: usize) -> Vec<u8> {
        let mut value = vec![0u8; len];
        self.rng.fill(&mut value[..]);
        value
    }

    fn new_account(&mut self, rows: &mut Vec<Row>, with_script: bool) -> u32 {
        let id = self.accounts.len() as u32;
        let account = Account::new(id, self.seed);
        self.accounts.push(account);
        let path = self.accounts[id as usize].path();
        let balance = self.value();
        self.add(rows, model::field_key(&path, Field::Balance), balance);
        let counter = self.small_value(4);
        self.add(rows, model::field_key(&path, Field::Counter), counter);
        let fields = &mut self.accounts[id as usize].fields;
        fields.insert(Field::Balance);
        fields.insert(Field::Counter);
        if with_script {
            for field in [Field::Script, Field::Storage, Field::UsedBytes, Field::PaidBytes] {
                let value = if field == Field::Script { model::script(&mut self.rng) } else { self.value() };
                self.add(rows, model::field_key(&path, field), value);
                self.accounts[id as usize].fields.insert(field);
            }
        }
        id
    }

    fn genesis(&mut self, rows: &mut Vec<Row>) {
        for (name, len) in [
            (&[b"version".as_slice()][..], 10),
            (&[b"v1", b"constants"], 2048),
            (&[b"v1", b"cycle_eras"], 64),
            (&[b"first_level_of_protocol"], 4),
            (&[b"votes", b"current_period"], 16),
        ] {
            let value = self.small_value(len);
            self.add(rows, key(name), value);
        }
        self.add(rows, key(&[b"contracts", b"global_counter"]), 0u32.to_be_bytes().to_vec());
        for _ in 0..self.preset.genesis_accounts {
            let scripted = self.rng.gen_ratio(1, 20);
            self.new_account(rows, scripted);
        }
        let delegates = self.preset.delegates.min(self.accounts.len() as u64);
        for i in 0..delegates {
            let id = (i * self.accounts.len() as u64 / delegates) as u32;
            self.delegates.push(id);
            let stake = self.small_value(8);
            let address = self.accounts[id as usize].address.clone();
            self.add(rows, key(&[b"staking_balance", b"current", &address]), stake);
        }
        for _ in 0..self.preset.big_maps {
            self.create_big_map(rows, self.preset.genesis_big_map_entries);
        }
        for c in 0..=self.preset.preserved_cycles {
            self.cycle_data(rows, c, self.preset.cycle_burst_objects / 5);
        }
    }

    /// A new big map with its types, `entries` entries and its size.
    fn create_big_map(&mut self, rows: &mut Vec<Row>, entries: u64) {
        let id = self.big_maps.len() as u64;
        self.big_maps.push(BigMap::new(id));
        for field in [b"key_type".as_slice(), b"value_type"] {
            let value = self.small_value(21);
            self.add(rows, model::big_map_key(id, &[field]), value);
        }
        for _ in 0..entries {
            self.big_map_insert(rows, id as usize);
        }
        let total = self.small_value(4);
        self.add(rows, model::big_map_key(id, &[b"total_bytes"]), total);
    }

    fn big_map_insert(&mut self, rows: &mut Vec<Row>, m: usize) {
        let entry = self.big_maps[m].insert();
        let h = hex_step(model::entry_hash(self.big_maps[m].id, entry));
        let data = self.value();
        let len = self.small_value(2);
        self.add(rows, model::big_map_key(self.big_maps[m].id, &[b"contents", &h, b"data"]), data);
        self.add(rows, model::big_map_key(self.big_maps[m].id, &[b"contents", &h, b"len"]), len);
    }

    /// An account: mostly from the Zipf-distributed hot set, some recent,
    /// some uniformly old (cold reads).
    fn pick_account(&mut self) -> u32 {
        let n = self.accounts.len() as u64;
        let p: f64 = self.rng.r#gen();
        let i = if p < preset::PICK_HOT {
            let zipf = Zipf::new(n, preset::ZIPF_EXPONENT).expect("valid Zipf parameters");
            // Rank r (1-based) maps to a fixed pseudo-random account.
            // The oldest accounts are the hottest (exchanges, bakers); their
            // addresses are spread over the directory like any other.
            zipf.sample(&mut self.rng) as u64 - 1
        } else if p < preset::PICK_HOT + preset::PICK_RECENT {
            let recent = (n / 20).max(1);
            n - 1 - self.rng.gen_range(0..recent)
        } else {
            self.rng.gen_range(0..n)
        };
        i as u32
    }

    fn block_body(&mut self, rows: &mut Vec<Row>) {
        // What every block reads and writes (protocol constants, branches).
        for name in
            [&[b"version".as_slice()][..], &[b"v1", b"constants"], &[b"first_level_of_protocol"], &[b"votes", b"current_period"]]
        {
            self.find(rows, key(name), true);
        }
        let cycle = (self.block / self.preset.cycle_blocks).to_string().into_bytes();
        self.mem_tree(rows, key(&[b"cycle", &cycle]), true);
        self.find(rows, key(&[b"cycle", &cycle, b"random_seed"]), true);
        for name in [b"endorsement_branch".as_slice(), b"grand_parent_branch"] {
            let value = self.small_value(36);
            self.add(rows, key(&[name]), value);
        }
        let mean = self.preset.mean_transactions;
        // Log-normal block sizes: median about mean / 1.65, heavy tail.
        let sizes = LogNormal::new((mean / 1.65).ln(), 1.0).expect("valid log-normal parameters");
        let transactions = (sizes.sample(&mut self.rng).round() as u64).min((mean * 40.0) as u64);
        for _ in 0..transactions {
            self.transaction(rows);
        }
    }

    fn transaction(&mut self, rows: &mut Vec<Row>) {
        // Every manager operation bumps the global counter.
        let counter_key = key(&[b"contracts", b"global_counter"]);
        self.find(rows, counter_key.clone(), true);
        self.global_counter += 1;
        self.add(rows, counter_key, (self.global_counter as u32).to_be_bytes().to_vec());

        let source = self.pick_account();
        let path = self.accounts[source as usize].path();
        let alive = self.accounts[source as usize].alive;
        self.mem_tree(rows, path.clone(), alive);
        if !alive {
            // A failed operation: only the reads happened.
            return;
        }
        let fields = self.accounts[source as usize].fields;
        self.find(rows, model::field_key(&path, Field::Balance), fields.contains(Field::Balance));
        self.find(rows, model::field_key(&path, Field::Counter), fields.contains(Field::Counter));
        let counter = self.small_value(4);
        self.add(rows, model::field_key(&path, Field::Counter), counter);
        self.accounts[source as usize].fields.insert(Field::Counter);
        let balance = self.value();
        self.add(rows, model::field_key(&path, Field::Balance), balance);
        self.accounts[source as usize].fields.insert(Field::Balance);

        let kind: f64 = self.rng.r#gen();
        let new_account_chance = self.preset.new_accounts_per_block / self.preset.mean_transactions;
        // Mix of manager operations (chosen: transfers dominate mainnet,
        // contract calls come next, originations are rare).
        if kind < 0.72 {
            self.transfer(rows, new_account_chance);
        } else if kind < 0.955 {
            self.contract_call(rows);
        } else if kind < 0.96 {
            self.new_account(rows, true);
            if self.rng.gen_ratio(1, 4) {
                let entries = self.rng.gen_range(1..20);
                self.create_big_map(rows, entries);
            }
        } else if kind < 0.99 {
            self.delegation(rows, source);
        } else if self.accounts[source as usize].removable() {
            // An emptied implicit account disappears from the context.
            self.remove(rows, path);
            self.accounts[source as usize].kill();
        }
    }

    fn transfer(&mut self, rows: &mut Vec<Row>, new_account_chance: f64) {
        if self.rng.gen_bool(new_account_chance.min(1.0)) {
            let id = self.accounts.len() as u32;
            let address = Account::new(id, self.seed).path();
            self.mem_tree(rows, address, false);
            self.new_account(rows, false);
            return;
        }
        let target = self.pick_account();
        let path = self.accounts[target as usize].path();
        let alive = self.accounts[target as usize].alive;
        let has_balance = alive && self.accounts[target as usize].fields.contains(Field::Balance);
        // A balance updated: mem, read twice, write.
        let balance_key = model::field_key(&path, Field::Balance);
        self.mem(rows, balance_key.clone(), has_balance);
        self.find(rows, balance_key.clone(), has_balance);
        self.find(rows, balance_key.clone(), has_balance);
        let balance = self.value();
        self.add(rows, balance_key, balance);
        let account = &mut self.accounts[target as usize];
        account.alive = true;
        account.fields.insert(Field::Balance);
    }

    fn contract_call(&mut self, rows: &mut Vec<Row>) {
        let maps = self.big_maps.len() as u64;
        let zipf = Zipf::new(maps, 1.5).expect("valid Zipf parameters");
        let m = (zipf.sample(&mut self.rng) as u64 - 1) as usize;
        let id = self.big_maps[m].id;
        let total = model::big_map_key(id, &[b"total_bytes"]);
        self.find(rows, total.clone(), true);
        for _ in 0..self.rng.gen_range(1..5) {
            let existing = self.big_maps[m].live_count() > 0 && self.rng.gen_bool(0.7);
            if existing {
                let entry = self.big_maps[m].pick(&mut self.rng);
                let h = hex_step(model::entry_hash(id, entry));
                let data = model::big_map_key(id, &[b"contents", &h, b"data"]);
                self.mem(rows, data.clone(), true);
                if self.rng.gen_ratio(1, 10) {
                    self.remove(rows, model::big_map_key(id, &[b"contents", &h]));
                    self.big_maps[m].remove(entry);
                } else {
                    let value = self.value();
                    self.add(rows, data, value);
                }
            } else {
                let next = self.big_maps[m].peek_next();
                let h = hex_step(model::entry_hash(id, next));
                self.mem(rows, model::big_map_key(id, &[b"contents", &h, b"data"]), false);
                self.big_map_insert(rows, m);
            }
        }
        let value = self.small_value(4);
        self.add(rows, total, value);
    }

    fn delegation(&mut self, rows: &mut Vec<Row>, source: u32) {
        let d = self.rng.gen_range(0..self.delegates.len());
        let delegate = self.accounts[self.delegates[d] as usize].address.clone();
        let path = self.accounts[source as usize].path();
        self.add(rows, model::field_key(&path, Field::Delegate), delegate.clone());
        self.accounts[source as usize].fields.insert(Field::Delegate);
        let stake_key = key(&[b"staking_balance", b"current", &delegate]);
        self.find(rows, stake_key.clone(), true);
        let stake = self.small_value(8);
        self.add(rows, stake_key, stake);
    }

    /// Data written for cycle `cycle`: seed, stake distribution, and
    /// `objects` per-delegate entries.
    fn cycle_data(&mut self, rows: &mut Vec<Row>, cycle: u64, objects: u64) {
        let c = cycle.to_string().into_bytes();
        let seed = self.small_value(32);
        self.add(rows, key(&[b"cycle", &c, b"random_seed"]), seed);
        let distribution = self.small_value(64 * self.delegates.len().max(1));
        self.add(rows, key(&[b"cycle", &c, b"selected_stake_distribution"]), distribution);
        for i in 0..objects {
            let d = self.delegates[(i % self.delegates.len() as u64) as usize];
            let address = self.accounts[d as usize].address.clone();
            let slot = (i / self.delegates.len() as u64).to_string().into_bytes();
            let value = self.small_value(8);
            self.add(rows, key(&[b"cycle", &c, b"delegates", &address, &slot]), value);
        }
    }

    fn cycle_boundary(&mut self, rows: &mut Vec<Row>, cycle: u64) {
        let preserved = self.preset.preserved_cycles;
        // Every fifth cycle writes far more (docs/GENERATOR.md).
        let burst = if cycle.is_multiple_of(5) { self.preset.cycle_burst_objects } else { self.preset.cycle_burst_objects / 5 };
        self.cycle_data(rows, cycle + preserved, burst);
        // A snapshot of the delegates' stakes is copied.
        let snapshot = cycle.to_string().into_bytes();
        self.copy(rows, key(&[b"staking_balance", b"current"]), key(&[b"staking_balance", b"snapshot", &snapshot]));
        // Old cycle data is removed.
        if cycle >= 2 {
            let old = (cycle - 2).to_string().into_bytes();
            self.mem_tree(rows, key(&[b"cycle", &old]), true);
            self.remove(rows, key(&[b"cycle", &old]));
        }
        if cycle > preserved + 2 {
            let old = (cycle - preserved - 2).to_string().into_bytes();
            self.remove(rows, key(&[b"staking_balance", b"snapshot", &old]));
        }
    }
}
