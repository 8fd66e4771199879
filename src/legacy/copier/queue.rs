//! The requests the copier works through: at most one waiting per original, the newest (a request for an original
//! already waiting replaces it and keeps its place), and an original whose copies are being written is not handed to
//! a second worker until the first is done, so copies are never written from two states of one original at once.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

/// Requests by key, in arrival order.
pub struct Queue<K, V> {
    state: Mutex<State<K, V>>,
    changed: Notify,
}

struct State<K, V> {
    order: VecDeque<K>,
    waiting: HashMap<K, V>,
    busy: HashSet<K>,
}

impl<K: Clone + Eq + Hash, V> Default for Queue<K, V> {
    fn default() -> Self {
        Self {
            state: Mutex::new(State { order: VecDeque::new(), waiting: HashMap::new(), busy: HashSet::new() }),
            changed: Notify::new(),
        }
    }
}

impl<K: Clone + Eq + Hash, V> Queue<K, V> {
    fn state(&self) -> MutexGuard<'_, State<K, V>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks for `value` under `key`, replacing a request for it that is still waiting.
    pub fn put(&self, key: K, value: V) {
        let mut state = self.state();
        if state.waiting.insert(key.clone(), value).is_none() {
            state.order.push_back(key);
        }
        drop(state);
        self.changed.notify_waiters();
    }

    /// The oldest request whose key is not being worked on, once there is one; its key is busy until [`Self::done`].
    pub async fn take(&self) -> (K, V) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            // Registered before looking, so that a request put between the look and the wait is not missed.
            notified.as_mut().enable();
            if let Some(taken) = self.try_take() {
                return taken;
            }
            notified.await;
        }
    }

    fn try_take(&self) -> Option<(K, V)> {
        let mut guard = self.state();
        let state = &mut *guard;
        let position = state.order.iter().position(|key| !state.busy.contains(key))?;
        let key = state.order.remove(position)?;
        let value = state.waiting.remove(&key)?;
        state.busy.insert(key.clone());
        Some((key, value))
    }

    /// Ends the work on `key`: a request for it that came meanwhile can be taken.
    pub fn done(&self, key: &K) {
        self.state().busy.remove(key);
        self.changed.notify_waiters();
    }

    /// How many requests wait.
    pub fn waiting(&self) -> usize {
        self.state().waiting.len()
    }

    /// Whether a request under `key` waits or is being worked on.
    pub fn holds(&self, key: &K) -> bool {
        let state = self.state();
        state.waiting.contains_key(key) || state.busy.contains(key)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn now<T>(future: impl std::future::Future<Output = T>) -> Option<T> {
        futures_util::FutureExt::now_or_never(future)
    }

    #[test]
    fn a_newer_request_replaces_a_waiting_one_and_keeps_its_place() {
        let queue = Queue::default();
        queue.put("a", 1);
        queue.put("b", 1);
        queue.put("a", 2);
        assert_eq!(queue.waiting(), 2);
        assert_eq!(now(queue.take()), Some(("a", 2)), "the newest request, in the first one's place");
        assert_eq!(now(queue.take()), Some(("b", 1)));
        assert_eq!(now(queue.take()), None, "nothing waits");
    }

    #[test]
    fn a_key_being_worked_on_is_not_taken_again_until_done() {
        let queue = Queue::default();
        queue.put("a", 1);
        assert_eq!(now(queue.take()), Some(("a", 1)));
        queue.put("a", 2);
        queue.put("b", 1);
        assert_eq!(now(queue.take()), Some(("b", 1)), "a is busy: b goes first");
        assert_eq!(now(queue.take()), None, "a waits for its first request to be done");
        queue.done(&"a");
        assert_eq!(now(queue.take()), Some(("a", 2)));
    }

    #[test]
    fn a_key_is_held_while_its_request_waits_or_is_worked_on() {
        let queue = Queue::default();
        assert!(!queue.holds(&"a"));
        queue.put("a", 1);
        assert!(queue.holds(&"a"), "waiting");
        assert_eq!(now(queue.take()), Some(("a", 1)));
        assert!(queue.holds(&"a"), "being worked on");
        queue.done(&"a");
        assert!(!queue.holds(&"a"), "done");
    }

    #[tokio::test]
    async fn a_waiting_worker_wakes_for_a_request() {
        let queue = std::sync::Arc::new(Queue::default());
        let worker = tokio::spawn({
            let queue = queue.clone();
            async move { queue.take().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        queue.put("a", 1);
        let taken = tokio::time::timeout(Duration::from_secs(5), worker).await.expect("woken").expect("joined");
        assert_eq!(taken, ("a", 1));
    }
}
