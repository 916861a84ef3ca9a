//! Readers anywhere in the key space while a writer uses every kind of
//! write: every reader guarantee of the concurrent tree, checked after
//! every step.
//!
//! The writer works flat out on keys drawn from four distributions over
//! the whole `u64` space (near 0, near `u64::MAX`, clustered around a few
//! random centres, anywhere), with every write the concurrent tree has:
//! `store_range`, `insert_range`, `erase`, `remove_range`, `alloc_range`,
//! `alloc_range_rev`, `alloc_cyclic`, `reserve_range`, a write cursor's
//! `replace`, `erase` and range writes, `try_dup` and `reclaim`. It never
//! touches a handful of one-index *sentinel* entries spread over the key
//! space, so those are present the whole time.
//!
//! Each reader pass pins once and then either puts a cursor at a random
//! index and takes 1–63 random steps (`next_range`, `prev_range`, `next`,
//! `prev`, `find`, now and then a `seek`), or iterates from a random index
//! (forward, backward, or from both ends), or looks up random indices.
//! After every cursor step it re-reads `range()` and `get()`. Checked:
//!
//! * `range()` is the range the last step returned (or, after a step that
//!   found nothing, the range the cursor stood on);
//! * `get()` and every value handed out belong to a range containing the
//!   range they are seen in, and are alive;
//! * `next_range` starts right after the range left and `prev_range` ends
//!   right before it; `next_range` finds nothing only from a range ending
//!   at `u64::MAX`, `prev_range` only from one starting at 0;
//! * `next`/`next()` of an iterator move strictly forward (`prev` and
//!   `next_back` strictly backward), and no step passes over a sentinel;
//!   a range holding a sentinel's index is exactly the sentinel's entry;
//! * at the end of the pass, every value seen during it is still alive.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering},
        Arc,
    },
    thread,
};

use maple_tree::{ConcurrentMapleTree, WriteGuard};
use rand::{rngs::SmallRng, Rng, SeedableRng};

#[path = "common/tracked.rs"]
mod tracked;

use tracked::{Report, Val, MAGIC};

/// One-index entries the writer never touches, well away from the
/// writer's near-0 and near-`u64::MAX` regions (which are 2^16 wide).
const SENTINELS: [u64; 8] = [
    1 << 20,
    1 << 32,
    0x1234_5678_9abc,
    1 << 48,
    0x7fff_ffff_ffff_0000,
    1 << 63,
    0xdead_beef_0000_0000,
    u64::MAX - (1 << 20),
];

/// Whether `[a, b]` leaves every sentinel alone.
fn clear_of_sentinels(a: u64, b: u64) -> bool {
    !SENTINELS.iter().any(|&s| a <= s && s <= b)
}

/// The first sentinel strictly between `a` and `b` (`a < b`), if any.
fn sentinel_between(a: u64, b: u64) -> Option<u64> {
    SENTINELS.iter().copied().find(|&s| a < s && s < b)
}

struct Sizes {
    writes: usize,
    readers: usize,
    max_len: usize,
}

fn sizes() -> Sizes {
    if cfg!(miri) {
        Sizes { writes: 150, readers: 1, max_len: 40 }
    } else {
        Sizes { writes: 200_000, readers: 2, max_len: 3000 }
    }
}

/// Index distributions over the whole key space.
struct Keys {
    centres: [u64; 4],
}

impl Keys {
    fn new(rng: &mut SmallRng) -> Keys {
        Keys { centres: [(); 4].map(|_| rng.gen()) }
    }

    fn index(&self, rng: &mut SmallRng) -> u64 {
        match rng.gen_range(0..4) {
            0 => rng.gen_range(0..1 << 16),
            1 => u64::MAX - rng.gen_range(0..1 << 16),
            2 => self.centres[rng.gen_range(0..4)].wrapping_add(rng.gen_range(0..1 << 14)),
            _ => rng.gen(),
        }
    }

    /// A range starting at a random index: mostly short, sometimes long,
    /// now and then running to `u64::MAX`.
    fn range(&self, rng: &mut SmallRng) -> (u64, u64) {
        let a = self.index(rng);
        let len = match rng.gen_range(0..10) {
            0 => return (a, u64::MAX),
            1 => rng.gen_range(0..1u64 << 40),
            2 | 3 => rng.gen_range(0..4096),
            _ => rng.gen_range(0..48),
        };
        (a, a.saturating_add(len))
    }
}

type R = std::ops::RangeInclusive<u64>;

/// Checks a value seen for range `r`; returns false (and reports) if wrong.
fn value_ok<'v>(v: Option<&'v Val>, r: &R, seen: &mut Vec<&'v Val>, report: &Report, what: &str) -> bool {
    let Some(v) = v else { return true };
    if v.magic != MAGIC {
        report.fail(format!("{what}: value seen at {r:#x?} was already dropped"));
        return false;
    }
    if !(v.first <= *r.start() && *r.end() <= v.last) {
        report.fail(format!("{what}: value for {:#x}..={:#x} seen at {r:#x?}", v.first, v.last));
        return false;
    }
    seen.push(v);
    true
}

/// A range that holds a sentinel's index must be the sentinel's entry.
fn sentinel_ok(r: &R, v: Option<&Val>, report: &Report, what: &str) -> bool {
    if let Some(s) = SENTINELS.iter().find(|&&s| r.contains(&s)) {
        let exact = *r == (*s..=*s) && v.is_some_and(|v| v.sentinel);
        if !exact {
            report.fail(format!("{what}: range {r:#x?} holds sentinel {s:#x} but is not its entry"));
            return false;
        }
    }
    true
}

/// The step kinds a cursor pass takes.
#[derive(Clone, Copy, Debug)]
enum Step {
    NextRange,
    PrevRange,
    Next,
    Prev,
    Find,
    Seek,
}

fn dawdle(rng: &mut SmallRng) {
    for _ in 0..rng.gen_range(0..if cfg!(miri) { 2 } else { 64 }) {
        std::hint::spin_loop();
    }
}

/// One cursor pass: a random start, 1–63 random steps, every guarantee
/// re-checked after each.
fn cursor_pass(tree: &ConcurrentMapleTree<Box<Val>>, keys: &Keys, rng: &mut SmallRng, report: &Report) {
    let g = tree.pin();
    let mut seen: Vec<&Val> = Vec::new();
    let start = keys.index(rng);
    let mut c = tree.cursor(start, &g);
    let mut cur = c.range();
    if !cur.contains(&start) {
        report.fail(format!("cursor at {start:#x} stands on {cur:#x?}"));
        return;
    }
    if !value_ok(c.get(), &cur, &mut seen, report, "start") || !sentinel_ok(&cur, c.get(), report, "start") {
        return;
    }
    let steps = rng.gen_range(1..64);
    for _ in 0..steps {
        dawdle(rng);
        let step = match rng.gen_range(0..20) {
            0..=4 => Step::NextRange,
            5..=9 => Step::PrevRange,
            10..=13 => Step::Next,
            14..=17 => Step::Prev,
            18 => Step::Find,
            _ => Step::Seek,
        };
        let what = format!("{step:?} from {cur:#x?}");
        // The step: the range it says it moved to (None: unmoved), and the
        // value it handed out with it.
        let moved: Option<(R, Option<&Val>)> = match step {
            Step::NextRange => {
                let got = c.next_range();
                match &got {
                    None if *cur.end() != u64::MAX => {
                        report.fail(format!("{what}: found nothing before the end of the key space"));
                        return;
                    }
                    Some((r, _)) if *cur.end() == u64::MAX || *r.start() != cur.end() + 1 => {
                        report.fail(format!("{what}: gave {r:#x?}, not the range right after"));
                        return;
                    }
                    _ => {}
                }
                got
            }
            Step::PrevRange => {
                let got = c.prev_range();
                match &got {
                    None if *cur.start() != 0 => {
                        report.fail(format!("{what}: found nothing after index 0"));
                        return;
                    }
                    Some((r, _)) if *cur.start() == 0 || *r.end() != cur.start() - 1 => {
                        report.fail(format!("{what}: gave {r:#x?}, not the range right before"));
                        return;
                    }
                    _ => {}
                }
                got
            }
            Step::Next => {
                let got = c.next().map(|(r, v)| (r, Some(v)));
                match &got {
                    Some((r, _)) if r.start() <= cur.end() => {
                        report.fail(format!("{what}: gave {r:#x?}, not after the range left"));
                        return;
                    }
                    Some((r, _)) => {
                        if let Some(s) = sentinel_between(*cur.end(), *r.start()) {
                            report.fail(format!("{what}: gave {r:#x?}, passing over sentinel {s:#x}"));
                            return;
                        }
                    }
                    None => {
                        if let Some(s) = SENTINELS.iter().find(|&&s| s > *cur.end()) {
                            report.fail(format!("{what}: found nothing, but sentinel {s:#x} lies ahead"));
                            return;
                        }
                    }
                }
                got
            }
            Step::Prev => {
                let got = c.prev().map(|(r, v)| (r, Some(v)));
                match &got {
                    Some((r, _)) if r.end() >= cur.start() => {
                        report.fail(format!("{what}: gave {r:#x?}, not before the range left"));
                        return;
                    }
                    Some((r, _)) => {
                        if let Some(s) = sentinel_between(*r.end(), *cur.start()) {
                            report.fail(format!("{what}: gave {r:#x?}, passing over sentinel {s:#x}"));
                            return;
                        }
                    }
                    None => {
                        if let Some(s) = SENTINELS.iter().find(|&&s| s < *cur.start()) {
                            report.fail(format!("{what}: found nothing, but sentinel {s:#x} lies behind"));
                            return;
                        }
                    }
                }
                got
            }
            Step::Find => {
                let limit = cur.start().saturating_add(rng.gen_range(0..1 << 20));
                let got = c.find(limit).map(|(r, v)| (r, Some(v)));
                match &got {
                    Some((r, _)) => {
                        // The current range itself, or an entry after it
                        // starting at or before `limit`.
                        if !(r == &cur || (r.start() > cur.end() && *r.start() <= limit)) {
                            report.fail(format!("{what}: find({limit:#x}) gave {r:#x?}"));
                            return;
                        }
                        if let Some(s) = sentinel_between(*cur.end(), *r.start()).filter(|_| r != &cur) {
                            report.fail(format!("{what}: find gave {r:#x?}, passing over sentinel {s:#x}"));
                            return;
                        }
                    }
                    None => {
                        if let Some(s) = SENTINELS.iter().find(|&&s| cur.contains(&s) || (s > *cur.end() && s <= limit))
                        {
                            report.fail(format!(
                                "{what}: find({limit:#x}) found nothing, but sentinel {s:#x} lies there"
                            ));
                            return;
                        }
                    }
                }
                got
            }
            Step::Seek => {
                let to = keys.index(rng);
                let v = c.seek(to);
                let r = c.range();
                if !r.contains(&to) {
                    report.fail(format!("{what}: seek({to:#x}) stands on {r:#x?}"));
                    return;
                }
                Some((r, v))
            }
        };
        let want = match &moved {
            Some((r, v)) => {
                if !value_ok(*v, r, &mut seen, report, &what) || !sentinel_ok(r, *v, report, &what) {
                    return;
                }
                r.clone()
            }
            None => cur.clone(),
        };
        // Re-read where the cursor stands, now and after a pause.
        for _ in 0..2 {
            let again = c.range();
            if again != want {
                report.fail(format!("{what}: the step gave {want:#x?} but range() says {again:#x?}"));
                return;
            }
            let v = c.get();
            if !value_ok(v, &want, &mut seen, report, &format!("{what}, get()"))
                || !sentinel_ok(&want, v, report, &what)
            {
                return;
            }
            dawdle(rng);
        }
        cur = want;
    }
    recheck(&seen, report);
}

/// Everything a pass saw is still alive at its end (its guard still held).
fn recheck(seen: &[&Val], report: &Report) {
    if let Some(v) = seen.iter().find(|v| v.magic != MAGIC) {
        report.fail(format!("a value seen during the pass, for {}..={}, died before the pass ended", v.first, v.last));
    }
}

/// One iterator pass: forward, backward or from both ends, from a random
/// index, for a few dozen entries.
fn iter_pass(tree: &ConcurrentMapleTree<Box<Val>>, keys: &Keys, rng: &mut SmallRng, report: &Report) {
    let g = tree.pin();
    let mut seen: Vec<&Val> = Vec::new();
    let a = keys.index(rng);
    let shift = rng.gen_range(0..64);
    let b = a.saturating_add(rng.gen_range(0..u64::MAX >> shift));
    let mut it = tree.range(a..=b, &g);
    let (mut front, mut back): (Option<R>, Option<R>) = (None, None);
    let mode = rng.gen_range(0..3);
    for i in 0..rng.gen_range(1..64) {
        dawdle(rng);
        let from_front = match mode {
            0 => true,
            1 => false,
            _ => i % 2 == 0,
        };
        let got = if from_front { it.next() } else { it.next_back() };
        let Some((r, v)) = got else { break };
        let what = format!("iterating {a:#x}..={b:#x} from the {}", if from_front { "front" } else { "back" });
        if r.end() < &a || r.start() > &b {
            report.fail(format!("{what}: {r:#x?} lies outside the range"));
            return;
        }
        if !value_ok(Some(v), &r, &mut seen, report, &what) || !sentinel_ok(&r, Some(v), report, &what) {
            return;
        }
        let last = if from_front { &mut front } else { &mut back };
        if last.is_none() {
            // Nothing passed over between the end of the range asked for
            // and the first entry from that end.
            let skipped = if from_front {
                SENTINELS.iter().find(|&&s| a <= s && s < *r.start())
            } else {
                SENTINELS.iter().find(|&&s| *r.end() < s && s <= b)
            };
            if let Some(s) = skipped {
                report.fail(format!("{what}: the first entry {r:#x?} passes over sentinel {s:#x}"));
                return;
            }
        }
        if let Some(l) = last {
            let (lo, hi) = if from_front { (l.clone(), r.clone()) } else { (r.clone(), l.clone()) };
            if lo.end() >= hi.start() {
                report.fail(format!("{what}: {r:#x?} after {l:#x?}, out of order"));
                return;
            }
            if let Some(s) = sentinel_between(*lo.end(), *hi.start()) {
                report.fail(format!("{what}: {r:#x?} after {l:#x?} passes over sentinel {s:#x}"));
                return;
            }
        }
        *last = Some(r);
        if let (Some(f), Some(bk)) = (&front, &back) {
            if f.end() >= bk.start() {
                report.fail(format!("{what}: the ends crossed at {f:#x?} and {bk:#x?}"));
                return;
            }
        }
    }
    // Lookups at random indices, and at the sentinels.
    for _ in 0..4 {
        let k = if rng.gen_ratio(1, 4) { SENTINELS[rng.gen_range(0..SENTINELS.len())] } else { keys.index(rng) };
        let v = tree.load(k, &g);
        let _ = value_ok(v, &(k..=k), &mut seen, report, "load");
        if SENTINELS.contains(&k) && !v.is_some_and(|v| v.sentinel) {
            report.fail(format!("load({k:#x}) did not find its sentinel"));
        }
        if let Some((r, v)) = tree.get_range(k, &g) {
            if !r.contains(&k) {
                report.fail(format!("get_range({k:#x}) gave {r:#x?}"));
            }
            let _ =
                value_ok(Some(v), &r, &mut seen, report, "get_range") && sentinel_ok(&r, Some(v), report, "get_range");
        }
    }
    recheck(&seen, report);
}

/// The writer: every kind of write, on keys from every distribution, never
/// touching a sentinel.
fn writer(tree: &ConcurrentMapleTree<Box<Val>>, live: &Arc<AtomicI64>, s: &Sizes, max_height: &mut usize) {
    let mut rng = SmallRng::seed_from_u64(0x5eed);
    let keys = Keys::new(&mut rng);
    let mut next_id = 0u64;
    let mut kinds = [0usize; 13];
    let mut w = tree.lock();
    for n in 0..s.writes {
        // Let readers in between writes now and then (another lock taker
        // would too), and keep the tree within bounds.
        if n % 64 == 0 {
            drop(w);
            *max_height = (*max_height).max(tree.height());
            w = tree.lock();
        }
        if tree.len() > s.max_len {
            shrink(&mut w, &mut rng);
        }
        let kind = rng.gen_range(0..kinds.len());
        kinds[kind] += 1;
        let (a, b) = keys.range(&mut rng);
        let clear = clear_of_sentinels(a, b);
        match kind {
            0 if clear => {
                w.store_range(a..=b, Val::new(a, b, live)).unwrap();
            }
            1 if clear => {
                let _ = w.insert_range(a..=b, Val::new(a, b, live));
            }
            2 => {
                let k = keys.index(&mut rng);
                if !is_sentinel(&w, k) {
                    w.erase(k).unwrap();
                }
            }
            3 if clear => w.remove_range(a..=b).unwrap(),
            4 | 5 => {
                let size = rng.gen_range(1..64);
                let window = (a, b.max(a.saturating_add(size)));
                let found = if kind == 4 {
                    w.tree().empty_area(window.0..=window.1, size)
                } else {
                    w.tree().empty_area_rev(window.0..=window.1, size)
                };
                if let Ok(at) = found {
                    let v = Val::new(at, at + (size - 1), live);
                    let got = if kind == 4 {
                        w.alloc_range(window.0..=window.1, size, v)
                    } else {
                        w.alloc_range_rev(window.0..=window.1, size, v)
                    };
                    assert_eq!(got.ok(), Some(at), "the allocation takes the window the search found");
                }
            }
            6 => {
                let _ = w.alloc_cyclic(a..=b, &mut next_id, Val::new(a, b, live));
            }
            7 if clear => {
                let _ = w.reserve_range(a..=b);
            }
            8..=10 => cursor_writes(&mut w, &keys, &mut rng, live),
            11 if n % 16 == 0 => {
                let copy = w.try_dup().unwrap();
                assert_eq!(copy.len(), tree.len());
                if n % 256 == 0 {
                    copy.validate().unwrap();
                }
            }
            12 => w.reclaim(),
            _ => {}
        }
    }
    drop(w);
    assert!(kinds.iter().all(|&k| k > 0), "every write kind ran: {kinds:?}");
}

fn is_sentinel(w: &WriteGuard<'_, Box<Val>>, k: u64) -> bool {
    w.tree().load(k).is_some_and(|v| v.sentinel)
}

/// A write cursor at a random index: a few steps, each followed by one of
/// its writes (never on a sentinel).
fn cursor_writes(w: &mut WriteGuard<'_, Box<Val>>, keys: &Keys, rng: &mut SmallRng, live: &Arc<AtomicI64>) {
    let mut c = w.cursor(keys.index(rng));
    for _ in 0..rng.gen_range(1..8) {
        let r = c.range();
        let (lo, hi) = (*r.start(), *r.end());
        let on_sentinel = c.get().is_some_and(|v| v.sentinel);
        match rng.gen_range(0..8) {
            0 => {
                let _ = c.next();
            }
            1 => {
                let _ = c.prev_range();
            }
            2 if !on_sentinel => c.replace(Val::new(lo, hi, live)).unwrap(),
            3 if !on_sentinel => {
                let _ = c.erase().unwrap();
            }
            4..=6 => {
                let (a, b) = (lo, lo.saturating_add(rng.gen_range(0..64)));
                if clear_of_sentinels(a, b) {
                    match rng.gen_range(0..3) {
                        0 => c.store_range(a..=b, Val::new(a, b, live)).unwrap(),
                        1 => {
                            let _ = c.insert_range(a..=b, Val::new(a, b, live));
                        }
                        _ => c.remove_range(a..=b).unwrap(),
                    }
                }
            }
            _ => {
                let _ = c.next_range();
            }
        }
    }
}

/// Empties a random stretch between two sentinels (or the near-0 and
/// near-`u64::MAX` regions), or everything but the sentinels.
fn shrink(w: &mut WriteGuard<'_, Box<Val>>, rng: &mut SmallRng) {
    let mut bounds = vec![0u64];
    for s in SENTINELS {
        bounds.push(s);
    }
    bounds.push(u64::MAX);
    // The stretches between sentinels: [0, s0 - 1], [s0 + 1, s1 - 1], …
    let stretches: Vec<(u64, u64)> = bounds
        .windows(2)
        .enumerate()
        .map(|(i, p)| {
            (
                if i == 0 { 0 } else { p[0] + 1 },
                if p[1] == u64::MAX && i == SENTINELS.len() { u64::MAX } else { p[1] - 1 },
            )
        })
        .collect();
    if rng.gen_ratio(1, 4) {
        for &(a, b) in &stretches {
            w.remove_range(a..=b).unwrap();
        }
    } else {
        let (a, b) = stretches[rng.gen_range(0..stretches.len())];
        w.remove_range(a..=b).unwrap();
    }
}

#[test]
fn readers_anywhere_under_every_write_kind() {
    let s = sizes();
    let live = Arc::new(AtomicI64::new(0));
    let tree: Arc<ConcurrentMapleTree<Box<Val>>> = Arc::new(ConcurrentMapleTree::with_gaps());
    {
        let mut w = tree.lock();
        for s in SENTINELS {
            let mut v = Val::new(s, s, &live);
            v.sentinel = true;
            w.insert_range(s..=s, v).unwrap();
        }
    }
    let done = Arc::new(AtomicBool::new(false));
    let report = Arc::new(Report::default());
    let steps = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..s.readers)
        .map(|r| {
            let (tree, done, report, steps) =
                (Arc::clone(&tree), Arc::clone(&done), Arc::clone(&report), Arc::clone(&steps));
            thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(1000 + r as u64);
                let keys = Keys::new(&mut SmallRng::seed_from_u64(0x5eed));
                let mut n = 0u64;
                while !done.load(Ordering::Relaxed) || n < 4 {
                    if rng.gen_ratio(1, 2) {
                        cursor_pass(&tree, &keys, &mut rng, &report);
                    } else {
                        iter_pass(&tree, &keys, &mut rng, &report);
                    }
                    n += 1;
                }
                steps.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    let mut max_height = 0;
    writer(&tree, &live, &s, &mut max_height);
    done.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    tracked::assert_no_failures(&report, steps.load(Ordering::Relaxed));
    let want_height = if cfg!(miri) { 2 } else { 3 };
    assert!(max_height >= want_height, "the tree only reached height {max_height}");
    tree.validate().unwrap();
    for s in SENTINELS {
        assert!(tree.load_with(s, |v| v.is_some_and(|v| v.sentinel)), "sentinel {s:#x} survived");
    }
    let tree = Arc::into_inner(tree).expect("readers are gone");
    drop(tree);
    tracked::assert_all_dropped(&live);
}
