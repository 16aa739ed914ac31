//! A read-only pack following the writer of another process (see
//! `store::read::follow`): the chunks it started, the layouts its collections
//! installed.
//!
//! Invariant: the pack only learns what a control slot made durable, and
//! keeps the handles of files it held, which the writer may have removed
//! (tested by `a_reader_in_another_process_follows_collections`).

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use super::{Chunk, Cold, Layout, Pack, PackFile, chunk_name, cold_name, parse_chunk_name, parse_cold_name, segment_name};
use crate::error::{Error, Result};
use crate::format::mapping::{self, IN_CHUNK, Run};

impl Pack {
    /// Read-only: takes in what a writer in another process made durable
    /// up to `durable_end`: the chunks it started since, and its end.
    pub fn follow(&self, durable_end: u64) -> Result<()> {
        if durable_end < self.end() {
            return Err(Error::corrupt("control", 0, format!("durable end went back from {} to {durable_end}", self.end())));
        }
        let names = self.storage.list().map_err(Error::io(self.storage.describe(), "list"))?;
        let last_start = self.chunks.read().last().expect("a pack has a chunk").start;
        let mut starts: Vec<u64> =
            names.iter().filter_map(|name| parse_chunk_name(name)).filter(|&s| s > last_start && s <= durable_end).collect();
        starts.sort_unstable();
        let mut opened = Vec::with_capacity(starts.len());
        for start in starts {
            let name = chunk_name(start);
            let file = self.storage.open(&name, false).map_err(Error::io(&name, "open"))?;
            opened.push(Chunk { start, name, file });
        }
        let mut chunks = self.chunks.write();
        // Follows are serialized (`store::read::follow`): nothing came in since.
        let last = chunks.last().expect("a pack has a chunk").start;
        assert!(opened.first().is_none_or(|c| c.start > last), "a chunk followed is taken in once, after the last");
        chunks.extend(opened);
        drop(chunks);
        self.reserved.store(durable_end, Ordering::Release);
        self.end.store(durable_end, Ordering::Release);
        Ok(())
    }

    /// Read-only: takes in the layout a collection in another process made
    /// (generation, runs, first chunk), opening the files it needs that
    /// this pack does not hold yet. Files the writer removed meanwhile stay
    /// readable through the handles held until then.
    pub fn follow_layout(&self, generation: u64, runs: Vec<Run>, boundary: u64, archive: bool) -> Result<()> {
        let mut new_files = Vec::new();
        {
            let chunks = self.chunks.read();
            let current = self.collected.read();
            let cold = self.cold.read();
            for key in runs.iter().map(|r| r.file).collect::<BTreeSet<u64>>() {
                let held = current.as_ref().is_some_and(|c| c.files.contains_key(&key))
                    || (key & IN_CHUNK != 0
                        && (chunks.iter().any(|c| c.start == key & !IN_CHUNK)
                            || cold.iter().any(|c| c.start == key & !IN_CHUNK)));
                if held {
                    continue;
                }
                let names = if key & IN_CHUNK == 0 {
                    vec![segment_name(key)]
                } else {
                    vec![chunk_name(key & !IN_CHUNK), cold_name(key & !IN_CHUNK)]
                };
                let opened = names.iter().find_map(|name| Some((name.clone(), self.storage.open(name, false).ok()?)));
                let Some((name, file)) = opened else {
                    return Err(Error::corrupt(&names[0], 0, "a file the layout needs is missing"));
                };
                let len = file.len().map_err(Error::io(&name, "stat"))?;
                new_files.push((key, PackFile { name, file, len }));
            }
        }
        let resolved = self
            .resolve(Layout { generation, runs, new_files, boundary, archive })
            .map_err(|e| Error::corrupt(mapping::file_name(generation), 0, e.to_string()))?;
        self.install(resolved);
        if archive {
            // Chunks moved out of the hot set before this pack saw them.
            let names = self.storage.list().map_err(Error::io(self.storage.describe(), "list"))?;
            let mut cold = self.cold.write();
            for start in names.iter().filter_map(|name| parse_cold_name(name)) {
                if start < boundary && !cold.iter().any(|c| c.start == start) {
                    let name = cold_name(start);
                    let file = self.storage.open(&name, false).map_err(Error::io(&name, "open"))?;
                    let len = file.len().map_err(Error::io(&name, "stat"))?;
                    let at = cold.partition_point(|c| c.start < start);
                    cold.insert(at, Cold { start, len, name, file });
                }
            }
        }
        Ok(())
    }
}
