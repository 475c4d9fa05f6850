//! A check of each column chunk's first page header before the parquet crate decodes
//! it. parquet 59.3.2 sizes a dictionary from its header's value count before decoding
//! (`DictDecoder::set_dict`): a 1.4 KB file claiming 2^31 values allocated 16 GB (found
//! by the `data_file` fuzz target). A dictionary page must hold its values: the count
//! times the smallest encoded size of one value fits in the page's uncompressed size.
//!
//! The header is Thrift compact protocol; only what the check needs is read, with every
//! length bounded by the bytes at hand. A header this parser cannot read is left to the
//! parquet crate, which reports it.

use parquet::basic::Type as PhysicalType;

/// Thrift `PageType.DICTIONARY_PAGE`.
const DICTIONARY_PAGE: i64 = 2;
/// Nesting deeper than any page header; beyond it the parser gives up.
const MAX_DEPTH: u32 = 8;

/// Bytes read at each column chunk's start for the check: page headers are small.
pub(crate) const HEADER_BYTES: u64 = 64 * 1024;

/// Checks the first page of every column chunk of a local file (`append` input).
pub(crate) fn check_file(file: &std::fs::File, metadata: &parquet::file::metadata::ParquetMetaData) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    for column in metadata.row_groups().iter().flat_map(|g| g.columns()) {
        let (start, length) = column.byte_range();
        let mut bytes = vec![0u8; length.min(HEADER_BYTES) as usize];
        file.read_exact_at(&mut bytes, start).map_err(|e| format!("column chunk at byte {start}: {e}"))?;
        let descriptor = column.column_descr();
        check_first_page(&bytes, descriptor.physical_type(), descriptor.type_length())
            .map_err(|reason| format!("column chunk at byte {start}: {reason}"))?;
    }
    Ok(())
}

/// Why a dictionary page cannot be what its header says.
pub(crate) fn check_first_page(bytes: &[u8], physical: PhysicalType, type_length: i32) -> Result<(), String> {
    let Some(header) = PageHeader::parse(bytes) else { return Ok(()) };
    if header.page_type != Some(DICTIONARY_PAGE) {
        return Ok(());
    }
    let (Some(values), Some(size)) = (header.dictionary_values, header.uncompressed_size) else { return Ok(()) };
    let min_bytes: i64 = match physical {
        PhysicalType::BOOLEAN => return Ok(()),
        PhysicalType::INT32 | PhysicalType::FLOAT => 4,
        PhysicalType::INT64 | PhysicalType::DOUBLE => 8,
        PhysicalType::INT96 => 12,
        // A length prefix per value.
        PhysicalType::BYTE_ARRAY => 4,
        PhysicalType::FIXED_LEN_BYTE_ARRAY => i64::from(type_length.max(1)),
    };
    if values < 0 || size < 0 || values.saturating_mul(min_bytes) > size {
        return Err(format!("a dictionary page claims {values} values in {size} bytes"));
    }
    Ok(())
}

#[derive(Debug, Default, PartialEq)]
struct PageHeader {
    page_type: Option<i64>,
    uncompressed_size: Option<i64>,
    dictionary_values: Option<i64>,
}

impl PageHeader {
    fn parse(bytes: &[u8]) -> Option<PageHeader> {
        let mut r = Reader { bytes, at: 0 };
        let mut header = PageHeader::default();
        r.fields(0, &mut |r, id, kind| {
            match (id, kind) {
                (1, I32) => header.page_type = Some(r.varint_zigzag()?),
                (2, I32) => header.uncompressed_size = Some(r.varint_zigzag()?),
                (7, STRUCT) => r.fields(1, &mut |r, id, kind| {
                    match (id, kind) {
                        (1, I32) => header.dictionary_values = Some(r.varint_zigzag()?),
                        _ => r.skip(kind, 2)?,
                    }
                    Some(())
                })?,
                _ => r.skip(kind, 1)?,
            }
            Some(())
        })?;
        Some(header)
    }
}

const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;
const UUID: u8 = 13;

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn advance(&mut self, n: u64) -> Option<()> {
        let n = usize::try_from(n).ok()?;
        self.at = self.at.checked_add(n).filter(|end| *end <= self.bytes.len())?;
        Some(())
    }

    fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    fn varint_zigzag(&mut self) -> Option<i64> {
        let v = self.varint()?;
        Some((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// The fields of a struct, to STOP; `on_field` reads or skips each value.
    fn fields(&mut self, depth: u32, on_field: &mut dyn FnMut(&mut Self, i64, u8) -> Option<()>) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut last = 0i64;
        loop {
            let b = self.byte()?;
            if b == 0 {
                return Some(());
            }
            let (delta, kind) = (b >> 4, b & 0x0F);
            last = if delta == 0 { self.varint_zigzag()? } else { last + i64::from(delta) };
            on_field(self, last, kind)?;
        }
    }

    /// Skips one value of `kind` (a boolean field's value is in its type).
    fn skip(&mut self, kind: u8, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match kind {
            BOOL_TRUE | BOOL_FALSE => Some(()),
            BYTE => self.advance(1),
            I16 | I32 | I64 => self.varint().map(|_| ()),
            DOUBLE => self.advance(8),
            UUID => self.advance(16),
            BINARY => {
                let n = self.varint()?;
                self.advance(n)
            }
            LIST | SET => {
                let b = self.byte()?;
                let (short, element) = (u64::from(b >> 4), b & 0x0F);
                let n = if short == 15 { self.varint()? } else { short };
                for _ in 0..n {
                    // Booleans in a list take a byte each.
                    if matches!(element, BOOL_TRUE | BOOL_FALSE) { self.advance(1)? } else { self.skip(element, depth + 1)? }
                }
                Some(())
            }
            MAP => {
                let n = self.varint()?;
                if n == 0 {
                    return Some(());
                }
                let b = self.byte()?;
                let (key, value) = (b >> 4, b & 0x0F);
                for _ in 0..n {
                    self.skip(key, depth + 1)?;
                    self.skip(value, depth + 1)?;
                }
                Some(())
            }
            STRUCT => self.fields(depth + 1, &mut |r, _, kind| r.skip(kind, depth + 1)),
            _ => None,
        }
    }
}

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

    #[test]
    fn dictionary_counts_must_fit_the_page() {
        let ok = dictionary_header(100, 800);
        assert_eq!(
            PageHeader::parse(&ok),
            Some(PageHeader { page_type: Some(2), uncompressed_size: Some(800), dictionary_values: Some(100) })
        );
        assert!(check_first_page(&ok, PhysicalType::INT64, 0).is_ok());
        assert!(check_first_page(&dictionary_header(101, 800), PhysicalType::INT64, 0).is_err());
        assert!(check_first_page(&dictionary_header(1 << 31, 40), PhysicalType::BYTE_ARRAY, 0).is_err());
        assert!(check_first_page(&dictionary_header(-1, 40), PhysicalType::INT32, 0).is_err());
        // Unreadable headers are left to the parquet crate.
        assert!(check_first_page(&ok[..5], PhysicalType::INT64, 0).is_ok());
        assert!(check_first_page(&[0xFF; 64], PhysicalType::INT64, 0).is_ok());
    }
}
