//! `serde` support (feature `serde`): an address space as a snapshot of
//! its VMAs with every attribute, its pages' state and its layout, checked
//! on the way in.
//!
//! Open files are listed once and referred to by index, so that mappings
//! of one open file stay one `Arc<MappedFile>` (Linux merges only those).
//! anon_vmas are numbered per snapshot; reading one back gives fresh ones
//! with the same sharing, so that they cannot collide with the process's
//! own.
//!
//! `AddressSpace` itself serializes a space without the embedder's values
//! (and refuses one with them); [`WithValues`] carries values of one
//! serializable type. Each VMA holds its own copy of its value: pieces
//! that shared one come back with equal ones, which merge as before
//! (values that join).

use core::{any::Any, fmt, marker::PhantomData};
use std::{collections::HashMap, sync::Arc};

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

use crate::{
    flags::VmFlags,
    layout::Layout,
    name::AnonName,
    policy::{MemPolicy, MempolicyFlags, MempolicyMode},
    space::{AddressSpace, Brk},
    value::ErasedValue,
    vma::{AnonVma, Backing, MappedFile, VmaData},
    VmaValue,
};

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, bound(serialize = "V: Serialize", deserialize = "V: Deserialize<'de>"))]
struct Snapshot<V> {
    layout: Layout,
    brk: Option<(u64, u64)>,
    start_stack: Option<u64>,
    def_flags: u64,
    lock_leak: u64,
    files: Vec<FileRepr>,
    vmas: Vec<VmaRepr<V>>,
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
#[serde(deny_unknown_fields, bound(serialize = "V: Serialize", deserialize = "V: Deserialize<'de>"))]
struct VmaRepr<V> {
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
    /// The embedder's value, in a snapshot written with its type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value: Option<V>,
}

/// The value type of a snapshot without values: reading one that has
/// them fails, saying how to read it.
#[derive(Clone, Debug, PartialEq)]
struct NoValue;

impl VmaValue for NoValue {}

impl Serialize for NoValue {
    fn serialize<S: Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom("no value"))
    }
}

impl<'de> Deserialize<'de> for NoValue {
    fn deserialize<D: Deserializer<'de>>(_: D) -> Result<NoValue, D::Error> {
        Err(de::Error::custom("the snapshot holds embedder's values: read it as `WithValues<V>` with their type"))
    }
}

/// A snapshot of an address space together with the embedder's values
/// of type `V` on its VMAs ([`AddressSpace::mmap_with`]): write one with
/// [`AddressSpace::with_values`], read one as `WithValues<V>`. A VMA with
/// a value of another type is refused, naming the VMA.
///
/// ```
/// use maple_mm::{snapshot::WithValues, AddressSpace, MapFlags, Prot};
/// let mut mm = AddressSpace::new();
/// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
/// let a = mm.mmap_with(0, 8192, Prot::RW, anon, None, 0, 7u32).unwrap();
/// assert!(serde_json::to_string(&mm).is_err()); // values need their type
/// let json = serde_json::to_string(&mm.with_values::<u32>()).unwrap();
/// let WithValues(copy, _) = serde_json::from_str::<WithValues<u32>>(&json).unwrap();
/// assert_eq!(copy.vma_at(a).unwrap().value::<u32>(), Some(&7));
/// assert!(serde_json::from_str::<WithValues<String>>(&json).is_err());
/// assert!(serde_json::from_str::<AddressSpace>(&json).is_err());
/// ```
pub struct WithValues<V>(pub AddressSpace, pub PhantomData<V>);

impl<V> fmt::Debug for WithValues<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("WithValues").field(&self.0).finish()
    }
}

impl<'de, V: VmaValue + Deserialize<'de>> Deserialize<'de> for WithValues<V> {
    /// As [`AddressSpace`]'s, with each VMA's value read as a `V`.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<WithValues<V>, D::Error> {
        let snap = Snapshot::<V>::deserialize(d)?;
        build(snap).map(|mm| WithValues(mm, PhantomData)).map_err(de::Error::custom)
    }
}

/// An address space to be written with its values of type `V` (see
/// [`WithValues`]).
pub struct ValuesOf<'a, V> {
    mm: &'a AddressSpace,
    _values: PhantomData<V>,
}

impl<V> fmt::Debug for ValuesOf<'_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ValuesOf").field(self.mm).finish()
    }
}

impl<V: VmaValue + Serialize> Serialize for ValuesOf<'_, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        snapshot::<V>(self.mm, true).map_err(serde::ser::Error::custom)?.serialize(s)
    }
}

impl AddressSpace {
    /// This space to be written as a snapshot with the embedder's values
    /// of type `V` (see [`WithValues`]).
    pub fn with_values<V: VmaValue + Serialize>(&self) -> ValuesOf<'_, V> {
        ValuesOf { mm: self, _values: PhantomData }
    }
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
    /// program break and the layout (see the module docs). A space with
    /// embedder's values is refused: write it through
    /// [`with_values`](AddressSpace::with_values), which knows their type.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        snapshot::<NoValue>(self, false).map_err(serde::ser::Error::custom)?.serialize(s)
    }
}

/// The snapshot of `mm`, with its values (all of type `V`) if `values`.
fn snapshot<V: Any + Clone>(mm: &AddressSpace, values: bool) -> Result<Snapshot<V>, String> {
    let mut files: Vec<FileRepr> = Vec::new();
    let mut file_ids: HashMap<*const MappedFile, usize> = HashMap::new();
    let mut anon_ids: HashMap<u64, u64> = HashMap::new();
    let mut vmas = Vec::with_capacity(mm.vma_count());
    for v in mm.iter() {
        let d = v.data;
        let value = match d.value() {
            None => None,
            Some(x) if values => Some(
                x.as_any()
                    .downcast_ref::<V>()
                    .cloned()
                    .ok_or_else(|| format!("the VMA at {:#x} carries an embedder's value of another type", v.start))?,
            ),
            Some(_) => {
                return Err(format!(
                    "the VMA at {:#x} carries an embedder's value: write the space through `with_values` with its type",
                    v.start
                ))
            }
        };
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
            value,
        });
    }
    Ok(Snapshot {
        layout: mm.layout.clone(),
        brk: mm.brk.map(|b| (b.start, b.current)),
        start_stack: mm.start_stack,
        def_flags: mm.def_flags.bits(),
        lock_leak: mm.lock_leak,
        files,
        vmas,
        anon_pages: mm.anon.iter().collect(),
        lazy_pages: mm.lazy.iter().collect(),
        guard_pages: mm.guards.iter().collect(),
        reserved: mm.reserved.iter().collect(),
    })
}

impl<'de> Deserialize<'de> for AddressSpace {
    /// Checks every VMA (page-aligned, in order, not overlapping, known
    /// flags, a file index that exists, a valid name and policy) and the
    /// whole space after (`validate`); an error names the VMA.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<AddressSpace, D::Error> {
        let snap = Snapshot::<NoValue>::deserialize(d)?;
        build(snap).map_err(de::Error::custom)
    }
}

fn build<V: VmaValue>(snap: Snapshot<V>) -> Result<AddressSpace, String> {
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
    let page = mm.page_size();
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
            extra: crate::vma::Extra::make(v.label, v.value.map(|x| Box::new(x) as Box<dyn ErasedValue>)),
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
