//! The `aurora video` pipeline syntax on arbitrary text: parsing and
//! checking never panic, a refusal is one sentence, and what passes the
//! checks builds (unless it names files, which the target does not
//! create or read); a network viewer's check (`fed_elements`) likewise.
#![no_main]
use aurora_video::pipeline::syntax::{build, check, parse};
use aurora_video::pipeline::viewer::fed_elements;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = fed_elements(text) {
        assert!(!e.0.is_empty() && !e.0.contains('\n'), "{e}");
    }
    match parse(text) {
        Ok(elements) => {
            assert!(!elements.is_empty());
            match check(&elements) {
                Ok(()) => {
                    let names_files = elements
                        .iter()
                        .any(|e| e.params.iter().any(|(k, _)| k == "file" || k == "png"));
                    if !names_files {
                        if let Err(e) = build(text) {
                            assert!(!e.0.is_empty() && !e.0.contains('\n'), "{e}");
                        }
                    }
                }
                Err(e) => assert!(!e.0.is_empty() && !e.0.contains('\n'), "{e}"),
            }
        }
        Err(e) => assert!(!e.0.is_empty() && !e.0.contains('\n'), "{e}"),
    }
});
