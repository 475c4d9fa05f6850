//! Announced transactions (cooperative commits): an announcement object's bytes, and
//! the content an announcement's name may carry (read from a listing).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = concord::decode::announcement("fuzz/_announced/a.json", data);
    if let Ok(name) = std::str::from_utf8(data) {
        let _ = concord::decode::inline_announcement("fuzz/_announced/a.json", name);
    }
});
