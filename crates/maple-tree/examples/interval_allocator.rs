//! An interval allocator: hand out aligned ranges of a space (device
//! addresses, inode numbers, port ranges, file offsets) and take them back,
//! the way the kernel's `get_unmapped_area` uses the tree's gap search.
//!
//! `cargo run -p maple-tree --example interval_allocator`

use maple_tree::{Error, MapleTree};

/// Who owns an allocation.
#[derive(Debug)]
struct Owner(&'static str);

/// Ranges of `[0, limit)` handed out with an alignment; O(log n) per
/// allocation however fragmented the space gets.
struct Allocator {
    map: MapleTree<Box<Owner>>,
    limit: u64,
}

impl Allocator {
    fn new(limit: u64) -> Allocator {
        // Gap tracking is what makes the search O(log n).
        Allocator { map: MapleTree::with_gaps(), limit }
    }

    /// The lowest free `size`-long range starting at a multiple of `align`
    /// (a power of two).
    fn alloc(&mut self, size: u64, align: u64, who: &'static str) -> Result<u64, Error> {
        // Ask for enough room to align inside the gap found, then walk the
        // gaps from there: the first one that fits aligned wins.
        let mut from = 0;
        loop {
            let start = self.map.empty_area(from..self.limit, size)?;
            let aligned = start.next_multiple_of(align);
            let gap_end = *self.map.gaps(start..self.limit).next().ok_or(Error::Busy)?.end();
            if aligned.checked_add(size - 1).is_some_and(|last| last <= gap_end) {
                self.map.insert_range(aligned..aligned + size, Box::new(Owner(who))).map_err(|e| e.cause)?;
                return Ok(aligned);
            }
            from = gap_end + 1;
        }
    }

    fn free(&mut self, start: u64) -> Option<&'static str> {
        self.map.erase(start).map(|o| o.0)
    }
}

fn main() {
    let mut a = Allocator::new(1 << 20);
    let x = a.alloc(0x3000, 0x1000, "x").unwrap();
    let y = a.alloc(0x800, 0x800, "y").unwrap();
    let z = a.alloc(0x10000, 0x10000, "z").unwrap();
    println!("x at {x:#x}, y at {y:#x}, z at {z:#x} (64 KiB-aligned)");
    assert_eq!((x, y, z), (0, 0x3000, 0x10000));
    assert_eq!(a.free(y), Some("y"));
    // The hole y left is reused by the next small request.
    assert_eq!(a.alloc(0x400, 0x400, "w").unwrap(), 0x3000);
    println!("free space:");
    for gap in a.map.gaps(..a.limit) {
        println!("  {:#07x}..={:#07x} ({} bytes)", gap.start(), gap.end(), gap.end() - gap.start() + 1);
    }
    for (r, owner) in a.map.iter() {
        println!("  {:#07x}..={:#07x} {}", r.start(), r.end(), owner.0);
    }
    assert_eq!(a.alloc(1 << 20, 1, "too big"), Err(Error::Busy));
}
