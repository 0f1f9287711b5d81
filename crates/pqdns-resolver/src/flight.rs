//! Single flight: concurrent requests for the same key share one computation (the first
//! caller's), so a thousand simultaneous queries into one zone establish its trust once.
//!
//! If the computing caller is cancelled, a waiting caller computes instead (tokio's `OnceCell`
//! semantics). Callers must not wait on a key from inside its own computation: the resolver
//! uses it only for a zone's trust, which depends on strictly shorter (parent) zone names.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::OnceCell;

/// Computations in flight, by key.
pub(crate) struct Flights<K, V> {
    inflight: Mutex<HashMap<K, Arc<OnceCell<V>>>>,
}

impl<K: Eq + Hash + Clone, V: Clone> Flights<K, V> {
    pub(crate) fn new() -> Flights<K, V> {
        Flights {
            inflight: Mutex::new(HashMap::new()),
        }
    }

    fn map(&self) -> MutexGuard<'_, HashMap<K, Arc<OnceCell<V>>>> {
        self.inflight.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value of `compute()` for `key`, computed once for all concurrent callers.
    pub(crate) async fn run<F, Fut>(&self, key: &K, compute: F) -> V
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = V>,
    {
        let cell = self.map().entry(key.clone()).or_default().clone();
        let value = cell.get_or_init(compute).await.clone();
        let mut map = self.map();
        if map.get(key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            map.remove(key);
        }
        value
    }

    /// Number of keys in flight (or left by cancelled computations).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.map().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_share_one_computation() {
        let flights = Arc::new(Flights::<u32, u32>::new());
        let runs = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..50 {
            let (flights, runs) = (flights.clone(), runs.clone());
            tasks.push(tokio::spawn(async move {
                flights
                    .run(&7, || async {
                        runs.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        42
                    })
                    .await
            }));
        }
        for t in tasks {
            assert_eq!(t.await.unwrap(), 42);
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(flights.len(), 0, "finished flights are removed");
        // A later call computes again.
        assert_eq!(flights.run(&7, || async { 43 }).await, 43);
    }
}
