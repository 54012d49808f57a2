//! Generating `include/ggml-backend.h` and `include/ggml-backend-impl.h` with
//! cbindgen from the root crate, split the way the original headers are: the
//! public header has opaque handles and every function but `buffer_init`; the
//! impl header has the two interface structs, the two handle structs and
//! `buffer_init`.

use std::path::{Path, PathBuf};

/// Items that belong to the implementation header only.
const IMPL_ITEMS: &[&str] = &[
    "wsp_ggml_backend_buffer_context_t",
    "wsp_ggml_backend_buffer_i",
    "wsp_ggml_backend_buffer",
    "wsp_ggml_backend_buffer_init",
    "wsp_ggml_backend_context_t",
    "wsp_ggml_backend_i",
    "wsp_ggml_backend",
];

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("ffi-tests is inside the workspace").to_path_buf()
}

fn base_config(root: &Path) -> cbindgen::Config {
    cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml is valid")
}

fn generate(config: cbindgen::Config, root: &Path) -> String {
    let bindings = cbindgen::Builder::new().with_crate(root).with_config(config).generate().expect("cbindgen generates the header");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("header is UTF-8")
}

/// Names of the exported functions, `pub struct`s and `pub type`s in a source file.
fn items_in(root: &Path, file: &str) -> Vec<String> {
    let src = std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("read {file}: {e}"));
    src.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            l.strip_prefix("pub unsafe extern \"C\" fn ")
                .or_else(|| l.strip_prefix("pub extern \"C\" fn "))
                .or_else(|| l.strip_prefix("pub struct "))
                .or_else(|| l.strip_prefix("pub type "))
        })
        .map(|rest| rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or_default().to_string())
        .collect()
}

/// Every item of the drop-in API (the two original headers).
fn drop_in_items(root: &Path) -> Vec<String> {
    let mut names = items_in(root, "src/ffi/mod.rs");
    names.extend(
        [
            "wsp_ggml_backend_buffer_t",
            "wsp_ggml_backend_t",
            "wsp_ggml_backend_graph_plan_t",
            "wsp_ggml_backend_sched_t",
            "wsp_ggml_backend_sched",
        ]
        .map(String::from),
    );
    names.extend(IMPL_ITEMS.iter().map(|s| s.to_string()));
    names
}

/// Our additions: src/ffi/ext.rs and the graph-copy struct it returns.
fn ext_items(root: &Path) -> Vec<String> {
    let mut names = items_in(root, "src/ffi/ext.rs");
    names.push("wsp_ggml_backend_graph_copy".into());
    names
}

/// (public header, impl header, extension header) as they should be committed.
pub fn generate_headers() -> (String, String, String) {
    let root = workspace_root();
    let ext = ext_items(&root);

    let mut public = base_config(&root);
    public.includes = vec!["ggml.h".into(), "ggml-alloc.h".into()];
    public.after_includes = Some(
        "\n// Opaque handles; their layouts are in ggml-backend-impl.h.\nstruct wsp_ggml_backend_buffer;\nstruct wsp_ggml_backend;\nstruct wsp_ggml_backend_sched;"
            .into(),
    );
    public.export.exclude.extend(IMPL_ITEMS.iter().map(|s| s.to_string()));
    public.export.exclude.push("wsp_ggml_backend_sched".into());
    public.export.exclude.extend(ext.iter().cloned());
    for opaque in ["wsp_ggml_backend_buffer", "wsp_ggml_backend", "wsp_ggml_backend_sched"] {
        public.export.rename.insert(opaque.into(), format!("struct {opaque}"));
    }

    let mut imp = base_config(&root);
    imp.includes = vec!["ggml-backend.h".into()];
    imp.export.include.extend(IMPL_ITEMS.iter().map(|s| s.to_string()));
    imp.export.exclude.extend(drop_in_items(&root).into_iter().filter(|n| !IMPL_ITEMS.contains(&n.as_str())));
    imp.export.exclude.extend(ext.iter().cloned());

    let mut extension = base_config(&root);
    extension.includes = vec!["ggml-backend.h".into()];
    extension.header = Some(
        "// Additions to the ggml-backend API by wsp_ggml_backend (not in the original).\n\
         // Names and semantics follow later upstream ggml where it has the same capability."
            .into(),
    );
    let (major, minor, patch) = wsp_ggml_backend::ffi::ext::VERSION;
    extension.after_includes = Some(format!(
        "\n// The version of wsp_ggml_backend this header belongs to (Cargo.toml's);\n\
         // wsp_ggml_backend_version() gives the one the program runs with.\n\
         #define WSP_GGML_BACKEND_VERSION_MAJOR {major}\n\
         #define WSP_GGML_BACKEND_VERSION_MINOR {minor}\n\
         #define WSP_GGML_BACKEND_VERSION_PATCH {patch}\n\
         // MAJOR * 10000 + MINOR * 100 + PATCH, for #if checks\n\
         #define WSP_GGML_BACKEND_VERSION \\\n    \
         (WSP_GGML_BACKEND_VERSION_MAJOR * 10000 + WSP_GGML_BACKEND_VERSION_MINOR * 100 + WSP_GGML_BACKEND_VERSION_PATCH)\n\
         #define WSP_GGML_BACKEND_VERSION_STRING \"{major}.{minor}.{patch}\""
    ));
    extension.export.exclude.extend(drop_in_items(&root));
    extension.export.include.extend(ext.iter().cloned());

    (generate(public, &root), generate(imp, &root), generate(extension, &root))
}
