//! Snapshots (feature `serde`): an address space written to JSON and read
//! back is the same space, hidden state included. Random sequences of
//! every call kind make the space; after the round trip the same further
//! calls run on the original and the copy, which must stay equal call for
//! call (so what decides later merges, the open files' identity and the
//! anon_vmas' sharing, came back too). Bad snapshots are refused with the
//! VMA named.

use std::sync::Arc;

use maple_mm::{AddressSpace, Backing, Layout, MapFlags, MappedFile, PageSize, Prot, PAGE_SIZE};
use proptest::prelude::*;

mod common;

use common::calls::{at_in, call, equivalent, layout, op_without_values as op, Op, PAGES};

fn run(layout: Layout, before: &[Op], after: &[Op]) -> Result<(), TestCaseError> {
    let pg = layout.page_size.bytes();
    let files: Vec<Arc<MappedFile>> =
        (0..3).map(|i| Arc::new(MappedFile::new(8, 1, 100 + i, format!("/f{i}")).with_size(64 * pg))).collect();
    let mut mm = AddressSpace::with_layout(layout);
    mm.set_brk_base(at_in(pg, PAGES + 64)).unwrap();
    for op in before {
        call(&mut mm, op, &files);
    }
    let json = serde_json::to_string(&mm).unwrap();
    let mut copy: AddressSpace =
        serde_json::from_str(&json).map_err(|e| TestCaseError::fail(format!("{e}\n{json}")))?;
    equivalent(&mm, &copy).map_err(TestCaseError::fail)?;
    // The copy's files are its own objects: its further calls map those
    // its VMAs hold (so that they merge as the original's do), or fresh
    // ones for files the snapshot does not hold.
    let copy_files: Vec<Arc<MappedFile>> = files
        .iter()
        .map(|f| {
            copy.iter()
                .find_map(|v| match v.backing() {
                    Backing::File(a) if a.inode == f.inode && !a.anon_shmem => Some(Arc::clone(a)),
                    _ => None,
                })
                .unwrap_or_else(|| Arc::new((**f).clone()))
        })
        .collect();
    for (i, op) in after.iter().enumerate() {
        call(&mut mm, op, &files);
        call(&mut copy, op, &copy_files);
        copy.validate().map_err(TestCaseError::fail)?;
        equivalent(&mm, &copy).map_err(|e| TestCaseError::fail(format!("after {i} more calls ({op:?}): {e}")))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn a_snapshot_is_the_same_space(
        layout in layout(),
        before in prop::collection::vec(op(), 1..50),
        after in prop::collection::vec(op(), 0..30),
    ) {
        run(layout, &before, &after)?;
    }
}

#[test]
fn bad_snapshots_are_refused_with_the_vma_named() {
    let mut mm = AddressSpace::new();
    let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    mm.mmap(0x10000, 2 * PAGE_SIZE, Prot::RW, f, None, 0).unwrap();
    mm.mmap(0x20000, PAGE_SIZE, Prot::READ, f, None, 0).unwrap();
    let json = serde_json::to_string(&mm).unwrap();
    let bad = |from: &str, to: &str| {
        let text = json.replacen(from, to, 1);
        assert_ne!(text, json, "{from} not in {json}");
        serde_json::from_str::<AddressSpace>(&text).unwrap_err().to_string()
    };
    // 0x20000 = 131072 starts the second VMA; 0x10000 = 65536 the first.
    assert!(bad("\"start\":131072", "\"start\":69632").contains("VMA 1 (0x11000-0x21000): overlaps"));
    assert!(bad("\"start\":131072", "\"start\":131073").contains("VMA 1 (0x20001-0x21000): not a range of whole pages"));
    assert!(bad("\"file\":null", "\"file\":7").contains("VMA 0 (0x10000-0x12000): no file 7"));
    assert!(bad("\"name\":null", "\"name\":\"a$b\"").contains("bad name"));
    assert!(serde_json::from_str::<AddressSpace>(&json[..json.len() / 2]).is_err());
    assert!(bad("\"page_size\":4096", "\"page_size\":8192").contains("8192 bytes is not one of"));
    // On 64 KiB pages the first VMA (0x10000-0x12000) ends inside a page.
    let e = bad("\"page_size\":4096", "\"page_size\":65536");
    assert!(e.contains("VMA 0 (0x10000-0x12000): not a range of whole pages"), "{e}");
}

/// The layout, page size included, comes back with the space.
#[test]
fn a_snapshot_keeps_its_layout() {
    let mut mm = AddressSpace::with_layout(Layout::arm64(PageSize::K64).with_stack_limit(u64::MAX));
    mm.mmap(0, 1, Prot::READ, MapFlags::PRIVATE | MapFlags::ANONYMOUS, None, 0).unwrap();
    let copy: AddressSpace = serde_json::from_str(&serde_json::to_string(&mm).unwrap()).unwrap();
    assert_eq!(copy.layout(), mm.layout());
    assert_eq!(copy.maps(), mm.maps());
}

/// A space holding an embedder's value is refused, not written without it.
#[test]
fn a_space_with_values_is_refused() {
    let mut mm = AddressSpace::new();
    let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    mm.mmap_with(0x10000, PAGE_SIZE, Prot::RW, f, None, 0, 5u32).unwrap();
    let e = serde_json::to_string(&mm).unwrap_err().to_string();
    assert!(e.contains("0x10000") && e.contains("value"), "{e}");
    mm.set_value::<u32>(0x10000, PAGE_SIZE, None).unwrap();
    assert!(serde_json::to_string(&mm).is_ok());
}
