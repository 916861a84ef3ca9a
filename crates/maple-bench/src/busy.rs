//! A program that does little but memory calls, for the trace section:
//! this program run again with [`PROBE_ENV`] set to a number of rounds,
//! each mapping 1–4 anonymous pages, writing every eighth mapping's
//! first page, protecting its first page read-only and unmapping it
//! (three memory calls a round), as an allocator or a JIT does at full
//! speed.
//!
//! A program that wants to be traced so calls [`serve_probe`] first thing
//! in `main` (`maple-report` does).

use std::sync::atomic::{AtomicBool, Ordering};

/// The environment variable that turns a run of the program into the busy
/// program: its number of rounds.
pub const PROBE_ENV: &str = "MAPLE_BUSY_ROUNDS";

/// Set by [`serve_probe`]: this program can be run again as the busy
/// program (a test binary would run its tests instead).
static SERVES_PROBES: AtomicBool = AtomicBool::new(false);

/// Whether [`serve_probe`] was called: this program can be the busy one.
pub fn available() -> bool {
    SERVES_PROBES.load(Ordering::Relaxed)
}

/// If [`PROBE_ENV`] is set, runs its rounds and returns true: the caller
/// should exit. Returns false for a normal run.
pub fn serve_probe() -> bool {
    SERVES_PROBES.store(true, Ordering::Relaxed);
    let Ok(rounds) = std::env::var(PROBE_ENV) else { return false };
    let rounds: u64 = rounds.parse().unwrap_or(0);
    #[cfg(target_os = "linux")]
    for i in 0..rounds {
        round(i);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = rounds;
    true
}

/// Round `i`: map, maybe write, protect, unmap.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn round(i: u64) {
    let page = 4096usize;
    let len = page * (i as usize % 4 + 1);
    // SAFETY: a new private anonymous mapping placed by the kernel: it
    // replaces nothing, and no Rust object lives there.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return;
    }
    if i % 8 == 0 {
        // SAFETY: `p` is the start of the writable mapping made above; a
        // byte is written through a raw pointer, creating no reference.
        unsafe { core::ptr::write_volatile(p.cast::<u8>(), 1) };
    }
    // SAFETY: `p..p+len` is the mapping made above, which nothing else
    // refers to; read-only first, then gone, with no access in between.
    unsafe {
        libc::mprotect(p, page, libc::PROT_READ);
        libc::munmap(p, len);
    }
}
