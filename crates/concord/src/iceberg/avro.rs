//! Iceberg's Avro files (v3): manifests and manifest lists, written with `apache-avro`
//! (0.21: 0.22 drops the `logicalType` of the int-keyed maps when it parses a schema).
//! Schemas and file metadata as the Iceberg spec's appendix and its Java writer give
//! them: every field carries its `field-id`, which readers project by.

use apache_avro::types::Value;
use apache_avro::{Schema as AvroSchema, Writer};

/// One entry of a manifest: a data file (content 0) or a position delete file (1).
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// 0 data, 1 position deletes.
    pub content: i32,
    /// Absolute URI.
    pub file_path: String,
    pub record_count: i64,
    pub file_size_in_bytes: i64,
    /// (field id, count) of value and NULL counts.
    pub value_counts: Vec<(i32, i64)>,
    pub null_value_counts: Vec<(i32, i64)>,
    /// (field id, single-value bytes).
    pub lower_bounds: Vec<(i32, Vec<u8>)>,
    pub upper_bounds: Vec<(i32, Vec<u8>)>,
    /// A position delete file's one data file.
    pub referenced_data_file: Option<String>,
    /// Data and file sequence numbers (both explicit: every entry is EXISTING).
    pub seqs: Seqs,
    /// A data file's `first_row_id` (its fragment's); `None` for delete files.
    pub first_row_id: Option<i64>,
}

/// A file's data and file sequence numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Seqs {
    /// The version that last wrote every row of the file (0: not known).
    pub data: i64,
    /// The version that added the file (0: not known).
    pub file: i64,
}

/// One row of a manifest list.
#[derive(Debug, Clone)]
pub(crate) struct ManifestFile {
    pub manifest_path: String,
    pub manifest_length: i64,
    /// 0 data, 1 deletes.
    pub content: i32,
    pub added_snapshot_id: i64,
    pub files: i32,
    pub rows: i64,
    /// The version that added it, and the least data sequence number of its entries.
    pub sequence_number: i64,
    pub min_sequence_number: i64,
    /// A data manifest's `first_row_id`: the least of its entries' (each entry carries
    /// its own, so nothing is inherited from it); `None` for a delete manifest.
    pub first_row_id: Option<i64>,
}

impl ManifestFile {
    /// The row of a manifest of `entries` added by snapshot `added.0` (sequence number
    /// `added.1`, its version).
    pub(crate) fn new(manifest_path: String, manifest_length: i64, content: i32, added: (i64, i64), entries: &[Entry]) -> Self {
        let (snapshot_id, sequence) = added;
        ManifestFile {
            manifest_path,
            manifest_length,
            content,
            added_snapshot_id: snapshot_id,
            files: entries.len() as i32,
            rows: entries.iter().map(|e| e.record_count).sum(),
            sequence_number: sequence,
            min_sequence_number: entries.iter().map(|e| e.seqs.data).min().unwrap_or(sequence),
            first_row_id: if content == 0 { Some(entries.iter().filter_map(|e| e.first_row_id).min().unwrap_or(0)) } else { None },
        }
    }
}

const MANIFEST_LIST_SCHEMA: &str = r#"{"type":"record","name":"manifest_file","fields":[
 {"name":"manifest_path","type":"string","field-id":500},
 {"name":"manifest_length","type":"long","field-id":501},
 {"name":"partition_spec_id","type":"int","field-id":502},
 {"name":"content","type":"int","field-id":517},
 {"name":"sequence_number","type":"long","field-id":515},
 {"name":"min_sequence_number","type":"long","field-id":516},
 {"name":"added_snapshot_id","type":"long","field-id":503},
 {"name":"added_files_count","type":"int","field-id":504},
 {"name":"existing_files_count","type":"int","field-id":505},
 {"name":"deleted_files_count","type":"int","field-id":506},
 {"name":"added_rows_count","type":"long","field-id":512},
 {"name":"existing_rows_count","type":"long","field-id":513},
 {"name":"deleted_rows_count","type":"long","field-id":514},
 {"name":"partitions","type":["null",{"type":"array","element-id":508,"items":{"type":"record","name":"r508","fields":[
   {"name":"contains_null","type":"boolean","field-id":509},
   {"name":"contains_nan","type":["null","boolean"],"default":null,"field-id":518},
   {"name":"lower_bound","type":["null","bytes"],"default":null,"field-id":510},
   {"name":"upper_bound","type":["null","bytes"],"default":null,"field-id":511}]}}],
  "default":null,"field-id":507},
 {"name":"key_metadata","type":["null","bytes"],"default":null,"field-id":519},
 {"name":"first_row_id","type":["null","long"],"default":null,"field-id":520}]}"#;

fn int_map(name: &str, field: i32, key: i32, value: i32, value_type: &str) -> String {
    format!(
        r#"{{"name":"{name}","default":null,"field-id":{field},"type":["null",{{"type":"array","logicalType":"map","items":
    {{"type":"record","name":"k{key}_v{value}","fields":[{{"name":"key","type":"int","field-id":{key}}},{{"name":"value","type":"{value_type}","field-id":{value}}}]}}}}]}}"#
    )
}

fn manifest_schema() -> String {
    format!(
        r#"{{"type":"record","name":"manifest_entry","fields":[
 {{"name":"status","type":"int","field-id":0}},
 {{"name":"snapshot_id","type":["null","long"],"default":null,"field-id":1}},
 {{"name":"sequence_number","type":["null","long"],"default":null,"field-id":3}},
 {{"name":"file_sequence_number","type":["null","long"],"default":null,"field-id":4}},
 {{"name":"data_file","field-id":2,"type":{{"type":"record","name":"r2","fields":[
  {{"name":"content","type":"int","field-id":134}},
  {{"name":"file_path","type":"string","field-id":100}},
  {{"name":"file_format","type":"string","field-id":101}},
  {{"name":"partition","type":{{"type":"record","name":"r102","fields":[]}},"field-id":102}},
  {{"name":"record_count","type":"long","field-id":103}},
  {{"name":"file_size_in_bytes","type":"long","field-id":104}},
  {value_counts},
  {null_value_counts},
  {lower_bounds},
  {upper_bounds},
  {{"name":"key_metadata","type":["null","bytes"],"default":null,"field-id":131}},
  {{"name":"split_offsets","type":["null",{{"type":"array","items":"long","element-id":133}}],"default":null,"field-id":132}},
  {{"name":"equality_ids","type":["null",{{"type":"array","items":"int","element-id":136}}],"default":null,"field-id":135}},
  {{"name":"sort_order_id","type":["null","int"],"default":null,"field-id":140}},
  {{"name":"first_row_id","type":["null","long"],"default":null,"field-id":142}},
  {{"name":"referenced_data_file","type":["null","string"],"default":null,"field-id":143}}]}}}}]}}"#,
        value_counts = int_map("value_counts", 109, 119, 120, "long"),
        null_value_counts = int_map("null_value_counts", 110, 121, 122, "long"),
        lower_bounds = int_map("lower_bounds", 125, 126, 127, "bytes"),
        upper_bounds = int_map("upper_bounds", 128, 129, 130, "bytes"),
    )
}

fn optional(value: Option<Value>) -> Value {
    match value {
        None => Value::Union(0, Box::new(Value::Null)),
        Some(v) => Value::Union(1, Box::new(v)),
    }
}

fn counts(pairs: &[(i32, i64)]) -> Value {
    optional((!pairs.is_empty()).then(|| {
        Value::Array(
            pairs.iter().map(|(k, v)| Value::Record(vec![("key".into(), Value::Int(*k)), ("value".into(), Value::Long(*v))])).collect(),
        )
    }))
}

fn bounds(pairs: &[(i32, Vec<u8>)]) -> Value {
    optional((!pairs.is_empty()).then(|| {
        Value::Array(
            pairs
                .iter()
                .map(|(k, v)| Value::Record(vec![("key".into(), Value::Int(*k)), ("value".into(), Value::Bytes(v.clone()))]))
                .collect(),
        )
    }))
}

/// A manifest (`content`: "data" or "deletes") of `entries`, all EXISTING with explicit
/// sequence numbers and first row ids (nothing inherited from the manifest list), so a
/// manifest's bytes depend on its files only and any publisher writes the same object.
pub(crate) fn manifest(entries: &[Entry], content: &str, schema_json: &str) -> Result<Vec<u8>, apache_avro::Error> {
    let schema = AvroSchema::parse_str(&manifest_schema())?;
    let mut writer = Writer::new(&schema, Vec::new());
    writer.add_user_metadata("schema".into(), schema_json)?;
    writer.add_user_metadata("schema-id".into(), "0")?;
    writer.add_user_metadata("partition-spec".into(), "[]")?;
    writer.add_user_metadata("partition-spec-id".into(), "0")?;
    writer.add_user_metadata("format-version".into(), "3")?;
    writer.add_user_metadata("content".into(), content)?;
    for e in entries {
        let data_file = Value::Record(vec![
            ("content".into(), Value::Int(e.content)),
            ("file_path".into(), Value::String(e.file_path.clone())),
            ("file_format".into(), Value::String("PARQUET".into())),
            ("partition".into(), Value::Record(vec![])),
            ("record_count".into(), Value::Long(e.record_count)),
            ("file_size_in_bytes".into(), Value::Long(e.file_size_in_bytes)),
            ("value_counts".into(), counts(&e.value_counts)),
            ("null_value_counts".into(), counts(&e.null_value_counts)),
            ("lower_bounds".into(), bounds(&e.lower_bounds)),
            ("upper_bounds".into(), bounds(&e.upper_bounds)),
            ("key_metadata".into(), optional(None)),
            ("split_offsets".into(), optional(None)),
            ("equality_ids".into(), optional(None)),
            ("sort_order_id".into(), optional(None)),
            ("first_row_id".into(), optional(e.first_row_id.map(Value::Long))),
            ("referenced_data_file".into(), optional(e.referenced_data_file.clone().map(Value::String))),
        ]);
        writer.append(Value::Record(vec![
            ("status".into(), Value::Int(0)),
            ("snapshot_id".into(), optional(None)),
            ("sequence_number".into(), optional(Some(Value::Long(e.seqs.data)))),
            ("file_sequence_number".into(), optional(Some(Value::Long(e.seqs.file)))),
            ("data_file".into(), data_file),
        ]))?;
    }
    writer.into_inner()
}

/// The manifest list of snapshot `snapshot_id` (sequence number `sequence`).
pub(crate) fn manifest_list(
    manifests: &[ManifestFile],
    snapshot_id: i64,
    parent: Option<i64>,
    sequence: i64,
) -> Result<Vec<u8>, apache_avro::Error> {
    let schema = AvroSchema::parse_str(MANIFEST_LIST_SCHEMA)?;
    let mut writer = Writer::new(&schema, Vec::new());
    writer.add_user_metadata("snapshot-id".into(), snapshot_id.to_string())?;
    writer.add_user_metadata("parent-snapshot-id".into(), parent.map_or_else(|| "null".to_string(), |p| p.to_string()))?;
    writer.add_user_metadata("sequence-number".into(), sequence.to_string())?;
    writer.add_user_metadata("format-version".into(), "3")?;
    for m in manifests {
        writer.append(Value::Record(vec![
            ("manifest_path".into(), Value::String(m.manifest_path.clone())),
            ("manifest_length".into(), Value::Long(m.manifest_length)),
            ("partition_spec_id".into(), Value::Int(0)),
            ("content".into(), Value::Int(m.content)),
            ("sequence_number".into(), Value::Long(m.sequence_number)),
            ("min_sequence_number".into(), Value::Long(m.min_sequence_number)),
            ("added_snapshot_id".into(), Value::Long(m.added_snapshot_id)),
            ("added_files_count".into(), Value::Int(0)),
            ("existing_files_count".into(), Value::Int(m.files)),
            ("deleted_files_count".into(), Value::Int(0)),
            ("added_rows_count".into(), Value::Long(0)),
            ("existing_rows_count".into(), Value::Long(m.rows)),
            ("deleted_rows_count".into(), Value::Long(0)),
            ("partitions".into(), optional(Some(Value::Array(vec![])))),
            ("key_metadata".into(), optional(None)),
            ("first_row_id".into(), optional(m.first_row_id.map(Value::Long))),
        ]))?;
    }
    writer.into_inner()
}

/// A record's field `name`, unwrapping a union.
fn field<'a>(fields: &'a [(String, Value)], name: &str) -> Option<&'a Value> {
    match fields.iter().find(|(n, _)| n == name).map(|(_, v)| v)? {
        Value::Union(_, v) => Some(v),
        v => Some(v),
    }
}

fn long(fields: &[(String, Value)], name: &str) -> Option<i64> {
    match field(fields, name)? {
        Value::Long(v) => Some(*v),
        Value::Int(v) => Some(i64::from(*v)),
        _ => None,
    }
}

/// The rows of a manifest list written by [`manifest_list`].
pub(crate) fn read_manifest_list(bytes: &[u8]) -> Result<Vec<ManifestFile>, apache_avro::Error> {
    let mut rows = Vec::new();
    for value in apache_avro::Reader::new(bytes)? {
        let Value::Record(fields) = value? else { continue };
        let Some(Value::String(manifest_path)) = field(&fields, "manifest_path") else { continue };
        let n = |name: &str| long(&fields, name).unwrap_or(0);
        rows.push(ManifestFile {
            manifest_path: manifest_path.clone(),
            manifest_length: n("manifest_length"),
            content: n("content") as i32,
            added_snapshot_id: n("added_snapshot_id"),
            files: n("existing_files_count") as i32,
            rows: n("existing_rows_count"),
            sequence_number: n("sequence_number"),
            min_sequence_number: n("min_sequence_number"),
            first_row_id: long(&fields, "first_row_id"),
        });
    }
    Ok(rows)
}

/// The (first row id, sequence numbers) of the data files of a manifest written by
/// [`manifest`]: what a publisher carries to the manifests it rebuilds.
pub(crate) fn read_data_entries(bytes: &[u8]) -> Result<Vec<(i64, Seqs)>, apache_avro::Error> {
    let mut entries = Vec::new();
    for value in apache_avro::Reader::new(bytes)? {
        let Value::Record(fields) = value? else { continue };
        let Some(Value::Record(file)) = field(&fields, "data_file") else { continue };
        if let (Some(0), Some(first_row_id)) = (long(file, "content"), long(file, "first_row_id")) {
            let seqs =
                Seqs { data: long(&fields, "sequence_number").unwrap_or(0), file: long(&fields, "file_sequence_number").unwrap_or(0) };
            entries.push((first_row_id, seqs));
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(first_row_id: Option<i64>, data: i64, file: i64) -> Entry {
        Entry {
            content: if first_row_id.is_some() { 0 } else { 1 },
            file_path: "file:///t/data/a.parquet".into(),
            record_count: 3,
            file_size_in_bytes: 100,
            value_counts: Vec::new(),
            null_value_counts: Vec::new(),
            lower_bounds: Vec::new(),
            upper_bounds: Vec::new(),
            referenced_data_file: None,
            seqs: Seqs { data, file },
            first_row_id,
        }
    }

    /// A rebuilt manifest repeats the sequence numbers its files had: they read back by
    /// fragment (first row id >> 32), and the list row keeps the least first row id.
    #[test]
    fn lineage_reads_back_from_manifests_and_lists() {
        let schema = r#"{"type":"struct","schema-id":0,"fields":[]}"#;
        let entries = [entry(Some(7 << 32), 4, 4), entry(Some(9 << 32), 0, 6)];
        let bytes = manifest(&entries, "data", schema).unwrap();
        let read = read_data_entries(&bytes).unwrap();
        assert_eq!(read, vec![(7 << 32, Seqs { data: 4, file: 4 }), (9 << 32, Seqs { data: 0, file: 6 })]);
        let deletes = manifest(&[entry(None, 4, 0)], "deletes", schema).unwrap();
        assert!(read_data_entries(&deletes).unwrap().is_empty(), "delete files carry no row ids");

        let rows =
            [ManifestFile::new("m".into(), 10, 0, (6, 6), &entries), ManifestFile::new("d".into(), 5, 1, (6, 6), &[entry(None, 4, 0)])];
        assert_eq!((rows[0].first_row_id, rows[0].min_sequence_number, rows[0].rows), (Some(7 << 32), 0, 6));
        assert_eq!((rows[1].first_row_id, rows[1].min_sequence_number), (None, 4));
        let back = read_manifest_list(&manifest_list(&rows, 6, Some(5), 6).unwrap()).unwrap();
        assert_eq!(
            back.iter().map(|m| (m.first_row_id, m.sequence_number, m.min_sequence_number)).collect::<Vec<_>>(),
            vec![(Some(7 << 32), 6, 0), (None, 6, 4)]
        );
    }
}
