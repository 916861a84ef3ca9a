//! Address spaces rebuilt from `strace -f` logs.
//!
//! ```
//! use maple_mm::strace::{replay, ReplayOptions};
//! let log = "\
//! 100 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f0000000000
//! 100 mprotect(0x7f0000000000, 4096, PROT_READ) = 0
//! 100 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD) = 101
//! 101 munmap(0x7f0000001000, 4096) = 0
//! ";
//! let r = replay(log.lines(), ReplayOptions::default(), None).unwrap();
//! assert_eq!(r.space(100).unwrap().vma_count(), 2);
//! assert_eq!(r.space(101).unwrap().vma_count(), 1); // the child unmapped a page
//! ```

mod names;
pub mod parse;
mod replay;

pub use replay::{replay, Disagreement, Replay, ReplayChange, ReplayError, ReplayOptions, ReplayStats, Replayer};
