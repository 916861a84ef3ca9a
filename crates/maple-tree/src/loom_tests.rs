//! Loom models of the concurrent protocol (run with
//! `RUSTFLAGS="--cfg loom" cargo test -p maple-tree --lib --release loom`).
//!
//! Each model lets loom explore the interleavings (up to a preemption
//! bound) of a reader walking the tree with `lookup_rcu` and a writer in
//! RCU mode. Values are inline integer words, so retirement only frees
//! nodes; the "grace period" is the join of the reader. The last model
//! checks the hand-over of garbage batches from the collector to the
//! writer (`handoff.rs`).

use core::ptr;

use loom::{
    model::Builder,
    sync::{Arc, Mutex},
    thread,
};

use crate::{
    alloc::free_node,
    handoff::Handoff,
    raw::RawTree,
    store::{Removed, Stored},
};

fn word(v: u64) -> *mut () {
    ptr::without_provenance_mut(((v as usize) << 1) | 1)
}

fn val(w: *mut ()) -> Option<u64> {
    (!w.is_null()).then(|| (w.addr() >> 1) as u64)
}

/// An RCU-mode tree of `n` entries `[i*10, i*10+5]` = i.
fn tree(n: u64) -> RawTree {
    let mut t = RawTree::new(false);
    for i in 0..n {
        // SAFETY: valid range; integer words own nothing.
        unsafe { t.store_mut(i * 10, i * 10 + 5, word(i), true, None) }.expect("setup");
    }
    t.rcu = true;
    t
}

/// Integer words are copied, not cloned.
fn same(w: *mut ()) -> *mut () {
    w
}

fn store(t: &RawTree, first: u64, last: u64, v: u64) -> Stored {
    // SAFETY: single writer (the caller's thread), integer words.
    unsafe { t.store(first, last, word(v), false, Some(&mut same)) }.expect("store")
}

fn retire(stored: Stored) {
    for n in stored.retired.iter() {
        // SAFETY: the reader has been joined: the grace period is over.
        unsafe { free_node(n) };
    }
    let _: Removed = stored.removed; // integer words: nothing to drop
}

fn finish(t: Arc<RawTree>) {
    let mut t = Arc::try_unwrap(t).ok().expect("threads joined");
    t.validate().expect("valid after the race");
    t.clear_with(None);
}

fn builder() -> Builder {
    let mut b = Builder::new();
    b.preemption_bound = Some(2);
    b.max_branches = 1_000_000;
    b
}

/// A reader races the publication of a new root leaf.
#[test]
fn loom_reader_races_root_publish() {
    builder().check(|| {
        let t = Arc::new(tree(3));
        let r = {
            let t = Arc::clone(&t);
            thread::spawn(move || [val(t.lookup_rcu(12).2), val(t.load_rcu(12))])
        };
        let stored = store(&t, 12, 12, 99);
        for seen in r.join().unwrap() {
            assert!(seen == Some(1) || seen == Some(99), "saw {seen:?}");
        }
        retire(stored);
        finish(t);
    });
}

/// A reader races the replacement of a leaf under a parent (the old leaf
/// is marked dead and freed only after the reader is gone).
#[test]
fn loom_reader_races_leaf_replacement() {
    builder().check(|| {
        let t = Arc::new(tree(12));
        assert!(t.height.get() >= 2);
        let r = {
            let t = Arc::clone(&t);
            thread::spawn(move || (val(t.lookup_rcu(52).2), val(t.lookup_rcu(57).2), val(t.load_rcu(57))))
        };
        let stored = store(&t, 56, 57, 77);
        let (a, b, c) = r.join().unwrap();
        assert_eq!(a, Some(5));
        assert!(b.is_none() || b == Some(77), "saw {b:?}");
        assert!(c.is_none() || c == Some(77), "load_rcu saw {c:?}");
        retire(stored);
        finish(t);
    });
}

/// A reader races an in-place exact-fit replacement (one word).
#[test]
fn loom_reader_races_in_place_slot_store() {
    builder().check(|| {
        let t = Arc::new(tree(3));
        let r = {
            let t = Arc::clone(&t);
            thread::spawn(move || [val(t.lookup_rcu(13).2), val(t.load_rcu(13))])
        };
        let stored = store(&t, 10, 15, 42);
        assert!(stored.retired.is_empty(), "exact fit must not replace nodes");
        for seen in r.join().unwrap() {
            assert!(seen == Some(1) || seen == Some(42), "saw {seen:?}");
        }
        retire(stored);
        finish(t);
    });
}

/// Two writers serialised by a lock; both writes land.
#[test]
fn loom_two_writers_serialised_by_the_lock() {
    builder().check(|| {
        let t = Arc::new(tree(3));
        let lock = Arc::new(Mutex::new(Vec::new()));
        let w = {
            let (t, lock) = (Arc::clone(&t), Arc::clone(&lock));
            thread::spawn(move || {
                let mut g = lock.lock().unwrap();
                g.push(store(&t, 100, 105, 7));
            })
        };
        {
            let mut g = lock.lock().unwrap();
            g.push(store(&t, 200, 205, 8));
        }
        w.join().unwrap();
        for s in Arc::try_unwrap(lock).ok().unwrap().into_inner().unwrap() {
            retire(s);
        }
        assert_eq!(val(t.lookup_rcu(103).2), Some(7));
        assert_eq!(val(t.lookup_rcu(203).2), Some(8));
        finish(t);
    });
}

/// The collector hands two batches to the writer while the writer tries to
/// take them: each arrives exactly once, and none is left behind a cleared
/// `any` flag (the writer's cheap check would then skip it forever).
#[test]
fn loom_handoff_loses_nothing() {
    builder().check(|| {
        let h = Arc::new(Handoff::new());
        let c = {
            let h = Arc::clone(&h);
            thread::spawn(move || {
                h.push(1u32);
                h.push(2u32);
            })
        };
        let mut got = h.try_take();
        got.extend(h.try_take());
        c.join().unwrap();
        // No contention now: whatever is left must be seen by the cheap path.
        got.extend(h.try_take());
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
    });
}
