//! Root manifests: any bytes decode to a manifest or a typed error, never a panic.
//! The first byte is the version the manifest's name claims.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&version, bytes)) = data.split_first() {
        let _ = concord::decode::manifest("fuzz/_versions/v", u64::from(version), bytes);
    }
});
