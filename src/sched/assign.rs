//! Backend assignment and graph splitting: the original's four passes.

use super::{copy_name, Cause, Sched, Split, NONE};
use crate::backend::tensor_backend;
use crate::fatal::fatal;
use crate::ggml::{self, wsp_ggml_cgraph, wsp_ggml_hash_set, GraphRef, TensorRef};

impl Sched {
    /// Dense id of `t` in this compute's tables, registering it on first sight.
    #[inline]
    fn id(&mut self, t: TensorRef) -> usize {
        let st = &mut self.st;
        let next = st.tensors.len() as u32;
        let (id, inserted) = st.ids.get_or_insert_with(t.as_ptr() as usize, || next);
        if inserted {
            st.tensors.push(t);
            st.assign.push(NONE);
            st.cause.push(Cause::Unset);
            st.input_mark.push(0);
        }
        id as usize
    }

    fn set(&mut self, id: usize, backend: u32, cause: Cause) {
        self.st.assign[id] = backend;
        self.st.cause[id] = cause;
    }

    fn user_assignment(&self, t: TensorRef) -> Option<u32> {
        if self.user.is_empty() {
            return None;
        }
        self.user.get(&(t.as_ptr() as usize)).copied()
    }

    /// Assign every node to a backend and cut the graph into splits.
    pub(super) fn split_graph(&mut self, graph: GraphRef, func: &str) {
        self.reset_tables(graph);
        self.pass1_from_locations(graph, func);
        self.pass2_from_sources(graph);
        self.move_unsupported_nodes(graph, func);
        self.pass3_sources_from_consumers(graph, func);
        self.pass4_split(graph);
        self.build_graphs(graph);
        if self.debug {
            self.print_assignments(graph);
        }
    }

    fn reset_tables(&mut self, graph: GraphRef) {
        let st = &mut self.st;
        let expected = 2 * (graph.n_nodes() + graph.n_leafs()) + 16;
        st.ids.clear(expected);
        st.tensors.clear();
        st.assign.clear();
        st.cause.clear();
        st.input_mark.clear();
        st.copy_of.clear();
        st.n_copies = 0;
        st.splits.clear();
        st.inputs.clear();
        st.patches.clear();
        st.alloc_nodes.clear();
        st.split_graphs.clear();
        st.tensors.reserve(expected / 2);
        // statistics describe the last compute of the current split graph
        self.split_stats.clear();
        self.backend_stats.iter_mut().for_each(|s| *s = super::BackendStats::default());
    }

    /// Pass 1: leafs and nodes whose memory (or view source, or a source's
    /// memory) already lives on a backend.
    fn pass1_from_locations(&mut self, graph: GraphRef, func: &str) {
        for leaf in graph.leafs() {
            let id = self.id(leaf);
            if let Some(b) = self.user_assignment(leaf) {
                self.set(id, b, Cause::User);
                continue;
            }
            if self.st.assign[id] != NONE {
                continue;
            }
            let backend = tensor_backend(leaf).or_else(|| leaf.view_src().and_then(tensor_backend));
            if let Some(backend) = backend {
                let b = self.index_of_tensor_backend(leaf, backend, func);
                self.set(id, b, Cause::Leaf);
            }
        }
        for node in graph.nodes() {
            let id = self.id(node);
            if let Some(b) = self.user_assignment(node) {
                self.set(id, b, Cause::User);
                continue;
            }
            if self.st.assign[id] != NONE {
                continue;
            }
            // The destination is already allocated: keep it there (e.g. KV cache updates).
            if let Some(backend) = tensor_backend(node) {
                let b = self.index_of_tensor_backend(node, backend, func);
                self.set(id, b, Cause::Dst);
                continue;
            }
            if let Some(backend) = node.view_src().and_then(tensor_backend) {
                let b = self.index_of_tensor_backend(node, backend, func);
                self.set(id, b, Cause::ViewSrc);
                continue;
            }
            // The preferred backend among the sources' locations. The original's
            // rule, kept exactly: a source wins if its backend has a better
            // priority *and* it is at least as large as the current winner.
            let mut best: Option<(u32, usize, u8)> = None;
            for (j, src) in node.srcs() {
                let Some(backend) = tensor_backend(src) else { continue };
                let Some(prio) = self.backends.iter().position(|&b| b == backend) else { continue };
                let size = src.nbytes();
                let (cur_prio, cur_size) = best.map_or((u32::MAX, 0), |(p, s, _)| (p, s));
                if (prio as u32) < cur_prio && size >= cur_size {
                    best = Some((prio as u32, size, j as u8));
                }
            }
            if let Some((b, _, j)) = best {
                self.set(id, b, Cause::Src(j));
            }
        }
    }

    /// Pass 2: remaining nodes follow their sources' assignments (same rule).
    fn pass2_from_sources(&mut self, graph: GraphRef) {
        for node in graph.nodes() {
            let id = self.id(node);
            if self.st.assign[id] != NONE {
                continue;
            }
            let mut best: Option<(u32, usize, u8)> = None;
            for (j, src) in node.srcs() {
                let sid = self.id(src);
                let a = self.st.assign[sid];
                if a == NONE {
                    continue;
                }
                let size = src.nbytes();
                let (cur_prio, cur_size) = best.map_or((u32::MAX, 0), |(p, s, _)| (p, s));
                if a < cur_prio && size >= cur_size {
                    best = Some((a, size, j as u8));
                }
            }
            if let Some((b, _, j)) = best {
                self.set(id, b, Cause::Pass2Src(j));
            }
        }
    }

    /// Not in the original: a node never runs on a backend whose `supports_op`
    /// rejects it. It moves to the next backend in priority order (wrapping
    /// around) that supports it; its inputs are then copied like any other.
    /// A node that works in the memory of another (an in-place op, a view)
    /// cannot move on its own: it follows a moved memory owner, and a node
    /// whose memory owner stays on a rejecting backend is an error.
    /// With backends that support every op nothing changes.
    fn move_unsupported_nodes(&mut self, graph: GraphRef, func: &str) {
        // Our CPU backend supports every op: skip the calls when all backends are CPU.
        let all_cpu: Vec<bool> = self.backends.iter().map(|&b| crate::cpu::is_cpu(b)).collect();
        if all_cpu.iter().all(|&c| c) {
            return;
        }
        let n = self.backends.len();
        for node in graph.nodes() {
            let id = self.id(node);
            // Follow a memory owner that was moved (before deciding anything else).
            if let Some(vs) = node.view_src() {
                let vid = self.id(vs);
                if matches!(self.st.cause[vid], Cause::Unsupported | Cause::FollowsMemory)
                    && self.st.assign[id] != self.st.assign[vid]
                {
                    let owner = self.st.assign[vid];
                    self.set(id, owner, Cause::FollowsMemory);
                }
            }
            if node.is_view_op() {
                continue;
            }
            let a = self.st.assign[id];
            if a == NONE || all_cpu[a as usize] || self.backends[a as usize].supports_op(node) {
                continue;
            }
            let cause = self.st.cause[id];
            let here = self.backends[a as usize];
            let pinned = match (cause, node.view_src()) {
                (Cause::User, _) => Some("it was assigned there with set_node_backend".to_string()),
                (Cause::Dst | Cause::ViewSrc, _) => Some("its memory is on that backend".to_string()),
                (_, Some(vs)) => Some(format!("it works in the memory of '{}', which is on that backend", vs.name_lossy())),
                _ => None,
            };
            if let Some(why) = pinned {
                fatal(
                    func,
                    &format!(
                        "node '{}' ({}) must run on backend '{}' ({why}), which does not support it",
                        node.name_lossy(),
                        ggml::op_name(node.op()),
                        here.name_lossy()
                    ),
                );
            }
            let found = (1..n).map(|d| (a as usize + d) % n).find(|&b| all_cpu[b] || self.backends[b].supports_op(node));
            match found {
                Some(b) => self.set(id, b as u32, Cause::Unsupported),
                None => fatal(
                    func,
                    &format!("no backend of the scheduler supports node '{}' ({})", node.name_lossy(), ggml::op_name(node.op())),
                ),
            }
        }
    }

    /// Pass 3: unassigned sources (leafs in practice) go where their consumer is.
    /// A node still without a backend here would crash the original later; we
    /// stop with a message instead.
    fn pass3_sources_from_consumers(&mut self, graph: GraphRef, func: &str) {
        for node in graph.nodes() {
            let id = self.id(node);
            let a = self.st.assign[id];
            if a == NONE && (!node.is_view_op() || node.data().is_null()) {
                fatal(
                    func,
                    &format!(
                        "node '{}' ({}) cannot be assigned to a backend: neither it nor any of its sources is in a \
                         backend buffer (pre-allocate the graph's inputs or weights)",
                        node.name_lossy(),
                        ggml::op_name(node.op())
                    ),
                );
            }
            for (_, src) in node.srcs() {
                let sid = self.id(src);
                if self.st.assign[sid] == NONE {
                    self.set(sid, a, Cause::FromConsumer);
                }
            }
        }
    }

    /// Pass 4: cut a split wherever the backend changes (view ops never cut),
    /// and redirect sources living elsewhere to copies on the split's backend.
    fn pass4_split(&mut self, graph: GraphRef) {
        let n = graph.n_nodes();
        // The first split's backend: the first node that is not a view.
        let first = (0..n)
            .map(|i| graph.node(i))
            .find(|t| t.view_src().is_none())
            .or_else(|| (0..n).map(|i| graph.node(i)).find(|t| !t.is_view_op()))
            .map(|t| {
                let id = self.id(t);
                self.st.assign[id]
            });
        let Some(mut cur) = first else {
            return; // no node to compute
        };
        self.st.splits.push(Split { backend: cur, i_start: 0, i_end: n, inputs: 0..0 });
        for i in 0..n {
            let node = graph.node(i);
            if node.is_view_op() {
                continue;
            }
            let id = self.id(node);
            let a = self.st.assign[id];
            if a != cur {
                let k = self.st.splits.len();
                let inputs_at = self.st.inputs.len();
                self.st.splits[k - 1].i_end = i;
                self.st.splits.push(Split { backend: a, i_start: i, i_end: n, inputs: inputs_at..inputs_at });
                cur = a;
            }
            let split_no = self.st.splits.len() as u32;
            for (j, src) in node.srcs() {
                let sid = self.id(src);
                if self.st.assign[sid] == cur {
                    continue;
                }
                let copy = self.copy_for(sid, cur);
                if self.st.input_mark[sid] != split_no {
                    self.st.input_mark[sid] = split_no;
                    self.st.inputs.push((sid as u32, copy));
                    self.st.splits.last_mut().expect("a split exists").inputs.end += 1;
                }
                let copy_ref = TensorRef::new(&mut *self.st.copies[copy as usize]).expect("Box is never NULL");
                node.set_src(j, copy_ref);
                self.st.patches.push((node, j, src));
            }
        }
    }

    /// The copy of tensor `sid` on backend `b`, made once per graph and backend.
    fn copy_for(&mut self, sid: usize, b: u32) -> u32 {
        if let Some(&c) = self.st.copy_of.get(&(sid as u32, b)) {
            return c;
        }
        let src = self.st.tensors[sid];
        let name = copy_name(self.backends[b as usize], src);
        let st = &mut self.st;
        let c = st.n_copies;
        if c == st.copies.len() {
            st.copies.push(Box::new(ggml::zeroed_tensor()));
        }
        ggml::dup_tensor_layout(&mut st.copies[c], src, &name);
        st.n_copies += 1;
        st.copy_of.insert((sid as u32, b), c as u32);
        let copy_ref = TensorRef::new(&mut *self.st.copies[c]).expect("Box is never NULL");
        let cid = self.id(copy_ref);
        self.set(cid, b, Cause::InputCopy);
        c as u32
    }

    /// The graph for ggml-alloc (each split's input copies, then its nodes)
    /// and one graph view per split for the backends.
    fn build_graphs(&mut self, graph: GraphRef) {
        let st = &mut self.st;
        let nodes = graph.nodes_ptr();
        let grads = graph.grads_ptr();
        for split in &st.splits {
            for &(input, copy) in &st.inputs[split.inputs.clone()] {
                let copy = &mut *st.copies[copy as usize];
                copy.src[0] = st.tensors[input as usize].as_ptr();
                st.alloc_nodes.push(copy);
            }
            for i in split.i_start..split.i_end {
                st.alloc_nodes.push(graph.node(i).as_ptr());
            }
            // SAFETY: i_start <= i_end <= n_nodes, so the offsets stay inside
            // the graph's node (and gradient) arrays.
            let (nodes, grads) = unsafe {
                (nodes.add(split.i_start), if grads.is_null() { grads } else { grads.add(split.i_start) })
            };
            st.split_graphs.push(wsp_ggml_cgraph {
                size: 0,
                n_nodes: (split.i_end - split.i_start) as i32,
                n_leafs: 0,
                nodes,
                grads,
                leafs: std::ptr::null_mut(),
                visited_hash_table: wsp_ggml_hash_set { size: 0, keys: std::ptr::null_mut() },
                order: graph.order(),
                perf_runs: 0,
                perf_cycles: 0,
                perf_time_us: 0,
            });
        }
    }
}
