//! Encoding the format's objects into bytes, next to their decoding (`decode`): the one
//! place each kind of object is serialized.

use bytes::Bytes;

use crate::format::announcement::Announcement;
use crate::format::manifest::{Manifest, Segment};
use crate::format::staged::{PreparedTransaction, StagedFile};

/// A root manifest, as its version file holds it.
pub(crate) fn manifest(manifest: &Manifest) -> Bytes {
    Bytes::from(serde_json::to_vec(manifest).expect("manifests always serialize"))
}

/// A segment file.
pub(crate) fn segment(segment: &Segment) -> Bytes {
    Bytes::from(serde_json::to_vec(segment).expect("segments always serialize"))
}

/// An announced transaction (`_announced/<micros>-<id>.json`, or
/// `_announced/<micros>-<id>/<content, in segments>.json`).
pub(crate) fn announcement(announcement: &Announcement) -> Bytes {
    Bytes::from(serde_json::to_vec(announcement).expect("announcements always serialize"))
}

/// An announcement's content (`announcement`'s bytes) as its name may carry it:
/// raw DEFLATE, then URL-safe base64 without padding (letters, digits, `-` and `_`:
/// valid in an object key on every store, and free of the `/` that cuts it into
/// segments).
pub(crate) fn announcement_inline(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(miniz_oxide::deflate::compress_to_vec(bytes, 9))
}

/// A staged transaction (`_transactions/<id>.json`).
pub(crate) fn transaction(txn: &PreparedTransaction) -> Bytes {
    Bytes::from(serde_json::to_vec(&StagedFile::from(txn)).expect("transactions always serialize"))
}
