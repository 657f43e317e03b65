//! Locking that survives a panic elsewhere: every mutex in sdkbox guards plain data whose
//! invariants hold between statements, so a poisoned lock's data is still good to use, and a
//! panic in one call must not turn every later call into another.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, taking the data of a poisoned one as it is.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
