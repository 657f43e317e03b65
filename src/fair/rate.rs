//! Rates per principal: a token bucket each, for what costs someone else (an introspection at
//! the issuer, a token exchange), kept in memory and bounded in number.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::time::Instant;

use super::Principal;
use crate::lock::lock;

/// Principals whose buckets are kept; past it, full buckets (the same as none) are
/// forgotten, and if none is full, new principals are refused until some are.
const MAX_KEPT: usize = 10_000;

/// A token bucket: what is left, and when it was last filled.
#[derive(Debug, Clone, Copy)]
pub struct Bucket {
    left: f64,
    filled: Instant,
}

impl Bucket {
    /// A full bucket of `burst`.
    pub fn full(burst: f64) -> Self {
        Self {
            left: burst,
            filled: Instant::now(),
        }
    }

    /// Takes one, if there is one, filling at `per_second` up to `burst`.
    pub fn take(&mut self, per_second: f64, burst: f64) -> bool {
        let now = Instant::now();
        let left =
            (self.left + now.duration_since(self.filled).as_secs_f64() * per_second).min(burst);
        self.filled = now;
        if left < 1.0 {
            self.left = left;
            return false;
        }
        self.left = left - 1.0;
        true
    }

    fn is_full(&self, per_second: f64, burst: f64) -> bool {
        self.left + Instant::now().duration_since(self.filled).as_secs_f64() * per_second >= burst
    }
}

/// A rate per principal.
pub struct Rate {
    per_second: f64,
    burst: f64,
    buckets: Mutex<HashMap<Principal, Bucket>>,
}

impl Rate {
    /// `per_second` on average for each principal, `burst` at once after a pause.
    pub fn new(per_second: f64, burst: f64) -> Self {
        Self {
            per_second,
            burst,
            buckets: Mutex::default(),
        }
    }

    /// Whether `who` may go on now (and takes one from its bucket if so).
    pub fn allow(&self, who: &Principal) -> bool {
        let mut buckets = lock(&self.buckets);
        if buckets.len() >= MAX_KEPT && !buckets.contains_key(who) {
            buckets.retain(|_, bucket| !bucket.is_full(self.per_second, self.burst));
            if buckets.len() >= MAX_KEPT {
                return false;
            }
        }
        buckets
            .entry(who.clone())
            .or_insert_with(|| Bucket::full(self.burst))
            .take(self.per_second, self.burst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_principal_has_its_own_bucket() {
        let rate = Rate::new(0.001, 3.0);
        let noisy = Principal::peer([10, 0, 0, 1].into());
        let quiet = Principal::peer([10, 0, 0, 2].into());
        assert_eq!((0..10).filter(|_| rate.allow(&noisy)).count(), 3);
        assert!(rate.allow(&quiet));
    }
}
