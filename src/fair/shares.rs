//! Shares of a resource taken and given back at once (no waiting): a request in flight, an
//! event stream, a question on the approval page.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{Principal, Refused};
use crate::lock::lock;

/// How a resource is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareLimits {
    /// The most held at once, by everyone.
    pub total: usize,
    /// The most one principal holds at once.
    pub per_principal: usize,
    /// Of the total, how many only a principal holding none may take.
    pub reserve: usize,
}

/// A resource shared fairly between principals.
pub struct Shares {
    what: &'static str,
    limits: ShareLimits,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    total: usize,
    by: HashMap<Principal, usize>,
}

/// One share, given back when dropped.
pub struct Share {
    shares: Arc<Shares>,
    who: Principal,
}

impl Shares {
    /// A resource called `what` in refusals (`requests`, `event streams`), shared within
    /// `limits`.
    pub fn new(what: &'static str, limits: ShareLimits) -> Arc<Self> {
        Arc::new(Self {
            what,
            limits,
            held: Mutex::default(),
        })
    }

    /// The limits it was made with.
    pub fn limits(&self) -> ShareLimits {
        self.limits
    }

    /// A share for `who`, or why not: past its own share, or past the total (where a
    /// principal that holds some already cannot take from the reserve).
    pub fn try_take(self: &Arc<Self>, who: &Principal) -> Result<Share, Refused> {
        let mut held = lock(&self.held);
        let mine = held.by.get(who).copied().unwrap_or(0);
        if mine >= self.limits.per_principal {
            return Err(Refused::Yours {
                what: self.what,
                held: mine,
            });
        }
        let open_to_me = if mine == 0 {
            self.limits.total
        } else {
            self.limits.total.saturating_sub(self.limits.reserve)
        };
        if held.total >= open_to_me {
            return Err(Refused::Total { what: self.what });
        }
        held.total += 1;
        *held.by.entry(who.clone()).or_default() += 1;
        Ok(Share {
            shares: self.clone(),
            who: who.clone(),
        })
    }

    /// How many `who` holds now.
    pub fn held_by(&self, who: &Principal) -> usize {
        lock(&self.held).by.get(who).copied().unwrap_or(0)
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = lock(&self.shares.held);
        held.total = held.total.saturating_sub(1);
        if let Some(mine) = held.by.get_mut(&self.who) {
            *mine -= 1;
            if *mine == 0 {
                held.by.remove(&self.who);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(n: u8) -> Principal {
        Principal::peer(std::net::IpAddr::from([10, 0, 0, n]))
    }

    #[test]
    fn a_principal_gets_its_share_and_the_reserve_stays_for_those_holding_none() {
        let shares = Shares::new(
            "requests",
            ShareLimits {
                total: 10,
                per_principal: 4,
                reserve: 2,
            },
        );
        let mut taken = Vec::new();
        for _ in 0..4 {
            taken.push(shares.try_take(&who(1)).unwrap());
        }
        assert_eq!(
            shares.try_take(&who(1)).err(),
            Some(Refused::Yours {
                what: "requests",
                held: 4
            })
        );
        for _ in 0..4 {
            taken.push(shares.try_take(&who(2)).unwrap());
        }
        // 8 of 10 held: the last 2 are for principals holding none.
        assert!(matches!(
            shares.try_take(&who(3)).map(|s| taken.push(s)),
            Ok(())
        ));
        assert_eq!(
            shares.try_take(&who(3)).err(),
            Some(Refused::Total { what: "requests" })
        );
        taken.push(shares.try_take(&who(4)).unwrap());
        assert!(shares.try_take(&who(5)).is_err(), "past the total");
        drop(taken);
        assert_eq!(shares.held_by(&who(1)), 0);
        assert!(lock(&shares.held).by.is_empty(), "nothing left behind");
        assert!(shares.try_take(&who(5)).is_ok());
    }
}
