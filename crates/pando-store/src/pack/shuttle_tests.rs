//! The hand-over between readers, the writer and a collection's switches,
//! explored by Shuttle over many random schedules: a reader never fails to
//! read a live record, nor reads wrong bytes, while the writer appends
//! (starting chunks) and a collection installs a layout that keeps records
//! in place, then one that moves them into a segment, removing files.

use super::*;
use crate::io::MemStorage;

fn batch(tag: u8) -> Vec<u8> {
    let mut out = Vec::new();
    record::append(&mut out, RecordKind::Blob, &[tag; 40]);
    out
}

fn append(pack: &Pack, tag: u8) -> u64 {
    let at = pack.prepare_append().unwrap();
    pack.append(at, &batch(tag)).unwrap();
    at
}

#[test]
fn shuttle_readers_never_see_a_switch() {
    shuttle::check_random(
        || {
            let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
            Pack::create_files(&*storage).unwrap();
            // A new chunk for every batch: records 0..4 in chunks of their own.
            let pack = Arc::new(Pack::open(storage.clone(), PackOptions { chunk_target_bytes: 1, writable: true, ..PackOptions::default() }).unwrap());
            let at: Vec<u64> = (0..4).map(|tag| append(&pack, tag)).collect();
            let len = batch(0).len() as u64;
            // Record 1 is garbage; 0 stays, first in place, then in segment 7.
            let reader = {
                let pack = pack.clone();
                let at = at.clone();
                shuttle::thread::spawn(move || {
                    for _ in 0..3 {
                        for tag in [0u8, 2, 3] {
                            let (kind, payload) = pack.read_record(at[tag as usize]).unwrap();
                            assert_eq!((kind, payload), (RecordKind::Blob, vec![tag; 40]));
                        }
                    }
                })
            };
            let writer = {
                let pack = pack.clone();
                shuttle::thread::spawn(move || (4..7).map(|tag| append(&pack, tag)).collect::<Vec<u64>>())
            };
            let in_place = vec![Run { old: at[0], new: 0, len, file: IN_CHUNK | at[0] }];
            let resolved = pack
                .resolve(Layout { generation: 1, runs: in_place, new_files: Vec::new(), boundary: at[2], archive: false })
                .unwrap();
            let (remove, _) = pack.install(resolved);
            assert_eq!(remove, vec![chunk_name(at[1])]);
            for name in remove {
                storage.remove(&name).unwrap();
            }
            let segment = storage.open(&segment_name(7), true).unwrap();
            segment.write_all_at(&batch(0), 0).unwrap();
            let moved = vec![Run { old: at[0], new: 0, len, file: 7 }];
            let source = PackFile { name: segment_name(7), file: segment, len };
            let resolved = pack
                .resolve(Layout { generation: 2, runs: moved, new_files: vec![(7, source)], boundary: at[2], archive: false })
                .unwrap();
            let (remove, _) = pack.install(resolved);
            assert_eq!(remove, vec![chunk_name(at[0])]);
            for name in remove {
                storage.remove(&name).unwrap();
            }
            reader.join().unwrap();
            let later = writer.join().unwrap();
            for (tag, &offset) in (4u8..).zip(&later) {
                assert_eq!(pack.read_record(offset).unwrap().1, vec![tag; 40]);
            }
            assert!(matches!(pack.read_record(at[1]), Err(Error::Collected { .. })));
            assert!(pack.holds(at[0]) && !pack.holds(at[1]));
        },
        2000,
    );
}
