//! The state store's two backends mean the same: every operation run on memory and on a real
//! Redis gives the same answers; on Redis, two replicas (two stores on one server) see each
//! other's records, letters and liveness, and a deployment with another key sees nothing.

use std::time::Duration;

use futures_util::StreamExt;
use sdkbox::state::{Change, Spent, StateStore};

use crate::support::Redis;

/// Runs the same sequence on `store`, returning what each step answered.
async fn script(store: &StateStore) -> Vec<String> {
    let ttl = Duration::from_secs(60);
    let mut seen = Vec::new();
    let mut note = |what: String| seen.push(what);
    store.put("a", "1", ttl).await.unwrap();
    note(format!("{:?}", store.get("a").await.unwrap()));
    note(format!("{}", store.put_new("a", "2", ttl).await.unwrap()));
    note(format!("{}", store.put_new("b", "2", ttl).await.unwrap()));
    note(format!("{}", store.delete_if("b", "x").await.unwrap()));
    note(format!("{}", store.delete_if("b", "2").await.unwrap()));
    note(format!("{:?}", store.take("a").await.unwrap()));
    note(format!("{:?}", store.take("a").await.unwrap()));
    for n in 0..3 {
        let len = store
            .update::<Vec<u32>, usize>("list", ttl, |list| {
                let mut list = list.unwrap_or_default();
                list.push(n);
                let len = list.len();
                Change::Write(list, len)
            })
            .await
            .unwrap();
        note(format!("{len}"));
    }
    let kept = store
        .update::<Vec<u32>, bool>("list", ttl, |_| Change::Keep(true))
        .await
        .unwrap();
    note(format!(
        "{kept} {:?}",
        store.read::<Vec<u32>>("list").await.unwrap()
    ));
    store
        .update::<Vec<u32>, ()>("list", ttl, |_| Change::Delete(()))
        .await
        .unwrap();
    note(format!("{:?}", store.get("list").await.unwrap()));
    for member in ["m1", "m2", "m3", "m1"] {
        note(format!(
            "{}",
            store.admit("set", member, ttl, 2).await.unwrap()
        ));
    }
    let mut members = store.members("set").await.unwrap();
    members.sort();
    note(format!("{members:?}"));
    store.dismiss("set", "m1").await.unwrap();
    note(format!("{:?}", store.members("set").await.unwrap()));
    let epoch = store.epoch().to_owned();
    note(format!(
        "{:?}",
        store.spend(&epoch, "t1", ttl).await.unwrap()
    ));
    note(format!(
        "{:?}",
        store.spend(&epoch, "t1", ttl).await.unwrap()
    ));
    note(format!(
        "{:?}",
        store.spend("another", "t2", ttl).await.unwrap()
    ));
    note(format!("{}", store.alive(store.replica()).await.unwrap()));
    note(format!("{}", store.alive("nobody").await.unwrap()));
    store
        .put("short", "x", Duration::from_millis(100))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    note(format!("{:?}", store.get("short").await.unwrap()));
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_and_redis_answer_alike_and_replicas_share_records() {
    let Some(redis) = Redis::start().await else {
        return;
    };
    let memory = StateStore::memory("parity");
    let shared = StateStore::open(&redis.url, "parity").await.unwrap();
    assert!(shared.shared() && !memory.shared());
    assert_eq!(script(&memory).await, script(&shared).await);

    // A second replica of the same deployment: same epoch, records, liveness, letters.
    let other = StateStore::open(&redis.url, "parity").await.unwrap();
    assert_eq!(other.epoch(), shared.epoch());
    assert_ne!(other.replica(), shared.replica());
    shared
        .put("seen", "yes", Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(other.get("seen").await.unwrap().as_deref(), Some("yes"));
    assert_eq!(
        other
            .spend(&shared.epoch(), "t1", Duration::from_secs(60))
            .await
            .unwrap(),
        Spent::Used,
        "spent by the first replica"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(other.alive(shared.replica()).await.unwrap());
    let mut letters = Box::pin(other.letters());
    // Letters go once the listener has subscribed: send until one arrives.
    let mut got = None;
    for _ in 0..50 {
        shared
            .send_to(other.replica(), "hello", "there")
            .await
            .unwrap();
        if let Ok(Some(letter)) =
            tokio::time::timeout(Duration::from_millis(100), letters.next()).await
        {
            got = Some(letter);
            break;
        }
    }
    let letter = got.expect("no letter arrived");
    assert_eq!(
        (letter.topic.as_str(), letter.body.as_str()),
        ("hello", "there")
    );
    assert_eq!(letter.from, shared.replica());

    // A replica that stops saying it is alive is taken for gone within seconds.
    let gone = shared.replica().to_owned();
    drop(shared);
    let mut waited = Duration::ZERO;
    while other.alive(&gone).await.unwrap() {
        assert!(waited < Duration::from_secs(10), "still alive after 10 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
        waited += Duration::from_millis(200);
    }

    // Another deployment (another approval key) sees none of it.
    let elsewhere = StateStore::open(&redis.url, "another").await.unwrap();
    assert_eq!(elsewhere.get("seen").await.unwrap(), None);
    assert_ne!(elsewhere.epoch(), other.epoch());

    // A flushed store is a new epoch, which the replica takes up within a heartbeat: a token
    // of the old one proves nothing, and tokens of the new one work.
    let old = other.epoch();
    let cli = std::process::Command::new("redis-cli")
        .args(["-u", &redis.url, "FLUSHALL"])
        .output()
        .unwrap();
    assert!(cli.status.success());
    for _ in 0..50 {
        if other.epoch() != old {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_ne!(other.epoch(), old, "the lost epoch is still used");
    let ttl = Duration::from_secs(60);
    assert_eq!(other.spend(&old, "t9", ttl).await.unwrap(), Spent::Foreign);
    assert_eq!(
        other.spend(&other.epoch(), "t9", ttl).await.unwrap(),
        Spent::Fresh
    );
}

/// A Redis that may evict records (managed services' default `volatile-lru`) could forget a
/// spent approval or a write's claim: it is refused at start, saying what to set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_may_evict_records_is_refused() {
    let Some(redis) = Redis::start_with(&["--maxmemory-policy", "volatile-lru"]).await else {
        return;
    };
    let refused = StateStore::open(&redis.url, "evicting")
        .await
        .err()
        .unwrap();
    let said = refused.to_string();
    assert!(
        said.contains("maxmemory-policy is volatile-lru") && said.contains("noeviction"),
        "{said}"
    );
}
