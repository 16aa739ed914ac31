//! A summary of a trace's contents: blocks, operations by kind, the most
//! frequent path prefixes, and written value sizes by power of two.

use pando_core::trace::{Key, Row};
use std::collections::HashMap;
use std::fmt::Write;

#[derive(Default)]
pub struct TraceStats {
    pub rows: u64,
    pub blocks: u64,
    pub by_kind: HashMap<&'static str, u64>,
    /// Operations per path prefix (first two steps).
    pub by_prefix: HashMap<String, u64>,
    /// Written values by size class: index i counts sizes in (2^(i-1), 2^i].
    pub value_sizes: [u64; 32],
    pub min_block_rows: u64,
    pub max_block_rows: u64,
    block_rows: u64,
}

fn prefix(key: &Key) -> String {
    key.iter().take(2).map(|s| String::from_utf8_lossy(s).into_owned()).collect::<Vec<_>>().join("/")
}

impl TraceStats {
    pub fn add(&mut self, row: &Row) {
        self.rows += 1;
        self.block_rows += 1;
        *self.by_kind.entry(row.kind()).or_default() += 1;
        let key = match row {
            Row::Add { key, value, .. } => {
                let class = if value.len() <= 1 { 0 } else { (usize::BITS - (value.len() - 1).leading_zeros()) as usize };
                self.value_sizes[class.min(31)] += 1;
                Some(key)
            }
            Row::Remove { key, .. } | Row::Find { key, .. } | Row::Mem { key, .. } | Row::MemTree { key, .. } => Some(key),
            Row::Copy { source, .. } => Some(source),
            Row::Checkout { .. } | Row::Commit { .. } => None,
        };
        if let Some(key) = key {
            *self.by_prefix.entry(prefix(key)).or_default() += 1;
        }
        if let Row::Commit { .. } = row {
            self.min_block_rows = if self.blocks == 0 { self.block_rows } else { self.min_block_rows.min(self.block_rows) };
            self.max_block_rows = self.max_block_rows.max(self.block_rows);
            self.blocks += 1;
            self.block_rows = 0;
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{} rows, {} blocks", self.rows, self.blocks);
        if self.blocks > 0 {
            let _ = writeln!(
                out,
                "rows per block: mean {:.1}, min {}, max {}",
                self.rows as f64 / self.blocks as f64,
                self.min_block_rows,
                self.max_block_rows
            );
        }
        let _ = writeln!(out, "\noperations:");
        for kind in ["checkout", "add", "remove", "copy", "find", "mem", "mem_tree", "commit"] {
            let count = self.by_kind.get(kind).copied().unwrap_or(0);
            let _ = writeln!(out, "  {kind:<10} {count:>12} {:>6.1}%", 100.0 * count as f64 / self.rows.max(1) as f64);
        }
        let _ = writeln!(out, "\npath prefixes (operations):");
        let mut prefixes: Vec<(&String, &u64)> = self.by_prefix.iter().collect();
        prefixes.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (prefix, count) in prefixes.iter().take(15) {
            let _ = writeln!(out, "  {prefix:<40} {count:>12}");
        }
        let written: u64 = self.value_sizes.iter().sum();
        let _ = writeln!(out, "\nwritten value sizes (bytes, up to):");
        for (class, count) in self.value_sizes.iter().enumerate() {
            if *count > 0 {
                let _ =
                    writeln!(out, "  {:<10} {count:>12} {:>6.1}%", 1u64 << class, 100.0 * *count as f64 / written.max(1) as f64);
            }
        }
        out
    }
}
