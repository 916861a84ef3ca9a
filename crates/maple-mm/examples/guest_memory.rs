//! An emulator's slow path for guest memory: every access the guest makes
//! that its translation cache cannot serve is handed to the address space,
//! which answers as Linux's page-fault handler would — the access goes
//! through (growing the stack if it lands just below it), or the guest gets
//! `SIGSEGV` or `SIGBUS` with the `si_code` Linux would give.
//!
//! ```sh
//! cargo run --example guest_memory -p maple-mm
//! ```

use std::sync::Arc;

use maple_mm::{Access, AddressSpace, Advice, Fault, MapFlags, MappedFile, Prot, PAGE_SIZE};

fn main() -> Result<(), maple_mm::Errno> {
    let mut mm = AddressSpace::new();
    let private = MapFlags::PRIVATE | MapFlags::FIXED;
    let anon = private | MapFlags::ANONYMOUS;

    // The guest program: its text from a file (one page past the file's
    // end is mapped too, as a loader may do), a heap, the main stack.
    let binary = Arc::new(MappedFile::new(8, 1, 1234, "/usr/bin/guest").with_size(3 * PAGE_SIZE + 512));
    let text = 0x40_0000;
    mm.mmap(text, 5 * PAGE_SIZE, Prot::READ | Prot::EXEC, private, Some(binary), 0)?;
    mm.set_brk_base(0x60_0000)?;
    mm.brk(0x60_0000 + 8 * PAGE_SIZE);
    let stack_top = 0x7fff_0000_0000;
    mm.mmap(stack_top - 8 * PAGE_SIZE, 8 * PAGE_SIZE, Prot::RW, anon | MapFlags::GROWSDOWN, None, 0)?;
    mm.set_start_stack(stack_top - 64);

    // A thread stack with a guard page at its bottom, as pthreads makes
    // one (here with MADV_GUARD_INSTALL rather than a PROT_NONE VMA).
    let thread = mm.mmap(0, 16 * PAGE_SIZE, Prot::RW, MapFlags::PRIVATE | MapFlags::ANONYMOUS, None, 0)?;
    mm.madvise(thread, PAGE_SIZE, Advice::GuardInstall)?;

    let accesses = [
        ("fetch an instruction", text + 0x10, Access::Exec),
        ("store into the text", text + 0x10, Access::Write),
        ("fetch past the end of the binary", text + 4 * PAGE_SIZE, Access::Exec),
        ("store on the heap", 0x60_0000 + 100, Access::Write),
        ("load past the heap", 0x60_0000 + 9 * PAGE_SIZE, Access::Read),
        ("push below the stack", stack_top - 11 * PAGE_SIZE + 8, Access::Write),
        ("load 12 MiB below the stack (8 MiB limit)", stack_top - 3072 * PAGE_SIZE, Access::Read),
        ("thread stack overflow", thread + 64, Access::Write),
        ("thread stack use", thread + 8 * PAGE_SIZE, Access::Write),
    ];
    for (what, addr, access) in accesses {
        let before = mm.vma_count();
        let outcome = match mm.fault(addr, access) {
            Ok(()) if mm.vma_count() == before && grew(&mm, addr, stack_top) => "ok, the stack grew".to_string(),
            Ok(()) => "ok".to_string(),
            Err(Fault::OutOfMemory) => "the emulator ran out of memory".to_string(),
            Err(f) => format!("signal {} (si_code {}): {f:?}", f.signal(), f.code()),
        };
        println!("{what:42} {addr:#14x} {access:?}: {outcome}");
    }

    // What a checkpoint must save: the pages the guest wrote.
    let written: Vec<_> = mm.anon_pages().collect();
    println!("\nwritten pages: {} in {} runs", mm.anon_page_count(0, u64::MAX), written.len());
    println!("\n{}", mm.maps());
    mm.validate().map_err(|_| maple_mm::Errno::EINVAL)
}

/// True if the stack below `stack_top` now reaches down to `addr`.
fn grew(mm: &AddressSpace, addr: u64, stack_top: u64) -> bool {
    mm.vma_at(addr).is_some_and(|v| v.end() == stack_top && v.start() < stack_top - 8 * PAGE_SIZE)
}
