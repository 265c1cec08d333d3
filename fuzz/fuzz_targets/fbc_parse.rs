//! Fuzz target: `parse_bytes` must return `Ok` or an error naming the file for any input, never
//! panic; whatever parses must validate without panicking and survive a write/read round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match capstan::catalog::parse::parse_bytes("fuzz.json", data) {
        Err(e) => assert!(e.to_string().contains("fuzz.json")),
        Ok(cfg) => {
            let _ = capstan::catalog::validate::validate(&cfg);
            let json = capstan::catalog::parse::to_json_stream(&cfg);
            let again = capstan::catalog::parse::parse_bytes("again.json", json.as_bytes())
                .expect("capstan's own JSON output parses");
            assert_eq!(capstan::catalog::parse::to_json_stream(&again), json);
        }
    }
});
