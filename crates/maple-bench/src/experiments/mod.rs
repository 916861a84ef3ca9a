//! One experiment per section; each returns a typed [`Section`].

mod compare;
mod concurrent;
mod forking;
mod kernel;
mod mm;
mod old_design;
mod replay;
mod swap;
mod trace;

pub use swap::{lookup_rates, lookup_table};

use crate::{model::Section, Options, SectionId};

/// Runs one section.
pub fn run(id: SectionId, opts: &Options, progress: &mut dyn FnMut(&str)) -> Section {
    match id {
        SectionId::Forking => forking::run(opts, progress),
        SectionId::ForkScaling => mm::fork_scaling(opts, progress),
        SectionId::Swap => swap::run(opts, progress),
        SectionId::Names => mm::named_fork(opts, progress),
        SectionId::MmReaders => mm::readers(opts, progress),
        SectionId::MmCalls => mm::calls(opts, progress),
        SectionId::OldDesign => old_design::run(opts, progress),
        SectionId::Replay => replay::run(opts, progress),
        SectionId::Trace => trace::run(opts, progress),
        SectionId::Compare => compare::run(opts, progress),
        SectionId::Concurrent => concurrent::run(opts, progress),
        SectionId::Kernel => kernel::run(opts, progress),
    }
}

/// `a / b`, and 0 when `b` is 0 or not a number (a time too short for the
/// clock to see): every figure stays finite.
pub(crate) fn div(a: f64, b: f64) -> f64 {
    let r = a / b;
    if b.abs() < 1e-12 || !r.is_finite() {
        0.0
    } else {
        r
    }
}

/// "a–b" of the smallest and largest of `xs` with `digits` decimals.
pub(crate) fn span(xs: &[f64], digits: usize, suffix: &str) -> String {
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if xs.is_empty() {
        "not measured".to_string()
    } else if (hi - lo).abs() < 10f64.powi(-(digits as i32)) {
        format!("{lo:.digits$}{suffix}")
    } else {
        format!("{lo:.digits$}–{hi:.digits$}{suffix}")
    }
}
