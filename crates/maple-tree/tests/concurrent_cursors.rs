//! Readers that hold cursors while the writer empties and refills the tree.
//!
//! The writer keeps growing the tree (up to height 3 or more) and emptying
//! it again, at once or piece by piece, so that the root is replaced,
//! grows, collapses level by level and disappears over and over. Each
//! reader pins once per pass, puts a cursor at index 0 and walks it forward
//! and back through every range, empty or not, re-reading where it stands.
//! Under one guard everything a cursor reached stays allocated and
//! unchanged (a node is never rewritten in place except for single value
//! words), so the checks below are exact:
//!
//! * re-reading `range()` where the cursor stands gives the same bounds;
//! * `next_range` starts right after the range the cursor left, and
//!   `prev_range` ends right before it (ranges stay contiguous), and a
//!   forward walk from 0 ends at `u64::MAX`;
//! * every value a reader sees is alive (its magic word intact) and was
//!   stored for a range containing the range it is seen in.
//!
//! A node freed (and reused) while a reader could still reach it breaks
//! these checks within a few thousand passes.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering},
        Arc,
    },
    thread,
};

use maple_tree::ConcurrentMapleTree;
use rand::{rngs::SmallRng, Rng, SeedableRng};

#[path = "common/tracked.rs"]
mod tracked;

use tracked::{Report, Val, MAGIC};

struct Sizes {
    cycles: usize,
    small_pairs: usize,
    max_entries: u64,
    readers: usize,
}

fn sizes() -> Sizes {
    if cfg!(miri) {
        // Height 2 (a leaf holds 16 slots) and back, a few times.
        Sizes { cycles: 6, small_pairs: 30, max_entries: 12, readers: 1 }
    } else {
        // 400 entries with gaps between them need height 3.
        Sizes { cycles: 2000, small_pairs: 500, max_entries: 400, readers: 2 }
    }
}

fn check_value(v: Option<&Val>, lo: u64, hi: u64, report: &Report) {
    if let Some(v) = v {
        if v.magic != MAGIC {
            report.fail(format!("value seen at {lo:#x}..={hi:#x} was already dropped"));
        } else if !(v.first <= lo && hi <= v.last) {
            report.fail(format!("value for {:#x}..={:#x} seen at {lo:#x}..={hi:#x}", v.first, v.last));
        }
    }
}

/// Spins a little, so that the writer gets to run while the cursor stands.
fn dawdle(rng: &mut SmallRng) {
    for _ in 0..rng.gen_range(0..if cfg!(miri) { 2 } else { 200 }) {
        std::hint::spin_loop();
    }
}

/// One pass: a cursor from 0 to the end and partly back, under one guard.
fn pass(tree: &ConcurrentMapleTree<Box<Val>>, rng: &mut SmallRng, report: &Report) {
    let g = tree.pin();
    let mut c = tree.cursor(0, &g);
    let first = c.range();
    if *first.start() != 0 {
        report.fail(format!("cursor at 0 stands on {first:#x?}"));
        return;
    }
    let mut cur = first;
    check_value(c.get(), *cur.start(), *cur.end(), report);
    let mut steps = 0usize;
    loop {
        dawdle(rng);
        let again = c.range();
        if again != cur {
            report.fail(format!("range under the cursor changed from {cur:#x?} to {again:#x?}"));
            return;
        }
        check_value(c.get(), *cur.start(), *cur.end(), report);
        // Now and then a step back and forth again.
        if steps > 0 && rng.gen_ratio(1, 4) {
            match c.prev_range() {
                None => {
                    report.fail(format!("prev_range from {cur:#x?} found nothing"));
                    return;
                }
                Some((r, v)) => {
                    if r.end().wrapping_add(1) != *cur.start() {
                        report.fail(format!("prev_range from {cur:#x?} gave {r:#x?}"));
                        return;
                    }
                    check_value(v, *r.start(), *r.end(), report);
                    dawdle(rng);
                    if c.range() != r {
                        report.fail(format!("range under the cursor changed from {r:#x?} to {:#x?}", c.range()));
                        return;
                    }
                    match c.next_range() {
                        Some((n, _)) if *n.start() == r.end() + 1 && *n.start() == *cur.start() => cur = n,
                        other => {
                            let other = other.map(|(n, _)| n);
                            report.fail(format!("next_range after stepping back to {r:#x?} gave {other:#x?}"));
                            return;
                        }
                    }
                }
            }
        }
        match c.next_range() {
            None => {
                if *cur.end() != u64::MAX {
                    report.fail(format!("walk ended at {cur:#x?}, before the end of the index space"));
                }
                return;
            }
            Some((r, v)) => {
                if *r.start() != cur.end().wrapping_add(1) || cur.end() == &u64::MAX {
                    report.fail(format!("next_range after {cur:#x?} gave {r:#x?}"));
                    return;
                }
                check_value(v, *r.start(), *r.end(), report);
                cur = r;
            }
        }
        steps += 1;
    }
}

/// The writer: grow to a random size (in ascending, descending or random
/// order), then empty the tree at once or in pieces; small store/empty
/// pairs on an empty tree in between.
fn churn(tree: &ConcurrentMapleTree<Box<Val>>, live: &Arc<AtomicI64>, s: &Sizes, max_height: &mut usize) {
    let mut rng = SmallRng::seed_from_u64(5);
    for cycle in 0..s.cycles {
        // A root leaf made and emptied again.
        for _ in 0..s.small_pairs {
            let mut w = tree.lock();
            let k = rng.gen_range(0..1000u64);
            let v = Val::new(0, k, live);
            w.store_range(0..=k, v).unwrap();
            w.remove_range(..).unwrap();
        }
        let n = rng.gen_range(1..=s.max_entries);
        let order = cycle % 3;
        {
            let mut w = tree.lock();
            for j in 0..n {
                let i = match order {
                    0 => j,
                    1 => n - 1 - j,
                    _ => rng.gen_range(0..n),
                };
                let (f, l) = (i * 16, i * 16 + 7);
                let _ = w.insert_range(f..=l, Val::new(f, l, live));
            }
        }
        *max_height = (*max_height).max(tree.height());
        let mut w = tree.lock();
        match rng.gen_range(0..3) {
            0 => w.remove_range(..).unwrap(),
            1 => {
                // Empty it from the right in chunks: the root collapses
                // one level at a time.
                let mut hi = n * 16;
                while hi > 0 {
                    let lo = hi.saturating_sub(rng.gen_range(16..16 * 40));
                    w.remove_range(lo..hi).unwrap();
                    hi = lo;
                }
            }
            _ => {
                // Overwrite everything with one entry, then erase it.
                let end = n * 16;
                w.store_range(0..=end, Val::new(0, end, live)).unwrap();
                assert!(w.erase(0).unwrap());
            }
        }
        assert_eq!(tree.len(), 0);
    }
}

#[test]
fn readers_hold_cursors_while_the_tree_empties_and_refills() {
    let s = sizes();
    let live = Arc::new(AtomicI64::new(0));
    let tree: Arc<ConcurrentMapleTree<Box<Val>>> = Arc::new(ConcurrentMapleTree::with_gaps());
    let done = Arc::new(AtomicBool::new(false));
    let report = Arc::new(Report::default());
    let passes = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..s.readers)
        .map(|r| {
            let (tree, done, report, passes) =
                (Arc::clone(&tree), Arc::clone(&done), Arc::clone(&report), Arc::clone(&passes));
            thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(100 + r as u64);
                let mut n = 0u64;
                while !done.load(Ordering::Relaxed) || n == 0 {
                    pass(&tree, &mut rng, &report);
                    n += 1;
                }
                passes.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    let mut max_height = 0;
    churn(&tree, &live, &s, &mut max_height);
    done.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    tracked::assert_no_failures(&report, passes.load(Ordering::Relaxed));
    let want_height = if cfg!(miri) { 2 } else { 3 };
    assert!(max_height >= want_height, "the tree only reached height {max_height}");
    tree.validate().unwrap();
    assert!(tree.is_empty());
    let tree = Arc::into_inner(tree).expect("readers are gone");
    drop(tree);
    tracked::assert_all_dropped(&live);
}
