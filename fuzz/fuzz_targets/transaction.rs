//! Staged transaction records (`--stage`), which `concord commit` and vacuum read.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = concord::decode::transaction("fuzz/_transactions/t.json", data);
});
