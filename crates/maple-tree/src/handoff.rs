//! The hand-over of garbage batches from the epoch collector to the writer.
//!
//! crossbeam-epoch runs a deferred function on whichever thread happens to
//! collect, once the grace period of what it captured is over. Ours only
//! [`push`](Handoff::push)es the batch here; the writer
//! [`try_take`](Handoff::try_take)s what is ready at its next write and
//! frees it on its own thread. The writer never waits: the collector holds
//! the lock only to push, and a busy lock means "later".
//!
//! Protocol (checked by the loom model `loom_handoff_loses_nothing`):
//! `push` appends under the lock and then sets `any`; `try_take` reads
//! `any` first (a cheap check on every write), and clears it *under the
//! lock, before taking*. A push racing a take therefore either lands in
//! what is taken, or sets `any` again after the clear, so no batch waits
//! behind a false `any`. Items never taken are dropped with the `Handoff`.

use crate::sync::{AtomicBool, Mutex, Ordering};

pub(crate) struct Handoff<T> {
    ready: Mutex<Vec<T>>,
    any: AtomicBool,
}

impl<T> Handoff<T> {
    pub(crate) fn new() -> Self {
        Handoff { ready: Mutex::new(Vec::new()), any: AtomicBool::new(false) }
    }

    /// Hands `item` over (called by the collector).
    pub(crate) fn push(&self, item: T) {
        // A panic while holding the lock cannot leave the Vec inconsistent.
        self.ready.lock().unwrap_or_else(|p| p.into_inner()).push(item);
        self.any.store(true, Ordering::Release);
    }

    /// Everything handed over so far, without waiting: empty if nothing is
    /// ready or the collector holds the lock right now.
    pub(crate) fn try_take(&self) -> Vec<T> {
        if !self.any.load(Ordering::Acquire) {
            return Vec::new();
        }
        let Ok(mut ready) = self.ready.try_lock() else { return Vec::new() };
        self.any.store(false, Ordering::Relaxed);
        core::mem::take(&mut *ready)
    }

    /// Everything handed over so far (waits for the lock).
    pub(crate) fn take_all(&self) -> Vec<T> {
        let mut ready = self.ready.lock().unwrap_or_else(|p| p.into_inner());
        self.any.store(false, Ordering::Relaxed);
        core::mem::take(&mut *ready)
    }
}
