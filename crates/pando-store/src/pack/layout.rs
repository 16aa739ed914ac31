//! The layout below the first chunk: the files a collection's runs point
//! into (`Collected`), a new layout found (`Pack::resolve`) before the
//! control write that makes it durable, then installed in one step
//! (`Pack::install`, under every lock), and the layout a store opens with
//! (`open_collected`). See the parent module for the invariants.
//!
//! Invariant: a layout's runs are sorted by logical offset, disjoint, and
//! below its boundary, and the first chunk only moves forward (asserted
//! in `Collected::new` and `install`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Chunk, Cold, Pack, chunk_name, cold_name, segment_name};
use crate::error::{Error, Result};
use crate::format::mapping::{self, IN_CHUNK, Run, RunIndex};
use crate::io::{File, Storage};

/// A file below the first chunk that runs point into.
#[derive(Clone)]
pub struct PackFile {
    pub name: String,
    pub file: Arc<dyn File>,
    pub len: u64,
}

/// The layout below the first chunk after a collection: the runs of live
/// records and the files holding them.
pub struct Collected {
    pub generation: u64,
    /// Sorted by logical offset (see `format::mapping`).
    pub runs: Vec<Run>,
    /// Every file a run points into, by [`Run::file`].
    pub files: BTreeMap<u64, PackFile>,
    index: RunIndex,
}

impl Collected {
    fn new(generation: u64, runs: Vec<Run>, files: BTreeMap<u64, PackFile>) -> Collected {
        // What `RunIndex::find` relies on. A run table read from disk was
        // checked by `mapping::decode`; one a collection made, by nothing else.
        assert!(runs.windows(2).all(|w| w[0].end() <= w[1].old), "a layout's runs are sorted by logical offset and disjoint");
        let index = RunIndex::new(&runs);
        Collected { generation, runs, files, index }
    }

    /// The run holding logical offset `offset`, if any.
    pub fn find(&self, offset: u64) -> Option<&Run> {
        self.index.find(&self.runs, offset)
    }

    /// Bytes of the files it uses (live records and what else they hold).
    pub fn file_bytes(&self) -> u64 {
        self.files.values().map(|f| f.len).sum()
    }

    /// Bytes of live records.
    pub fn live_bytes(&self) -> u64 {
        self.runs.iter().map(|r| r.len).sum()
    }
}

/// A new layout below the first chunk, for [`Pack::resolve`].
pub struct Layout {
    pub generation: u64,
    pub runs: Vec<Run>,
    /// Files written for it (segments); the others its runs name are the
    /// current layout's, or chunks below `boundary`.
    pub new_files: Vec<(u64, PackFile)>,
    /// The new first chunk's start (a chunk start, at or after the current one).
    pub boundary: u64,
    /// Archive mode: chunks below the boundary move to cold files.
    pub archive: bool,
}

/// A layout whose files are all found, for [`Pack::install`].
pub struct Resolved {
    generation: u64,
    runs: Vec<Run>,
    files: BTreeMap<u64, PackFile>,
    boundary: u64,
    archive: bool,
}

impl Pack {
    /// Finds the file of every run of `layout`, changing nothing: a
    /// collection checks this before the control write that makes the
    /// layout durable, then installs it.
    pub fn resolve(&self, layout: Layout) -> Result<Resolved> {
        // Locks in one order everywhere: chunks, collected, cold.
        let chunks = self.chunks.read();
        let current = self.collected.read();
        let cold = self.cold.read();
        let keep_from = chunks.partition_point(|c| c.start < layout.boundary);
        if chunks.get(keep_from).is_none_or(|c| c.start != layout.boundary) {
            return Err(Error::GcFailed(format!("the boundary {} is not a chunk start", layout.boundary)));
        }
        let mut new_files: BTreeMap<u64, PackFile> = layout.new_files.into_iter().collect();
        let old_files = current.as_ref().map(|c| &c.files);
        let mut files = BTreeMap::new();
        for key in layout.runs.iter().map(|r| r.file).collect::<BTreeSet<u64>>() {
            let found = match new_files.remove(&key) {
                Some(source) => Some(source),
                None => match old_files.and_then(|files| files.get(&key)) {
                    Some(f) => Some(f.clone()),
                    None if key & IN_CHUNK != 0 => self.chunk_source(&chunks[..=keep_from], &cold, key & !IN_CHUNK),
                    None => None,
                },
            };
            match found {
                Some(source) => files.insert(key, source),
                None => return Err(Error::GcFailed(format!("no file for runs in {}", mapping::describe(key)))),
            };
        }
        Ok(Resolved {
            generation: layout.generation,
            runs: layout.runs,
            files,
            boundary: layout.boundary,
            archive: layout.archive,
        })
    }

    /// Makes a resolved layout the one below the first chunk, which moves
    /// to its boundary. Returns the names of the files no longer used, for
    /// the caller to remove once the switch is durable, and (archive mode)
    /// the chunks to rename to their cold names, which stay readable.
    pub fn install(&self, resolved: Resolved) -> (Vec<String>, Vec<(String, String)>) {
        let Resolved { generation, runs, mut files, boundary, archive } = resolved;
        let mut chunks = self.chunks.write();
        let mut current = self.collected.write();
        let mut cold = self.cold.write();
        let keep_from = chunks.partition_point(|c| c.start < boundary);
        // As `resolve` found it: chunks are only added after the last since.
        assert!(chunks.get(keep_from).is_some_and(|c| c.start == boundary), "a layout is installed at a chunk's start");
        assert!(boundary >= self.first_chunk_start(), "the first chunk only moves forward");
        assert!(runs.last().is_none_or(|r| r.end() <= boundary), "a layout's runs lie below its boundary");
        let ends: Vec<u64> = chunks[1..=keep_from].iter().map(|c| c.start).collect();
        let (mut remove, mut rename) = (Vec::new(), Vec::new());
        for (chunk, end) in chunks.drain(..keep_from).zip(ends) {
            if archive {
                let name = cold_name(chunk.start);
                rename.push((chunk.name.clone(), name.clone()));
                if let Some(source) = files.get_mut(&(IN_CHUNK | chunk.start)) {
                    source.name = name.clone();
                }
                let at = cold.partition_point(|c| c.start < chunk.start);
                debug_assert!(cold.get(at).is_none_or(|c| c.start >= end), "a chunk becomes cold once, beside no other");
                cold.insert(at, Cold { start: chunk.start, len: end - chunk.start, name, file: chunk.file });
            } else if !files.contains_key(&(IN_CHUNK | chunk.start)) {
                remove.push(chunk.name);
            }
        }
        for (key, source) in current.iter().flat_map(|c| c.files.iter()) {
            let is_cold = key & IN_CHUNK != 0 && cold.iter().any(|c| c.start == key & !IN_CHUNK);
            if !files.contains_key(key) && !is_cold {
                remove.push(source.name.clone());
            }
        }
        let next = Collected::new(generation, runs, files);
        self.collected_bytes.store(next.file_bytes(), Ordering::Release);
        *current = Some(Arc::new(next));
        self.first_start.store(boundary, Ordering::Release);
        (remove, rename)
    }

    /// The chunk at `start` as a file runs point into: one of `chunks`
    /// (each followed by the next, so its length is known), or a cold one.
    fn chunk_source(&self, chunks: &[Chunk], cold: &[Cold], start: u64) -> Option<PackFile> {
        if let Some(w) = chunks.windows(2).find(|w| w[0].start == start) {
            let len = w[1].start - start;
            return Some(PackFile { name: w[0].name.clone(), file: w[0].file.clone(), len });
        }
        let chunk = cold.iter().find(|c| c.start == start)?;
        Some(PackFile { name: chunk.name.clone(), file: chunk.file.clone(), len: chunk.len })
    }
}

/// Opens the files the runs of `generation` point into (`cold`: the cold
/// chunks already open) and checks the runs fit them.
pub(super) fn open_collected(storage: &dyn Storage, generation: u64, runs: Vec<Run>, cold: &[Cold]) -> Result<Collected> {
    let mut files = BTreeMap::new();
    for key in runs.iter().map(|r| r.file).collect::<BTreeSet<u64>>() {
        let (name, file) = if key & IN_CHUNK == 0 {
            let name = segment_name(key);
            let file = storage.open(&name, false).map_err(Error::io(&name, "open"))?;
            (name, file)
        } else if let Some(chunk) = cold.iter().find(|c| c.start == key & !IN_CHUNK) {
            (chunk.name.clone(), chunk.file.clone())
        } else {
            let name = chunk_name(key & !IN_CHUNK);
            let file = storage.open(&name, false).map_err(Error::io(&name, "open"))?;
            (name, file)
        };
        let len = file.len().map_err(Error::io(&name, "stat"))?;
        files.insert(key, PackFile { name, file, len });
    }
    let mapping_name = mapping::file_name(generation);
    mapping::check_files(&runs, |key| files.get(&key).map(|f: &PackFile| f.len))
        .map_err(|(i, reason)| Error::corrupt(&mapping_name, (20 + 32 * i) as u64, reason))?;
    Ok(Collected::new(generation, runs, files))
}
