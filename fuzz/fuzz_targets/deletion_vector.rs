//! Deletion vectors (serialized roaring bitmaps).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = concord::decode::deletion_vector("fuzz/_deletions/d.bin", data);
});
