//! The writer's commit pipeline: encoding a commit's new inodes into one
//! batch of records (`batch`), hashing them on a helper thread
//! (`hashing`), the commit protocol that ties them together (`commit`),
//! step 4 on a thread of its own (`syncer`), and the branches
//! file with its one writing step (`branches`).
//!
//! Invariants:
//! - Only a writable store reaches this pipeline, and only under the
//!   writer lock; the helper threads it starts only hash (`hashing`) or
//!   sync one commit at a time, in commit order (`syncer`).
//! - A commit hash is in the index only once its batch is in the pack.

pub(super) mod batch;
pub(super) mod branches;
pub(super) mod commit;
pub(super) mod hashing;
pub(super) mod syncer;
