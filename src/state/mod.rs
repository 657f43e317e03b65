//! The state store: what must be seen by every replica, or outlive one execution, in one
//! place. Approval decisions and the chains of runs they tie together (each write's journal
//! entry: claimed before it leaves, settled with what came back), request states already
//! spent, questions waiting on the approval page, MCP sessions (who opened them, and the
//! client's `initialize`), and the letters replicas send each other (a client's answer that
//! reached another replica than the one waiting for it).
//!
//! Two backends with one meaning: memory, for one process (the default), and Redis (or
//! Valkey), for replicas. Every record has a time to live; every change that must be atomic
//! across replicas is one step of the backend (compare-and-swap, set-if-absent, spend within
//! the epoch, admission to a bounded set), so no replica acts on half of another's change.
//!
//! Invariants:
//! - keys are namespaced by the deployment (a digest of its approval key): deployments that
//!   share a server never read each other's records;
//! - the store has an epoch, drawn when it is first used: a record that proves something was
//!   not done yet (an unspent request state) is honoured only within the epoch it was made in,
//!   so a store that lost its data (a flushed Redis, a restarted process) refuses instead of
//!   allowing twice;
//! - a replica says it is alive every few seconds; a claim held by a replica that stopped
//!   saying so is treated as a write that may have been sent, never as one that was not.

mod memory;
mod redis;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::broadcast;

use crate::hex::hex;
use crate::lock::lock;

pub(crate) use self::redis::Redis;
pub use self::redis::redacted;

/// Why the store could not answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StateError {
    /// The backend cannot be reached or refused the operation.
    #[error("the state store is unavailable: {0}")]
    Unavailable(String),
    /// A record is not what sdkbox wrote (another version, or damage): nothing is decided
    /// from it.
    #[error("the state store holds a record sdkbox cannot read ({0})")]
    Unreadable(String),
    /// A record changed under every attempt to change it.
    #[error("the state store's record {0} is changed too often to update; try again")]
    Contended(String),
    /// The memory store holds as many records as it may.
    #[error("the state store is full")]
    Full,
}

/// What spending a one-time token found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spent {
    /// Unused until now: it is used.
    Fresh,
    /// Used before.
    Used,
    /// Made in another epoch of the store: nobody can tell whether it was used.
    Foreign,
}

/// A change [`StateStore::update`] makes to a record, and what it returns.
pub enum Change<T, R> {
    /// Leave the record as it is.
    Keep(R),
    /// Write this value.
    Write(T, R),
    /// Remove the record.
    Delete(R),
}

/// A message from one replica to another (or to all).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Letter {
    /// The replica that sent it.
    pub from: String,
    /// What it is about, for the receiver to route it.
    pub topic: String,
    /// Its content.
    pub body: String,
}

/// Attempts of one update before it gives up as contended.
const MAX_ATTEMPTS: usize = 64;

/// The state store; clones share it.
#[derive(Clone)]
pub struct StateStore {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Backend,
    prefix: String,
    replica: String,
    /// The store's epoch as this process last read it: the heartbeat reads it again at each
    /// beat, so a store that lost its records (and drew a new one) is noticed within one.
    epoch: Arc<Mutex<String>>,
    letters: broadcast::Sender<Letter>,
    /// Wall-clock milliseconds at `started`, for [`StateStore::now_ms`].
    wall_at_start: u64,
    started: tokio::time::Instant,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

enum Backend {
    Memory(memory::Memory),
    Redis(Redis),
}

impl StateStore {
    /// A store of this process alone, for deployment `namespace` (see [`namespace`]).
    pub fn memory(namespace: &str) -> Self {
        // Nobody shares it: its ids need not be unguessable, only new at each start.
        let fresh = || fresh_id().unwrap_or_else(|_| format!("{:?}", std::time::SystemTime::now()));
        let backend = Backend::Memory(memory::Memory::default());
        Self {
            inner: Arc::new(Self::inner(backend, namespace, fresh(), fresh())),
        }
    }

    /// The store at `url`: `memory` for this process alone, else a `redis://` or `rediss://`
    /// URL, shared by every replica given it.
    pub async fn open(url: &str, namespace: &str) -> Result<Self, StateError> {
        if url == "memory" {
            return Ok(Self::memory(namespace));
        }
        if !is_shared(url) {
            return Err(StateError::Unavailable(format!(
                "`{}` is not a state store: give `memory`, or a redis:// or rediss:// URL",
                redacted(url)
            )));
        }
        let redis = Redis::connect(url).await?;
        redis
            .never_evicts()
            .await
            .map_err(|why| StateError::Unavailable(format!("{}: {why}", redacted(url))))?;
        let epoch_key = format!("{}epoch", prefix(namespace));
        let epoch = redis.epoch(&epoch_key, &fresh_id()?).await?;
        let replica = fresh_id()?;
        let mut inner = Self::inner(Backend::Redis(redis.clone()), namespace, epoch, replica);
        let alive_key = format!("{}replica:{}", inner.prefix, inner.replica);
        let (heartbeat, epoch) = (redis.clone(), inner.epoch.clone());
        inner.tasks.push(tokio::spawn(async move {
            heartbeat.heartbeat(alive_key, epoch_key, epoch).await;
        }));
        let channels = vec![
            format!("{}to:{}", inner.prefix, inner.replica),
            format!("{}all", inner.prefix),
        ];
        let (letters, replica) = (inner.letters.clone(), inner.replica.clone());
        inner.tasks.push(tokio::spawn(async move {
            redis.listen(channels, letters, replica).await;
        }));
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    fn inner(backend: Backend, namespace: &str, epoch: String, replica: String) -> Inner {
        let wall_at_start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Inner {
            backend,
            prefix: prefix(namespace),
            replica,
            epoch: Arc::new(Mutex::new(epoch)),
            letters: broadcast::channel(1_024).0,
            wall_at_start,
            started: tokio::time::Instant::now(),
            tasks: Vec::new(),
        }
    }

    /// Whether other processes share this store (Redis).
    pub fn shared(&self) -> bool {
        matches!(self.inner.backend, Backend::Redis(_))
    }

    /// This process's name among the replicas.
    pub fn replica(&self) -> &str {
        &self.inner.replica
    }

    /// The store's epoch: the one its records were made in. A store that lost its records has
    /// a new one, which replicas pick up within a heartbeat.
    pub fn epoch(&self) -> String {
        lock(&self.inner.epoch).clone()
    }

    /// Whether a run this replica began at `since` may still claim writes: the others have
    /// counted this replica alive all along (always, for one process).
    pub fn in_touch_since(&self, since: tokio::time::Instant) -> bool {
        match &self.inner.backend {
            Backend::Memory(_) => true,
            Backend::Redis(redis) => redis.in_touch_since(since),
        }
    }

    /// Milliseconds since the Unix epoch, as this store counts them (the memory store on
    /// tokio's clock, so paused tests move it).
    pub fn now_ms(&self) -> u64 {
        match &self.inner.backend {
            Backend::Memory(_) => {
                self.inner.wall_at_start + self.inner.started.elapsed().as_millis() as u64
            }
            Backend::Redis(_) => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        }
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.inner.prefix)
    }

    /// Says this replica is gone: its claims count as writes that may have been sent at once,
    /// not once its word of life expires (a process that stopped for good).
    pub async fn retire(&self) {
        for task in &self.inner.tasks {
            task.abort();
        }
        if let Backend::Redis(redis) = &self.inner.backend {
            let key = self.key(&format!("replica:{}", self.inner.replica));
            if let Err(error) = redis.take(&key).await {
                tracing::warn!(%error, "this replica's end could not be recorded");
            }
        }
    }

    /// Whether the store takes writes now and keeps what it is given (for readiness).
    pub async fn ping(&self) -> Result<(), StateError> {
        match &self.inner.backend {
            Backend::Memory(_) => Ok(()),
            Backend::Redis(redis) => {
                let key = self.key(&format!("ready:{}", self.inner.replica));
                redis.probe(&key).await
            }
        }
    }

    /// The record under `key`.
    pub async fn get(&self, key: &str) -> Result<Option<String>, StateError> {
        let key = self.key(key);
        match &self.inner.backend {
            Backend::Memory(memory) => Ok(memory.get(&key)),
            Backend::Redis(redis) => redis.get(&key).await,
        }
    }

    /// Keeps `value` under `key` for `ttl`.
    pub async fn put(&self, key: &str, value: &str, ttl: Duration) -> Result<(), StateError> {
        let key = self.key(key);
        match &self.inner.backend {
            Backend::Memory(memory) => memory.put(&key, value, ttl).map_err(|_| StateError::Full),
            Backend::Redis(redis) => redis.put(&key, value, ttl).await,
        }
    }

    /// Keeps `value` under `key` for `ttl` unless a record is there: of two replicas, one
    /// gets it.
    pub async fn put_new(&self, key: &str, value: &str, ttl: Duration) -> Result<bool, StateError> {
        let key = self.key(key);
        match &self.inner.backend {
            Backend::Memory(memory) => memory
                .put_new(&key, value, ttl)
                .map_err(|_| StateError::Full),
            Backend::Redis(redis) => redis.put_new(&key, value, ttl).await,
        }
    }

    /// The record under `key`, removed in the same step.
    pub async fn take(&self, key: &str) -> Result<Option<String>, StateError> {
        let key = self.key(key);
        match &self.inner.backend {
            Backend::Memory(memory) => Ok(memory.take(&key)),
            Backend::Redis(redis) => redis.take(&key).await,
        }
    }

    /// Removes `key` if it still holds `value` (not a later claim of another).
    pub async fn delete_if(&self, key: &str, value: &str) -> Result<bool, StateError> {
        let key = self.key(key);
        match &self.inner.backend {
            Backend::Memory(memory) => Ok(memory.delete_if(&key, value)),
            Backend::Redis(redis) => redis.delete_if(&key, value).await,
        }
    }

    /// Gives `key` `ttl` more to live, if it exists; whether it did.
    pub async fn expire(&self, key: &str, ttl: Duration) -> Result<bool, StateError> {
        let key = self.key(key);
        match &self.inner.backend {
            Backend::Memory(memory) => Ok(memory.expire(&key, ttl)),
            Backend::Redis(redis) => redis.expire(&key, ttl).await,
        }
    }

    async fn swap(
        &self,
        key: &str,
        old: Option<&str>,
        new: Option<&str>,
        ttl: Duration,
    ) -> Result<bool, StateError> {
        match &self.inner.backend {
            Backend::Memory(memory) => memory
                .swap(key, old, new, ttl)
                .map_err(|_| StateError::Full),
            Backend::Redis(redis) => redis.swap(key, old, new, ttl).await,
        }
    }

    /// Reads the record under `key` as a `T`, lets `change` decide what becomes of it, and
    /// writes that (for `ttl`) only if nobody changed the record meanwhile; else reads and
    /// decides again. `change` may run more than once, and must decide from what it is given.
    pub async fn update<T, R>(
        &self,
        key: &str,
        ttl: Duration,
        mut change: impl FnMut(Option<T>) -> Change<T, R>,
    ) -> Result<R, StateError>
    where
        T: Serialize + DeserializeOwned,
    {
        let full = self.key(key);
        for attempt in 0..MAX_ATTEMPTS {
            let current = match &self.inner.backend {
                Backend::Memory(memory) => memory.get(&full),
                Backend::Redis(redis) => redis.get(&full).await?,
            };
            let value = match &current {
                Some(text) => Some(
                    serde_json::from_str(text)
                        .map_err(|e| StateError::Unreadable(format!("{key}: {e}")))?,
                ),
                None => None,
            };
            let (new, result) = match change(value) {
                Change::Keep(result) => return Ok(result),
                Change::Write(value, result) => (
                    Some(
                        serde_json::to_string(&value)
                            .map_err(|e| StateError::Unreadable(e.to_string()))?,
                    ),
                    result,
                ),
                Change::Delete(result) => (None, result),
            };
            if current.is_none() && new.is_none() {
                return Ok(result);
            }
            if self
                .swap(&full, current.as_deref(), new.as_deref(), ttl)
                .await?
            {
                return Ok(result);
            }
            // Another replica changed it: back off a little, more each time, then read again.
            let wait = Duration::from_millis(1 + (attempt as u64).min(20) * 2);
            tokio::time::sleep(wait).await;
        }
        Err(StateError::Contended(key.to_owned()))
    }

    /// Reads the record under `key` as a `T`.
    pub async fn read<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, StateError> {
        match self.get(key).await? {
            Some(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| StateError::Unreadable(format!("{key}: {e}"))),
            None => Ok(None),
        }
    }

    /// Spends the one-time token `token` of epoch `epoch`, remembered for `ttl` (as long as
    /// the token could be presented).
    pub async fn spend(
        &self,
        epoch: &str,
        token: &str,
        ttl: Duration,
    ) -> Result<Spent, StateError> {
        if epoch != self.epoch() {
            return Ok(Spent::Foreign);
        }
        let key = self.key(&format!("spent:{token}"));
        match &self.inner.backend {
            Backend::Memory(memory) => match memory.put_new(&key, "1", ttl) {
                Ok(true) => Ok(Spent::Fresh),
                Ok(false) => Ok(Spent::Used),
                Err(_) => Err(StateError::Full),
            },
            Backend::Redis(redis) => {
                match redis.spend(&self.key("epoch"), epoch, &key, ttl).await? {
                    1 => Ok(Spent::Fresh),
                    0 => Ok(Spent::Used),
                    _ => Ok(Spent::Foreign),
                }
            }
        }
    }

    /// Adds `member` to the set `set` for `ttl`, unless the set holds `max` members already
    /// (those past their time do not count); a member already there is renewed.
    pub async fn admit(
        &self,
        set: &str,
        member: &str,
        ttl: Duration,
        max: usize,
    ) -> Result<bool, StateError> {
        let set = self.key(set);
        match &self.inner.backend {
            Backend::Memory(memory) => Ok(memory.admit(&set, member, ttl, max)),
            Backend::Redis(redis) => redis.admit(&set, member, ttl, max).await,
        }
    }

    /// Removes `member` from the set `set`.
    pub async fn dismiss(&self, set: &str, member: &str) -> Result<(), StateError> {
        let set = self.key(set);
        match &self.inner.backend {
            Backend::Memory(memory) => {
                memory.dismiss(&set, member);
                Ok(())
            }
            Backend::Redis(redis) => redis.dismiss(&set, member).await,
        }
    }

    /// The members of `set` whose time has not passed.
    pub async fn members(&self, set: &str) -> Result<Vec<String>, StateError> {
        let set = self.key(set);
        match &self.inner.backend {
            Backend::Memory(memory) => Ok(memory.members(&set)),
            Backend::Redis(redis) => redis.members(&set).await,
        }
    }

    /// Whether replica `replica` is still alive (said so within the last seconds).
    pub async fn alive(&self, replica: &str) -> Result<bool, StateError> {
        if replica == self.inner.replica {
            return Ok(true);
        }
        match &self.inner.backend {
            // One process: no other replica exists, so one named elsewhere is gone (a claim
            // from before a restart).
            Backend::Memory(_) => Ok(false),
            Backend::Redis(redis) => redis.alive(&self.key(&format!("replica:{replica}"))).await,
        }
    }

    /// Sends a letter about `topic` to `replica` (this one included).
    pub async fn send_to(&self, replica: &str, topic: &str, body: &str) -> Result<(), StateError> {
        let letter = self.letter(topic, body);
        if replica == self.inner.replica {
            let _ = self.inner.letters.send(letter);
            return Ok(());
        }
        match &self.inner.backend {
            Backend::Memory(_) => Ok(()),
            Backend::Redis(redis) => {
                let text = serde_json::to_string(&letter)
                    .map_err(|e| StateError::Unreadable(e.to_string()))?;
                redis
                    .publish(&self.key(&format!("to:{replica}")), &text)
                    .await
            }
        }
    }

    /// Sends a letter about `topic` to every other replica.
    pub async fn send_to_others(&self, topic: &str, body: &str) -> Result<(), StateError> {
        match &self.inner.backend {
            Backend::Memory(_) => Ok(()),
            Backend::Redis(redis) => {
                let text = serde_json::to_string(&self.letter(topic, body))
                    .map_err(|e| StateError::Unreadable(e.to_string()))?;
                redis.publish(&self.key("all"), &text).await
            }
        }
    }

    fn letter(&self, topic: &str, body: &str) -> Letter {
        Letter {
            from: self.inner.replica.clone(),
            topic: topic.to_owned(),
            body: body.to_owned(),
        }
    }

    /// Letters other replicas send this one, and those it sends itself.
    pub fn letters(&self) -> impl futures_util::Stream<Item = Letter> + Send + 'static {
        stream_of(self.inner.letters.subscribe())
    }
}

/// Letters as a stream; letters missed by a slow reader are skipped.
fn stream_of(
    receiver: broadcast::Receiver<Letter>,
) -> impl futures_util::Stream<Item = Letter> + Send + 'static {
    futures_util::stream::unfold(receiver, |mut receiver| async move {
        loop {
            match receiver.recv().await {
                Ok(letter) => return Some((letter, receiver)),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}

/// The namespace of a deployment: replicas that share the approval key share their records,
/// and nobody else's.
pub fn namespace(approval_key: &[u8]) -> String {
    let mut hash = Sha256::new();
    hash.update(b"sdkbox state namespace\0");
    hash.update(approval_key);
    hex(&hash.finalize()[..6])
}

/// Whether `url` names a store replicas share (a `redis://` or `rediss://` URL).
pub fn is_shared(url: &str) -> bool {
    url.starts_with("redis://") || url.starts_with("rediss://")
}

fn prefix(namespace: &str) -> String {
    format!("sdkbox:{namespace}:")
}

fn fresh_id() -> Result<String, StateError> {
    crate::approval::random_hex(12)
        .ok_or_else(|| StateError::Unavailable("no randomness for the store's ids".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_record_past_its_time_is_not_brought_back_by_renewing_it() {
        let store = StateStore::memory("t");
        store.put("k", "v", Duration::from_secs(5)).await.unwrap();
        assert!(store.expire("k", Duration::from_secs(5)).await.unwrap());
        tokio::time::advance(Duration::from_secs(6)).await;
        assert!(!store.expire("k", Duration::from_secs(60)).await.unwrap());
        assert_eq!(store.get("k").await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn records_expire_and_swaps_see_what_changed() {
        let store = StateStore::memory("t");
        store.put("a", "1", Duration::from_secs(5)).await.unwrap();
        assert!(
            !store
                .put_new("a", "2", Duration::from_secs(5))
                .await
                .unwrap()
        );
        let now = store.now_ms();
        tokio::time::advance(Duration::from_secs(6)).await;
        assert!(store.now_ms() >= now + 6_000);
        assert_eq!(store.get("a").await.unwrap(), None);
        assert!(
            store
                .put_new("a", "2", Duration::from_secs(5))
                .await
                .unwrap()
        );
        let seen: Vec<u32> = Vec::new();
        let result = store
            .update::<Vec<u32>, usize>("list", Duration::from_secs(5), |list| {
                let mut list = list.unwrap_or_else(|| seen.clone());
                list.push(7);
                let len = list.len();
                Change::Write(list, len)
            })
            .await
            .unwrap();
        assert_eq!(result, 1);
        assert_eq!(store.read::<Vec<u32>>("list").await.unwrap(), Some(vec![7]));
        assert!(store.delete_if("a", "2").await.unwrap());
        assert!(!store.delete_if("a", "2").await.unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn a_token_is_spent_once_and_only_within_its_epoch() {
        let store = StateStore::memory("t");
        let epoch = store.epoch().to_owned();
        let ttl = Duration::from_secs(60);
        assert_eq!(store.spend(&epoch, "s1", ttl).await.unwrap(), Spent::Fresh);
        assert_eq!(store.spend(&epoch, "s1", ttl).await.unwrap(), Spent::Used);
        assert_eq!(
            store.spend("other", "s2", ttl).await.unwrap(),
            Spent::Foreign
        );
        let restarted = StateStore::memory("t");
        assert_eq!(
            restarted.spend(&epoch, "s1", ttl).await.unwrap(),
            Spent::Foreign
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_bounded_set_admits_up_to_its_bound_and_forgets_expired_members() {
        let store = StateStore::memory("t");
        let ttl = Duration::from_secs(10);
        assert!(store.admit("s", "a", ttl, 2).await.unwrap());
        assert!(store.admit("s", "b", ttl, 2).await.unwrap());
        assert!(store.admit("s", "a", ttl, 2).await.unwrap(), "renewed");
        assert!(!store.admit("s", "c", ttl, 2).await.unwrap());
        store.dismiss("s", "b").await.unwrap();
        assert!(store.admit("s", "c", ttl, 2).await.unwrap());
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(store.members("s").await.unwrap().is_empty());
    }

    #[test]
    fn deployments_with_other_keys_have_other_namespaces() {
        assert_eq!(namespace(b"k1"), namespace(b"k1"));
        assert_ne!(namespace(b"k1"), namespace(b"k2"));
    }
}
