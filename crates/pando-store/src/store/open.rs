//! Creating and opening a store, and recovery after a crash.
//!
//! Creation is explicit (`Options::create`): an open that may not create
//! writes nothing to a directory without a store, not even the lock file.
//! A creation makes the chunk, index and dictionary files, then the
//! control file under a temporary name, renamed once synced: until that
//! rename the directory is not a store.
//!
//! Recovery needs no log replay beyond the last checkpoint: the control file
//! names a durable end of the pack; a writable open extends it over the
//! whole batches found after it (`Pack::open`: commits whose pack fsync
//! completed but whose control hint was lost) and cuts off what follows; a
//! read-only open ignores it. The index and dictionary files are read up to
//! their checkpointed lengths and the records between the checkpoint and
//! the durable end are scanned to complete them, the recovered commits too.
//!
//! Invariants:
//! - A creation that fails removes every file it made (tested by
//!   `a_failed_creation_removes_what_it_made`).
//! - What a crash during a creation leaves (only the files a creation
//!   makes, no control file) is never taken for a foreign directory: a
//!   creating open clears it and creates the store, any other open names
//!   it (`Error::UnfinishedCreation`) and changes nothing (tested by
//!   `the_leftovers_of_a_creation_are_named_then_cleared_by_a_creating_open`).
//! - Recovery only extends the durable end, and only a writable open
//!   does; the commits it finds past the checkpoint are in pack order
//!   (asserted in `open` and `load_commits`).
//! - An open removes the files of other generations only, never the
//!   current one's (asserted in `remove_other_generations`).

use pando_core::Hash;
use pando_core::inode::Layout;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::{ReadSide, Repo, WriteSide, Writer, branches, index_file};
use crate::cache::NodeCache;
use crate::dict::{self, Dict};
use crate::error::{Error, Result, layout_name};
use crate::format::commit::CommitRecord;
use crate::format::control::{self, Control, SlotError};
use crate::format::record::RecordKind;
use crate::io::{File, Storage, read_all};
use crate::options::{Create, Options};
use crate::pack::{Pack, PackOptions};
use crate::tracer::Tracer;
use crate::tree::flat::FlatCache;

pub const CONTROL: &str = "control";
pub const INDEX: &str = "index";
pub const DICT: &str = "dict";
pub const LOCK: &str = "lock";
const CONTROL_TEMP: &str = "control.tmp";

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

/// A store instance id no other instance has (trees of other sources,
/// such as a proof's, take one too, so that they are never mixed).
pub(crate) fn fresh_instance_id() -> u64 {
    let id = NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed);
    // An inode's writer state keeps the instance in 56 bits (`node::Written`).
    assert!(id < 1 << 56, "store instances are counted below 2^56");
    id
}

fn open_file(storage: &dyn Storage, name: &str, create: bool) -> Result<Arc<dyn File>> {
    storage.open(name, create).map_err(Error::io(name, if create { "create" } else { "open" }))
}

/// Up to three of `names`, quoted, and how many more.
fn some_names(names: &[String]) -> String {
    let mut sorted: Vec<&String> = names.iter().collect();
    sorted.sort();
    let shown: Vec<String> = sorted.iter().take(3).map(|name| format!("`{name}`")).collect();
    match names.len() {
        n if n > 3 => format!("{} and {} more", shown.join(", "), n - 3),
        _ => shown.join(", "),
    }
}

/// What a directory holds, as far as opening it is concerned.
enum Found {
    /// A store: its control file.
    Store,
    /// No file at all.
    Empty,
    /// Only files a creation makes, without the control file that ends it:
    /// what a creation that failed or was interrupted left.
    Unfinished(Vec<String>),
    /// Files that are not a store's (the names, but the lock's).
    Foreign(Vec<String>),
}

/// The files a creation makes before the control file that ends it.
fn creation_files() -> [String; 5] {
    [crate::pack::chunk_name(0), INDEX.to_string(), DICT.to_string(), CONTROL_TEMP.to_string(), LOCK.to_string()]
}

fn survey(storage: &dyn Storage) -> Result<Found> {
    if storage.exists(CONTROL).map_err(Error::io(CONTROL, "stat"))? {
        return Ok(Found::Store);
    }
    let names = storage.list().map_err(Error::io(storage.describe(), "list"))?;
    let made_by_creation = creation_files();
    Ok(if names.is_empty() {
        Found::Empty
    } else if names.iter().all(|name| made_by_creation.contains(name)) {
        Found::Unfinished(names)
    } else {
        Found::Foreign(names.into_iter().filter(|name| name != LOCK).collect())
    })
}

/// The error of opening what `found` describes with `options`, if it is
/// refused; `Ok` if the open goes on (a creating open creates unless
/// `found` is a store).
fn refusal(found: &Found, options: &Options, dir: String) -> Result<()> {
    let creates = !options.read_only && options.create != Create::Never;
    let not_a_store = |reason: String| Err(Error::NotAStore { dir: dir.clone(), reason });
    match found {
        Found::Store if options.create == Create::New && !options.read_only => Err(Error::StoreExists { dir }),
        Found::Store => Ok(()),
        Found::Foreign(names) if creates => not_a_store(format!(
            "it has no `{CONTROL}` file and is not empty (it holds {}), so no store is created there",
            some_names(names)
        )),
        Found::Foreign(names) => not_a_store(format!("it has no `{CONTROL}` file (it holds {})", some_names(names))),
        Found::Empty | Found::Unfinished(_) if creates => Ok(()),
        Found::Empty => not_a_store("the directory is empty (`pando init` creates a store)".to_string()),
        Found::Unfinished(names) => Err(Error::UnfinishedCreation { dir, files: some_names(names) }),
    }
}

/// Opens the store in `storage`, creating it if `options.create` allows
/// and the directory is empty or holds an unfinished creation's files.
/// Nothing is written (not even the lock file) before the open is known
/// to be allowed.
pub fn open(storage: Arc<dyn Storage>, options: Options) -> Result<Repo> {
    let started = std::time::Instant::now();
    refusal(&survey(&*storage)?, &options, storage.describe())?;
    let lock = if options.read_only { None } else { Some(storage.lock(LOCK).map_err(Error::io(LOCK, "lock"))?) };
    if lock.is_some() && options.create != Create::Never {
        // Again under the lock: another process may have created the store
        // meanwhile (the lock file is now there, among the leftovers).
        let found = survey(&*storage)?;
        refusal(&found, &options, storage.describe())?;
        if let Found::Empty | Found::Unfinished(_) = found {
            create_over(&*storage, &options, &found)?;
        }
    }
    let control_file = open_file(&*storage, CONTROL, false)?;
    let control_bytes = read_all(&*control_file).map_err(Error::io(CONTROL, "read"))?;
    let slots = control::decode(&control_bytes).map_err(|(first, second)| slot_error(first, second))?;
    // A synced slot a crash tore, or damage: the store is read at the other
    // one's state (and the hint's); a writable open writes it again below.
    for (slot, error) in slots.damaged_synced() {
        crate::telemetry::damaged_control_slot(*slot, &format!("{error:?}"), slots.newest.seq);
    }
    let rewrite_slot = slots.damaged_synced().next().is_some();
    let writable = !options.read_only;
    let mut control = slots.newest;
    let layout = control.layout();
    if let Some(expected) = options.layout
        && expected != layout
    {
        return Err(Error::LayoutMismatch {
            what: format!("the store in {}", storage.describe()),
            found: layout_name(layout),
            expected: layout_name(expected),
        });
    }

    let generation = control.generation;
    let runs =
        if generation > 0 { Some((generation, load_mapping(&*storage, generation, control.first_chunk_start)?)) } else { None };
    let pack = Pack::open(storage.clone(), PackOptions::of_control(&control, writable, runs))?;
    // A writable pack took in the whole batches past the slot's durable end
    // (commits whose slot, a hint not synced, was lost); the scan of the
    // records after the checkpoint below finds their commits.
    let slot_end = std::mem::replace(&mut control.durable_end, pack.end());
    assert!(control.durable_end >= slot_end, "recovery only extends the durable end");
    assert!(writable || control.durable_end == slot_end, "a read-only open ignores what lies past the durable end");

    let dict_file = open_file(&*storage, DICT, false)?;
    let index_file = open_file(&*storage, &index_file::name(control.index_generation), false)?;
    let Loaded { index, dict, unflushed: unflushed_index, commits, last_commit } =
        load_commits(&pack, &control, slot_end, &*index_file, &*dict_file, writable).map_err(super::repair::with_hint)?;
    (control.commits, control.last_commit) = (commits, last_commit);
    let recovered_bytes = control.durable_end - slot_end;

    let collected = index.values().filter(|&&offset| offset == index_file::COLLECTED).count() as u64;
    if writable {
        // Only once the current generation has loaded.
        remove_other_generations(&*storage, generation, control.index_generation)?;
    }
    let branches = read_branches(&*storage, writable)?;
    let follower = (!writable).then(|| Mutex::new(control.clone()));
    let writer = if writable {
        Some(Mutex::new(Writer {
            control,
            control_file,
            index_file,
            dict_file,
            unflushed_index,
            unsynced_commits: 0,
            batch_buf: Vec::new(),
            synced_seq: slots.synced_seq,
            kept: Default::default(),
            syncer: None,
            in_flight: false,
            _lock: lock,
        }))
    } else {
        None
    };
    if let Some(writer) = writer.as_ref().filter(|_| rewrite_slot) {
        // What a flush writes: the recovered batches synced, then the
        // state in the synced slot not holding the newest synced state,
        // which is the damaged one.
        pack.sync()?;
        let mut writer = writer.lock();
        let state = writer.control.clone();
        writer.write_synced_control(state)?;
    }
    let tracer = match &options.trace_file {
        Some(path) => Some(Tracer::create(path).map_err(Error::io(path.display().to_string(), "create trace"))?),
        None => None,
    };
    crate::telemetry::opened(&storage.describe(), writable, commits - collected, generation, recovered_bytes, started.elapsed());
    Ok(Repo {
        read: ReadSide {
            tracer,
            id: fresh_instance_id(),
            storage,
            pack,
            cache: NodeCache::new(options.cache_bytes - options.keep_bytes()),
            dict: RwLock::new(dict),
            index: RwLock::new(index),
            branches: RwLock::new(branches),
            follower,
            flat: FlatCache::new(options.read_cache_bytes),
            layout,
            options,
            last_commit: AtomicU64::new(last_commit),
            collected_commits: AtomicU64::new(collected),
        },
        write: WriteSide {
            kept: Mutex::new(None),
            staged: Default::default(),
            writer,
            poisoned: OnceLock::new(),
            gc: Default::default(),
        },
    })
}

/// The commit index and the dictionary as `control` describes them.
pub(super) struct Loaded {
    pub index: HashMap<Hash, u64>,
    pub dict: Dict,
    /// Commits found after the checkpoint (not yet in the index file).
    pub unflushed: Vec<(Hash, u64)>,
    /// Commits in the store, and the offset of the newest (`u64::MAX` if none).
    pub commits: u64,
    pub last_commit: u64,
}

/// Reads the index and dictionary files up to the lengths `control`
/// records, then completes them from the pack's records between the
/// checkpoint and the durable end. The commits found past `slot_end` (the
/// durable end the control slot named, which a writable open extends) are
/// the ones recovery added to the slot's count.
pub(super) fn load_commits(
    pack: &Pack,
    control: &Control,
    slot_end: u64,
    index_file: &dyn File,
    dict_file: &dyn File,
    writable: bool,
) -> Result<Loaded> {
    let mut dict = Dict::default();
    for step in read_prefix(dict_file, DICT, control.dict_bytes, writable).and_then(|bytes| {
        dict::decode_file(&bytes, control.dict_entries).map_err(|(at, reason)| Error::corrupt(DICT, at as u64, reason))
    })? {
        if dict.id_of(&step).is_some() {
            return Err(Error::corrupt(DICT, 0, format!("entry {} repeats an earlier one", dict.len())));
        }
        dict.push(step);
    }

    let index_name = index_file::name(control.index_generation);
    let index_len = control
        .index_entries
        .checked_mul(index_file::ENTRY_BYTES as u64)
        .ok_or_else(|| Error::corrupt(CONTROL, 0, "index entry count out of range"))?;
    let index_bytes = read_prefix(index_file, &index_name, index_len, writable)?;
    let entries = index_file::decode(&index_bytes, control.durable_end)
        .map_err(|(i, reason)| Error::corrupt(&index_name, (i * index_file::ENTRY_BYTES) as u64, reason))?;
    let mut index: HashMap<Hash, u64> = HashMap::with_capacity(entries.len() + 1024);
    index.extend(entries);
    let mut unflushed = Vec::new();
    scan_commits(pack, control.checkpoint_end, control.durable_end, &mut index, &mut dict, &mut unflushed)?;
    // In pack order, so that the last recovered is the newest commit.
    assert!(unflushed.windows(2).all(|w| w[0].1 < w[1].1), "commits found past the checkpoint are in pack order");
    let recovered: Vec<u64> = unflushed.iter().map(|&(_, at)| at).filter(|&at| at >= slot_end).collect();
    let commits = control.commits + recovered.len() as u64;
    if index.len() as u64 != commits {
        return Err(Error::corrupt(index_name, 0, format!("{} commits found, the control file says {}", index.len(), commits)));
    }
    let last_commit = match recovered.last() {
        Some(&at) => at,
        None if control.commits == 0 => u64::MAX,
        None => control.last_commit,
    };
    Ok(Loaded { index, dict, unflushed, commits, last_commit })
}

/// What a record names that the index or the dictionary keeps.
pub(super) enum Named {
    /// A commit: its hash, computed from the record.
    Commit(Hash),
    /// Dictionary entries: the first one's id, and their steps.
    Dict(u64, Vec<crate::node::Step>),
}

/// Decodes the record at `offset` if it is a commit or a dictionary
/// record (at open, and when a repair rebuilds the index and dictionary).
pub(super) fn named(offset: u64, kind: RecordKind, payload: &[u8]) -> Result<Option<Named>> {
    let corrupt = |reason| Error::corrupt("pack", offset, reason);
    Ok(match kind {
        RecordKind::Commit => Some(Named::Commit(CommitRecord::decode(payload, offset).map_err(corrupt)?.info().hash())),
        RecordKind::Dict => {
            let (first_id, steps) = dict::decode_record(payload).map_err(corrupt)?;
            Some(Named::Dict(first_id, steps))
        }
        _ => None,
    })
}

/// Adds the commit and dictionary records between `from` and `to` to
/// `index` (and `found`) and `dict`.
pub(super) fn scan_commits(
    pack: &Pack,
    from: u64,
    to: u64,
    index: &mut HashMap<Hash, u64>,
    dict: &mut Dict,
    found: &mut Vec<(Hash, u64)>,
) -> Result<()> {
    pack.scan(from, to, &mut |offset, kind, payload| {
        match named(offset, kind, payload)? {
            Some(Named::Commit(hash)) => {
                index.insert(hash, offset);
                found.push((hash, offset));
            }
            Some(Named::Dict(first_id, steps)) => {
                if first_id != dict.len() as u64 {
                    return Err(Error::corrupt(
                        "pack",
                        offset,
                        format!("dictionary record starts at id {first_id}, expected {}", dict.len()),
                    ));
                }
                for step in steps {
                    if dict.id_of(&step).is_some() {
                        return Err(Error::corrupt("pack", offset, "dictionary record repeats an entry"));
                    }
                    dict.push(step);
                }
            }
            None => {}
        }
        Ok(())
    })
}

/// Clears what an unfinished creation left (`found`) and creates the
/// store. If any step fails, every file a creation makes is removed again
/// (best effort: the first failure is the error), so that a failed
/// creation leaves nothing behind; what a crash leaves instead is
/// `Found::Unfinished`, which the next creating open clears the same way.
fn create_over(storage: &dyn Storage, options: &Options, found: &Found) -> Result<()> {
    let result = (|| {
        if let Found::Unfinished(names) = found {
            for name in names.iter().filter(|name| *name != LOCK) {
                storage.remove(name).map_err(Error::io(name.as_str(), "remove"))?;
            }
        }
        create(storage, options)
    })();
    if result.is_err() {
        // The control file too: a rename whose directory sync failed may
        // not last, and the caller is told the creation failed.
        // The control file first: without it what remains is leftovers.
        for name in std::iter::once(CONTROL).chain(creation_files().iter().map(String::as_str)) {
            if storage.exists(name).unwrap_or(true) {
                let _ = storage.remove(name);
            }
        }
        let _ = storage.sync_dir();
    }
    result
}

fn create(storage: &dyn Storage, options: &Options) -> Result<()> {
    Pack::create_files(storage)?;
    for name in [INDEX, DICT] {
        let file = open_file(storage, name, true)?;
        file.sync().map_err(Error::io(name, "sync"))?;
    }
    let flags = match options.layout.unwrap_or(Layout::TEZOS) {
        Layout::TEZOS => 0,
        Layout::TEZOS_BINARY => control::FLAG_BINARY,
        other => return Err(Error::Invalid(format!("a store of a layout without a name ({other:?})"))),
    };
    let control = Control {
        seq: 0,
        chunk_target_bytes: options.chunk_target_bytes.max(1),
        last_commit: u64::MAX,
        flags,
        ..Control::default()
    };
    // The control file is created under a temporary name and renamed, so a
    // crash during creation leaves a directory that is not yet a store.
    let temp = CONTROL_TEMP;
    let file = open_file(storage, temp, true)?;
    file.write_all_at(&control.encode(), control.slot_offset()).map_err(Error::io(temp, "write"))?;
    file.sync().map_err(Error::io(temp, "sync"))?;
    storage.sync_dir().map_err(Error::io(storage.describe(), "sync directory"))?;
    storage.rename(temp, CONTROL).map_err(Error::io(CONTROL, "rename"))?;
    storage.sync_dir().map_err(Error::io(storage.describe(), "sync directory"))
}

/// Reads the first `len` bytes of a file, which must have at least that many;
/// a writable open cuts off anything after them.
pub(super) fn read_prefix(file: &dyn File, name: &str, len: u64, writable: bool) -> Result<Vec<u8>> {
    let actual = file.len().map_err(Error::io(name, "stat"))?;
    if actual < len {
        return Err(Error::corrupt(name, actual, format!("file is {actual} bytes, the control file says {len}")));
    }
    if actual > len && writable {
        file.truncate(len).map_err(Error::io(name, "truncate"))?;
        file.sync().map_err(Error::io(name, "sync"))?;
    }
    let size = usize::try_from(len).map_err(|_| Error::corrupt(name, 0, "file too large"))?;
    let mut buf = vec![0u8; size];
    file.read_exact_at(&mut buf, 0).map_err(Error::io(name, "read"))?;
    Ok(buf)
}

pub(super) fn read_branches(storage: &dyn Storage, writable: bool) -> Result<BTreeMap<String, Hash>> {
    if writable && storage.exists(branches::TEMP_FILE).map_err(Error::io(branches::TEMP_FILE, "stat"))? {
        // Left by a crash before the rename: the old file is still the truth.
        storage.remove(branches::TEMP_FILE).map_err(Error::io(branches::TEMP_FILE, "remove"))?;
    }
    if !storage.exists(branches::FILE).map_err(Error::io(branches::FILE, "stat"))? {
        return Ok(BTreeMap::new());
    }
    let file = open_file(storage, branches::FILE, false)?;
    let bytes = read_all(&*file).map_err(Error::io(branches::FILE, "read"))?;
    branches::decode(&bytes).map_err(|(at, reason)| Error::corrupt(branches::FILE, at, reason))
}

/// Removes the mapping and index files of other generations: those a
/// finished collection step replaced, those an unfinished one left (a
/// crash before its switch). Segments and chunks are the pack's.
fn remove_other_generations(storage: &dyn Storage, generation: u64, index_generation: u64) -> Result<()> {
    use crate::pack::parse_hex_name;
    let names = storage.list().map_err(Error::io(storage.describe(), "list"))?;
    let stale: Vec<&String> = names
        .iter()
        .filter(|name| {
            parse_hex_name(name, "mapping-", "").is_some_and(|g| g != generation)
                || parse_hex_name(name, "index-", "").is_some_and(|g| g != index_generation)
                || (index_generation > 0 && name.as_str() == INDEX)
        })
        .collect();
    let current = [index_file::name(index_generation), crate::format::mapping::file_name(generation)];
    assert!(!stale.iter().any(|name| current.contains(name)), "an open removes only other generations' files");
    for name in &stale {
        storage.remove(name).map_err(Error::io(name.as_str(), "remove"))?;
    }
    if !stale.is_empty() {
        storage.sync_dir().map_err(Error::io(storage.describe(), "sync directory"))?;
    }
    Ok(())
}

/// Reads and checks the run table of `generation`.
pub(super) fn load_mapping(storage: &dyn Storage, generation: u64, boundary: u64) -> Result<Vec<crate::format::mapping::Run>> {
    let name = crate::format::mapping::file_name(generation);
    let bytes = read_all(&*open_file(storage, &name, false)?).map_err(Error::io(&name, "read"))?;
    crate::format::mapping::decode(&bytes, boundary).map_err(|(at, reason)| Error::corrupt(&name, at, reason))
}

pub(super) fn slot_error(first: SlotError, second: SlotError) -> Error {
    for slot in [&first, &second] {
        if let SlotError::UnsupportedVersion(found) = slot {
            return Error::UnsupportedVersion {
                file: CONTROL.into(),
                found: *found,
                supported: crate::format::BINARY_LAYOUT_VERSION,
            };
        }
    }
    Error::corrupt(CONTROL, 0, format!("no valid control slot (slot 0: {first:?}, slot 1: {second:?})"))
}
