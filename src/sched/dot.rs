//! The schedule as a picture: the last split of a graph written as Graphviz
//! DOT (`wsp_ggml_backend_sched_write_dot`, and `WSP_GGML_SCHED_DOT` at each
//! `init_measure`). The sibling of `Sched::print_assignments` (mod.rs),
//! which says the same in text.
//!
//! What is kept between calls names tensors by `TensorId` only, so the
//! writer takes the graph of the running call: it checks that this is the
//! graph split last (the same nodes and leafs at the same addresses), then
//! finds each slot's tensor again by walking the graph (nodes, leafs, their
//! sources) into a `Live` of its own, as registration does. What it draws
//! comes from the table (each tensor's backend and `Rule`) and the plan
//! (splits, inputs, copies); sizes and names are read from the tensors.
//!
//! The output, one statement per line (tests parse it):
//! - one cluster per split (`cluster_s<k>`), labelled with its backend,
//!   node range, inputs and bytes copied; in it, the split's nodes
//!   (`n<i>`, graph node i) and one node per input copy (`s<k>i<m>`, the
//!   split's m-th input), filled with the split backend's colour;
//! - outside the clusters, the leafs (`l<i>`, cylinders) and the other
//!   tensors the nodes read (`t<slot>`), filled with their backend's colour
//!   (white: none);
//! - edges from each source to its consumer; a source copied into the
//!   consumer's split is read from its copy, and the edge from the tensor
//!   to the copy is labelled with the bytes copied;
//! - a legend (`cluster_legend`): one `key_b<i>` node per backend with its
//!   colour, and what the rules mean.
//!
//! Nothing here runs unless it is asked for: no compute calls it.

use crate::prelude::*;

use core::fmt::Write;

use super::ids::{BackendIdx, Rule, Slot};
use super::live::{Live, Room};
use super::state::Sched;
use crate::fatal::fatal;
use crate::ggml::{self, GraphRef, TensorRef};

/// Fill colours of the backends, by index (repeated past the eighth).
const PALETTE: [&str; 8] = ["#9ecae1", "#fdae6b", "#a1d99b", "#f4a6c6", "#c6b3e0", "#fdd49e", "#80cdc1", "#d9d9d9"];
/// The fill of a tensor without a backend.
const NO_BACKEND: &str = "#ffffff";

fn colour(b: Option<BackendIdx>) -> &'static str {
    b.map_or(NO_BACKEND, |b| PALETTE[b.get() % PALETTE.len()])
}

/// What a rule means, for the legend.
const RULES: &[(&str, &str)] = &[
    ("User", "set_node_backend"),
    ("Leaf", "a leaf: where its memory is"),
    ("Dst", "its own memory is in that backend's buffer"),
    ("ViewSrc", "its view source's memory is there"),
    ("Src(j)", "pass 1: from source j, in a buffer"),
    ("Pass2Src(j)", "pass 2: from source j's backend"),
    ("FromConsumer", "pass 3: its first consumer's backend"),
    ("Unsupported", "moved: the backend does not support the op"),
    ("FollowsMemory", "with the node whose memory it uses"),
    ("Unset", "no backend"),
];

/// How a tensor is named in the DOT text.
#[derive(Clone, Copy)]
enum Id {
    Node(usize),
    Leaf(usize),
    Other(Slot),
}

impl core::fmt::Display for Id {
    fn fmt(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        match self {
            Id::Node(i) => write!(f, "n{i}"),
            Id::Leaf(i) => write!(f, "l{i}"),
            Id::Other(s) => write!(f, "t{}", s.get()),
        }
    }
}

/// `text` in a DOT string (quotes and backslashes escaped).
struct Quoted<'a>(&'a str);

impl core::fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        f.write_char('"')?;
        for c in self.0.chars() {
            match c {
                '"' | '\\' => write!(f, "\\{c}")?,
                '\n' => f.write_str("\\n")?,
                c if c.is_control() => f.write_char(' ')?,
                c => f.write_char(c)?,
            }
        }
        f.write_char('"')
    }
}

/// A tensor's shape and size: "[8, 4] 128 B".
fn size_text(t: TensorRef) -> String {
    let ne = t.ne();
    // (the dimensions up to the last that is not 1)
    let n = ne.iter().rposition(|&d| d != 1).map_or(1, |i| i + 1);
    let dims: Vec<String> = ne[..n].iter().map(|d| d.to_string()).collect();
    format!("[{}] {} B", dims.join(", "), t.nbytes())
}

/// Lines of DOT, each handed to the sink once written.
struct Out<'w> {
    line: String,
    sink: &'w mut dyn FnMut(&str),
}

impl Out<'_> {
    fn line(&mut self, args: core::fmt::Arguments) {
        self.line.clear();
        let _ = self.line.write_fmt(args);
        self.line.push('\n');
        (self.sink)(&self.line);
    }
}

macro_rules! out {
    ($o:expr, $($arg:tt)*) => { $o.line(format_args!($($arg)*)) };
}

impl Sched {
    /// Write the last split of `graph` as DOT to `sink`, line by line.
    /// Aborts naming `func` when nothing was split yet or `graph` is not
    /// the graph split last.
    pub fn write_dot(&self, graph: GraphRef, sink: &mut dyn FnMut(&str), func: &str) {
        let st = &self.st;
        if st.plan().splits.is_empty() {
            fatal(func, "the scheduler has no split graph (call wsp_ggml_backend_sched_init_measure or graph_compute first)");
        }
        let same = graph.n_nodes() == st.graph().nodes.len()
            && graph.n_leafs() == st.graph().leafs.len()
            && graph.node_entries().zip(&st.graph().nodes).all(|(t, n)| t.map(|t| t.id()) == st.table().key(n.slot))
            && graph.leaf_entries().zip(&st.graph().leafs).all(|(t, l)| t.map(|t| t.id()) == st.table().key(l.0));
        if !same {
            fatal(
                func,
                &format!(
                    "argument 'graph' ({} nodes, {} leafs) is not the graph the scheduler split last ({} nodes, {} leafs)",
                    graph.n_nodes(),
                    graph.n_leafs(),
                    st.graph().nodes.len(),
                    st.graph().leafs.len()
                ),
            );
        }
        // This call's tensors by slot, found again in the graph (its sources
        // may be redirected to copies while a compute runs: a copy's last
        // source is the tensor it copies).
        let mut room = Room::default();
        let mut live = Live::new(&mut room);
        live.reset(st.table().size());
        let mut ids: Vec<Option<Id>> = vec![None; st.table().size()];
        for (i, t) in graph.leaf_entries().enumerate() {
            if let Some(slot) = t.and_then(|t| st.table().find(t.id()).map(|s| (s, t))) {
                live.set(slot.0, slot.1);
                ids[slot.0.index()] = Some(Id::Leaf(i));
            }
        }
        for (i, t) in graph.node_entries().enumerate() {
            let Some(t) = t else { continue };
            if let Some(s) = st.table().find(t.id()) {
                live.set(s, t);
                ids[s.index()] = Some(Id::Node(i));
            }
        }
        for t in graph.nodes() {
            for (_, src) in t.srcs() {
                let mut src = src;
                let Some(mut s) = st.table().find(src.id()) else { continue };
                if let Some(c) = st.copy_slots().iter().position(|&c| c == s) {
                    // (redirected: the tensor the copy copies)
                    let Some(orig) = src.srcs().last().map(|(_, o)| o) else { continue };
                    src = orig;
                    s = st.plan().copy_of[c].src;
                }
                if live.find(s).is_none() {
                    live.set(s, src);
                }
                if ids[s.index()].is_none() {
                    ids[s.index()] = Some(Id::Other(s));
                }
            }
        }
        let name = |b: BackendIdx| self.backends[b].backend().name_lossy();
        let mut o = Out { line: String::new(), sink };
        let n_inputs = st.plan().inputs.len();
        let copied: usize = st.plan().inputs.iter().map(|&(s, _)| live.get(s).nbytes()).sum();
        out!(o, "digraph schedule {{");
        out!(
            o,
            "  graph [label={}, labelloc=t, fontname=\"Helvetica\", rankdir=TB, newrank=true];",
            Quoted(&format!(
                "{} nodes, {} leafs: {} splits, {} input copies, {} B copied per compute",
                graph.n_nodes(),
                graph.n_leafs(),
                st.plan().splits.len(),
                n_inputs,
                copied
            ))
        );
        out!(o, "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];");
        out!(o, "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\"];");
        // the splits: their input copies, then their nodes
        for (k, split) in st.plan().splits.iter().enumerate() {
            let inputs = &st.plan().inputs[split.inputs.clone()];
            let bytes: usize = inputs.iter().map(|&(s, _)| live.get(s).nbytes()).sum();
            out!(o, "  subgraph cluster_s{k} {{");
            out!(
                o,
                "    label={}; style=\"rounded,filled\"; fillcolor=\"#f7f7f7\"; color={}; penwidth=2;",
                Quoted(&format!(
                    "split {k}: {} (backend {}), nodes [{}, {}), {} inputs, {bytes} B copied",
                    name(split.backend),
                    split.backend.get(),
                    split.i_start,
                    split.i_end,
                    inputs.len()
                )),
                Quoted(colour(Some(split.backend)))
            );
            for (m, &(s, _)) in inputs.iter().enumerate() {
                let t = live.get(s);
                out!(
                    o,
                    "    s{k}i{m} [label={}, style=\"filled,dashed\", fillcolor={}];",
                    Quoted(&format!("copy\n{}#{}\n{}\nInputCopy", name(split.backend), t.name_lossy(), size_text(t))),
                    Quoted(colour(Some(split.backend)))
                );
            }
            for i in split.i_start..split.i_end {
                let t = graph.node(i);
                let (a, rule) = st.table().find(t.id()).map_or((None, Rule::Unset), |s| st.decision(s));
                let style = if t.is_view_op() { ", style=\"rounded,filled,dotted\"" } else { "" };
                out!(
                    o,
                    "    n{i} [label={}, fillcolor={}{style}];",
                    Quoted(&format!("{}\n{}\n{}\n{:?}", ggml::op_name(t.op()), t.name_lossy(), size_text(t), rule)),
                    Quoted(colour(a))
                );
            }
            out!(o, "  }}");
        }
        // the tensors outside the splits: leafs, and other sources
        for (s, id) in ids.iter().enumerate() {
            let (slot, Some(id)) = (Slot::at(s), *id) else { continue };
            if matches!(id, Id::Node(_)) {
                continue;
            }
            let t = live.get(slot);
            let (assign, rule) = st.decision(slot);
            let shape = if matches!(id, Id::Leaf(_)) { "cylinder" } else { "box" };
            out!(
                o,
                "  {id} [label={}, shape={shape}, fillcolor={}];",
                Quoted(&format!("{}\n{}\n{}\n{:?}", ggml::op_name(t.op()), t.name_lossy(), size_text(t), rule)),
                Quoted(colour(assign))
            );
        }
        // the copies' edges, then the nodes' (a source copied into the
        // consumer's split comes from its copy)
        for (k, split) in st.plan().splits.iter().enumerate() {
            for (m, &(s, _)) in st.plan().inputs[split.inputs.clone()].iter().enumerate() {
                let from = ids[s.index()].unwrap_or(Id::Other(s));
                out!(
                    o,
                    "  {from} -> s{k}i{m} [label=\"{} B\", color=\"#d62728\", fontcolor=\"#d62728\", penwidth=2];",
                    live.get(s).nbytes()
                );
            }
            for i in split.i_start..split.i_end {
                for (_, src) in graph.node(i).srcs() {
                    let Some(mut s) = st.table().find(src.id()) else { continue };
                    if let Some(c) = st.copy_slots().iter().position(|&c| c == s) {
                        s = st.plan().copy_of[c].src;
                    }
                    let inputs = &st.plan().inputs[split.inputs.clone()];
                    match inputs.iter().position(|&(input, _)| input == s) {
                        Some(m) => out!(o, "  s{k}i{m} -> n{i};"),
                        None => {
                            if let Some(from) = ids[s.index()] {
                                out!(o, "  {from} -> n{i};");
                            }
                        }
                    }
                }
            }
        }
        // the legend
        out!(o, "  subgraph cluster_legend {{");
        out!(o, "    label=\"legend\"; style=\"rounded\"; color=\"#999999\";");
        for b in 0..self.backends.len() {
            let b = BackendIdx::new(b);
            out!(
                o,
                "    key_b{} [label={}, fillcolor={}];",
                b.get(),
                Quoted(&format!("backend {}: {}", b.get(), name(b))),
                Quoted(colour(Some(b)))
            );
        }
        out!(o, "    key_none [label=\"no backend\", fillcolor={}];", Quoted(NO_BACKEND));
        out!(o, "    key_copy [label=\"input copy (edge: bytes copied)\", style=\"filled,dashed\", fillcolor=\"#ffffff\"];");
        out!(o, "    key_leaf [label=\"leaf\", shape=cylinder, fillcolor=\"#ffffff\"];");
        let mut rules = String::from("node: op, name, shape and bytes, rule that placed it\\l");
        for (r, what) in RULES {
            let _ = write!(rules, "{r}: {what}\\l");
        }
        out!(o, "    key_rules [shape=plaintext, style=\"\", label=\"{rules}\"];");
        out!(o, "  }}");
        out!(o, "}}");
        drop(o);
        live.end(&mut room);
    }
}

impl Sched {
    /// `WSP_GGML_SCHED_DOT=path`: write the split just made to `path`
    /// (replaced), at each `init_measure`; a file that cannot be written is
    /// reported (where messages go), not fatal.
    pub(super) fn write_dot_to_env(&self, graph: GraphRef, func: &str) {
        let Some(path) = crate::platform::env_value(c"WSP_GGML_SCHED_DOT") else { return };
        if self.st.plan().splits.is_empty() {
            return; // (an empty graph: nothing to draw)
        }
        let shown = String::from_utf8_lossy(&path[..path.len() - 1]).into_owned();
        if !crate::platform::write_file(&path, |sink| self.write_dot(graph, sink, func)) {
            crate::platform::errln!("wsp_ggml_backend: {func}: WSP_GGML_SCHED_DOT: cannot write '{shown}'");
        }
    }
}
