//! Memory policies: `mbind`.
//!
//! A VMA may carry a NUMA memory policy (which nodes its pages come from).
//! `/proc/PID/maps` does not show it (`numa_maps` does), but it decides
//! where VMAs split and whether they merge: `mbind` over part of a VMA cuts
//! it, and two neighbours merge only with equal policies (and a first write
//! reuses a neighbour's anon_vma only then). A new mapping has the default
//! policy; `fork`, `mremap` and every cut keep a VMA's.
//!
//! Measured on Linux 6.18 with one memory node (the kernel oracle test
//! binds, interleaves and resets ranges in its window): the mode and its
//! flags are checked as `sanitize_mpol_flags` and `mpol_new` check them,
//! the nodes against the nodes with memory ([`Layout::numa_nodes`]), a
//! range with a hole fails with `EFAULT` before anything changes (for the
//! default policy only a range wholly in a hole does), and each VMA whose
//! policy differs is cut and given it. Not modelled: page placement, so
//! `MPOL_MF_STRICT` never fails with `EIO` and `MPOL_MF_MOVE` moves
//! nothing; the task's own policy (`set_mempolicy`); a node mask wider than
//! 64 nodes; a space read from a maps file knows no policies (one read
//! from a live process has its private anonymous VMAs', from
//! `numa_maps`).
//!
//! [`Layout::numa_nodes`]: crate::Layout::numa_nodes

use bitflags::bitflags;

use crate::error::{Errno, Result};

bitflags! {
    /// The flags `mbind` takes with the mode (`MPOL_F_*`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct MempolicyFlags: u32 {
        /// `MPOL_F_STATIC_NODES`: the nodes as given, not remapped.
        const STATIC_NODES = 1 << 15;
        /// `MPOL_F_RELATIVE_NODES`: the nodes relative to the allowed ones.
        const RELATIVE_NODES = 1 << 14;
        /// `MPOL_F_NUMA_BALANCING` (`MPOL_BIND` and `MPOL_PREFERRED_MANY`
        /// only).
        const NUMA_BALANCING = 1 << 13;
    }
}

bitflags! {
    /// `mbind` flags (`MPOL_MF_*`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct MbindFlags: u32 {
        /// `MPOL_MF_STRICT`: fail (`EIO`) if pages are misplaced (page
        /// placement is not modelled: never).
        const STRICT = 1;
        /// `MPOL_MF_MOVE`: move this process's misplaced pages.
        const MOVE = 2;
        /// `MPOL_MF_MOVE_ALL`: move every process's (the model acts as a
        /// process with `CAP_SYS_NICE`).
        const MOVE_ALL = 4;
    }
}

/// A memory policy mode (`MPOL_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MempolicyMode {
    /// `MPOL_DEFAULT`: the task's policy (a VMA then has none).
    Default,
    /// `MPOL_PREFERRED`: the first given node, others if it is full.
    Preferred,
    /// `MPOL_BIND`: only the given nodes.
    Bind,
    /// `MPOL_INTERLEAVE`: page by page over the given nodes.
    Interleave,
    /// `MPOL_LOCAL`: the node of the CPU that faults.
    Local,
    /// `MPOL_PREFERRED_MANY`: the given nodes first.
    PreferredMany,
    /// `MPOL_WEIGHTED_INTERLEAVE`: interleaved by weights.
    WeightedInterleave,
}

impl MempolicyMode {
    /// The mode of a code (`MPOL_DEFAULT` is 0, …); `None` past the last.
    pub fn from_code(code: u32) -> Option<MempolicyMode> {
        use MempolicyMode::*;
        [Default, Preferred, Bind, Interleave, Local, PreferredMany, WeightedInterleave].get(code as usize).copied()
    }
}

/// A VMA's memory policy, as the kernel keeps it: the mode, its flags, the
/// nodes it uses (bit `n` for node `n`) and, with static or relative
/// nodes, the nodes as given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemPolicy {
    /// The mode (never [`MempolicyMode::Default`]).
    pub mode: MempolicyMode,
    /// Its flags.
    pub flags: MempolicyFlags,
    /// The nodes it uses (none for [`MempolicyMode::Local`]).
    pub nodes: u64,
    /// The nodes as given, kept with static or relative nodes or NUMA
    /// balancing (0 else): policies that differ in them differ.
    pub user_nodes: u64,
}

impl MemPolicy {
    /// The policy `mbind` makes of its `mode` argument (the mode with its
    /// flags) and node mask, on a machine whose nodes with memory are
    /// `online`: `None` for the default policy.
    ///
    /// Errors (`EINVAL`): an unknown mode or flag, static and relative
    /// nodes together, NUMA balancing but with `MPOL_BIND` or
    /// `MPOL_PREFERRED_MANY`; nodes with the default policy or with
    /// `MPOL_LOCAL`; no nodes (or none with memory) where the mode needs
    /// some (an empty `MPOL_PREFERRED` is `MPOL_LOCAL`, but not with static
    /// or relative nodes).
    ///
    /// ```
    /// use maple_mm::{MemPolicy, MempolicyMode, Errno};
    /// let bind = MemPolicy::from_mbind(2, 0b1, 0b1)?.unwrap();
    /// assert_eq!((bind.mode, bind.nodes), (MempolicyMode::Bind, 0b1));
    /// assert_eq!(MemPolicy::from_mbind(2, 0b10, 0b1), Err(Errno::EINVAL), "no memory on node 1");
    /// assert_eq!(MemPolicy::from_mbind(1, 0, 0b1)?.map(|p| p.mode), Some(MempolicyMode::Local));
    /// assert_eq!(MemPolicy::from_mbind(0, 0, 0b1)?, None);
    /// # Ok::<(), Errno>(())
    /// ```
    pub fn from_mbind(mode: u32, nodes: u64, online: u64) -> Result<Option<MemPolicy>> {
        let (mode, flags) = sanitize(mode)?;
        MemPolicy::make(mode, flags, nodes, online)
    }

    /// The policy of a checked mode (`mpol_new`, then the nodes with
    /// memory, `mpol_set_nodemask`).
    pub(crate) fn make(
        mode: MempolicyMode,
        flags: MempolicyFlags,
        nodes: u64,
        online: u64,
    ) -> Result<Option<MemPolicy>> {
        use MempolicyMode::*;
        let static_or_relative = MempolicyFlags::STATIC_NODES | MempolicyFlags::RELATIVE_NODES;
        let mode = match mode {
            Default if nodes != 0 => return Err(Errno::EINVAL),
            Default => return Ok(None),
            Preferred if nodes == 0 && flags.intersects(static_or_relative) => return Err(Errno::EINVAL),
            Preferred if nodes == 0 => Local,
            Local if nodes != 0 || flags.intersects(static_or_relative) => return Err(Errno::EINVAL),
            _ if nodes == 0 && mode != Local => return Err(Errno::EINVAL),
            m => m,
        };
        // The nodes used: those given that have memory (relative nodes
        // are folded onto those), of which a preferred policy keeps the
        // first.
        let used = if mode == Local {
            0
        } else if flags.contains(MempolicyFlags::RELATIVE_NODES) {
            relative(nodes, online)
        } else {
            nodes & online
        };
        if mode != Local && used == 0 {
            return Err(Errno::EINVAL);
        }
        let used = if mode == Preferred { used & used.wrapping_neg() } else { used };
        // The nodes as given tell policies apart with static or relative
        // nodes, and (measured) with NUMA balancing.
        let user_nodes = if flags.intersects(static_or_relative | MempolicyFlags::NUMA_BALANCING) { nodes } else { 0 };
        Ok(Some(MemPolicy { mode, flags, nodes: used, user_nodes }))
    }
}

/// As `/proc/PID/numa_maps` shows it: the mode, its flags after `=`, the
/// nodes used after `:` as a list of ranges (`bind=static:0-1,3`).
///
/// ```
/// use maple_mm::MemPolicy;
/// let p = MemPolicy::from_mbind(0x8002, 0b1, 0b1).unwrap().unwrap();
/// assert_eq!(p.to_string(), "bind=static:0");
/// assert_eq!(MemPolicy::from_mbind(4, 0, 0b1).unwrap().unwrap().to_string(), "local");
/// ```
impl core::fmt::Display for MemPolicy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        use MempolicyMode::*;
        f.write_str(match self.mode {
            Default => "default",
            Preferred => "prefer",
            Bind => "bind",
            Interleave => "interleave",
            Local => "local",
            PreferredMany => "prefer (many)",
            WeightedInterleave => "weighted interleave",
        })?;
        let placement = if self.flags.contains(MempolicyFlags::STATIC_NODES) {
            Some("static")
        } else if self.flags.contains(MempolicyFlags::RELATIVE_NODES) {
            Some("relative")
        } else {
            None
        };
        let balancing = self.flags.contains(MempolicyFlags::NUMA_BALANCING);
        match (placement, balancing) {
            (Some(p), true) => write!(f, "={p}|balancing")?,
            (Some(p), false) => write!(f, "={p}")?,
            (None, true) => f.write_str("=balancing")?,
            (None, false) => {}
        }
        // The nodes as runs: `0-2,5`.
        let mut sep = ':';
        let mut n = 0;
        while n < 64 {
            if self.nodes >> n & 1 == 0 {
                n += 1;
                continue;
            }
            let first = n;
            while n < 64 && self.nodes >> n & 1 == 1 {
                n += 1;
            }
            match n - 1 - first {
                0 => write!(f, "{sep}{first}")?,
                _ => write!(f, "{sep}{first}-{}", n - 1)?,
            }
            sep = ',';
        }
        Ok(())
    }
}

impl MemPolicy {
    /// The policy a `/proc/PID/numa_maps` line shows after its address,
    /// as [`Display`](core::fmt::Display) writes it (what follows the
    /// policy on the line is ignored): `Some(None)` for `default`, `None`
    /// if it cannot be read. The nodes as given are not shown; they are
    /// taken to be the nodes used.
    ///
    /// ```
    /// use maple_mm::{MemPolicy, MempolicyMode};
    /// let p = MemPolicy::from_numa_maps("interleave=static:0-2 anon=3 dirty=3 N0=3").unwrap().unwrap();
    /// assert_eq!((p.mode, p.nodes), (MempolicyMode::Interleave, 0b111));
    /// assert_eq!(p.to_string(), "interleave=static:0-2");
    /// assert_eq!(MemPolicy::from_numa_maps("default file=/usr/bin/true"), Some(None));
    /// ```
    pub fn from_numa_maps(text: &str) -> Option<Option<MemPolicy>> {
        use MempolicyMode::*;
        const NAMES: [(&str, MempolicyMode); 7] = [
            ("weighted interleave", WeightedInterleave),
            ("prefer (many)", PreferredMany),
            ("interleave", Interleave),
            ("prefer", Preferred),
            ("bind", Bind),
            ("local", Local),
            ("default", Default),
        ];
        let &(name, mode) = NAMES.iter().find(|(n, _)| text.starts_with(n))?;
        let rest = text[name.len()..].split(' ').next()?;
        let (flags_text, nodes_text) = match rest.split_once(':') {
            Some((f, n)) => (f, n),
            None => (rest, ""),
        };
        let mut flags = MempolicyFlags::empty();
        for f in flags_text.strip_prefix('=').map(|f| f.split('|')).into_iter().flatten() {
            flags |= match f {
                "static" => MempolicyFlags::STATIC_NODES,
                "relative" => MempolicyFlags::RELATIVE_NODES,
                "balancing" => MempolicyFlags::NUMA_BALANCING,
                _ => return None,
            };
        }
        if !flags_text.is_empty() && !flags_text.starts_with('=') {
            return None;
        }
        let mut nodes = 0u64;
        for run in nodes_text.split(',').filter(|r| !r.is_empty()) {
            let (a, b) = run.split_once('-').unwrap_or((run, run));
            let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
            if a > b || b > 63 {
                return None;
            }
            nodes |= (u64::MAX >> (63 - b)) & (u64::MAX << a);
        }
        if mode == Default {
            return Some(None);
        }
        let user_nodes = if flags.is_empty() { 0 } else { nodes };
        Some(Some(MemPolicy { mode, flags, nodes, user_nodes }))
    }
}

/// The mode and its flags of `mbind`'s `mode` argument
/// (`sanitize_mpol_flags`): `EINVAL` for an unknown mode, static and
/// relative nodes together, or NUMA balancing but with `MPOL_BIND` or
/// `MPOL_PREFERRED_MANY`.
pub(crate) fn sanitize(mode: u32) -> Result<(MempolicyMode, MempolicyFlags)> {
    let flags = MempolicyFlags::from_bits_truncate(mode);
    let mode = MempolicyMode::from_code(mode & !MempolicyFlags::all().bits()).ok_or(Errno::EINVAL)?;
    if flags.contains(MempolicyFlags::STATIC_NODES | MempolicyFlags::RELATIVE_NODES) {
        return Err(Errno::EINVAL);
    }
    if flags.contains(MempolicyFlags::NUMA_BALANCING)
        && !matches!(mode, MempolicyMode::Bind | MempolicyMode::PreferredMany)
    {
        return Err(Errno::EINVAL);
    }
    Ok((mode, flags))
}

/// Relative node `i` is the `(i mod n)`-th of the `n` allowed nodes
/// (`mpol_relative_nodemask`).
fn relative(nodes: u64, allowed: u64) -> u64 {
    let n = allowed.count_ones();
    if n == 0 {
        return 0;
    }
    let nth = |k: u32| (0..64).filter(|b| allowed >> b & 1 == 1).nth(k as usize).map_or(0, |b| 1u64 << b);
    (0..64).filter(|i| nodes >> i & 1 == 1).fold(0, |m, i| m | nth(i % n))
}

#[cfg(test)]
mod tests {
    use super::{MemPolicy, MempolicyMode};
    use crate::Errno;

    /// What one memory node cannot show (the oracle's machine has one):
    /// a preferred policy keeps its first node, relative nodes fold onto
    /// the nodes with memory, and the node list prints as runs.
    #[test]
    fn policies_on_several_nodes() {
        let online = 0b1111_0111;
        let p = MemPolicy::from_mbind(1, 0b1_0100, online).unwrap().unwrap();
        assert_eq!((p.mode, p.nodes), (MempolicyMode::Preferred, 0b0100));
        // Relative node 5 is the (5 mod 7)-th node with memory: node 6.
        let r = MemPolicy::from_mbind(0x4002, 1 << 5, online).unwrap().unwrap();
        assert_eq!(r.nodes, 1 << 6);
        assert_eq!(r.to_string(), "bind=relative:6");
        let b = MemPolicy::from_mbind(0x2003, 0b1011, online);
        assert_eq!(b, Err(Errno::EINVAL), "balancing only with bind and preferred-many");
        let m = MemPolicy::from_mbind(0x2005, 0b1011_0011, online).unwrap().unwrap();
        assert_eq!(m.to_string(), "prefer (many)=balancing:0-1,4-5,7");
        let s = MemPolicy::from_mbind(0xa002, 0b1_0000, online).unwrap().unwrap();
        assert_eq!(s.to_string(), "bind=static|balancing:4");
        assert_eq!(MemPolicy::from_mbind(0xc002, 1, online), Err(Errno::EINVAL), "static and relative");
        assert_eq!(MemPolicy::from_mbind(2, 0b1000, 0b0111), Err(Errno::EINVAL), "no memory on node 3");
    }
}
