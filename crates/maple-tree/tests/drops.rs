//! Every stored value is dropped exactly once, and no node outlives its tree.

use std::{cell::Cell, ops::RangeInclusive};

use maple_tree::{fault, FreshNodes, MapleTree, Writes};
use rand::{rngs::SmallRng, Rng, SeedableRng};

thread_local! {
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

#[derive(Debug)]
struct Tracked(u64);

impl Tracked {
    fn new(x: u64) -> Box<Tracked> {
        LIVE.with(|l| l.set(l.get() + 1));
        Box::new(Tracked(x))
    }
}

impl Clone for Tracked {
    fn clone(&self) -> Self {
        LIVE.with(|l| l.set(l.get() + 1));
        Tracked(self.0)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        LIVE.with(|l| l.set(l.get() - 1));
    }
}

fn live() -> i64 {
    LIVE.with(|l| l.get())
}

fn random_ops<W: Writes>(t: &mut MapleTree<Box<Tracked>, u64, W>, rng: &mut SmallRng, n: usize) {
    for i in 0..n as u64 {
        let f = rng.gen_range(0..5000u64);
        let l = f + rng.gen_range(0..80u64);
        match rng.gen_range(0..6) {
            0 | 1 => {
                let _ = t.insert_range(f..=l, Tracked::new(i));
            }
            2 => t.store_range(f..=l, Tracked::new(i)).unwrap(),
            3 => t.remove_range(f..=l).unwrap(),
            4 => drop(t.erase(f)),
            _ => {
                let mut c = t.cursor_mut(f);
                let _ = c.replace(Tracked::new(i));
            }
        }
    }
    t.validate().unwrap();
}

#[test]
fn values_dropped_exactly_once() {
    let nodes = fault::live();
    let mut rng = SmallRng::seed_from_u64(7);
    for gaps in [false, true] {
        drops_once(if gaps { MapleTree::with_gaps() } else { MapleTree::new() }, &mut rng);
        drops_once(MapleTree::<_, u64, FreshNodes>::fresh(gaps), &mut rng);
    }
    let mut t = MapleTree::new();
    random_ops(&mut t, &mut rng, if cfg!(miri) { 100 } else { 2000 });
    t.clear();
    assert_eq!((live(), t.len(), t.height()), (0, 0, 0));
    let collected: MapleTree<Box<Tracked>> = (0..100u64).map(|i| (i * 4..=i * 4 + 9, Tracked::new(i))).collect();
    collected.validate().unwrap();
    drop(collected);
    assert_eq!(live(), 0);
    assert_eq!(fault::live(), nodes, "nodes leaked");
}

fn drops_once<W: Writes>(mut t: MapleTree<Box<Tracked>, u64, W>, rng: &mut SmallRng) {
    random_ops(&mut t, rng, if cfg!(miri) { 60 } else { 20_000 });
    assert_eq!(live(), t.len() as i64, "live values != entries");
    // Clone shares nothing.
    let c = t.clone();
    c.validate().unwrap();
    assert_eq!(live(), 2 * t.len() as i64);
    drop(c);
    // Taking a few out by value, then dropping the rest with the iterator.
    let n = t.len();
    let mut it = t.into_iter();
    let firsts: Vec<(RangeInclusive<u64>, Box<Tracked>)> = it.by_ref().take(3).collect();
    assert_eq!(live(), n as i64);
    drop(it);
    assert_eq!(live(), firsts.len() as i64);
    drop(firsts);
    assert_eq!(live(), 0);
}
