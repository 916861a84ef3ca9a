//! Library side of the `maple` command, so that its parts can be tested.

pub mod maps;
pub mod ops;
pub mod picture;
pub mod replay;
pub mod report;
pub mod swap;
