//! Address-space behaviour: names, fork, allocation failures, maps files,
//! and cases from Linux's own VMA tests.

use std::sync::Arc;

use maple_mm::{
    Access, AddressSpace, Advice, AnonName, Brk, Errno, Fault, Layout, MapFlags, MappedFile, MbindFlags, MclFlags,
    MlockFlags, MremapFlags, Prot, VmFlags, PAGE_SIZE,
};

/// The host's page, for the tests of this process's own memory.
const P: u64 = PAGE_SIZE;
const BASE: u64 = 0x7000_0000;

mod common;

use common::{layout_for, space};

fn anon() -> MapFlags {
    MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED
}

/// `start-end perms` of every VMA, relative to `BASE` in pages.
fn layout(mm: &AddressSpace) -> Vec<(u64, u64, String)> {
    let p = mm.page_size().bytes();
    mm.iter()
        .map(|v| ((v.start() - BASE) / p, (v.end() - BASE) / p, String::from_utf8(v.perms().to_vec()).unwrap()))
        .collect()
}

/// `MADV_FREE`.
fn free() -> Advice {
    Advice::from_code(8).unwrap()
}

/// Everything about every VMA, hidden state included.
fn full(mm: &AddressSpace) -> String {
    let vmas: String = mm.iter().map(|v| format!("{v:?}\n")).collect();
    vmas + &format!(
        "guards {:?}\nanon {:?}\nlazy {:?}\n",
        mm.guard_pages().collect::<Vec<_>>(),
        mm.anon_pages().collect::<Vec<_>>(),
        mm.lazy_free_pages().collect::<Vec<_>>()
    )
}

#[test]
fn names_follow_the_prctl_rules() {
    each_page!(names_follow_the_prctl_rules_at);
}

fn names_follow_the_prctl_rules_at<const P: u64>() {
    assert!(AnonName::new(&"a".repeat(79)).is_ok());
    assert_eq!(AnonName::new(&"a".repeat(80)).unwrap_err(), Errno::EINVAL);
    for bad in ["a\\b", "a`b", "a$b", "a[b", "a]b", "tab\tname", "é"] {
        assert_eq!(AnonName::new(bad).unwrap_err(), Errno::EINVAL, "{bad:?}");
    }
    let mut mm = space::<P>();
    mm.mmap(BASE, 4 * P, Prot::RW, anon(), None, 0).unwrap();
    let file = Arc::new(MappedFile::new(8, 1, 42, "/lib/x.so"));
    mm.mmap(BASE + 8 * P, 2 * P, Prot::READ, MapFlags::PRIVATE | MapFlags::FIXED, Some(file), 0).unwrap();
    // A file mapping cannot be named; a hole is skipped and reported.
    assert_eq!(mm.set_anon_name(BASE + 8 * P, P, Some("x")), Err(Errno::EBADF));
    assert_eq!(mm.set_anon_name(BASE, 6 * P, Some("arena")), Err(Errno::ENOMEM));
    assert_eq!(mm.vma_at(BASE).unwrap().name().map(AnonName::as_str), Some("arena"));
    assert_eq!(mm.set_anon_name(BASE + 1, P, Some("x")), Err(Errno::EINVAL));
    assert!(mm.maps().contains("[anon:arena]"));
    // An empty name clears.
    mm.set_anon_name(BASE, 4 * P, Some("")).unwrap();
    assert!(mm.vma_at(BASE).unwrap().name().is_none());
}

#[test]
fn names_are_shared_by_split_and_fork_and_renaming_allocates() {
    each_page!(names_are_shared_by_split_and_fork_and_renaming_allocates_at);
}

fn names_are_shared_by_split_and_fork_and_renaming_allocates_at<const P: u64>() {
    let mut mm = space::<P>();
    mm.mmap(BASE, 6 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.set_anon_name(BASE, 6 * P, Some("heap-arena")).unwrap();
    let name = mm.vma_at(BASE).unwrap().name().unwrap().clone();
    assert_eq!(name.ref_count(), 2, "one VMA and our clone");
    // A split shares the object (the tree shares the whole VMA).
    mm.mprotect(BASE + 2 * P, P, Prot::READ).unwrap();
    assert_eq!(mm.vma_count(), 3);
    for v in mm.iter() {
        assert!(AnonName::ptr_eq(v.name().unwrap(), &name), "split copied the name");
    }
    // Fork shares it too: no string is copied (never-written VMAs share
    // their whole record with the child; written ones get a new record
    // holding the same name).
    mm.touch(mm.vma_at(BASE).unwrap().start(), P).unwrap();
    let before = name.ref_count();
    let child = mm.fork().unwrap();
    for v in child.iter() {
        assert!(AnonName::ptr_eq(v.name().unwrap(), &name), "fork copied the name");
    }
    assert_eq!(name.ref_count(), before + 1, "the written VMA's new record holds the name");
    drop(child);
    assert_eq!(name.ref_count(), before, "the child's references are dropped with it");
    // Renaming a range gives it a new object; the rest keeps the old one.
    mm.set_anon_name(BASE, P, Some("other")).unwrap();
    let renamed = mm.vma_at(BASE).unwrap().name().unwrap().clone();
    assert!(!AnonName::ptr_eq(&renamed, &name));
    assert!(AnonName::ptr_eq(mm.vma_at(BASE + 5 * P).unwrap().name().unwrap(), &name));
    // Same text: neighbours merge again.
    mm.set_anon_name(BASE, P, Some("heap-arena")).unwrap();
    mm.mprotect(BASE + 2 * P, P, Prot::RW).unwrap();
    assert_eq!(mm.vma_count(), 1);
    drop(mm);
    assert_eq!(name.ref_count(), 1, "every reference dropped");
}

#[test]
fn fork_leaves_out_dontfork_and_wipes_wipeonfork() {
    each_page!(fork_leaves_out_dontfork_and_wipes_wipeonfork_at);
}

fn fork_leaves_out_dontfork_and_wipes_wipeonfork_at<const P: u64>() {
    let mut mm = space::<P>();
    mm.mmap(BASE, 3 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.touch(BASE, 3 * P).unwrap();
    mm.madvise(BASE + P, P, Advice::DontFork).unwrap();
    // Looks the same in maps, but the middle page is its own VMA.
    assert_eq!(mm.vma_count(), 3);
    mm.mmap(BASE + 8 * P, 2 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.touch(BASE + 8 * P, P).unwrap();
    mm.madvise(BASE + 8 * P, 2 * P, Advice::WipeOnFork).unwrap();
    let child = mm.fork().unwrap();
    assert_eq!(layout(&child), [(0, 1, "rw-p".into()), (2, 3, "rw-p".into()), (8, 10, "rw-p".into())]);
    let wiped = child.vma_at(BASE + 8 * P).unwrap();
    assert!(wiped.anon_vma().is_none(), "wipe-on-fork memory starts empty in the child");
    assert!(wiped.flags().contains(VmFlags::WIPEONFORK));
    let inherited = child.vma_at(BASE).unwrap().anon_vma().unwrap();
    assert!(inherited.is_forked());
    // The insertion-based fork gives the same child.
    let slow = mm.fork_by_insertion().unwrap();
    assert_eq!(slow.maps(), child.maps());
    let pages = |m: &AddressSpace| {
        let v = |i: &mut dyn Iterator<Item = _>| i.collect::<Vec<_>>();
        (v(&mut m.guard_pages()), v(&mut m.anon_pages()), v(&mut m.lazy_free_pages()))
    };
    assert_eq!(pages(&slow), pages(&child));
    // The child's anonymous pages: the parent's, but for the don't-fork
    // page and the wipe-on-fork one.
    assert_eq!(pages(&child).1, [BASE..BASE + P, BASE + 2 * P..BASE + 3 * P]);
    assert_eq!(pages(&mm).1, [BASE..BASE + 3 * P, BASE + 8 * P..BASE + 9 * P]);
    assert_eq!(mm.vma_count(), 4, "the parent is unchanged");
}

/// A fork whose VMA copy or tree node allocation fails at any point
/// returns ENOMEM, leaves the parent exactly as it was, and leaks nothing.
#[test]
fn fork_fails_cleanly_at_every_allocation() {
    each_page!(fork_fails_cleanly_at_every_allocation_at);
}

fn fork_fails_cleanly_at_every_allocation_at<const P: u64>() {
    let mut mm = space::<P>();
    for i in 0..60 {
        let prot = if i % 3 == 0 { Prot::READ } else { Prot::RW };
        mm.mmap(BASE + i * 2 * P, P, prot, anon(), None, 0).unwrap();
    }
    mm.set_anon_name(BASE, 120 * P, Some("n")).unwrap_err(); // holes: ENOMEM, named anyway
    let name = mm.vma_at(BASE).unwrap().name().unwrap().clone();
    let refs = name.ref_count();
    let want = full(&mm);
    let nodes = maple_tree::fault::live();
    for n in 1..=60 {
        maple_mm::fault::fail_nth_vma_copy(n);
        assert_eq!(mm.fork().unwrap_err(), Errno::ENOMEM, "copy {n}");
        maple_mm::fault::fail_nth_vma_copy(0);
        assert_eq!(full(&mm), want);
        assert_eq!(name.ref_count(), refs, "name references leaked (copy {n})");
        assert_eq!(maple_tree::fault::live(), nodes, "nodes leaked (copy {n})");
    }
    for n in 1..=20 {
        maple_tree::fault::fail_nth_alloc(n);
        let r = mm.fork();
        let fired = !maple_tree::fault::armed();
        maple_tree::fault::fail_nth_alloc(0);
        if !fired {
            assert!(r.is_ok());
            break;
        }
        assert_eq!(r.unwrap_err(), Errno::ENOMEM);
        assert_eq!(full(&mm), want);
        assert_eq!(name.ref_count(), refs);
        assert_eq!(maple_tree::fault::live(), nodes);
    }
    mm.validate().unwrap();
}

/// Every call that fails on an allocation leaves the address space exactly
/// as it was (hidden state included), whichever allocation fails.
#[test]
fn failed_allocations_change_nothing() {
    each_page!(failed_allocations_change_nothing_at);
}

fn failed_allocations_change_nothing_at<const P: u64>() {
    let file = Arc::new(MappedFile::new(8, 1, 42, "/data/f"));
    let setup = || {
        let mut mm = space::<P>();
        mm.set_brk_base(BASE - 64 * P).unwrap();
        mm.brk(BASE - 60 * P);
        // Adjacent one-page VMAs that cannot merge (alternating
        // protection): calls that make them alike merge many of them, so
        // several writes allocate and a failure in a later one must undo
        // the earlier ones.
        for i in 0..300u64 {
            let prot = [Prot::READ, Prot::RW][(i % 2) as usize];
            mm.mmap(BASE + i * P, P, prot, anon(), None, 0).unwrap();
        }
        mm.mmap(BASE + 400 * P, 8 * P, Prot::READ, MapFlags::PRIVATE | MapFlags::FIXED, Some(file.clone()), 0).unwrap();
        // Locked one-page VMAs, alternating read-only and inaccessible.
        for i in 0..40u64 {
            let prot = [Prot::READ, Prot::NONE][(i % 2) as usize];
            mm.mmap(BASE + (420 + i) * P, P, prot, anon() | MapFlags::LOCKED, None, 0).unwrap();
        }
        // Guard pages, every third page of a stretch: unmapping, moving
        // and removing them must be undone too.
        for i in (60..90u64).step_by(3) {
            mm.madvise(BASE + i * P, P, Advice::GuardInstall).unwrap();
        }
        // Anonymous pages, written one by one in the writable VMAs, the
        // later ones made lazily freeable.
        for i in (101..141u64).step_by(2) {
            mm.touch(BASE + i * P, P).unwrap();
        }
        for i in (121..141u64).step_by(4) {
            mm.madvise(BASE + i * P, P, free()).unwrap();
        }
        // Pages interleaved (a memory policy), cut from their neighbours.
        mm.mbind(BASE + 200 * P, 20 * P, 3, 1, MbindFlags::empty()).unwrap();
        // Two stacks, far above everything else, with holes below them.
        let stack = anon() | MapFlags::GROWSDOWN;
        mm.mmap(BASE + 995 * P, 2 * P, Prot::RW, stack, None, 0).unwrap();
        mm.mmap(BASE + 1000 * P, 64 * P, Prot::RW, stack, None, 0).unwrap();
        // Anonymous pages apart, so that a new one needs room.
        for i in (1001..1064u64).step_by(2) {
            mm.touch(BASE + i * P, P).unwrap();
        }
        mm
    };
    let fault = |m: &mut AddressSpace, at: u64, access: Access| {
        m.fault(at, access).map(|()| 0).map_err(|f| if f == Fault::OutOfMemory { Errno::ENOMEM } else { Errno::EFAULT })
    };
    type Call = Box<dyn Fn(&mut AddressSpace) -> Result<u64, Errno>>;
    let calls: Vec<(&str, Call)> = vec![
        ("mmap over many", Box::new(|m| m.mmap(BASE + P, 150 * P, Prot::RW, anon(), None, 0))),
        ("mmap hint", Box::new(|m| m.mmap(0, 3 * P, Prot::RW, MapFlags::PRIVATE | MapFlags::ANONYMOUS, None, 0))),
        ("munmap", Box::new(|m| m.munmap(BASE + P, 140 * P).map(|()| 0))),
        ("mprotect", Box::new(|m| m.mprotect(BASE + 3 * P, 130 * P, Prot::RW).map(|()| 0))),
        ("mprotect split", Box::new(|m| m.mprotect(BASE + 3 * P, P, Prot::NONE).map(|()| 0))),
        ("madvise", Box::new(|m| m.madvise(BASE + P, 120 * P, Advice::DontFork).map(|()| 0))),
        ("name", Box::new(|m| m.set_anon_name(BASE + P, 120 * P, Some("x")).map(|()| 0))),
        ("touch", Box::new(|m| m.touch(BASE + 3 * P, 2 * P).map(|()| 0))),
        // Both stacks grow, then the pages are written.
        ("touch growing", Box::new(|m| m.touch(BASE + 990 * P, 12 * P).map(|()| 0))),
        ("write fault growing", Box::new(move |m| fault(m, BASE + 985 * P, Access::Write))),
        ("read fault, a growth in place", Box::new(move |m| fault(m, BASE + 985 * P, Access::Read))),
        ("write fault", Box::new(move |m| fault(m, BASE + 1002 * P, Access::Write))),
        ("mremap move", Box::new(|m| m.mremap(BASE + 3 * P, 2 * P, 9 * P, MremapFlags::MAYMOVE, 0))),
        (
            "mremap fixed",
            Box::new(|m| {
                m.mremap(BASE + 3 * P, 2 * P, 2 * P, MremapFlags::MAYMOVE | MremapFlags::FIXED, BASE + 100 * P)
            }),
        ),
        (
            "mremap many",
            Box::new(|m| {
                m.mremap(BASE + 3 * P, 90 * P, 90 * P, MremapFlags::MAYMOVE | MremapFlags::FIXED, BASE + 150 * P)
            }),
        ),
        ("brk", Box::new(|m| Ok(m.brk(BASE - 20 * P)))),
        // Refused by RLIMIT_AS, the file VMA cut where the mapping starts.
        (
            "mmap over the limit",
            Box::new(|m| {
                m.set_as_limit(m.total_vm() + P);
                m.mmap(BASE + 403 * P, 10 * P, Prot::READ, anon(), None, 0)
            }),
        ),
        // Locked pieces made writable are written one by one.
        ("mprotect locked", Box::new(|m| m.mprotect(BASE + 420 * P, 40 * P, Prot::RW).map(|()| 0))),
        // Writes up to the first read-only page, then fails (EINVAL).
        ("populate", Box::new(|m| m.madvise(BASE + P, 120 * P, Advice::PopulateWrite).map(|()| 0))),
        ("guard install", Box::new(|m| m.madvise(BASE + P, 120 * P, Advice::GuardInstall).map(|()| 0))),
        ("dontneed", Box::new(|m| m.madvise(BASE + 99 * P, 30 * P, Advice::from_code(4).unwrap()).map(|()| 0))),
        ("free", Box::new(|m| m.madvise(BASE + 99 * P, 30 * P, free()).map(|()| 0))),
        ("pageout", Box::new(|m| m.madvise(BASE + 99 * P, 60 * P, Advice::from_code(21).unwrap()).map(|()| 0))),
        ("guard remove", Box::new(|m| m.madvise(BASE + 61 * P, 20 * P, Advice::GuardRemove).map(|()| 0))),
        (
            "mremap guards",
            Box::new(|m| m.mremap(BASE + 60 * P, P, P, MremapFlags::MAYMOVE | MremapFlags::FIXED, BASE + 200 * P)),
        ),
        ("mergeable", Box::new(|m| m.madvise(BASE + P, 120 * P, Advice::Mergeable).map(|()| 0))),
        ("mlock", Box::new(|m| m.mlock(BASE + P, 120 * P).map(|()| 0))),
        ("mlockall", Box::new(|m| m.mlockall(MclFlags::CURRENT | MclFlags::FUTURE).map(|()| 0))),
        ("munlockall", Box::new(|m| m.munlockall().map(|()| 0))),
        ("mseal", Box::new(|m| m.mseal(BASE + P, 120 * P, 0).map(|()| 0))),
        ("mbind", Box::new(|m| m.mbind(BASE + P, 120 * P, 2, 1, MbindFlags::empty()).map(|()| 0))),
        ("mbind back", Box::new(|m| m.mbind(BASE + 190 * P, 40 * P, 0, 0, MbindFlags::empty()).map(|()| 0))),
        (
            "mremap dontunmap",
            Box::new(|m| {
                let flags = MremapFlags::MAYMOVE | MremapFlags::FIXED | MremapFlags::DONTUNMAP;
                m.mremap(BASE + 3 * P, P, P, flags, BASE + 2 * P)
            }),
        ),
    ];
    let mut allocating = 0;
    for (what, call) in &calls {
        let mut ok = setup();
        let want_ok = call(&mut ok);
        let mut n = 1;
        loop {
            let mut mm = setup();
            let before = full(&mm);
            maple_tree::fault::fail_nth_alloc(n);
            let r = call(&mut mm);
            let fired = !maple_tree::fault::armed();
            maple_tree::fault::fail_nth_alloc(0);
            mm.validate().unwrap();
            if !fired {
                assert_eq!(r, want_ok, "{what}");
                break;
            }
            if *what == "brk" {
                assert_eq!(r, Ok(BASE - 60 * P), "a failed brk returns the old break");
            } else {
                assert_eq!(r, Err(Errno::ENOMEM), "{what}: allocation {n}");
            }
            assert_eq!(full(&mm), before, "{what}: allocation {n} changed the space");
            n += 1;
        }
        allocating += usize::from(n > 1);
        assert!(n > 1 || !what.contains("growing"), "{what} never allocated: the sweep tests nothing");
    }
    assert!(allocating >= 4, "only {allocating} calls allocated: the sweep tests little");
}

#[test]
fn maps_round_trip_of_this_process() {
    let text = std::fs::read_to_string("/proc/self/maps").unwrap();
    let mm = AddressSpace::from_maps(&text, "/proc/self/maps").unwrap();
    assert_eq!(mm.maps(), text, "rendering what we parsed gives the file back");
    mm.validate().unwrap();
    let live = AddressSpace::from_self().unwrap();
    assert!(live.find_vma(main_addr()).is_some());
}

/// A fresh private read-write mapping of `len` bytes in this process, for
/// a test to advise, read back through `/proc` and unmap.
#[cfg(target_os = "linux")]
fn scratch_mapping(len: usize) -> u64 {
    // SAFETY: a new anonymous mapping placed by the kernel, replacing
    // nothing; no Rust object lives there.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(at, libc::MAP_FAILED);
    at as u64
}

/// A live process's guard pages come from pagemap: two pages of a fresh
/// mapping fenced off here are guard pages in the space read back, the
/// others not, and an access there faults as the kernel's does.
/// A live process's memory policies come from numa_maps: a scratch
/// mapping's middle page interleaved is cut out with its policy, its
/// neighbours keep none.
#[cfg(target_os = "linux")]
#[test]
fn memory_policies_of_this_process_come_from_numa_maps() {
    if !std::path::Path::new("/proc/self/numa_maps").exists() {
        println!("no NUMA in this kernel: no policies to read");
        return;
    }
    let at = scratch_mapping(3 * PAGE_SIZE as usize);
    let mask: u64 = 1;
    // SAFETY: `mbind` on a mapping this test owns, with a one-word mask
    // that lives through the call; it changes no memory.
    let r = unsafe {
        libc::syscall(libc::SYS_mbind, at + PAGE_SIZE, PAGE_SIZE as usize, 3usize, &raw const mask, 65usize, 0usize)
    };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
    // (Other test threads map and unmap meanwhile: a read of the proc
    // files may be torn, and is tried again.)
    let read = || {
        let mm = AddressSpace::from_self().unwrap();
        let policy = |a: u64| mm.vma_at(a).and_then(|v| v.policy().map(|p| p.to_string()));
        [policy(at), policy(at + PAGE_SIZE), policy(at + 2 * PAGE_SIZE)]
    };
    let want = [None, Some("interleave:0".to_string()), None];
    let got = (0..3).map(|_| read()).find(|g| *g == want).unwrap_or_else(read);
    assert_eq!(got, want);
    // SAFETY: the scratch mapping, which nothing else uses.
    unsafe { libc::munmap(at as *mut _, 3 * PAGE_SIZE as usize) };
}

/// A live process's layout has its own stack limit (a shell that lowers
/// it, then sleeps), which decides how far its stack may grow.
#[cfg(target_os = "linux")]
#[test]
fn a_live_process_has_its_own_stack_limit() {
    let mut child = std::process::Command::new("sh").args(["-c", "ulimit -s 1234 && exec sleep 30"]).spawn().unwrap();
    let pid = child.id();
    // Until the shell has lowered its limit and become `sleep`.
    let mut limit = 0;
    for _ in 0..500 {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() == "sleep" {
            limit = AddressSpace::from_pid(pid).unwrap().layout().stack_limit;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(limit, 1234 * 1024);
    let stack = AddressSpace::from_self().unwrap();
    let stack = stack.iter().find(|v| v.flags().contains(VmFlags::GROWSDOWN)).map(|v| (v.start(), v.end()));
    assert!(stack.is_some(), "this process's [stack] grows down");
}

#[cfg(target_os = "linux")]
#[test]
fn guard_pages_of_this_process_come_from_pagemap() {
    let len = 6 * P as usize;
    let at = scratch_mapping(len);
    // SAFETY: advice on two pages of the scratch mapping, which no Rust
    // object uses.
    let installed = unsafe { libc::madvise((at + 2 * P) as *mut _, 2 * P as usize, 102) == 0 };
    let mm = AddressSpace::from_self().unwrap();
    // SAFETY: the mapping made above, which nothing else uses.
    unsafe { libc::munmap(at as *mut _, len) };
    if !installed {
        // A kernel before 6.13: no guard pages to read.
        return;
    }
    let guards: Vec<u64> = (0..6).filter(|&p| mm.is_guard_page(at + p * P)).collect();
    // (Should this ever fail, say what was read: the VMA's flags tell
    // whether smaps was read at all, or maps instead.)
    assert_eq!(guards, [2, 3], "{:?}", mm.vma_at(at + 2 * P));
    assert_eq!(mm.check_access(at + 2 * P, Access::Read), Err(Fault::Guard));
    assert_eq!(mm.check_access(at + P, Access::Write), Ok(()));
    mm.validate().unwrap();
}

/// A live process's anonymous pages come from pagemap: of a fresh
/// mapping, the two pages written here are anonymous pages in the space
/// read back, the page only read (the zero page) and the others are not.
/// Where page frames are hidden (no `CAP_SYS_ADMIN`), none are read.
#[cfg(target_os = "linux")]
#[test]
fn anonymous_pages_of_this_process_come_from_pagemap() {
    use std::os::unix::fs::FileExt;
    let len = 6 * P as usize;
    let at = scratch_mapping(len);
    // SAFETY: pages of the scratch mapping, which no Rust object uses:
    // two written, one read, through raw pointers.
    unsafe {
        std::ptr::write_volatile((at + P) as *mut u8, 1);
        std::ptr::write_volatile((at + 2 * P) as *mut u8, 1);
        std::ptr::read_volatile((at + 4 * P) as *const u8);
    }
    let mm = AddressSpace::from_self().unwrap();
    // Frames shown: a written page's word has one.
    let mut word = [0u8; 8];
    let f = std::fs::File::open("/proc/self/pagemap").unwrap();
    f.read_exact_at(&mut word, (at + P) / P * 8).unwrap();
    let frames = u64::from_le_bytes(word) & ((1 << 55) - 1) != 0;
    // SAFETY: the mapping made above, which nothing else uses.
    unsafe { libc::munmap(at as *mut _, len) };
    let anon: Vec<u64> = (0..6).filter(|&p| mm.anon_page_count(at + p * P, at + (p + 1) * P) == 1).collect();
    if frames {
        assert_eq!(anon, [1, 2], "{:?}", mm.vma_at(at + P));
    } else {
        assert!(mm.anon_pages().next().is_none());
    }
    mm.validate().unwrap();
}

/// `/proc/self/smaps` gives the flags a maps file hides: a region of this
/// process locked, advised not to be copied on fork and offered to KSM
/// comes back with those flags, cut from its neighbours as Linux cuts it.
#[cfg(target_os = "linux")]
#[test]
fn smaps_of_this_process_give_the_hidden_flags() {
    let len = 4 * P as usize;
    let ksm;
    let at = scratch_mapping(len) as *mut libc::c_void;
    // SAFETY: advice and a lock on pages of the scratch mapping, which no
    // Rust object uses; it is read back, then unmapped.
    let at = unsafe {
        let page = at.cast::<u8>().add(P as usize).cast();
        assert_eq!(libc::mlock(page, P as usize), 0);
        assert_eq!(libc::madvise(at.cast::<u8>().add(2 * P as usize).cast(), P as usize, libc::MADV_DONTFORK), 0);
        // (KSM may be configured out: then the last page is plain.)
        ksm = libc::madvise(at.cast::<u8>().add(3 * P as usize).cast(), P as usize, libc::MADV_MERGEABLE) == 0;
        at as u64
    };
    let mm = AddressSpace::from_self().unwrap();
    let flags = |page: u64| mm.vma_at(at + page * P).map(|v| v.flags()).unwrap();
    // SAFETY: the mapping made above, which nothing else uses.
    unsafe { libc::munmap(at as *mut _, len) };
    assert!(!flags(0).intersects(VmFlags::LOCKED | VmFlags::DONTCOPY));
    assert!(flags(0).contains(VmFlags::ACCOUNT));
    assert!(flags(1).contains(VmFlags::LOCKED));
    assert!(flags(2).contains(VmFlags::DONTCOPY) && !flags(2).contains(VmFlags::LOCKED));
    assert_eq!(flags(3).contains(VmFlags::MERGEABLE), ksm);
    assert_eq!(mm.vma_at(at + P).unwrap().range(), at + P..at + 2 * P);
    mm.validate().unwrap();
}

fn main_addr() -> u64 {
    maps_round_trip_of_this_process as *const () as usize as u64
}

#[test]
fn maps_errors_name_the_line() {
    let good = "00400000-00401000 r-xp 00000000 08:01 12 /bin/x\n";
    for (text, want) in [
        ("00400000-00401000 r-xq 00000000 08:01 12 /bin/x\n", "f:1: bad permissions"),
        ("00400000 r-xp 00000000 08:01 12\n", "f:1: bad address range"),
        ("00401000-00400000 r-xp 00000000 08:01 12\n", "f:1: bad address range"),
        ("00400000-00401000 r-xp 00000000 0801 12\n", "f:1: bad device"),
        ("00400000-00401000 r-xp zz 08:01 12\n", "f:1: bad offset"),
        ("00400000-00401000\n", "f:1: missing permissions"),
        ("00400100-00401000 r-xp 00000000 08:01 12\n", "f:1: bad address range"),
        // Above the top of user space only special mappings may lie (the
        // vsyscall page); without its label the line is a plain mapping
        // (found by tests/hostile_input.rs: it was accepted, and the space
        // then failed its own validation).
        (
            "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0\n",
            "f:1: ffffffffff600000-ffffffffff601000 ends above the top of user space",
        ),
        ("7ffffffff000-800000001000 rw-p 00000000 00:00 0 [stack]\n", "f:1: 7ffffffff000-800000001000 ends above"),
    ] {
        let e = AddressSpace::from_maps(text, "f").unwrap_err();
        assert!(e.to_string().starts_with(want), "{text:?}: {e}");
    }
    let overlap = format!("{good}00400000-00402000 rw-p 00000000 00:00 0\n");
    assert_eq!(AddressSpace::from_maps(&overlap, "f").unwrap_err().line, 2);
    let e = AddressSpace::from_maps_file("/nonexistent/maps").unwrap_err();
    assert_eq!(e.line, 0);
    // The vsyscall page itself, labelled, is fine.
    let vsyscall = "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";
    AddressSpace::from_maps(vsyscall, "f").unwrap().validate().unwrap();
}

#[test]
fn parsed_neighbours_stay_apart_and_heap_grows() {
    let text = "\
55550000-55552000 r--p 00000000 08:01 7 /bin/prog
55552000-55553000 r--p 00002000 08:01 7 /bin/prog
55553000-55554000 rw-p 00003000 08:01 7 /bin/prog
55560000-55581000 rw-p 00000000 00:00 0 [heap]
7ffd0000-7ffd2000 rw-p 00000000 00:00 0 [stack]
";
    let mut mm = AddressSpace::from_maps(text, "t").unwrap();
    assert_eq!(mm.maps().lines().count(), 5);
    // The two read-only lines look mergeable; touching their boundary
    // must not merge them (something hidden kept them apart in Linux).
    mm.mprotect(0x5555_2000, P, Prot::READ).unwrap();
    assert_eq!(mm.vma_count(), 5);
    // brk grows the heap in place.
    assert_eq!(mm.brk_state().unwrap().current, 0x5558_1000);
    assert_eq!(mm.brk(0x5559_0000), 0x5559_0000);
    let heap = mm.maps().lines().find(|l| l.ends_with("[heap]")).unwrap().to_string();
    assert!(heap.starts_with("55560000-55590000 rw-p 00000000 00:00 0 "), "{heap}");
    assert_eq!(mm.vma_count(), 5);
    assert!(mm.maps().contains("[stack]"));
}

/// Two rules of the break the brk oracle found on the kernel (Linux 6.18):
/// a shrink needs something mapped between the two breaks, and a mapping
/// that only touches the heap's ends is not labelled `[heap]`.
#[test]
fn brk_shrinks_only_over_a_mapping_and_labels_only_the_heap() {
    each_page!(brk_shrinks_only_over_a_mapping_and_labels_only_the_heap_at);
}

fn brk_shrinks_only_over_a_mapping_and_labels_only_the_heap_at<const P: u64>() {
    let mut mm = space::<P>();
    mm.set_brk(Brk { start: BASE, current: BASE }).unwrap();
    assert_eq!(mm.brk(BASE + 64 * P), BASE + 64 * P);
    mm.munmap(BASE + 37 * P, 55 * P).unwrap();
    // Nothing between the breaks: the break stays.
    assert_eq!(mm.brk(BASE + 62 * P), BASE + 64 * P);
    // Something there (any mapping, not only the heap): it goes.
    mm.mmap(BASE + 63 * P, P, Prot::READ, anon(), None, 0).unwrap();
    assert_eq!(mm.brk(BASE + 62 * P), BASE + 62 * P);
    assert_eq!(mm.vma_count(), 1);
    // A mapping at the break, or ending at the heap's start, is no heap.
    mm.mmap(BASE + 62 * P, 3 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.mmap(BASE - 4 * P, 4 * P, Prot::READ, anon(), None, 0).unwrap();
    let maps = mm.maps();
    let heap: Vec<&str> = maps.lines().filter(|l| l.ends_with("[heap]")).collect();
    assert_eq!(heap.len(), 1, "{maps}");
    assert!(heap[0].starts_with(&format!("{:x}-{:x} ", BASE, BASE + 37 * P)), "{maps}");
}

/// RLIMIT_AS as the brk oracle measured it on Linux 6.18: every call that
/// would take more address space fails, a fixed mapping counting what it
/// replaces as freed and leaving the VMAs it would replace cut at both
/// ends; a limit below what is mapped refuses even growth by nothing.
#[test]
fn the_address_space_limit_refuses_growth() {
    each_page!(the_address_space_limit_refuses_growth_at);
}

fn the_address_space_limit_refuses_growth_at<const P: u64>() {
    let mut mm = AddressSpace::with_layout(Layout { as_limit: 20 * P, ..layout_for::<P>() });
    mm.mmap(BASE, 16 * P, Prot::RW, anon(), None, 0).unwrap();
    assert_eq!(mm.total_vm(), 16 * P);
    // Five more pages do not fit; the 16-page VMA is cut where the call
    // would have replaced it (pages 12 and 17 are the ends).
    assert_eq!(mm.mmap(BASE + 12 * P, 9 * P, Prot::READ, anon(), None, 0), Err(Errno::ENOMEM));
    assert_eq!(layout(&mm), [(0, 12, "rw-p".into()), (12, 16, "rw-p".into())]);
    // Over the mapped pages, only the new ones count: 4 + 4 fit.
    mm.mmap(BASE + 12 * P, 8 * P, Prot::READ, anon(), None, 0).unwrap();
    assert_eq!(mm.total_vm(), 20 * P);
    // brk keeps its break; mremap does not grow, in place or moving.
    mm.set_brk(Brk { start: BASE + 64 * P, current: BASE + 64 * P }).unwrap();
    assert_eq!(mm.brk(BASE + 65 * P), BASE + 64 * P);
    let grow = MremapFlags::MAYMOVE;
    assert_eq!(mm.mremap(BASE, 2 * P, 3 * P, grow, 0), Err(Errno::ENOMEM));
    // A move of the same size takes nothing more; one that leaves its
    // source mapped (DONTUNMAP) does, and fails with its target unmapped.
    let fixed = MremapFlags::MAYMOVE | MremapFlags::FIXED;
    assert_eq!(mm.mremap(BASE, 2 * P, 2 * P, fixed, BASE + 40 * P), Ok(BASE + 40 * P));
    let keep = MremapFlags::MAYMOVE | MremapFlags::DONTUNMAP;
    assert_eq!(mm.mremap(BASE + 2 * P, 2 * P, 2 * P, keep, BASE + 13 * P), Err(Errno::ENOMEM));
    assert_eq!(mm.total_vm(), 20 * P, "a hint is not unmapped");
    // A fixed target is unmapped first (one mapped page here, freeing
    // one of the two the copy needs): the call fails with it gone.
    assert_eq!(mm.mremap(BASE + 2 * P, 2 * P, 2 * P, keep | fixed, BASE + 19 * P), Err(Errno::ENOMEM));
    assert!(mm.vma_at(BASE + 19 * P).is_none());
    assert_eq!(mm.total_vm(), 19 * P);
    mm.munmap(BASE + 13 * P, 2 * P).unwrap();
    assert_eq!(mm.total_vm(), 17 * P);
    // A stack does not grow past it either, with or without a lock.
    mm.mmap(BASE + 300 * P, P, Prot::RW, anon() | MapFlags::GROWSDOWN, None, 0).unwrap();
    mm.mmap(BASE + 13 * P, 2 * P, Prot::RW, anon(), None, 0).unwrap();
    assert_eq!(mm.total_vm(), 20 * P);
    assert_eq!(mm.fault(BASE + 299 * P, Access::Write), Err(Fault::Unmapped));
    let shared = maple_mm::SharedAddressSpace::from(mm.clone());
    let g = shared.pin();
    assert_eq!(shared.total_vm(&g), 20 * P);
    assert_eq!(shared.check_access(BASE + 299 * P, Access::Write, &g), Err(Fault::Unmapped));
    // Room for it: it grows; and both agree.
    mm.munmap(BASE + 13 * P, P).unwrap();
    let shared = maple_mm::SharedAddressSpace::from(mm.clone());
    let g = shared.pin();
    assert_eq!(shared.check_access(BASE + 299 * P, Access::Write, &g), Ok(()));
    assert_eq!(mm.fault(BASE + 299 * P, Access::Write), Ok(()));
    // A limit set below what is mapped refuses a fixed mapping over
    // mapped pages, which takes nothing more.
    mm.set_as_limit(10 * P);
    assert_eq!(mm.mmap(BASE, P, Prot::READ, anon(), None, 0), Err(Errno::ENOMEM));
    mm.set_as_limit(u64::MAX);
    mm.mmap(BASE, P, Prot::READ, anon(), None, 0).unwrap();
}

/// RLIMIT_DATA as the brk oracle measured it: private writable memory
/// only, counted by mmap, mprotect (what it makes writable), mremap and
/// brk, which also counts the heap with the program's data, shrinks too.
#[test]
fn the_data_limit_refuses_private_writable_growth() {
    each_page!(the_data_limit_refuses_private_writable_growth_at);
}

fn the_data_limit_refuses_private_writable_growth_at<const P: u64>() {
    let mut mm = AddressSpace::with_layout(Layout { data_limit: 10 * P, data_segment: 2 * P, ..layout_for::<P>() });
    assert_eq!(mm.mmap(BASE, 20 * P, Prot::RW, anon(), None, 0), Err(Errno::ENOMEM));
    mm.mmap(BASE, 20 * P, Prot::READ, anon(), None, 0).unwrap();
    mm.mmap(BASE + 40 * P, 20 * P, Prot::RW, MapFlags::SHARED | MapFlags::ANONYMOUS | MapFlags::FIXED, None, 0)
        .unwrap();
    mm.mmap(BASE + 80 * P, 20 * P, Prot::RW, anon() | MapFlags::GROWSDOWN, None, 0).unwrap();
    assert_eq!(mm.data_vm(), 0);
    assert_eq!(mm.mprotect(BASE, 20 * P, Prot::RW), Err(Errno::ENOMEM));
    mm.mprotect(BASE, 8 * P, Prot::RW).unwrap();
    assert_eq!(mm.data_vm(), 8 * P);
    assert_eq!(mm.mremap(BASE, 8 * P, 11 * P, MremapFlags::MAYMOVE, 0), Err(Errno::ENOMEM));
    mm.mremap(BASE, 8 * P, 10 * P, MremapFlags::MAYMOVE, 0).unwrap();
    // The heap: its pages and the program's data (2 pages) within 10.
    mm.set_data_limit(u64::MAX);
    mm.set_brk(Brk { start: BASE + 200 * P, current: BASE + 200 * P }).unwrap();
    assert_eq!(mm.brk(BASE + 208 * P), BASE + 208 * P);
    mm.set_data_limit(9 * P);
    assert_eq!(mm.brk(BASE + 208 * P - 1), BASE + 208 * P, "8 + 2 pages do not fit: even a shrink fails");
    assert_eq!(mm.brk(BASE + 207 * P), BASE + 207 * P);
}

/// RLIMIT_MEMLOCK as the brk oracle measured it (a process without
/// CAP_IPC_LOCK): mlock counts the pages not locked yet, locked mappings
/// and growths fail with EAGAIN, a limit of 0 refuses every lock, and
/// MREMAP_DONTUNMAP leaves the pages it unlocks counted.
#[test]
fn the_locked_memory_limit_refuses_locks() {
    each_page!(the_locked_memory_limit_refuses_locks_at);
}

fn the_locked_memory_limit_refuses_locks_at<const P: u64>() {
    let mut mm = AddressSpace::with_layout(Layout { memlock_limit: 15 * P, ..layout_for::<P>() });
    mm.mmap(BASE, 20 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.mlock(BASE, 10 * P).unwrap();
    assert_eq!(mm.locked_vm(), 10 * P);
    mm.mlock(BASE, 12 * P).unwrap();
    assert_eq!(mm.mlock(BASE, 16 * P), Err(Errno::ENOMEM));
    assert_eq!(mm.locked_vm(), 12 * P);
    let locked = anon() | MapFlags::LOCKED;
    assert_eq!(mm.mmap(BASE + 100 * P, 4 * P, Prot::RW, locked, None, 0), Err(Errno::EAGAIN));
    mm.mmap(BASE + 100 * P, 3 * P, Prot::RW, locked, None, 0).unwrap();
    assert_eq!(mm.mremap(BASE + 100 * P, 3 * P, 4 * P, MremapFlags::empty(), 0), Err(Errno::EAGAIN));
    assert_eq!(mm.mlockall(MclFlags::CURRENT), Err(Errno::ENOMEM), "23 pages mapped, 15 allowed");
    // The pages DONTUNMAP unlocks stay counted, also once unmapped.
    mm.set_memlock_limit(u64::MAX);
    let keep = MremapFlags::MAYMOVE | MremapFlags::FIXED | MremapFlags::DONTUNMAP;
    mm.mremap(BASE + 100 * P, P, P, keep, BASE + 200 * P).unwrap();
    assert_eq!(mm.locked_vm(), 12 * P + P + 3 * P);
    mm.munmap(BASE + 100 * P, 3 * P).unwrap();
    assert_eq!(mm.locked_vm(), 12 * P + P + 3 * P);
    assert_eq!(mm.fork().unwrap().locked_vm(), 0, "a child locks nothing");
    // A locked stack grows only within the limit: the lock-free check
    // agrees, the pages DONTUNMAP left counted included (16 locked now).
    mm.mmap(BASE + 700 * P, P, Prot::RW, locked | MapFlags::GROWSDOWN, None, 0).unwrap();
    mm.set_memlock_limit(18 * P);
    let shared = maple_mm::SharedAddressSpace::from(mm.clone());
    let g = shared.pin();
    assert_eq!(shared.check_access(BASE + 698 * P, Access::Write, &g), Err(Fault::Unmapped));
    assert_eq!(mm.fault(BASE + 698 * P, Access::Write), Err(Fault::Unmapped));
    assert_eq!(shared.check_access(BASE + 699 * P, Access::Write, &g), Ok(()));
    assert_eq!(mm.fault(BASE + 699 * P, Access::Write), Ok(()));
    mm.set_memlock_limit(0);
    assert_eq!(mm.mlock(BASE, P), Err(Errno::EPERM));
    assert_eq!(mm.mlockall(MclFlags::FUTURE), Err(Errno::EPERM));
    mm.munlock(BASE, 20 * P).unwrap();
}

// ---- cases from Linux's tools/testing/vma and selftests/mm ----

/// merge.c: mprotect of a middle page splits; restoring merges; a written
/// region does not merge with a separately written one.
#[test]
fn linux_merge_cases() {
    each_page!(linux_merge_cases_at);
}

fn linux_merge_cases_at<const P: u64>() {
    let mut mm = space::<P>();
    mm.mmap(BASE, 3 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.mprotect(BASE + P, P, Prot::READ).unwrap();
    assert_eq!(layout(&mm), [(0, 1, "rw-p".into()), (1, 2, "r--p".into()), (2, 3, "rw-p".into())]);
    mm.mprotect(BASE + P, P, Prot::RW).unwrap();
    assert_eq!(layout(&mm), [(0, 3, "rw-p".into())]);
    // Two mappings, each written before they touch: they stay apart.
    let mut mm = space::<P>();
    mm.mmap(BASE, 2 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.touch(BASE, P).unwrap();
    mm.mmap(BASE + 4 * P, 2 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.touch(BASE + 4 * P, P).unwrap();
    let moved = mm.mremap(BASE + 4 * P, 2 * P, 2 * P, MremapFlags::MAYMOVE | MremapFlags::FIXED, BASE + 2 * P).unwrap();
    assert_eq!(moved, BASE + 2 * P);
    assert_eq!(layout(&mm), [(0, 2, "rw-p".into()), (2, 4, "rw-p".into())]);
    // An untouched region moved next to a written one merges.
    let mut mm = space::<P>();
    mm.mmap(BASE, 2 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.touch(BASE, P).unwrap();
    mm.mmap(BASE + 8 * P, 2 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.mremap(BASE + 8 * P, 2 * P, 2 * P, MremapFlags::MAYMOVE | MremapFlags::FIXED, BASE + 2 * P).unwrap();
    assert_eq!(layout(&mm), [(0, 4, "rw-p".into())]);
    // Hidden flags keep apart what looks alike: don't-fork, no-reserve.
    let mut mm = space::<P>();
    mm.mmap(BASE, 3 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.madvise(BASE + P, P, Advice::DontFork).unwrap();
    assert_eq!(mm.vma_count(), 3);
    mm.mmap(BASE + 3 * P, P, Prot::RW, anon() | MapFlags::NORESERVE, None, 0).unwrap();
    assert_eq!(mm.vma_count(), 4);
    // An untouched RW region set back to PROT_NONE rejoins a reservation.
    let mut mm = space::<P>();
    mm.mmap(BASE, 4 * P, Prot::NONE, anon(), None, 0).unwrap();
    mm.mprotect(BASE + P, P, Prot::RW).unwrap();
    mm.mprotect(BASE + P, P, Prot::NONE).unwrap();
    assert_eq!(mm.vma_count(), 1);
    mm.mprotect(BASE + P, P, Prot::RW).unwrap();
    mm.touch(BASE + P, P).unwrap();
    mm.mprotect(BASE + P, P, Prot::NONE).unwrap();
    assert_eq!(mm.vma_count(), 3, "written memory keeps its charge");
}

/// map_fixed_noreplace.c: NOREPLACE succeeds on free space, fails with
/// EEXIST on any overlap (start, end, inside, covering) and changes nothing.
#[test]
fn linux_map_fixed_noreplace_cases() {
    each_page!(linux_map_fixed_noreplace_cases_at);
}

fn linux_map_fixed_noreplace_cases_at<const P: u64>() {
    let nr = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED_NOREPLACE;
    let mut mm = space::<P>();
    let base = BASE;
    assert_eq!(mm.mmap(base, 5 * P, Prot::RW, nr, None, 0), Ok(base));
    mm.munmap(base, P).unwrap();
    mm.munmap(base + 4 * P, P).unwrap();
    let before = mm.maps();
    for (start, len) in [(1, 1), (0, 2), (3, 2), (0, 5), (2, 1), (3, 1)] {
        assert_eq!(mm.mmap(base + start * P, len * P, Prot::RW, nr, None, 0), Err(Errno::EEXIST), "{start}+{len}");
        assert_eq!(mm.maps(), before);
    }
    assert_eq!(mm.mmap(base, P, Prot::RW, nr, None, 0), Ok(base));
    assert_eq!(mm.mmap(base + 4 * P, P, Prot::RW, nr, None, 0), Ok(base + 4 * P));
    assert_eq!(mm.vma_count(), 1, "all merged");
}

/// mremap_test.c: expanding in place when there is room, moving when not,
/// and the error cases.
#[test]
fn linux_mremap_cases() {
    each_page!(linux_mremap_cases_at);
}

fn linux_mremap_cases_at<const P: u64>() {
    let mut mm = space::<P>();
    mm.mmap(BASE, 3 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.munmap(BASE + 2 * P, P).unwrap();
    // Expand into the freed page: in place, merged.
    assert_eq!(mm.mremap(BASE, 2 * P, 3 * P, MremapFlags::empty(), 0), Ok(BASE));
    assert_eq!(layout(&mm), [(0, 3, "rw-p".into())]);
    // No room and no MAYMOVE.
    mm.mmap(BASE + 3 * P, P, Prot::READ, anon(), None, 0).unwrap();
    assert_eq!(mm.mremap(BASE, 3 * P, 4 * P, MremapFlags::empty(), 0), Err(Errno::ENOMEM));
    // Errors.
    assert_eq!(mm.mremap(BASE + 1, P, P, MremapFlags::empty(), 0), Err(Errno::EINVAL));
    assert_eq!(mm.mremap(BASE, P, 0, MremapFlags::empty(), 0), Err(Errno::EINVAL));
    assert_eq!(mm.mremap(BASE, P, P, MremapFlags::FIXED, BASE + 10 * P), Err(Errno::EINVAL));
    assert_eq!(mm.mremap(BASE, P, 2 * P, MremapFlags::MAYMOVE | MremapFlags::DONTUNMAP, 0), Err(Errno::EINVAL));
    assert_eq!(mm.mremap(BASE + 100 * P, P, 2 * P, MremapFlags::MAYMOVE, 0), Err(Errno::EFAULT));
    assert_eq!(mm.mremap(BASE, 2 * P, 2 * P, MremapFlags::MAYMOVE | MremapFlags::FIXED, BASE + P), Err(Errno::EINVAL));
    // Growing across two VMAs is not allowed.
    assert_eq!(mm.mremap(BASE, 4 * P, 5 * P, MremapFlags::MAYMOVE, 0), Err(Errno::EFAULT));
    // Shrinking may cut across VMAs.
    assert_eq!(mm.mremap(BASE, 4 * P, P, MremapFlags::empty(), 0), Ok(BASE));
    assert_eq!(layout(&mm), [(0, 1, "rw-p".into())]);
    mm.validate().unwrap();
}

#[test]
fn placement_is_top_down_with_a_stack_guard_gap() {
    each_page!(placement_is_top_down_with_a_stack_guard_gap_at);
}

fn placement_is_top_down_with_a_stack_guard_gap_at<const P: u64>() {
    let mut mm = space::<P>();
    let base = mm.layout().mmap_base;
    let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let a = mm.mmap(0, P, Prot::RW, f, None, 0).unwrap();
    assert_eq!(a, base - P);
    let b = mm.mmap(0, P, Prot::RW, f, None, 0).unwrap();
    assert_eq!(b, base - 2 * P);
    assert_eq!(mm.vma_count(), 1, "adjacent anonymous mappings merge");
    // A grows-down VMA keeps 256 pages free below it.
    let gap = mm.layout().stack_guard_gap;
    let stack = mm.mmap(BASE, 4 * P, Prot::RW, anon() | MapFlags::GROWSDOWN, None, 0).unwrap();
    let hinted = mm.mmap(stack - 2 * P, P, Prot::RW, f, None, 0).unwrap();
    assert_ne!(hinted, stack - 2 * P, "a hint inside the guard gap is not taken");
    assert_eq!(mm.mmap(stack - gap - P, P, Prot::RW, f, None, 0), Ok(stack - gap - P));
    // Huge-page-aligned placement of a huge-page-multiple anonymous
    // mapping (2 MiB with 4 KiB pages, 32 MiB with 16 KiB, 512 MiB with 64).
    let pmd = mm.page_size().pmd_size();
    let big = mm.mmap(0, 2 * pmd, Prot::RW, f, None, 0).unwrap();
    assert_eq!(big % pmd, 0);
    assert_ne!(mm.mmap(0, 2 * pmd + P, Prot::RW, f, None, 0).unwrap() % pmd, 0, "not a multiple: not aligned");
    // Bottom-up layout.
    let mut up = AddressSpace::with_layout(maple_mm::Layout { bottom_up: true, ..layout_for::<P>() });
    let lo = up.mmap(0, P, Prot::RW, f, None, 0).unwrap();
    assert_eq!(lo, up.layout().legacy_base);
    assert_eq!(mm.get_unmapped_area(0, 0), Err(Errno::ENOMEM));
}

#[test]
fn bad_input_changes_nothing() {
    each_page!(bad_input_changes_nothing_at);
}

fn bad_input_changes_nothing_at<const P: u64>() {
    let mut mm = space::<P>();
    mm.mmap(BASE, 4 * P, Prot::RW, anon(), None, 0).unwrap();
    let before = full(&mm);
    let task = mm.layout().task_size;
    let priv_anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    assert_eq!(mm.mmap(BASE, 0, Prot::RW, anon(), None, 0), Err(Errno::EINVAL));
    assert_eq!(mm.mmap(BASE + 1, P, Prot::RW, anon(), None, 0), Err(Errno::EINVAL));
    assert_eq!(mm.mmap(0, u64::MAX, Prot::RW, priv_anon, None, 0), Err(Errno::ENOMEM));
    assert_eq!(mm.mmap(task - P, 2 * P, Prot::RW, anon(), None, 0), Err(Errno::ENOMEM));
    assert_eq!(mm.mmap(0, P, Prot::RW, MapFlags::ANONYMOUS, None, 0), Err(Errno::EINVAL));
    assert_eq!(mm.mmap(0, P, Prot::RW, MapFlags::PRIVATE, None, 0), Err(Errno::EBADF));
    assert_eq!(mm.mmap(0, P, Prot::RW, priv_anon, None, 5), Err(Errno::EINVAL));
    let f = Arc::new(MappedFile::new(1, 2, 3, "/f"));
    assert_eq!(mm.mmap(0, P, Prot::RW, MapFlags::PRIVATE, Some(f.clone()), !(P - 1)), Err(Errno::EOVERFLOW));
    let ro = Arc::new(MappedFile::new(1, 2, 3, "/f").read_only());
    assert_eq!(mm.mmap(0, P, Prot::RW, MapFlags::SHARED, Some(ro), 0), Err(Errno::EACCES));
    let below_min = (mm.layout().mmap_min_addr - 1) & !(P - 1);
    assert_eq!(mm.mmap(below_min, P, Prot::RW, anon(), None, 0), Err(Errno::EPERM));
    assert_eq!(mm.munmap(BASE + 1, P), Err(Errno::EINVAL));
    assert_eq!(mm.munmap(BASE, 0), Err(Errno::EINVAL));
    assert_eq!(mm.munmap(task, P), Err(Errno::EINVAL));
    assert_eq!(mm.mprotect(BASE + 1, P, Prot::READ), Err(Errno::EINVAL));
    assert_eq!(mm.mprotect(BASE, P, Prot::from_bits_retain(0x40)), Err(Errno::EINVAL));
    assert_eq!(mm.mprotect(BASE, u64::MAX - P, Prot::READ), Err(Errno::ENOMEM));
    assert_eq!(mm.mprotect(BASE + 8 * P, P, Prot::READ), Err(Errno::ENOMEM));
    assert_eq!(mm.mprotect(BASE, 0, Prot::READ), Ok(()));
    assert_eq!(mm.madvise(BASE, P, Advice::WipeOnFork), Ok(()));
    mm.madvise(BASE, P, Advice::KeepOnFork).unwrap();
    assert_eq!(Advice::from_code(12345), None);
    assert_eq!(mm.madvise(BASE + 1, P, Advice::DontFork), Err(Errno::EINVAL));
    assert_eq!(mm.touch(BASE + 8 * P, P), Err(Errno::EFAULT));
    assert_eq!(mm.mremap(BASE, P, P, MremapFlags::from_bits_retain(64), 0), Err(Errno::EINVAL));
    assert_eq!(full(&mm), before);
    // A partial mprotect over a hole is Linux's documented exception.
    mm.mmap(BASE + 6 * P, P, Prot::RW, anon(), None, 0).unwrap();
    assert_eq!(mm.mprotect(BASE, 7 * P, Prot::READ), Err(Errno::ENOMEM));
    assert_eq!(mm.vma_at(BASE).unwrap().prot(), Prot::READ);
    assert_eq!(mm.vma_at(BASE + 6 * P).unwrap().prot(), Prot::RW);
}

/// Measured on Linux 6.18 (a C program doing the same calls): a shared
/// anonymous mapping's shmem object keeps the length of the `mmap` that
/// made it, so the pages `mremap` grows a mapping of it by raise `SIGBUS`
/// (`MADV_POPULATE_WRITE` says `EFAULT`), while one shrunk and grown back
/// stays within it; a file mapping's pages past the file's last page raise
/// `SIGBUS` too (the page holding the end is whole). The kernel oracle
/// found the first: the model let a write through that killed the
/// process.
#[test]
fn writes_past_the_end_of_a_mapped_object_fault() {
    each_page!(writes_past_the_end_of_a_mapped_object_fault_at);
}

fn writes_past_the_end_of_a_mapped_object_fault_at<const P: u64>() {
    let shared = MapFlags::SHARED | MapFlags::ANONYMOUS | MapFlags::FIXED;
    let mut mm = space::<P>();
    mm.mmap(BASE + 9 * P, 11 * P, Prot::RW, shared, None, 0).unwrap();
    // Pages 16..20 (object pages 7..11) moved to 27 and grown to 11 pages:
    // object pages 7..18, of which 11.. are past the object.
    let to = BASE + 27 * P;
    assert_eq!(mm.mremap(BASE + 16 * P, 4 * P, 11 * P, MremapFlags::MAYMOVE | MremapFlags::FIXED, to), Ok(to));
    assert_eq!(mm.touch(to, 4 * P), Ok(()));
    let before = full(&mm);
    assert_eq!(mm.touch(to, 5 * P), Err(Errno::EFAULT));
    assert_eq!(mm.touch(to + 10 * P, 1), Err(Errno::EFAULT));
    assert_eq!(mm.madvise(to, 11 * P, Advice::PopulateWrite), Err(Errno::EFAULT));
    assert_eq!(mm.madvise(to + 4 * P, P, Advice::PopulateWrite), Err(Errno::EFAULT));
    assert_eq!(full(&mm), before, "a failed write changes nothing here (shared memory takes no anon_vma)");
    // Shrunk and grown back in place: still inside its object.
    mm.mmap(BASE + 40 * P, 4 * P, Prot::RW, shared, None, 0).unwrap();
    mm.mremap(BASE + 40 * P, 4 * P, 2 * P, MremapFlags::empty(), 0).unwrap();
    mm.mremap(BASE + 40 * P, 2 * P, 4 * P, MremapFlags::empty(), 0).unwrap();
    assert_eq!(mm.touch(BASE + 43 * P, P), Ok(()));

    // A file of two pages and 100 bytes, mapped privately over four.
    let file = Arc::new(MappedFile::new(8, 1, 42, "/data/f").with_size(2 * P + 100));
    let private = MapFlags::PRIVATE | MapFlags::FIXED;
    mm.mmap(BASE + 50 * P, 4 * P, Prot::RW, private, Some(Arc::clone(&file)), 0).unwrap();
    let before = full(&mm);
    assert_eq!(mm.touch(BASE + 50 * P, 4 * P), Err(Errno::EFAULT));
    assert_eq!(full(&mm), before, "a failed touch changes nothing");
    assert_eq!(mm.touch(BASE + 50 * P, 3 * P), Ok(()));
    assert!(mm.vma_at(BASE + 50 * P).unwrap().anon_vma().is_some());
    // Mapped from page 3 on, a populating mmap writes nothing (Linux
    // ignores its prefault's failure), but the failing write fault has
    // prepared the VMA's anon_vma (seed 597,896 of a million).
    mm.mmap(BASE + 60 * P, P, Prot::RW, private | MapFlags::POPULATE, Some(Arc::clone(&file)), 3 * P).unwrap();
    assert!(mm.vma_at(BASE + 60 * P).unwrap().anon_vma().is_some());
    mm.mmap(BASE + 62 * P, P, Prot::RW, private | MapFlags::POPULATE, Some(Arc::clone(&file)), 2 * P).unwrap();
    assert!(mm.vma_at(BASE + 62 * P).unwrap().anon_vma().is_some());
    // The same file with its size unknown: every page counts as backed.
    let unknown = Arc::new(MappedFile::new(8, 1, 42, "/data/f"));
    mm.mmap(BASE + 70 * P, 4 * P, Prot::RW, private, Some(unknown), 0).unwrap();
    assert_eq!(mm.touch(BASE + 70 * P, 4 * P), Ok(()));
    mm.validate().unwrap();
}

/// `MADV_POPULATE_WRITE` as Linux 6.18 does it (measured): pages written in
/// address order up to the first that cannot be, which stays written; a
/// hole is `ENOMEM`, a mapping without write permission `EINVAL` (not
/// `EFAULT`, as one might guess).
#[test]
fn populate_write_stops_at_the_first_page_it_cannot_write() {
    each_page!(populate_write_stops_at_the_first_page_it_cannot_write_at);
}

fn populate_write_stops_at_the_first_page_it_cannot_write_at<const P: u64>() {
    let mut mm = space::<P>();
    mm.mmap(BASE, 2 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.mmap(BASE + 2 * P, 2 * P, Prot::READ, anon(), None, 0).unwrap();
    mm.mmap(BASE + 6 * P, 2 * P, Prot::RW, anon(), None, 0).unwrap();
    assert_eq!(mm.madvise(BASE + 2 * P, 2 * P, Advice::PopulateWrite), Err(Errno::EINVAL));
    assert_eq!(mm.mprotect(BASE + 2 * P, 2 * P, Prot::NONE), Ok(()));
    assert_eq!(mm.madvise(BASE + 2 * P, 2 * P, Advice::PopulateWrite), Err(Errno::EINVAL));
    // Written up to the read-only mapping, which stops it.
    assert_eq!(mm.madvise(BASE, 8 * P, Advice::PopulateWrite), Err(Errno::EINVAL));
    assert!(mm.vma_at(BASE).unwrap().anon_vma().is_some());
    assert!(mm.vma_at(BASE + 6 * P).unwrap().anon_vma().is_none());
    // A hole stops it the same way, with ENOMEM.
    mm.munmap(BASE + 2 * P, 2 * P).unwrap();
    mm.mmap(BASE + 2 * P, 2 * P, Prot::RW, anon() | MapFlags::NORESERVE, None, 0).unwrap();
    assert_eq!(mm.madvise(BASE + 2 * P, 6 * P, Advice::PopulateWrite), Err(Errno::ENOMEM));
    assert!(mm.vma_at(BASE + 2 * P).unwrap().anon_vma().is_some());
    assert!(mm.vma_at(BASE + 6 * P).unwrap().anon_vma().is_none());
    assert_eq!(mm.madvise(BASE + 6 * P, 2 * P, Advice::PopulateWrite), Ok(()));
    assert!(mm.vma_at(BASE + 6 * P).unwrap().anon_vma().is_some());
    mm.validate().unwrap();
}

/// Rules the kernel oracle found once it gave every advice and mapped
/// locked memory.
#[test]
fn advice_and_locks_follow_linux() {
    each_page!(advice_and_locks_follow_linux_at);
}

fn advice_and_locks_follow_linux_at<const P: u64>() {
    let adv = |c: i32| Advice::from_code(c).unwrap();
    let locked = anon() | MapFlags::LOCKED;
    // KSM (on in Linux's usual configurations): a flag, so it cuts.
    let mut mm = space::<P>();
    mm.mmap(BASE, 6 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.madvise(BASE + 2 * P, 2 * P, adv(12)).unwrap();
    assert_eq!(mm.vma_count(), 3);
    mm.madvise(BASE, 6 * P, adv(13)).unwrap();
    assert_eq!(mm.vma_count(), 1);
    // Locked memory refuses page dropping and reclaim, and guard markers.
    mm.mmap(BASE + 8 * P, 4 * P, Prot::RW, locked, None, 0).unwrap();
    for (code, want) in [(4, Err(Errno::EINVAL)), (24, Ok(())), (20, Err(Errno::EINVAL)), (21, Err(Errno::EINVAL))] {
        assert_eq!(mm.madvise(BASE + 8 * P, 4 * P, adv(code)), want, "advice {code}");
    }
    assert_eq!(mm.madvise(BASE + 8 * P, 4 * P, adv(102)), Err(Errno::EINVAL));
    assert_eq!(mm.madvise(BASE + 8 * P, 4 * P, adv(103)), Ok(()));
    // MADV_FREE: private anonymous only; MADV_REMOVE: a shared writable file.
    let file = Arc::new(MappedFile::new(8, 1, 42, "/data/f"));
    let ro = Arc::new(MappedFile::new(8, 1, 42, "/data/f").read_only());
    let (private, shared) = (MapFlags::PRIVATE | MapFlags::FIXED, MapFlags::SHARED | MapFlags::FIXED);
    mm.mmap(BASE + 16 * P, 2 * P, Prot::RW, private, Some(Arc::clone(&file)), 0).unwrap();
    mm.mmap(BASE + 18 * P, 2 * P, Prot::RW, shared, Some(Arc::clone(&file)), 2 * P).unwrap();
    mm.mmap(BASE + 20 * P, 2 * P, Prot::READ, shared, Some(ro), 4 * P).unwrap();
    assert_eq!(mm.madvise(BASE + 16 * P, 2 * P, adv(8)), Err(Errno::EINVAL));
    assert_eq!(mm.madvise(BASE, 2 * P, adv(8)), Ok(()));
    assert_eq!(mm.madvise(BASE + 16 * P, 2 * P, adv(9)), Err(Errno::EACCES));
    assert_eq!(mm.madvise(BASE + 18 * P, 2 * P, adv(9)), Ok(()));
    assert_eq!(mm.madvise(BASE + 20 * P, 2 * P, adv(9)), Err(Errno::EACCES));
    assert_eq!(mm.madvise(BASE, 2 * P, adv(9)), Err(Errno::EINVAL));
    // MADV_POPULATE_READ needs read permission.
    mm.mmap(BASE + 24 * P, 2 * P, Prot::NONE, anon(), None, 0).unwrap();
    assert_eq!(mm.madvise(BASE + 24 * P, 2 * P, adv(22)), Err(Errno::EINVAL));
    assert_eq!(mm.madvise(BASE, 2 * P, adv(22)), Ok(()));
    // A guard marker gives the VMA an anon_vma, as a write fault would,
    // and marks all of it (a sticky flag: a fresh neighbour still merges).
    mm.mmap(BASE + 26 * P, 2 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.madvise(BASE + 26 * P, P, adv(102)).unwrap();
    let v = mm.vma_at(BASE + 26 * P).unwrap();
    assert!(v.anon_vma().is_some() && v.flags().contains(VmFlags::MAYBE_GUARD));
    assert_eq!(v.len(), 2 * P, "not cut");
    mm.mmap(BASE + 28 * P, 2 * P, Prot::RW, anon(), None, 0).unwrap();
    assert_eq!(mm.vma_at(BASE + 29 * P).unwrap().start(), BASE + 26 * P, "merged");
    assert!(mm.vma_at(BASE + 29 * P).unwrap().flags().contains(VmFlags::MAYBE_GUARD));
    // A file VMA is marked but gets no anon_vma.
    mm.mmap(BASE + 40 * P, 2 * P, Prot::READ, private, Some(Arc::clone(&file)), 0).unwrap();
    mm.madvise(BASE + 40 * P, P, adv(102)).unwrap();
    let v = mm.vma_at(BASE + 40 * P).unwrap();
    assert!(v.anon_vma().is_none() && v.flags().contains(VmFlags::MAYBE_GUARD));
    mm.validate().unwrap();

    // Locks are not inherited by fork: a fresh mapping merges beside them.
    let mut mm = space::<P>();
    mm.mmap(BASE, 4 * P, Prot::NONE, locked, None, 0).unwrap();
    let mut child = mm.fork().unwrap();
    assert!(!child.vma_at(BASE).unwrap().flags().contains(VmFlags::LOCKED));
    assert!(mm.vma_at(BASE).unwrap().flags().contains(VmFlags::LOCKED));
    child.mmap(BASE + 4 * P, 2 * P, Prot::NONE, anon(), None, 0).unwrap();
    assert_eq!(layout(&child), [(0, 6, "---p".into())]);

    // An unwritten VMA moved (DONTUNMAP) to just before itself merges with
    // its copy, and the range it left stays part of that one VMA.
    let mut mm = space::<P>();
    mm.mmap(BASE + P, P, Prot::READ, anon(), None, 0).unwrap();
    let flags = MremapFlags::MAYMOVE | MremapFlags::FIXED | MremapFlags::DONTUNMAP;
    assert_eq!(mm.mremap(BASE + P, P, P, flags, BASE), Ok(BASE));
    assert_eq!(layout(&mm), [(0, 2, "r--p".into())]);

    // A locked private mapping made writable is written at once: it keeps
    // its charge when made read-only again, and stays apart.
    let mut mm = space::<P>();
    mm.mmap(BASE, 10 * P, Prot::READ, locked, None, 0).unwrap();
    mm.mprotect(BASE + 6 * P, 4 * P, Prot::RW).unwrap();
    assert!(mm.vma_at(BASE + 6 * P).unwrap().anon_vma().is_some());
    mm.mprotect(BASE + 2 * P, 8 * P, Prot::READ).unwrap();
    assert_eq!(layout(&mm), [(0, 6, "r--p".into()), (6, 10, "r--p".into())]);
    mm.validate().unwrap();
    // ... one VMA at a time, as Linux does: a piece written on the way
    // gets its own anon_vma before it could merge with a written
    // neighbour, so the two stay apart.
    let mut mm = space::<P>();
    mm.mmap(BASE, 6 * P, Prot::READ, locked, None, 0).unwrap();
    mm.mprotect(BASE + P, 5 * P, Prot::NONE).unwrap();
    mm.mprotect(BASE + 2 * P, P, Prot::RW).unwrap();
    mm.mprotect(BASE + 2 * P, 4 * P, Prot::NONE).unwrap();
    mm.mprotect(BASE, 4 * P, Prot::RW).unwrap();
    assert_eq!(layout(&mm), [(0, 2, "rw-p".into()), (2, 4, "rw-p".into()), (4, 6, "---p".into())]);
    mm.validate().unwrap();
}

/// What an access gets, as measured on Linux 6.18 (a C program catching the
/// signals; the kernel oracle probes loads and stores in a fork).
#[test]
fn check_access_names_the_signal() {
    each_page!(check_access_names_the_signal_at);
}

fn check_access_names_the_signal_at<const P: u64>() {
    let mut mm = space::<P>();
    let file = Arc::new(MappedFile::new(8, 1, 42, "/data/f").with_size(P));
    mm.mmap(BASE, P, Prot::NONE, anon(), None, 0).unwrap();
    mm.mmap(BASE + P, P, Prot::READ, anon(), None, 0).unwrap();
    mm.mmap(BASE + 2 * P, P, Prot::WRITE, anon(), None, 0).unwrap();
    mm.mmap(BASE + 3 * P, P, Prot::EXEC, anon(), None, 0).unwrap();
    mm.mmap(BASE + 4 * P, 2 * P, Prot::READ, MapFlags::PRIVATE | MapFlags::FIXED, Some(file), 0).unwrap();
    let at = |page: u64| BASE + page * P + 123;
    let cases = [
        (7, Access::Read, Err(Fault::Unmapped)),
        (0, Access::Read, Err(Fault::Denied)),
        (1, Access::Read, Ok(())),
        (1, Access::Write, Err(Fault::Denied)),
        (1, Access::Exec, Err(Fault::Denied)),
        (2, Access::Read, Ok(())),
        (3, Access::Read, Ok(())),
        (3, Access::Exec, Ok(())),
        (4, Access::Read, Ok(())),
        (5, Access::Read, Err(Fault::PastObject)),
    ];
    for (page, access, want) in cases {
        assert_eq!(mm.check_access(at(page), access), want, "page {page}, {access:?}");
    }
    assert_eq!((Fault::Unmapped.signal(), Fault::Unmapped.code()), (11, 1));
    assert_eq!((Fault::Denied.signal(), Fault::Denied.code()), (11, 2));
    assert_eq!((Fault::PastObject.signal(), Fault::PastObject.code()), (7, 2));
}

/// `mseal`, as measured on Linux 6.18 (the kernel oracle runs it too).
#[test]
fn seals_refuse_what_would_change_a_mapping() {
    each_page!(seals_refuse_what_would_change_a_mapping_at);
}

fn seals_refuse_what_would_change_a_mapping_at<const P: u64>() {
    let sealed = |mm: &AddressSpace, page: u64| mm.vma_at(BASE + page * P).unwrap().flags().contains(VmFlags::SEALED);
    let mut mm = space::<P>();
    mm.mmap(BASE, 8 * P, Prot::RW, anon(), None, 0).unwrap();
    assert_eq!(mm.mseal(BASE + 2 * P, P, 1), Err(Errno::EINVAL), "flags");
    assert_eq!(mm.mseal(BASE + 2 * P + 1, P, 0), Err(Errno::EINVAL), "unaligned");
    let before = full(&mm);
    assert_eq!(mm.mseal(BASE + 6 * P, 4 * P, 0), Err(Errno::ENOMEM), "a hole");
    assert_eq!(full(&mm), before, "nothing sealed");
    mm.mseal(BASE + 2 * P, P + 5, 0).unwrap();
    assert_eq!(layout(&mm).len(), 3);
    assert!(sealed(&mm, 2) && sealed(&mm, 3) && !sealed(&mm, 1));
    // munmap over it: refused, but the first VMA stays cut where it began.
    assert_eq!(mm.munmap(BASE + P, 4 * P), Err(Errno::EPERM));
    assert_eq!(layout(&mm).len(), 4, "cut at page 1");
    assert_eq!(mm.mmap(BASE + 3 * P, 2 * P, Prot::RW, anon(), None, 0), Err(Errno::EPERM));
    assert_eq!(
        mm.mmap(BASE + 3 * P, 2 * P, Prot::RW, (anon() - MapFlags::FIXED) | MapFlags::FIXED_NOREPLACE, None, 0),
        Err(Errno::EEXIST)
    );
    // mprotect changes what comes before the seal, then fails.
    assert_eq!(mm.mprotect(BASE, 8 * P, Prot::READ), Err(Errno::EPERM));
    assert_eq!(mm.vma_at(BASE).unwrap().prot(), Prot::READ);
    assert_eq!(mm.vma_at(BASE + 5 * P).unwrap().prot(), Prot::RW);
    assert_eq!(mm.mprotect(BASE + 2 * P, P, Prot::RW), Err(Errno::EPERM), "even without a change");
    // mremap neither moves nor resizes it, nor maps over it.
    let fixed = MremapFlags::MAYMOVE | MremapFlags::FIXED;
    assert_eq!(mm.mremap(BASE + 2 * P, P, P, fixed, BASE + 30 * P), Err(Errno::EPERM));
    assert_eq!(mm.mremap(BASE + 2 * P, 2 * P, P, MremapFlags::empty(), 0), Err(Errno::EPERM));
    assert_eq!(mm.mremap(BASE + 5 * P, P, P, fixed, BASE + 2 * P), Err(Errno::EPERM));
    // Locking and harmless advice are allowed; discarding read-only
    // anonymous data is not.
    mm.mlock(BASE + 2 * P, P).unwrap();
    mm.madvise(BASE + 2 * P, P, Advice::Random).unwrap();
    mm.madvise(BASE + 3 * P, P, Advice::from_code(4).unwrap()).unwrap();
    mm.mmap(BASE + 16 * P, 2 * P, Prot::READ, anon(), None, 0).unwrap();
    mm.mseal(BASE + 16 * P, 2 * P, 0).unwrap();
    for code in [4, 8, 10, 18, 102] {
        assert_eq!(mm.madvise(BASE + 16 * P, P, Advice::from_code(code).unwrap()), Err(Errno::EPERM), "advice {code}");
    }
    assert_eq!(mm.madvise(BASE + 16 * P, P, Advice::from_code(20).unwrap()), Ok(()));
    // A fork's child keeps the seals.
    let mut child = mm.fork().unwrap();
    assert_eq!(child.munmap(BASE + 16 * P, P), Err(Errno::EPERM));
    mm.validate().unwrap();
}

/// `mlock` and friends, as measured on Linux 6.18 (the kernel oracle runs
/// them too).
#[test]
fn locks_cut_populate_and_are_not_inherited() {
    each_page!(locks_cut_populate_and_are_not_inherited_at);
}

fn locks_cut_populate_and_are_not_inherited_at<const P: u64>() {
    let locked = |mm: &AddressSpace, page: u64| mm.vma_at(BASE + page * P).unwrap().flags() & VmFlags::LOCKED_MASK;
    let mut mm = space::<P>();
    mm.mmap(BASE, 4 * P, Prot::RW, anon(), None, 0).unwrap();
    // An unaligned start is rounded down, the length grown by as much.
    mm.mlock(BASE + P + 5, P).unwrap();
    assert_eq!(layout(&mm).len(), 3, "cut to [1, 3)");
    assert_eq!(locked(&mm, 1), VmFlags::LOCKED);
    assert!(mm.vma_at(BASE + P).unwrap().anon_vma().is_some(), "populated: written");
    assert!(mm.vma_at(BASE).unwrap().anon_vma().is_none());
    mm.munlock(BASE, 4 * P).unwrap();
    assert_eq!(layout(&mm), [(0, 4, "rw-p".into())]);
    // A lock on fault populates nothing.
    mm.mmap(BASE + 8 * P, 2 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.mlock2(BASE + 8 * P, 2 * P, MlockFlags::ONFAULT).unwrap();
    assert_eq!(locked(&mm, 8), VmFlags::LOCKED_MASK);
    assert!(mm.vma_at(BASE + 8 * P).unwrap().anon_vma().is_none());
    assert_eq!(mm.mlock2(BASE, P, MlockFlags::from_bits_retain(2)), Err(Errno::EINVAL));
    // What cannot be faulted in fails the call, the lock staying.
    mm.mmap(BASE + 12 * P, 2 * P, Prot::NONE, anon(), None, 0).unwrap();
    assert_eq!(mm.mlock(BASE + 12 * P, 2 * P), Err(Errno::ENOMEM));
    assert_eq!(locked(&mm, 12), VmFlags::LOCKED);
    // A hole at the start changes nothing; one further on stops the call.
    let before = full(&mm);
    assert_eq!(mm.mlock(BASE + 6 * P, 4 * P), Err(Errno::ENOMEM));
    assert_eq!(full(&mm), before);
    assert_eq!(mm.munlock(BASE + 8 * P, 8 * P), Err(Errno::ENOMEM));
    assert_eq!(locked(&mm, 8), VmFlags::empty());
    assert_eq!(locked(&mm, 12), VmFlags::LOCKED, "past the hole: untouched");
    // A locked mapping left unwritten (its lock failed before reaching it)
    // is written when mremap grows it: Linux populates the growth.
    mm.mmap(BASE + 30 * P, P, Prot::NONE, anon(), None, 0).unwrap();
    mm.mmap(BASE + 31 * P, P, Prot::RW, anon(), None, 0).unwrap();
    assert_eq!(mm.mlock(BASE + 30 * P, 2 * P), Err(Errno::ENOMEM));
    assert!(mm.vma_at(BASE + 31 * P).unwrap().anon_vma().is_none());
    let moved = mm.mremap(BASE + 31 * P, P, 2 * P, MremapFlags::MAYMOVE | MremapFlags::FIXED, BASE + 40 * P);
    assert_eq!(moved, Ok(BASE + 40 * P));
    assert!(mm.vma_at(BASE + 40 * P).unwrap().anon_vma().is_some());
    assert_eq!(mm.mlock(u64::MAX - P + 1, 2 * P), Err(Errno::EINVAL));
    assert_eq!(mm.mlock(BASE, 0), Ok(()));
    mm.validate().unwrap();

    // mlockall: the flags' rules, then every mapping and the future ones.
    for bad in [0, 4, 8] {
        assert_eq!(mm.mlockall(MclFlags::from_bits_retain(bad)), Err(Errno::EINVAL), "flags {bad}");
    }
    mm.set_brk_base(BASE - 64 * P).unwrap();
    mm.mlockall(MclFlags::CURRENT | MclFlags::FUTURE).unwrap();
    assert!(mm.iter().all(|v| v.flags().contains(VmFlags::LOCKED)));
    assert_eq!(mm.def_flags(), VmFlags::LOCKED);
    let at = mm.mmap(BASE + 20 * P, 2 * P, Prot::RW, anon(), None, 0).unwrap();
    assert_eq!(locked(&mm, 20), VmFlags::LOCKED);
    assert!(mm.vma_at(at).unwrap().anon_vma().is_some(), "a locked mapping is populated");
    mm.brk(BASE - 60 * P);
    let heap = mm.vma_at(BASE - 64 * P).unwrap();
    assert!(heap.flags().contains(VmFlags::LOCKED) && heap.anon_vma().is_some());
    // Nothing of it passes to a fork's child.
    let child = mm.fork().unwrap();
    assert_eq!(child.def_flags(), VmFlags::empty());
    assert!(child.iter().all(|v| !v.flags().intersects(VmFlags::LOCKED_MASK)));
    mm.munlockall().unwrap();
    assert!(mm.iter().all(|v| !v.flags().intersects(VmFlags::LOCKED_MASK)));
    assert_eq!(mm.def_flags(), VmFlags::empty());
    mm.validate().unwrap();
}

#[test]
fn lookups_and_stats() {
    each_page!(lookups_and_stats_at);
}

fn lookups_and_stats_at<const P: u64>() {
    let mut mm = space::<P>();
    mm.mmap(BASE, 2 * P, Prot::RW, anon(), None, 0).unwrap();
    mm.mmap(BASE + 4 * P, P, Prot::READ, anon(), None, 0).unwrap();
    assert_eq!(mm.find_vma(BASE + 2 * P).map(|v| v.start()), Some(BASE + 4 * P));
    assert!(mm.vma_at(BASE + 2 * P).is_none());
    let (prev, vma) = mm.find_vma_prev(BASE + 3 * P);
    assert_eq!((prev.map(|v| v.start()), vma.map(|v| v.start())), (Some(BASE), Some(BASE + 4 * P)));
    assert!(mm.find_vma_intersection(BASE + 2 * P, BASE + 4 * P).is_none());
    assert_eq!(mm.find_vma_intersection(BASE + P, BASE + 5 * P).map(|v| v.start()), Some(BASE));
    assert_eq!(mm.range(BASE, BASE + 10 * P).count(), 2);
    let s = mm.stats();
    assert_eq!((s.vmas, s.mapped, s.anon, s.file), (2, 3 * P, 3 * P, 0));
    assert_eq!(s.by_prot[3], 2 * P);
    assert_eq!(s.by_prot[1], P);
    mm.exec();
    assert_eq!(mm.vma_count(), 0);
}

/// `MAP_32BIT` on x86-64: bottom-up from 1 GiB, below 2 GiB; a hint is
/// taken only if the range ends below 2 GiB; a length over 2 GiB is
/// refused. Elsewhere the flag is not looked at.
#[test]
fn map_32bit_places_low() {
    let low = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::BITS32;
    let mut mm = AddressSpace::with_layout(maple_mm::Layout::x86_64());
    let a = mm.mmap(0, 8192, Prot::READ | Prot::WRITE, low, None, 0).unwrap();
    assert_eq!(a, 0x4000_0000);
    let b = mm.mmap(0, 4096, Prot::READ, low, None, 0).unwrap();
    assert_eq!(b, 0x4000_2000);
    let hinted = mm.mmap(0x5000_0000, 4096, Prot::READ, low, None, 0).unwrap();
    assert_eq!(hinted, 0x5000_0000);
    let high = mm.mmap(0x9000_0000, 4096, Prot::READ, low, None, 0).unwrap();
    assert_eq!(high, 0x4000_3000, "a hint above 2 GiB is not taken");
    assert_eq!(mm.mmap(0, 0x8000_1000, Prot::READ, low, None, 0), Err(Errno::ENOMEM));
    let mut arm = AddressSpace::with_layout(maple_mm::Layout::arm64(maple_mm::PageSize::K4));
    let c = arm.mmap(0, 4096, Prot::READ, low, None, 0).unwrap();
    assert!(c > 0x1_0000_0000, "{c:#x}");
}
