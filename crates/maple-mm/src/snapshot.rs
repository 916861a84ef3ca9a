//! `serde` support (feature `serde`): an address space as a snapshot of
//! its VMAs with every attribute, its pages' state and its layout, checked
//! on the way in.
//!
//! Open files are listed once and referred to by index, so that mappings
//! of one open file stay one `Arc<MappedFile>` (Linux merges only those).
//! anon_vmas are numbered per snapshot; reading one back gives fresh ones
//! with the same sharing, so that they cannot collide with the process's
//! own.

use std::{collections::HashMap, sync::Arc};

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

use crate::{
    flags::VmFlags,
    name::AnonName,
    policy::{MemPolicy, MempolicyFlags, MempolicyMode},
    space::{AddressSpace, Brk, Layout},
    vma::{AnonVma, Backing, MappedFile, VmaData},
};

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Snapshot {
    layout: Layout,
    brk: Option<(u64, u64)>,
    start_stack: Option<u64>,
    def_flags: u64,
    lock_leak: u64,
    files: Vec<FileRepr>,
    vmas: Vec<VmaRepr>,
    /// `[start, end)` runs.
    anon_pages: Vec<(u64, u64)>,
    lazy_pages: Vec<(u64, u64)>,
    guard_pages: Vec<(u64, u64)>,
    reserved: Vec<(u64, u64)>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRepr {
    dev_major: u32,
    dev_minor: u32,
    inode: u64,
    path: String,
    writable: bool,
    anon_shmem: bool,
    size: Option<u64>,
    sysv_shm: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct VmaRepr {
    start: u64,
    end: u64,
    /// `VM_*` bits.
    flags: u64,
    /// Index into `files`; none for private anonymous memory.
    file: Option<usize>,
    /// The offset of `start` in bytes (`vm_pgoff` times the page size).
    offset: u64,
    name: Option<String>,
    /// The anon_vma: a number shared by VMAs sharing it, and whether it
    /// came through a fork.
    anon: Option<(u64, bool)>,
    label: Option<String>,
    policy: Option<PolicyRepr>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyRepr {
    /// `MPOL_*` code.
    mode: u32,
    flags: u32,
    nodes: u64,
    user_nodes: u64,
}

impl Serialize for AddressSpace {
    /// The VMAs in address order with every attribute, the page runs, the
    /// program break and the layout (see the module docs). The embedders'
    /// values are not part of a snapshot: a space with one is refused.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if let Some(v) = self.iter().find(|v| v.has_value()) {
            return Err(serde::ser::Error::custom(format!(
                "the VMA at {:#x} carries an embedder's value, which snapshots do not hold",
                v.start
            )));
        }
        let mut files: Vec<FileRepr> = Vec::new();
        let mut file_ids: HashMap<*const MappedFile, usize> = HashMap::new();
        let mut anon_ids: HashMap<u64, u64> = HashMap::new();
        let mut vmas = Vec::with_capacity(self.vma_count());
        for v in self.iter() {
            let d = v.data;
            let file = d.backing.file().map(|f| {
                let Backing::File(arc) = &d.backing else { unreachable!("a file backs it") };
                *file_ids.entry(Arc::as_ptr(arc)).or_insert_with(|| {
                    files.push(FileRepr {
                        dev_major: f.dev_major,
                        dev_minor: f.dev_minor,
                        inode: f.inode,
                        path: f.path.clone(),
                        writable: f.writable,
                        anon_shmem: f.anon_shmem,
                        size: f.size,
                        sysv_shm: f.sysv_shm,
                    });
                    files.len() - 1
                })
            });
            let next = anon_ids.len() as u64 + 1;
            let anon = d.anon.map(|a| (*anon_ids.entry(a.id()).or_insert(next), a.is_forked()));
            vmas.push(VmaRepr {
                start: v.start,
                end: v.end,
                flags: d.flags.bits(),
                file,
                offset: v.offset(),
                name: d.name.as_ref().map(|n| n.as_str().to_string()),
                anon,
                label: d.label().map(str::to_owned),
                policy: d.policy.as_deref().map(|p| PolicyRepr {
                    mode: p.mode as u32,
                    flags: p.flags.bits(),
                    nodes: p.nodes,
                    user_nodes: p.user_nodes,
                }),
            });
        }
        Snapshot {
            layout: self.layout.clone(),
            brk: self.brk.map(|b| (b.start, b.current)),
            start_stack: self.start_stack,
            def_flags: self.def_flags.bits(),
            lock_leak: self.lock_leak,
            files,
            vmas,
            anon_pages: self.anon.iter().collect(),
            lazy_pages: self.lazy.iter().collect(),
            guard_pages: self.guards.iter().collect(),
            reserved: self.reserved.iter().collect(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for AddressSpace {
    /// Checks every VMA (page-aligned, in order, not overlapping, known
    /// flags, a file index that exists, a valid name and policy) and the
    /// whole space after (`validate`); an error names the VMA.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<AddressSpace, D::Error> {
        let snap = Snapshot::deserialize(d)?;
        build(snap).map_err(de::Error::custom)
    }
}

fn build(snap: Snapshot) -> Result<AddressSpace, String> {
    let mut mm = AddressSpace::with_layout(snap.layout);
    let files: Vec<Arc<MappedFile>> = snap
        .files
        .into_iter()
        .map(|f| {
            Arc::new(MappedFile {
                dev_major: f.dev_major,
                dev_minor: f.dev_minor,
                inode: f.inode,
                path: f.path,
                writable: f.writable,
                anon_shmem: f.anon_shmem,
                size: f.size,
                sysv_shm: f.sysv_shm,
            })
        })
        .collect();
    let mut anons: HashMap<u64, AnonVma> = HashMap::new();
    let page = mm.page();
    let mut prev_end = 0;
    for (i, v) in snap.vmas.into_iter().enumerate() {
        let at = || format!("VMA {i} ({:#x}-{:#x})", v.start, v.end);
        if v.start >= v.end || !page.is_aligned(v.start) || !page.is_aligned(v.end) {
            return Err(format!("{}: not a range of whole pages", at()));
        }
        if v.start < prev_end {
            return Err(format!("{}: overlaps the VMA before or is out of order", at()));
        }
        prev_end = v.end;
        let flags = VmFlags::from_bits(v.flags).ok_or_else(|| format!("{}: unknown flags {:#x}", at(), v.flags))?;
        let backing = match v.file {
            None => Backing::Anon,
            Some(f) => Backing::File(Arc::clone(files.get(f).ok_or_else(|| format!("{}: no file {f}", at()))?)),
        };
        let name = match v.name {
            None => None,
            Some(n) => Some(AnonName::new(&n).map_err(|_| format!("{}: bad name {n:?}", at()))?),
        };
        let anon = match v.anon {
            None => None,
            Some((id, forked)) => {
                let a = *anons.entry(id).or_insert_with(|| if forked { AnonVma::forked() } else { AnonVma::new() });
                if a.is_forked() != forked {
                    return Err(format!("{}: anon_vma {id} both forked and not", at()));
                }
                Some(a)
            }
        };
        let policy = match v.policy {
            None => None,
            Some(p) => {
                let mode = MempolicyMode::from_code(p.mode)
                    .ok_or_else(|| format!("{}: unknown policy mode {}", at(), p.mode))?;
                let flags = MempolicyFlags::from_bits(p.flags)
                    .ok_or_else(|| format!("{}: unknown policy flags {:#x}", at(), p.flags))?;
                Some(Arc::new(MemPolicy { mode, flags, nodes: p.nodes, user_nodes: p.user_nodes }))
            }
        };
        let data = VmaData {
            flags,
            backing,
            off_base: VmaData::base_for(v.start, v.offset),
            name,
            anon,
            extra: crate::vma::Extra::make(v.label, None),
            policy,
        };
        mm.put(v.start, v.end, data).map_err(|_| "out of memory".to_string())?;
    }
    let runs = |what: &str, runs: &[(u64, u64)]| -> Result<(), String> {
        match runs.iter().find(|(s, e)| s >= e || !page.is_aligned(*s) || !page.is_aligned(*e)) {
            Some((s, e)) => Err(format!("{what} {s:#x}-{e:#x}: not a range of whole pages")),
            None => Ok(()),
        }
    };
    runs("anonymous pages", &snap.anon_pages)?;
    runs("lazily freeable pages", &snap.lazy_pages)?;
    runs("guard pages", &snap.guard_pages)?;
    runs("reserved range", &snap.reserved)?;
    let oom = |_| "out of memory".to_string();
    for (s, e) in snap.anon_pages {
        mm.anon.install(s, e).map_err(oom)?;
    }
    for (s, e) in snap.lazy_pages {
        mm.lazy.install(s, e).map_err(oom)?;
    }
    for (s, e) in snap.guard_pages {
        mm.guards.install(s, e).map_err(oom)?;
    }
    for (s, e) in snap.reserved {
        mm.reserved.install(s, e).map_err(oom)?;
    }
    mm.brk = snap.brk.map(|(start, current)| Brk { start, current });
    mm.start_stack = snap.start_stack;
    mm.def_flags = VmFlags::from_bits(snap.def_flags).ok_or("unknown default flags")?;
    let sealed = mm.iter().any(|v| v.flags().contains(VmFlags::SEALED));
    mm.sealed = sealed;
    mm.lock_leak = snap.lock_leak;
    mm.validate()?;
    Ok(mm)
}
