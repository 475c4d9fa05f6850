//! Decoding untrusted bytes into the format's objects. Pure functions, no I/O: every
//! object read from a store goes through one of these, and the fuzz targets
//! (`fuzz/`) call them directly. Invariants: never panic; every failure is a
//! [`CorruptObject`] naming the object; every path an object names stays inside its
//! table folder (see `naming::check_inside`).

use roaring::RoaringBitmap;

use crate::error::{CorruptObject, OpenError};
use crate::format::announcement::Announcement;
use crate::format::manifest::{Fragment, Manifest, Segment, FORMAT_VERSION};
use crate::format::naming;
use crate::format::staged::{PreparedTransaction, StagedFile};

fn corrupt(path: &str, reason: impl ToString) -> CorruptObject {
    CorruptObject { path: path.to_string(), reason: reason.to_string() }
}

/// The root manifest of `version`, read from `path`.
pub fn manifest(path: &str, version: u64, bytes: &[u8]) -> Result<Manifest, OpenError> {
    #[derive(serde::Deserialize)]
    struct Header {
        format_version: u32,
    }
    let header: Header = serde_json::from_slice(bytes).map_err(|e| corrupt(path, e))?;
    if header.format_version > FORMAT_VERSION {
        return Err(OpenError::UnsupportedFormat { path: path.to_string(), found: header.format_version, supported: FORMAT_VERSION });
    }
    let manifest: Manifest = serde_json::from_slice(bytes).map_err(|e| corrupt(path, e))?;
    if manifest.version != version {
        return Err(corrupt(path, format!("it says version {}, its name says {version}", manifest.version)).into());
    }
    for segment in &manifest.segments {
        match &segment.inline {
            None => naming::check_inside(&segment.path, naming::SEGMENTS_DIR).map_err(|reason| corrupt(path, reason))?,
            Some(_) if !segment.path.is_empty() => return Err(corrupt(path, "a segment both inline and in a file").into()),
            Some(_) if manifest.format_version < 2 => return Err(corrupt(path, "a format 1 root with an inline segment (format 2)").into()),
            Some(fragments) => check_fragments(path, fragments, segment.fragments)?,
        }
    }
    Ok(manifest)
}

/// A segment read from `path`, which its manifest says holds `fragments` fragments.
pub fn segment(path: &str, fragments: u64, bytes: &[u8]) -> Result<Segment, CorruptObject> {
    let segment: Segment = serde_json::from_slice(bytes).map_err(|e| corrupt(path, e))?;
    check_fragments(path, &segment.fragments, fragments)?;
    Ok(segment)
}

/// Fragments (of a segment file, or inline in the root at `path`): every file they
/// name is inside the table, and there are as many as their reference says.
fn check_fragments(path: &str, fragments: &[Fragment], expected: u64) -> Result<(), CorruptObject> {
    let named = fragments.iter().flat_map(|f| {
        f.files
            .iter()
            .map(|d| (d.path.as_str(), naming::DATA_DIR))
            .chain(f.deletion.iter().map(|d| (d.path.as_str(), naming::DELETIONS_DIR)))
    });
    for (relative, dir) in named {
        naming::check_inside(relative, dir).map_err(|reason| corrupt(path, reason))?;
    }
    if fragments.len() as u64 != expected {
        return Err(corrupt(path, format!("holds {} fragments, its reference says {expected}", fragments.len())));
    }
    Ok(())
}

/// A staged (prepared, not yet committed) transaction read from `path`.
pub fn transaction(path: &str, bytes: &[u8]) -> Result<PreparedTransaction, CorruptObject> {
    let txn = PreparedTransaction::from(serde_json::from_slice::<StagedFile>(bytes).map_err(|e| corrupt(path, e))?);
    for file in txn.operation.written_files() {
        naming::check_inside(file, naming::DATA_DIR)
            .or_else(|_| naming::check_inside(file, naming::DELETIONS_DIR))
            .map_err(|reason| corrupt(path, reason))?;
    }
    Ok(txn)
}

/// An announced transaction (cooperative commits): its transaction is checked as a
/// staged one is.
pub fn announcement(path: &str, bytes: &[u8]) -> Result<Announcement, CorruptObject> {
    let announcement: Announcement = serde_json::from_slice(bytes).map_err(|e| corrupt(path, e))?;
    for file in announcement.transaction.operation.written_files() {
        naming::check_inside(file, naming::DATA_DIR).map_err(|reason| corrupt(path, reason))?;
    }
    Ok(announcement)
}

/// A deletion vector (a serialized roaring bitmap of deleted row offsets).
pub fn deletion_vector(path: &str, bytes: &[u8]) -> Result<RoaringBitmap, CorruptObject> {
    RoaringBitmap::deserialize_from(bytes).map_err(|e| corrupt(path, e))
}
