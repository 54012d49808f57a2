// Where the scheduler places every tensor of a graph. With one backend (one
// split, no input copies) the original hands the whole graph to ggml-alloc;
// ours places the tensors itself (src/sched/galloc.rs). Both must give every
// tensor the same offset in the compute buffer, compute the same nodes in
// place (view_src), and measure the same buffer size. Random graphs of the
// ops ggml-alloc treats differently: in-place candidates (add, mul, scale,
// unary, soft_max, rms_norm), views, reshapes, copies into fresh tensors,
// explicit in-place ops, matrix products; an input allocated by the caller
// through sched_get_tallocr before each compute; the same graph computed
// twice (its tensors keep their memory: nothing is allocated again, and
// what the allocator frees then decides nothing visible but must not crash).
//
// Offsets are printed from the first aligned address of the buffer (where
// ggml-alloc starts), so the two libraries' different buffer bases do not
// show.

#include "sched_util.h"

#include <inttypes.h>

#define N_SEEDS 60
#define MAX_POOL 96

struct pool {
    struct wsp_ggml_tensor * t[MAX_POOL];
    int n;
};

static void push(struct pool * p, struct wsp_ggml_tensor * t) {
    if (p->n < MAX_POOL) {
        p->t[p->n++] = t;
    }
}

static struct wsp_ggml_tensor * pick(struct pool * p, struct lcg * r) {
    return p->t[lcg_u32(r) % (uint32_t)p->n];
}

// Another tensor of the pool with a's shape and type, or a itself.
static struct wsp_ggml_tensor * pick_like(struct pool * p, struct lcg * r, struct wsp_ggml_tensor * a) {
    int start = (int)(lcg_u32(r) % (uint32_t)p->n);
    for (int k = 0; k < p->n; k++) {
        struct wsp_ggml_tensor * b = p->t[(start + k) % p->n];
        if (b != a && b->type == a->type && wsp_ggml_are_same_shape(a, b)) {
            return b;
        }
    }
    return a;
}

static const int64_t dims[] = { 4, 8, 16 };

struct weights {
    struct wsp_ggml_context * ctx;
    struct su_store store;
    struct wsp_ggml_tensor * w[6];
    struct wsp_ggml_tensor * scalar;
    int n;
};

static void make_weights(struct weights * W, wsp_ggml_backend_t cpu, struct lcg * r) {
    W->ctx = make_ctx(8, false, true, 0);
    su_store_init(&W->store, cpu, 1 << 16);
    W->n = 3 + (int)(lcg_u32(r) % 4);
    for (int i = 0; i < W->n; i++) {
        W->w[i] = wsp_ggml_new_tensor_2d(W->ctx, WSP_GGML_TYPE_F32, dims[lcg_u32(r) % 3], dims[lcg_u32(r) % 3]);
        wsp_ggml_format_name(W->w[i], "w%d", i);
        wsp_ggml_allocr_alloc(W->store.alloc, W->w[i]);
        su_fill(W->w[i], r, 1.0f);
    }
    W->scalar = wsp_ggml_new_tensor_1d(W->ctx, WSP_GGML_TYPE_F32, 1);
    wsp_ggml_set_name(W->scalar, "s");
    wsp_ggml_allocr_alloc(W->store.alloc, W->scalar);
    float half = 0.5f;
    wsp_ggml_backend_tensor_set(W->scalar, &half, 0, sizeof(half));
}

// Build graph `seed` into a fresh context; the input `x` is left
// unallocated. Same seed, same graph.
static struct wsp_ggml_cgraph * build(struct wsp_ggml_context ** pctx, const struct weights * W, uint64_t seed,
                                      struct wsp_ggml_tensor ** px) {
    struct lcg r = lcg_new(seed);
    struct wsp_ggml_context * ctx = make_ctx(MAX_POOL * 2 + 16, true, true, 0);
    *pctx = ctx;
    struct pool p = { { 0 }, 0 };
    for (int i = 0; i < W->n; i++) {
        push(&p, W->w[i]);
    }
    struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 16, 8);
    wsp_ggml_set_name(x, "x");
    push(&p, x);
    *px = x;
    int n_ops = 8 + (int)(lcg_u32(&r) % 40);
    struct wsp_ggml_tensor * last[3] = { x, x, x };
    for (int k = 0; k < n_ops; k++) {
        struct wsp_ggml_tensor * a = pick(&p, &r);
        struct wsp_ggml_tensor * t = NULL;
        switch (lcg_u32(&r) % 14) {
            case 0: t = wsp_ggml_add(ctx, a, pick_like(&p, &r, a)); break;
            case 1: t = wsp_ggml_mul(ctx, a, pick_like(&p, &r, a)); break;
            case 2: t = wsp_ggml_scale(ctx, a, W->scalar); break;
            case 3: t = wsp_ggml_gelu(ctx, a); break;
            case 4: t = wsp_ggml_silu(ctx, a); break;
            case 5: t = wsp_ggml_soft_max(ctx, a); break;
            case 6: t = wsp_ggml_rms_norm(ctx, a, 1e-5f); break;
            case 7: t = wsp_ggml_norm(ctx, a, 1e-5f); break;
            case 8: {
                // a product with any tensor of the same row length
                struct wsp_ggml_tensor * b = NULL;
                for (int j = 0; j < p.n && b == NULL; j++) {
                    if (p.t[j]->ne[0] == a->ne[0] && p.t[j]->ne[2] == 1) {
                        b = p.t[j];
                    }
                }
                t = wsp_ggml_mul_mat(ctx, a, b != NULL ? b : a);
                break;
            }
            case 9: t = wsp_ggml_cpy(ctx, a, wsp_ggml_new_tensor(ctx, a->type, a->n_dims, a->ne)); break;
            case 10:
                // (ggml's dup of a transposed 1-d tensor loses its shape)
                t = a->n_dims >= 2 ? wsp_ggml_cont(ctx, wsp_ggml_transpose(ctx, a)) : wsp_ggml_gelu(ctx, a);
                break;
            case 11:
                t = wsp_ggml_is_contiguous(a) ? wsp_ggml_reshape_1d(ctx, a, wsp_ggml_nelements(a))
                                              : wsp_ggml_cont(ctx, a);
                break;
            case 12: {
                int64_t n = wsp_ggml_nelements(a) / 2;
                t = wsp_ggml_is_contiguous(a) && n > 0 ? wsp_ggml_view_1d(ctx, a, n, (size_t)(lcg_u32(&r) % 2) * (size_t)n * a->nb[0])
                                                       : wsp_ggml_gelu(ctx, a);
                break;
            }
            default:
                // explicit in-place, never on a weight (it would change it)
                t = a->op == WSP_GGML_OP_NONE ? wsp_ggml_silu(ctx, a) : wsp_ggml_add_inplace(ctx, a, pick_like(&p, &r, a));
                break;
        }
        wsp_ggml_format_name(t, "t%d", k);
        push(&p, t);
        last[k % 3] = t;
    }
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    for (int i = 0; i < 3; i++) {
        wsp_ggml_build_forward_expand(g, last[i]);
    }
    return g;
}

// Offset of t's memory from the first aligned address of `buffer`, or -1.
static long long offset_in(const struct wsp_ggml_tensor * t, wsp_ggml_backend_buffer_t buffer) {
    if (t->data == NULL || buffer == NULL || t->buffer != buffer) {
        return -1;
    }
    uintptr_t base = (uintptr_t)wsp_ggml_backend_buffer_get_base(buffer);
    size_t align = wsp_ggml_backend_buffer_get_alignment(buffer);
    uintptr_t start = (base + align - 1) / align * align;
    return (long long)((uintptr_t)t->data - start);
}

static int index_of(const struct wsp_ggml_cgraph * g, const struct wsp_ggml_tensor * t) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i] == t) {
            return i;
        }
    }
    for (int i = 0; i < g->n_leafs; i++) {
        if (g->leafs[i] == t) {
            return 1000 + i;
        }
    }
    return t == NULL ? -1 : -2;
}

static void print_placement(const char * label, const struct wsp_ggml_cgraph * g, wsp_ggml_backend_buffer_t compute) {
    for (int i = 0; i < g->n_nodes; i++) {
        const struct wsp_ggml_tensor * t = g->nodes[i];
        printf("%s n%d %s %s off=%lld vs=%d\n", label, i, t->name, wsp_ggml_op_name(t->op), offset_in(t, compute),
               index_of(g, t->view_src));
    }
    for (int i = 0; i < g->n_leafs; i++) {
        const struct wsp_ggml_tensor * t = g->leafs[i];
        printf("%s l%d %s off=%lld\n", label, i, t->name, offset_in(t, compute));
    }
}

static void print_results(const char * label, const struct wsp_ggml_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const struct wsp_ggml_tensor * t = g->nodes[i];
        size_t n = wsp_ggml_nbytes(t);
        void * buf = malloc(n > 0 ? n : 1);
        CHECK(buf != NULL);
        wsp_ggml_backend_tensor_get(t, buf, 0, n);
        printf("%s n%d %016" PRIx64 "\n", label, i, fnv1a64(buf, n));
        free(buf);
    }
}

int main(void) {
    wsp_ggml_backend_t cpu = su_cpu_backend();
    for (uint64_t seed = 1; seed <= N_SEEDS; seed++) {
        struct lcg r = lcg_new(seed * 7919);
        struct weights W;
        make_weights(&W, cpu, &r);
        wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(&cpu, 1);

        struct wsp_ggml_context * ctx;
        struct wsp_ggml_tensor * x;
        struct wsp_ggml_cgraph * g = build(&ctx, &W, seed, &x);
        // (as whisper does: the inputs allocated before the measure too)
        wsp_ggml_tallocr_alloc(wsp_ggml_backend_sched_get_tallocr(sched, cpu), x);
        wsp_ggml_backend_sched_init_measure(sched, g);
        wsp_ggml_backend_buffer_t compute = wsp_ggml_backend_sched_get_buffer(sched, cpu);
        printf("seed %" PRIu64 " nodes %d leafs %d\n", seed, g->n_nodes, g->n_leafs);
        // (the original's measure buffer comes from a malloc that may not
        // be aligned: its start offset counts into the size)
        printf("~le measured %zu\n", wsp_ggml_backend_buffer_get_size(compute));
        wsp_ggml_free(ctx);

        for (int pass = 0; pass < 2; pass++) {
            g = build(&ctx, &W, seed, &x);
            // the caller's input, placed first in the compute buffer
            wsp_ggml_tallocr_alloc(wsp_ggml_backend_sched_get_tallocr(sched, cpu), x);
            su_fill(x, &r, 1.0f);
            if (getenv("PLACEMENT_DUMP") != NULL) {
                for (int i = 0; i < g->n_nodes; i++) {
                    const struct wsp_ggml_tensor * t = g->nodes[i];
                    fprintf(stderr, "%s %s [%lld %lld] <- %s %s\n", t->name, wsp_ggml_op_name(t->op), (long long)t->ne[0],
                            (long long)t->ne[1], t->src[0] ? t->src[0]->name : "-", t->src[1] ? t->src[1]->name : "-");
                }
            }
            wsp_ggml_backend_sched_graph_compute(sched, g);
            char label[32];
            snprintf(label, sizeof(label), "s%" PRIu64 ".%d", seed, pass);
            print_placement(label, g, compute);
            print_results(label, g);
            if (pass == 1) {
                // the same graph again: its tensors keep their memory
                wsp_ggml_backend_sched_graph_compute(sched, g);
                snprintf(label, sizeof(label), "s%" PRIu64 ".again", seed);
                print_placement(label, g, compute);
                print_results(label, g);
            }
            wsp_ggml_free(ctx);
        }
        wsp_ggml_backend_sched_free(sched);
        su_store_free(&W.store);
        wsp_ggml_free(W.ctx);
    }
    wsp_ggml_backend_free(cpu);
    printf("done\n");
    return 0;
}
