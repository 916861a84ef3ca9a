//! Readers racing a writer on a `SharedAddressSpace`: every VMA a lookup
//! returns must be whole and true to what the writer mapped.
//!
//! The writer maps one file at its own address (page `p` of the address
//! space maps page `p` of the file), so any VMA anyone may ever see has
//! `pgoff == start / PAGE_SIZE`; it then unmaps, protects, grows and
//! shrinks in place, none of which changes that. A reader that saw a range
//! from one moment with attributes from another, or a freed VMA, would see
//! that equation fail (or crash under Miri).

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    thread,
};

use maple_mm::{MapFlags, MappedFile, MremapFlags, Prot, SharedAddressSpace, PAGE_SIZE};
use rand::{rngs::SmallRng, Rng, SeedableRng};

const BASE: u64 = 0x1000_0000;

fn sizes() -> (u64, usize, usize) {
    // (pages in the region, writer calls, readers)
    if cfg!(miri) {
        (64, 60, 1)
    } else {
        (20_000, 40_000, 2)
    }
}

#[test]
fn readers_see_whole_vmas_while_a_writer_maps_and_protects() {
    let (pages, calls, readers) = sizes();
    let mm = Arc::new(SharedAddressSpace::new());
    let file = Arc::new(MappedFile::new(8, 1, 77, "/data/identity"));
    let fixed = MapFlags::PRIVATE | MapFlags::FIXED;
    {
        let mut w = mm.write();
        for p in (0..pages).step_by(4) {
            w.mmap(
                BASE + p * PAGE_SIZE,
                2 * PAGE_SIZE,
                Prot::READ,
                fixed,
                Some(file.clone()),
                (BASE / PAGE_SIZE + p) * PAGE_SIZE,
            )
            .unwrap();
        }
    }
    let done = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(AtomicU64::new(0));
    let seen = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..readers)
        .map(|r| {
            let (mm, done, bad, seen) = (Arc::clone(&mm), Arc::clone(&done), Arc::clone(&bad), Arc::clone(&seen));
            thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(r as u64);
                let mut n = 0u64;
                while !done.load(Ordering::Relaxed) || n == 0 {
                    let g = mm.pin();
                    for _ in 0..if cfg!(miri) { 4 } else { 64 } {
                        let addr = BASE + rng.gen_range(0..pages) * PAGE_SIZE + rng.gen_range(0..PAGE_SIZE);
                        let whole = |v: maple_mm::Vma<'_>| {
                            v.start() < v.end()
                                && v.pgoff() == v.start() / PAGE_SIZE
                                && v.file().is_some_and(|f| f.inode == 77)
                        };
                        if let Some(v) = mm.vma_at(addr, &g) {
                            if !v.contains(addr) || !whole(v) {
                                bad.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        if let Some(v) = mm.find_vma(addr, &g) {
                            if v.end() <= addr || !whole(v) {
                                bad.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        if let Some(v) = mm.find_vma_intersection(addr, addr + 8 * PAGE_SIZE, &g) {
                            if v.end() <= addr || v.start() >= addr + 8 * PAGE_SIZE || !whole(v) {
                                bad.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        n += 1;
                    }
                }
                seen.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    let mut rng = SmallRng::seed_from_u64(9);
    for _ in 0..calls {
        let p = rng.gen_range(0..pages - 16);
        let n = rng.gen_range(1..12u64);
        let at = BASE + p * PAGE_SIZE;
        let mut w = mm.write();
        let prot = [Prot::READ, Prot::RW, Prot::NONE, Prot::READ | Prot::EXEC][rng.gen_range(0..4)];
        let _ = match rng.gen_range(0..5) {
            0 => {
                w.mmap(at, n * PAGE_SIZE, prot, fixed, Some(file.clone()), (BASE / PAGE_SIZE + p) * PAGE_SIZE).map(drop)
            }
            1 => w.munmap(at, n * PAGE_SIZE),
            2 => w.mremap(at, PAGE_SIZE, n * PAGE_SIZE, MremapFlags::empty(), 0).map(drop),
            3 => w.mremap(at, n * PAGE_SIZE, PAGE_SIZE, MremapFlags::empty(), 0).map(drop),
            _ => w.mprotect(at, n * PAGE_SIZE, prot),
        };
    }
    done.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(bad.load(Ordering::Relaxed), 0, "readers saw torn or foreign VMAs");
    assert!(seen.load(Ordering::Relaxed) > 0);
    let snap = mm.snapshot();
    snap.validate().unwrap();
    let mm = Arc::into_inner(mm).expect("readers are gone");
    let plain = mm.into_inner();
    plain.validate().unwrap();
    assert_eq!(plain.maps(), snap.maps());
    for v in plain.iter() {
        assert_eq!(v.pgoff(), v.start() / PAGE_SIZE);
    }
}

/// The writer side is the whole `AddressSpace` API; its break and stack
/// survive between writers.
#[test]
fn writer_state_persists_between_writers() {
    let mm = SharedAddressSpace::new();
    mm.write().set_brk_base(0x5555_0000).unwrap();
    assert_eq!(mm.write().brk(0x5556_0000), 0x5556_0000);
    let g = mm.pin();
    assert_eq!(mm.vma_at(0x5555_8000, &g).map(|v| (v.start(), v.end())), Some((0x5555_0000, 0x5556_0000)));
    drop(g);
    assert!(mm.snapshot().maps().contains("[heap]"));
    assert_eq!(mm.write().brk(0), 0x5556_0000);
}
