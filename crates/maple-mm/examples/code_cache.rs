//! An emulator's translation cache kept coherent by an observer: the
//! emulator translates a guest code page the first time the guest runs
//! it, and must drop the translation as soon as the page stops being that
//! code (unmapped, made non-executable, replaced by another file page or
//! written memory, moved away). QEMU's user mode does this in
//! `page_set_flags`; here the address space tells the cache what each call
//! changed, and nothing else is consulted.
//!
//! A random workload (a JIT's write-then-execute flips, loaders mapping
//! and unmapping libraries, `mremap` moves, madvise, mlock) runs with the
//! cache checked after every call: every translation kept must still
//! describe the page it was made from. It prints the hit rate and the
//! invalidations, and fails on the first stale translation.
//!
//! ```sh
//! cargo run --example code_cache -p maple-mm
//! ```

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use maple_mm::{
    Access, AddressSpace, Advice, AnonVma, Change, MapFlags, MappedFile, MremapFlags, Prot, Vma, PAGE_SIZE,
};
use rand::{rngs::SmallRng, Rng, SeedableRng};

/// What a translation was made from: the page's source and protection.
#[derive(Clone, Debug, PartialEq)]
struct Source {
    file: Option<u64>,
    file_page: u64,
    anon: Option<AnonVma>,
    prot: Prot,
}

fn source(v: &Vma<'_>, addr: u64) -> Source {
    Source {
        file: v.file().map(|f| f.inode),
        file_page: (v.offset() + (addr - v.start())) / PAGE_SIZE,
        anon: v.anon_vma(),
        prot: v.prot(),
    }
}

#[derive(Default)]
struct Cache {
    /// Guest page → what its translation was made from.
    blocks: HashMap<u64, Source>,
    invalidated: u64,
}

impl Cache {
    /// Drops the translations of `[start, end)`.
    fn invalidate(&mut self, start: u64, end: u64) {
        let before = self.blocks.len();
        self.blocks.retain(|&p, _| p < start || p >= end);
        self.invalidated += (before - self.blocks.len()) as u64;
    }

    /// What a change means for translated code: any change to a page's
    /// source or protection ends its translations; a page newly mapped
    /// has none.
    fn heard(&mut self, c: &Change) {
        match c {
            Change::Mapped { .. } => {}
            Change::Unmapped { range, .. } | Change::Changed { range, .. } => self.invalidate(range.start, range.end),
            // (A cache could move the translations with the pages; this
            // one drops them.)
            Change::Moved { from, .. } => self.invalidate(from.start, from.end),
        }
    }
}

/// The translations that no longer describe their page: none, if the
/// observer told the cache everything.
fn stale(mm: &AddressSpace, cache: &Cache) -> Vec<u64> {
    let mut out: Vec<u64> = cache
        .blocks
        .iter()
        .filter(|(&p, s)| mm.vma_at(p).map(|v| source(&v, p)) != Some((*s).clone()))
        .map(|(&p, _)| p)
        .collect();
    out.sort_unstable();
    out
}

const BASE: u64 = 0x1000_0000;
const PAGES: u64 = 64;

/// Runs `steps` random calls from `seed`; returns (runs, hits,
/// invalidations), or the first stale translation.
fn run(seed: u64, steps: usize) -> Result<(u64, u64, u64), String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let libs: Vec<Arc<MappedFile>> =
        (0..3).map(|i| Arc::new(MappedFile::new(8, 1, 500 + i, format!("/lib/lib{i}.so")))).collect();
    let cache = Arc::new(Mutex::new(Cache::default()));
    let mut mm = AddressSpace::new();
    let c = Arc::clone(&cache);
    mm.set_observer(move |change: &Change| c.lock().unwrap().heard(change));
    let (mut runs, mut hits) = (0u64, 0u64);
    let page = |rng: &mut SmallRng| BASE + rng.gen_range(0..PAGES) * PAGE_SIZE;
    for step in 0..steps {
        let at = page(&mut rng);
        let len = rng.gen_range(1..8u64) * PAGE_SIZE;
        let fixed = MapFlags::PRIVATE | MapFlags::FIXED;
        // The call's result does not matter: a failure must leave the
        // cache right too.
        let _ = match rng.gen_range(0..10) {
            0 => {
                let lib = Arc::clone(&libs[rng.gen_range(0..libs.len())]);
                mm.mmap(at, len, Prot::READ | Prot::EXEC, fixed, Some(lib), rng.gen_range(0..16) * PAGE_SIZE).map(drop)
            }
            1 => mm.mmap(at, len, Prot::RW, fixed | MapFlags::ANONYMOUS, None, 0).map(drop),
            // A JIT: write the code, then make it executable.
            2 => mm.touch(at, len),
            3 => mm.mprotect(at, len, Prot::READ | Prot::EXEC),
            4 => mm.mprotect(at, len, Prot::RW),
            5 => mm.munmap(at, len),
            6 => {
                let to = page(&mut rng);
                mm.mremap(at, len, len, MremapFlags::MAYMOVE | MremapFlags::FIXED, to).map(drop)
            }
            7 => mm.madvise(at, len, Advice::DontFork),
            8 => mm.mlock(at, len),
            _ => mm.set_anon_name(at, len, Some("jit")),
        };
        // The guest runs a few pages: translated once, then from the cache.
        for _ in 0..8 {
            let pc = page(&mut rng);
            if mm.check_access(pc, Access::Exec).is_err() {
                continue;
            }
            runs += 1;
            let mut cache = cache.lock().unwrap();
            match cache.blocks.entry(pc) {
                std::collections::hash_map::Entry::Occupied(_) => hits += 1,
                std::collections::hash_map::Entry::Vacant(e) => {
                    if let Some(v) = mm.vma_at(pc) {
                        e.insert(source(&v, pc));
                    }
                }
            }
        }
        let cache = cache.lock().unwrap();
        if let Some(p) = stale(&mm, &cache).first() {
            return Err(format!("seed {seed}, step {step}: the translation of page {p:#x} is stale"));
        }
    }
    let invalidated = cache.lock().unwrap().invalidated;
    Ok((runs, hits, invalidated))
}

fn main() {
    let (mut runs, mut hits, mut invalidated) = (0, 0, 0);
    for seed in 0..20 {
        match run(seed, 2_000) {
            Ok((r, h, i)) => {
                runs += r;
                hits += h;
                invalidated += i;
            }
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
    }
    println!(
        "{runs} code pages run, {:.1} % from the cache, {invalidated} translations dropped by the observer, 0 stale",
        100.0 * hits as f64 / runs.max(1) as f64
    );
}

#[test]
fn no_translation_goes_stale() {
    for seed in 0..5 {
        let (runs, hits, invalidated) = run(seed, 1_000).unwrap();
        assert!(runs > 100 && hits > 0 && invalidated > 0, "seed {seed}: a workload that tests nothing");
    }
}
