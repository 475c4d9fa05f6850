//! CSV records (RFC 4180) that remember which fields were quoted, so that an unquoted
//! empty field reads as NULL and a quoted `""` as the empty string (as PostgreSQL and
//! DuckDB read CSV). Arrow's reader cannot tell the two apart.

use std::io::BufRead;

/// One field of a record: its text, and whether it was quoted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CsvField {
    pub text: String,
    pub quoted: bool,
}

/// Reads records one at a time, counting physical lines (a quoted field may span lines).
pub(crate) struct CsvRecords<R> {
    reader: R,
    /// Lines consumed so far.
    line: u64,
    buf: Vec<u8>,
}

impl<R: BufRead> CsvRecords<R> {
    pub(crate) fn new(reader: R) -> Self {
        CsvRecords { reader, line: 0, buf: Vec::new() }
    }

    /// The next record and the line it starts on; `None` at the end. Blank lines are
    /// skipped. Errors say what is wrong and on which line.
    pub(crate) fn next_record(&mut self, fields: &mut Vec<CsvField>) -> Result<Option<u64>, String> {
        fields.clear();
        loop {
            self.buf.clear();
            let read = self.reader.read_until(b'\n', &mut self.buf).map_err(|e| e.to_string())?;
            if read == 0 {
                return Ok(None);
            }
            self.line += 1;
            if self.line == 1 && self.buf.starts_with(b"\xEF\xBB\xBF") {
                self.buf.drain(..3);
            }
            if !matches!(trim_newline(&self.buf), b"") {
                break;
            }
        }
        let start = self.line;
        let mut field = Vec::new();
        let mut pos = 0;
        loop {
            // At the start of a field.
            field.clear();
            let quoted = self.buf.get(pos) == Some(&b'"');
            let end_of_record;
            if quoted {
                pos += 1;
                loop {
                    match self.buf.get(pos) {
                        Some(b'"') if self.buf.get(pos + 1) == Some(&b'"') => {
                            field.push(b'"');
                            pos += 2;
                        }
                        Some(b'"') => {
                            pos += 1;
                            break;
                        }
                        Some(&b) => {
                            field.push(b);
                            pos += 1;
                        }
                        None => {
                            // The quoted field goes on on the next line.
                            let before = self.buf.len();
                            let read = self.reader.read_until(b'\n', &mut self.buf).map_err(|e| e.to_string())?;
                            if read == 0 {
                                return Err(format!("line {start}: a quoted field is not closed before the end of the file"));
                            }
                            self.line += 1;
                            pos = before;
                        }
                    }
                }
                match self.buf.get(pos) {
                    Some(b',') => {
                        pos += 1;
                        end_of_record = false;
                    }
                    None | Some(b'\n') => end_of_record = true,
                    Some(b'\r') if matches!(self.buf.get(pos + 1), None | Some(b'\n')) => end_of_record = true,
                    Some(_) => {
                        return Err(format!(
                            "line {}: text after a closing quote; a quote inside a quoted field is written \"\"",
                            self.line
                        ))
                    }
                }
            } else {
                loop {
                    match self.buf.get(pos) {
                        Some(b',') => {
                            pos += 1;
                            end_of_record = false;
                            break;
                        }
                        None | Some(b'\n') => {
                            end_of_record = true;
                            break;
                        }
                        Some(b'\r') if matches!(self.buf.get(pos + 1), None | Some(b'\n')) => {
                            end_of_record = true;
                            break;
                        }
                        Some(&b) => {
                            field.push(b);
                            pos += 1;
                        }
                    }
                }
            }
            let text =
                String::from_utf8(std::mem::take(&mut field)).map_err(|_| format!("line {}: the text is not valid UTF-8", self.line))?;
            fields.push(CsvField { text, quoted });
            if end_of_record {
                return Ok(Some(start));
            }
        }
    }
}

fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(text: &str) -> Result<Vec<(u64, Vec<(String, bool)>)>, String> {
        let mut reader = CsvRecords::new(text.as_bytes());
        let mut fields = Vec::new();
        let mut out = Vec::new();
        while let Some(line) = reader.next_record(&mut fields)? {
            out.push((line, fields.iter().map(|f| (f.text.clone(), f.quoted)).collect()));
        }
        Ok(out)
    }

    fn f(text: &str, quoted: bool) -> (String, bool) {
        (text.to_string(), quoted)
    }

    #[test]
    fn quoting_and_line_breaks() {
        let got = records("\u{feff}a,b\r\n1,\"\"\n\n,\"x,\"\"y\"\"\nz\"\n").unwrap();
        assert_eq!(
            got,
            vec![
                (1, vec![f("a", false), f("b", false)]),
                (2, vec![f("1", false), f("", true)]),
                (4, vec![f("", false), f("x,\"y\"\nz", true)]),
            ]
        );
        assert_eq!(records("a,\n").unwrap(), vec![(1, vec![f("a", false), f("", false)])]);
        assert!(records("a,\"b\n").unwrap_err().contains("not closed"));
        assert!(records("\"a\"b\n").unwrap_err().contains("closing quote"));
    }
}
