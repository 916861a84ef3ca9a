//! The architectures' layouts: their numbers as the kernel computes them,
//! the stack limit's effect measured on this machine's kernel, and
//! placement in each (the 47-bit window of a 5-level x86-64 kernel,
//! arm64's top and huge pages with each page size).

use maple_mm::{AddressSpace, Errno, Layout, MapFlags, PageSize, Prot};

const ANON: MapFlags = MapFlags::PRIVATE.union(MapFlags::ANONYMOUS);

/// `TASK_SIZE`, the map window, `mmap_base`, the legacy base,
/// `mmap_min_addr`, the stack guard gap and the huge-page size of each
/// layout, as the kernel sources give them for an 8 MiB stack limit
/// (`arch/x86/include/asm/page_64_types.h`, `arch/x86/mm/mmap.c`,
/// `arch/arm64/include/asm/processor.h`, `mm/util.c`, `mm/mmap.c`).
#[test]
fn each_layout_has_its_kernels_numbers() {
    let x86_top = 0x7fff_ffff_f000;
    let arm_top = 1 << 48;
    let cases = [
        (Layout::x86_64(), x86_top, x86_top, 0x7fff_f7ff_f000, 0x2aaa_aaaa_b000, 0x1_0000, 1 << 20, 2 << 20),
        (
            Layout::x86_64_la57(),
            (1 << 56) - 4096,
            x86_top,
            0x7fff_f7ff_f000,
            0x2aaa_aaaa_b000,
            0x1_0000,
            1 << 20,
            2 << 20,
        ),
        (Layout::arm64(PageSize::K4), arm_top, arm_top, 0xffff_f800_0000, 1 << 46, 0x8000, 1 << 20, 2 << 20),
        (Layout::arm64(PageSize::K16), arm_top, arm_top, 0xffff_f800_0000, 1 << 46, 0x8000, 4 << 20, 32 << 20),
        (Layout::arm64(PageSize::K64), arm_top, arm_top, 0xffff_f800_0000, 1 << 46, 0x8000, 16 << 20, 512 << 20),
    ];
    for (l, task, window, base, legacy, min, guard, pmd) in cases {
        let got = (l.task_size, l.map_window, l.mmap_base, l.legacy_base, l.mmap_min_addr, l.stack_guard_gap);
        assert_eq!(got, (task, window, base, legacy, min, guard), "{:?} {}", l.arch, l.page_size);
        assert_eq!(l.page_size.pmd_size(), pmd);
        assert!(!l.bottom_up && l.thp_align && l.stack_limit == 8 << 20);
    }
    assert_eq!(Layout::default(), Layout::host());
}

/// `mmap_base` as this machine's kernel sets it at `execve` under each
/// stack limit: the dynamic loader, the first mapping placed, ends there
/// (address randomisation off, `setarch -R`).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn the_mmap_base_follows_the_stack_limit_as_this_kernel_sets_it() {
    for (ulimit, bytes) in [("8192", 8u64 << 20), ("262144", 256 << 20), ("1048576", 1 << 30), ("unlimited", u64::MAX)]
    {
        let out = std::process::Command::new("setarch")
            .args(["-R", "sh", "-c", &format!("ulimit -s {ulimit} && exec cat /proc/self/maps")])
            .output()
            .expect("setarch (util-linux) runs");
        assert!(out.status.success(), "setarch -R: {}", String::from_utf8_lossy(&out.stderr));
        let maps = String::from_utf8(out.stdout).unwrap();
        let loader_end = maps
            .lines()
            .filter(|l| l.contains("/ld-linux"))
            .filter_map(|l| u64::from_str_radix(l.split('-').nth(1)?.split(' ').next()?, 16).ok())
            .max()
            .unwrap_or_else(|| panic!("no loader in\n{maps}"));
        let model = Layout::x86_64().with_stack_limit(bytes);
        assert_eq!(model.mmap_base, loader_end, "ulimit -s {ulimit}:\n{maps}");
        // Placement agrees: a mapping of the loader's size lands where the
        // kernel put it.
        let loader_start = maps
            .lines()
            .filter(|l| l.contains("/ld-linux"))
            .filter_map(|l| u64::from_str_radix(l.split('-').next()?, 16).ok())
            .min()
            .unwrap();
        let mut mm = AddressSpace::with_layout(model);
        assert_eq!(mm.mmap(0, loader_end - loader_start, Prot::READ, ANON, None, 0), Ok(loader_start));
    }
}

/// A 5-level x86-64 kernel keeps placement in the 47-bit window unless a
/// hint lies above it; a hinted range crossing the window is not taken;
/// only there do fixed mappings above 2^47 fit.
#[test]
fn a_hint_above_the_window_opens_the_whole_address_space() {
    let mut mm = AddressSpace::with_layout(Layout::x86_64_la57());
    let window = mm.layout().map_window;
    let a = mm.mmap(0, 1 << 20, Prot::READ, ANON, None, 0).unwrap();
    assert_eq!(a + (1 << 20), mm.layout().mmap_base);
    // A hint straddling the window's top is not taken: placed in the window.
    let straddle = window - 4096;
    let b = mm.mmap(straddle, 2 * 4096, Prot::READ, ANON, None, 0).unwrap();
    assert!(b + 2 * 4096 <= window && b != straddle, "{b:#x}");
    // Above the window: the hint; then, with it taken, top-down from as
    // far above mmap_base as the space is above the window.
    let hint = 1 << 50;
    assert_eq!(mm.mmap(hint, 4096, Prot::READ, ANON, None, 0), Ok(hint));
    let high = mm.mmap(hint, 4096, Prot::READ, ANON, None, 0).unwrap();
    let top = mm.layout().mmap_base + (mm.layout().task_size - window);
    assert_eq!(high, top - 4096);
    assert_eq!(
        mm.mmap((1 << 56) - 2 * 4096, 4096, Prot::READ, ANON | MapFlags::FIXED, None, 0),
        Ok((1 << 56) - 2 * 4096)
    );
    mm.validate().unwrap();
    // A 4-level kernel has nothing there.
    let mut small = AddressSpace::with_layout(Layout::x86_64());
    assert_eq!(small.mmap(hint, 4096, Prot::READ, ANON | MapFlags::FIXED, None, 0), Err(Errno::ENOMEM));
    assert!(small.mmap(hint, 4096, Prot::READ, ANON, None, 0).unwrap() < 1 << 47);
}

/// arm64: placement below its 48-bit top, pages of each size, huge-page
/// alignment at its PMD size, and the legacy layout an unlimited stack
/// picks.
#[test]
fn arm64_places_with_its_own_pages_and_top() {
    for page in PageSize::ALL {
        let p = page.bytes();
        let mut mm = AddressSpace::with_layout(Layout::arm64(page));
        let a = mm.mmap(0, 1, Prot::READ, ANON, None, 0).unwrap();
        assert_eq!((a, mm.vma_at(a).unwrap().len()), (0xffff_f800_0000 - p, p), "{page}");
        let pmd = page.pmd_size();
        let huge = mm.mmap(0, pmd, Prot::RW, ANON, None, 0).unwrap();
        assert_eq!(huge % pmd, 0, "{page}");
        // Lengths round to this page; addresses must lie on one.
        if p > 4096 {
            assert_eq!(mm.munmap(a + 4096, p), Err(Errno::EINVAL), "{page}: 4 KiB into a larger page");
        }
        assert_eq!(mm.mprotect(a, 1, Prot::NONE), Ok(()));
        assert_eq!(mm.vma_at(a).unwrap().prot(), Prot::NONE);
        let up = Layout::arm64(page).with_stack_limit(u64::MAX);
        let mut legacy = AddressSpace::with_layout(up);
        assert_eq!(legacy.mmap(0, 1, Prot::READ, ANON, None, 0), Ok(1 << 46), "{page}");
        mm.validate().unwrap();
    }
}

/// A maps file read into a space must lie on the layout's pages.
#[test]
fn maps_lines_off_the_layouts_pages_are_refused() {
    let text = "00010000-00030000 r--p 00000000 00:00 0 \n7f0000001000-7f0000002000 rw-p 00000000 00:00 0 \n";
    let e = AddressSpace::from_maps_with(text, "maps", Layout::arm64(PageSize::K64)).unwrap_err();
    assert_eq!(e.line, 2, "{e}");
    assert!(e.to_string().contains("64 KiB"), "{e}");
    let mm = AddressSpace::from_maps_with(text, "maps", Layout::x86_64()).unwrap();
    assert_eq!(mm.vma_count(), 2);
}
