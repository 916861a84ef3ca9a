//! Readers racing a writer on a `SharedAddressSpace`: every VMA a lookup
//! returns must be whole and true to what the writer mapped.
//!
//! The writer maps one file at its own address (page `p` of the address
//! space maps page `p` of the file), so any VMA anyone may ever see has
//! `pgoff == start / PAGE_SIZE`; it then unmaps, protects, grows and
//! shrinks in place, none of which changes that. A reader that saw a range
//! from one moment with attributes from another, or a freed VMA, would see
//! that equation fail (or crash under Miri). Every mapping carries the
//! same embedder's value, which readers must see on every VMA; each VMA a
//! reader found is checked again at the end of its pin.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    thread,
};

use maple_mm::{
    Access, AddressSpace, Advice, Fault, MapFlags, MappedFile, MremapFlags, Prot, SharedAddressSpace, VmaStore,
    PAGE_SIZE,
};
use rand::{rngs::SmallRng, Rng, SeedableRng};

const BASE: u64 = 0x1000_0000;

mod common;

use common::space;

/// The embedder's value on every mapping of the readers' test.
const VALUE: u64 = 0x77;

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
    each_page!(readers_see_whole_vmas_while_a_writer_maps_and_protects_at);
}

fn readers_see_whole_vmas_while_a_writer_maps_and_protects_at<const P: u64>() {
    let (pages, calls, readers) = sizes();
    let mm = Arc::new(SharedAddressSpace::from(space::<P>()));
    let file = Arc::new(MappedFile::new(8, 1, 77, "/data/identity"));
    let fixed = MapFlags::PRIVATE | MapFlags::FIXED;
    {
        let mut w = mm.write();
        for p in (0..pages).step_by(4) {
            w.mmap_with(BASE + p * P, 2 * P, Prot::READ, fixed, Some(file.clone()), (BASE / P + p) * P, VALUE).unwrap();
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
                    // Everything seen under this pin, checked again at its end.
                    let mut held = Vec::new();
                    for _ in 0..if cfg!(miri) { 4 } else { 64 } {
                        let addr = BASE + rng.gen_range(0..pages) * P + rng.gen_range(0..P);
                        let whole = |v: maple_mm::Vma<'_>| {
                            v.start() < v.end()
                                && v.offset() == v.start()
                                && v.file().is_some_and(|f| f.inode == 77)
                                && v.value::<u64>() == Some(&VALUE)
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
                            held.push((v.range(), v));
                        }
                        if let Some(v) = mm.find_vma_intersection(addr, addr + 8 * P, &g) {
                            if v.end() <= addr || v.start() >= addr + 8 * P || !whole(v) {
                                bad.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        n += 1;
                    }
                    for (range, v) in held {
                        let same = v.range() == range
                            && v.value::<u64>() == Some(&VALUE)
                            && v.file().is_some_and(|f| f.inode == 77);
                        if !same {
                            bad.fetch_add(1, Ordering::Relaxed);
                        }
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
        let at = BASE + p * P;
        let mut w = mm.write();
        let prot = [Prot::READ, Prot::RW, Prot::NONE, Prot::READ | Prot::EXEC][rng.gen_range(0..4)];
        let _ = match rng.gen_range(0..5) {
            0 => w.mmap_with(at, n * P, prot, fixed, Some(file.clone()), (BASE / P + p) * P, VALUE).map(drop),
            1 => w.munmap(at, n * P),
            2 => w.mremap(at, P, n * P, MremapFlags::empty(), 0).map(drop),
            3 => w.mremap(at, n * P, P, MremapFlags::empty(), 0).map(drop),
            _ => w.mprotect(at, n * P, prot),
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
        assert_eq!(v.offset(), v.start());
    }
}

/// The writer side is the whole `AddressSpace` API; its break and stack
/// survive between writers.
#[test]
fn writer_state_persists_between_writers() {
    each_page!(writer_state_persists_between_writers_at);
}

fn writer_state_persists_between_writers_at<const P: u64>() {
    let mm = SharedAddressSpace::from(space::<P>());
    mm.write().set_brk_base(0x5555_0000).unwrap();
    assert_eq!(mm.write().brk(0x5556_0000), 0x5556_0000);
    let g = mm.pin();
    assert_eq!(mm.vma_at(0x5555_8000, &g).map(|v| (v.start(), v.end())), Some((0x5555_0000, 0x5556_0000)));
    drop(g);
    assert!(mm.snapshot().maps().contains("[heap]"));
    assert_eq!(mm.write().brk(0), 0x5556_0000);
}

/// One of the calls `lock_free_access_checks_agree_with_a_plain_space`
/// makes on both spaces.
#[derive(Debug)]
struct Call {
    what: u32,
    at: u64,
    len: u64,
    prot: Prot,
    /// A map makes a stack (grows down); a fault writes, else reads.
    flag: bool,
}

impl Call {
    fn on<T: VmaStore>(&self, m: &mut AddressSpace<T>) -> Result<(), String> {
        let (at, len) = (self.at, self.len);
        let mut anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
        if self.flag {
            anon |= MapFlags::GROWSDOWN;
        }
        let access = if self.flag { Access::Write } else { Access::Read };
        match self.what {
            0 => m.mmap(at, len, self.prot, anon, None, 0).map(drop),
            9 => return m.fault(at, access).map_err(|f| format!("{f:?}")),
            1 => m.munmap(at, len),
            2 => m.mprotect(at, len, self.prot),
            3 | 4 => m.madvise(at, len, Advice::GuardInstall),
            5 => m.madvise(at, len, Advice::GuardRemove),
            6 => m.mremap(at, len, len, MremapFlags::MAYMOVE | MremapFlags::FIXED, at + 16 * PAGE_SIZE).map(drop),
            7 => m.madvise(at, len, Advice::WipeOnFork),
            _ => m.touch(at, len),
        }
        .map_err(|e| format!("{e:?}"))
    }
}

/// The lock-free readers' guard pages and access checks are the plain
/// space's: the same calls made on a `SharedAddressSpace` and on an
/// `AddressSpace`, compared after each (guard pages, and `check_access`
/// of three kinds at pages in and around the window, the holes below
/// stacks included), forks included.
#[test]
fn lock_free_access_checks_agree_with_a_plain_space() {
    each_page!(lock_free_access_checks_agree_with_a_plain_space_at);
}

fn lock_free_access_checks_agree_with_a_plain_space_at<const P: u64>() {
    let mm = SharedAddressSpace::from(space::<P>());
    let mut plain = space::<P>();
    let pages = 64u64;
    let mut rng = SmallRng::seed_from_u64(31);
    let (mut guarded, mut grown) = (0, 0);
    for step in 0..if cfg!(miri) { 40 } else { 4_000 } {
        let at = BASE + rng.gen_range(0..pages - 8) * P;
        let len = rng.gen_range(1..8u64) * P;
        let prot = [Prot::READ, Prot::RW, Prot::NONE, Prot::READ | Prot::EXEC][rng.gen_range(0..4)];
        let call = Call { what: rng.gen_range(0..11), at, len, prot, flag: rng.gen_ratio(1, 3) };
        let mut w = mm.write();
        assert_eq!(call.on(&mut w), call.on(&mut plain), "step {step}: {call:?}");
        if step % 50 == 49 {
            // A fork of the writer's space is a plain fork.
            assert_eq!(
                w.fork().unwrap().guard_pages().collect::<Vec<_>>(),
                plain.fork().unwrap().guard_pages().collect::<Vec<_>>()
            );
        }
        // The writer's pages are the plain space's.
        assert_eq!(w.anon_pages().collect::<Vec<_>>(), plain.anon_pages().collect::<Vec<_>>(), "step {step}");
        drop(w);
        let g = mm.pin();
        let ours: Vec<_> = mm.guard_pages(&g).collect();
        assert_eq!(ours, plain.guard_pages().collect::<Vec<_>>(), "step {step}");
        guarded += ours.len();
        for p in 0..pages + 24 {
            let addr = BASE + p * P + rng.gen_range(0..P);
            assert_eq!(mm.is_guard_page(addr, &g), plain.is_guard_page(addr));
            for a in [Access::Read, Access::Write, Access::Exec] {
                assert_eq!(
                    mm.check_access(addr, a, &g),
                    plain.check_access(addr, a),
                    "step {step}: {a:?} at {addr:#x}"
                );
            }
            if plain.vma_at(addr).is_none() && plain.check_access(addr, Access::Read).is_ok() {
                grown += 1;
            }
        }
    }
    assert!(guarded > 0, "the calls never left a guard page");
    assert!(grown > 0, "no access would ever grow a stack");
    let plain_again = mm.into_inner();
    plain_again.validate().unwrap();
    assert_eq!(plain_again.guard_pages().collect::<Vec<_>>(), plain.guard_pages().collect::<Vec<_>>());
}

/// Readers checking accesses while the writer installs and removes guard
/// pages and protects pages around them: every eighth page is guarded
/// once, before the readers start, and the page after it never is; both
/// stay writable. A reader must always see the first fault as a guard page
/// and the second not fault, however the writer's changes reshape the
/// trees around them; no page is ever unmapped.
#[test]
fn readers_see_fixed_guard_pages_while_a_writer_changes_others() {
    each_page!(readers_see_fixed_guard_pages_while_a_writer_changes_others_at);
}

fn readers_see_fixed_guard_pages_while_a_writer_changes_others_at<const P: u64>() {
    let (pages, calls, readers) = if cfg!(miri) { (64, 40, 1) } else { (4_096, 20_000, 2) };
    let mm = Arc::new(SharedAddressSpace::from(space::<P>()));
    let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    {
        let mut w = mm.write();
        w.mmap(BASE, pages * P, Prot::RW, anon, None, 0).unwrap();
        for p in (0..pages).step_by(8) {
            w.madvise(BASE + p * P, P, Advice::GuardInstall).unwrap();
        }
    }
    let done = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..readers)
        .map(|r| {
            let (mm, done) = (Arc::clone(&mm), Arc::clone(&done));
            thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(100 + r as u64);
                let (mut bad, mut n) = (0u64, 0u64);
                while !done.load(Ordering::Relaxed) || n == 0 {
                    let g = mm.pin();
                    for _ in 0..64 {
                        let p = rng.gen_range(0..pages);
                        let addr = BASE + p * P + rng.gen_range(0..P);
                        let got = mm.check_access(addr, Access::Write, &g);
                        let ok = match p % 8 {
                            0 => got == Err(Fault::Guard) && mm.is_guard_page(addr, &g),
                            1 => got == Ok(()) && !mm.is_guard_page(addr, &g),
                            _ => matches!(got, Ok(()) | Err(Fault::Guard | Fault::Denied)),
                        };
                        bad += u64::from(!ok);
                        n += 1;
                    }
                }
                (bad, n)
            })
        })
        .collect();
    let mut rng = SmallRng::seed_from_u64(7);
    for _ in 0..calls {
        // Pages 2..=7 of an eight-page group, in one call.
        let group = rng.gen_range(0..pages / 8) * 8;
        let first = group + rng.gen_range(2..8);
        let n = rng.gen_range(1..=group + 8 - first);
        let (at, len) = (BASE + first * P, n * P);
        let mut w = mm.write();
        match rng.gen_range(0..3) {
            0 => w.madvise(at, len, Advice::GuardInstall).unwrap(),
            1 => w.madvise(at, len, Advice::GuardRemove).unwrap(),
            _ => w.mprotect(at, len, [Prot::READ, Prot::RW][rng.gen_range(0..2)]).unwrap(),
        }
    }
    done.store(true, Ordering::Relaxed);
    for h in handles {
        let (bad, n) = h.join().unwrap();
        assert!(n > 0);
        assert_eq!(bad, 0, "a reader saw a fixed guard page unguarded, or the reverse, in {n} checks");
    }
    let mm = Arc::into_inner(mm).expect("readers are gone").into_inner();
    mm.validate().unwrap();
    assert!(mm.vma_count() > 0);
}
