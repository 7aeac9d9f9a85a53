//! The lease queue: waiting shards per model in plan order, and shards waiting out a retry
//! backoff, so choosing a shard costs O(models + log shards) instead of a scan of every shard.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::time::Instant;

/// A shard's place: (run index, shard index). Ordering is plan order.
pub(super) type At = (usize, usize);

#[derive(Debug, Default)]
struct ModelQueue {
    shards: BTreeSet<At>,
    examples: u64,
}

/// Shards ready to lease, by model, and shards whose retry is not due yet.
#[derive(Debug, Default)]
pub(super) struct Queue {
    ready: HashMap<String, ModelQueue>,
    /// Due time and place; entries whose shard changed state since are dropped when due.
    delayed: BinaryHeap<Reverse<(Instant, At)>>,
}

impl Queue {
    /// Makes a shard of `model` with `examples` examples leasable.
    pub fn add_ready(&mut self, model: &str, at: At, examples: u64) {
        let queue = self.ready.entry(model.to_string()).or_default();
        if queue.shards.insert(at) {
            queue.examples += examples;
        }
    }

    /// Takes a shard out of the ready set (leased, adopted, done); false if it was not there.
    pub fn remove_ready(&mut self, model: &str, at: At, examples: u64) -> bool {
        let Some(queue) = self.ready.get_mut(model) else { return false };
        if !queue.shards.remove(&at) {
            return false;
        }
        queue.examples = queue.examples.saturating_sub(examples);
        if queue.shards.is_empty() {
            self.ready.remove(model);
        }
        true
    }

    /// Schedules a shard to become ready at `due`.
    pub fn delay(&mut self, due: Instant, at: At) {
        self.delayed.push(Reverse((due, at)));
    }

    /// Pops the delayed shards due by `now` (the caller checks they still wait).
    pub fn due(&mut self, now: Instant) -> Vec<(Instant, At)> {
        let mut due = Vec::new();
        while let Some(Reverse((when, at))) = self.delayed.peek().copied() {
            if when > now {
                break;
            }
            self.delayed.pop();
            due.push((when, at));
        }
        due
    }

    /// The first ready shard of `model` in plan order.
    pub fn first(&self, model: &str) -> Option<At> {
        self.ready.get(model).and_then(|q| q.shards.first().copied())
    }

    /// Every model with ready shards: (model, its first ready shard, its ready examples), in
    /// the plan order of those first shards.
    pub fn models(&self) -> Vec<(&str, At, u64)> {
        let mut models: Vec<(&str, At, u64)> = self
            .ready
            .iter()
            .filter_map(|(model, q)| q.shards.first().map(|&at| (model.as_str(), at, q.examples)))
            .collect();
        models.sort_by_key(|&(_, at, _)| at);
        models
    }

    /// Whether a shard of a model `allowed` accepts is ready.
    pub fn has_ready(&self, allowed: impl Fn(&str) -> bool) -> bool {
        self.ready.keys().any(|model| allowed(model))
    }

    /// When the next delayed shard is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.delayed.peek().map(|Reverse((when, _))| *when)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ready_shards_come_out_in_plan_order_with_their_example_counts() {
        let mut queue = Queue::default();
        queue.add_ready("b", (0, 5), 10);
        queue.add_ready("a", (0, 7), 3);
        queue.add_ready("a", (0, 2), 4);
        queue.add_ready("a", (0, 2), 4);
        assert_eq!(queue.first("a"), Some((0, 2)));
        assert_eq!(queue.models(), vec![("a", (0, 2), 7), ("b", (0, 5), 10)]);
        assert!(queue.remove_ready("a", (0, 2), 4));
        assert!(!queue.remove_ready("a", (0, 2), 4));
        assert_eq!(queue.models(), vec![("b", (0, 5), 10), ("a", (0, 7), 3)]);
        assert!(queue.remove_ready("b", (0, 5), 10));
        assert!(queue.remove_ready("a", (0, 7), 3));
        assert!(queue.models().is_empty() && !queue.has_ready(|_| true));
    }

    #[test]
    fn delayed_shards_come_due_in_time_order() {
        let t0 = Instant::now();
        let mut queue = Queue::default();
        queue.delay(t0 + Duration::from_secs(2), (0, 1));
        queue.delay(t0 + Duration::from_secs(1), (0, 0));
        assert_eq!(queue.next_due(), Some(t0 + Duration::from_secs(1)));
        assert!(queue.due(t0).is_empty());
        assert_eq!(queue.due(t0 + Duration::from_secs(1)), vec![(t0 + Duration::from_secs(1), (0, 0))]);
        assert_eq!(queue.due(t0 + Duration::from_secs(5)).len(), 1);
        assert_eq!(queue.next_due(), None);
    }
}
