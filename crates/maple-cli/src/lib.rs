//! Library side of the `maple` command, so that its parts can be tested.

pub mod ops;
pub mod report;
mod report_mm;
