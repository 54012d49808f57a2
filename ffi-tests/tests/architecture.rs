//! Keeps ARCHITECTURE.md true to the tree:
//! - the layer order it quotes (between `<!-- layers:begin -->` and
//!   `<!-- layers:end -->`) is the one `scripts/layers` enforces: the
//!   statements `LAYERS`, `SUB`, `BOUNDARY` and `SEALED` are read from the
//!   script's source and from the quoted block, as Python tokens (strings
//!   and brackets, comments dropped), and must be equal;
//! - every `.rs` file under `src/` is named, by its path, in the code map;
//! - every path the document names (`src/...`, `ffi-tests/...`, ...) exists.
//!
//! Each check is a function of the texts, so that the tests at the end can
//! run it on altered copies and see it fail.

use ffi_tests::headers::workspace_root;
use std::path::Path;

/// The statements of `scripts/layers` that make the layer order, the
/// boundary and the seal.
const STATEMENTS: [&str; 4] = ["LAYERS", "SUB", "BOUNDARY", "SEALED"];

/// Top-level paths of the repository that ARCHITECTURE.md may name.
const ROOTS: [&str; 8] = ["src/", "ffi-tests/", "benches/", "scripts/", "tools/", "include/", "build.rs", "cbindgen.toml"];

fn read(rel: &str) -> String {
    let path = workspace_root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The text of Python statement `name = <bracketed literal>` in `text`
/// (starting at a line's first column), up to its closing bracket.
fn statement<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let head = format!("{name} = ");
    let start = text.match_indices(&head).map(|(i, _)| i).find(|&i| i == 0 || text.as_bytes()[i - 1] == b'\n')?;
    let body = &text[start + head.len()..];
    let (mut depth, mut in_str, mut in_comment) = (0usize, false, false);
    for (i, c) in body.char_indices() {
        match c {
            '\n' => in_comment = false,
            _ if in_comment => {}
            '"' => in_str = !in_str,
            _ if in_str => {}
            '#' => in_comment = true,
            '[' | '{' | '(' => depth += 1,
            ']' | '}' | ')' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(&text[start..start + head.len() + i + 1]);
                }
            }
            _ => {}
        }
    }
    None
}

/// The tokens of a Python literal: string contents (as `"name"`),
/// brackets, `:` and `=`, and bare words; comments, commas and white space
/// dropped.
fn tokens(stmt: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = stmt.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '#' => {
                while chars.peek().is_some_and(|&c| c != '\n') {
                    chars.next();
                }
            }
            '"' => {
                let mut s = String::from('"');
                for c in chars.by_ref() {
                    s.push(c);
                    if c == '"' {
                        break;
                    }
                }
                out.push(s);
            }
            '[' | ']' | '{' | '}' | '(' | ')' | ':' | '=' => out.push(c.to_string()),
            c if c.is_alphanumeric() || c == '_' => {
                let mut s = String::from(c);
                while chars.peek().is_some_and(|&c| c.is_alphanumeric() || c == '_') {
                    s.push(chars.next().unwrap());
                }
                out.push(s);
            }
            _ => {}
        }
    }
    out
}

/// The fenced block between the two markers of ARCHITECTURE.md.
fn quoted_block(doc: &str) -> Result<&str, String> {
    let (begin, end) = ("<!-- layers:begin -->", "<!-- layers:end -->");
    let a = doc.find(begin).ok_or("ARCHITECTURE.md has no `<!-- layers:begin -->`")? + begin.len();
    let b = doc[a..].find(end).ok_or("ARCHITECTURE.md has no `<!-- layers:end -->` after its begin marker")? + a;
    if doc.matches(begin).count() != 1 {
        return Err("ARCHITECTURE.md quotes the layer order more than once".into());
    }
    Ok(&doc[a..b])
}

/// Problems of the quoted layer order against the script's source.
fn layer_order_problems(doc: &str, script: &str) -> Vec<String> {
    let block = match quoted_block(doc) {
        Ok(b) => b,
        Err(e) => return vec![e],
    };
    let mut out = Vec::new();
    for name in STATEMENTS {
        let Some(theirs) = statement(script, name) else {
            out.push(format!("scripts/layers has no statement `{name} = ...` (has the script changed shape?)"));
            continue;
        };
        let Some(ours) = statement(block, name) else {
            out.push(format!("ARCHITECTURE.md's quoted block has no `{name} = ...`: quote it from scripts/layers"));
            continue;
        };
        let (t, o) = (tokens(theirs), tokens(ours));
        if t.len() < 4 {
            out.push(format!("scripts/layers: `{name}` reads as {t:?}: the parse found nothing"));
        } else if t != o {
            out.push(format!(
                "ARCHITECTURE.md quotes `{name}` differently from scripts/layers (the source of truth):\n  script: {}\n  quoted: {}",
                t.join(" "),
                o.join(" ")
            ));
        }
    }
    out
}

/// The `## Code map` section of ARCHITECTURE.md.
fn code_map(doc: &str) -> Option<&str> {
    let start = doc.find("\n## Code map")? + 1;
    let rest = &doc[start + 3..];
    let end = rest.find("\n## ").map_or(doc.len(), |i| start + 3 + i);
    Some(&doc[start..end])
}

/// Every `.rs` file under `dir`, as a path relative to `root` with `/`.
fn rust_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("under the root");
            out.push(rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/"));
        }
    }
}

/// The files of `files` that the code map does not name as `` `path` ``.
fn unnamed_files(doc: &str, files: &[String]) -> Vec<String> {
    let Some(map) = code_map(doc) else {
        return vec!["ARCHITECTURE.md has no `## Code map` section".into()];
    };
    files.iter().filter(|f| !map.contains(&format!("`{f}`"))).cloned().collect()
}

/// The repository paths named in backquotes in `doc` (`src/x.rs`,
/// `scripts/layers`, `ffi-tests/c/`, ...).
fn named_paths(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, chunk) in doc.split('`').enumerate() {
        // (odd chunks are inside backquotes)
        if i % 2 == 1 && ROOTS.iter().any(|r| chunk.starts_with(r)) && !chunk.contains([' ', '*', '<', '{']) {
            out.push(chunk.trim_end_matches(['.', ',', ':']).to_string());
        }
    }
    out
}

#[test]
fn quoted_layer_order_is_the_scripts() {
    let problems = layer_order_problems(&read("ARCHITECTURE.md"), &read("scripts/layers"));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn code_map_names_every_source_file() {
    let root = workspace_root();
    let mut files = Vec::new();
    rust_files(&root, &root.join("src"), &mut files);
    files.sort();
    assert!(files.len() >= 20, "found only {} files under src/", files.len());
    let missing = unnamed_files(&read("ARCHITECTURE.md"), &files);
    assert!(missing.is_empty(), "ARCHITECTURE.md's code map does not name: {missing:?}");
}

#[test]
fn every_named_path_exists() {
    let root = workspace_root();
    let doc = read("ARCHITECTURE.md");
    let named = named_paths(&doc);
    assert!(named.len() >= 20, "found only {} paths in ARCHITECTURE.md", named.len());
    let missing: Vec<&String> = named.iter().filter(|p| !root.join(p).exists()).collect();
    assert!(missing.is_empty(), "ARCHITECTURE.md names paths that do not exist: {missing:?}");
}

// The checks fail where they should: on altered copies of the real texts.

#[test]
fn a_module_moved_in_the_quote_is_caught() {
    let (doc, script) = (read("ARCHITECTURE.md"), read("scripts/layers"));
    let block = quoted_block(&doc).expect("the quoted block");
    // swap two layers in the quote
    let altered_block = block.replacen("\"copy\", \"cpu\"", "\"cpu\", \"copy\"", 1);
    assert_ne!(block, altered_block, "the quote lists \"copy\", \"cpu\"");
    let altered = doc.replacen(block, &altered_block, 1);
    assert!(!layer_order_problems(&altered, &script).is_empty(), "a swapped layer went unnoticed");
    // a module added to the script and not to the quote
    let moved = script.replacen("\"cpu\", ", "\"cpu\", \"new_module\", ", 1);
    assert_ne!(moved, script);
    assert!(!layer_order_problems(&doc, &moved).is_empty(), "a new layer in the script went unnoticed");
    // a sealed module allowed one more import
    let unsealed = script.replacen("(\"ptrmap\",), ", "(\"ptrmap\",), (\"ggml\",), ", 1);
    assert_ne!(unsealed, script);
    assert!(!layer_order_problems(&doc, &unsealed).is_empty(), "a change of the seal went unnoticed");
    // comments may differ
    let commented = script.replacen("# the exported C API", "# the exports", 1);
    assert_ne!(commented, script);
    assert!(layer_order_problems(&doc, &commented).is_empty(), "a comment is not the layer order");
}

#[test]
fn a_file_missing_from_the_code_map_is_caught() {
    let doc = read("ARCHITECTURE.md");
    let files = vec!["src/sched/plan/place.rs".to_string(), "src/new_module.rs".to_string()];
    assert_eq!(unnamed_files(&doc, &files), vec!["src/new_module.rs".to_string()]);
    let altered = doc.replace("`src/sched/plan/place.rs`", "`place.rs`");
    assert_eq!(unnamed_files(&altered, &files[..1]), vec!["src/sched/plan/place.rs".to_string()]);
}

#[test]
fn a_stale_path_is_caught() {
    let named = named_paths("see `src/sched/gone.rs`, `scripts/layers` and `cargo test`");
    assert_eq!(named, vec!["src/sched/gone.rs".to_string(), "scripts/layers".to_string()]);
    assert!(!workspace_root().join(&named[0]).exists());
}
