//! The functions that accept NULL handles, as docs/api.md lists them: each
//! called with NULL in one C program (ffi-tests/c/null_tolerant.c), whose
//! output must be the list of docs/api.md, line for line.

use ffi_tests::harness::{self, Flavour};
use ffi_tests::headers::workspace_root;

#[test]
fn null_tolerant_functions_do_what_api_md_says() {
    let exe = harness::build("null_tolerant", &["null_tolerant.c"], Flavour::Ours);
    let o = harness::run(&exe, &[]);
    assert!(o.status.success(), "{:?}\n{}", o.status, String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let page = std::fs::read_to_string(workspace_root().join("docs/api.md")).unwrap();
    let start = page.find("<!-- null-tolerant:begin -->").expect("the list's begin marker");
    let end = page.find("<!-- null-tolerant:end -->").expect("the list's end marker");
    let listed: Vec<String> = page[start..end]
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("- `"))
        .map(|l| l.replacen("`: ", ": ", 1).replace('`', ""))
        .collect();
    assert_eq!(out.lines().collect::<Vec<_>>(), listed, "the program's lines and docs/api.md's list");
}
