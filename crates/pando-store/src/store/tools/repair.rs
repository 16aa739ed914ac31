//! Repair (`Store::repair`, `pando check --repair`): rebuilds a damaged
//! commit index or dictionary from the pack, and rewrites a damaged
//! control slot.
//!
//! What is rebuilt from what:
//! - The index (`index`, or `index-<g>` after a collection): its first
//!   `index_entries` entries are the commits whose records lie below the
//!   checkpoint, found by a scan of every record the pack holds (chunks,
//!   runs below the first chunk, cold files), each keyed by the hash
//!   recomputed from its record. An entry that reads back whole (its
//!   checksum holds) and agrees with the pack is kept where it was; so is a
//!   collected commit's entry (the `COLLECTED` marker: the pack no longer
//!   holds its record). A collected commit's entry that is damaged cannot
//!   be rebuilt: its hash is lost, the control file's counts are lowered,
//!   and the report says how many.
//! - The dictionary (`dict`): entry `id` from the pack's dictionary record
//!   that defined it, or, where a collection removed that record, from the
//!   old file's entry if it and every entry before it read back whole. An
//!   entry neither gives cannot be rebuilt, and the repair refuses.
//! - The control file: a damaged slot is rewritten with the newest valid
//!   state. Without a valid synced slot nothing can be done: the control
//!   file alone says what is durable and where the records below the first
//!   chunk lie.
//!
//! Invariants:
//! - It runs alone: it holds the store's lock, so no writer has it open
//!   (tested by `a_repair_is_refused_while_a_writer_has_the_store_open`).
//! - Nothing is guessed: a pack record that does not read back (its
//!   checksum, its structure) stops the repair, naming its offset, before
//!   anything is written (tested by
//!   `a_damaged_pack_record_is_refused_naming_its_offset`); so does any
//!   disagreement between two sources. Each rebuilt index entry names the
//!   commit the pack holds at its offset, and only a collection's commits
//!   can be lost (asserted in `rebuild_index` and `repair`).
//! - The rebuilt files are verified before they replace anything: the
//!   store is opened on them (read-only, under their temporary names) and
//!   checked with scope `All` (every record scanned, every record reachable
//!   from every commit re-hashed); any problem and nothing is installed
//!   (asserted in `repair`).
//! - A crash leaves each file old or repaired: a rebuilt file is written
//!   under a temporary name, synced, and renamed over the damaged one; it
//!   has the entries the control file records, so either version agrees
//!   with the control file. When a collected commit's hash was lost the
//!   counts change: the control file's synced write follows the rename,
//!   and a crash between the two leaves a store that a repair completes
//!   (tested by `a_crash_during_a_repair_leaves_a_store_a_repair_completes`).
//!   The control write goes to the slot the valid synced state is not in
//!   (asserted in `repair`).
//! - An undamaged store is left as it is: a file is rewritten only if its
//!   bytes differ from the rebuilt ones (tested by
//!   `an_undamaged_store_is_left_as_it_was`).

use pando_core::Hash;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use super::check::{CheckProgress, CheckReport, CheckScope};
use crate::dict;
use crate::error::{Error, Result};
use crate::format::control::{self, Control, HINT_OFFSET, SLOT_SIZE};
use crate::format::record;
use crate::io::{File, Storage, read_all};
use crate::node::Step;
use crate::options::Options;
use crate::pack::{Pack, PackOptions};
use crate::store::open::{self, CONTROL, DICT, LOCK, Named};
use crate::store::{Store, index_file};

/// What the open error of a damaged index or dictionary adds.
pub const REPAIR_HINT: &str = "`pando check --repair` (`Store::repair`) rebuilds the index and the dictionary from the pack";

/// The suffix of the rebuilt files until they are installed.
const TEMP_SUFFIX: &str = ".repair";

/// Problems of the verification listed in a refusal.
const PROBLEMS_SHOWN: usize = 5;

/// What a repair found and did.
#[derive(Clone, Debug)]
pub struct RepairReport {
    /// Entries of the index file and of the dictionary file after the
    /// repair (the commits and steps below the checkpoint).
    pub index_entries: u64,
    pub dict_entries: u64,
    /// The files rewritten; empty when nothing was damaged.
    pub rewritten: Vec<String>,
    /// What was found damaged and what was done about it, one sentence
    /// each; empty when nothing was damaged.
    pub findings: Vec<String>,
    /// The check (scope `All`) of the repaired store, which is clean.
    pub check: CheckReport,
}

impl RepairReport {
    /// True if the repair changed nothing.
    pub fn unchanged(&self) -> bool {
        self.rewritten.is_empty()
    }
}

// Every public method is documented: an embedder reads these first.
#[deny(missing_docs)]
impl Store {
    /// Repairs the store in `dir` (see the module `store::repair`): rebuilds
    /// a damaged index or dictionary from the pack and rewrites a damaged
    /// control slot, after checking the result (scope `All`, reported to
    /// `progress`). No other process may have the store open for writing.
    /// Refuses, with [`Error::CannotRepair`] saying why, what it cannot
    /// rebuild: a damaged pack record, a control file without a valid
    /// synced slot, a dictionary entry no record defines any more.
    pub fn repair(dir: impl AsRef<Path>, options: Options, progress: &mut dyn FnMut(CheckProgress)) -> Result<RepairReport> {
        let (storage, _) = crate::store::store_dir(dir.as_ref(), false)?;
        Store::repair_storage(Arc::new(storage), options, progress)
    }

    /// [`Store::repair`] on any [`Storage`].
    pub fn repair_storage(
        storage: Arc<dyn Storage>,
        options: Options,
        progress: &mut dyn FnMut(CheckProgress),
    ) -> Result<RepairReport> {
        repair(storage, &options, progress)
    }
}

fn cannot(reason: impl Into<String>) -> Error {
    Error::CannotRepair(reason.into())
}

/// `error` (an error opening the store) with [`REPAIR_HINT`] added, if
/// it is damage a repair can mend: in the index or the dictionary.
pub(in crate::store) fn with_hint(error: Error) -> Error {
    match error {
        Error::Corrupt { file, offset, reason } if file == DICT || file.starts_with("index") => {
            Error::Corrupt { file, offset, reason: format!("{reason}; {REPAIR_HINT}") }
        }
        other => other,
    }
}

fn repair(storage: Arc<dyn Storage>, options: &Options, progress: &mut dyn FnMut(CheckProgress)) -> Result<RepairReport> {
    let _lock = storage.lock(LOCK).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock => {
            cannot("another process has the store open for writing (it holds `lock`); stop it first, then repair")
        }
        _ => Error::io(LOCK, "lock")(e),
    })?;
    if !storage.exists(CONTROL).map_err(Error::io(CONTROL, "stat"))? {
        return Err(Error::NotAStore { dir: storage.describe(), reason: format!("it has no `{CONTROL}` file") });
    }
    // What an interrupted repair left.
    for name in storage.list().map_err(Error::io(storage.describe(), "list"))? {
        if name.ends_with(TEMP_SUFFIX) {
            storage.remove(&name).map_err(Error::io(name.as_str(), "remove"))?;
        }
    }
    let mut findings = Vec::new();

    let control_file = storage.open(CONTROL, false).map_err(Error::io(CONTROL, "open"))?;
    let control_bytes = read_all(&*control_file).map_err(Error::io(CONTROL, "read"))?;
    let slots = control::decode(&control_bytes).map_err(|(first, second)| match open::slot_error(first, second) {
        e @ Error::UnsupportedVersion { .. } => e,
        e => cannot(format!(
            "{e}; the control file alone records what is durable and where the records below the first chunk lie, \
             so it cannot be rebuilt from the pack: restore the store from a backup or a snapshot"
        )),
    })?;
    for (i, error) in &slots.damaged {
        let what = if *i == 2 { "hint slot" } else { "synced slot" };
        findings.push(format!(
            "control: {what} {i} is damaged ({error:?}); the newest valid slot (seq {}) is written again",
            slots.newest.seq
        ));
    }
    let mut control = slots.newest.clone();
    let slot_end = control.durable_end;

    let runs = if control.generation > 0 {
        let runs = open::load_mapping(&*storage, control.generation, control.first_chunk_start)
            .map_err(|e| cannot(format!("{e}; the mapping cannot be rebuilt from the pack (it says where the pack is)")))?;
        Some((control.generation, runs))
    } else {
        None
    };
    // The whole batches past the slot's durable end, as a writable open
    // takes them in (commits whose slot was lost, or damaged); the pack
    // itself is not changed.
    let names = storage.list().map_err(Error::io(storage.describe(), "list"))?;
    let durable_end = crate::pack::whole_batches_end(&*storage, &names, control.first_chunk_start, control.durable_end)?;
    assert!(durable_end >= control.durable_end, "taking in whole batches never moves the durable end back");
    let pack = Pack::open(storage.clone(), PackOptions { durable_end, ..PackOptions::of_control(&control, false, runs) })
        .map_err(|e| {
            cannot(format!("the pack does not open: {e}; repair rebuilds only the index, the dictionary and the control file"))
        })?;
    let found = scan(&pack, durable_end)?;
    let recovered: Vec<u64> = found.commits.range(control.durable_end..).map(|(&at, _)| at).collect();
    if let Some(&last) = recovered.last() {
        findings.push(format!(
            "pack: {} commits past the control file's durable end (offset {}) are whole, up to offset {durable_end}; \
             they are taken in, as a writable open does",
            recovered.len(),
            control.durable_end
        ));
        // The control slot will vouch for them: they must be on disk.
        for region in pack.regions().iter().filter(|r| r.end > control.durable_end && r.start < durable_end) {
            region.file.sync().map_err(Error::io(region.name.as_str(), "sync"))?;
        }
        control = Control { durable_end, commits: control.commits + recovered.len() as u64, last_commit: last, ..control };
    }

    let index_name = index_file::name(control.index_generation);
    let index = rebuild_index(&*storage, &index_name, &control, &found, &mut findings)?;
    let dict = rebuild_dict(&*storage, &control, &found, &mut findings)?;

    assert!(
        index.entries.len() as u64 <= control.index_entries,
        "a rebuilt index holds no entry the control file does not count"
    );
    let lost = control.index_entries - index.entries.len() as u64;
    assert!(lost == 0 || control.generation > 0, "only the hashes of commits a collection removed can be lost");
    let next = Control {
        seq: control.next_synced_seq(slots.synced_seq),
        index_entries: index.entries.len() as u64,
        commits: control.commits.saturating_sub(lost),
        dict_bytes: dict.bytes.len() as u64,
        dict_entries: control.dict_entries,
        ..control.clone()
    };
    let control_changes = !slots.damaged.is_empty()
        || next.durable_end != slot_end
        || next.index_entries != control.index_entries
        || next.dict_bytes != control.dict_bytes;
    // A torn control write must leave the state it was read from whole.
    assert!(
        next.seq > slots.newest.seq && next.seq % 2 != slots.synced_seq % 2,
        "the control write is the newest state, in the slot the valid synced state is not in"
    );

    // The rebuilt files under temporary names, and the store opened on them.
    let mut installs: Vec<(String, String)> = Vec::new();
    if index.rewrite {
        installs.push((index_name.clone(), write_temp(&*storage, &index_name, &index_file::encode(&index.entries))?));
    }
    if dict.rewrite {
        installs.push((DICT.to_string(), write_temp(&*storage, DICT, &dict.bytes)?));
    }
    let mut redirects = installs.clone();
    if control_changes {
        let temp = format!("{CONTROL}{TEMP_SUFFIX}");
        let file = storage.open(&temp, true).map_err(Error::io(temp.as_str(), "create"))?;
        file.write_all_at(&next.encode(), next.slot_offset()).map_err(Error::io(temp.as_str(), "write"))?;
        redirects.push((CONTROL.to_string(), temp));
    }
    if !redirects.is_empty() {
        storage.sync_dir().map_err(Error::io(storage.describe(), "sync directory"))?;
    }
    let check = verify(&storage, redirects.clone(), options, progress);
    let check = match check {
        Ok(check) => check,
        Err(e) => {
            remove_temps(&*storage, &redirects)?;
            return Err(e);
        }
    };

    // Install: each rename is atomic, and each file agrees with the
    // control file before and after it (see the module's invariants).
    assert!(check.is_clean(), "only files whose store checked clean are installed");
    let mut rewritten = Vec::new();
    for (target, temp) in &installs {
        storage.rename(temp, target).map_err(Error::io(target.as_str(), "rename"))?;
        rewritten.push(target.clone());
    }
    if !installs.is_empty() {
        storage.sync_dir().map_err(Error::io(storage.describe(), "sync directory"))?;
    }
    if control_changes {
        control_file.write_all_at(&next.encode(), next.slot_offset()).map_err(Error::io(CONTROL, "write"))?;
        control_file.sync().map_err(Error::io(CONTROL, "sync"))?;
        if slots.damaged.iter().any(|(i, _)| *i == 2) {
            // An empty hint slot is ignored; the next commit writes it.
            control_file.write_all_at(&[0u8; SLOT_SIZE], HINT_OFFSET).map_err(Error::io(CONTROL, "write"))?;
            control_file.sync().map_err(Error::io(CONTROL, "sync"))?;
        }
        rewritten.push(CONTROL.to_string());
        remove_temps(&*storage, &redirects[installs.len()..])?;
    }
    Ok(RepairReport { index_entries: next.index_entries, dict_entries: next.dict_entries, rewritten, findings, check })
}

/// What the pack's records say about commits and the dictionary.
struct Found {
    /// Every commit record: its offset and the hash recomputed from it.
    commits: BTreeMap<u64, Hash>,
    /// Every dictionary record: its offset, its first id and its steps.
    dicts: Vec<(u64, u64, Vec<Step>)>,
}

/// Reads every record the pack holds below `durable_end`; a record that
/// does not read back is an error naming its offset.
fn scan(pack: &Pack, durable_end: u64) -> Result<Found> {
    let mut found = Found { commits: BTreeMap::new(), dicts: Vec::new() };
    for region in pack.regions() {
        let end = region.end.min(durable_end);
        if region.start >= end {
            continue;
        }
        let mut at = region.start;
        let scanned = pack.scan(region.start, end, &mut |offset, kind, payload| {
            debug_assert_eq!(offset, at, "the pack's scan yields each record where the one before it ends");
            match open::named(offset, kind, payload)? {
                Some(Named::Commit(hash)) => {
                    found.commits.insert(offset, hash);
                }
                Some(Named::Dict(first_id, steps)) => found.dicts.push((offset, first_id, steps)),
                None => {}
            }
            at = offset + record::header_len(payload.len() as u64) as u64 + payload.len() as u64 + 4;
            Ok(())
        });
        if let Err(e) = scanned {
            let place = match pack.file_position(at) {
                Ok((file, position)) => format!("{file} byte {position}"),
                Err(_) => region.name.clone(),
            };
            let reason = match e {
                Error::Corrupt { reason, .. } => reason,
                other => other.to_string(),
            };
            return Err(cannot(format!(
                "the pack record at offset {at} ({place}) is damaged: {reason}; the pack is what the index and the \
                 dictionary are rebuilt from, and what it held from offset {at} to {end} cannot be read, so that data \
                 is lost and nothing is repaired: restore the store from a backup or a snapshot"
            )));
        }
    }
    Ok(found)
}

/// A rebuilt index or dictionary, and whether it differs from the file.
struct RebuiltIndex {
    entries: Vec<(Hash, u64)>,
    rewrite: bool,
}

struct RebuiltDict {
    bytes: Vec<u8>,
    rewrite: bool,
}

/// Reads `name` whole (empty if it is missing).
fn read_file(storage: &dyn Storage, name: &str) -> Result<Vec<u8>> {
    if !storage.exists(name).map_err(Error::io(name, "stat"))? {
        return Ok(Vec::new());
    }
    read_all(&*storage.open(name, false).map_err(Error::io(name, "open"))?).map_err(Error::io(name, "read"))
}

/// Numbers as `a, b, c`, at most eight of them, then how many more.
fn list(numbers: &[usize]) -> String {
    let shown: Vec<String> = numbers.iter().take(8).map(usize::to_string).collect();
    match numbers.len() {
        n if n > 8 => format!("{} and {} more", shown.join(", "), n - 8),
        _ => shown.join(", "),
    }
}

fn rebuild_index(
    storage: &dyn Storage,
    name: &str,
    control: &Control,
    found: &Found,
    findings: &mut Vec<String>,
) -> Result<RebuiltIndex> {
    let expected = control.index_entries;
    let expected_bytes = usize::try_from(expected)
        .ok()
        .and_then(|n| n.checked_mul(index_file::ENTRY_BYTES))
        .ok_or_else(|| cannot(format!("the control file's index entry count {expected} is out of range")))?;
    let bytes = read_file(storage, name)?;
    // The pack's commits below the checkpoint, by hash (the last record of
    // a hash wins, as at open).
    let below: Vec<(u64, Hash)> = found.commits.range(..control.checkpoint_end).map(|(&at, &hash)| (at, hash)).collect();
    let mut entries = Vec::new();
    let mut known = HashSet::new();
    let mut damaged = Vec::new();
    let mut disagree = Vec::new();
    for i in 0..expected as usize {
        let entry = bytes.get(i * index_file::ENTRY_BYTES..(i + 1) * index_file::ENTRY_BYTES);
        match entry.map(|entry| index_file::decode(entry, control.durable_end)) {
            Some(Ok(decoded)) => {
                let (hash, offset) = decoded[0];
                let agrees = offset == index_file::COLLECTED || found.commits.get(&offset) == Some(&hash);
                if !agrees {
                    disagree.push(i);
                } else if known.insert(hash) {
                    entries.push((hash, offset));
                } else {
                    damaged.push(i);
                }
            }
            _ => damaged.push(i),
        }
    }
    if !damaged.is_empty() {
        findings.push(format!("{name}: entries {} are damaged or missing", list(&damaged)));
    }
    if !disagree.is_empty() {
        findings.push(format!(
            "{name}: entries {} read back whole but name a commit the pack does not hold at their offset; the pack's \
             commit records are taken instead",
            list(&disagree)
        ));
    }
    let mut restored = 0;
    let mut by_hash: HashMap<Hash, u64> = HashMap::new();
    for &(at, hash) in &below {
        by_hash.insert(hash, at);
    }
    for &(at, hash) in &below {
        if by_hash.get(&hash) == Some(&at) && known.insert(hash) {
            entries.push((hash, at));
            restored += 1;
        }
    }
    if restored > 0 {
        findings.push(format!("{name}: {restored} entries rebuilt from the pack's commit records"));
    }
    let count = entries.len() as u64;
    if count > expected {
        return Err(cannot(format!(
            "the pack holds {count} commits below the checkpoint at offset {}, but the control file records {expected} \
             index entries; repair does not guess which is right",
            control.checkpoint_end
        )));
    }
    if count < expected {
        let lost = expected - count;
        if control.generation == 0 || lost > (damaged.len() + disagree.len()) as u64 {
            return Err(cannot(format!(
                "{name} should hold {expected} entries, but only {count} commits are in it or in the pack below the \
                 checkpoint at offset {}, and no collection removed the others: commits are missing from the pack",
                control.checkpoint_end
            )));
        }
        findings.push(format!(
            "{name}: {lost} damaged entries named commits a collection had removed from the pack; their hashes are \
             lost (checking one out now says `unknown commit`, not `collected`), and the control file's counts are \
             lowered by {lost}"
        ));
    }
    assert!(
        entries.iter().all(|(hash, at)| *at == index_file::COLLECTED || found.commits.get(at) == Some(hash)),
        "each rebuilt index entry names the commit the pack holds at its offset"
    );
    let encoded = index_file::encode(&entries);
    let rewrite = bytes.get(..expected_bytes) != Some(&encoded[..]);
    Ok(RebuiltIndex { entries, rewrite })
}

fn rebuild_dict(storage: &dyn Storage, control: &Control, found: &Found, findings: &mut Vec<String>) -> Result<RebuiltDict> {
    let expected = usize::try_from(control.dict_entries)
        .ok()
        .filter(|&n| n <= dict::MAX_ENTRIES)
        .ok_or_else(|| cannot(format!("the control file's dictionary entry count {} is out of range", control.dict_entries)))?;
    let bytes = read_file(storage, DICT)?;
    let recorded = bytes.get(..usize::try_from(control.dict_bytes).unwrap_or(usize::MAX)).unwrap_or(&bytes);
    // The file's entries up to the first damaged one: past it, where an
    // entry starts is not known.
    let mut from_file: Vec<Step> = Vec::new();
    let mut pos = 0;
    while from_file.len() < expected && pos < recorded.len() {
        let mut next = pos;
        let Ok(step) = dict::read_file_entry(recorded, &mut next) else { break };
        pos = next;
        from_file.push(step);
    }
    if from_file.len() < expected {
        findings.push(format!("dict: entries from id {} on are damaged or missing (the file's byte {pos})", from_file.len()));
    }
    let mut from_pack: BTreeMap<u64, (Step, u64)> = BTreeMap::new();
    for (offset, first_id, steps) in &found.dicts {
        for (k, step) in steps.iter().enumerate() {
            let id = first_id + k as u64;
            match from_pack.get(&id) {
                Some((other, at)) if other != step => {
                    return Err(cannot(format!(
                        "the pack's dictionary records at offsets {at} and {offset} define id {id} differently"
                    )));
                }
                Some(_) => {}
                None => {
                    from_pack.insert(id, (step.clone(), *offset));
                }
            }
        }
    }
    let mut steps = Vec::with_capacity(expected);
    let mut missing = Vec::new();
    let mut seen = HashSet::new();
    for id in 0..expected {
        let step = match (from_pack.get(&(id as u64)), from_file.get(id)) {
            (Some((step, at)), Some(file)) if step != file => {
                return Err(cannot(format!(
                    "dictionary entry {id}: the file says {:?}, the pack's record at offset {at} says {:?}; repair does \
                     not guess which is right",
                    String::from_utf8_lossy(file),
                    String::from_utf8_lossy(step)
                )));
            }
            (Some((step, _)), _) => step.clone(),
            (None, Some(file)) => file.clone(),
            (None, None) => {
                missing.push(id);
                continue;
            }
        };
        if !seen.insert(step.clone()) {
            return Err(cannot(format!("dictionary entry {id} repeats an earlier entry")));
        }
        steps.push(step);
    }
    if !missing.is_empty() {
        return Err(cannot(format!(
            "dictionary entries {} are damaged in `dict` and no record of the pack defines them any more (a collection \
             removed those records): they cannot be rebuilt, and the step names they stand for are lost; restore the \
             store from a backup or a snapshot",
            list(&missing)
        )));
    }
    let encoded = dict::encode_file_entries(&steps);
    let rewrite = recorded != &encoded[..] || (bytes.len() as u64) < control.dict_bytes;
    if rewrite && from_file.len() < expected {
        findings.push(format!("dict: {expected} entries rebuilt from the pack's dictionary records"));
    }
    Ok(RebuiltDict { bytes: encoded, rewrite })
}

/// Writes `bytes` as `name`'s temporary and syncs it; returns its name.
fn write_temp(storage: &dyn Storage, name: &str, bytes: &[u8]) -> Result<String> {
    let temp = format!("{name}{TEMP_SUFFIX}");
    let file = storage.open(&temp, true).map_err(Error::io(temp.as_str(), "create"))?;
    file.truncate(0).map_err(Error::io(temp.as_str(), "truncate"))?;
    file.write_all_at(bytes, 0).map_err(Error::io(temp.as_str(), "write"))?;
    file.sync().map_err(Error::io(temp.as_str(), "sync"))?;
    Ok(temp)
}

fn remove_temps(storage: &dyn Storage, redirects: &[(String, String)]) -> Result<()> {
    for (_, temp) in redirects {
        storage.remove(temp).map_err(Error::io(temp.as_str(), "remove"))?;
    }
    if !redirects.is_empty() {
        storage.sync_dir().map_err(Error::io(storage.describe(), "sync directory"))?;
    }
    Ok(())
}

/// Opens the store read-only with `redirects` (file, its rebuilt
/// version) in place and checks it all; any problem is an error.
fn verify(
    storage: &Arc<dyn Storage>,
    redirects: Vec<(String, String)>,
    options: &Options,
    progress: &mut dyn FnMut(CheckProgress),
) -> Result<CheckReport> {
    let view: Arc<dyn Storage> = Arc::new(Redirected { inner: storage.clone(), redirects });
    let store = Store::open_storage(view, Options { read_only: true, trace_file: None, ..options.clone() })
        .map_err(|e| cannot(format!("the store rebuilt from the pack does not open: {e}")))?;
    let report = store.check(CheckScope::All, PROBLEMS_SHOWN + 1, progress)?;
    if !report.is_clean() {
        let shown: Vec<String> = report.problems.iter().take(PROBLEMS_SHOWN).map(ToString::to_string).collect();
        return Err(cannot(format!(
            "the store rebuilt from the pack does not check clean, so nothing is installed: {}{}",
            shown.join("; "),
            if report.problems.len() > PROBLEMS_SHOWN { "; ..." } else { "" }
        )));
    }
    Ok(report)
}

/// A storage that opens some files under other names: the store as it
/// will be once the rebuilt files are installed.
struct Redirected {
    inner: Arc<dyn Storage>,
    redirects: Vec<(String, String)>,
}

impl Redirected {
    fn name<'a>(&'a self, name: &'a str) -> &'a str {
        self.redirects.iter().find(|(target, _)| target == name).map_or(name, |(_, temp)| temp.as_str())
    }
}

impl Storage for Redirected {
    fn open(&self, name: &str, create: bool) -> std::io::Result<Arc<dyn File>> {
        self.inner.open(self.name(name), create)
    }
    fn exists(&self, name: &str) -> std::io::Result<bool> {
        self.inner.exists(self.name(name))
    }
    fn list(&self) -> std::io::Result<Vec<String>> {
        self.inner.list()
    }
    fn remove(&self, _name: &str) -> std::io::Result<()> {
        Err(std::io::Error::other("the store being verified is read-only"))
    }
    fn rename(&self, _source: &str, _target: &str) -> std::io::Result<()> {
        Err(std::io::Error::other("the store being verified is read-only"))
    }
    fn sync_dir(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn lock(&self, _name: &str) -> std::io::Result<Box<dyn std::any::Any + Send + Sync>> {
        Err(std::io::Error::other("the store being verified is read-only"))
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}
