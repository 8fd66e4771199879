//! Waiting for a store's first list. kube-runtime's `Store::wait_until_ready` keeps one waker (a one-shot channel's):
//! of several tasks waiting on one store at once, only the last to poll is woken, and the others wait for good. So
//! a loop's passes waiting at once just after a start hung (copies of an adopted operator were never removed on
//! kube-apiserver that way), and kube's own runner, which waits on its controller's store before it runs any pass,
//! may have its waker taken by any other waiter. Hence two ways, and never `wait_until_ready` itself
//! (`tests/store_waits.rs`):
//! - a store no controller runs on (filled by `watches::reflected` or a reflector of a loop's own): [`ready`] and
//!   [`listed`] look without waiting and sleep between looks, which costs a few wake-ups before the first list and
//!   nothing after it, and no task's wake-up depends on another's;
//! - a controller's own store, whose readiness kube's runner waits on and which nothing else may poll: the
//!   [`Listing`] its watch sets once the store took the first list (`watches::controller_listed`).

use std::time::Duration;

use futures_util::FutureExt;
use kube::runtime::reflector::Store;
use kube::runtime::watcher::{self, Event};
use kube::Resource;

/// How often a task waiting for a store's first list looks again.
const READY_POLL: Duration = Duration::from_millis(20);

/// Waits until `store` (one no controller runs on) has listed its objects once: true then, false if its watch is
/// gone first.
pub async fn ready<K>(store: &Store<K>) -> bool
where
    K: Resource + Clone,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match store.wait_until_ready().now_or_never() {
            Some(listed) => return listed.is_ok(),
            None => tokio::time::sleep(READY_POLL).await,
        }
    }
}

/// Whether `store` (one no controller runs on) has listed its objects once, waiting up to `within` for it; false
/// when it did not in that time or its watch stopped (a stopping controller no longer polls it), for the caller to
/// read live or come back later.
pub async fn listed<K>(store: &Store<K>, within: Duration) -> bool
where
    K: Resource + Clone,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    matches!(tokio::time::timeout(within, ready(store)).await, Ok(true))
}

/// Whether a controller's own store has listed its objects once, as its watch tells: set once the store took the
/// first list's end, never unset (a list again after a broken watch replaces the objects at once, as kube's store
/// does), and gone with the watch.
#[derive(Clone, Debug)]
pub struct Listing(tokio::sync::watch::Receiver<bool>);

impl Listing {
    /// A listing, and what sets it: to be called with each of the watch's events after the store took it.
    pub fn new<K>() -> (impl FnMut(&Result<Event<K>, watcher::Error>) + Send + 'static, Self) {
        let (listed, listing) = tokio::sync::watch::channel(false);
        let set = move |event: &Result<Event<K>, watcher::Error>| {
            if matches!(event, Ok(Event::InitDone)) {
                listed.send_replace(true);
            }
        };
        (set, Self(listing))
    }

    /// Whether the store has listed its objects once, now.
    pub fn is_listed(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until the store has listed its objects once: true then, false if its watch is gone first.
    pub async fn ready(&self) -> bool {
        self.0.clone().wait_for(|listed| *listed).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Namespace;
    use kube::runtime::reflector;

    #[tokio::test]
    async fn every_task_waiting_for_a_stores_first_list_goes_on_once_it_is_listed() {
        let (store, mut writer) = reflector::store::<Namespace>();
        let waiting: Vec<_> = (0..4)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { ready(&store).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(waiting.iter().all(|task| !task.is_finished()), "each waits for the list");
        assert!(!listed(&store, Duration::ZERO).await, "nothing listed yet");
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        for task in waiting {
            let listed = tokio::time::timeout(Duration::from_secs(2), task).await;
            assert!(matches!(listed, Ok(Ok(true))), "a waiting task was never woken: {listed:?}");
        }
        assert!(listed(&store, Duration::ZERO).await);
    }

    #[tokio::test]
    async fn a_store_whose_watch_is_gone_before_listing_is_never_ready() {
        let (store, writer) = reflector::store::<Namespace>();
        drop(writer);
        assert!(!ready(&store).await);
        assert!(!listed(&store, Duration::from_millis(10)).await);
    }

    #[tokio::test]
    async fn a_listing_is_set_by_the_end_of_the_first_list_and_wakes_every_waiter() {
        let (mut set, listing) = Listing::new::<Namespace>();
        let waiting: Vec<_> = (0..4)
            .map(|_| {
                let listing = listing.clone();
                tokio::spawn(async move { listing.ready().await })
            })
            .collect();
        set(&Ok(Event::Init));
        set(&Ok(Event::InitApply(Namespace::default())));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!listing.is_listed(), "listed only at the list's end");
        assert!(waiting.iter().all(|task| !task.is_finished()), "each waits for the list");
        set(&Ok(Event::InitDone));
        assert!(listing.is_listed());
        for task in waiting {
            let listed = tokio::time::timeout(Duration::from_secs(2), task).await;
            assert!(matches!(listed, Ok(Ok(true))), "a waiting task was never woken: {listed:?}");
        }
        // A list again after a broken watch leaves it set; the watch gone, it stays what it was.
        set(&Ok(Event::Init));
        drop(set);
        assert!(listing.is_listed() && listing.ready().await);
    }

    #[tokio::test]
    async fn a_listing_whose_watch_is_gone_before_the_first_list_ended_is_never_ready() {
        let (mut set, listing) = Listing::new::<Namespace>();
        set(&Ok(Event::Init));
        drop(set);
        assert!(!listing.ready().await);
        assert!(!listing.is_listed());
    }
}
