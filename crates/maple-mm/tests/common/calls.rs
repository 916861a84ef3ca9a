//! Random address-space calls of every kind, for the property tests:
//! a strategy and the call each makes (its result left to the caller).

use std::{collections::HashMap, sync::Arc};

use maple_mm::{
    rbtree::RbTree, Access, AddressSpace, Advice, MapFlags, MappedFile, MbindFlags, MclFlags, MlockFlags, MremapFlags,
    Prot, ShmFlags, ShmSegment, VmaRef, VmaStore, PAGE_SIZE,
};
use proptest::prelude::*;

/// The window the calls work in, and its size in pages.
pub const BASE: u64 = 0x4000_0000;
pub const PAGES: u64 = 48;

#[derive(Clone, Debug)]
pub enum Op {
    Map {
        page: u64,
        pages: u64,
        prot: u32,
        kind: u8,
        off: u64,
        fixed: bool,
    },
    Unmap {
        page: u64,
        pages: u64,
    },
    Protect {
        page: u64,
        pages: u64,
        prot: u32,
    },
    Remap {
        page: u64,
        pages: u64,
        new_pages: u64,
        to: u64,
        how: u8,
    },
    Brk {
        pages: u64,
    },
    Advise {
        page: u64,
        pages: u64,
        advice: u8,
    },
    Lock {
        page: u64,
        pages: u64,
        how: u8,
    },
    LockAll {
        how: u8,
    },
    Seal {
        page: u64,
        pages: u64,
    },
    Bind {
        page: u64,
        pages: u64,
        mode: u32,
    },
    Name {
        page: u64,
        pages: u64,
        name: u8,
    },
    Touch {
        page: u64,
        pages: u64,
    },
    Fault {
        page: u64,
        write: bool,
    },
    ShmAt {
        page: u64,
        seg: u8,
    },
    ShmDt {
        page: u64,
    },
    Exec,
    /// `set_value` of nothing, 1 or 2 (a `u8`).
    Value {
        page: u64,
        pages: u64,
        v: u8,
    },
    /// A fixed private anonymous `mmap_with` value `v + 1`.
    MapValue {
        page: u64,
        pages: u64,
        prot: u32,
        v: u8,
    },
}

pub fn op() -> impl Strategy<Value = Op> {
    let range = (0..PAGES).prop_flat_map(|p| (Just(p), 1..=(PAGES - p).min(12)));
    let page = 0..PAGES;
    prop_oneof![
        4 => (range.clone(), 0..8u32, 0..5u8, 0..8u64, any::<bool>())
            .prop_map(|((page, pages), prot, kind, off, fixed)| Op::Map { page, pages, prot, kind, off, fixed: fixed || kind == 4 }),
        2 => range.clone().prop_map(|(page, pages)| Op::Unmap { page, pages }),
        3 => (range.clone(), 0..8u32).prop_map(|((page, pages), prot)| Op::Protect { page, pages, prot }),
        3 => (range.clone(), 1..12u64, page.clone(), 0..4u8)
            .prop_map(|((page, pages), new_pages, to, how)| Op::Remap { page, pages, new_pages, to, how }),
        1 => (0..6u64).prop_map(|pages| Op::Brk { pages }),
        3 => (range.clone(), 0..12u8).prop_map(|((page, pages), advice)| Op::Advise { page, pages, advice }),
        2 => (range.clone(), 0..3u8).prop_map(|((page, pages), how)| Op::Lock { page, pages, how }),
        1 => (0..3u8).prop_map(|how| Op::LockAll { how }),
        1 => range.clone().prop_map(|(page, pages)| Op::Seal { page, pages }),
        1 => (range.clone(), 0..4u32).prop_map(|((page, pages), mode)| Op::Bind { page, pages, mode }),
        2 => (range.clone(), 0..3u8).prop_map(|((page, pages), name)| Op::Name { page, pages, name }),
        2 => range.clone().prop_map(|(page, pages)| Op::Touch { page, pages }),
        1 => (page.clone(), any::<bool>()).prop_map(|(page, write)| Op::Fault { page, write }),
        1 => (page.clone(), 0..2u8).prop_map(|(page, seg)| Op::ShmAt { page, seg }),
        1 => page.prop_map(|page| Op::ShmDt { page }),
        1 => Just(Op::Exec),
        2 => (range.clone(), 0..3u8).prop_map(|((page, pages), v)| Op::Value { page, pages, v }),
        2 => (range, 0..8u32, 0..2u8).prop_map(|((page, pages), prot, v)| Op::MapValue { page, pages, prot, v }),
    ]
}

/// One of the layouts modelled (see [`super::layouts`]).
pub fn layout() -> impl Strategy<Value = maple_mm::Layout> {
    prop::sample::select(super::layouts())
}

/// [`op`] without the embedder's values.
pub fn op_without_values() -> impl Strategy<Value = Op> {
    op().prop_filter("no values", |o| !matches!(o, Op::Value { .. } | Op::MapValue { .. }))
}

/// `exec`, which each kind of space has of its own.
pub trait Exec {
    fn exec(&mut self);
}

impl Exec for AddressSpace {
    fn exec(&mut self) {
        AddressSpace::<maple_mm::maple_tree::MapleTree<VmaRef>>::exec(self);
    }
}

impl Exec for AddressSpace<RbTree<VmaRef>> {
    fn exec(&mut self) {
        AddressSpace::<RbTree<VmaRef>>::exec(self);
    }
}

/// Page `p` of the window, with pages of the default layout.
pub const fn at(p: u64) -> u64 {
    at_in(PAGE_SIZE, p)
}

/// Page `p` of the window, with pages of `page_size` bytes.
pub const fn at_in(page_size: u64, p: u64) -> u64 {
    BASE + p * page_size
}

/// Runs `op`: the address it mapped at (0 for a call that maps nothing),
/// `None` if it failed.
pub fn call<T: VmaStore>(mm: &mut AddressSpace<T>, op: &Op, files: &[Arc<MappedFile>]) -> Option<u64>
where
    AddressSpace<T>: Exec,
{
    // Pages of the space's size.
    let pg = mm.page_size().bytes();
    // Lengths of `n` pages, most of them short of the last page's end by
    // a part of a page, which every call rounds up to whole pages of the
    // space's size.
    let len = |n: u64| n * pg - (n % 4) * (pg / 4);
    let whole = |n: u64| n * pg;
    let at = |p: u64| at_in(pg, p);
    let done = |r: maple_mm::Result<()>| r.map(|()| 0);
    let ret = match *op {
        Op::Map { page, pages, prot, kind, off, fixed } => {
            let mut f = if kind == 2 { MapFlags::SHARED } else { MapFlags::PRIVATE };
            if fixed {
                f |= MapFlags::FIXED;
            }
            let file = match kind {
                0 | 2 => {
                    f |= MapFlags::ANONYMOUS;
                    None
                }
                4 => {
                    f |= MapFlags::ANONYMOUS | MapFlags::GROWSDOWN;
                    None
                }
                _ => Some(Arc::clone(&files[usize::from(kind) % files.len()])),
            };
            mm.mmap(at(page), len(pages), Prot::from_bits_retain(prot), f, file, whole(off))
        }
        Op::Unmap { page, pages } => done(mm.munmap(at(page), len(pages))),
        Op::Protect { page, pages, prot } => done(mm.mprotect(at(page), len(pages), Prot::from_bits_retain(prot))),
        Op::Remap { page, pages, new_pages, to, how } => {
            let flags = match how {
                0 => MremapFlags::empty(),
                1 => MremapFlags::MAYMOVE,
                2 => MremapFlags::MAYMOVE | MremapFlags::FIXED,
                _ => MremapFlags::MAYMOVE | MremapFlags::DONTUNMAP,
            };
            let new = if how == 3 { pages } else { new_pages };
            mm.mremap(at(page), len(pages), len(new), flags, at(to))
        }
        Op::Brk { pages } => {
            let base = mm.brk_state().map_or(0, |b| b.start);
            mm.brk(base + whole(pages));
            Ok(0)
        }
        Op::Advise { page, pages, advice } => {
            let a = [
                Advice::Normal,
                Advice::Random,
                Advice::Sequential,
                Advice::DontFork,
                Advice::DoFork,
                Advice::WipeOnFork,
                Advice::DontDump,
                Advice::HugePage,
                Advice::NoHugePage,
                Advice::PopulateWrite,
                Advice::GuardInstall,
                Advice::GuardRemove,
            ][usize::from(advice)];
            done(mm.madvise(at(page), len(pages), a))
        }
        Op::Lock { page, pages, how } => done(match how {
            0 => mm.mlock(at(page), len(pages)),
            1 => mm.mlock2(at(page), len(pages), MlockFlags::ONFAULT),
            _ => mm.munlock(at(page), len(pages)),
        }),
        Op::LockAll { how } => done(match how {
            0 => mm.mlockall(MclFlags::CURRENT),
            1 => mm.mlockall(MclFlags::CURRENT | MclFlags::FUTURE),
            _ => mm.munlockall(),
        }),
        Op::Seal { page, pages } => done(mm.mseal(at(page), len(pages), 0)),
        Op::Bind { page, pages, mode } => done(mm.mbind(at(page), len(pages), mode, 0b1, MbindFlags::empty())),
        Op::Name { page, pages, name } => {
            done(mm.set_anon_name(at(page), len(pages), [None, Some("a"), Some("b")][usize::from(name)]))
        }
        Op::Touch { page, pages } => done(mm.touch(at(page), len(pages))),
        Op::Fault { page, write } => mm
            .fault(at(page), if write { Access::Write } else { Access::Read })
            .map(|_| 0)
            .map_err(|_| maple_mm::Errno::EFAULT),
        Op::ShmAt { page, seg } => {
            let s = ShmSegment { key: 0, id: 7 + i32::from(seg), size: 3 * pg };
            mm.shmat(&s, at(page), ShmFlags::empty())
        }
        Op::ShmDt { page } => done(mm.shmdt(at(page))),
        Op::Exec => {
            Exec::exec(mm);
            Ok(0)
        }
        Op::Value { page, pages, v } => {
            done(mm.set_value(at(page), len(pages), [None, Some(1u8), Some(2)][usize::from(v)]))
        }
        Op::MapValue { page, pages, prot, v } => {
            let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
            mm.mmap_with(at(page), len(pages), Prot::from_bits_retain(prot), f, None, 0, v + 1)
        }
    };
    ret.ok()
}

/// Two spaces alike in everything a user can see, up to the identities
/// each space makes for itself: their anon_vmas are told apart by a
/// renaming that must be one to one, and shared anonymous memory by
/// everything but its inode number.
pub fn equivalent<A: VmaStore, B: VmaStore>(a: &AddressSpace<A>, b: &AddressSpace<B>) -> Result<(), String> {
    let mut ids: HashMap<u64, u64> = HashMap::new();
    let mut back: HashMap<u64, u64> = HashMap::new();
    let (va, vb): (Vec<_>, Vec<_>) = (a.iter().collect(), b.iter().collect());
    if va.len() != vb.len() {
        return Err(format!("{} VMAs against {}", va.len(), vb.len()));
    }
    for (x, y) in va.iter().zip(&vb) {
        // (Shared anonymous memory made after the copy gets an inode
        // number of its own on each side.)
        let file = |v: &maple_mm::Vma<'_>| {
            v.file().map(|f| {
                (f.dev_major, f.dev_minor, if f.anon_shmem { 0 } else { f.inode }, f.path.clone(), f.anon_shmem)
            })
        };
        let plain = |v: &maple_mm::Vma<'_>| {
            (
                v.range(),
                v.flags(),
                file(v),
                v.offset(),
                v.name().map(|n| n.to_string()),
                v.label().map(str::to_owned),
                v.policy().cloned(),
                v.value::<u8>().copied(),
            )
        };
        if plain(x) != plain(y) {
            return Err(format!("{x:?} against {y:?}"));
        }
        match (x.anon_vma(), y.anon_vma()) {
            (None, None) => {}
            (Some(p), Some(q)) if p.is_forked() == q.is_forked() => {
                if *ids.entry(p.id()).or_insert(q.id()) != q.id() || *back.entry(q.id()).or_insert(p.id()) != p.id() {
                    return Err(format!("anon_vmas shared differently at {:#x}", x.start()));
                }
            }
            _ => return Err(format!("anon_vma differs at {:#x}", x.start())),
        }
    }
    if !a.anon_pages().eq(b.anon_pages()) {
        return Err("anonymous pages differ".into());
    }
    if !a.guard_pages().eq(b.guard_pages()) {
        return Err("guard pages differ".into());
    }
    if (a.brk_state(), a.total_vm(), a.locked_vm(), a.data_vm())
        != (b.brk_state(), b.total_vm(), b.locked_vm(), b.data_vm())
    {
        return Err("break or counts differ".into());
    }
    Ok(())
}
