//! The `Arc` the directory trie holds its inodes by: the standard
//! library's, or, in a build with `--cfg pando_shuttle`, a model of it
//! whose reference counts are Shuttle's atomics, so that a model test
//! (`tests/shuttle_in_place_update.rs`) can run a thread between any two
//! operations on the counts, and so check the uniqueness test that lets
//! an update change an inode in place (`dir::node::updatable`, on which
//! the `unsafe fn` `dir::node::cleared` relies).
//!
//! Invariants:
//! - The model does what `alloc::sync::Arc` does, operation for operation:
//!   the same two counts (strong; weak, plus one that the strong
//!   references hold together, `usize::MAX` while `get_mut` locks it), the
//!   same atomic operations on them in the same order with the same
//!   orderings (`is_unique`, `downgrade`, `upgrade`, `clone`, `drop`,
//!   `strong_count`, `weak_count` as of Rust 1.9x). A race the model finds
//!   is a race with the standard library's `Arc`, as far as interleavings
//!   go (Shuttle runs atomics sequentially consistent: orderings are
//!   copied, not checked).
//! - Only what the trie and the model test use is modelled; a build with
//!   the cfg compiles the trie alone (`proof` is left out, see `lib.rs`).
//! - A normal build is untouched: `Arc` and `Weak` are the standard
//!   library's.

#[cfg(not(pando_shuttle))]
pub use std::sync::{Arc, Weak};

#[cfg(pando_shuttle)]
pub use model::{Arc, Weak};

#[cfg(pando_shuttle)]
#[expect(unsafe_code, reason = "a reference-counted pointer, as the standard library's: owns a raw allocation")]
mod model {
    use shuttle::sync::atomic::{AtomicUsize, Ordering, fence};
    use std::mem::ManuallyDrop;
    use std::ptr::NonNull;

    struct Inner<T> {
        strong: AtomicUsize,
        /// The `Weak`s, plus one for all the `Arc`s together; `usize::MAX`
        /// while `is_unique` holds it locked.
        weak: AtomicUsize,
        /// Dropped when the strong count reaches 0; the allocation is freed
        /// when the weak count does.
        data: ManuallyDrop<T>,
    }

    /// `std::sync::Arc` with Shuttle's atomics (see the module's header).
    pub struct Arc<T> {
        ptr: NonNull<Inner<T>>,
    }

    /// `std::sync::Weak` with Shuttle's atomics.
    pub struct Weak<T> {
        ptr: NonNull<Inner<T>>,
    }

    // SAFETY: as `std::sync::Arc`: the data is shared between threads, and
    // dropped by whichever drops the last `Arc`.
    unsafe impl<T: Send + Sync> Send for Arc<T> {}
    // SAFETY: as above.
    unsafe impl<T: Send + Sync> Sync for Arc<T> {}
    // SAFETY: as above: a `Weak` may become an `Arc` on another thread.
    unsafe impl<T: Send + Sync> Send for Weak<T> {}
    // SAFETY: as above.
    unsafe impl<T: Send + Sync> Sync for Weak<T> {}

    impl<T> Arc<T> {
        pub fn new(data: T) -> Arc<T> {
            let inner = Box::new(Inner { strong: AtomicUsize::new(1), weak: AtomicUsize::new(1), data: ManuallyDrop::new(data) });
            Arc { ptr: NonNull::from(Box::leak(inner)) }
        }

        fn inner(&self) -> &Inner<T> {
            // SAFETY: the allocation lives while an `Arc` does (the strong
            // references hold one weak count together).
            unsafe { self.ptr.as_ref() }
        }

        pub fn as_ptr(this: &Arc<T>) -> *const T {
            // SAFETY: a field of the live allocation, no reference made.
            unsafe { &raw const (*this.ptr.as_ptr()).data }.cast()
        }

        pub fn strong_count(this: &Arc<T>) -> usize {
            this.inner().strong.load(Ordering::Relaxed)
        }

        pub fn weak_count(this: &Arc<T>) -> usize {
            let count = this.inner().weak.load(Ordering::Relaxed);
            if count == usize::MAX { 0 } else { count - 1 }
        }

        pub fn ptr_eq(this: &Arc<T>, other: &Arc<T>) -> bool {
            this.ptr == other.ptr
        }

        /// The standard library's: the weak count locked first (no `Weak`
        /// then, and none made meanwhile), then the strong count read.
        fn is_unique(this: &Arc<T>) -> bool {
            let inner = this.inner();
            if inner.weak.compare_exchange(1, usize::MAX, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                let unique = inner.strong.load(Ordering::Acquire) == 1;
                inner.weak.store(1, Ordering::Release);
                unique
            } else {
                false
            }
        }

        pub fn get_mut(this: &mut Arc<T>) -> Option<&mut T> {
            // SAFETY: unique, and borrowed mutably: the only reference.
            Arc::is_unique(this).then(|| unsafe { &mut *(*this.ptr.as_ptr()).data })
        }

        pub fn downgrade(this: &Arc<T>) -> Weak<T> {
            let inner = this.inner();
            let mut current = inner.weak.load(Ordering::Relaxed);
            loop {
                if current == usize::MAX {
                    shuttle::hint::spin_loop();
                    current = inner.weak.load(Ordering::Relaxed);
                    continue;
                }
                match inner.weak.compare_exchange_weak(current, current + 1, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => return Weak { ptr: this.ptr },
                    Err(old) => current = old,
                }
            }
        }
    }

    impl<T> Clone for Arc<T> {
        fn clone(&self) -> Arc<T> {
            self.inner().strong.fetch_add(1, Ordering::Relaxed);
            Arc { ptr: self.ptr }
        }
    }

    impl<T> std::ops::Deref for Arc<T> {
        type Target = T;
        fn deref(&self) -> &T {
            &self.inner().data
        }
    }

    impl<T> Drop for Arc<T> {
        fn drop(&mut self) {
            if self.inner().strong.fetch_sub(1, Ordering::Release) != 1 {
                return;
            }
            fence(Ordering::Acquire);
            // SAFETY: the last `Arc`: nothing reads the data again (a
            // `Weak` upgrades no more from a strong count of 0).
            unsafe { ManuallyDrop::drop(&mut (*self.ptr.as_ptr()).data) };
            // The weak count the strong references held together.
            drop(Weak { ptr: self.ptr });
        }
    }

    impl<T> Weak<T> {
        pub fn upgrade(&self) -> Option<Arc<T>> {
            // SAFETY: a `Weak` keeps the allocation (not the data).
            let inner = unsafe { self.ptr.as_ref() };
            let mut current = inner.strong.load(Ordering::Relaxed);
            loop {
                if current == 0 {
                    return None;
                }
                match inner.strong.compare_exchange_weak(current, current + 1, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => return Some(Arc { ptr: self.ptr }),
                    Err(old) => current = old,
                }
            }
        }
    }

    impl<T> Clone for Weak<T> {
        fn clone(&self) -> Weak<T> {
            // SAFETY: as in `upgrade`.
            unsafe { self.ptr.as_ref() }.weak.fetch_add(1, Ordering::Relaxed);
            Weak { ptr: self.ptr }
        }
    }

    impl<T> Drop for Weak<T> {
        fn drop(&mut self) {
            // SAFETY: as in `upgrade`.
            if unsafe { self.ptr.as_ref() }.weak.fetch_sub(1, Ordering::Release) == 1 {
                fence(Ordering::Acquire);
                // SAFETY: the last reference of any kind: the allocation,
                // made by `Box` in `new`, whose data is dropped already
                // (`ManuallyDrop`).
                drop(unsafe { Box::from_raw(self.ptr.as_ptr()) });
            }
        }
    }
}
