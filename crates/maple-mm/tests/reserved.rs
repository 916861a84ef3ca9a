//! Reserved ranges: random sequences of every call kind run on a space
//! with a range reserved in the middle of the window, each call also on a
//! copy without the reservation. Where the copy leaves the range alone,
//! both must end the same; where it takes any of it, the reserved space
//! must fail the call and not change at all (but for a mapping the kernel
//! places, which goes elsewhere). No VMA is ever in the range.

use std::sync::Arc;

use maple_mm::{AddressSpace, MappedFile, PAGE_SIZE};
use proptest::prelude::*;

mod common;

use common::calls::{at, call, equivalent, op, Op, PAGES};

/// The reserved pages of the window.
const RESERVED: (u64, u64) = (20, 28);

fn touches_reserved(mm: &AddressSpace) -> bool {
    mm.find_vma_intersection(at(RESERVED.0), at(RESERVED.1)).is_some()
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let files: Vec<Arc<MappedFile>> =
        (0..3).map(|i| Arc::new(MappedFile::new(8, 1, 100 + i, format!("/f{i}")).with_size(64 * PAGE_SIZE))).collect();
    let mut held = AddressSpace::new();
    held.set_brk_base(at(PAGES + 64)).unwrap();
    held.reserve(at(RESERVED.0), at(RESERVED.1)).unwrap();
    for (i, op) in ops.iter().enumerate() {
        let before = held.clone();
        let mut trial = held.clone();
        trial.unreserve(at(RESERVED.0), at(RESERVED.1)).unwrap();
        call(&mut trial, op, &files);
        call(&mut held, op, &files);
        held.validate().map_err(|e| TestCaseError::fail(format!("call {i} {op:?}: {e}")))?;
        prop_assert!(!touches_reserved(&held), "call {} {:?}: a VMA in the reserved range", i, op);
        // A placed mapping whose hint falls in the range goes elsewhere.
        let placed = matches!(op, Op::Map { fixed: false, .. } | Op::Remap { how: 1 | 3, .. });
        if placed && touches_reserved(&trial) {
            continue;
        }
        let want = if touches_reserved(&trial) { &before } else { &trial };
        equivalent(want, &held).map_err(|e| TestCaseError::fail(format!("call {i} {op:?}: {e}")))?;
        prop_assert_eq!(held.reserved().collect::<Vec<_>>(), vec![at(RESERVED.0)..at(RESERVED.1)]);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn reserved_ranges_stay_empty_and_refusals_change_nothing(ops in prop::collection::vec(op(), 1..60)) {
        run(&ops)?;
    }
}

#[test]
fn reserving_checks_its_range() {
    use maple_mm::{Errno, MapFlags, Prot};
    let mut mm = AddressSpace::new();
    let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    mm.mmap(at(0), 4 * PAGE_SIZE, Prot::RW, f, None, 0).unwrap();
    assert_eq!(mm.reserve(at(2), at(6)), Err(Errno::EEXIST));
    assert_eq!(mm.reserve(at(8) + 1, at(9)), Err(Errno::EINVAL));
    assert_eq!(mm.reserve(at(9), at(9)), Err(Errno::EINVAL));
    mm.reserve(at(8), at(12)).unwrap();
    // A fork and an exec keep them; a snapshot too.
    assert_eq!(mm.fork().unwrap().reserved().count(), 1);
    let json = serde_json::to_string(&mm).unwrap();
    let back: AddressSpace = serde_json::from_str(&json).unwrap();
    assert_eq!(back.reserved().collect::<Vec<_>>(), vec![at(8)..at(12)]);
    mm.exec();
    assert_eq!(mm.reserved().collect::<Vec<_>>(), vec![at(8)..at(12)]);
    // Placement skips them, top-down (the default) and bottom-up.
    for bottom_up in [false, true] {
        let layout = maple_mm::Layout { bottom_up, ..maple_mm::Layout::default() };
        let mut mm = AddressSpace::with_layout(layout.clone());
        let first = if bottom_up {
            (layout.task_size / 3 + PAGE_SIZE - 1) & !(PAGE_SIZE - 1)
        } else {
            layout.mmap_base - 8 * PAGE_SIZE
        };
        mm.reserve(first, first + 8 * PAGE_SIZE).unwrap();
        let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
        let a = mm.mmap(0, 4 * PAGE_SIZE, Prot::READ, anon, None, 0).unwrap();
        assert!(a + 4 * PAGE_SIZE <= first || a >= first + 8 * PAGE_SIZE, "bottom_up {bottom_up}: placed at {a:#x}");
        // Next to it, as close as it may be.
        assert_eq!(a, if bottom_up { first + 8 * PAGE_SIZE } else { first - 4 * PAGE_SIZE }, "bottom_up {bottom_up}");
    }
}
