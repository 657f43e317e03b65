//! Where links live: one file for one instance, or Redis for replicas. Values arrive sealed
//! (see `seal.rs`); the store only keeps them. Records with a time to live (links offered
//! but not yet followed) expire; the file store keeps those in memory only.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::settings::StoreChoice;
use crate::state::{Redis, StateError};

/// Why the store could not answer.
#[derive(Debug, thiserror::Error)]
#[error("the link store: {0}")]
pub struct StoreError(pub String);

/// The link store.
pub enum Store {
    /// One JSON file, rewritten whole (atomically) on each change.
    File(FileStore),
    /// A Redis server (the state store's client, on the link store's own keys).
    Redis(Redis),
}

impl Store {
    /// Opens the store `choice` names: reads the file, or connects to Redis.
    pub async fn open(choice: &StoreChoice) -> Result<Self, StoreError> {
        match choice {
            StoreChoice::File(path) => Ok(Self::File(FileStore::open(path)?)),
            StoreChoice::Redis(url) => Ok(Self::Redis(Redis::connect(url).await.map_err(failed)?)),
        }
    }

    /// The value under `key`.
    pub async fn get(&self, key: &str) -> Result<Option<String>, StoreError> {
        match self {
            Self::File(file) => Ok(file.get(key)),
            Self::Redis(redis) => redis.get(key).await.map_err(failed),
        }
    }

    /// Keeps `value` under `key`, for `ttl` if given, else until deleted.
    pub async fn put(
        &self,
        key: &str,
        value: &str,
        ttl: Option<Duration>,
    ) -> Result<(), StoreError> {
        match (self, ttl) {
            (Self::File(file), ttl) => file.put(key, value, ttl),
            (Self::Redis(redis), Some(ttl)) => redis.put(key, value, ttl).await.map_err(failed),
            (Self::Redis(redis), None) => redis.put_until_deleted(key, value).await.map_err(failed),
        }
    }

    /// The value under `key`, removed in the same step: of two takers, one gets it.
    pub async fn take(&self, key: &str) -> Result<Option<String>, StoreError> {
        match self {
            Self::File(file) => file.take(key),
            Self::Redis(redis) => redis.take(key).await.map_err(failed),
        }
    }

    /// Keeps `value` under `key` for `ttl` unless `key` holds something: of two, one puts.
    pub async fn put_new(&self, key: &str, value: &str, ttl: Duration) -> Result<bool, StoreError> {
        match self {
            Self::File(file) => file.put_new(key, value, ttl),
            Self::Redis(redis) => redis.put_new(key, value, ttl).await.map_err(failed),
        }
    }

    /// Removes `key`.
    pub async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.take(key).await.map(|_| ())
    }

    /// Claims `key` with `value` for `ttl` unless another claim holds it: the claim replicas
    /// take before they refresh a user's token, so one refresh runs at a time. The file store
    /// has one process, whose own lock suffices: always granted.
    pub async fn claim(&self, key: &str, value: &str, ttl: Duration) -> Result<bool, StoreError> {
        match self {
            Self::File(_) => Ok(true),
            Self::Redis(redis) => redis.put_new(key, value, ttl).await.map_err(failed),
        }
    }

    /// Releases the claim on `key` if it is still `value` (not a later claim of another).
    pub async fn release(&self, key: &str, value: &str) -> Result<(), StoreError> {
        match self {
            Self::File(_) => Ok(()),
            Self::Redis(redis) => redis
                .delete_if(key, value)
                .await
                .map(|_| ())
                .map_err(failed),
        }
    }
}

/// What Redis said, without the state store's words (this is the link store).
fn failed(error: StateError) -> StoreError {
    match error {
        StateError::Unavailable(why) | StateError::Unreadable(why) => StoreError(why),
        other => StoreError(other.to_string()),
    }
}

/// The most expiring records (offered links and their pointers) the file store holds: each
/// user has at most one offer open, so this is a bound on users linking at once.
const MAX_EXPIRING: usize = 20_000;

/// The file store: lasting records in a JSON file (mode 0600), expiring ones in memory. One
/// process at a time: it holds a lock on the file beside it (`<file>.lock`) while it lives,
/// and a second process (a replica sharing the file through a volume) is refused at start.
pub struct FileStore {
    path: PathBuf,
    state: std::sync::Mutex<FileState>,
    /// Held open, and locked, while the store lives.
    _lock: std::fs::File,
}

#[derive(Default)]
struct FileState {
    lasting: HashMap<String, String>,
    expiring: HashMap<String, (String, Instant)>,
}

impl FileStore {
    fn open(path: &Path) -> Result<Self, StoreError> {
        let lock = lock_beside(path)?;
        let lasting = match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| StoreError(format!("{} is not a link store: {e}", path.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HashMap::new(),
            Err(e) => return Err(StoreError(format!("cannot read {}: {e}", path.display()))),
        };
        let store = Self {
            path: path.to_owned(),
            state: std::sync::Mutex::new(FileState {
                lasting,
                expiring: HashMap::new(),
            }),
            _lock: lock,
        };
        // Fail at start, not at the first link, when the file cannot be written.
        let state = store.lock();
        store.write(&state.lasting)?;
        drop(state);
        Ok(store)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FileState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, key: &str) -> Option<String> {
        let mut state = self.lock();
        let now = Instant::now();
        state.expiring.retain(|_, (_, until)| *until > now);
        state
            .lasting
            .get(key)
            .or_else(|| state.expiring.get(key).map(|(v, _)| v))
            .cloned()
    }

    fn put(&self, key: &str, value: &str, ttl: Option<Duration>) -> Result<(), StoreError> {
        let mut state = self.lock();
        match ttl {
            Some(ttl) => {
                let now = Instant::now();
                state.expiring.retain(|_, (_, until)| *until > now);
                if state.expiring.len() >= MAX_EXPIRING && !state.expiring.contains_key(key) {
                    return Err(StoreError(format!(
                        "{MAX_EXPIRING} links are waiting to be followed: try again in a few minutes"
                    )));
                }
                state
                    .expiring
                    .insert(key.to_owned(), (value.to_owned(), now + ttl));
                Ok(())
            }
            None => {
                let mut lasting = state.lasting.clone();
                lasting.insert(key.to_owned(), value.to_owned());
                self.write(&lasting)?;
                state.lasting = lasting;
                Ok(())
            }
        }
    }

    fn put_new(&self, key: &str, value: &str, ttl: Duration) -> Result<bool, StoreError> {
        let mut state = self.lock();
        let now = Instant::now();
        state.expiring.retain(|_, (_, until)| *until > now);
        if state.lasting.contains_key(key) || state.expiring.contains_key(key) {
            return Ok(false);
        }
        if state.expiring.len() >= MAX_EXPIRING {
            return Err(StoreError(format!(
                "{MAX_EXPIRING} links are waiting to be followed: try again in a few minutes"
            )));
        }
        state
            .expiring
            .insert(key.to_owned(), (value.to_owned(), now + ttl));
        Ok(true)
    }

    fn take(&self, key: &str) -> Result<Option<String>, StoreError> {
        let mut state = self.lock();
        let now = Instant::now();
        if let Some((value, until)) = state.expiring.remove(key) {
            return Ok((until > now).then_some(value));
        }
        if !state.lasting.contains_key(key) {
            return Ok(None);
        }
        let mut lasting = state.lasting.clone();
        let value = lasting.remove(key);
        self.write(&lasting)?;
        state.lasting = lasting;
        Ok(value)
    }

    /// Writes `records` to a new file beside the store and moves it into place.
    fn write(&self, records: &HashMap<String, String>) -> Result<(), StoreError> {
        let failed =
            |e: std::io::Error| StoreError(format!("cannot write {}: {e}", self.path.display()));
        let dir = self
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(failed)?;
        let mut file = tempfile::Builder::new()
            .prefix(".links")
            .permissions(private())
            .tempfile_in(dir)
            .map_err(failed)?;
        serde_json::to_writer(&mut file, records).map_err(|e| failed(e.into()))?;
        file.as_file().sync_all().map_err(failed)?;
        file.persist(&self.path).map_err(|e| failed(e.error))?;
        Ok(())
    }
}

/// Locks `<path>.lock` for this process, or says which other process's store it is.
fn lock_beside(path: &Path) -> Result<std::fs::File, StoreError> {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    let lock_path = PathBuf::from(name);
    if let Some(dir) = lock_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| StoreError(format!("cannot create {}: {e}", dir.display())))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| StoreError(format!("cannot open {}: {e}", lock_path.display())))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(file),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(StoreError(format!(
            "another sdkbox process uses the link store {}: a file keeps the links of one \
             process; replicas need a shared store (store = \"redis://...\" under \
             [provider_oauth], or leave it unset with --state redis://...)",
            path.display()
        ))),
        Err(error) => Err(StoreError(format!(
            "cannot lock {}: {error}",
            lock_path.display()
        ))),
    }
}

#[cfg(unix)]
fn private() -> std::fs::Permissions {
    use std::os::unix::fs::PermissionsExt;
    std::fs::Permissions::from_mode(0o600)
}

#[cfg(not(unix))]
fn private() -> std::fs::Permissions {
    std::fs::metadata(".")
        .map(|m| m.permissions())
        .unwrap_or_else(|_| unreachable!())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lasting_records_survive_a_reopen_and_expiring_ones_expire() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/links.json");
        let store = Store::open(&StoreChoice::File(path.clone())).await.unwrap();
        store.put("link:a", "sealed-a", None).await.unwrap();
        store
            .put("pending:x", "p", Some(Duration::from_millis(50)))
            .await
            .unwrap();
        assert_eq!(store.get("pending:x").await.unwrap().as_deref(), Some("p"));
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert_eq!(store.take("pending:x").await.unwrap(), None);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Another process's store (a lock of its own on the same file) is refused.
        let held = Store::open(&StoreChoice::File(path.clone())).await;
        let refused = held.err().unwrap().to_string();
        assert!(refused.contains("another sdkbox process"), "{refused}");
        drop(store);
        let reopened = Store::open(&StoreChoice::File(path)).await.unwrap();
        assert_eq!(
            reopened.get("link:a").await.unwrap().as_deref(),
            Some("sealed-a")
        );
        assert_eq!(
            reopened.take("link:a").await.unwrap().as_deref(),
            Some("sealed-a")
        );
        assert_eq!(reopened.take("link:a").await.unwrap(), None);
    }
}
