//! A VMA-like map: ranges that carry a record knowing its own start (a file
//! offset), cut and merged as the kernel's VMAs are, with the records
//! edited in place.
//!
//! `cargo run -p maple-tree --example vma_map`

use maple_tree::MapleTree;

const PAGE: u64 = 4096;

/// A mapping: protection and, for a file, the offset of its first page.
#[derive(Clone, Debug, PartialEq)]
struct Area {
    prot: &'static str,
    file_offset: Option<u64>,
}

fn show(t: &MapleTree<Box<Area>>) {
    for (r, a) in t.iter() {
        let off = a.file_offset.map_or(String::new(), |o| format!(" file+{o:#x}"));
        println!("  {:#010x}-{:#010x} {}{off}", r.start(), r.end() + 1, a.prot);
    }
}

fn main() {
    let mut t: MapleTree<Box<Area>> = MapleTree::with_gaps();
    // A file mapped at 0x10000, 16 pages from offset 0.
    t.insert_range(0x10000..0x20000, Box::new(Area { prot: "r-x", file_offset: Some(0) })).unwrap();
    t.insert_range(0x30000..0x34000, Box::new(Area { prot: "rw-", file_offset: None })).unwrap();

    // mprotect the middle four pages: the tree cuts the area in three (the
    // value is cloned for the split); each piece's file offset must then
    // follow its own start, which the record cannot know by itself, so fix
    // the offsets of the pieces through `range_mut`.
    let (lo, hi) = (0x14000, 0x18000);
    let base = (0x10000, 0);
    let mut middle = t.get_range(lo).map(|(_, a)| a.clone()).unwrap();
    middle.prot = "r--";
    t.store_range(lo..hi, Box::new(middle)).unwrap();
    for (r, a) in t.range_mut(0x10000..0x20000) {
        if let Some(off) = a.file_offset.as_mut() {
            *off = base.1 + (r.start() - base.0);
        }
    }
    println!("after mprotect({lo:#x}, {:#x}, PROT_READ):", hi - lo);
    show(&t);
    assert_eq!(t.get_range(0x18000).map(|(r, a)| (*r.start(), a.file_offset)), Some((0x18000, Some(0x8000))));

    // The lowest hole of 8 pages, as mmap's bottom-up search finds it.
    let hole = t.empty_area(0x10000.., 8 * PAGE).unwrap();
    println!("8 free pages from {hole:#x}");
    assert_eq!(hole, 0x20000);
}
