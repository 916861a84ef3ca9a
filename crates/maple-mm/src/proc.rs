//! A live process's address space read from `/proc`: its VMAs with the
//! flags smaps shows, its guard and anonymous pages from pagemap, its
//! policies, break and limits.

use std::{path::Path, sync::Arc};

use crate::{
    flags::VmFlags,
    layout::Layout,
    maps::{out_of_memory, read_text, MapsError},
    page::PageSize,
    policy::MemPolicy,
    space::{AddressSpace, Brk},
    vma::VmaData,
};

impl AddressSpace {
    /// The address space of a live process, from `/proc/PID/smaps` (with
    /// the flags a maps file does not show), or `/proc/PID/maps` where
    /// smaps cannot be read; and its guard pages
    /// ([`guard_pages`](Self::guard_pages)), from `/proc/PID/pagemap`
    /// (bit 58, Linux 6.15+) for the VMAs smaps marks as possibly holding
    /// some (`gu`), where pagemap can be read (else none are known); and
    /// its anonymous pages ([`anon_pages`](Self::anon_pages)), from
    /// pagemap for the private VMAs smaps counts some in, where pagemap
    /// shows page frames (to `CAP_SYS_ADMIN`: they tell the shared zero
    /// page, which a read maps, from a written page; else none are known);
    /// the memory policies of its private anonymous VMAs, from
    /// `/proc/PID/numa_maps`; its program break's start and the size of
    /// its initialised data (`/proc/PID/stat`); and its layout's resource
    /// limits (`/proc/PID/limits`: `RLIMIT_STACK`, `RLIMIT_AS`,
    /// `RLIMIT_DATA`, and `RLIMIT_MEMLOCK` unless `/proc/PID/status` shows
    /// `CAP_IPC_LOCK`) and `mmap_min_addr`.
    pub fn from_pid(pid: u32) -> Result<AddressSpace, MapsError> {
        Self::from_proc(&format!("/proc/{pid}"))
    }

    /// This process's address space; see [`from_pid`](Self::from_pid).
    pub fn from_self() -> Result<AddressSpace, MapsError> {
        Self::from_proc("/proc/self")
    }

    /// [`from_pid`](Self::from_pid) from a process's `/proc` directory.
    fn from_proc(dir: &str) -> Result<AddressSpace, MapsError> {
        // smaps is read in pieces, each from the VMAs as they are then: a
        // thread of the process changing its mappings meanwhile can leave
        // two pieces that do not fit (a VMA listed twice, cut differently).
        // Such a read is tried again before settling for maps, which has
        // no hidden flags (and so no guard pages either).
        let smaps = format!("{dir}/smaps");
        let mut written = Vec::new();
        let parsed = (0..4).find_map(|_| {
            written.clear();
            let (text, name) = read_text(Path::new(&smaps)).ok()?;
            Self::parse_maps(&text, &name, Layout::default(), Some(&mut written)).ok()
        });
        let mut mm = parsed.map_or_else(|| Self::from_maps_file(format!("{dir}/maps")), Ok)?;
        let status = std::fs::read_to_string(format!("{dir}/status")).unwrap_or_default();
        mm.layout = live_layout(dir, &status);
        #[cfg(unix)]
        mm.read_guard_pages(&format!("{dir}/pagemap"))?;
        #[cfg(target_os = "linux")]
        mm.read_anon_pages(&format!("{dir}/pagemap"), &written)?;
        mm.read_policies(&format!("{dir}/numa_maps"))?;
        // The heap's start as the kernel keeps it: a process whose heap is
        // empty (or was never used, as a Go program's) shows no `[heap]`
        // line but still has a break, and a heap merged with the
        // mapping below it (no address randomization) starts below it.
        let stat = std::fs::read_to_string(format!("{dir}/stat")).ok();
        if let Some(start) = stat.as_deref().and_then(|s| stat_field(s, 47)) {
            let current = mm.brk.map_or(start, |b| b.current.max(start));
            let _ = mm.set_brk(Brk { start, current });
        }
        // The initialised data, which brk counts against RLIMIT_DATA.
        if let Some((start, end)) = stat.as_deref().and_then(|s| Some((stat_field(s, 45)?, stat_field(s, 46)?))) {
            mm.layout.data_segment = end.saturating_sub(start);
        }
        // Locked memory Linux counts beyond the locked VMAs (what
        // MREMAP_DONTUNMAP unlocked: see `locked_vm`), from `VmLck`.
        let vm_lck = status.lines().find_map(|l| l.strip_prefix("VmLck:"));
        if let Some(kb) = vm_lck.and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok()) {
            mm.lock_leak = (kb * 1024).saturating_sub(mm.locked_vm());
        }
        Ok(mm)
    }

    /// Gives the private anonymous VMAs the memory policies `numa_maps`
    /// (a `/proc/PID/numa_maps`) shows them with (see
    /// [`MemPolicy::from_numa_maps`]); shared memory and files show their
    /// object's policy there, not necessarily the VMA's, and keep none. An
    /// unreadable file (a kernel without NUMA) gives none.
    fn read_policies(&mut self, numa_maps: &str) -> Result<(), MapsError> {
        let Ok((text, _)) = read_text(Path::new(numa_maps)) else { return Ok(()) };
        let mut set = Vec::new();
        for l in text.lines() {
            let Some((addr, rest)) = l.split_once(' ') else { continue };
            let Ok(addr) = u64::from_str_radix(addr, 16) else { continue };
            let Some(Some(policy)) = MemPolicy::from_numa_maps(rest) else { continue };
            if let Some(v) = self.vma_at(addr).filter(|v| v.start == addr && v.is_anonymous()) {
                set.push((v.start, v.end, VmaData { policy: Some(Arc::new(policy)), ..v.data.clone() }));
            }
        }
        for (s, e, d) in set {
            self.put(s, e, d).map_err(|_| out_of_memory(numa_maps))?;
        }
        Ok(())
    }

    /// Adds the guard pages `pagemap` (a `/proc/PID/pagemap`) shows in
    /// the VMAs that may hold some. An unreadable pagemap adds none.
    #[cfg(unix)]
    fn read_guard_pages(&mut self, pagemap: &str) -> Result<(), MapsError> {
        /// Pagemap's guard-region bit.
        const PM_GUARD_REGION: u64 = 1 << 58;
        let maybe: Vec<(u64, u64)> =
            self.iter().filter(|v| v.flags().contains(VmFlags::MAYBE_GUARD)).map(|v| (v.start, v.end)).collect();
        let guards = &mut self.guards;
        let Ok(f) = std::fs::File::open(pagemap) else { return Ok(()) };
        pagemap_runs(&f, pagemap, &maybe, |w| w & PM_GUARD_REGION != 0, |s, e| guards.install(s, e))
    }

    /// Gives the VMAs touching `[start, end)` that live process `pid` has
    /// written and the model has not the anon_vma a write gives them: what
    /// a tracer cannot see (page faults are not calls) but Linux's merges
    /// depend on. For each private writable VMA overlapping the range with
    /// no anon_vma in the model, reads `/proc/PID/pagemap` over the VMA
    /// and [`touch`]es its first anonymous page (present and neither a
    /// file's nor the zero page, or in swap), as its first fault did.
    /// Returns the bytes so written.
    ///
    /// Needs page frame numbers from pagemap (`CAP_SYS_ADMIN`) to tell the
    /// zero page apart; without them, or without pagemap, nothing is
    /// written. A tracer doing this at every call keeps the file open and
    /// calls [`sync_written_from`](Self::sync_written_from).
    ///
    /// [`touch`]: Self::touch
    #[cfg(target_os = "linux")]
    pub fn sync_written(&mut self, pid: u32, start: u64, end: u64) -> Result<u64, MapsError> {
        let path = format!("/proc/{pid}/pagemap");
        match std::fs::File::open(&path) {
            Ok(f) => self.sync_written_from(&f, &path, start, end),
            Err(_) => Ok(0),
        }
    }

    /// [`sync_written`](Self::sync_written) from `pagemap`, the process's
    /// `/proc/PID/pagemap` opened (named `name` in errors). The file reads
    /// the address space the process had when it was opened: after an
    /// `execve` it must be opened again.
    #[cfg(target_os = "linux")]
    pub fn sync_written_from(
        &mut self,
        pagemap: &std::fs::File,
        name: &str,
        start: u64,
        end: u64,
    ) -> Result<u64, MapsError> {
        let unwritten: Vec<(u64, u64)> = self
            .range(self.page_size().align_down(start), self.page_size().align_up(end).unwrap_or(u64::MAX))
            .filter(|v| v.flags().private_writable() && v.anon_vma().is_none())
            .map(|v| (v.start, v.end))
            .collect();
        if unwritten.is_empty() {
            return Ok(0);
        }
        let Some(zero) = zero_page_frame() else { return Ok(0) };
        // The runs come range by range, in order: a VMA's first run is its
        // first anonymous page.
        let mut runs: Vec<(u64, u64)> = Vec::new();
        pagemap_runs(
            pagemap,
            name,
            &unwritten,
            |w| is_anon_word(w, zero),
            |s, e| {
                runs.push((s, e));
                Ok(())
            },
        )?;
        let first: Vec<u64> =
            unwritten.iter().filter_map(|&(s, e)| runs.iter().find(|r| s <= r.0 && r.0 < e).map(|r| r.0)).collect();
        let mut written = 0;
        for page in first {
            if self.touch(page, self.page_size().bytes()).is_ok() {
                written += self.page_size().bytes();
            }
        }
        Ok(written)
    }

    /// Adds the anonymous pages `pagemap` (a `/proc/PID/pagemap`) shows in
    /// the VMAs `written` (those smaps counts anonymous pages in): pages in
    /// swap, and present pages that are neither a file's nor the shared
    /// zero page. Telling the zero page apart takes page frame numbers,
    /// which pagemap shows to `CAP_SYS_ADMIN` only: without them (or
    /// without pagemap) none are added.
    #[cfg(target_os = "linux")]
    fn read_anon_pages(&mut self, pagemap: &str, written: &[(u64, u64)]) -> Result<(), MapsError> {
        if written.is_empty() {
            return Ok(());
        }
        let Some(zero) = zero_page_frame() else { return Ok(()) };
        let anon = &mut self.anon;
        let Ok(f) = std::fs::File::open(pagemap) else { return Ok(()) };
        pagemap_runs(&f, pagemap, written, |w| is_anon_word(w, zero), |s, e| anon.install(s, e))?;
        // The process may have changed between the reads: a page read as
        // a guard page before is not also an anonymous page.
        let guards: Vec<(u64, u64)> = self.guards.iter().collect();
        for (s, e) in guards {
            self.anon.remove(s, e).map_err(|_| out_of_memory(pagemap))?;
        }
        Ok(())
    }
}

/// Calls `add(start, end)` for every run of pages in `ranges` whose word
/// in `f` (a `/proc/PID/pagemap`, named `pagemap` in errors) passes
/// `keep`, reading 4,096 pages' words at a time (a process's huge
/// reservations cost no more memory than that). A range stops where
/// pagemap cannot be read.
#[cfg(unix)]
fn pagemap_runs(
    f: &std::fs::File,
    pagemap: &str,
    ranges: &[(u64, u64)],
    keep: impl Fn(u64) -> bool,
    mut add: impl FnMut(u64, u64) -> Result<(), crate::error::AllocFail>,
) -> Result<(), MapsError> {
    use std::os::unix::fs::FileExt;
    /// Pages read at a time (32 KiB of words).
    const CHUNK: u64 = 4096;
    if ranges.is_empty() {
        return Ok(());
    }
    let mut add = |s, e| add(s, e).map_err(|_| out_of_memory(pagemap));
    let page_size = PageSize::host_bytes();
    let most = ranges.iter().map(|&(s, e)| e.saturating_sub(s) / page_size).max().unwrap_or(0);
    let mut bytes = vec![0u8; (most.min(CHUNK) * 8) as usize];
    for &(s, e) in ranges {
        let mut run: Option<u64> = None;
        let mut at = s;
        while at < e {
            let n = ((e - at) / page_size).min(CHUNK);
            if n == 0 {
                // (A range that does not end on a page: its last part.)
                break;
            }
            let buf = &mut bytes[..(n * 8) as usize];
            if f.read_exact_at(buf, at / page_size * 8).is_err() {
                break;
            }
            for (k, word) in buf.chunks_exact(8).enumerate() {
                let page = at + k as u64 * page_size;
                match (keep(u64::from_le_bytes(word.try_into().expect("eight bytes"))), run) {
                    (true, None) => run = Some(page),
                    (false, Some(r)) => {
                        add(r, page)?;
                        run = None;
                    }
                    _ => {}
                }
            }
            at += n * page_size;
        }
        if let Some(r) = run {
            add(r, at)?;
        }
    }
    Ok(())
}

/// Whether a pagemap word is an anonymous page: in swap (a guard marker is
/// a swap-type entry too, flagged apart: bit 58), or present (bit 63) and
/// neither a file's page (bit 61) nor the zero page (frame `zero`).
#[cfg(target_os = "linux")]
fn is_anon_word(w: u64, zero: u64) -> bool {
    let bit = |b: u32| w >> b & 1 == 1;
    bit(62) && !bit(58) || bit(63) && !bit(61) && w & ((1 << 55) - 1) != zero
}

/// The shared zero page's frame number, learned once (it does not move
/// while the system runs): see [`learn_zero_page_frame`].
#[cfg(target_os = "linux")]
fn zero_page_frame() -> Option<u64> {
    static FRAME: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *FRAME.get_or_init(learn_zero_page_frame)
}

/// The shared zero page's frame number: a fresh private page, read, maps
/// it, and this process's pagemap says where. `None` where frames are
/// hidden (without `CAP_SYS_ADMIN` pagemap shows 0) or anything fails.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn learn_zero_page_frame() -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let page_size = PageSize::host_bytes();
    let len = page_size as usize;
    // SAFETY: a new private anonymous mapping placed by the kernel: it
    // replaces nothing, and no Rust object lives there.
    let p = unsafe {
        libc::mmap(core::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: `p` is the start of the readable page mapped just above,
    // which stays mapped until the `munmap` below; a byte is read through
    // a raw pointer, creating no reference.
    unsafe { core::ptr::read_volatile(p.cast::<u8>()) };
    let mut word = [0u8; 8];
    let read = std::fs::File::open("/proc/self/pagemap")
        .and_then(|f| f.read_exact_at(&mut word, p as u64 / page_size * 8))
        .is_ok();
    // SAFETY: unmaps exactly the mapping made above, which nothing refers
    // to any more.
    unsafe { libc::munmap(p, len) };
    let w = u64::from_le_bytes(word);
    let frame = w & ((1 << 55) - 1);
    (read && w >> 63 & 1 == 1 && frame != 0).then_some(frame)
}

/// The layout of the live process whose `/proc` directory is `dir`: its
/// resource limits (the soft ones, from `limits`: stack, address space,
/// data, and locked memory where `status`, the text of its
/// `/proc/PID/status`, shows no `CAP_IPC_LOCK`) and the
/// system's `vm.mmap_min_addr`, where they can be read; the rest Linux's
/// defaults (the stack guard gap is a boot parameter no file shows).
fn live_layout(dir: &str, status: &str) -> Layout {
    let mut layout = Layout::default();
    if let Ok(limits) = std::fs::read_to_string(format!("{dir}/limits")) {
        // (Its mmap_base follows the limit it was started with: most
        // likely this one.)
        if let Some(limit) = soft_limit(&limits, "Max stack size") {
            layout = layout.with_stack_limit(limit);
        }
        if let Some(limit) = soft_limit(&limits, "Max address space") {
            layout.as_limit = limit;
        }
        if let Some(limit) = soft_limit(&limits, "Max data size") {
            layout.data_limit = limit;
        }
        // The locked-memory limit binds only a process without
        // CAP_IPC_LOCK (bit 14 of its effective capabilities).
        let caps =
            status.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|c| u64::from_str_radix(c.trim(), 16).ok());
        if caps.is_some_and(|c| c & 1 << 14 == 0) {
            if let Some(limit) = soft_limit(&limits, "Max locked memory") {
                layout.memlock_limit = limit;
            }
        }
    }
    let min = std::fs::read_to_string("/proc/sys/vm/mmap_min_addr").ok().and_then(|s| s.trim().parse().ok());
    if let Some(min) = min {
        layout.mmap_min_addr = min;
    }
    layout
}

/// Field `n` (1-based, numeric, from the third) of a `/proc/PID/stat`
/// text: 45 and 46 are `mm->start_data` and `end_data`, 47
/// `mm->start_brk`. The command name, the second, may hold spaces and
/// parentheses.
fn stat_field(stat: &str, n: usize) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

/// The soft limit of the resource named `what` in a `/proc/PID/limits`
/// text (`u64::MAX` for "unlimited").
fn soft_limit(limits: &str, what: &str) -> Option<u64> {
    let line = limits.lines().find_map(|l| l.strip_prefix(what))?;
    match line.split_whitespace().next()? {
        "unlimited" => Some(u64::MAX),
        soft => soft.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::{soft_limit, stat_field};

    fn start_brk(stat: &str) -> Option<u64> {
        stat_field(stat, 47)
    }

    fn stack_limit(limits: &str) -> Option<u64> {
        soft_limit(limits, "Max stack size")
    }

    #[test]
    fn the_heap_start_is_read_from_stat() {
        // A command name with spaces and a parenthesis; fields 3 to 52.
        let fields: Vec<String> =
            (3..=52).map(|i| if i == 47 { "93824992235520".into() } else { i.to_string() }).collect();
        let stat = format!("4242 (a b) c) {}\n", fields.join(" "));
        assert_eq!(start_brk(&stat), Some(0x5555_5555_5000));
        assert_eq!(start_brk("4242 (cut short) S 1 2"), None);
        assert_eq!(start_brk("no name at all"), None);
        assert_eq!((stat_field(&stat, 45), stat_field(&stat, 46), stat_field(&stat, 2)), (Some(45), Some(46), None));
    }

    /// Locked memory that no VMA holds locked (pages `MREMAP_DONTUNMAP`
    /// unlocked, which Linux goes on counting) is read back from `VmLck`.
    #[cfg(target_os = "linux")]
    #[test]
    #[allow(unsafe_code)]
    fn a_live_process_keeps_the_locked_count() {
        let p = crate::PageSize::host_bytes() as usize;
        // SAFETY: a fresh locked mapping of our own, one page of it moved
        // elsewhere (leaving the rest mapped), both unmapped at the end;
        // no Rust object lives in them.
        let (a, b) = unsafe {
            let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_LOCKED;
            let a = libc::mmap(std::ptr::null_mut(), 4 * p, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0);
            assert_ne!(a, libc::MAP_FAILED, "a locked mapping");
            let keep = libc::MREMAP_MAYMOVE | libc::MREMAP_DONTUNMAP;
            let b = libc::mremap(a, p, p, keep, std::ptr::null_mut::<libc::c_void>());
            assert_ne!(b, libc::MAP_FAILED, "a DONTUNMAP move");
            (a, b)
        };
        let mm = crate::AddressSpace::from_self().unwrap();
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        // SAFETY: the two mappings made above, which nothing else uses.
        unsafe {
            libc::munmap(a, 4 * p);
            libc::munmap(b, p);
        }
        let kb = status.lines().find_map(|l| l.strip_prefix("VmLck:")).unwrap();
        let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().unwrap();
        assert!(kb >= 5 * 4, "4 pages unlocked but counted, 1 locked: {kb} KiB");
        assert_eq!(mm.locked_vm(), kb * 1024);
    }

    /// The space's counts are the kernel's (`VmSize`, `VmData`) as they
    /// stood before or after the space was read; other test threads map
    /// memory meanwhile, so a few tries.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_live_process_counts_as_the_kernel_does() {
        let kb = |status: &str, field: &str| -> u64 {
            let line = status.lines().find_map(|l| l.strip_prefix(field)).expect(field);
            line.trim().trim_end_matches("kB").trim().parse().expect("kB")
        };
        let mut seen = Vec::new();
        for _ in 0..20 {
            let before = std::fs::read_to_string("/proc/self/status").unwrap();
            let mm = crate::AddressSpace::from_self().unwrap();
            let after = std::fs::read_to_string("/proc/self/status").unwrap();
            let counts = |status: &str| (kb(status, "VmSize:"), kb(status, "VmData:"));
            let got = (mm.total_vm() / 1024, mm.data_vm() / 1024);
            if got == counts(&before) || got == counts(&after) {
                return;
            }
            seen.push((got, counts(&before)));
        }
        panic!("(total_vm, data_vm) against (VmSize, VmData), in KiB: {seen:?}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_live_process_has_its_break() {
        let mm = crate::AddressSpace::from_self().unwrap();
        let b = mm.brk_state().expect("a Linux process has a break");
        assert_eq!(b.start % crate::PageSize::host_bytes(), 0);
        assert!(b.start <= b.current, "{b:?}");
    }

    #[test]
    fn the_stack_limit_is_read_from_limits() {
        let text = "Limit                     Soft Limit           Hard Limit           Units     \n\
                    Max cpu time              unlimited            unlimited            seconds   \n\
                    Max stack size            8388608              unlimited            bytes     \n";
        assert_eq!(stack_limit(text), Some(8 << 20));
        assert_eq!(stack_limit(&text.replace("8388608 ", "unlimited")), Some(u64::MAX));
        assert_eq!(stack_limit("Max cpu time  unlimited  unlimited  seconds\n"), None);
        assert_eq!(stack_limit("Max stack size  lots  unlimited  bytes\n"), None);
        let text =
            text.to_string() + "Max address space         104857600            unlimited            bytes     \n";
        assert_eq!(soft_limit(&text, "Max address space"), Some(100 << 20));
    }
}
