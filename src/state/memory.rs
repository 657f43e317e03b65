//! The state store of one process: records and bounded sets in memory, each with its time to
//! live on tokio's clock (so tests can pause it). Nothing survives the process; no other
//! process shares it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::lock::lock;

/// Records kept at most; past this a new record is refused (every record has a time to live
/// and every kind of record a bound of its own, so this is only the last line).
const MAX_RECORDS: usize = 1_000_000;

/// Admissions between two sweeps of every set (members past their time, and sets left empty,
/// go): a set a caller stopped using does not stay.
const SWEEP_EVERY: u64 = 4_096;

/// Records and sets of one process.
#[derive(Default)]
pub struct Memory {
    records: Mutex<HashMap<String, (String, Instant)>>,
    sets: Mutex<HashMap<String, HashMap<String, Instant>>>,
    admissions: std::sync::atomic::AtomicU64,
}

/// Why the memory store refused.
#[derive(Debug)]
pub struct Full;

impl Memory {
    fn live(records: &mut HashMap<String, (String, Instant)>, key: &str) -> Option<String> {
        let now = Instant::now();
        match records.get(key) {
            Some((_, until)) if *until <= now => {
                records.remove(key);
                None
            }
            Some((value, _)) => Some(value.clone()),
            None => None,
        }
    }

    fn room(records: &mut HashMap<String, (String, Instant)>) -> Result<(), Full> {
        if records.len() < MAX_RECORDS {
            return Ok(());
        }
        let now = Instant::now();
        records.retain(|_, (_, until)| *until > now);
        match records.len() < MAX_RECORDS {
            true => Ok(()),
            false => Err(Full),
        }
    }

    pub fn get(&self, key: &str) -> Option<String> {
        Self::live(&mut lock(&self.records), key)
    }

    pub fn put(&self, key: &str, value: &str, ttl: Duration) -> Result<(), Full> {
        let mut records = lock(&self.records);
        Self::room(&mut records)?;
        records.insert(key.to_owned(), (value.to_owned(), Instant::now() + ttl));
        Ok(())
    }

    pub fn put_new(&self, key: &str, value: &str, ttl: Duration) -> Result<bool, Full> {
        let mut records = lock(&self.records);
        if Self::live(&mut records, key).is_some() {
            return Ok(false);
        }
        Self::room(&mut records)?;
        records.insert(key.to_owned(), (value.to_owned(), Instant::now() + ttl));
        Ok(true)
    }

    pub fn take(&self, key: &str) -> Option<String> {
        let mut records = lock(&self.records);
        let value = Self::live(&mut records, key);
        records.remove(key);
        value
    }

    pub fn delete_if(&self, key: &str, value: &str) -> bool {
        let mut records = lock(&self.records);
        match Self::live(&mut records, key) {
            Some(current) if current == value => {
                records.remove(key);
                true
            }
            _ => false,
        }
    }

    pub fn swap(
        &self,
        key: &str,
        old: Option<&str>,
        new: Option<&str>,
        ttl: Duration,
    ) -> Result<bool, Full> {
        let mut records = lock(&self.records);
        if Self::live(&mut records, key).as_deref() != old {
            return Ok(false);
        }
        match new {
            Some(new) => {
                Self::room(&mut records)?;
                records.insert(key.to_owned(), (new.to_owned(), Instant::now() + ttl));
            }
            None => {
                records.remove(key);
            }
        }
        Ok(true)
    }

    pub fn expire(&self, key: &str, ttl: Duration) -> bool {
        let mut records = lock(&self.records);
        if Self::live(&mut records, key).is_none() {
            return false;
        }
        if let Some((_, until)) = records.get_mut(key) {
            *until = Instant::now() + ttl;
        }
        true
    }

    pub fn admit(&self, set: &str, member: &str, ttl: Duration, max: usize) -> bool {
        let mut sets = lock(&self.sets);
        let now = Instant::now();
        let admitted = self
            .admissions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if admitted % SWEEP_EVERY == SWEEP_EVERY - 1 {
            sets.retain(|_, members| {
                members.retain(|_, until| *until > now);
                !members.is_empty()
            });
        }
        let members = sets.entry(set.to_owned()).or_default();
        members.retain(|_, until| *until > now);
        if !members.contains_key(member) && members.len() >= max {
            return false;
        }
        members.insert(member.to_owned(), now + ttl);
        true
    }

    pub fn dismiss(&self, set: &str, member: &str) {
        let mut sets = lock(&self.sets);
        if let Some(members) = sets.get_mut(set) {
            members.remove(member);
            if members.is_empty() {
                sets.remove(set);
            }
        }
    }

    pub fn members(&self, set: &str) -> Vec<String> {
        let mut sets = lock(&self.sets);
        let now = Instant::now();
        let Some(members) = sets.get_mut(set) else {
            return Vec::new();
        };
        members.retain(|_, until| *until > now);
        let kept: Vec<String> = members.keys().cloned().collect();
        if kept.is_empty() {
            sets.remove(set);
        }
        kept
    }
}
