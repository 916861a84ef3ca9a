//! Address spaces on the maple tree (work in progress: this crate is a
//! placeholder until the address-space issue lands).

pub use maple_tree;
