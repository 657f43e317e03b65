//! A bound on runtimes waiting to be freed.
//!
//! An execution thread frees its runtime after the report has left, at the lowest priority.
//! Under CPU contention that freeing can starve, and every runtime still waiting holds its
//! heap and its event loop's file descriptors (a worker process may open 64). A new runtime
//! is created only once fewer than [`MAX_FREEING`] are waiting, so starved frees slow the
//! next execution down instead of piling up until the process runs out of descriptors.

use std::sync::{Condvar, Mutex, MutexGuard};

/// How many runtimes may be waiting to be freed before the next one is created.
const MAX_FREEING: usize = 2;

/// The process's runtimes being freed.
pub static FREEING: Bound = Bound::new(MAX_FREEING);

/// A count of runtimes being freed, and the wait for it to fall below its bound.
pub struct Bound {
    count: Mutex<usize>,
    fallen: Condvar,
    max: usize,
}

impl Bound {
    const fn new(max: usize) -> Self {
        Bound {
            count: Mutex::new(0),
            fallen: Condvar::new(),
            max,
        }
    }

    fn count(&self) -> MutexGuard<'_, usize> {
        self.count.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Blocks the calling (execution) thread until fewer than the bound are being freed.
    pub fn wait_for_room(&self) {
        let count = self.count();
        drop(
            self.fallen
                .wait_while(count, |count| *count >= self.max)
                .unwrap_or_else(|p| p.into_inner()),
        );
    }

    /// Counts one runtime as being freed until the guard is dropped (after the runtime).
    pub fn begin(&self) -> Freeing<'_> {
        *self.count() += 1;
        Freeing(self)
    }
}

/// One runtime being freed; dropping it lets a waiting runtime be created.
pub struct Freeing<'a>(&'a Bound);

impl Drop for Freeing<'_> {
    fn drop(&mut self) {
        *self.0.count() -= 1;
        self.0.fallen.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn a_new_runtime_waits_while_the_bound_is_reached_and_goes_once_one_is_freed() {
        static BOUND: Bound = Bound::new(2);
        static CREATED: AtomicBool = AtomicBool::new(false);
        BOUND.wait_for_room();
        let first = BOUND.begin();
        BOUND.wait_for_room();
        let second = BOUND.begin();
        let waiter = std::thread::spawn(|| {
            BOUND.wait_for_room();
            CREATED.store(true, Ordering::SeqCst);
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(!CREATED.load(Ordering::SeqCst), "it went past a full bound");
        drop(first);
        waiter.join().unwrap();
        assert!(CREATED.load(Ordering::SeqCst));
        drop(second);
        assert_eq!(*BOUND.count(), 0);
    }
}
