//! The library as a C user sees it: generated headers, struct layouts,
//! exported symbols, and linking whisper.cpp against it.

use ffi_tests::harness::{self, Flavour};
use ffi_tests::headers;
use std::process::Command;

#[test]
fn committed_headers_match_generated() {
    let root = headers::workspace_root();
    let (public, imp, ext) = headers::generate_headers();
    for (file, fresh) in [("include/ggml-backend.h", public), ("include/ggml-backend-impl.h", imp), ("include/ggml-backend-ext.h", ext)] {
        let committed = std::fs::read_to_string(root.join(file)).unwrap_or_default();
        assert!(committed == fresh, "{file} is stale: regenerate it with `cargo run -p ffi-tests --bin gen-headers` and commit it");
    }
}

#[test]
fn impl_struct_layouts_match_original_header() {
    // Expected values come from compiling the original header.
    let printer = harness::build("layout_print", &["layout_print.c"], Flavour::Original);
    let out = harness::run(&printer, &[]);
    assert!(out.status.success());
    let gen_dir = harness::out_dir().join("layout");
    std::fs::create_dir_all(&gen_dir).unwrap();
    std::fs::write(gen_dir.join("layout_expected.h"), &out.stdout).unwrap();
    let inc = format!("-I{}", gen_dir.display());
    let exe = harness::build_with("layout_check", &["layout_check.c"], Flavour::Ours, &[&inc]);
    let o = harness::run(&exe, &[]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "layout ok\n");
}

/// Every size and offset the Rust mirrors rely on equals what the target's C
/// compiler gives for the original headers (on whatever target the tests run:
/// x86_64, i686, aarch64, armv7).
#[test]
fn rust_layouts_match_the_c_compiler_of_this_target() {
    let facts = wsp_ggml_backend::layouts();
    assert!(facts.len() > 60, "only {} layout facts", facts.len());
    let dir = harness::out_dir().join("layout");
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = String::from("#include \"ggml.h\"\n#include \"ggml-backend-impl.h\"\n#include <stddef.h>\n#include <stdio.h>\n");
    c += &ggml_alloc_private_structs();
    c += "int main(void) {\n";
    for (expr, _) in &facts {
        c += &format!("    printf(\"%zu\\n\", (size_t) ({expr}));\n");
    }
    c += "    return 0;\n}\n";
    let src = dir.join("layout_values.c");
    std::fs::write(&src, c).unwrap();
    let exe = harness::build("layout_values", &[src.to_str().unwrap()], Flavour::Original);
    let o = harness::run(&exe, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let values: Vec<usize> = String::from_utf8_lossy(&o.stdout).lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(values.len(), facts.len());
    let wrong: Vec<String> = facts
        .iter()
        .zip(&values)
        .filter(|((_, rust), c)| rust != *c)
        .map(|((expr, rust), c)| format!("{expr}: Rust {rust}, C {c}"))
        .collect();
    assert!(wrong.is_empty(), "layouts differ on {}:\n{}", env!("FFI_TARGET"), wrong.join("\n"));
}

/// ggml-alloc.c's private definitions the library reads (`MAX_FREE_BLOCKS`,
/// `struct free_block`, `struct wsp_ggml_tallocr`), copied from the renamed
/// ggml-alloc.c the tests build, so that their layout facts are checked
/// against that file as this target's C compiler lays it out.
fn ggml_alloc_private_structs() -> String {
    let src = std::fs::read_to_string(harness::out_dir().join("common").join("ggml-alloc.c")).expect("the renamed ggml-alloc.c");
    let line = |prefix: &str| src.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("ggml-alloc.c has no '{prefix}'"));
    let block = |head: &str| {
        let at = src.find(head).unwrap_or_else(|| panic!("ggml-alloc.c has no '{head}'"));
        let end = src[at..].find("\n};").unwrap_or_else(|| panic!("'{head}' does not end")) + at + 4;
        src[at..end].to_string()
    };
    format!("{}\n{}\n{}\n", line("#define MAX_FREE_BLOCKS"), block("struct free_block {"), block("struct wsp_ggml_tallocr {"))
}

fn defined_symbols(path: &std::path::Path, dynamic: bool) -> Vec<String> {
    let mut cmd = Command::new("nm");
    cmd.arg("--defined-only").arg("--extern-only");
    if dynamic {
        cmd.arg("-D");
    }
    let o = cmd.arg(path).output().expect("run nm (binutils)");
    assert!(o.status.success(), "nm failed: {}", String::from_utf8_lossy(&o.stderr));
    let mut v: Vec<String> =
        String::from_utf8_lossy(&o.stdout).lines().filter_map(|l| l.split_whitespace().nth(2).map(String::from)).collect();
    v.sort();
    v.dedup();
    v
}

/// The 35 functions of the original.
const EXPORTS: &[&str] = &[
    "wsp_ggml_backend_alloc_buffer",
    "wsp_ggml_backend_buffer_free",
    "wsp_ggml_backend_buffer_free_tensor",
    "wsp_ggml_backend_buffer_get_alignment",
    "wsp_ggml_backend_buffer_get_alloc_size",
    "wsp_ggml_backend_buffer_get_base",
    "wsp_ggml_backend_buffer_get_size",
    "wsp_ggml_backend_buffer_init",
    "wsp_ggml_backend_buffer_init_tensor",
    "wsp_ggml_backend_cpu_buffer_from_ptr",
    "wsp_ggml_backend_cpu_init",
    "wsp_ggml_backend_cpu_set_n_threads",
    "wsp_ggml_backend_free",
    "wsp_ggml_backend_get_alignment",
    "wsp_ggml_backend_graph_compute",
    "wsp_ggml_backend_graph_plan_compute",
    "wsp_ggml_backend_graph_plan_create",
    "wsp_ggml_backend_graph_plan_free",
    "wsp_ggml_backend_is_cpu",
    "wsp_ggml_backend_name",
    "wsp_ggml_backend_sched_free",
    "wsp_ggml_backend_sched_get_buffer",
    "wsp_ggml_backend_sched_get_tallocr",
    "wsp_ggml_backend_sched_graph_compute",
    "wsp_ggml_backend_sched_init_measure",
    "wsp_ggml_backend_sched_new",
    "wsp_ggml_backend_sched_set_node_backend",
    "wsp_ggml_backend_supports_op",
    "wsp_ggml_backend_synchronize",
    "wsp_ggml_backend_tensor_copy",
    "wsp_ggml_backend_tensor_get",
    "wsp_ggml_backend_tensor_get_async",
    "wsp_ggml_backend_tensor_set",
    "wsp_ggml_backend_tensor_set_async",
    "wsp_ggml_get_backend",
];

/// Our additions, declared in ggml-backend-ext.h.
const EXT_EXPORTS: &[&str] = &[
    "wsp_ggml_backend_compare_graph_backend",
    "wsp_ggml_backend_cpu_set_abort_callback",
    "wsp_ggml_backend_graph_copy",
    "wsp_ggml_backend_graph_copy_free",
    "wsp_ggml_backend_log_set",
    "wsp_ggml_backend_sched_get_backend",
    "wsp_ggml_backend_sched_get_backend_stats",
    "wsp_ggml_backend_sched_get_buffer_size",
    "wsp_ggml_backend_sched_get_n_backends",
    "wsp_ggml_backend_sched_get_n_splits",
    "wsp_ggml_backend_sched_get_split_stats",
    "wsp_ggml_backend_sched_get_tensor_backend",
    "wsp_ggml_backend_sched_reserve",
    "wsp_ggml_backend_sched_reset",
    "wsp_ggml_backend_sched_set_eval_callback",
    "wsp_ggml_backend_sched_write_dot",
    "wsp_ggml_backend_version",
];

#[test]
fn shared_library_exports_exactly_the_api() {
    let syms = defined_symbols(&harness::cdylib(), true);
    let mut expected: Vec<String> = EXPORTS.iter().chain(EXT_EXPORTS).map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(syms, expected, "the .so's exports vs the original's 35 functions and our additions");
}

/// The version macros of ggml-backend-ext.h, the library's
/// `wsp_ggml_backend_version()` and Cargo.toml's version agree.
#[test]
fn version_macros_function_and_cargo_toml_agree() {
    let toml = std::fs::read_to_string(headers::workspace_root().join("Cargo.toml")).unwrap();
    let package = &toml[toml.find("[package]").expect("[package]")..];
    let version = package.lines().find_map(|l| l.strip_prefix("version = \"")).expect("a version").trim_end_matches('"').to_string();
    let n: Vec<u32> = version.split('.').map(|p| p.parse().expect("a number")).collect();
    assert_eq!(n.len(), 3, "{version}");
    assert_eq!(wsp_ggml_backend::ffi::ext::VERSION, (n[0], n[1], n[2]));
    let dir = harness::out_dir().join("version");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("version.c");
    std::fs::write(
        &src,
        "#include \"ggml-backend-ext.h\"\n#include <stdio.h>\n\
         #if WSP_GGML_BACKEND_VERSION != WSP_GGML_BACKEND_VERSION_MAJOR * 10000 + WSP_GGML_BACKEND_VERSION_MINOR * 100 + \
         WSP_GGML_BACKEND_VERSION_PATCH\n#error WSP_GGML_BACKEND_VERSION\n#endif\n\
         int main(void) {\n    printf(\"%d %d %d %d %s %s\\n\", WSP_GGML_BACKEND_VERSION_MAJOR, WSP_GGML_BACKEND_VERSION_MINOR,\n        \
         WSP_GGML_BACKEND_VERSION_PATCH, WSP_GGML_BACKEND_VERSION, WSP_GGML_BACKEND_VERSION_STRING, wsp_ggml_backend_version());\n    \
         return 0;\n}\n",
    )
    .unwrap();
    let exe = harness::build("version", &[src.to_str().unwrap()], Flavour::Ours);
    let o = harness::run(&exe, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let number = n[0] * 10000 + n[1] * 100 + n[2];
    assert_eq!(String::from_utf8_lossy(&o.stdout), format!("{} {} {} {number} {version} {version}\n", n[0], n[1], n[2]));
}

/// whisper.cpp (C++) compiles against our headers unchanged and links with
/// our library plus the rest of ggml.
#[test]
fn whisper_cpp_compiles_and_links_against_our_library() {
    let out = harness::out_dir();
    let dir = out.join("whisper-link");
    std::fs::create_dir_all(&dir).unwrap();
    let obj = dir.join("whisper.o");
    let o = Command::new(env!("FFI_CXX"))
        .args(["-std=c++11", "-O0", "-D_GNU_SOURCE", "-pthread", "-c", "-w"])
        .arg("-I")
        .arg(harness::include_dir())
        .arg("-I")
        .arg(out.join("common"))
        .arg(out.join("common/whisper.cpp"))
        .arg("-o")
        .arg(&obj)
        .output()
        .unwrap();
    assert!(o.status.success(), "whisper.cpp does not compile against our headers:\n{}", String::from_utf8_lossy(&o.stderr));
    let main = dir.join("main.c");
    std::fs::write(
        &main,
        "#include \"whisper.h\"\n#include <stdio.h>\nint main(void) {\n    \
         struct whisper_context * ctx = whisper_init_from_file(\"/nonexistent-model.bin\");\n    \
         printf(\"%s\\n\", ctx == NULL ? \"no model, as expected\" : \"?\");\n    return 0;\n}\n",
    )
    .unwrap();
    let exe = dir.join("whisper-link");
    let o = Command::new(env!("FFI_CXX"))
        .arg("-xc")
        .arg("-I")
        .arg(out.join("common"))
        .arg(&main)
        .arg("-xnone")
        .arg(&obj)
        .arg("-o")
        .arg(&exe)
        .arg("-Wl,--start-group")
        .arg(out.join("libggml_alloc_ours.a"))
        .arg(harness::staticlib())
        .arg(out.join("libggml_core.a"))
        .arg("-Wl,--end-group")
        .args(harness::NATIVE_STATIC_LIBS)
        .output()
        .unwrap();
    assert!(o.status.success(), "whisper.cpp does not link with our library:\n{}", String::from_utf8_lossy(&o.stderr));
    let r = harness::run(&exe, &[]);
    assert_eq!(String::from_utf8_lossy(&r.stdout), "no model, as expected\n");
}

/// What users ship is a release build: build one (in its own target folder,
/// so it never waits on the test build's lock) and check behaviour that
/// depends on code generation, such as recognising the CPU backend by its
/// function table (a release-only failure once made whisper.cpp run with the
/// wrong thread count).
#[test]
fn release_build_behaves_like_the_test_build() {
    let root = headers::workspace_root();
    let target = root.join("target").join("release-check");
    let o = Command::new(env!("CARGO"))
        .args(["build", "--release", "--quiet", "-p", "wsp_ggml_backend", "--target-dir"])
        .arg(&target)
        .current_dir(&root)
        .output()
        .expect("run cargo");
    assert!(o.status.success(), "release build failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let raw = target.join("release").join("libwsp_ggml_backend.a");
    let lib = target.join("release").join("dist").join("libwsp_ggml_backend.a");
    let o = Command::new(root.join("scripts/staticlib"))
        .arg("--from")
        .arg(&raw)
        .arg("--out")
        .arg(&lib)
        .output()
        .expect("run scripts/staticlib");
    assert!(o.status.success(), "scripts/staticlib: {}", String::from_utf8_lossy(&o.stderr));
    let exe = harness::build_against("ours_extras", &["ours_extras.c"], &lib);
    let r = harness::run(&exe, &[]);
    assert!(r.status.success(), "release build: {}", String::from_utf8_lossy(&r.stderr));
    let out = String::from_utf8_lossy(&r.stdout);
    assert!(out.contains("ok is_cpu(NULL) == false"), "{out}");
    assert!(out.contains("ok alignment of a backend-less from_ptr buffer"), "{out}");
}
