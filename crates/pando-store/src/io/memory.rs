//! An in-memory directory for fast tests. Everything is durable at once.

use super::{File, Storage};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::io;
use std::sync::Arc;

/// Files kept in memory; cloning shares the same directory.
#[derive(Clone, Default)]
pub struct MemStorage {
    files: Arc<Mutex<HashMap<String, Arc<MemFile>>>>,
}

impl MemStorage {
    pub fn new() -> MemStorage {
        MemStorage::default()
    }
}

#[derive(Default)]
pub(crate) struct MemFile {
    pub(crate) data: RwLock<Vec<u8>>,
}

pub(crate) fn read_exact_from(data: &[u8], buf: &mut [u8], offset: u64) -> io::Result<()> {
    let start = usize::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::UnexpectedEof))?;
    let end = start.checked_add(buf.len()).ok_or(io::ErrorKind::UnexpectedEof)?;
    if end > data.len() {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past end of file"));
    }
    buf.copy_from_slice(&data[start..end]);
    Ok(())
}

pub(crate) fn write_into(data: &mut Vec<u8>, buf: &[u8], offset: u64) {
    let start = offset as usize;
    let end = start + buf.len();
    if data.len() < end {
        data.resize(end, 0);
    }
    data[start..end].copy_from_slice(buf);
}

impl File for MemFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        read_exact_from(&self.data.read(), buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        write_into(&mut self.data.write(), buf, offset);
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.data.read().len() as u64)
    }
    fn truncate(&self, len: u64) -> io::Result<()> {
        self.data.write().resize(len as usize, 0);
        Ok(())
    }
}

fn not_found(name: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("no file {name}"))
}

impl Storage for MemStorage {
    fn open(&self, name: &str, create: bool) -> io::Result<Arc<dyn File>> {
        let mut files = self.files.lock();
        if let Some(file) = files.get(name) {
            return Ok(file.clone());
        }
        if !create {
            return Err(not_found(name));
        }
        let file = Arc::new(MemFile::default());
        files.insert(name.to_string(), file.clone());
        Ok(file)
    }
    fn exists(&self, name: &str) -> io::Result<bool> {
        Ok(self.files.lock().contains_key(name))
    }
    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.files.lock().keys().cloned().collect())
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.files.lock().remove(name).map(|_| ()).ok_or_else(|| not_found(name))
    }
    fn rename(&self, source: &str, target: &str) -> io::Result<()> {
        let mut files = self.files.lock();
        let file = files.remove(source).ok_or_else(|| not_found(source))?;
        files.insert(target.to_string(), file);
        Ok(())
    }
    fn sync_dir(&self) -> io::Result<()> {
        Ok(())
    }
    fn lock(&self, _name: &str) -> io::Result<Box<dyn std::any::Any + Send + Sync>> {
        // One process: the store's writer mutex is the only lock needed.
        Ok(Box::new(()))
    }
    fn describe(&self) -> String {
        "memory".to_string()
    }
}
