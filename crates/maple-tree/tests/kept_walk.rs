//! A tree keeps the walk of its last write and starts the next write from
//! it when that write starts in the same leaf (`src/kept_walk.rs`). These
//! runs interleave bursts of the tree's own writes, clustered so that most
//! of them start where the last one left off, with every other way a tree
//! can change in between: cursor writes, clearing, `extend`, fresh-node
//! writes, a spell as a concurrent tree (writes under its lock and through
//! `with_mut`), a duplicate written to on the side, and the range-entry
//! API. The tree is validated and checked against the model after every
//! step: a kept walk used after anything else changed the tree would write
//! into the wrong leaf, or into a freed node.

mod common;

use common::*;
use maple_tree::{FreshNodes, MapleTree, RangeEntry, Writes, U63};
use rand::{rngs::SmallRng, Rng, SeedableRng};

/// The span of the writes in a tall tree (three levels and more) and in
/// a short one (it rises to three levels and falls to one and back).
const SPAN: u64 = 40_000;
const SHORT_SPAN: u64 = 900;

/// The trees the runs write to: how wide their writes spread, and the
/// height a tree is filled to before the writes start.
#[derive(Clone, Copy)]
struct Shape {
    span: u64,
    height: usize,
}

const TALL: Shape = Shape { span: SPAN, height: 3 };
const SHORT: Shape = Shape { span: SHORT_SPAN, height: 2 };

std::thread_local! {
    /// How many steps of this thread's runs left the tree at each height.
    static HEIGHTS: core::cell::RefCell<[usize; 8]> = const { core::cell::RefCell::new([0; 8]) };
}

/// Validates `t` and compares the model's view of `f` and `l` with the
/// tree's (counting its height in [`HEIGHTS`]).
fn check_step<W: Writes>(t: &MapleTree<U63, u64, W>, m: &Model, f: u64, l: u64, what: &str) {
    HEIGHTS.with(|h| h.borrow_mut()[t.height().min(7)] += 1);
    if let Err(e) = t.validate() {
        panic!("{what}: {e}");
    }
    for i in [f, l, f.saturating_sub(1), l + 1] {
        let want = m.get(i).map(|(_, _, x)| x);
        assert_eq!(t.load(i).map(U63::get), want, "{what}: load({i})");
    }
}

/// Fills an empty tree with ranges in ascending order until it is
/// `shape.height` levels tall (and, for a tall tree outside Miri, holds
/// 400 ranges).
fn fill(t: &mut MapleTree<U63>, m: &mut Model, rng: &mut SmallRng, shape: Shape) {
    let mut at = rng.gen_range(0..100);
    let least = if cfg!(miri) || shape.height < 3 { 0 } else { 400 };
    while t.height() < shape.height || t.len() < least {
        let l = at + rng.gen_range(0..6);
        t.insert_range(at..=l, v(at)).unwrap();
        m.store(at, l, at);
        at = l + 2 + rng.gen_range(0..8);
    }
}

/// `steps` writes through the tree's own methods near a point that drifts
/// upwards (wrapping within `span`), checking after each.
fn burst<W: Writes>(
    t: &mut MapleTree<U63, u64, W>,
    m: &mut Model,
    rng: &mut SmallRng,
    steps: usize,
    span: u64,
    what: &str,
) {
    let mut locus = rng.gen_range(0..span);
    for step in 0..steps {
        let what = format!("{what}, step {step}");
        let f = (locus + rng.gen_range(0..48)).min(span);
        let l = f + rng.gen_range(0..8);
        let x = rng.gen_range(0..1 << 40);
        match rng.gen_range(0..5) {
            0 | 1 => {
                let ok = t.insert_range(f..=l, v(x)).is_ok();
                assert_eq!(ok, m.is_free(f, l), "{what}: insert {f}..={l}");
                if ok {
                    m.store(f, l, x);
                }
            }
            2 => {
                t.store_range(f..=l, v(x)).unwrap();
                m.store(f, l, x);
            }
            3 => {
                t.remove_range(f..=l).unwrap();
                m.clear(f, l);
            }
            _ => {
                let got = t.erase(f).map(U63::get);
                assert_eq!(got, m.erase(f).map(|(_, _, x)| x), "{what}: erase {f}");
            }
        }
        check_step(t, m, f, l, &what);
        locus = (locus + rng.gen_range(0..24)) % span;
    }
}

fn run(gaps: bool, seed: u64, shape: Shape) {
    let span = shape.span;
    let mut rng = SmallRng::seed_from_u64(seed);
    let new = || if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
    let mut t: MapleTree<U63> = new();
    let mut m = Model::default();
    fill(&mut t, &mut m, &mut rng, shape);
    let (rounds, steps) = if cfg!(miri) { (6, 3) } else { (120, 40) };
    for round in 0..rounds {
        let what = format!("gaps {gaps}, seed {seed}, span {span}, round {round}");
        if shape.height < 3 && round % 4 == 3 {
            // A short tree cut down to a few ranges (a root leaf, often),
            // for the next bursts to grow again.
            let (f, l) = (span / 16, span - span / 16);
            t.remove_range(f..=l).unwrap();
            m.clear(f, l);
            check_step(&t, &m, f, l, &format!("{what}, cut"));
        }
        burst(&mut t, &mut m, &mut rng, steps, span, &what);
        // Then one other way of changing the tree, and another burst,
        // which must not trust the walk the first one kept.
        // (Under Miri, whose strict-provenance run leaves the concurrent
        // tree to its own tests, every change but that one, in turn.)
        let other = if cfg!(miri) { [0, 1, 2, 3, 5, 6][round % 6] } else { rng.gen_range(0..7) };
        let what = format!("{what}, change {other}");
        match other {
            0 => {
                // Cursor writes, in the leaf the tree last wrote to or not.
                let at = rng.gen_range(0..span);
                let mut c = t.cursor_mut(at);
                for _ in 0..rng.gen_range(1..6) {
                    let f = at + rng.gen_range(0..64);
                    let l = f + rng.gen_range(0..8);
                    if rng.gen_bool(0.5) {
                        c.store_range(f..=l, v(f)).unwrap();
                        m.store(f, l, f);
                    } else {
                        c.remove_range(f..=l).unwrap();
                        m.clear(f, l);
                    }
                }
            }
            1 => {
                t.clear();
                m = Model::default();
                fill(&mut t, &mut m, &mut rng, shape);
            }
            2 => {
                // Rebuilt by `extend` (which keeps a walk of its own).
                let all = entries(&t);
                t.clear();
                t.extend(all.iter().map(|&(f, l, x)| (f..=l, v(x))));
            }
            3 => {
                let mut fresh = core::mem::take(&mut t).into_writes::<FreshNodes>();
                burst(&mut fresh, &mut m, &mut rng, steps / 4, span, &format!("{what}, fresh nodes"));
                t = fresh.into_writes();
            }
            4 => {
                #[cfg(feature = "std")]
                {
                    let c = maple_tree::ConcurrentMapleTree::from(t);
                    c.lock().store_range(100..=120, v(7)).unwrap();
                    m.store(100, 120, 7);
                    let mut c = c;
                    for spell in 0..3 {
                        c.with_mut(|t| {
                            burst(t, &mut m, &mut rng, steps / 4, span, &format!("{what}, with_mut {spell}"))
                        });
                        let f = rng.gen_range(0..span);
                        c.lock().store_range(f..=f + 30, v(f)).unwrap();
                        m.store(f, f + 30, f);
                        let g = rng.gen_range(0..span);
                        c.lock().remove_range(g..=g + 50).unwrap();
                        m.clear(g, g + 50);
                    }
                    t = c.into_inner();
                }
            }
            5 => {
                // A duplicate starts with no kept walk; writing to it
                // leaves the original's untouched, and the other way round.
                let mut d = t.try_dup().unwrap();
                let mut dm = m.clone();
                burst(&mut d, &mut dm, &mut rng, steps / 2, span, &format!("{what}, the copy"));
                burst(&mut t, &mut m, &mut rng, steps / 2, span, &format!("{what}, the original"));
                check(&d, &dm, &format!("{what}, the copy"));
            }
            _ => {
                let f = rng.gen_range(0..span);
                let l = f + rng.gen_range(0..4);
                match t.entry(f..=l).unwrap() {
                    RangeEntry::Vacant(e) => {
                        e.insert(v(l)).unwrap();
                        m.store(f, l, l);
                    }
                    RangeEntry::Occupied(o) => {
                        let (s, _, x) = m.erase(*o.range().start()).unwrap();
                        assert_eq!(o.remove().unwrap().map(U63::get), Some(x), "{what}: entry at {s}");
                    }
                }
            }
        }
        check(&t, &m, &what);
    }
}

#[test]
fn tree_writes_interleaved_with_every_other_change() {
    if cfg!(miri) {
        // Gap tracking exercises the most code per write.
        run(true, 0, TALL);
        return;
    }
    for seed in 0..4 {
        run(false, seed, TALL);
        run(true, seed, TALL);
    }
}

/// The same in a tree of about two levels (such trees keep
/// their walk too), whose writes make it rise to three levels and fall to
/// one and back, so that a walk kept at one height meets the tree at
/// another.
#[test]
fn short_tree_writes_interleaved_with_every_other_change() {
    if cfg!(miri) {
        run(true, 1, SHORT);
        return;
    }
    for seed in 0..4 {
        run(false, seed, SHORT);
        run(true, seed, SHORT);
    }
    let heights = HEIGHTS.with(|h| *h.borrow());
    eprintln!("{heights:?}");
    assert!(heights[1] > 0 && heights[2] > 0 && heights[3] > 0, "steps ended at heights {heights:?}");
}
