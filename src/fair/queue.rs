//! A fair queue for a few slots (the type checkers): when a slot frees, it goes to the next
//! principal in turn, not to the next request, so a principal that sent many waits behind
//! everyone else's one. Each principal may hold and wait for a bounded number, and the
//! queue as a whole is bounded; a waiter that gives up (its call was cancelled, or its
//! deadline passed) leaves the queue at once.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::{Principal, Refused};
use crate::lock::lock;

/// How a queue is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    /// Slots served at once.
    pub slots: usize,
    /// The most slots one principal holds at once; past it, it waits even while slots are
    /// free, and those stay for the others.
    pub max_held: usize,
    /// The most one principal holds and waits for together.
    pub per_principal: usize,
    /// The most waiting, by everyone.
    pub max_waiting: usize,
    /// Places past `max_waiting` only a principal holding and waiting for none may take.
    pub reserve: usize,
}

/// A fair queue for `slots`.
pub struct FairQueue {
    what: &'static str,
    limits: QueueLimits,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    free: usize,
    next_id: u64,
    /// Principals with waiters, in turn.
    turns: VecDeque<Principal>,
    waiters: HashMap<Principal, VecDeque<(u64, oneshot::Sender<()>)>>,
    waiting: usize,
    /// Slots held and waits, by principal.
    counts: HashMap<Principal, usize>,
    /// Slots held, by principal.
    held: HashMap<Principal, usize>,
}

impl State {
    fn held_by(&self, who: &Principal) -> usize {
        self.held.get(who).copied().unwrap_or(0)
    }
}

/// A slot, given back (to the next principal in turn) when dropped.
pub struct Turn {
    queue: Arc<FairQueue>,
    who: Principal,
    /// Whether it is lent (see [`Turn::lend`]): not counted toward its principal's
    /// `max_held` meanwhile.
    lent: std::sync::atomic::AtomicBool,
}

impl Turn {
    /// While `lent`, this slot does not count toward its principal's `max_held` (it still
    /// holds the slot): a run that waits for a human keeps its worker, and its principal's
    /// next call may take another, as if the run had ended.
    pub fn lend(&self, lent: bool) {
        use std::sync::atomic::Ordering;
        if self.lent.swap(lent, Ordering::SeqCst) == lent {
            return;
        }
        let mut state = lock(&self.queue.state);
        if lent {
            decrement(&mut state.held, &self.who);
            // Its principal's waiters may take a free slot now.
            self.queue.dispatch(&mut state);
        } else {
            *state.held.entry(self.who.clone()).or_default() += 1;
        }
    }
}

impl FairQueue {
    /// A queue for `limits.slots` slots, called `what` in refusals.
    pub fn new(what: &'static str, limits: QueueLimits) -> Arc<Self> {
        Arc::new(Self {
            what,
            limits,
            state: Mutex::new(State {
                free: limits.slots.max(1),
                ..State::default()
            }),
        })
    }

    /// The limits it was made with.
    pub fn limits(&self) -> QueueLimits {
        self.limits
    }

    /// A slot for `who`: at once if one is free and nobody waits, else in turn. Refused at
    /// once past `who`'s share or a full queue. Dropping the future leaves the queue.
    pub async fn turn(self: &Arc<Self>, who: &Principal) -> Result<Turn, Refused> {
        let (id, granted) = {
            let mut state = lock(&self.state);
            let mine = state.counts.get(who).copied().unwrap_or(0);
            if mine >= self.limits.per_principal {
                return Err(Refused::Yours {
                    what: self.what,
                    held: mine,
                });
            }
            // A free slot means no waiter could take it (each waits for its own held ones).
            if state.free > 0 && state.held_by(who) < self.limits.max_held.max(1) {
                state.free -= 1;
                *state.counts.entry(who.clone()).or_default() += 1;
                *state.held.entry(who.clone()).or_default() += 1;
                return Ok(self.turn_of(who));
            }
            let open_to_me = if mine == 0 {
                self.limits.max_waiting + self.limits.reserve
            } else {
                self.limits.max_waiting
            };
            if state.waiting >= open_to_me {
                return Err(Refused::Total { what: self.what });
            }
            *state.counts.entry(who.clone()).or_default() += 1;
            state.next_id += 1;
            let id = state.next_id;
            let (send, granted) = oneshot::channel();
            let queue = state.waiters.entry(who.clone()).or_default();
            queue.push_back((id, send));
            if queue.len() == 1 {
                state.turns.push_back(who.clone());
            }
            state.waiting += 1;
            (id, granted)
        };
        let mut waiting = Waiting {
            queue: self.clone(),
            who: who.clone(),
            id,
            granted,
            done: false,
        };
        let result = (&mut waiting.granted).await;
        waiting.done = true;
        match result {
            Ok(()) => Ok(self.turn_of(who)),
            // The queue never drops a sender it has not sent on while the waiter waits.
            Err(_) => Err(Refused::Total { what: self.what }),
        }
    }

    fn turn_of(self: &Arc<Self>, who: &Principal) -> Turn {
        Turn {
            queue: self.clone(),
            who: who.clone(),
            lent: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Hands free slots to waiters that may take one, for as long as there are both.
    fn dispatch(&self, state: &mut State) {
        while state.free > 0 {
            state.free -= 1;
            if !self.grant_next(state) {
                state.free += 1;
                return;
            }
        }
    }

    /// Gives a slot back: to the next principal in turn that may hold one more, or to the
    /// free ones.
    fn give_back(&self, state: &mut State) {
        if !self.grant_next(state) {
            state.free += 1;
        }
    }

    /// Grants a slot to the next principal in turn that may hold one more; whether one was.
    fn grant_next(&self, state: &mut State) -> bool {
        let max_held = self.limits.max_held.max(1);
        let mut passed = 0;
        while let Some(next) = state.turns.pop_front() {
            if state.held_by(&next) >= max_held {
                // Its turn comes once it holds fewer.
                state.turns.push_back(next);
                passed += 1;
                if passed >= state.turns.len() {
                    break;
                }
                continue;
            }
            let Some(queue) = state.waiters.get_mut(&next) else {
                continue;
            };
            let Some((_, send)) = queue.pop_front() else {
                state.waiters.remove(&next);
                continue;
            };
            if queue.is_empty() {
                state.waiters.remove(&next);
            } else {
                state.turns.push_back(next.clone());
            }
            state.waiting -= 1;
            *state.held.entry(next.clone()).or_default() += 1;
            if send.send(()).is_ok() {
                return true;
            }
            // Its waiter left as the slot came: that wait is over.
            release(state, &next);
        }
        false
    }
}

/// One fewer held or waited for by `who`.
fn forget(state: &mut State, who: &Principal) {
    decrement(&mut state.counts, who);
}

/// One fewer slot held by `who` (and so one fewer held or waited for).
fn release(state: &mut State, who: &Principal) {
    decrement(&mut state.held, who);
    forget(state, who);
}

fn decrement(counts: &mut HashMap<Principal, usize>, who: &Principal) {
    if let Some(count) = counts.get_mut(who) {
        *count -= 1;
        if *count == 0 {
            counts.remove(who);
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut state = lock(&self.queue.state);
        if self.lent.load(std::sync::atomic::Ordering::SeqCst) {
            // Its count toward `max_held` was given back when it was lent.
            forget(&mut state, &self.who);
        } else {
            release(&mut state, &self.who);
        }
        self.queue.give_back(&mut state);
    }
}

/// A wait in the queue; dropped before it ends, it leaves the queue, and passes on a slot
/// that arrived as it left.
struct Waiting {
    queue: Arc<FairQueue>,
    who: Principal,
    id: u64,
    granted: oneshot::Receiver<()>,
    done: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut state = lock(&self.queue.state);
        if self.granted.try_recv().is_ok() {
            // Granted as it left: the slot goes on.
            release(&mut state, &self.who);
            self.queue.give_back(&mut state);
            return;
        }
        let Some(queue) = state.waiters.get_mut(&self.who) else {
            return;
        };
        let before = queue.len();
        queue.retain(|(id, _)| *id != self.id);
        if queue.len() < before {
            if queue.is_empty() {
                state.waiters.remove(&self.who);
                state.turns.retain(|p| *p != self.who);
            }
            state.waiting -= 1;
            forget(&mut state, &self.who);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn who(n: u8) -> Principal {
        Principal::peer(std::net::IpAddr::from([10, 0, 0, n]))
    }

    fn queue(slots: usize) -> Arc<FairQueue> {
        FairQueue::new(
            "type checks",
            QueueLimits {
                slots,
                max_held: slots,
                per_principal: 8,
                max_waiting: 16,
                reserve: 0,
            },
        )
    }

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_next_principal_in_turn_not_the_next_request() {
        let queue = queue(1);
        let held = queue.turn(&who(1)).await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        // The noisy principal queues five, then a quiet one queues one.
        for (n, principal) in [1, 1, 1, 1, 1, 2].into_iter().enumerate() {
            let (queue, order) = (queue.clone(), order.clone());
            waiters.push(tokio::spawn(async move {
                let _turn = queue.turn(&who(principal)).await.unwrap();
                lock(&order).push((n, principal));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }));
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(held);
        for waiter in waiters {
            waiter.await.unwrap();
        }
        let served: Vec<u8> = lock(&order).iter().map(|(_, p)| *p).collect();
        assert_eq!(
            served[..2],
            [1, 2],
            "the quiet principal waited behind one: {served:?}"
        );
        let state = lock(&queue.state);
        assert_eq!((state.free, state.waiting), (1, 0));
        assert!(state.counts.is_empty() && state.waiters.is_empty() && state.held.is_empty());
    }

    #[tokio::test]
    async fn a_principal_at_its_held_limit_leaves_the_other_slots_to_the_others() {
        let queue = FairQueue::new(
            "executions",
            QueueLimits {
                slots: 3,
                max_held: 2,
                per_principal: 8,
                max_waiting: 16,
                reserve: 0,
            },
        );
        let first = queue.turn(&who(1)).await.unwrap();
        let _second = queue.turn(&who(1)).await.unwrap();
        // A third waits though a slot is free: that one is the others'.
        let third = {
            let queue = queue.clone();
            tokio::spawn(async move { queue.turn(&who(1)).await.map(|_| ()) })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!third.is_finished());
        let quiet = tokio::time::timeout(Duration::from_millis(100), queue.turn(&who(2))).await;
        assert!(
            quiet.is_ok(),
            "the quiet principal did not get the free slot"
        );
        drop(first);
        tokio::time::timeout(Duration::from_secs(1), third)
            .await
            .expect("the waiter got the slot its own freed")
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn a_lent_slot_lets_its_principal_take_another_and_counts_right_after() {
        let queue = FairQueue::new(
            "executions",
            QueueLimits {
                slots: 2,
                max_held: 1,
                per_principal: 8,
                max_waiting: 16,
                reserve: 0,
            },
        );
        let first = queue.turn(&who(1)).await.unwrap();
        let next = {
            let queue = queue.clone();
            tokio::spawn(async move { queue.turn(&who(1)).await.map(|_| ()) })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!next.is_finished(), "past max_held it waits");
        // The first waits for a human: the waiting call gets the free slot.
        first.lend(true);
        tokio::time::timeout(Duration::from_secs(1), next)
            .await
            .expect("the lent slot let it through")
            .unwrap()
            .unwrap();
        first.lend(false);
        first.lend(false);
        drop(first);
        let state = lock(&queue.state);
        assert_eq!(state.free, 2);
        assert!(
            state.held.is_empty() && state.counts.is_empty(),
            "counts left behind"
        );
    }

    #[tokio::test]
    async fn past_its_share_or_a_full_queue_a_principal_is_refused_at_once() {
        let queue = FairQueue::new(
            "type checks",
            QueueLimits {
                slots: 1,
                max_held: 1,
                per_principal: 2,
                max_waiting: 2,
                reserve: 1,
            },
        );
        let _held = queue.turn(&who(1)).await.unwrap();
        let waiting = {
            let queue = queue.clone();
            tokio::spawn(async move { queue.turn(&who(1)).await.map(|_| ()) })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(
            queue.turn(&who(1)).await.err(),
            Some(Refused::Yours {
                what: "type checks",
                held: 2
            })
        );
        let other = {
            let queue = queue.clone();
            tokio::spawn(async move { queue.turn(&who(2)).await.map(|_| ()) })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        // The queue is full, but a principal with nothing in it takes the reserve...
        let reserved = {
            let queue = queue.clone();
            tokio::spawn(async move { queue.turn(&who(3)).await.map(|_| ()) })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!reserved.is_finished(), "it waits in the reserve");
        // ...and once that is taken too, the next is refused.
        assert_eq!(
            queue.turn(&who(4)).await.err(),
            Some(Refused::Total {
                what: "type checks"
            })
        );
        waiting.abort();
        other.abort();
        reserved.abort();
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_leaves_the_queue_and_loses_no_slot() {
        let queue = queue(1);
        let held = queue.turn(&who(1)).await.unwrap();
        for _ in 0..5 {
            let gave_up = tokio::time::timeout(Duration::from_millis(5), queue.turn(&who(2))).await;
            assert!(gave_up.is_err());
        }
        {
            let state = lock(&queue.state);
            assert_eq!(state.waiting, 0);
            assert!(!state.counts.contains_key(&who(2)));
        }
        drop(held);
        // Many waiters cancelled around a handoff: the slot always comes back.
        for _ in 0..50 {
            let held = queue.turn(&who(1)).await.unwrap();
            let waiter = {
                let queue = queue.clone();
                tokio::spawn(async move { queue.turn(&who(2)).await.map(|_| ()) })
            };
            tokio::task::yield_now().await;
            drop(held);
            waiter.abort();
            let _ = waiter.await;
        }
        let again = tokio::time::timeout(Duration::from_secs(1), queue.turn(&who(3))).await;
        assert!(again.is_ok(), "a slot was lost");
    }
}
