//! The state store replicas share: a Redis (or Valkey) server, 6.2 or later. Every operation
//! that must be atomic across replicas (a compare-and-swap, spending a request state within
//! the store's epoch, admitting a member to a bounded set) is one Lua script, so no replica
//! ever sees half of another's change. Letters between replicas go over pub/sub on a
//! connection of their own, reconnected when it drops; a letter sent while it is down is
//! lost, which every user of letters tolerates (the wait it would have ended times out).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio::sync::broadcast;

use super::{Letter, StateError};
use crate::lock::lock;

/// How often this replica says it is alive, and how long the word lasts.
pub const HEARTBEAT: Duration = Duration::from_secs(1);
const ALIVE_FOR: Duration = Duration::from_secs(4);

/// How long after a heartbeat was sent this replica still trusts that the others count it
/// alive: a second less than they do.
const TRUSTED: Duration = Duration::from_secs(3);

const SWAP: &str = r"
local current = redis.call('GET', KEYS[1])
if ARGV[1] == '1' then
  if current ~= ARGV[2] then return 0 end
elseif current then
  return 0
end
if ARGV[3] == '1' then
  redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[5])
else
  redis.call('DEL', KEYS[1])
end
return 1
";

const DELETE_IF: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

const SPEND: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 2 end
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then return 1 end
return 0
";

const ADMIT: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
";

const MEMBERS: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
";

/// A Redis server, through a reconnecting connection; clones share it. The link store
/// (`crate::linking`) keeps its records through it too.
#[derive(Clone)]
pub struct Redis {
    connection: ConnectionManager,
    client: redis::Client,
    /// This replica's word of life, as Redis took it (see [`Redis::in_touch_since`]).
    beats: Arc<Mutex<Beats>>,
}

/// When the last heartbeat Redis took was sent, and when the last silence long enough for
/// others to count this replica gone ended.
#[derive(Default)]
struct Beats {
    last_sent: Option<tokio::time::Instant>,
    silence_ended: Option<tokio::time::Instant>,
}

impl Redis {
    /// Connects to `url` and checks it can take records (GETDEL, Redis 6.2).
    pub async fn connect(url: &str) -> Result<Self, StateError> {
        let shown = redacted(url);
        let client = redis::Client::open(url)
            .map_err(|e| StateError::Unavailable(format!("{shown}: {e}")))?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(5)))
            .set_number_of_retries(2);
        let connection = ConnectionManager::new_with_config(client.clone(), config)
            .await
            .map_err(|e| StateError::Unavailable(format!("cannot reach {shown}: {e}")))?;
        let redis = Self {
            connection,
            client,
            beats: Arc::default(),
        };
        redis::cmd("GETDEL")
            .arg("sdkbox:probe")
            .query_async::<Option<String>>(&mut redis.connection.clone())
            .await
            .map_err(|e| {
                StateError::Unavailable(format!(
                    "{shown} cannot take records ({e}): sdkbox needs Redis 6.2 or later"
                ))
            })?;
        Ok(redis)
    }

    /// Whether the server keeps every record until its time to live: a server that may evict
    /// (any `maxmemory-policy` but `noeviction`, the default of several managed services)
    /// could forget a spent approval or a write's claim, and the same write go out twice.
    pub async fn never_evicts(&self) -> Result<(), String> {
        let info: String = self
            .query(redis::cmd("INFO").arg("memory"))
            .await
            .map_err(|e| e.to_string())?;
        let policy = info
            .lines()
            .find_map(|line| line.strip_prefix("maxmemory_policy:"))
            .map(str::trim)
            .unwrap_or("unknown");
        match policy {
            "noeviction" => Ok(()),
            other => Err(format!(
                "its maxmemory-policy is {other}: it may evict records sdkbox relies on to send \
                 each write once (a spent approval, a write's claim); set maxmemory-policy \
                 noeviction (on managed services, in the instance's parameter group)"
            )),
        }
    }

    async fn query<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> Result<T, StateError> {
        command
            .query_async(&mut self.connection.clone())
            .await
            .map_err(failed)
    }

    async fn script<T: redis::FromRedisValue>(
        &self,
        source: &str,
        keys: &[&str],
        args: &[String],
    ) -> Result<T, StateError> {
        let script = redis::Script::new(source);
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(*key);
        }
        for arg in args {
            invocation.arg(arg);
        }
        invocation
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(failed)
    }

    pub async fn get(&self, key: &str) -> Result<Option<String>, StateError> {
        self.query(redis::cmd("GET").arg(key)).await
    }

    pub async fn put(&self, key: &str, value: &str, ttl: Duration) -> Result<(), StateError> {
        self.query(redis::cmd("SET").arg(key).arg(value).arg("PX").arg(ms(ttl)))
            .await
    }

    /// Keeps `value` under `key` until it is deleted.
    pub async fn put_until_deleted(&self, key: &str, value: &str) -> Result<(), StateError> {
        self.query(redis::cmd("SET").arg(key).arg(value)).await
    }

    pub async fn put_new(&self, key: &str, value: &str, ttl: Duration) -> Result<bool, StateError> {
        let set: Option<String> = self
            .query(
                redis::cmd("SET")
                    .arg(key)
                    .arg(value)
                    .arg("NX")
                    .arg("PX")
                    .arg(ms(ttl)),
            )
            .await?;
        Ok(set.is_some())
    }

    pub async fn take(&self, key: &str) -> Result<Option<String>, StateError> {
        self.query(redis::cmd("GETDEL").arg(key)).await
    }

    pub async fn delete_if(&self, key: &str, value: &str) -> Result<bool, StateError> {
        let deleted: i64 = self.script(DELETE_IF, &[key], &[value.to_owned()]).await?;
        Ok(deleted > 0)
    }

    pub async fn swap(
        &self,
        key: &str,
        old: Option<&str>,
        new: Option<&str>,
        ttl: Duration,
    ) -> Result<bool, StateError> {
        let flag = |given: bool| if given { "1" } else { "0" }.to_owned();
        let args = [
            flag(old.is_some()),
            old.unwrap_or_default().to_owned(),
            flag(new.is_some()),
            new.unwrap_or_default().to_owned(),
            ms(ttl).to_string(),
        ];
        let swapped: i64 = self.script(SWAP, &[key], &args).await?;
        Ok(swapped == 1)
    }

    pub async fn expire(&self, key: &str, ttl: Duration) -> Result<bool, StateError> {
        let renewed: i64 = self
            .query(redis::cmd("PEXPIRE").arg(key).arg(ms(ttl)))
            .await?;
        Ok(renewed == 1)
    }

    /// 1: fresh (now used), 0: used before, 2: the epoch is not the store's.
    pub async fn spend(
        &self,
        epoch_key: &str,
        epoch: &str,
        key: &str,
        ttl: Duration,
    ) -> Result<i64, StateError> {
        let args = [epoch.to_owned(), ms(ttl).to_string()];
        self.script(SPEND, &[epoch_key, key], &args).await
    }

    pub async fn admit(
        &self,
        set: &str,
        member: &str,
        ttl: Duration,
        max: usize,
    ) -> Result<bool, StateError> {
        let args = [member.to_owned(), ms(ttl).to_string(), max.to_string()];
        let admitted: i64 = self.script(ADMIT, &[set], &args).await?;
        Ok(admitted == 1)
    }

    pub async fn dismiss(&self, set: &str, member: &str) -> Result<(), StateError> {
        self.query::<i64>(redis::cmd("ZREM").arg(set).arg(member))
            .await
            .map(|_| ())
    }

    pub async fn members(&self, set: &str) -> Result<Vec<String>, StateError> {
        self.script(MEMBERS, &[set], &[]).await
    }

    /// Records `ttl` of life under `key` (a write: it fails when the server refuses writes).
    pub async fn probe(&self, key: &str) -> Result<(), StateError> {
        self.put(key, "1", Duration::from_secs(10)).await?;
        self.never_evicts().await.map_err(StateError::Unavailable)
    }

    /// The store's epoch: the one already there, else `fresh`, which becomes it.
    pub async fn epoch(&self, key: &str, fresh: &str) -> Result<String, StateError> {
        let _: Option<String> = self
            .query(redis::cmd("SET").arg(key).arg(fresh).arg("NX"))
            .await?;
        self.get(key)
            .await?
            .ok_or_else(|| StateError::Unavailable("the store lost its epoch as it was set".into()))
    }

    pub async fn alive(&self, key: &str) -> Result<bool, StateError> {
        let count: i64 = self.query(redis::cmd("EXISTS").arg(key)).await?;
        Ok(count > 0)
    }

    /// Says this replica is alive under `key`, every [`HEARTBEAT`], until the task is dropped;
    /// at each beat, reads the store's epoch under `epoch_key` into `epoch` too (a store that
    /// lost its records, flushed or restarted empty, draws a new one, which every replica
    /// adopts).
    pub async fn heartbeat(&self, key: String, epoch_key: String, epoch: Arc<Mutex<String>>) {
        loop {
            let sent = tokio::time::Instant::now();
            match self.put(&key, "1", ALIVE_FOR).await {
                Ok(()) => {
                    // Silence counts until this word arrived (a late one left the key expired
                    // for a while), from when the last one was sent.
                    let arrived = tokio::time::Instant::now();
                    let mut beats = lock(&self.beats);
                    if beats.last_sent.is_some_and(|last| arrived - last > TRUSTED) {
                        tracing::warn!(
                            "this replica's word of life did not reach the state store for a \
                             while: the runs it had going are refused their next writes"
                        );
                        beats.silence_ended = Some(tokio::time::Instant::now());
                    }
                    beats.last_sent = Some(sent);
                }
                Err(error) => {
                    tracing::warn!(%error, "the state store did not take this replica's heartbeat");
                }
            }
            if let Ok(fresh) = super::fresh_id()
                && let Ok(now) = self.epoch(&epoch_key, &fresh).await
            {
                let mut known = lock(&epoch);
                if *known != now {
                    tracing::warn!("the state store lost its records: a new epoch begins");
                    *known = now;
                }
            }
            tokio::time::sleep(HEARTBEAT).await;
        }
    }

    /// Whether other replicas have counted this one alive all along since `since`: its last
    /// heartbeat Redis took was sent less than [`TRUSTED`] ago, and no silence that long ended
    /// after `since`. A replica that lost touch (a partition, a stall) claims no write for a
    /// run it had going: another may have taken the run over, or run its code afresh.
    pub fn in_touch_since(&self, since: tokio::time::Instant) -> bool {
        let beats = lock(&self.beats);
        beats.last_sent.is_some_and(|sent| sent.elapsed() < TRUSTED)
            && beats.silence_ended.is_none_or(|ended| ended < since)
    }

    pub async fn publish(&self, channel: &str, letter: &str) -> Result<(), StateError> {
        self.query::<i64>(redis::cmd("PUBLISH").arg(channel).arg(letter))
            .await
            .map(|_| ())
    }

    /// Hands the letters sent to `channels` to `letters`, but those `replica` (this one) sent
    /// to all, reconnecting for as long as the task runs.
    pub async fn listen(
        &self,
        channels: Vec<String>,
        letters: broadcast::Sender<Letter>,
        replica: String,
    ) {
        use futures_util::StreamExt;
        loop {
            match self.client.get_async_pubsub().await {
                Ok(mut pubsub) => {
                    let mut subscribed = true;
                    for channel in &channels {
                        subscribed &= pubsub.subscribe(channel).await.is_ok();
                    }
                    if subscribed {
                        let mut stream = pubsub.on_message();
                        while let Some(message) = stream.next().await {
                            let Ok(text) = message.get_payload::<String>() else {
                                continue;
                            };
                            if let Ok(letter) = serde_json::from_str::<Letter>(&text)
                                && letter.from != replica
                            {
                                let _ = letters.send(letter);
                            }
                        }
                    }
                    tracing::warn!("the state store's letters stopped; reconnecting");
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot listen for letters from other replicas");
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

fn ms(ttl: Duration) -> u64 {
    (ttl.as_millis() as u64).max(1)
}

fn failed(error: redis::RedisError) -> StateError {
    metrics::counter!("sdkbox_state_errors_total").increment(1);
    StateError::Unavailable(error.to_string())
}

/// `url` without its password, to be shown.
pub fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}
