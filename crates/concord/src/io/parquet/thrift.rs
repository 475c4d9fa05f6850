//! A bounded walk over Thrift compact-protocol bytes (Parquet footers and page headers),
//! run before the parquet crate decodes them.
//!
//! Why: parquet 59.3.2 skips an unknown field's list of booleans by its claimed count
//! while reading no bytes per element (`skip_till_depth`), so a few bytes claiming 2^31
//! booleans cost 2^31 iterations (found by the `data_file` fuzz target). It also reads a
//! known field by the type it expects, whatever type the bytes declare.
//!
//! Invariant this walk establishes when it returns `Ok`: the parquet crate reads these
//! bytes with the same alignment as the walk (every known field declares the type the
//! crate expects, every list's elements too), no collection of booleans is non-empty
//! (the one place the crate's skip reads nothing), so every element the crate loops over
//! consumes at least one byte: its work is bounded by the byte count. `Truncated` means
//! the bytes ended first; the crate, reading the same way, reaches the same end and fails.

/// The expected shape of a value: the parquet format's Thrift definitions, as far as the
/// crate reads them.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ty {
    Bool,
    Byte,
    I16,
    I32,
    I64,
    Double,
    Binary,
    List(&'static Ty),
    /// A struct or a union: its known fields by id.
    Struct(&'static [(i16, Ty)]),
}

#[derive(Debug, PartialEq)]
pub(crate) enum WalkError {
    /// The bytes end inside the value.
    Truncated,
    /// The bytes would make the parquet crate misread or loop; the reason names the field.
    Refused(String),
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

/// Nesting the walk follows; the parquet crate's own skip stops at 64.
const MAX_DEPTH: u32 = 64;

/// Walks one struct of shape `fields` at the start of `bytes`; returns the bytes it
/// spans. `visit` sees every integer of a known field with its path of field ids.
pub(crate) fn walk_struct(bytes: &[u8], fields: &'static [(i16, Ty)], visit: &mut dyn FnMut(&[i16], i64)) -> Result<usize, WalkError> {
    let mut walk = Walk { bytes, at: 0, path: Vec::new(), visit };
    walk.structure(fields, 0)?;
    Ok(walk.at)
}

struct Walk<'a, 'v> {
    bytes: &'a [u8],
    at: usize,
    path: Vec<i16>,
    visit: &'v mut dyn FnMut(&[i16], i64),
}

fn accepts(ty: Ty, kind: u8) -> bool {
    match ty {
        Ty::Bool => matches!(kind, BOOL_TRUE | BOOL_FALSE),
        Ty::Byte => kind == BYTE,
        Ty::I16 => kind == I16,
        Ty::I32 => kind == I32,
        Ty::I64 => kind == I64,
        Ty::Double => kind == DOUBLE,
        Ty::Binary => kind == BINARY,
        Ty::List(_) => matches!(kind, LIST | SET),
        Ty::Struct(_) => kind == STRUCT,
    }
}

impl Walk<'_, '_> {
    fn byte(&mut self) -> Result<u8, WalkError> {
        let b = *self.bytes.get(self.at).ok_or(WalkError::Truncated)?;
        self.at += 1;
        Ok(b)
    }

    fn advance(&mut self, n: u64) -> Result<(), WalkError> {
        let end = usize::try_from(n).ok().and_then(|n| self.at.checked_add(n));
        self.at = end.filter(|end| *end <= self.bytes.len()).ok_or(WalkError::Truncated)?;
        Ok(())
    }

    fn varint(&mut self) -> Result<u64, WalkError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.refused("a varint longer than 10 bytes"))
    }

    fn zigzag(&mut self) -> Result<i64, WalkError> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn refused(&self, what: impl std::fmt::Display) -> WalkError {
        let path: Vec<String> = self.path.iter().map(i16::to_string).collect();
        WalkError::Refused(format!("{what} at byte {} (field path {})", self.at, if path.is_empty() { "-".into() } else { path.join(".") }))
    }

    fn deeper(&self, depth: u32) -> Result<u32, WalkError> {
        if depth >= MAX_DEPTH {
            return Err(self.refused(format!("nesting deeper than {MAX_DEPTH}")));
        }
        Ok(depth + 1)
    }

    /// A list or set header: (element count, element type). Empty lists may say type 0.
    fn list_header(&mut self) -> Result<(u64, u8), WalkError> {
        let b = self.byte()?;
        let (short, element) = (u64::from(b >> 4), b & 0x0F);
        let n = if short == 15 { self.varint()? } else { short };
        if n > i32::MAX as u64 {
            return Err(self.refused(format!("a list of {n} elements")));
        }
        Ok((n, element))
    }

    /// Fields to STOP (a byte whose type nibble is 0, as the parquet crate reads it).
    fn structure(&mut self, fields: &'static [(i16, Ty)], depth: u32) -> Result<(), WalkError> {
        let depth = self.deeper(depth)?;
        let mut last = 0i64;
        loop {
            let b = self.byte()?;
            let (delta, kind) = (b >> 4, b & 0x0F);
            if kind == 0 {
                return Ok(());
            }
            let id = if delta == 0 { self.zigzag()? } else { last + i64::from(delta) };
            last = id;
            match fields.iter().find(|(known, _)| i64::from(*known) == id) {
                Some(&(id, ty)) => {
                    self.path.push(id);
                    self.value(ty, kind, depth)?;
                    self.path.pop();
                }
                None => self.skip(kind, depth)?,
            }
        }
    }

    /// A known field's value, which must declare the type the parquet crate expects.
    fn value(&mut self, ty: Ty, kind: u8, depth: u32) -> Result<(), WalkError> {
        if !accepts(ty, kind) {
            return Err(self.refused(format!("wire type {kind} where {ty:?} is expected")));
        }
        match ty {
            Ty::Bool => Ok(()),
            Ty::Byte => {
                let b = self.byte()?;
                (self.visit)(&self.path, i64::from(b as i8));
                Ok(())
            }
            Ty::I16 | Ty::I32 | Ty::I64 => {
                let v = self.zigzag()?;
                (self.visit)(&self.path, v);
                Ok(())
            }
            Ty::Double => self.advance(8),
            Ty::Binary => {
                let n = self.varint()?;
                self.advance(n)
            }
            Ty::List(element) => {
                let (n, kind) = self.list_header()?;
                if n == 0 {
                    return Ok(());
                }
                if matches!(element, Ty::Bool) || !accepts(*element, kind) {
                    return Err(self.refused(format!("a list of {n} elements of wire type {kind} where {element:?} is expected")));
                }
                let depth = self.deeper(depth)?;
                for _ in 0..n {
                    self.value(*element, kind, depth)?;
                }
                Ok(())
            }
            Ty::Struct(fields) => self.structure(fields, depth),
        }
    }

    /// An unknown field's value, skipped as the parquet crate skips it.
    fn skip(&mut self, kind: u8, depth: u32) -> Result<(), WalkError> {
        if kind == STRUCT {
            // A struct none of whose fields is known.
            return self.structure(&[], depth);
        }
        let depth = self.deeper(depth)?;
        match kind {
            BOOL_TRUE | BOOL_FALSE => Ok(()),
            BYTE => self.advance(1),
            I16 | I32 | I64 => self.varint().map(|_| ()),
            DOUBLE => self.advance(8),
            UUID => self.advance(16),
            BINARY => {
                let n = self.varint()?;
                self.advance(n)
            }
            LIST | SET => {
                let (n, element) = self.list_header()?;
                self.elements(n, &[element], depth)
            }
            MAP => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let b = self.byte()?;
                self.elements(n, &[b >> 4, b & 0x0F], depth)
            }
            _ => Err(self.refused(format!("unknown wire type {kind}"))),
        }
    }

    /// `n` elements (or map entries) of the given types. The parquet crate reads no byte
    /// for a boolean element, so a non-empty collection of booleans is refused.
    fn elements(&mut self, n: u64, kinds: &[u8], depth: u32) -> Result<(), WalkError> {
        if n == 0 {
            return Ok(());
        }
        if kinds.iter().any(|k| matches!(*k, BOOL_TRUE | BOOL_FALSE)) {
            return Err(self.refused(format!("a collection of {n} booleans in an unknown field")));
        }
        if n > self.bytes.len().saturating_sub(self.at) as u64 {
            return Err(WalkError::Truncated);
        }
        for _ in 0..n {
            for kind in kinds {
                self.skip(*kind, depth)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static INNER: [(i16, Ty); 1] = [(1, Ty::I32)];
    static OUTER: [(i16, Ty); 3] = [(1, Ty::I64), (2, Ty::List(&Ty::Struct(&INNER))), (3, Ty::Binary)];

    fn walk(bytes: &[u8]) -> Result<usize, WalkError> {
        walk_struct(bytes, &OUTER, &mut |_, _| {})
    }

    #[test]
    fn walks_known_and_unknown_fields_and_refuses_what_parquet_would_loop_on() {
        // 1: i64 = 3; 2: list of 2 structs {1: i32}; 3: binary "ab"; 5: unknown i32; stop.
        let ok = [0x16, 0x06, 0x19, 0x2C, 0x15, 0x02, 0x00, 0x15, 0x04, 0x00, 0x18, 0x02, b'a', b'b', 0x25, 0x08, 0x00];
        let mut seen = Vec::new();
        assert_eq!(walk_struct(&ok, &OUTER, &mut |path, v| seen.push((path.to_vec(), v))), Ok(ok.len()));
        assert_eq!(seen, vec![(vec![1], 3), (vec![2, 1], 1), (vec![2, 1], 2)]);
        assert_eq!(walk(&ok[..ok.len() - 1]), Err(WalkError::Truncated));
        // A known field declaring another type.
        assert!(matches!(walk(&[0x15, 0x06, 0x00]), Err(WalkError::Refused(_))));
        // A known list whose elements declare another type.
        assert!(matches!(walk(&[0x29, 0x15, 0x02, 0x00]), Err(WalkError::Refused(_))));
        // An unknown field (id 4) holding a list claiming 2^31 - 1 booleans: refused at once.
        let bomb = [0x49, 0xF1, 0xFF, 0xFF, 0xFF, 0xFF, 0x07, 0x00];
        assert!(matches!(walk(&bomb), Err(WalkError::Refused(reason)) if reason.contains("booleans")));
        // The same as a map of booleans.
        assert!(matches!(walk(&[0x4B, 0xFF, 0xFF, 0x7F, 0x11, 0x00]), Err(WalkError::Refused(_))));
        // A list claiming more elements than bytes remain ends the walk.
        assert_eq!(walk(&[0x49, 0xF5, 0xFF, 0xFF, 0x7F, 0x00]), Err(WalkError::Truncated));
        // An empty list may declare type 0; a stop byte may carry a delta.
        assert_eq!(walk(&[0x49, 0x00, 0x10]), Ok(3));
        // Deep nesting of unknown structs is refused, not recursed into without bound.
        let deep: Vec<u8> = std::iter::repeat_n(0x1C, 100).chain(std::iter::repeat_n(0x00, 101)).collect();
        assert!(matches!(walk(&deep), Err(WalkError::Refused(_))));
    }
}
