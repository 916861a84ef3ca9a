//! Loom models of the concurrent protocol (run with
//! `RUSTFLAGS="--cfg loom" cargo test -p maple-tree --lib --release loom`).
//!
//! Each model lets loom explore the interleavings (up to a preemption
//! bound) of a reader walking the tree with `lookup_rcu` and a writer
//! writing through `&RawTree` (every multi-word change in fresh nodes, as
//! the concurrent tree's writer does). Values are inline integer words, so retirement only frees
//! nodes; the "grace period" is the join of the reader. In loom builds
//! every node access checks that the node has not been freed
//! (`sync::freed`), so a model in which a reader can reach a node the
//! writer freed too early fails with "used after it was freed".

#[allow(unused_imports)]
use crate::prelude::*;

use core::ptr;

use loom::{
    model::Builder,
    sync::{Arc, Mutex},
    thread,
};

use crate::{
    cursor::Cursor,
    handle::U63,
    iter::{Entries, RawIter},
    raw::{rebind, LeafWalk, Path, RawTree},
    store::{Removed, Store, Stored},
};

fn word(v: u64) -> *mut () {
    ptr::without_provenance_mut(((v as usize) << 1) | 1)
}

fn val(w: *mut ()) -> Option<u64> {
    (!w.is_null()).then(|| (w.addr() >> 1) as u64)
}

/// Stores `[first, last]` = `v` in a tree no reader has seen yet,
/// through `&mut` (in place where it can: the setup adds no interleaving).
fn setup_store(t: &mut RawTree, first: u64, last: u64, v: u64) {
    let mut path = Path::new();
    // SAFETY: walked just now; read only by the write below, the one
    // change.
    t.walk_to_write(first, unsafe { rebind(&mut path) });
    let mut out = Stored::default();
    // SAFETY: valid range; integer words own nothing; `&mut`: no reader,
    // no other writer; `path` was just walked to `first`.
    unsafe { t.store_mut_walked(false, &mut path, Store::new(first, last).entry(word(v)).insert_only(), &mut out) }
        .expect("setup");
}

/// A tree of `n` entries `[i*10, i*10+5]` = i, for readers to share.
fn tree(n: u64) -> RawTree {
    let mut t = RawTree::new(false);
    for i in 0..n {
        setup_store(&mut t, i * 10, i * 10 + 5, i);
    }
    t
}

/// Integer words are copied, not cloned.
fn same(w: *mut (), _: u64, _: u64, _: u64) -> *mut () {
    w
}

fn store(t: &RawTree, first: u64, last: u64, v: u64) -> Stored {
    // SAFETY: single writer (the caller's thread), integer words.
    unsafe { t.store(Store::new(first, last).entry(word(v)).split(&mut same)) }.expect("store")
}

/// Empties `[first, last]`.
fn clear(t: &RawTree, first: u64, last: u64) -> Stored {
    // SAFETY: single writer (the caller's thread), integer words.
    unsafe { t.store(Store::new(first, last).split(&mut same)) }.expect("clear")
}

/// A reader's cursor walk from index 0 to the end: the ranges it passes
/// must be contiguous and end at `u64::MAX`. Returns the values seen.
fn walk(t: &RawTree) -> Vec<(u64, u64, Option<u64>)> {
    let mut w = LeafWalk::new(t, 0);
    let mut seen = Vec::new();
    let Some((lo, hi, v)) = w.current() else {
        return seen; // empty tree: one empty range, nothing to step through
    };
    assert_eq!(lo, 0, "the walk starts at 0");
    seen.push((lo, hi, val(v)));
    while w.next() {
        let (lo, hi, v) = w.current().expect("a walk that moved has a slot");
        let prev = seen.last().expect("seen").1;
        assert_eq!(lo, prev + 1, "ranges not contiguous: {seen:?} then {lo}..={hi}");
        seen.push((lo, hi, val(v)));
    }
    assert_eq!(seen.last().expect("seen").1, u64::MAX, "walk ended early: {seen:?}");
    seen
}

fn retire(t: &RawTree, stored: Stored) {
    for n in stored.retired.iter() {
        // SAFETY: the reader has been joined: the grace period is over, and
        // no writer is left to share the slab with.
        unsafe { t.slab.free(n) };
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
        retire(&t, stored);
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
        retire(&t, stored);
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
        retire(&t, stored);
        finish(t);
    });
}

/// A reader (a lookup, then a cursor walk) races a write that makes the
/// root collapse from an internal node to a leaf. The write publishes
/// nodes and then drops root levels; every node a reader could have
/// reached since publication must wait for the reader (here: the join).
#[test]
fn loom_reader_races_root_collapse() {
    builder().check(|| {
        let t = Arc::new(tree(9));
        assert_eq!(t.height.get(), 2);
        let r = {
            let t = Arc::clone(&t);
            thread::spawn(move || (val(t.lookup_rcu(83).2), walk(&t)))
        };
        let stored = clear(&t, 0, 75);
        assert_eq!(t.height.get(), 1, "the write collapses the root");
        let (seen, walked) = r.join().unwrap();
        assert_eq!(seen, Some(8));
        assert!(walked.iter().any(|&(lo, hi, v)| lo <= 83 && 83 <= hi && v == Some(8)), "walk missed 83: {walked:?}");
        retire(&t, stored);
        finish(t);
    });
}

/// A reader races a write that empties the whole tree (the root goes away).
#[test]
fn loom_reader_races_emptying_the_tree() {
    builder().check(|| {
        let t = Arc::new(tree(2));
        let r = {
            let t = Arc::clone(&t);
            thread::spawn(move || (val(t.lookup_rcu(12).2), walk(&t)))
        };
        let stored = clear(&t, 0, u64::MAX);
        assert!(t.root_node().is_none(), "the tree is empty");
        let (seen, walked) = r.join().unwrap();
        assert!(seen.is_none() || seen == Some(1), "saw {seen:?}");
        for (_, _, v) in walked {
            assert!(v.is_none() || v == Some(0) || v == Some(1), "walk saw {v:?}");
        }
        retire(&t, stored);
        finish(t);
    });
}

/// A reader iterating (`RawIter`, what every entry iterator runs on: it
/// reads a leaf's slots in place, each word once)
/// races an in-place replacement and then the replacement of a leaf: it
/// sees every entry once, ascending, each with its old or its new value,
/// and nothing freed under it.
#[test]
fn loom_iterator_races_in_place_and_leaf_writes() {
    builder().check(|| {
        let t = Arc::new(tree(12));
        assert!(t.height.get() >= 2);
        let r = {
            let t = Arc::clone(&t);
            thread::spawn(move || {
                // SAFETY: the writers free what they replace only after
                // this thread is joined (`retire` below), and change what
                // a reader reaches only by single-word slot stores.
                let mut it = unsafe { RawIter::<true>::lazy(&t, 0, u64::MAX, false) };
                let mut seen = Vec::new();
                while let Some((lo, hi, nn)) = it.next_entry() {
                    seen.push((lo, hi, val(nn.as_ptr())));
                }
                seen
            })
        };
        let a = store(&t, 20, 25, 42);
        let b = store(&t, 56, 57, 77);
        let seen = r.join().unwrap();
        for w in seen.windows(2) {
            assert!(w[0].1 < w[1].0, "not ascending: {seen:?}");
        }
        for i in 0..12u64 {
            let was = (i * 10, i * 10 + 5, Some(i));
            let ok = seen.contains(&was) || i == 2 && seen.contains(&(20, 25, Some(42)));
            assert!(ok, "entry {i} missing: {seen:?}");
        }
        let expected = 12 + usize::from(seen.contains(&(56, 57, Some(77))));
        assert_eq!(seen.len(), expected, "unexpected entries: {seen:?}");
        retire(&t, a);
        retire(&t, b);
        finish(t);
    });
}

/// A reader taking entries from both ends in turn (the concurrent tree's
/// double-ended iterator) races an in-place replacement, a leaf replaced
/// by a fresh copy, and an insert that overflows that leaf and pushes
/// entries into the next one (the bound between the two moves): the two
/// ends can stand on versions of a leaf with different bounds and meet
/// by index. Every entry once, the front ascending, the back descending,
/// the front's before the back's, each with its old or its new value.
/// (Loom explores few interleavings of this model, about sixty; the
/// stress test `concurrent_iter_both_ends_under_a_writer` is the one that
/// catches ends meeting by address instead of by index.)
#[test]
fn loom_iterator_from_both_ends_races_leaf_writes() {
    builder().check(|| {
        let t = Arc::new(tree(12));
        let r = {
            let t = Arc::clone(&t);
            thread::spawn(move || {
                // SAFETY: as in the model above: what the writer replaces
                // is freed only after this thread is joined, and a node it
                // can reach changes only by single-word slot stores.
                let mut it = unsafe { Entries::<true>::new(RawIter::lazy(&t, 0, u64::MAX, false)) };
                let (mut front, mut rear) = (Vec::new(), Vec::new());
                loop {
                    let Some((lo, hi, nn)) = it.next_back() else { break };
                    rear.push((lo, hi, val(nn.as_ptr())));
                    let Some((lo, hi, nn)) = it.next() else { break };
                    front.push((lo, hi, val(nn.as_ptr())));
                }
                assert!(it.next().is_none() && it.next_back().is_none());
                (front, rear)
            })
        };
        let writes = [store(&t, 20, 25, 42), store(&t, 56, 57, 77), store(&t, 46, 47, 78)];
        let (front, rear) = r.join().unwrap();
        assert!(front.windows(2).all(|w| w[0].1 < w[1].0), "front not ascending: {front:?}");
        assert!(rear.windows(2).all(|w| w[0].0 > w[1].1), "back not descending: {rear:?}");
        if let (Some(f), Some(b)) = (front.last(), rear.last()) {
            assert!(f.1 < b.0, "the ends crossed: {front:?} {rear:?}");
        }
        let seen: Vec<_> = front.iter().chain(rear.iter().rev()).copied().collect();
        for i in 0..12u64 {
            let was = (i * 10, i * 10 + 5, Some(i));
            let n = seen.iter().filter(|&&e| e == was || i == 2 && e == (20, 25, Some(42))).count();
            assert_eq!(n, 1, "entry {i} seen {n} times: {seen:?}");
        }
        let new = [(56, 57, Some(77)), (46, 47, Some(78))];
        let expected = 12 + new.iter().filter(|e| seen.contains(e)).count();
        assert_eq!(seen.len(), expected, "unexpected entries: {seen:?}");
        for w in writes {
            retire(&t, w);
        }
        finish(t);
    });
}

/// A reader's cursor steps past the last entry (and before the first)
/// while the writer inserts there, replacing the leaf the cursor reads: a
/// step that finds nothing leaves the cursor on the range it stood on,
/// with the bounds it had (not those of the newer leaf), and a step that
/// finds an entry finds one the tree held at some point, with its bounds.
#[test]
fn loom_cursor_steps_past_the_ends_while_the_writer_inserts_there() {
    builder().check(|| {
        let t = Arc::new(shifted_tree());
        let r = {
            let t = Arc::clone(&t);
            thread::spawn(move || {
                // SAFETY: what the writer replaces is freed only after this
                // thread is joined (`retire` below), and a node the cursor
                // can reach changes only by single-word slot stores.
                let mut c = unsafe { Cursor::<U63>::on_raw(&t, 50) };
                let at = c.range();
                assert!(at == (36..=u64::MAX) || at == (36..=99), "the cursor at 50 stands on {at:?}");
                match c.next().map(|(r, v)| (r, v.get())) {
                    None => assert_eq!(c.range(), 36..=u64::MAX, "an empty step moved the cursor"),
                    Some(e) => {
                        assert_eq!(e, (100..=105, 7), "stepped onto an entry never stored");
                        assert_eq!(c.range(), 100..=105);
                    }
                }
                // SAFETY: as above.
                let mut c = unsafe { Cursor::<U63>::on_raw(&t, 5) };
                let at = c.range();
                assert!(at == (0..=9) || at == (4..=9), "the cursor at 5 stands on {at:?}");
                match c.prev().map(|(r, v)| (r, v.get())) {
                    None => assert_eq!(c.range(), at, "an empty step moved the cursor"),
                    Some(e) => {
                        assert_eq!(e, (0..=3, 8), "stepped onto an entry never stored");
                        assert_eq!(c.range(), 0..=3);
                    }
                }
            })
        };
        let a = store(&t, 100, 105, 7);
        let b = store(&t, 0, 3, 8);
        r.join().unwrap();
        retire(&t, a);
        retire(&t, b);
        finish(t);
    });
}

/// A tree of the entries `[10, 15]`, `[20, 25]` and `[30, 35]`, for
/// readers to share: empty ranges at both ends.
fn shifted_tree() -> RawTree {
    let mut t = RawTree::new(false);
    for i in 1..=3u64 {
        setup_store(&mut t, i * 10, i * 10 + 5, i);
    }
    t
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
            retire(&t, s);
        }
        assert_eq!(val(t.lookup_rcu(103).2), Some(7));
        assert_eq!(val(t.lookup_rcu(203).2), Some(8));
        finish(t);
    });
}
