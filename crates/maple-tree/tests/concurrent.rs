//! Readers racing a writer: every value a reader sees belongs to a range
//! containing the index it asked for, iteration stays ordered, and after the
//! race the tree is valid and every value is dropped exactly once.

use std::{
    ops::RangeInclusive,
    sync::{
        atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering},
        Arc,
    },
    thread,
};

use maple_tree::{collect_garbage, ConcurrentMapleTree, MapleTree, U63};
use rand::{rngs::SmallRng, Rng, SeedableRng};

/// A value that encodes the range it was stored for, and counts itself.
#[derive(Debug)]
struct Val {
    first: u64,
    last: u64,
    live: Arc<AtomicI64>,
}

impl Val {
    fn new(first: u64, last: u64, live: &Arc<AtomicI64>) -> Box<Val> {
        live.fetch_add(1, Ordering::Relaxed);
        Box::new(Val { first, last, live: Arc::clone(live) })
    }
}

impl Clone for Val {
    fn clone(&self) -> Self {
        self.live.fetch_add(1, Ordering::Relaxed);
        Val { first: self.first, last: self.last, live: Arc::clone(&self.live) }
    }
}

impl Drop for Val {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::Relaxed);
    }
}

struct Sizes {
    keys: u64,
    writes: usize,
    readers: usize,
}

fn sizes() -> Sizes {
    if cfg!(miri) {
        Sizes { keys: 200, writes: 40, readers: 1 }
    } else {
        Sizes { keys: 200_000, writes: 60_000, readers: 2 }
    }
}

fn race(gaps: bool) {
    let s = sizes();
    let live = Arc::new(AtomicI64::new(0));
    let tree: Arc<ConcurrentMapleTree<Box<Val>>> =
        Arc::new(if gaps { ConcurrentMapleTree::with_gaps() } else { ConcurrentMapleTree::new() });
    {
        let mut w = tree.lock();
        for i in 0..s.keys / 40 {
            let f = i * 20;
            w.insert_range(f..=f + 9, Val::new(f, f + 9, &live)).unwrap();
        }
    }
    let done = Arc::new(AtomicBool::new(false));
    let violations = Arc::new(AtomicU64::new(0));
    let lookups = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..s.readers)
        .map(|r| {
            let (tree, done, violations, lookups) =
                (Arc::clone(&tree), Arc::clone(&done), Arc::clone(&violations), Arc::clone(&lookups));
            thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(r as u64);
                let mut n = 0u64;
                while !done.load(Ordering::Relaxed) || n == 0 {
                    let g = tree.pin();
                    for _ in 0..if cfg!(miri) { 4 } else { 64 } {
                        let i = rng.gen_range(0..s.keys);
                        if let Some((range, v)) = tree.get_range(i, &g) {
                            let ok = range.contains(&i) && v.first <= *range.start() && *range.end() <= v.last;
                            if !ok {
                                violations.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        if let Some(v) = tree.load(i, &g) {
                            if !(v.first..=v.last).contains(&i) {
                                violations.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        n += 1;
                    }
                    if gaps {
                        // Gap search while nodes are replaced: the answer
                        // may be stale but lies inside the window.
                        let lo = rng.gen_range(0..s.keys);
                        let size = rng.gen_range(1..30u64);
                        if let Ok(start) = tree.empty_area(lo..=lo + 5000, size) {
                            if start < lo || start + size - 1 > lo + 5000 {
                                violations.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    if n % if cfg!(miri) { 16 } else { 1024 } == 0 {
                        // A short ordered scan under one guard.
                        let start = rng.gen_range(0..s.keys);
                        let mut prev_end: Option<u64> = None;
                        for (range, v) in tree.range(start..start + 2000, &g) {
                            let ordered = prev_end.is_none_or(|p| *range.start() > p);
                            let inside = v.first <= *range.start() && *range.end() <= v.last;
                            if !ordered || !inside {
                                violations.fetch_add(1, Ordering::Relaxed);
                            }
                            prev_end = Some(*range.end());
                        }
                    }
                }
                lookups.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    let mut rng = SmallRng::seed_from_u64(99);
    for step in 0..s.writes {
        let f = rng.gen_range(0..s.keys);
        let len = rng.gen_range(0..40u64);
        let mut w = tree.lock();
        if step % (s.writes / 4).max(1) == 0 {
            // Duplicate while readers run; under the lock the copy must
            // equal the tree.
            let copy = w.try_dup().unwrap();
            copy.validate().unwrap();
            let g = tree.pin();
            let a: Vec<_> = copy.iter().map(|(r, v)| (r, v.first, v.last)).collect();
            let b: Vec<_> = tree.iter(&g).map(|(r, v)| (r, v.first, v.last)).collect();
            assert_eq!(a, b, "dup differs from the tree");
        }
        match rng.gen_range(0..12) {
            0..=3 => w.store_range(f..=f + len, Val::new(f, f + len, &live)).unwrap(),
            4 | 5 => {
                let _ = w.insert_range(f..=f + len, Val::new(f, f + len, &live));
            }
            6 => w.remove_range(f..=f + len).unwrap(),
            7 => {
                w.erase(f).unwrap();
            }
            // Spanning writes that rebuild several levels.
            8 => w.store_range(f..=f + len * 200, Val::new(f, f + len * 200, &live)).unwrap(),
            9 => w.remove_range(f..=f + len * 100).unwrap(),
            // Through the write cursor: replace the next few entries in
            // place (exact fit) and fill or erase the ranges between them.
            10 => {
                let mut c = w.cursor(f);
                for _ in 0..4 {
                    let Some((r, _)) = c.next() else { break };
                    c.replace(Val::new(*r.start(), *r.end(), &live)).unwrap();
                }
                if c.get().is_none() {
                    let r = c.range();
                    c.replace(Val::new(*r.start(), *r.end(), &live)).unwrap();
                }
            }
            _ => {
                let mut c = w.cursor(f);
                if c.next().is_some() {
                    assert!(c.erase().unwrap());
                    assert!(c.get().is_none());
                }
            }
        }
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(violations.load(Ordering::Relaxed), 0, "readers saw impossible values");
    assert!(lookups.load(Ordering::Relaxed) > 0);
    tree.validate().unwrap();
    let tree = Arc::into_inner(tree).expect("readers are gone");
    let n = tree.len() as i64;
    assert_eq!(settle(&live, n, || tree.lock().reclaim()), n, "values alive != entries after the grace period");
    drop(tree);
    assert_eq!(settle(&live, 0, || ()), 0, "values leaked or dropped twice");
}

/// Runs deferred frees (and `reclaim`, which frees batches past their grace
/// period) until `live` reaches `want` or clearly will not (other tests in
/// this process share the epoch and may delay it briefly).
fn settle(live: &AtomicI64, want: i64, reclaim: impl Fn()) -> i64 {
    for _ in 0..if cfg!(miri) { 40 } else { 2000 } {
        reclaim();
        collect_garbage();
        reclaim();
        if live.load(Ordering::Relaxed) == want {
            break;
        }
        thread::yield_now();
    }
    live.load(Ordering::Relaxed)
}

#[test]
fn readers_racing_a_writer_plain() {
    race(false);
}

#[test]
fn readers_racing_a_writer_gaps() {
    race(true);
}

#[test]
fn round_trip_and_read_api() {
    let mut t: MapleTree<U63> = MapleTree::with_gaps();
    for i in 0..100u64 {
        t.insert_range(i * 10..=i * 10 + 4, U63::new(i).unwrap()).unwrap();
    }
    let c = ConcurrentMapleTree::from(t);
    let g = c.pin();
    assert_eq!(c.load(15, &g), None);
    assert_eq!(c.load(12, &g).map(U63::get), Some(1));
    assert_eq!(c.get_range(993, &g).map(|(r, v)| (r, v.get())), Some((990..=994, 99)));
    assert_eq!(c.iter(&g).count(), 100);
    assert_eq!(c.load_cloned(20).map(U63::get), Some(2));
    assert_eq!(c.load_with(31, |v| v.map(U63::get)), Some(3));
    assert_eq!(c.empty_area(0..=1000, 5), Ok(5));
    let mut cur = c.cursor(5, &g);
    assert_eq!((cur.range(), cur.get()), (5..=9, None));
    assert_eq!(cur.next().map(|(r, v)| (r, v.get())), Some((10..=14, 1)));
    assert_eq!(cur.prev_range().map(|(r, v)| (r, v.is_some())), Some((5..=9, false)));
    {
        let mut w = c.lock();
        assert_eq!(w.alloc_range(0..=1000, 5, U63::new(7).unwrap()).unwrap(), 5);
        assert_eq!(w.alloc_range_rev(0..=1000, 5, U63::new(8).unwrap()).unwrap(), 996);
        assert!(w.erase(12).unwrap());
        assert!(!w.erase(12).unwrap());
        w.reserve_range(100_000..=100_010).unwrap();
        let copy = w.try_dup().unwrap();
        copy.validate().unwrap();
        assert_eq!(copy.len(), 101);
        // The whole read API under the writer lock, through `tree()`.
        let t = w.tree();
        assert_eq!(t.len(), 101);
        assert_eq!(t.get_range(996).map(|(r, v)| (r, v.get())), Some((996..=1000, 8)));
        assert_eq!(t.iter().count(), 101);
        assert!(t.is_reserved(100_005));
        t.validate().unwrap();
        w.erase(996).unwrap();
        assert_eq!(w.tree().get_range(996), None);
        assert!(copy.is_reserved(100_005));
    }
    // The old guard still sees a consistent snapshot of what it read.
    assert_eq!(c.load(3, &g).map(U63::get), Some(0));
    drop(g);
    c.validate().unwrap();
    let back = c.into_inner();
    back.validate().unwrap();
    assert_eq!(back.len(), 100);
    assert_eq!(back.load(7).map(U63::get), Some(7));
}

/// A value a reader still holds survives its removal, later writes, and
/// every reclamation attempt, until the reader's guard is dropped; then it
/// is dropped exactly once.
#[test]
fn removed_value_outlives_the_reader_that_holds_it() {
    let live = Arc::new(AtomicI64::new(0));
    let tree: ConcurrentMapleTree<Box<Val>> = ConcurrentMapleTree::new();
    let writes = if cfg!(miri) { 80 } else { 2000 };
    {
        let mut w = tree.lock();
        for i in 0..writes {
            w.insert_range(i * 10..=i * 10 + 5, Val::new(i * 10, i * 10 + 5, &live)).unwrap();
        }
    }
    let g = tree.pin();
    let held = tree.load(33, &g).expect("stored");
    assert_eq!((held.first, held.last), (30, 35));
    // Another thread removes it and churns enough to fill many batches.
    thread::scope(|s| {
        s.spawn(|| {
            let mut w = tree.lock();
            assert!(w.erase(33).unwrap());
            for i in 0..writes {
                let f = i * 10 + 1_000_000;
                w.insert_range(f..=f + 5, Val::new(f, f + 5, &live)).unwrap();
                assert!(w.erase(f).unwrap());
            }
            w.reclaim();
        });
    });
    for _ in 0..if cfg!(miri) { 8 } else { 200 } {
        collect_garbage();
        tree.lock().reclaim();
    }
    // Still readable, still counted alive.
    assert_eq!((held.first, held.last), (30, 35));
    assert_eq!(tree.load(33, &g).map(|v| v.first), None);
    let n = tree.len() as i64;
    assert_eq!(n, writes as i64 - 1);
    assert!(live.load(Ordering::Relaxed) > n, "the held value was dropped under its reader");
    drop(g);
    assert_eq!(settle(&live, n, || tree.lock().reclaim()), n, "removed values not reclaimed after the grace period");
    drop(tree);
    assert_eq!(live.load(Ordering::Relaxed), 0);
}

/// A value replaced through a write cursor (one word written where the
/// cursor stands, no walk) waits for the grace period like any removed
/// value: a reader holding it keeps it alive, and it is dropped once after.
#[test]
fn a_value_replaced_through_a_write_cursor_outlives_its_reader() {
    let live = Arc::new(AtomicI64::new(0));
    let tree: ConcurrentMapleTree<Box<Val>> = ConcurrentMapleTree::new();
    {
        let mut w = tree.lock();
        for i in 0..20 {
            w.insert_range(i * 10..=i * 10 + 5, Val::new(i * 10, i * 10 + 5, &live)).unwrap();
        }
    }
    let g = tree.pin();
    let held = tree.load(43, &g).expect("stored");
    {
        let mut w = tree.lock();
        let mut c = w.cursor(43);
        c.replace(Val::new(1040, 1045, &live)).unwrap();
        assert_eq!(c.range(), 40..=45);
        w.reclaim();
    }
    for _ in 0..if cfg!(miri) { 8 } else { 100 } {
        collect_garbage();
        tree.lock().reclaim();
    }
    assert_eq!((held.first, held.last), (40, 45));
    assert_eq!(live.load(Ordering::Relaxed), 21, "the replaced value was dropped under its reader");
    assert_eq!(tree.load(43, &g).map(|v| v.first), Some(1040));
    drop(g);
    assert_eq!(settle(&live, 20, || tree.lock().reclaim()), 20, "the replaced value was not dropped after");
    tree.validate().unwrap();
}

/// Dropping the tree while batches are still waiting for their grace
/// period frees them at once, on the dropping thread (no reader of the tree
/// can be left: every read borrows it), even while a guard is still
/// pinned: nothing leaks and nothing is left for the collector to free.
#[test]
fn dropping_the_tree_with_garbage_in_flight() {
    use maple_tree::fault;
    let base = fault::live();
    let live = Arc::new(AtomicI64::new(0));
    let tree: ConcurrentMapleTree<Box<Val>> = ConcurrentMapleTree::with_gaps();
    let g = tree.pin(); // holds the epoch back so batches stay in flight
    {
        let mut w = tree.lock();
        for i in 0..200u64 {
            w.store_range(0..=i, Val::new(0, i, &live)).unwrap();
        }
        w.reclaim();
    }
    assert!(live.load(Ordering::Relaxed) > 1, "replaced values were freed under a pinned guard");
    assert!(fault::live() - base > 1, "replaced nodes were freed under a pinned guard");
    drop(tree);
    assert_eq!(live.load(Ordering::Relaxed), 0, "values leaked or dropped twice");
    assert_eq!(fault::live(), base, "nodes leaked");
    drop(g);
}

/// The concurrent write cursor does what `CursorMut` does on a plain tree.
#[test]
fn write_cursor_matches_cursor_mut() {
    let mut rng = SmallRng::seed_from_u64(7);
    let mut plain: MapleTree<U63> = MapleTree::with_gaps();
    let conc: ConcurrentMapleTree<U63> = ConcurrentMapleTree::with_gaps();
    let steps = if cfg!(miri) { 60 } else { 3000 };
    for step in 0..steps {
        let at = rng.gen_range(0..5000u64);
        let f = rng.gen_range(0..5000u64);
        let l = f + rng.gen_range(0..60u64);
        let v = U63::new(step).unwrap();
        let op = rng.gen_range(0..6);
        let mut w = conc.lock();
        let mut cc = w.cursor(at);
        let mut pc = plain.cursor_mut(at);
        assert_eq!(cc.range(), pc.range());
        let moved = (cc.next().map(|(r, v)| (r, v.get())), pc.next().map(|(r, v)| (r, v.get())));
        assert_eq!(moved.0, moved.1, "step {step}: next");
        match op {
            0 => assert_eq!(cc.replace(v).is_ok(), pc.replace(v).is_ok()),
            1 => assert_eq!(cc.erase().unwrap(), pc.erase().is_some()),
            2 => assert_eq!(cc.insert_range(f..=l, v).is_ok(), pc.insert_range(f..=l, v).is_ok()),
            3 => {
                cc.store_range(f..=l, v).unwrap();
                pc.store_range(f..=l, v).unwrap();
            }
            4 => {
                cc.remove_range(f..=l).unwrap();
                pc.remove_range(f..=l).unwrap();
            }
            _ => {
                let a: Vec<_> = (0..3).map_while(|_| cc.prev_range().map(|(r, v)| (r, v.map(U63::get)))).collect();
                let b: Vec<_> = (0..3).map_while(|_| pc.prev_range().map(|(r, v)| (r, v.map(U63::get)))).collect();
                assert_eq!(a, b, "step {step}: prev_range");
            }
        }
        assert_eq!(cc.range(), pc.range(), "step {step}: position after op {op}");
        drop(w);
        conc.validate().unwrap();
        plain.validate().unwrap();
        let g = conc.pin();
        let a: Vec<_> = conc.iter(&g).map(|(r, v)| (r, v.get())).collect();
        let b: Vec<_> = plain.iter().map(|(r, v)| (r, v.get())).collect();
        assert_eq!(a, b, "step {step}: contents after op {op}");
    }
}

/// Every node the concurrent tree allocates is freed: retired nodes once
/// their grace period has passed (by the writer's thread, which is this
/// one), the rest when the tree is dropped.
#[test]
fn no_node_leaks() {
    use maple_tree::fault;
    let base = fault::live();
    let mut rng = SmallRng::seed_from_u64(3);
    let tree: ConcurrentMapleTree<U63> = ConcurrentMapleTree::with_gaps();
    let writes = if cfg!(miri) { 100 } else { 5000 };
    {
        let mut w = tree.lock();
        for i in 0..writes {
            let f = rng.gen_range(0..20_000u64);
            let l = f + rng.gen_range(0..50u64);
            match i % 4 {
                0 | 1 => {
                    let _ = w.insert_range(f..=l, U63::new(i).unwrap());
                }
                2 => w.store_range(f..=l + 300, U63::new(i).unwrap()).unwrap(),
                _ => w.remove_range(f..=l).unwrap(),
            }
        }
    }
    let in_tree = |t: &ConcurrentMapleTree<U63>| {
        let s = t.stats();
        (s.leaves + s.internal) as i64
    };
    assert!(fault::live() - base > in_tree(&tree), "writes retired no nodes?");
    for _ in 0..if cfg!(miri) { 40 } else { 2000 } {
        tree.lock().reclaim();
        collect_garbage();
        if fault::live() - base == in_tree(&tree) {
            break;
        }
    }
    assert_eq!(fault::live() - base, in_tree(&tree), "retired nodes not freed after their grace period");
    // A few more writes leave garbage pending (fewer items than a batch):
    // dropping the tree frees it.
    {
        let mut w = tree.lock();
        for i in 0..3 {
            w.store_range(i * 1000..=i * 1000 + 400, U63::new(i).unwrap()).unwrap();
        }
    }
    assert!(fault::live() - base > in_tree(&tree), "the writes retired no nodes");
    drop(tree);
    assert_eq!(fault::live(), base, "nodes leaked");
}

/// `with_mut` writes in place and hands removed values back; afterwards
/// the locked writes build in fresh nodes again: a value a reader holds
/// survives them until its guard drops.
#[test]
fn with_mut_then_concurrent_again() {
    let live = Arc::new(AtomicI64::new(0));
    let mut tree: ConcurrentMapleTree<Box<Val>> = ConcurrentMapleTree::with_gaps();
    let n = if cfg!(miri) { 40 } else { 1000 };
    let back = tree.with_mut(|m| {
        for i in 0..n {
            m.insert_range(i * 10..=i * 10 + 5, Val::new(i * 10, i * 10 + 5, &live)).unwrap();
        }
        m.validate().unwrap();
        m.erase(13).map(|v| (v.first, v.last))
    });
    assert_eq!(back, Some((10, 15)));
    assert_eq!(live.load(Ordering::Relaxed), n as i64 - 1, "the erased value was dropped on return");
    tree.validate().unwrap();
    let g = tree.pin();
    let held = tree.load(22, &g).unwrap();
    // A read cursor keeps walking the nodes it reached: the locked writes
    // below replace them rather than rewrite them.
    let cur = tree.cursor(22, &g);
    {
        let mut w = tree.lock();
        for i in 0..n {
            w.store_range(i * 10..=i * 10 + 9, Val::new(i * 10, i * 10 + 9, &live)).unwrap();
        }
        w.reclaim();
    }
    collect_garbage();
    tree.lock().reclaim();
    assert_eq!((held.first, held.last), (20, 25), "a held value changed under its reader");
    assert_eq!(cur.range(), 20..=25, "a node was rewritten in place under a reader");
    assert_eq!(cur.get().map(|v| v.last), Some(25));
    drop(g);
    tree.validate().unwrap();
    drop(tree);
    assert_eq!(settle(&live, 0, || ()), 0, "values leaked or dropped twice");
}

/// Readers never wait for the writer: with the write lock held (and a
/// write done under it), lookups, iteration, gap search and `load_cloned`
/// all complete on another thread.
#[test]
fn readers_do_not_wait_for_a_held_write_lock() {
    let tree: ConcurrentMapleTree<U63> = ConcurrentMapleTree::with_gaps();
    {
        let mut w = tree.lock();
        for i in 0..100u64 {
            w.insert_range(i * 10..=i * 10 + 4, U63::new(i).unwrap()).unwrap();
        }
    }
    let mut w = tree.lock();
    w.store_range(0..=4, U63::new(1000).unwrap()).unwrap();
    thread::scope(|s| {
        let reader = s.spawn(|| {
            let g = tree.pin();
            let seen = tree.load(2, &g).map(U63::get);
            let n = tree.iter(&g).count();
            let gap = tree.empty_area(0..=1000, 5);
            (seen, n, gap, tree.load_cloned(13).map(U63::get))
        });
        // The reader finishes while this thread still holds the lock.
        let (seen, n, gap, cloned) = reader.join().unwrap();
        assert_eq!(seen, Some(1000), "the reader sees the published write");
        assert_eq!((n, gap, cloned), (100, Ok(5), Some(1)));
    });
    drop(w);
}

/// `try_lock` fails while another writer holds the lock; a panic inside
/// `with_mut` leaves the tree consistent, its locked writes in fresh nodes.
#[test]
fn try_lock_and_a_panic_inside_with_mut() {
    let mut tree: ConcurrentMapleTree<U63> = ConcurrentMapleTree::new();
    {
        let _w = tree.lock();
        thread::scope(|s| {
            assert!(s.spawn(|| tree.try_lock().is_none()).join().unwrap(), "try_lock took a held lock");
        });
    }
    assert!(tree.try_lock().is_some());
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tree.with_mut(|m| {
            for i in 0..200u64 {
                m.insert_range(i * 10..=i * 10 + 4, U63::new(i).unwrap()).unwrap();
            }
            panic!("user code fails halfway");
        })
    }));
    assert!(res.is_err());
    tree.validate().unwrap();
    assert_eq!(tree.len(), 200);
    // Locked writes in fresh nodes: a read cursor keeps its snapshot.
    let g = tree.pin();
    let cur = tree.cursor(12, &g);
    tree.lock().store_range(10..=19, U63::new(7).unwrap()).unwrap();
    assert_eq!(cur.range(), 10..=14);
    assert_eq!(cur.get().map(U63::get), Some(1));
    assert_eq!(tree.load(12, &g).map(U63::get), Some(7));
}

/// `Clone`, `FromIterator` and `Extend` behave like `MapleTree`'s.
#[test]
fn std_traits() {
    let mut t: ConcurrentMapleTree<U63> = (0..50u64).map(|i| (i * 10..=i * 10 + 4, U63::new(i).unwrap())).collect();
    t.extend([(1000..=1009, U63::new(100).unwrap()), (3..=12, U63::new(101).unwrap())]);
    let c = t.clone();
    t.lock().store_range(0..=2000, U63::new(0).unwrap()).unwrap();
    c.validate().unwrap();
    let g = c.pin();
    let got: Vec<_> = c.iter(&g).map(|(r, v)| (r, v.get())).take(3).collect();
    assert_eq!(got, [(0..=2, 0), (3..=12, 101), (13..=14, 1)]);
    assert_eq!(c.len(), 52);
    assert_eq!(c.load(1005, &g).map(U63::get), Some(100));
    assert_eq!(t.len(), 1, "the clone is independent");
}

/// The concurrent tree's iterator folds (what `sum`, `for_each` and
/// `count` run on) leaf by leaf from the leaves' arrays: the same entries
/// as stepping with `next`, from any start, after any number of steps, up
/// to any end. (The plain tree's iterators: `smoke.rs`.)
#[test]
fn concurrent_fold_matches_stepping() {
    let n: u64 = if cfg!(miri) { 40 } else { 300 };
    let t: ConcurrentMapleTree<U63> = ConcurrentMapleTree::new();
    for i in (0..n).filter(|i| i % 3 != 0) {
        let last = i * 10 + if i % 2 == 0 { 9 } else { 5 };
        t.lock().insert_range(i * 10..=last, U63::new(i).unwrap()).unwrap();
    }
    let ends = [0, 1, 15, 16, 99, n * 5 + 3, n * 10 - 1, n * 10 + 7, u64::MAX];
    let g = t.pin();
    for &a in &ends {
        for &b in ends.iter().filter(|&&b| b >= a) {
            for k in [0, 2, 17] {
                let want: Vec<_> = t.range(a..=b, &g).map(|(r, x)| (*r.start(), *r.end(), x.get())).collect();
                let mut it = t.range(a..=b, &g);
                let got: Vec<_> = it.by_ref().take(k).map(|(r, x)| (*r.start(), *r.end(), x.get())).collect();
                let got = it.fold(got, |mut v, (r, x)| {
                    v.push((*r.start(), *r.end(), x.get()));
                    v
                });
                assert_eq!(got, want, "[{a}, {b}], {k} steps");
            }
        }
    }
    drop(g);
    drop(t);
    collect_garbage();
}

/// The concurrent tree's iterator from both ends, no writer: the same
/// entries as the plain tree's, for every mix of `next` and `next_back`
/// (random, from any window), and the entry at or before every index.
#[test]
fn concurrent_iter_from_both_ends_matches_the_plain_tree() {
    let n: u64 = if cfg!(miri) { 60 } else { 600 };
    let mut rng = SmallRng::seed_from_u64(5);
    let t: ConcurrentMapleTree<U63> = ConcurrentMapleTree::new();
    let mut plain: MapleTree<U63> = MapleTree::new();
    for _ in 0..n {
        let f = rng.gen_range(0..n * 10);
        let len = rng.gen_range(0..12);
        let v = U63::new(f).unwrap();
        t.lock().store_range(f..=f + len, v).unwrap();
        plain.store_range(f..=f + len, v).unwrap();
    }
    let g = t.pin();
    let rounds = if cfg!(miri) { 20 } else { 400 };
    for round in 0..rounds {
        let a = rng.gen_range(0..n * 11);
        let b = if round % 5 == 0 { u64::MAX } else { a + rng.gen_range(0..n * 4) };
        let back_pct = rng.gen_range(0..=100u64);
        let (mut ours, mut theirs) = (t.range(a..=b, &g), plain.range(a..=b));
        // Now and then the rest by the back's own fold (`rfold`), after a
        // few steps.
        let fold_at = (round % 3 == 0).then(|| rng.gen_range(0..12usize));
        for step in 0.. {
            if fold_at == Some(step) {
                let rfold = |acc: Vec<_>, (r, v): (RangeInclusive<u64>, U63)| {
                    let mut acc = acc;
                    acc.push((r, v.get()));
                    acc
                };
                let x = ours.rev().fold(Vec::new(), rfold);
                // (The plain tree's rest by `next_back`, not by its own
                // `rfold`, which shares the code under test.)
                let y = core::iter::from_fn(|| theirs.next_back()).fold(Vec::new(), rfold);
                assert_eq!(x, y, "[{a}, {b}], rfold after {step} steps");
                break;
            }
            let back = rng.gen_range(0..100) < back_pct;
            let (x, y) = if back { (ours.next_back(), theirs.next_back()) } else { (ours.next(), theirs.next()) };
            let (x, y) = (x.map(|(r, v)| (r, v.get())), y.map(|(r, v)| (r, v.get())));
            assert_eq!(x, y, "[{a}, {b}], back {back}");
            if x.is_none() {
                // Both ends are done for good.
                assert!(ours.next().is_none() && ours.next_back().is_none());
                break;
            }
        }
    }
    for k in (0..n * 11).step_by(if cfg!(miri) { 37 } else { 3 }) {
        let x = t.range(..=k, &g).next_back().map(|(r, v)| (r, v.get()));
        let y = plain.range(..=k).next_back().map(|(r, v)| (r, v.get()));
        assert_eq!(x, y, "the entry at or before {k}");
    }
    drop(g);
    drop(t);
    collect_garbage();
}

/// Both ends of the concurrent tree's iterator while a writer replaces
/// the leaves they walk (splits, merges, spanning stores around stable
/// entries): every stable entry in the window comes exactly once, each
/// end in order (the front ascending, the back descending, the front
/// before the back), no start twice, and every value belongs to its range.
/// The writer runs until the readers have made their scans, over a key
/// space small enough that it keeps replacing the leaves being scanned.
#[test]
fn concurrent_iter_both_ends_under_a_writer() {
    let (blocks, scans_each, n_readers) = if cfg!(miri) { (30, 6, 1) } else { (2_000, 100_000, 2) };
    let live = Arc::new(AtomicI64::new(0));
    let tree: Arc<ConcurrentMapleTree<Box<Val>>> = Arc::new(ConcurrentMapleTree::new());
    // Range `[i * 20, i * 20 + 9]` is stable (never written again) when
    // `i % 3 == 0`; the others, and the gaps `[i * 20 + 10, i * 20 + 19]`,
    // are the writer's.
    let stable = |i: u64| i % 3 == 0;
    {
        let mut w = tree.lock();
        for i in 0..blocks {
            w.insert_range(i * 20..=i * 20 + 9, Val::new(i * 20, i * 20 + 9, &live)).unwrap();
        }
    }
    let readers: Vec<_> = (0..n_readers)
        .map(|r| {
            let tree = Arc::clone(&tree);
            thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(100 + r as u64);
                for _ in 0..scans_each {
                    let g = tree.pin();
                    let a = rng.gen_range(0..blocks * 20);
                    let b = a + rng.gen_range(0..if r % 2 == 0 { 200 } else { 2_000 });
                    let back_pct = rng.gen_range(0..=100u64);
                    let (mut front, mut back) = (Vec::new(), Vec::new());
                    let mut it = tree.range(a..=b, &g);
                    let inside = |range: &RangeInclusive<u64>, v: &Val| {
                        assert!(
                            v.first <= *range.start() && *range.end() <= v.last,
                            "a value outside its range: {range:?} holds [{}, {}]",
                            v.first,
                            v.last
                        );
                    };
                    // Half the scans end with the back's own fold
                    // (`rfold`) after a few steps.
                    let fold_at = rng.gen_bool(0.5).then(|| rng.gen_range(0..16usize));
                    let mut steps = 0;
                    while fold_at != Some(steps) {
                        let from_back = rng.gen_range(0..100) < back_pct;
                        let got = if from_back { it.next_back() } else { it.next() };
                        let Some((range, v)) = got else { break };
                        inside(&range, v);
                        if from_back { &mut back } else { &mut front }.push(range);
                        steps += 1;
                    }
                    if fold_at == Some(steps) {
                        it.rev().for_each(|(range, v)| {
                            inside(&range, v);
                            back.push(range);
                        });
                    } else {
                        assert!(it.next().is_none() && it.next_back().is_none(), "an end came back to life");
                    }
                    // Ranges, not just starts: no index comes twice.
                    let fw = front.windows(2).find(|w| w[0].end() >= w[1].start());
                    assert!(fw.is_none(), "the front out of order: {fw:?}");
                    let bw = back.windows(2).find(|w| w[0].start() <= w[1].end());
                    assert!(bw.is_none(), "the back out of order: {bw:?}");
                    if let (Some(f), Some(b)) = (front.last(), back.last()) {
                        assert!(f.end() < b.start(), "the ends crossed: front at {f:?}, back at {b:?}");
                    }
                    // Every stable entry overlapping the window, once.
                    for i in (0..blocks).filter(|&i| stable(i) && i * 20 + 9 >= a && i * 20 <= b) {
                        let seen = front.iter().chain(&back).filter(|x| *x.start() == i * 20).count();
                        assert_eq!(seen, 1, "stable entry {i} seen {seen} times in [{a}, {b}] ({back_pct} % back)");
                    }
                }
            })
        })
        .collect();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut writes = 0u64;
    // Until every reader is finished (a panicked one included); under
    // Miri, whose threads run slowly, 200 writes at most.
    let most = if cfg!(miri) { 200 } else { u64::MAX };
    while !readers.iter().all(|r| r.is_finished()) && writes < most || writes < 4 {
        writes += 1;
        let i = rng.gen_range(0..blocks);
        let mut w = tree.lock();
        match rng.gen_range(0..8) {
            // Fill or empty the gap after block `i` (a split or a merge of
            // the leaf holding it, now and then), here whole.
            6 | 7 => {
                let _ = w.insert_range(i * 20 + 10..=i * 20 + 19, Val::new(i * 20 + 10, i * 20 + 19, &live));
            }
            0 => {
                let f = i * 20 + 10 + rng.gen_range(0..5);
                let l = f + rng.gen_range(0..5);
                let _ = w.insert_range(f..=l, Val::new(f, l, &live));
            }
            1 => w.remove_range(i * 20 + 10..=i * 20 + 19).unwrap(),
            // Rewrite or erase a volatile block.
            2 | 3 if !stable(i) => {
                w.store_range(i * 20..=i * 20 + 9, Val::new(i * 20, i * 20 + 9, &live)).unwrap();
            }
            4 if !stable(i) => {
                w.erase(i * 20).unwrap();
            }
            // A spanning store over the volatile blocks and gaps up to the
            // next stable block.
            5 if !stable(i) => {
                let end = (i + 1..).find(|&j| stable(j)).unwrap() * 20 - 1;
                w.store_range(i * 20..=end, Val::new(i * 20, end, &live)).unwrap();
            }
            _ => {}
        }
    }
    for r in readers {
        r.join().unwrap();
    }
    tree.validate().unwrap();
    let tree = Arc::into_inner(tree).expect("readers are gone");
    drop(tree);
    assert_eq!(settle(&live, 0, || ()), 0, "values leaked or dropped twice");
}

/// A write cursor holds its guard, and a read cursor or iterator its
/// read guard, only until its last use: the guard is used again, or
/// dropped, with them still in scope. (This test is whether it compiles,
/// as the plain tree's.)
#[test]
fn cursors_hold_their_guard_until_their_last_use_only() {
    let t: ConcurrentMapleTree<U63> = (0..40u64).map(|i| (i * 10..=i * 10 + 4, U63::new(i).unwrap())).collect();
    let mut w = t.lock();
    let mut c = w.cursor(0);
    c.replace(U63::new(7).unwrap()).unwrap();
    w.reclaim();
    w.store_range(20..=24, U63::new(9).unwrap()).unwrap();
    drop(w);
    let g = t.pin();
    let r = t.cursor(15, &g);
    assert_eq!(r.range(), 15..=19);
    let mut it = t.iter(&g);
    assert_eq!(it.next().map(|(_, v)| v.get()), Some(7));
    drop(g);
    assert_eq!(t.load_with(22, |v| v.map(U63::get)), Some(9));
}
