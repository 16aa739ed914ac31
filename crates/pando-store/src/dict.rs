//! The dictionary of frequent step names.
//!
//! Step names that are not hex digits and recur (written raw twice, by one
//! commit or two) get a small integer id; nodes written afterwards store
//! the id instead of the name. Unlike irmin's first-come dictionary,
//! one-off names (hashes, addresses) never enter it: hex steps are stored
//! as binary instead.
//!
//! Invariants:
//! - Ids are dense and assigned in order; an id is never reused or changed
//!   (asserted in `push`: a step given a second id would change its id).
//! - An id is used in a node only after the record defining it is in the
//!   pack (new ids are defined at the end of a commit's batch and used from
//!   the next commit on), so every durable node can be decoded (tested by
//!   `crash_without_fault_at_every_commit`, whose steps recur).

use pando_core::varint;
use foldhash::HashMap;

use crate::node::Step;

/// Most entries the dictionary takes.
pub const MAX_ENTRIES: usize = 1 << 20;
/// Longest step name the dictionary takes.
pub const MAX_STEP_BYTES: usize = 48;
/// Bound on the names tracked as candidates.
const MAX_CANDIDATES: usize = 1 << 20;

#[derive(Default)]
pub struct Dict {
    ids: HashMap<Step, u32>,
    steps: Vec<Step>,
    candidates: HashMap<Step, u8>,
}

impl Dict {
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    pub fn id_of(&self, step: &[u8]) -> Option<u32> {
        self.ids.get(step).copied()
    }

    pub fn step_of(&self, id: u64) -> Option<&Step> {
        usize::try_from(id).ok().and_then(|i| self.steps.get(i))
    }

    /// Steps `first_id..` in order (those past the `first_id` entries the
    /// dictionary file holds).
    pub fn steps_from(&self, first_id: usize) -> &[Step] {
        // The file holds a prefix of the ids; past its end, ids were lost.
        assert!(first_id <= self.steps.len(), "the dictionary file holds ids the dictionary has");
        &self.steps[first_id..]
    }

    /// Adds a step with the next id.
    pub fn push(&mut self, step: Step) {
        assert!(!self.ids.contains_key(&step), "dictionary entries are unique");
        self.ids.insert(step.clone(), self.steps.len() as u32);
        self.steps.push(step);
    }

    /// Notes steps written raw by one commit; returns the ones to promote.
    pub fn observe(&mut self, written_raw: &RawSteps) -> Vec<Step> {
        let mut promote = Vec::new();
        if self.candidates.len() > MAX_CANDIDATES {
            self.candidates.clear();
        }
        for (step, times) in &written_raw.steps {
            if self.ids.contains_key(step) || step.len() > MAX_STEP_BYTES {
                continue;
            }
            let count = self.candidates.entry(step.clone()).or_insert(0);
            let before = *count;
            *count = count.saturating_add(*times);
            if before < 2 && *count >= 2 && self.steps.len() + promote.len() < MAX_ENTRIES {
                promote.push(step.clone());
            }
        }
        for step in &promote {
            self.candidates.remove(step);
        }
        // Each step once already (`RawSteps`): sorted, the order ids follow.
        promote.sort();
        promote
    }
}

/// The steps a batch wrote raw (neither by id nor as hex): each once, in
/// the order first written, with how many times, counted up to 2 (all
/// [`Dict::observe`] asks). A commit of millions of writes repeats the
/// same few names; this holds each once.
#[derive(Default)]
pub struct RawSteps {
    steps: Vec<(Step, u8)>,
    /// Where each step is in `steps`.
    at: HashMap<Step, usize>,
}

impl RawSteps {
    /// Notes `step`, written raw once more.
    pub fn note(&mut self, step: &[u8]) {
        match self.at.get(step) {
            Some(&i) => self.steps[i].1 = 2,
            None => {
                self.at.insert(Step::from_slice(step), self.steps.len());
                self.steps.push((Step::from_slice(step), 1));
            }
        }
    }

    pub fn clear(&mut self) {
        self.steps.clear();
        self.at.clear();
    }
}

/// Payload of a dictionary record: `first_id ‖ count ‖ (len ‖ bytes)*`.
pub fn encode_record(first_id: usize, steps: &[Step]) -> Vec<u8> {
    let mut out = Vec::new();
    varint::write_u64(&mut out, first_id as u64);
    varint::write_u64(&mut out, steps.len() as u64);
    for step in steps {
        varint::write_u64(&mut out, step.len() as u64);
        out.extend_from_slice(step);
    }
    out
}

/// Decodes a dictionary record payload.
pub fn decode_record(payload: &[u8]) -> Result<(u64, Vec<Step>), String> {
    let mut pos = 0;
    let first_id = varint::read_u64(payload, &mut pos).map_err(|e| e.to_string())?;
    let count = varint::read_u64(payload, &mut pos).map_err(|e| e.to_string())?;
    let mut steps = Vec::new();
    for _ in 0..count {
        steps.push(read_bytes(payload, &mut pos)?.into());
    }
    if pos != payload.len() {
        return Err("trailing bytes after dictionary entries".into());
    }
    Ok((first_id, steps))
}

/// The dictionary file: a sequence of `LEB128 len ‖ bytes ‖ crc32c`, the
/// checksum (u32 LE) covering length and bytes.
pub fn encode_file_entries(steps: &[Step]) -> Vec<u8> {
    let mut out = Vec::new();
    for step in steps {
        let start = out.len();
        varint::write_u64(&mut out, step.len() as u64);
        out.extend_from_slice(step);
        let crc = crc32c::crc32c(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }
    out
}

pub fn decode_file(bytes: &[u8], expected: u64) -> Result<Vec<Step>, (usize, String)> {
    let mut pos = 0;
    let mut steps = Vec::new();
    while pos < bytes.len() {
        steps.push(read_file_entry(bytes, &mut pos)?);
    }
    if steps.len() as u64 != expected {
        return Err((pos, format!("{} entries, the control file says {expected}", steps.len())));
    }
    Ok(steps)
}

/// Reads the dictionary file's entry at `pos` (see `encode_file_entries`)
/// and moves `pos` past it; an error names the byte where it fails.
pub fn read_file_entry(bytes: &[u8], pos: &mut usize) -> Result<Step, (usize, String)> {
    let at = *pos;
    let step: Step = read_bytes(bytes, pos).map_err(|e| (at, e))?.into();
    let crc = bytes.get(*pos..*pos + 4).ok_or((*pos, "truncated entry checksum".to_string()))?;
    if crc32c::crc32c(&bytes[at..*pos]) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err((at, "dictionary entry checksum mismatch".to_string()));
    }
    *pos += 4;
    Ok(step)
}

/// Reads `LEB128 len ‖ bytes`, refusing lengths past the input.
pub fn read_bytes<'a>(bytes: &'a [u8], pos: &mut usize) -> Result<&'a [u8], String> {
    let len = varint::read_u64(bytes, pos).map_err(|e| e.to_string())?;
    let end = usize::try_from(len).ok().and_then(|l| pos.checked_add(l)).filter(|&end| end <= bytes.len());
    let Some(end) = end else {
        return Err(format!("length {len} at byte {} runs past the end", *pos));
    };
    let out = &bytes[*pos..end];
    *pos = end;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(steps: &[&str]) -> RawSteps {
        let mut raw = RawSteps::default();
        for step in steps {
            raw.note(step.as_bytes());
        }
        raw
    }

    /// A name recurs once it is written twice, in one commit or in two; a
    /// commit that writes it many times holds it once.
    #[test]
    fn a_name_written_twice_is_promoted_once() {
        let mut dict = Dict::default();
        let written = raw(&["balance", "counter", "balance", "balance"]);
        assert_eq!(written.steps.len(), 2, "each name held once");
        assert_eq!(dict.observe(&written), vec![Step::from_slice(b"balance")]);
        dict.push(Step::from_slice(b"balance"));
        // `counter` was seen once: the next commit's write promotes it.
        assert_eq!(dict.observe(&raw(&["counter", "balance", "manager"])), vec![Step::from_slice(b"counter")]);
        dict.push(Step::from_slice(b"counter"));
        assert!(dict.observe(&raw(&["balance", "counter"])).is_empty(), "names with ids are not promoted again");
        // Promotions come sorted, whatever the order they were written in.
        let promoted = dict.observe(&raw(&["zz", "aa", "zz", "aa", "manager"]));
        let expected: Vec<Step> = ["aa", "manager", "zz"].iter().map(|s| Step::from_slice(s.as_bytes())).collect();
        assert_eq!(promoted, expected);
    }
}
