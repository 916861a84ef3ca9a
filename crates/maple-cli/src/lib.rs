//! Library side of the `maple` command, so that its parts can be tested.

pub mod maps;
pub mod num;
pub mod ops;
pub mod picture;
pub mod replay;
pub mod swap;
pub mod trace;

pub use maple_mm::io_reason;
