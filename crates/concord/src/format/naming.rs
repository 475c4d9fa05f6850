//! Object names inside a table folder. Every name except the advisory latest-version
//! hint is written once and never overwritten.

use object_store::path::Path;
use uuid::Uuid;

/// Folder holding one root manifest per version.
pub(crate) const VERSIONS_DIR: &str = "_versions";
/// Folder holding immutable fragment-list segments shared between versions.
pub(crate) const SEGMENTS_DIR: &str = "_segments";
/// Folder holding deletion vectors (roaring bitmaps of deleted row offsets).
pub(crate) const DELETIONS_DIR: &str = "_deletions";
/// Folder holding staged (prepared, not yet committed) transactions.
pub(crate) const TRANSACTIONS_DIR: &str = "_transactions";
/// Folder holding announced transactions (cooperative commits, FORMAT.md §8).
pub(crate) const ANNOUNCED_DIR: &str = "_announced";
/// Folder holding Parquet data files.
pub(crate) const DATA_DIR: &str = "data";
/// Consumers of the change feed: `_consumers/<name>/<sequence>.json`, one record per
/// move, created once each (FORMAT.md §11).
pub(crate) const CONSUMERS_DIR: &str = "_consumers";
/// The Iceberg view's metadata (FORMAT.md §16).
pub(crate) const ICEBERG_DIR: &str = "_iceberg";
/// Folders of a chain's own objects: a branch keeps them under its chain's folder
/// (`_branches/<id>/`), the main chain at the table root.
pub(crate) const CHAIN_DIRS: [&str; 3] = [ANNOUNCED_DIR, CONSUMERS_DIR, ICEBERG_DIR];

/// Whether `relative` is one of a chain's own objects (see [`CHAIN_DIRS`]).
pub(crate) fn is_chain_object(relative: &str) -> bool {
    CHAIN_DIRS.iter().any(|dir| relative.strip_prefix(dir).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')))
}

/// Advisory hint naming a recent version; may be stale or missing, never trusted alone.
pub(crate) const LATEST_HINT: &str = "_latest_version_hint.json";

const VERSION_NAME_DIGITS: usize = 20;
const VERSION_SUFFIX: &str = ".json";

/// File name of `version`: `u64::MAX - version`, zero-padded to 20 digits, so that
/// the newest version sorts first in a lexical listing.
pub fn version_file_name(version: u64) -> String {
    format!("{:0width$}{VERSION_SUFFIX}", u64::MAX - version, width = VERSION_NAME_DIGITS)
}

/// Inverse of [`version_file_name`]; `None` for anything that is not a version file.
pub fn parse_version_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(VERSION_SUFFIX)?;
    if digits.len() != VERSION_NAME_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok().map(|inverted| u64::MAX - inverted)
}

pub(crate) fn version_path(root: &Path, version: u64) -> Path {
    root.clone().join(VERSIONS_DIR).join(version_file_name(version).as_str())
}

pub(crate) fn versions_dir(root: &Path) -> Path {
    root.clone().join(VERSIONS_DIR)
}

pub(crate) fn latest_hint_path(root: &Path) -> Path {
    root.clone().join(LATEST_HINT)
}

/// Relative (to the table root) name of a segment file.
pub(crate) fn segment_name(id: Uuid) -> String {
    format!("{SEGMENTS_DIR}/{id}.json")
}

/// Relative (to the table root) name of a data file.
pub(crate) fn data_file_name(id: Uuid) -> String {
    format!("{DATA_DIR}/{id}.parquet")
}

/// Relative (to the table root) name of a deletion-vector file.
pub(crate) fn deletion_file_name(id: Uuid) -> String {
    format!("{DELETIONS_DIR}/{id}.bin")
}

/// Relative (to the table root) name of a staged transaction.
pub(crate) fn staged_transaction_name(id: Uuid) -> String {
    format!("{TRANSACTIONS_DIR}/{id}.json")
}

/// Relative name of an announced transaction: `<micros since epoch, 20 digits>-<id>.json`,
/// so that a listing returns announcements in the order they were made. With `inline`
/// (its content, see `encode::announcement_inline`): `<micros>-<id>/<c1>/.../<cn>.json`,
/// the content cut into segments of at most [`INLINE_SEGMENT_BYTES`], so that a listing
/// hands includers the content with no read (FORMAT.md §8).
pub(crate) fn announcement_name(at_micros: i64, id: Uuid, inline: Option<&str>) -> String {
    let stem = format!("{ANNOUNCED_DIR}/{:020}-{id}", at_micros.max(0));
    match inline {
        Some(inline) => {
            let (mut segments, mut rest) = (Vec::new(), inline);
            while !rest.is_empty() {
                let mut cut = rest.len().min(INLINE_SEGMENT_BYTES);
                while !rest.is_char_boundary(cut) {
                    cut -= 1;
                }
                segments.push(&rest[..cut]);
                rest = &rest[cut..];
            }
            format!("{stem}/{}.json", segments.join("/"))
        }
        None => format!("{stem}.json"),
    }
}

/// The longest segment of an announcement name's content: file-backed stores keep every
/// segment as a file name (255 bytes on most filesystems; s3rver adds up to 22 bytes,
/// MinIO none), and a name's first segment is 57 bytes.
pub(crate) const INLINE_SEGMENT_BYTES: usize = 200;

/// An announcement's (or its withdrawal's) name, split: its stem `<micros>-<id>`, and
/// the content it carries (segments still joined by `/`), if any.
fn announcement_parts(name: &str) -> Option<(&str, Option<&str>)> {
    let rest = name.strip_prefix(ANNOUNCED_DIR).and_then(|r| r.strip_prefix('/')).unwrap_or(name);
    match rest.split_once('/') {
        // The folder of an announcement whose name carries its content (as a listing
        // one level deep names it).
        Some((stem, "")) => Some((stem, None)),
        Some((stem, inline)) => Some((stem, Some(inline.strip_suffix(".json")?))),
        None => Some((rest.strip_suffix(".json").or_else(|| rest.strip_suffix(".withdrawn"))?, None)),
    }
}

/// Relative name of the withdrawal of the announcement `announcement`:
/// `<micros>-<id>.withdrawn` (without the content an announcement's name may carry).
pub(crate) fn withdrawal_name(announcement: &str) -> String {
    let stem = announcement_parts(announcement).map_or(announcement, |(stem, _)| stem);
    format!("{ANNOUNCED_DIR}/{stem}.withdrawn")
}

/// An announcement's (or its withdrawal's) stem, `<micros>-<id>`: announcements are
/// ordered by it, whatever content their names carry.
pub(crate) fn announcement_stem(name: &str) -> &str {
    announcement_parts(name).map_or(name, |(stem, _)| stem)
}

/// The announced transaction's id in an announcement's (or its withdrawal's) name.
pub(crate) fn announced_id(name: &str) -> Option<Uuid> {
    let (stem, _) = announcement_parts(name)?;
    stem.split_once('-').and_then(|(_, id)| id.parse().ok())
}

/// The content an announcement's name carries (its segments joined), if any.
pub(crate) fn announcement_inline(name: &str) -> Option<String> {
    let (_, inline) = announcement_parts(name)?;
    Some(inline?.split('/').collect())
}

/// Checks that `relative` (read from a manifest, segment or staged transaction) names an
/// object inside the table: `<dir>/<one name>`, no `..`, no absolute path, no scheme.
/// Reading a table never touches objects outside it.
pub(crate) fn check_inside(relative: &str, dir: &str) -> Result<(), String> {
    let name = relative.strip_prefix(dir).and_then(|r| r.strip_prefix('/'));
    match name {
        Some(n) if !n.is_empty() && !n.contains(['/', '\\', ':']) && n != "." && n != ".." => Ok(()),
        _ => {
            Err(format!("it names '{relative}', which is not an object of the table's {dir}/ folder (refusing to read outside the table)"))
        }
    }
}

/// Absolute object path of a name relative to the table root.
pub(crate) fn resolve(root: &Path, relative: &str) -> Path {
    relative.split('/').fold(root.clone(), |p, part| p.join(part))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_outside_the_table_are_refused() {
        assert!(check_inside("data/1c9e.parquet", "data").is_ok());
        for bad in [
            "../data/x.parquet",
            "data/../../etc/passwd",
            "/data/x",
            "s3://other/data/x",
            "data/",
            "data/a/b",
            "_segments/x.json",
            "data/..",
            "data/c:\\x",
        ] {
            assert!(check_inside(bad, "data").is_err(), "{bad}");
        }
    }

    #[test]
    fn an_announcement_name_may_carry_its_content_and_its_withdrawal_never_does() {
        let id = Uuid::new_v4();
        let content = "eJzLSM3Jyc9XKM8vykkBAB-LBF0".repeat(20);
        let plain = announcement_name(1_700_000_000_000_000, id, None);
        let inline = announcement_name(1_700_000_000_000_000, id, Some(&content));
        assert_eq!(plain, format!("_announced/00001700000000000000-{id}.json"));
        assert!(inline.starts_with(&format!("_announced/00001700000000000000-{id}/")) && inline.ends_with(".json"), "{inline}");
        let segments: Vec<&str> = inline.split('/').skip(2).collect();
        assert_eq!(segments.len(), 3, "540 bytes of content in segments of at most 200: {inline}");
        assert!(inline.split('/').all(|s| s.len() <= INLINE_SEGMENT_BYTES + ".json".len()), "{inline}");
        for name in [&plain, &inline] {
            assert_eq!(announced_id(name), Some(id));
            let withdrawal = withdrawal_name(name);
            assert_eq!(withdrawal, format!("_announced/00001700000000000000-{id}.withdrawn"));
            assert_eq!(announced_id(&withdrawal), Some(id));
            assert_eq!(announcement_inline(&withdrawal), None);
        }
        assert_eq!(announcement_inline(&plain), None);
        assert_eq!(announcement_inline(&inline), Some(content));
        // A listing one level deep names an announcement with content by its folder.
        let folder = format!("_announced/00001700000000000000-{id}/");
        assert!(inline.starts_with(&folder));
        assert_eq!(announced_id(&folder), Some(id));
        assert_eq!(announcement_inline(&folder), None);
        for name in [&plain, &inline, &folder, &withdrawal_name(&inline)] {
            assert_eq!(announcement_stem(name), format!("00001700000000000000-{id}"), "{name}");
        }
        // Listing order is the order they were made, with or without content.
        let later = announcement_name(1_700_000_000_000_001, Uuid::nil(), None);
        assert!(inline < later && plain < later);
    }

    #[test]
    fn version_names_invert_and_sort_newest_first() {
        assert_eq!(version_file_name(0), "18446744073709551615.json");
        assert_eq!(version_file_name(u64::MAX), "00000000000000000000.json");
        let mut names: Vec<_> = [0u64, 1, 9, 10, 11, 999, 1000].iter().map(|v| version_file_name(*v)).collect();
        names.sort();
        let back: Vec<_> = names.iter().map(|n| parse_version_file_name(n).unwrap()).collect();
        assert_eq!(back, vec![1000, 999, 11, 10, 9, 1, 0]);
        assert_eq!(parse_version_file_name("_latest.json"), None);
        assert_eq!(parse_version_file_name("123.json"), None);
    }
}
