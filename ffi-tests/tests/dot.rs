//! The picture of a schedule (`wsp_ggml_backend_sched_write_dot`,
//! `WSP_GGML_SCHED_DOT`), checked against the scheduler's own answers:
//! `ffi-tests/c/ext_dot.c` builds graphs over two and three backends (inputs
//! copied between splits, a gpt-2-shaped graph), prints what the split and
//! statistics functions and `get_tensor_backend` say, then the DOT. This
//! test parses the DOT and requires that it says the same: one cluster per
//! split with its backend, range, inputs and bytes; every node in its
//! split's cluster, every node and leaf filled with its backend's colour
//! from the legend; one copy node per split input, fed by one edge with the
//! bytes copied, which add up to the split's and the backend's statistics;
//! every source of every node drawn as one edge, from the copy where the
//! source was copied into the node's split. The environment variable writes
//! the same text as the function; misuse aborts with a message.

use ffi_tests::harness::{self, Flavour};
use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;

/// One statement of the DOT text: a node (id, attributes, enclosing
/// cluster) or an edge (from, to, attributes).
#[derive(Debug, Default)]
struct Dot {
    nodes: HashMap<String, (HashMap<String, String>, Option<String>)>,
    edges: Vec<(String, String, HashMap<String, String>)>,
    clusters: Vec<(String, String)>, // (name, label)
}

/// `key=value, key="quoted \" value", ...` up to the closing `]`.
fn attrs(s: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let b: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && (b[i] == ' ' || b[i] == ',' || b[i] == ';') {
            i += 1;
        }
        let k0 = i;
        while i < b.len() && b[i] != '=' {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let key: String = b[k0..i].iter().collect();
        i += 1;
        let mut val = String::new();
        if b[i] == '"' {
            i += 1;
            while b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                    val.push(if b[i] == 'n' { '\n' } else { b[i] });
                } else {
                    val.push(b[i]);
                }
                i += 1;
            }
            i += 1;
        } else {
            while i < b.len() && b[i] != ',' && b[i] != ';' {
                val.push(b[i]);
                i += 1;
            }
        }
        out.insert(key.trim().to_string(), val);
    }
    out
}

fn parse(text: &str) -> Dot {
    let mut dot = Dot::default();
    let mut cluster: Option<String> = None;
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.first() == Some(&"digraph schedule {") && lines.last() == Some(&"}"), "not a digraph:\n{text}");
    for line in &lines[1..lines.len() - 1] {
        let l = line.trim();
        if let Some(name) = l.strip_prefix("subgraph ").and_then(|r| r.strip_suffix(" {")) {
            cluster = Some(name.to_string());
            continue;
        }
        if l == "}" {
            cluster = None;
            continue;
        }
        if l.starts_with("label=") {
            let a = attrs(l);
            dot.clusters.push((cluster.clone().expect("a label inside a cluster"), a["label"].clone()));
            continue;
        }
        let (head, rest) = match l.find(" [") {
            Some(p) => (&l[..p], &l[p + 2..l.rfind(']').expect("closing ]")]),
            None => (l.trim_end_matches(';'), ""),
        };
        if ["graph", "node", "edge"].contains(&head) {
            continue;
        }
        let a = attrs(rest);
        if let Some((from, to)) = head.split_once(" -> ") {
            dot.edges.push((from.to_string(), to.to_string(), a));
        } else {
            assert!(!head.contains(' '), "unexpected statement: {l}");
            assert!(dot.nodes.insert(head.to_string(), (a, cluster.clone())).is_none(), "node {head} twice");
        }
    }
    dot
}

/// The scheduler's answers for one graph, as ext_dot.c prints them.
#[derive(Debug, Default)]
struct Answers {
    backends: Vec<String>,
    splits: Vec<[i64; 6]>,
    node_backend: Vec<i64>,
    leaf_backend: Vec<i64>,
    srcs: Vec<(usize, String)>, // (node, "n<i>" / "l<i>" / "other")
    stats: Vec<[i64; 4]>,
    dot: String,
}

fn read_graphs(out: &str) -> Vec<(String, Answers)> {
    let mut graphs: Vec<(String, Answers)> = Vec::new();
    let mut in_dot = false;
    for line in out.lines() {
        if in_dot {
            if line == "dot-end" {
                in_dot = false;
            } else {
                let a = &mut graphs.last_mut().unwrap().1;
                a.dot.push_str(line);
                a.dot.push('\n');
            }
            continue;
        }
        let w: Vec<&str> = line.split(' ').collect();
        let n = |i: usize| -> i64 { w[i].parse().unwrap_or_else(|_| panic!("number in {line:?}")) };
        match w[0] {
            "dot-graph" => graphs.push((w[1].to_string(), Answers::default())),
            "dot-begin" => in_dot = true,
            _ if graphs.is_empty() => {}
            "backend" => graphs.last_mut().unwrap().1.backends.push(w[2..].join(" ")),
            "split" => graphs.last_mut().unwrap().1.splits.push([n(1), n(2), n(3), n(4), n(5), n(6)]),
            "node" => graphs.last_mut().unwrap().1.node_backend.push(n(2)),
            "leaf" => graphs.last_mut().unwrap().1.leaf_backend.push(n(2)),
            "src" => {
                let from = match w[3] {
                    "node" => format!("n{}", w[4]),
                    "leaf" => format!("l{}", w[4]),
                    _ => "other".to_string(),
                };
                graphs.last_mut().unwrap().1.srcs.push((n(1) as usize, from));
            }
            "stats" => graphs.last_mut().unwrap().1.stats.push([n(1), n(2), n(3), n(4)]),
            _ => {}
        }
    }
    graphs
}

fn bytes_of(label: &str) -> i64 {
    label.strip_suffix(" B").and_then(|b| b.parse().ok()).unwrap_or_else(|| panic!("not a byte count: {label:?}"))
}

/// Every check of the module doc on one graph; returns how many copies it drew.
fn check(name: &str, a: &Answers) -> usize {
    let dot = parse(&a.dot);
    let ctx = |what: &str| format!("graph {name}: {what}\n--- DOT:\n{}", a.dot);
    // the legend: one distinct colour per backend, named as the scheduler names it
    let colour: Vec<String> = (0..a.backends.len())
        .map(|b| {
            let (attrs, cluster) = &dot.nodes[&format!("key_b{b}")];
            assert_eq!(cluster.as_deref(), Some("cluster_legend"));
            assert_eq!(attrs["label"], format!("backend {b}: {}", a.backends[b]), "{}", ctx("legend"));
            attrs["fillcolor"].clone()
        })
        .collect();
    let mut distinct = colour.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), colour.len(), "{}", ctx("backend colours not distinct"));
    let fill_of = |b: i64| if b < 0 { dot.nodes["key_none"].0["fillcolor"].clone() } else { colour[b as usize].clone() };

    // the splits
    let splits: Vec<&(String, String)> = dot.clusters.iter().filter(|(c, _)| c.starts_with("cluster_s")).collect();
    assert_eq!(splits.len(), a.splits.len(), "{}", ctx("one cluster per split"));
    assert!(!a.splits.is_empty());
    let mut copies_per_backend = vec![(0i64, 0i64); a.backends.len()];
    let mut n_copies = 0;
    for (k, s) in a.splits.iter().enumerate() {
        let [_, b, i0, i1, n_in, bytes] = *s;
        assert_eq!(splits[k].0, format!("cluster_s{k}"));
        let want = format!("split {k}: {} (backend {b}), nodes [{i0}, {i1}), {n_in} inputs, {bytes} B copied", a.backends[b as usize]);
        assert_eq!(splits[k].1, want, "{}", ctx("split label vs get_split_stats"));
        // its copies: one per input, in the cluster, fed by one edge
        let mut sum = 0;
        for m in 0..n_in {
            let id = format!("s{k}i{m}");
            let (attrs, cluster) = dot.nodes.get(&id).unwrap_or_else(|| panic!("{}", ctx(&format!("no copy node {id}"))));
            assert_eq!(cluster.as_deref(), Some(format!("cluster_s{k}").as_str()));
            assert_eq!(attrs["fillcolor"], colour[b as usize], "{}", ctx(&format!("{id}'s colour")));
            let feeds: Vec<_> = dot.edges.iter().filter(|e| e.1 == id).collect();
            assert_eq!(feeds.len(), 1, "{}", ctx(&format!("edges into {id}")));
            sum += bytes_of(&feeds[0].2["label"]);
            // copied from another backend
            assert_ne!(dot.nodes[&feeds[0].0].0["fillcolor"], colour[b as usize], "{}", ctx(&format!("{id} copies from its own backend")));
        }
        assert!(!dot.nodes.contains_key(&format!("s{k}i{n_in}")), "{}", ctx("more copies than inputs"));
        assert_eq!(sum, bytes, "{}", ctx(&format!("split {k}'s copy edges vs bytes_copied")));
        copies_per_backend[b as usize].0 += n_in;
        copies_per_backend[b as usize].1 += sum;
        n_copies += n_in as usize;
        // its nodes, in it
        for i in i0..i1 {
            let (attrs, cluster) = &dot.nodes[&format!("n{i}")];
            assert_eq!(cluster.as_deref(), Some(format!("cluster_s{k}").as_str()), "{}", ctx(&format!("node {i}'s cluster")));
            assert_eq!(
                attrs["fillcolor"],
                fill_of(a.node_backend[i as usize]),
                "{}",
                ctx(&format!("node {i}'s colour vs get_tensor_backend"))
            );
            assert_eq!(attrs["label"].lines().count(), 4, "op, name, size, rule");
        }
    }
    assert_eq!(a.splits.last().unwrap()[3] as usize, a.node_backend.len(), "the splits cover the graph");
    for (b, s) in a.stats.iter().enumerate() {
        assert_eq!(copies_per_backend[b], (s[2], s[3]), "{}", ctx(&format!("backend {b}'s copies vs get_backend_stats")));
    }
    // the leafs
    for (i, &b) in a.leaf_backend.iter().enumerate() {
        let (attrs, cluster) = &dot.nodes[&format!("l{i}")];
        assert!(cluster.is_none());
        assert_eq!(attrs["fillcolor"], fill_of(b), "{}", ctx(&format!("leaf {i}'s colour vs get_tensor_backend")));
    }
    // the edges into each node: its sources, one each, through a copy of its split
    let split_of = |i: usize| a.splits.iter().position(|s| (s[2] as usize..s[3] as usize).contains(&i)).unwrap();
    let mut want: HashMap<usize, Vec<String>> = HashMap::new();
    for (i, from) in &a.srcs {
        want.entry(*i).or_default().push(from.clone());
    }
    for i in 0..a.node_backend.len() {
        let mut got: Vec<String> = Vec::new();
        for (from, _, _) in dot.edges.iter().filter(|e| e.1 == format!("n{i}")) {
            if let Some(copy) = from.strip_prefix('s') {
                let k: usize = copy.split('i').next().unwrap().parse().unwrap();
                assert_eq!(k, split_of(i), "{}", ctx(&format!("node {i} reads a copy of another split")));
                let feed = dot.edges.iter().find(|e| &e.1 == from).unwrap();
                got.push(feed.0.clone());
            } else {
                got.push(from.clone());
            }
        }
        let got: Vec<String> = got.into_iter().map(|g| if g.starts_with('t') { "other".into() } else { g }).collect();
        let mut got = got;
        got.sort();
        let mut w = want.remove(&i).unwrap_or_default();
        w.sort();
        assert_eq!(got, w, "{}", ctx(&format!("edges into node {i} vs its sources")));
    }
    n_copies
}

/// The program, built once for the tests of this file (which run in parallel).
fn exe() -> std::path::PathBuf {
    static EXE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    EXE.get_or_init(|| harness::build("ext_dot", &["ext_dot.c", "test_backend.c"], Flavour::Ours)).clone()
}

#[test]
fn the_picture_says_what_the_scheduler_says() {
    let exe = exe();
    for shape in ["full", "metal"] {
        let o = harness::run_shaped(&exe, &[], shape);
        assert!(o.status.success(), "ext_dot ({shape}): {:?}\n{}", o.status, String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout);
        let graphs = read_graphs(&out);
        let names: Vec<&str> = graphs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["two", "three", "gpt2"]);
        for (name, a) in &graphs {
            let copies = check(name, a);
            assert!(copies > 0, "graph {name} copies nothing: the test would not see the copies");
            if name == "three" {
                let used: std::collections::HashSet<i64> = a.splits.iter().map(|s| s[1]).collect();
                assert_eq!(used.len(), 3, "the three-backend graph uses all three: {:?}", a.splits);
            }
            if name == "gpt2" {
                assert!(a.splits.len() >= 2 && a.node_backend.len() > 60, "a gpt-2-shaped graph: {:?}", a.splits);
            }
        }
    }
}

/// `WSP_GGML_SCHED_DOT=path` writes, at `init_measure`, what the function
/// writes right after it.
#[test]
fn the_environment_variable_writes_the_same_picture() {
    let exe = exe();
    let dir = std::env::temp_dir().join(format!("wsp_dot_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("schedule.dot");
    let o = harness::run_shaped_env(&exe, &["measure-dot"], "full", &[("WSP_GGML_SCHED_DOT", path.to_str().unwrap())]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let written = std::fs::read_to_string(&path).expect("WSP_GGML_SCHED_DOT wrote no file");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let from_call = &stdout[stdout.find("digraph schedule {").expect("the call's DOT")..];
    assert_eq!(written, from_call);
    parse(&written);
    // a path that cannot be written is reported, not fatal
    let bad = dir.join("no-such-dir").join("x.dot");
    let o = harness::run_shaped_env(&exe, &["measure-dot"], "full", &[("WSP_GGML_SCHED_DOT", bad.to_str().unwrap())]);
    assert!(o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("wsp_ggml_backend: wsp_ggml_backend_sched_init_measure: WSP_GGML_SCHED_DOT: cannot write"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn another_graph_or_no_split_aborts_with_a_message() {
    let exe = exe();
    for (case, what) in [
        ("wrong-graph", "wsp_ggml_backend: wsp_ggml_backend_sched_write_dot: argument 'graph' (2 nodes, 1 leafs) is not the graph the scheduler split last (1 nodes, 1 leafs)"),
        ("before-split", "wsp_ggml_backend: wsp_ggml_backend_sched_write_dot: the scheduler has no split graph"),
    ] {
        let o = harness::run(&exe, &[case]);
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert_eq!(o.status.signal(), Some(6), "{case}: {:?}\n{err}", o.status);
        assert!(err.contains(what), "{case}: {err}");
        assert!(out.contains("asking") && !out.contains("returned") && !out.contains("digraph"), "{case}: {out}");
    }
}

/// `scripts/render-schedule` makes an SVG with Graphviz, and says how to
/// install it where `dot` is missing.
#[test]
fn render_schedule_renders_or_says_how_to_install_graphviz() {
    let exe = exe();
    let dir = std::env::temp_dir().join(format!("wsp_render_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("schedule.dot");
    let o = harness::run_shaped_env(&exe, &["measure-dot"], "full", &[("WSP_GGML_SCHED_DOT", path.to_str().unwrap())]);
    assert!(o.status.success());
    let script = ffi_tests::headers::workspace_root().join("scripts/render-schedule");
    // without Graphviz: a PATH that has bash and nothing else
    let bare = dir.join("bin");
    std::fs::create_dir_all(&bare).unwrap();
    let bash = String::from_utf8(std::process::Command::new("sh").args(["-c", "command -v bash"]).output().unwrap().stdout).unwrap();
    std::os::unix::fs::symlink(bash.trim(), bare.join("bash")).unwrap();
    let o = std::process::Command::new(&script).arg(&path).env("PATH", &bare).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("apt install graphviz"), "{err}");
    assert!(!dir.join("schedule.svg").exists());
    // with Graphviz, where it is installed
    if std::process::Command::new("dot").arg("-V").output().is_ok_and(|o| o.status.success()) {
        let o = std::process::Command::new(&script).arg(&path).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let svg = std::fs::read_to_string(dir.join("schedule.svg")).unwrap();
        assert!(svg.contains("<svg") && svg.contains("split 0: "), "not the picture: {}", &svg[..svg.len().min(500)]);
    } else {
        eprintln!("Graphviz is not installed: the rendering itself is not checked (apt install graphviz)");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
