//! An emulator's guest memory backed by host memory, the host address
//! kept on each VMA: every guest mapping gets a run of host pages, and its
//! VMAs carry where that run is (as `host − guest`, so the value holds
//! for every page of the VMA and for both pieces of a split). The guest
//! splits, moves and forks its mappings; every access is translated
//! through the VMA that holds it, and reads back what was written.
//!
//! ```sh
//! cargo run --example host_memory -p maple-mm
//! ```

use maple_mm::{Access, AddressSpace, MapFlags, MremapFlags, Prot, VmaValue, PAGE_SIZE};

/// Guest address `g` of a VMA carrying this lives at `host[g + delta]`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Host {
    delta: u64,
}

impl VmaValue for Host {
    // Moved guest pages keep their host memory.
    fn moved(&self, from: u64, to: u64) -> Host {
        Host { delta: self.delta.wrapping_add(from).wrapping_sub(to) }
    }
}

/// The emulator: the guest's address space and the host memory behind it.
struct Emulator {
    mm: AddressSpace,
    host: Vec<u8>,
}

impl Emulator {
    /// Maps `pages` fresh pages for the guest at `guest`, backed by a new
    /// run of host memory (after a page left unused, so that two runs are
    /// never contiguous).
    fn map(&mut self, guest: u64, pages: u64) -> Result<u64, maple_mm::Errno> {
        let run = self.host.len() as u64 + PAGE_SIZE;
        self.host.resize((run + pages * PAGE_SIZE) as usize, 0);
        let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
        let host = Host { delta: run.wrapping_sub(guest) };
        self.mm.mmap_with(guest, pages * PAGE_SIZE, Prot::RW, flags, None, 0, host)
    }

    /// Where guest address `addr` is in host memory, if the guest may make
    /// this access (else the signal Linux would send).
    fn translate(&self, addr: u64, access: Access) -> Result<usize, String> {
        self.mm.check_access(addr, access).map_err(|f| format!("signal {}", f.signal()))?;
        let vma = self.mm.vma_at(addr).ok_or("unmapped")?;
        let host = vma.value::<Host>().ok_or("no host memory")?;
        Ok(addr.wrapping_add(host.delta) as usize)
    }

    fn write(&mut self, addr: u64, bytes: &[u8]) -> Result<(), String> {
        let at = self.translate(addr, Access::Write)?;
        self.host[at..at + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    fn read(&self, addr: u64, len: usize) -> Result<&[u8], String> {
        let at = self.translate(addr, Access::Read)?;
        Ok(&self.host[at..at + len])
    }
}

fn main() -> Result<(), String> {
    let mut emu = Emulator { mm: AddressSpace::new(), host: Vec::new() };
    let (a, b) = (0x1000_0000u64, 0x2000_0000u64);
    emu.map(a, 16).map_err(|e| e.to_string())?;
    for page in 0..16 {
        emu.write(a + page * PAGE_SIZE, format!("page {page:2}").as_bytes())?;
    }
    // A neighbour backed by another host run: contiguous for the guest,
    // not for the host, so it stays a VMA of its own.
    emu.map(a + 16 * PAGE_SIZE, 4).map_err(|e| e.to_string())?;
    println!("guest mappings after two maps side by side: {}", emu.mm.vma_count());
    assert_eq!(emu.mm.vma_count(), 2);

    // Split: page 3 read-only. Both sides still find their host memory.
    emu.mm.mprotect(a + 3 * PAGE_SIZE, PAGE_SIZE, Prot::READ).map_err(|e| e.to_string())?;
    println!(
        "page 3 made read-only: {} mappings; a write there: {:?}",
        emu.mm.vma_count(),
        emu.write(a + 3 * PAGE_SIZE, b"x")
    );

    // Move: pages 12–15 to another guest address; the data goes along.
    let moved = emu
        .mm
        .mremap(a + 12 * PAGE_SIZE, 4 * PAGE_SIZE, 4 * PAGE_SIZE, MremapFlags::MAYMOVE | MremapFlags::FIXED, b)
        .map_err(|e| e.to_string())?;
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    println!("pages 12-15 moved to {moved:#x}: {:?}", text(emu.read(moved + 2 * PAGE_SIZE, 7)?));
    assert_eq!(emu.read(moved + 2 * PAGE_SIZE, 7)?, b"page 14");
    assert!(emu.read(a + 12 * PAGE_SIZE, 7).is_err(), "the old place is unmapped");

    // Fork: the child's VMAs share the values (this toy shares the host
    // memory too; an emulator would copy it on write).
    let child = emu.mm.fork().map_err(|e| e.to_string())?;
    let child = Emulator { mm: child, host: emu.host.clone() };
    for page in 0..12 {
        let want = format!("page {page:2}");
        assert_eq!(child.read(a + page * PAGE_SIZE, want.len())?, want.as_bytes(), "page {page}");
    }
    println!("the child reads every page the parent wrote");
    print!("\n{}", emu.mm.maps());
    emu.mm.validate()
}
