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

/// The announcement an announcement's name carries (`<micros>-<id>/<content>.json`, the
/// content in segments; `None` for a name without content: its object holds it). Bounded: the name is at
/// most an object key (1,024 bytes), and it inflates to at most `INLINE_LIMIT`. The
/// transaction must be the one the name announces.
pub fn inline_announcement(path: &str, name: &str) -> Result<Option<Announcement>, CorruptObject> {
    use base64::Engine;
    if name.len() > MAX_KEY_BYTES {
        return Err(corrupt(path, format!("its name has {} bytes, more than an object key holds", name.len())));
    }
    let Some(inline) = naming::announcement_inline(name) else { return Ok(None) };
    let deflated = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(inline).map_err(|e| corrupt(path, e))?;
    let bytes = miniz_oxide::inflate::decompress_to_vec_with_limit(&deflated, INLINE_LIMIT)
        .map_err(|e| corrupt(path, format!("its name's content does not inflate: {e}")))?;
    let announcement = announcement(path, &bytes)?;
    if naming::announced_id(name) != Some(announcement.transaction.id) {
        return Err(corrupt(path, "its name's content announces another transaction"));
    }
    Ok(Some(announcement))
}

/// The longest object key on S3, Azure and GCS, in bytes.
pub(crate) const MAX_KEY_BYTES: usize = 1024;

/// The most bytes an announcement's name inflates to (its key is at most
/// [`MAX_KEY_BYTES`]; an announcement compresses about 2:1).
const INLINE_LIMIT: usize = 64 * 1024;

/// A deletion vector (a serialized roaring bitmap of deleted row offsets).
pub fn deletion_vector(path: &str, bytes: &[u8]) -> Result<RoaringBitmap, CorruptObject> {
    RoaringBitmap::deserialize_from(bytes).map_err(|e| corrupt(path, e))
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use uuid::Uuid;

    use super::*;

    fn announced(id: Uuid) -> Announcement {
        let transaction = PreparedTransaction::test_append(id, "id bigint not null, name varchar");
        Announcement { transaction, deadline: Utc::now() }
    }

    #[test]
    fn an_announcement_name_carries_the_announcement_exactly() {
        let id = Uuid::new_v4();
        let bytes = crate::encode::announcement(&announced(id));
        let inline = crate::encode::announcement_inline(&bytes);
        assert!(inline.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{inline}");
        let name = naming::announcement_name(1, id, Some(&inline));
        let decoded = inline_announcement("t/x", &name).unwrap().expect("carried");
        assert_eq!(crate::encode::announcement(&decoded), bytes);
        assert!(inline_announcement("t/x", &naming::announcement_name(1, id, None)).unwrap().is_none(), "no content: read the object");
    }

    #[test]
    fn a_name_that_does_not_decode_or_announces_another_transaction_is_refused() {
        let (id, other) = (Uuid::new_v4(), Uuid::new_v4());
        let inline = crate::encode::announcement_inline(&crate::encode::announcement(&announced(other)));
        assert!(inline_announcement("t/x", &naming::announcement_name(1, id, Some(&inline))).is_err(), "another transaction's content");
        for garbage in ["not base64!", "AAAA", &"A".repeat(2000)] {
            assert!(inline_announcement("t/x", &naming::announcement_name(1, id, Some(garbage))).is_err(), "{garbage}");
        }
        // A bomb: a small name that inflates past the limit.
        use base64::Engine;
        let bomb = miniz_oxide::deflate::compress_to_vec(&vec![b' '; INLINE_LIMIT * 4], 9);
        let bomb = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bomb);
        assert!(bomb.len() < MAX_KEY_BYTES);
        assert!(inline_announcement("t/x", &naming::announcement_name(1, id, Some(&bomb))).is_err());
    }
}
