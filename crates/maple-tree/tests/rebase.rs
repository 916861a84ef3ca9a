//! `store_range_with` / `remove_range_with`: values that record where their
//! range starts stay right however stores cut them. Each value is the
//! "offset" of its first index, so index `i` of an entry `[s, e]` holding
//! `v` maps to `v + (i - s)`; the model keeps that mapping per index and
//! must agree with the tree at every index after every step, with
//! `validate()` clean, in both tree flavours and both write modes.

use maple_tree::{FreshNodes, MapleTree, Moved, Writes, U63};
use proptest::prelude::*;

const KEYS: u64 = 700;

#[derive(Clone, Debug)]
enum Op {
    Store(u64, u64, u64),
    Remove(u64, u64),
}

fn op() -> impl Strategy<Value = Op> {
    let range = (0..KEYS, 0u64..80).prop_map(|(f, len)| (f, (f + len).min(KEYS - 1)));
    prop_oneof![
        3 => (range.clone(), 0u64..1_000_000).prop_map(|((f, l), x)| Op::Store(f, l, x)),
        1 => range.prop_map(|(f, l)| Op::Remove(f, l)),
    ]
}

fn shifted(old: U63, m: Moved) -> U63 {
    U63::new(old.get() + m.shift()).unwrap()
}

fn run(ops: &[Op], gaps: bool, fresh: bool) {
    let t = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
    if fresh {
        run_on(t.into_writes::<FreshNodes>(), ops);
    } else {
        run_on(t, ops);
    }
}

fn run_on<W: Writes>(mut t: MapleTree<U63, u64, W>, ops: &[Op]) {
    let mut model: Vec<Option<u64>> = vec![None; KEYS as usize];
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Store(f, l, x) => {
                t.store_range_with(f..=l, U63::new(x).unwrap(), shifted).unwrap();
                for i in f..=l {
                    model[i as usize] = Some(x + (i - f));
                }
            }
            Op::Remove(f, l) => {
                t.remove_range_with(f..=l, shifted).unwrap();
                for i in f..=l {
                    model[i as usize] = None;
                }
            }
        }
        t.validate().unwrap_or_else(|e| panic!("step {step}: {op:?}: {e}"));
        for i in 0..KEYS {
            let got = t.get_range(i).map(|(r, v)| v.get() + (i - r.start()));
            assert_eq!(got, model[i as usize], "step {step}: {op:?}: index {i}");
        }
        assert!(t.get_range(KEYS).is_none());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 2 } else { 200 }, ..ProptestConfig::default() })]

    #[test]
    fn offsets_follow_every_cut(ops in prop::collection::vec(op(), 1..150), gaps: bool, fresh: bool) {
        run(&ops, gaps, fresh);
    }
}

/// Pieces whose start stays keep their value untouched; `rebase` runs only
/// for the piece that moved, once per store.
#[test]
fn rebase_runs_once_and_only_for_a_moved_start() {
    let mut t: MapleTree<Box<(u64, u32)>> = MapleTree::new();
    t.insert_range(100..=199, Box::new((0, 0))).unwrap();
    let calls = std::cell::RefCell::new(Vec::new());
    let note = |old: &(u64, u32), m: Moved| {
        calls.borrow_mut().push((m.old.clone(), m.new.clone()));
        Box::new((old.0 + m.shift(), old.1 + 1))
    };
    // Cutting the end moves no start.
    t.store_range_with(190..=199, Box::new((5, 0)), note).unwrap();
    assert!(calls.borrow().is_empty());
    // Cutting the middle: the right part moves.
    t.store_range_with(120..=129, Box::new((9, 0)), note).unwrap();
    assert_eq!(*calls.borrow(), [(100..=189, 130..=189)]);
    assert_eq!(t.get_range(130).map(|(r, v)| (r, *v)), Some((130..=189, (30, 1))));
    assert_eq!(t.get_range(100).map(|(r, v)| (r, *v)), Some((100..=119, (0, 0))));
    // Overwriting the front of [130, 189] and all of [120, 129].
    t.store_range_with(115..=139, Box::new((7, 0)), note).unwrap();
    assert_eq!(calls.borrow().len(), 2);
    assert_eq!(t.get_range(140).map(|(r, v)| (r, *v)), Some((140..=189, (40, 2))));
}

/// A store that fails for want of memory drops the value `rebase` made,
/// hands the new value back and changes nothing; no value leaks.
#[test]
fn a_failed_store_drops_the_rebased_value() {
    use std::sync::atomic::{AtomicI64, Ordering};
    static LIVE: AtomicI64 = AtomicI64::new(0);
    #[derive(Debug)]
    struct Counted(u64);
    impl Counted {
        fn new(x: u64) -> Box<Counted> {
            LIVE.fetch_add(1, Ordering::Relaxed);
            Box::new(Counted(x))
        }
    }
    impl Drop for Counted {
        fn drop(&mut self) {
            LIVE.fetch_sub(1, Ordering::Relaxed);
        }
    }
    let mut t: MapleTree<Box<Counted>> = MapleTree::new();
    // Full leaves, so that a cut needs new nodes.
    for i in 0..200u64 {
        t.insert_range(i * 10..=i * 10 + 5, Counted::new(i)).unwrap();
    }
    let before: Vec<_> = t.iter().map(|(r, v)| (r, v.0)).collect();
    let live = LIVE.load(Ordering::Relaxed);
    let mut failures = 0;
    for n in 1..20 {
        maple_tree::fault::fail_nth_alloc(n);
        let r = t.store_range_with(1001..=1002, Counted::new(7), |old, m| Counted::new(old.0 + m.shift()));
        let armed = maple_tree::fault::armed();
        maple_tree::fault::fail_nth_alloc(0);
        if armed {
            // Fewer than n allocations: it succeeded; undo it for the next round.
            r.unwrap();
            break;
        }
        let e = r.unwrap_err();
        assert_eq!(e.value.0, 7);
        drop(e);
        failures += 1;
        assert_eq!(LIVE.load(Ordering::Relaxed), live, "allocation {n}: a value leaked or was lost");
        assert_eq!(t.iter().map(|(r, v)| (r, v.0)).collect::<Vec<_>>(), before, "allocation {n}");
        t.validate().unwrap();
    }
    assert!(failures > 0, "the store allocated nothing");
    drop(t);
    assert_eq!(LIVE.load(Ordering::Relaxed), 0);
}
