//! Backend assignment and graph splitting: the original's four passes, run
//! over an integer-indexed copy of the graph (each tensor is hashed once per
//! compute, when the graph is indexed; the passes only index arrays).

use super::{copy_name, Cause, CopyLink, NodeInfo, Sched, Split, TensorInfo, FOREIGN, NONE};
use crate::backend::BackendRef;
use crate::buffer::BufferRef;
use crate::fatal::fatal;
use crate::ggml::{self, wsp_ggml_cgraph, wsp_ggml_hash_set, GraphRef, TensorRef, WSP_GGML_MAX_SRC};

/// The best candidate of the original's source rule: a source wins if its
/// backend has a better priority *and* it is at least as large as the current
/// winner. Sizes are only computed when two candidates meet.
#[derive(Clone, Copy)]
struct Best {
    prio: u32,
    id: u32,
    j: u8,
    size: Option<usize>,
}

impl Sched {
    /// Dense id of `t` in this compute's tables, registering it on first sight.
    #[inline]
    fn id(&mut self, t: TensorRef) -> u32 {
        let st = &mut self.st;
        let next = st.info.len() as u32;
        let (id, inserted) = st.ids.get_or_insert_with(t.as_ptr() as usize, || next);
        if inserted {
            let loc = locate(&self.backends, t);
            st.info.push(TensorInfo { t, assign: NONE, loc, input_mark: 0, copies: NONE, cause: Cause::Unset });
        }
        id
    }

    #[inline]
    fn set(&mut self, id: u32, backend: u32, cause: Cause) {
        let info = &mut self.st.info[id as usize];
        info.assign = backend;
        info.cause = cause;
    }

    #[inline]
    fn assign(&self, id: u32) -> u32 {
        self.st.info[id as usize].assign
    }

    fn user_assignment(&self, t: TensorRef) -> Option<u32> {
        if self.user.is_empty() {
            return None;
        }
        self.user.get(&(t.as_ptr() as usize)).copied()
    }

    fn nbytes(&self, id: u32) -> usize {
        self.st.info[id as usize].t.nbytes()
    }

    /// Fold candidate (`prio`, `id`) into `best` by the original's rule.
    #[inline]
    fn consider(&self, best: &mut Option<Best>, prio: u32, id: u32, j: usize) {
        match best {
            None => *best = Some(Best { prio, id, j: j as u8, size: None }),
            Some(b) if prio < b.prio => {
                let cur = *b.size.get_or_insert_with(|| self.nbytes(b.id));
                let size = self.nbytes(id);
                if size >= cur {
                    *b = Best { prio, id, j: j as u8, size: Some(size) };
                }
            }
            Some(_) => {}
        }
    }

    /// The backend index for location `loc` of tensor `id`, aborting if it is
    /// a backend the scheduler does not have (the original indexed out of bounds).
    fn known(&self, loc: u32, id: u32, func: &str) -> u32 {
        if loc == FOREIGN {
            let t = self.st.info[id as usize].t;
            let backend = crate::backend::tensor_backend(t).map_or_else(|| "?".into(), BackendRef::name_lossy);
            fatal(
                func,
                &format!("tensor '{}' lives in a buffer of backend '{backend}', which is not one of the scheduler's backends", t.name_lossy()),
            );
        }
        loc
    }

    /// Assign every node to a backend and cut the graph into splits.
    pub(super) fn split_graph(&mut self, graph: GraphRef, func: &str) {
        self.index_graph(graph);
        self.pass1_from_locations(func);
        self.pass2_from_sources();
        self.move_unsupported_nodes(func);
        self.pass3_and_4_split(func);
        self.build_graphs(graph);
        if self.debug {
            self.print_assignments(graph);
        }
    }

    /// Clear the tables and give every leaf, node, source and view source an id.
    fn index_graph(&mut self, graph: GraphRef) {
        let (n_nodes, n_leafs) = (graph.n_nodes(), graph.n_leafs());
        let st = &mut self.st;
        st.ids.clear(n_nodes + n_leafs + 16);
        st.info.clear();
        st.leaf_id.clear();
        st.nodes.clear();
        st.copy_links.clear();
        st.n_copies = 0;
        st.splits.clear();
        st.inputs.clear();
        st.patches.clear();
        st.alloc_nodes.clear();
        st.split_graphs.clear();
        // room for the input copies too, so that the table does not double for a few of them
        st.info.reserve(n_nodes + n_leafs + n_nodes / 8 + 64);
        st.nodes.reserve(n_nodes);
        // statistics describe the last compute of the current split graph
        self.split_stats.clear();
        self.backend_stats.iter_mut().for_each(|s| *s = super::BackendStats::default());

        for leaf in graph.leafs() {
            let id = self.id(leaf);
            self.st.leaf_id.push(id);
        }
        for node in graph.nodes() {
            let id = self.id(node);
            let mut srcs = [NONE; WSP_GGML_MAX_SRC];
            for (j, src) in node.srcs() {
                srcs[j] = self.id(src);
            }
            let vsrc = node.view_src().map_or(NONE, |v| self.id(v));
            self.st.nodes.push(NodeInfo { id, vsrc, srcs, view_op: node.is_view_op() });
        }
    }

    fn node(&self, i: usize) -> TensorRef {
        self.st.info[self.st.nodes[i].id as usize].t
    }

    /// Pass 1: leafs and nodes whose memory (or view source, or a source's
    /// memory) already lives on a backend.
    fn pass1_from_locations(&mut self, func: &str) {
        for k in 0..self.st.leaf_id.len() {
            let id = self.st.leaf_id[k];
            let leaf = self.st.info[id as usize].t;
            if let Some(b) = self.user_assignment(leaf) {
                self.set(id, b, Cause::User);
                continue;
            }
            if self.assign(id) != NONE {
                continue;
            }
            let mut loc = self.st.info[id as usize].loc;
            if loc == NONE {
                if let Some(vs) = leaf.view_src() {
                    loc = locate(&self.backends, vs);
                }
            }
            if loc != NONE {
                let b = self.known(loc, id, func);
                self.set(id, b, Cause::Leaf);
            }
        }
        for i in 0..self.st.nodes.len() {
            let NodeInfo { id, vsrc: vs, srcs, .. } = self.st.nodes[i];
            if !self.user.is_empty() {
                if let Some(b) = self.user_assignment(self.node(i)) {
                    self.set(id, b, Cause::User);
                    continue;
                }
            }
            if self.assign(id) != NONE {
                continue;
            }
            // The destination is already allocated: keep it there (e.g. KV cache updates).
            let loc = self.st.info[id as usize].loc;
            if loc != NONE {
                let b = self.known(loc, id, func);
                self.set(id, b, Cause::Dst);
                continue;
            }
            if vs != NONE && self.st.info[vs as usize].loc != NONE {
                let b = self.known(self.st.info[vs as usize].loc, vs, func);
                self.set(id, b, Cause::ViewSrc);
                continue;
            }
            let mut best = None;
            for (j, &sid) in srcs.iter().enumerate() {
                if sid == NONE {
                    break;
                }
                let prio = self.st.info[sid as usize].loc;
                if prio < FOREIGN {
                    self.consider(&mut best, prio, sid, j);
                }
            }
            if let Some(b) = best {
                self.set(id, b.prio, Cause::Src(b.j));
            }
        }
    }

    /// Pass 2: remaining nodes follow their sources' assignments (same rule).
    fn pass2_from_sources(&mut self) {
        for i in 0..self.st.nodes.len() {
            let NodeInfo { id, srcs, .. } = self.st.nodes[i];
            if self.assign(id) != NONE {
                continue;
            }
            let mut best = None;
            for (j, &sid) in srcs.iter().enumerate() {
                if sid == NONE {
                    break;
                }
                let a = self.assign(sid);
                if a != NONE {
                    self.consider(&mut best, a, sid, j);
                }
            }
            if let Some(b) = best {
                self.set(id, b.prio, Cause::Pass2Src(b.j));
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
    fn move_unsupported_nodes(&mut self, func: &str) {
        // Our CPU backend supports every op: skip the calls when all backends are CPU.
        let all_cpu: Vec<bool> = self.backends.iter().map(|&b| crate::cpu::is_cpu(b)).collect();
        if all_cpu.iter().all(|&c| c) {
            return;
        }
        let n = self.backends.len();
        for i in 0..self.st.nodes.len() {
            let NodeInfo { id, vsrc: vs, view_op, .. } = self.st.nodes[i];
            let node = self.node(i);
            // Follow a memory owner that was moved (before deciding anything else).
            if vs != NONE
                && matches!(self.st.info[vs as usize].cause, Cause::Unsupported | Cause::FollowsMemory)
                && self.assign(id) != self.assign(vs)
            {
                let owner = self.assign(vs);
                self.set(id, owner, Cause::FollowsMemory);
            }
            if view_op {
                continue;
            }
            let a = self.assign(id);
            if a == NONE || all_cpu[a as usize] || self.backends[a as usize].supports_op(node) {
                continue;
            }
            let cause = self.st.info[id as usize].cause;
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

    /// Passes 3 and 4, in one walk over the nodes (pass 3 only ever assigns a
    /// node's own unassigned sources, which pass 4 reads next, so the order of
    /// effects is the original's):
    /// 3. unassigned sources (leafs in practice) go where their first consumer
    ///    is; a node still without a backend would crash the original later,
    ///    we stop with a message instead;
    /// 4. cut a split wherever the backend changes (view ops never cut), and
    ///    redirect sources living elsewhere to copies on the split's backend.
    fn pass3_and_4_split(&mut self, func: &str) {
        let n = self.st.nodes.len();
        // The first split's backend: the first node that is not a view.
        let first = (0..n)
            .find(|&i| self.st.nodes[i].vsrc == NONE)
            .or_else(|| (0..n).find(|&i| !self.st.nodes[i].view_op))
            .map(|i| self.assign(self.st.nodes[i].id));
        let Some(mut cur) = first else {
            return; // no node to compute
        };
        self.st.splits.push(Split { backend: cur, i_start: 0, i_end: n, inputs: 0..0 });
        for i in 0..n {
            let NodeInfo { id, srcs, view_op, .. } = self.st.nodes[i];
            let a = self.assign(id);
            if a == NONE {
                let node = self.node(i);
                if !view_op || node.data().is_null() {
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
            }
            for &sid in &srcs {
                if sid == NONE {
                    break;
                }
                if self.assign(sid) == NONE {
                    self.set(sid, a, Cause::FromConsumer);
                }
            }
            if view_op {
                continue;
            }
            if a != cur {
                let k = self.st.splits.len();
                let inputs_at = self.st.inputs.len();
                self.st.splits[k - 1].i_end = i;
                self.st.splits.push(Split { backend: a, i_start: i, i_end: n, inputs: inputs_at..inputs_at });
                cur = a;
            }
            let split_no = self.st.splits.len() as u32;
            for (j, &sid) in srcs.iter().enumerate() {
                if sid == NONE {
                    break;
                }
                if self.assign(sid) == cur {
                    continue;
                }
                let copy = self.copy_for(sid, cur);
                if self.st.info[sid as usize].input_mark != split_no {
                    self.st.info[sid as usize].input_mark = split_no;
                    self.st.inputs.push((sid, copy));
                    self.st.splits.last_mut().expect("a split exists").inputs.end += 1;
                }
                let node = self.node(i);
                let copy_ref = TensorRef::new(&mut *self.st.copies[copy as usize]).expect("Box is never NULL");
                node.set_src(j, copy_ref);
                self.st.patches.push((node, j, self.st.info[sid as usize].t));
            }
        }
    }

    /// The copy of tensor `sid` on backend `b`, made once per graph and backend.
    fn copy_for(&mut self, sid: u32, b: u32) -> u32 {
        let mut link = self.st.info[sid as usize].copies;
        while link != NONE {
            let l = self.st.copy_links[link as usize];
            if l.backend == b {
                return l.copy;
            }
            link = l.next;
        }
        let src = self.st.info[sid as usize].t;
        let name = copy_name(self.backends[b as usize], src);
        let st = &mut self.st;
        let c = st.n_copies;
        if c == st.copies.len() {
            st.copies.push(Box::new(ggml::zeroed_tensor()));
        }
        ggml::dup_tensor_layout(&mut st.copies[c], src, &name);
        st.n_copies += 1;
        let head = st.info[sid as usize].copies;
        st.info[sid as usize].copies = st.copy_links.len() as u32;
        st.copy_links.push(CopyLink { backend: b, copy: c as u32, next: head });
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
        st.alloc_nodes.reserve(st.nodes.len() + st.inputs.len());
        st.split_graphs.reserve(st.splits.len());
        for split in &st.splits {
            for &(input, copy) in &st.inputs[split.inputs.clone()] {
                let copy = &mut *st.copies[copy as usize];
                copy.src[0] = st.info[input as usize].t.as_ptr();
                st.alloc_nodes.push(copy);
            }
            for node in &st.nodes[split.i_start..split.i_end] {
                st.alloc_nodes.push(st.info[node.id as usize].t.as_ptr());
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

/// Where `t`'s memory is: the index of its buffer's backend among `backends`,
/// NONE without a buffer (or backend), FOREIGN for a backend not in the list.
fn locate(backends: &[BackendRef], t: TensorRef) -> u32 {
    let Some(backend) = BufferRef::new(t.buffer()).and_then(BufferRef::backend) else {
        return NONE;
    };
    backends.iter().position(|&b| b == backend).map_or(FOREIGN, |i| i as u32)
}
