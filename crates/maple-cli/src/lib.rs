//! Library side of the `maple` command, so that its parts can be tested.

pub mod maps;
pub mod ops;
pub mod picture;
pub mod replay;
pub mod report;
mod report_mm;
pub mod report_swap;
pub mod swap;
