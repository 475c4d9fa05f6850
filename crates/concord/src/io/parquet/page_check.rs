//! A check of every page header of a column chunk before the parquet crate decodes it.
//! - The header must pass the bounded Thrift walk (`thrift.rs`): the crate's skip of a
//!   list of booleans reads no bytes, so a crafted header could keep it looping.
//! - A dictionary page must hold its values: parquet 59.3.2 sizes a dictionary from the
//!   header's value count before decoding (`DictDecoder::set_dict`), and a 1.4 KB file
//!   claiming 2^31 values allocated 16 GB (found by the `data_file` fuzz target). The
//!   count times the smallest encoded size of one value must fit the uncompressed size.
//!
//! Pages follow one another: header, then `compressed_page_size` bytes. A header the
//! bytes end inside is left to the parquet crate, which reads it the same way and fails.

use parquet::basic::Type as PhysicalType;

use crate::io::parquet::footer_check::STATISTICS;
use crate::io::parquet::thrift::{walk_struct, Ty, WalkError};

/// Thrift `PageType.DICTIONARY_PAGE`.
const DICTIONARY_PAGE: i64 = 2;

/// Bytes read at a time for a header of a local file (`append` input): headers are small.
const HEADER_WINDOW: u64 = 16 * 1024;

/// What a column chunk's pages must be checked against.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChunkType {
    pub physical: PhysicalType,
    pub type_length: i32,
}

impl ChunkType {
    pub(crate) fn of(column: &parquet::file::metadata::ColumnChunkMetaData) -> Self {
        let descriptor = column.column_descr();
        ChunkType { physical: descriptor.physical_type(), type_length: descriptor.type_length() }
    }
}

/// Checks every page header of a local file's column chunks (`append` input).
pub(crate) fn check_file(file: &std::fs::File, metadata: &parquet::file::metadata::ParquetMetaData) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    for column in metadata.row_groups().iter().flat_map(|g| g.columns()) {
        let (start, length) = column.byte_range();
        let end = start.saturating_add(length);
        let chunk = ChunkType::of(column);
        let mut at = start;
        'pages: while at < end {
            let mut window = HEADER_WINDOW.min(end - at);
            let (header_len, page) = loop {
                let mut bytes = vec![0u8; window as usize];
                file.read_exact_at(&mut bytes, at).map_err(|e| format!("page header at byte {at}: {e}"))?;
                match read_header(&bytes, chunk) {
                    Ok(read) => break read,
                    Err(WalkError::Truncated) if window < end - at => window = (window * 4).min(end - at),
                    // The chunk ends inside this header: left to the parquet crate.
                    Err(WalkError::Truncated) => break 'pages,
                    Err(WalkError::Refused(reason)) => return Err(format!("page header at byte {at}: {reason}")),
                }
            };
            at = at.saturating_add(header_len).saturating_add(page);
        }
    }
    Ok(())
}

/// Checks every page header in the bytes of one column chunk, fetched whole.
pub(crate) fn check_chunk(bytes: &[u8], chunk: ChunkType) -> Result<(), String> {
    let mut at = 0usize;
    while at < bytes.len() {
        match read_header(&bytes[at..], chunk) {
            Ok((header_len, page)) => {
                at = at.saturating_add(header_len as usize).saturating_add(usize::try_from(page).unwrap_or(usize::MAX))
            }
            Err(WalkError::Truncated) => return Ok(()),
            Err(WalkError::Refused(reason)) => return Err(format!("page header at chunk byte {at}: {reason}")),
        }
    }
    Ok(())
}

/// One page header: (its length, the compressed page length after it).
fn read_header(bytes: &[u8], chunk: ChunkType) -> Result<(u64, u64), WalkError> {
    let mut header = Header::default();
    let len = walk_struct(bytes, &PAGE_HEADER, &mut |path, v| match path {
        [1] => header.page_type = Some(v),
        [2] => header.uncompressed_size = Some(v),
        [3] => header.compressed_size = Some(v),
        [7, 1] => header.dictionary_values = Some(v),
        _ => {}
    })?;
    header.check_dictionary(chunk).map_err(WalkError::Refused)?;
    let page = header.compressed_size.and_then(|size| u64::try_from(size).ok());
    let page = page.ok_or_else(|| WalkError::Refused(format!("a compressed page size of {:?}", header.compressed_size)))?;
    Ok((len as u64, page))
}

#[derive(Debug, Default, PartialEq)]
struct Header {
    page_type: Option<i64>,
    uncompressed_size: Option<i64>,
    compressed_size: Option<i64>,
    dictionary_values: Option<i64>,
}

impl Header {
    /// Why a dictionary page cannot be what its header says.
    fn check_dictionary(&self, chunk: ChunkType) -> Result<(), String> {
        if self.page_type != Some(DICTIONARY_PAGE) {
            return Ok(());
        }
        let (Some(values), Some(size)) = (self.dictionary_values, self.uncompressed_size) else {
            return Ok(());
        };
        let min_bytes: i64 = match chunk.physical {
            PhysicalType::BOOLEAN => return Ok(()),
            PhysicalType::INT32 | PhysicalType::FLOAT => 4,
            PhysicalType::INT64 | PhysicalType::DOUBLE => 8,
            PhysicalType::INT96 => 12,
            // A length prefix per value.
            PhysicalType::BYTE_ARRAY => 4,
            PhysicalType::FIXED_LEN_BYTE_ARRAY => i64::from(chunk.type_length.max(1)),
        };
        if values < 0 || size < 0 || values.saturating_mul(min_bytes) > size {
            return Err(format!("a dictionary page claims {values} values in {size} bytes"));
        }
        Ok(())
    }
}

const DATA_PAGE: [(i16, Ty); 5] = [(1, Ty::I32), (2, Ty::I32), (3, Ty::I32), (4, Ty::I32), (5, Ty::Struct(&STATISTICS))];
const INDEX_PAGE: [(i16, Ty); 0] = [];
const DICTIONARY: [(i16, Ty); 3] = [(1, Ty::I32), (2, Ty::I32), (3, Ty::Bool)];
const DATA_PAGE_V2: [(i16, Ty); 8] =
    [(1, Ty::I32), (2, Ty::I32), (3, Ty::I32), (4, Ty::I32), (5, Ty::I32), (6, Ty::I32), (7, Ty::Bool), (8, Ty::Struct(&STATISTICS))];
static PAGE_HEADER: [(i16, Ty); 8] = [
    (1, Ty::I32),
    (2, Ty::I32),
    (3, Ty::I32),
    (4, Ty::I32),
    (5, Ty::Struct(&DATA_PAGE)),
    (6, Ty::Struct(&INDEX_PAGE)),
    (7, Ty::Struct(&DICTIONARY)),
    (8, Ty::Struct(&DATA_PAGE_V2)),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A compact-protocol dictionary page header: type, sizes, then field 7.
    fn dictionary_header(values: i64, size: i64) -> Vec<u8> {
        let zigzag = |v: i64| -> Vec<u8> {
            let mut z = ((v << 1) ^ (v >> 63)) as u64;
            let mut out = Vec::new();
            loop {
                let b = (z & 0x7F) as u8;
                z >>= 7;
                if z == 0 {
                    out.push(b);
                    return out;
                }
                out.push(b | 0x80);
            }
        };
        let mut h = vec![0x15];
        h.extend(zigzag(DICTIONARY_PAGE));
        h.push(0x15);
        h.extend(zigzag(size));
        h.push(0x15);
        h.extend(zigzag(size));
        // Field 7 (delta 4 from 3): the dictionary page header struct.
        h.push(0x4C);
        h.push(0x15);
        h.extend(zigzag(values));
        h.push(0x15);
        h.extend(zigzag(0));
        h.extend([0x00, 0x00]);
        h
    }

    fn chunk(physical: PhysicalType) -> ChunkType {
        ChunkType { physical, type_length: 0 }
    }

    #[test]
    fn every_page_header_is_walked_and_dictionary_counts_must_fit_the_page() {
        let ok = dictionary_header(100, 800);
        let page = |header: &[u8]| [header, &[0u8; 800][..]].concat();
        assert!(check_chunk(&[page(&ok), page(&ok)].concat(), chunk(PhysicalType::INT64)).is_ok());
        // The second page's header is wrong: found by following the first page's size.
        let second = check_chunk(&[page(&ok), page(&dictionary_header(101, 800))].concat(), chunk(PhysicalType::INT64)).unwrap_err();
        assert!(second.contains(&format!("chunk byte {}", ok.len() + 800)) && second.contains("101 values"), "{second}");
        assert!(check_chunk(&dictionary_header(1 << 31, 40), chunk(PhysicalType::BYTE_ARRAY)).is_err());
        assert!(check_chunk(&dictionary_header(-1, 40), chunk(PhysicalType::INT32)).is_err());
        // A header the bytes end inside is left to the parquet crate; garbage is refused.
        assert!(check_chunk(&ok[..5], chunk(PhysicalType::INT64)).is_ok());
        assert!(check_chunk(&[0xFF; 64], chunk(PhysicalType::INT64)).is_err());
        // An unknown field (id 20) holding 2^31 - 1 booleans (the parquet crate would loop).
        let mut looping = ok.clone();
        looping.truncate(looping.len() - 1);
        looping.extend([0x09, 0x28, 0xF1, 0xFF, 0xFF, 0xFF, 0xFF, 0x07, 0x00]);
        assert!(check_chunk(&looping, chunk(PhysicalType::INT64)).unwrap_err().contains("booleans"));
    }
}
