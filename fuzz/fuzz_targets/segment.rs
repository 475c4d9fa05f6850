//! Segments (the fragment lists manifests point to). The first byte is the fragment
//! count the referencing manifest claims.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&count, bytes)) = data.split_first() {
        let _ = concord::decode::segment("fuzz/_segments/s.json", u64::from(count), bytes);
    }
});
