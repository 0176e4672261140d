#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentsite_fuzz::did_key(data));
