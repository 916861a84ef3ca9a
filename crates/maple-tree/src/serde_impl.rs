//! `serde` support (feature `serde`): a tree is a sequence of
//! `(first, last, value)` triples in ascending order, and is checked on the
//! way in: a bad range or an overlap is an error naming the entry, never a
//! corrupt tree. A [`MapleSet`] is a sequence of `(first, last)` pairs,
//! joined on the way in as its inserts join them.

#[allow(unused_imports)]
use crate::prelude::*;

use core::{fmt, marker::PhantomData};

use serde::{
    de::{self, SeqAccess, Visitor},
    ser::SerializeSeq,
    Deserialize, Deserializer, Serialize, Serializer,
};

use crate::{handle::Handle, key::Key, set::MapleSet, tree::MapleTree, U63};

impl Serialize for U63 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.get())
    }
}

impl<'de> Deserialize<'de> for U63 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<U63, D::Error> {
        let v = u64::deserialize(d)?;
        U63::new(v).ok_or_else(|| de::Error::custom(format_args!("{v} does not fit in 63 bits")))
    }
}

/// Serialises the entries (reserved ranges are not values and are left
/// out) as a sequence of `(first, last, value)`.
impl<V, K> Serialize for MapleTree<V, K>
where
    V: Handle + Serialize,
    K: Key + Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for (lo, hi, w) in self.raw_entries() {
            // SAFETY: a value word of this tree, which `&self` keeps alive
            // and unchanged.
            unsafe { V::with_ref(w, |v| seq.serialize_element(&(K::from_index(lo), K::from_index(hi), v))) }?;
        }
        seq.end()
    }
}

/// Reads a sequence of `(first, last, value)` into a plain tree (as
/// [`MapleTree::new`]; see [`serde_with_gaps`](crate::serde_with_gaps) for a
/// gap-tracking one). Entries may come in any order; `first > last` or a
/// range overlapping an earlier entry is an error.
impl<'de, V, K> Deserialize<'de> for MapleTree<V, K>
where
    V: Handle + Deserialize<'de>,
    K: Key + Deserialize<'de> + fmt::Debug,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<MapleTree<V, K>, D::Error> {
        d.deserialize_seq(TreeVisitor { gaps: false, _v: PhantomData })
    }
}

struct TreeVisitor<V, K> {
    gaps: bool,
    _v: PhantomData<(V, fn() -> K)>,
}

impl<'de, V, K> Visitor<'de> for TreeVisitor<V, K>
where
    V: Handle + Deserialize<'de>,
    K: Key + Deserialize<'de> + fmt::Debug,
{
    type Value = MapleTree<V, K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence of (first, last, value) entries")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MapleTree<V, K>, A::Error> {
        let mut t = if self.gaps { MapleTree::keyed_with_gaps() } else { MapleTree::keyed() };
        let mut i = 0usize;
        while let Some((first, last, value)) = seq.next_element::<(K, K, V)>()? {
            if first.to_index() > last.to_index() {
                return Err(de::Error::custom(format_args!("entry {i}: range {first:?}..={last:?} is backwards")));
            }
            if let Err(e) = t.insert_range(first..=last, value) {
                return Err(de::Error::custom(format_args!("entry {i}: range {first:?}..={last:?}: {}", e.cause)));
            }
            i += 1;
        }
        Ok(t)
    }
}

/// For `#[serde(with = "maple_tree::serde_with_gaps")]`: the same format
/// as the tree's own `Serialize`/`Deserialize`, read into a gap-tracking
/// tree (as [`MapleTree::with_gaps`]).
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use maple_tree::{MapleTree, U63};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Space {
///     #[serde(with = "maple_tree::serde_with_gaps")]
///     areas: MapleTree<U63>,
/// }
/// # }
/// ```
pub mod serde_with_gaps {
    use super::*;

    /// Serialises as the tree's own `Serialize` does.
    pub fn serialize<V, K, S>(t: &MapleTree<V, K>, s: S) -> Result<S::Ok, S::Error>
    where
        V: Handle + Serialize,
        K: Key + Serialize,
        S: Serializer,
    {
        t.serialize(s)
    }

    /// Reads into a gap-tracking tree.
    pub fn deserialize<'de, V, K, D>(d: D) -> Result<MapleTree<V, K>, D::Error>
    where
        V: Handle + Deserialize<'de>,
        K: Key + Deserialize<'de> + fmt::Debug,
        D: Deserializer<'de>,
    {
        d.deserialize_seq(TreeVisitor { gaps: true, _v: PhantomData })
    }
}

/// Serialises the ranges as a sequence of `(first, last)` pairs.
impl<K: Key + Serialize> Serialize for MapleSet<K> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for r in self {
            seq.serialize_element(&(*r.start(), *r.end()))?;
        }
        seq.end()
    }
}

/// Reads a sequence of `(first, last)` pairs in any order, joining those
/// that touch or overlap (as [`MapleSet::insert`] does); `first > last` is
/// an error naming the pair.
impl<'de, K: Key + Deserialize<'de> + fmt::Debug> Deserialize<'de> for MapleSet<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<MapleSet<K>, D::Error> {
        d.deserialize_seq(SetVisitor(PhantomData))
    }
}

struct SetVisitor<K>(PhantomData<fn() -> K>);

impl<'de, K: Key + Deserialize<'de> + fmt::Debug> Visitor<'de> for SetVisitor<K> {
    type Value = MapleSet<K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence of (first, last) ranges")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MapleSet<K>, A::Error> {
        let mut ranges = Vec::new();
        while let Some((first, last)) = seq.next_element::<(K, K)>()? {
            if first.to_index() > last.to_index() {
                let i = ranges.len();
                return Err(de::Error::custom(format_args!("range {i}: {first:?}..={last:?} is backwards")));
            }
            ranges.push(first..=last);
        }
        Ok(ranges.into_iter().collect())
    }
}
