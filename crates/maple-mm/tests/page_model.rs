//! Differential test against a deliberately simple page-granular model:
//! every page's protection, sharing, backing and file page, kept in a
//! `BTreeMap`. Random fixed mmaps, munmaps, mprotects and mremap moves run
//! on both; after every step the address space's tree is validated and
//! every page must agree (VMA boundaries are free to differ: the model has
//! none).

use std::{collections::BTreeMap, sync::Arc};

use maple_mm::{AddressSpace, Errno, MapFlags, MappedFile, MremapFlags, Prot};
use proptest::prelude::*;

mod common;

const BASE: u64 = 0x4000_0000;
const PAGES: u64 = 64;

/// What one page is in the model.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Page {
    prot: u32,
    shared: bool,
    /// 0 = private anonymous, 1.. = file id.
    file: u64,
    /// File page for file mappings.
    file_page: u64,
}

#[derive(Clone, Debug)]
enum Op {
    Map { page: u64, pages: u64, prot: u32, shared: bool, file: u64, off: u64 },
    Unmap { page: u64, pages: u64 },
    Protect { page: u64, pages: u64, prot: u32 },
    Move { page: u64, pages: u64, to: u64 },
    Shrink { page: u64, pages: u64, keep: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    let range = (0..PAGES).prop_flat_map(|p| (Just(p), 1..=(PAGES - p).min(16)));
    prop_oneof![
        (range.clone(), 0..8u32, any::<bool>(), 0..3u64, 0..32u64)
            .prop_map(|((page, pages), prot, shared, file, off)| Op::Map { page, pages, prot, shared, file, off }),
        range.clone().prop_map(|(page, pages)| Op::Unmap { page, pages }),
        (range.clone(), 0..8u32).prop_map(|((page, pages), prot)| Op::Protect { page, pages, prot }),
        (range.clone(), 0..PAGES).prop_map(|((page, pages), to)| Op::Move { page, pages, to: to.min(PAGES - pages) }),
        (range, 0..16u64).prop_map(|((page, pages), keep)| Op::Shrink { page, pages, keep: keep.min(pages) }),
    ]
}

struct Model {
    pages: BTreeMap<u64, Page>,
}

impl Model {
    fn mapped(&self, p: u64) -> bool {
        self.pages.contains_key(&p)
    }

    /// Applies `op` with Linux's semantics as plainly as possible; returns
    /// the result the call should have.
    fn apply(&mut self, op: &Op) -> Result<(), Errno> {
        match *op {
            Op::Map { page, pages, prot, shared, file, off } => {
                for i in 0..pages {
                    let p = Page { prot: prot & 7, shared, file, file_page: if file == 0 { 0 } else { off + i } };
                    self.pages.insert(page + i, p);
                }
                Ok(())
            }
            Op::Unmap { page, pages } => {
                for i in page..page + pages {
                    self.pages.remove(&i);
                }
                Ok(())
            }
            Op::Protect { page, pages, prot } => {
                // Linux: stop at the first hole; a hole at the start changes nothing.
                for i in page..page + pages {
                    match self.pages.get_mut(&i) {
                        Some(p) => p.prot = prot & 7,
                        None => return Err(Errno::ENOMEM),
                    }
                }
                Ok(())
            }
            Op::Move { page, pages, to } => {
                let overlap = to < page + pages && page < to + pages;
                if overlap {
                    return Err(Errno::EINVAL);
                }
                if !self.mapped(page) {
                    return Err(Errno::EFAULT);
                }
                // Every mapped piece moves by the same distance and
                // replaces what is at its target; a gap's target stays.
                let moved: Vec<(u64, Page)> =
                    (page..page + pages).filter_map(|i| self.pages.remove(&i).map(|p| (i - page + to, p))).collect();
                for (i, p) in moved {
                    self.pages.insert(i, p);
                }
                Ok(())
            }
            Op::Shrink { page, pages, keep } => {
                if keep == 0 {
                    return Err(Errno::EINVAL);
                }
                if !self.mapped(page) {
                    return Err(Errno::EFAULT);
                }
                for i in page + keep..page + pages {
                    self.pages.remove(&i);
                }
                Ok(())
            }
        }
    }
}

fn run(layout: maple_mm::Layout, ops: &[Op]) -> Result<(), TestCaseError> {
    let pg = layout.page_size.bytes();
    let files: Vec<Arc<MappedFile>> =
        (0..3).map(|i| Arc::new(MappedFile::new(8, 1, 100 + i, format!("/data/f{i}")))).collect();
    let mut mm = AddressSpace::with_layout(layout);
    let mut model = Model { pages: BTreeMap::new() };
    let at = |p: u64| BASE + p * pg;
    for (step, op) in ops.iter().enumerate() {
        let got = match *op {
            Op::Map { page, pages, prot, shared, file, off } => {
                let mut f = MapFlags::FIXED | if shared { MapFlags::SHARED } else { MapFlags::PRIVATE };
                let backing = if file == 0 {
                    f |= MapFlags::ANONYMOUS;
                    None
                } else {
                    Some(Arc::clone(&files[file as usize]))
                };
                mm.mmap(at(page), pages * pg, Prot::from_bits_retain(prot), f, backing, off * pg).map(drop)
            }
            Op::Unmap { page, pages } => mm.munmap(at(page), pages * pg),
            Op::Protect { page, pages, prot } => mm.mprotect(at(page), pages * pg, Prot::from_bits_retain(prot)),
            Op::Move { page, pages, to } => {
                let f = MremapFlags::MAYMOVE | MremapFlags::FIXED;
                mm.mremap(at(page), pages * pg, pages * pg, f, at(to)).map(drop)
            }
            Op::Shrink { page, pages, keep } => {
                mm.mremap(at(page), pages * pg, keep * pg, MremapFlags::empty(), 0).map(drop)
            }
        };
        let want = model.apply(op);
        prop_assert_eq!(got, want, "step {}: {:?}", step, op);
        mm.validate().map_err(|e| TestCaseError::fail(format!("step {step}: {e}")))?;
        for p in 0..PAGES {
            let v = mm.vma_at(at(p)).map(|v| {
                let file = v.file().map_or(0, |f| if f.anon_shmem { 0 } else { f.inode - 100 });
                let file_page = if v.is_anonymous() || v.file().is_some_and(|f| f.anon_shmem) {
                    0
                } else {
                    (v.offset() + (at(p) - v.start())) / pg
                };
                Page { prot: v.prot().bits(), shared: v.is_shared(), file, file_page }
            });
            let want = model.pages.get(&p).cloned();
            prop_assert_eq!(v, want, "page {} after step {}: {:?}", p, step, op);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn pages_agree_with_the_page_model(layout in prop::sample::select(common::layouts()), ops in prop::collection::vec(op(), 1..60)) {
        run(layout, &ops)?;
    }
}
