//! The old design (VMAs in a red-black tree with subtree gaps, a list
//! and a lookup cache) under the same address-space code as the maple
//! tree: random sequences of every call kind, forks included, run on a
//! space of each kind, which must give the same results and end alike
//! after every call (VMAs, attributes, pages, counts) with both
//! structures valid. The maple space is the one the kernel oracle checks,
//! so the comparison is of structures, not of rules.

use std::sync::Arc;

use maple_mm::{rbtree::RbTree, AddressSpace, Layout, MappedFile, VmaRef, PAGE_SIZE};
use proptest::prelude::*;

mod common;

use common::calls::{at, at_in, call, equivalent, layout, op, Op, PAGES};

#[derive(Clone, Debug)]
enum Step {
    Call(Op),
    /// Both fork; both go on with the child or with the parent.
    Fork {
        child: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![12 => op().prop_map(Step::Call), 1 => any::<bool>().prop_map(|child| Step::Fork { child })]
}

fn run(layout: Layout, steps: &[Step]) -> Result<(), TestCaseError> {
    let pg = layout.page_size.bytes();
    let files: Vec<Arc<MappedFile>> =
        (0..3).map(|i| Arc::new(MappedFile::new(8, 1, 100 + i, format!("/f{i}")).with_size(64 * pg))).collect();
    let mut new = AddressSpace::with_layout(layout.clone());
    let mut old: AddressSpace<RbTree<VmaRef>> = AddressSpace::old_design(layout);
    new.set_brk_base(at_in(pg, PAGES + 64)).unwrap();
    old.set_brk_base(at_in(pg, PAGES + 64)).unwrap();
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Call(op) => {
                let (a, b) = (call(&mut new, op, &files), call(&mut old, op, &files));
                prop_assert_eq!(a, b, "step {} {:?}: results", i, op);
            }
            Step::Fork { child } => {
                let (a, b) = (new.fork().unwrap(), old.fork().unwrap());
                equivalent(&a, &b).map_err(|e| TestCaseError::fail(format!("step {i}: children: {e}")))?;
                b.validate().map_err(|e| TestCaseError::fail(format!("step {i}: child: {e}")))?;
                if *child {
                    (new, old) = (a, b);
                }
            }
        }
        old.validate().map_err(|e| TestCaseError::fail(format!("step {i} {step:?}: {e}")))?;
        equivalent(&new, &old).map_err(|e| TestCaseError::fail(format!("step {i} {step:?}: {e}")))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn the_old_design_runs_the_same_calls_alike(layout in layout(), steps in prop::collection::vec(step(), 1..60)) {
        run(layout, &steps)?;
    }
}

/// Lookups go through the four-entry cache, as `find_vma` did: repeated
/// lookups in one VMA hit, and no lookup after a change sees what the
/// change removed.
#[test]
fn lookups_hit_the_cache_and_never_see_stale_vmas() {
    use maple_mm::{MapFlags, Prot};
    let mut mm = AddressSpace::old_design(Layout::default());
    let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    mm.mmap(at(0), 4 * PAGE_SIZE, Prot::RW, anon, None, 0).unwrap();
    let base = mm.cache_stats();
    for _ in 0..10 {
        assert!(mm.vma_at(at(1)).is_some());
    }
    let hot = mm.cache_stats();
    assert!(hot.misses - base.misses <= 1 && hot.hits - base.hits >= 9, "{base:?} {hot:?}");
    mm.munmap(at(1), PAGE_SIZE).unwrap();
    assert!(mm.vma_at(at(1)).is_none(), "a stale cache answered");
    assert_eq!(mm.vma_at(at(2)).map(|v| v.start()), Some(at(2)));
}

/// `old_design_from` copies a space whole: equivalent at once, and the
/// two go on alike.
fn copied(before: &[Op], after: &[Op]) -> Result<(), TestCaseError> {
    let files: Vec<Arc<MappedFile>> =
        (0..3).map(|i| Arc::new(MappedFile::new(8, 1, 100 + i, format!("/f{i}")).with_size(64 * PAGE_SIZE))).collect();
    let mut new = AddressSpace::new();
    new.set_brk_base(at(PAGES + 64)).unwrap();
    for op in before {
        call(&mut new, op, &files);
    }
    let mut old = AddressSpace::old_design_from(&new);
    old.validate().map_err(TestCaseError::fail)?;
    equivalent(&new, &old).map_err(|e| TestCaseError::fail(format!("the copy: {e}")))?;
    for (i, op) in after.iter().enumerate() {
        let (a, b) = (call(&mut new, op, &files), call(&mut old, op, &files));
        prop_assert_eq!(a, b, "after {} more calls ({:?})", i, op);
        equivalent(&new, &old).map_err(|e| TestCaseError::fail(format!("after {i} more calls ({op:?}): {e}")))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn a_copy_into_the_old_design_is_the_same_space(
        before in prop::collection::vec(op(), 1..50),
        after in prop::collection::vec(op(), 0..30),
    ) {
        copied(&before, &after)?;
    }
}
