// Randomized differential test of the scheduler (wsp_ggml_backend_sched_*).
//
//   fuzz_sched SEED [--mode sched|ref] [--nodes-max N]
//
// Everything the program does follows from SEED (and --nodes-max): a plan of
// backends (the CPU backend and 1 to 3 test backends, with or without
// cpy_tensor_from/to, buffer hooks, a supports_op that rejects some ops),
// leafs (weights, inputs, slabs, caches, scalars, row indices) in every kind
// of buffer, one or two random graphs, and a sequence of at least 8 computes
// on the same memory with mutations between them (input data, a view's
// offset or shape, another op/source/type/shape at the same addresses, a
// leaf moved to another buffer, a node added or removed, two graphs
// alternating, init_measure again, set_node_backend). A quarter of the
// seeds (chosen from the seed without a random draw, so that the other
// seeds' programs stay as they were) build every graph, the measured ones
// too, in a context wsp_ggml_init allocates itself and free it after its
// compute, as simple clients do: the next graph lands where malloc puts
// it, most often at the freed one's addresses with other contents.
//
// --mode sched (default): the plan runs through the scheduler.
// --mode ref: the same plan, every buffer on the CPU backend, each graph
//   allocated with ggml-alloc and computed with wsp_ggml_backend_graph_compute
//   on the CPU backend alone (no scheduler). Test backends compute with
//   ggml.c's CPU kernels on one thread, so a correct scheduler gives the same
//   bytes.
//
// Output (see common.h): one line per output tensor per compute
//   "c<k> <name> <type> <ne0>x<ne1>x<ne2>x<ne3> <fnv1a-64>",
// the final bytes of every persistent leaf ("final ..."), then "done".
// Lines starting with "~ " are informational; "~ case a" or "~ case b" says
// whether the program makes set_node_backend calls or has a backend that
// rejects ops (b), in which case the scheduler's assignments may
// legitimately differ from the original's. "~ trace c<k> b<i>:<n>:<hash> ..."
// (sched mode) lists the graph_compute calls of compute k in order: backend
// index, node count and a hash of the nodes' names and ops (sched_util.h).
//
// All random draws happen identically in both modes: mode-specific code
// never draws.
#include "sched_util.h"

#include <math.h>

#define MAXB 4
#define MAX_LEAFS 64
#define SLAB_N 8192
#define CACHE_N 2048

// ---------------------------------------------------------------------------
// random

static struct lcg g_rng;

static uint32_t rnd(void) {
    return lcg_u32(&g_rng);
}

static int rndn(int n) {
    return n <= 1 ? 0 : (int)(rnd() % (uint32_t)n);
}

static bool chance(int percent) {
    return rndn(100) < percent;
}

// ---------------------------------------------------------------------------
// plan

enum role { R_W, R_X, R_SLAB, R_CACHE, R_SCALAR, R_IDX };
static const char * role_name[] = { "w", "x", "slab", "cache", "scalar", "idx" };

// K_STORE: buffer of a scheduler backend; K_PTR: wsp_ggml_backend_cpu_buffer_from_ptr(cpu);
// K_HOST: plain host memory, no buffer; K_PTRNULL: cpu_buffer_from_ptr(NULL);
// K_FOREIGN: buffer of a backend that is not in the scheduler;
// K_TALLOC: created in each graph's context and allocated through
// wsp_ggml_backend_sched_get_tallocr (data set before each compute).
enum kind { K_STORE, K_PTR, K_HOST, K_PTRNULL, K_FOREIGN, K_TALLOC };
static const char * kind_name[] = { "store", "ptr", "host", "ptrnull", "foreign", "talloc" };

struct leaf {
    enum role role;
    enum kind kind;
    int backend; // K_STORE, K_TALLOC
    enum wsp_ggml_type type;
    int n_dims;
    int64_t ne[4];
    size_t nbytes;
    size_t slot;       // offset in every store
    uint64_t data_seed;
    float bound;       // upper bound of |values| (tracked through in-place writes)
    void * shadow;     // intended content (persistent leafs)
    struct wsp_ggml_tensor * t; // persistent tensor (NULL for K_TALLOC)
};

enum opk {
    O_ADD, O_MUL, O_MUL_MAT, O_SCALE, O_GELU, O_SILU, O_NORM, O_SOFT_MAX, O_CPY, O_CONT,
    O_PERMUTE, O_TRANSPOSE, O_RESHAPE, O_VIEW, O_GET_ROWS, O_N
};
static const int op_weight[O_N] = { 10, 8, 12, 5, 4, 4, 4, 4, 6, 4, 5, 4, 5, 9, 4 };

struct dec {
    uint8_t op;
    uint32_t r[8];
};

struct desc {
    struct dec * d;
    int n, cap;
    int version; // bumped by every mutation of the description
};

struct bplan {
    bool is_cpu;
    char name[16];
    size_t align;
    bool from, to, hooks;
    enum test_backend_shape shape; // slot pattern: full, or a real backend's
    int rej[4];
    int n_rej;
};

static struct {
    uint64_t seed;
    int nodes_max;
    int nb;
    struct bplan b[MAXB];
    int cpu_pos;
    bool any_reject;
    bool assign;           // set_node_backend before computes
    bool assign_before_measure;
    bool exotic;           // host / ptrnull / foreign leafs
    bool pad;              // slack allocated through the measure allocators
    bool measure_inputs;   // talloc inputs allocated during the measure too
    bool talloc_at_create; // talloc inputs allocated as soon as created (else after the build)
    bool small_measure;    // measure graph with a smaller hash table than the others
    bool measure_same_block;
    int n_computes;
    int n_graphs;
    bool alternate;
    int64_t dims[4];
    int nd;
    struct leaf leafs[MAX_LEAFS];
    int n_leafs;
    struct desc descs[2];
    int dec_cap;
    size_t store_cap;
} P;

static int64_t D(uint32_t r) {
    return P.dims[r % (uint32_t)P.nd];
}

static const int rejectable[] = {
    WSP_GGML_OP_ADD, WSP_GGML_OP_MUL, WSP_GGML_OP_MUL_MAT, WSP_GGML_OP_SCALE, WSP_GGML_OP_UNARY,
    WSP_GGML_OP_NORM, WSP_GGML_OP_SOFT_MAX, WSP_GGML_OP_CPY, WSP_GGML_OP_CONT, WSP_GGML_OP_GET_ROWS,
};

static bool rejects(int b, enum wsp_ggml_op op) {
    for (int i = 0; i < P.b[b].n_rej; i++) {
        if (P.b[b].rej[i] == (int)op) {
            return true;
        }
    }
    return false;
}

static void gen_dec(struct dec * d) {
    int tot = 0;
    for (int i = 0; i < O_N; i++) {
        tot += op_weight[i];
    }
    int x = rndn(tot);
    int o = 0;
    while (x >= op_weight[o]) {
        x -= op_weight[o];
        o++;
    }
    d->op = (uint8_t)o;
    for (int i = 0; i < 8; i++) {
        d->r[i] = rnd();
    }
}

static void leaf_fill_shadow(struct leaf * L) {
    struct lcg r = lcg_new(L->data_seed);
    int64_t n = L->ne[0] * L->ne[1] * L->ne[2] * L->ne[3];
    if (L->role == R_SCALAR) {
        static const float vals[] = { 0.5f, -0.5f, 0.25f, 1.0f, -1.0f, 0.125f, 0.75f, -0.0625f };
        float v = vals[L->data_seed % 8];
        memcpy(L->shadow, &v, sizeof(v));
        return;
    }
    if (L->type == WSP_GGML_TYPE_I32) {
        int32_t * p = (int32_t *)L->shadow;
        for (int64_t i = 0; i < n; i++) {
            p[i] = (int32_t)(lcg_u32(&r) % 1000);
        }
        return;
    }
    float * f = (float *)malloc(sizeof(float) * (size_t)n);
    CHECK(f != NULL);
    lcg_fill_f32(&r, f, (size_t)n, 1.0f);
    if (L->type == WSP_GGML_TYPE_F32) {
        memcpy(L->shadow, f, sizeof(float) * (size_t)n);
    } else {
        wsp_ggml_fp32_to_fp16_row(f, (wsp_ggml_fp16_t *)L->shadow, (int)n);
    }
    free(f);
}

static enum kind draw_kind(enum role role, int * backend) {
    *backend = rndn(P.nb);
    if (role == R_X && chance(35)) {
        return K_TALLOC;
    }
    if (P.exotic && chance(15)) {
        // (no K_PTRNULL: ggml-alloc itself asserts on views of tensors in
        // a buffer without backend)
        return chance(50) ? K_HOST : K_FOREIGN;
    }
    return chance(12) ? K_PTR : K_STORE;
}

static int add_leaf(enum role role, enum wsp_ggml_type type, int n_dims, int64_t ne0, int64_t ne1, int64_t ne2) {
    CHECK(P.n_leafs < MAX_LEAFS);
    struct leaf * L = &P.leafs[P.n_leafs];
    memset(L, 0, sizeof(*L));
    L->role = role;
    L->type = type;
    L->n_dims = n_dims;
    L->ne[0] = ne0;
    L->ne[1] = ne1;
    L->ne[2] = ne2;
    L->ne[3] = 1;
    L->kind = draw_kind(role, &L->backend);
    L->data_seed = rnd();
    L->bound = 1.0f;
    L->nbytes = (size_t)(ne0 * ne1 * ne2) * wsp_ggml_type_size(type);
    L->shadow = calloc(1, L->nbytes);
    CHECK(L->shadow != NULL);
    leaf_fill_shadow(L);
    return P.n_leafs++;
}

static void plan_program(uint64_t seed, int nodes_max) {
    memset(&P, 0, sizeof(P));
    P.seed = seed;
    P.nodes_max = nodes_max;
    g_rng = lcg_new(seed ^ 0x9e3779b97f4a7c15ULL);

    P.nb = 2 + rndn(3);
    P.cpu_pos = rndn(P.nb);
    int ti = 0;
    // each test backend's slot pattern, from a generator of its own so that
    // a seed's other draws are what they were before patterns existed: half
    // full, a quarter CUDA's (no supports_op: it rejects nothing), a
    // quarter Metal's
    struct lcg shapes = lcg_new(seed ^ 0x5bd1e9955bd1e995ULL);
    for (int b = 0; b < P.nb; b++) {
        struct bplan * B = &P.b[b];
        B->is_cpu = b == P.cpu_pos;
        static const size_t aligns[] = { 8, 16, 32, 64, 128, 256 };
        B->align = aligns[rndn(6)];
        B->from = chance(50);
        B->to = chance(50);
        B->hooks = chance(50);
        B->n_rej = 0;
        uint32_t sh = lcg_u32(&shapes) % 4;
        B->shape = sh < 2 ? TB_SHAPE_FULL : sh == 2 ? TB_SHAPE_CUDA : TB_SHAPE_METAL;
        if (!B->is_cpu && chance(20)) {
            int n = 1 + rndn(3);
            for (int i = 0; i < n; i++) {
                int op = rejectable[rndn((int)(sizeof(rejectable) / sizeof(rejectable[0])))];
                if (!rejects(b, (enum wsp_ggml_op)op)) {
                    B->rej[B->n_rej++] = op;
                }
            }
            if (B->shape == TB_SHAPE_CUDA) {
                B->n_rej = 0; // drawn all the same, to keep the seed's other draws
            }
        }
        if (B->is_cpu) {
            snprintf(B->name, sizeof(B->name), "CPU");
        } else {
            snprintf(B->name, sizeof(B->name), "T%d", ti++);
        }
        if (B->n_rej > 0) {
            P.any_reject = true;
        }
    }
    P.assign = chance(20);
    P.assign_before_measure = chance(4);
    P.exotic = chance(10);
    P.pad = chance(90);
    // (measured with assignments the compute graphs do not have: only with slack)
    P.assign_before_measure = P.assign_before_measure && P.pad;
    P.measure_inputs = chance(95);
    P.talloc_at_create = chance(50);
    P.small_measure = chance(4);
    P.measure_same_block = chance(50);
    P.n_computes = 8 + rndn(17);
    P.n_graphs = chance(40) ? 2 : 1;
    P.alternate = P.n_graphs == 2 && chance(70);

    static const int64_t dimv[] = { 1, 2, 3, 4, 5, 7, 8, 12, 16, 24, 32 };
    P.nd = 3 + rndn(2);
    for (int i = 0; i < P.nd; i++) {
        P.dims[i] = dimv[rndn(11)];
    }

    // leafs
    int n_w = 2 + rndn(8);
    for (int i = 0; i < n_w; i++) {
        bool three = chance(30);
        add_leaf(R_W, chance(40) ? WSP_GGML_TYPE_F16 : WSP_GGML_TYPE_F32, three ? 3 : 2, D(rnd()), D(rnd()), three ? 1 + rndn(3) : 1);
    }
    int n_x = 1 + rndn(4);
    for (int i = 0; i < n_x; i++) {
        bool three = chance(30);
        add_leaf(R_X, WSP_GGML_TYPE_F32, three ? 3 : 2, D(rnd()), D(rnd()), three ? 1 + rndn(3) : 1);
    }
    add_leaf(R_SLAB, WSP_GGML_TYPE_F32, 1, SLAB_N, 1, 1);
    add_leaf(R_SLAB, WSP_GGML_TYPE_F16, 1, SLAB_N, 1, 1);
    int n_c = rndn(3);
    for (int i = 0; i < n_c; i++) {
        add_leaf(R_CACHE, chance(50) ? WSP_GGML_TYPE_F16 : WSP_GGML_TYPE_F32, 1, CACHE_N, 1, 1);
    }
    for (int i = 0; i < 4; i++) {
        add_leaf(R_SCALAR, WSP_GGML_TYPE_F32, 1, 1, 1, 1);
    }
    int n_i = rndn(3);
    for (int i = 0; i < n_i; i++) {
        add_leaf(R_IDX, WSP_GGML_TYPE_I32, 1, 1 + rndn(8), 1, 1);
    }
    size_t off = 0;
    for (int i = 0; i < P.n_leafs; i++) {
        P.leafs[i].slot = off;
        off += (P.leafs[i].nbytes + 511) & ~(size_t)511;
    }
    P.store_cap = off + 512;

    // graphs
    int n0 = chance(50) ? 1 + rndn(nodes_max < 40 ? nodes_max : 40) : 1 + rndn(nodes_max);
    P.dec_cap = nodes_max + P.n_computes * 4 + 8;
    for (int g = 0; g < 2; g++) {
        struct desc * ds = &P.descs[g];
        ds->cap = P.dec_cap;
        ds->d = (struct dec *)calloc((size_t)ds->cap, sizeof(struct dec));
        CHECK(ds->d != NULL);
        ds->n = g == 0 ? n0 : 1 + rndn(n0 + 4);
        if (ds->n > ds->cap) {
            ds->n = ds->cap;
        }
        for (int i = 0; i < ds->n; i++) {
            gen_dec(&ds->d[i]);
        }
    }
}

static bool is_case_b(void) {
    return P.any_reject || P.assign || P.assign_before_measure;
}

static void print_plan(void) {
    printf("~ plan seed=%" PRIu64 " nodes_max=%d backends=", P.seed, P.nodes_max);
    for (int b = 0; b < P.nb; b++) {
        const struct bplan * B = &P.b[b];
        printf("%s%s", b ? "," : "", B->name);
        if (!B->is_cpu) {
            printf("(a%zu%s%s%s%s", B->align, B->from ? ",from" : "", B->to ? ",to" : "", B->hooks ? ",hooks" : "",
                   B->shape == TB_SHAPE_CUDA ? ",cuda" : B->shape == TB_SHAPE_METAL ? ",metal" : "");
            for (int i = 0; i < B->n_rej; i++) {
                printf(",rej:%s", wsp_ggml_op_name((enum wsp_ggml_op)B->rej[i]));
            }
            printf(")");
        }
    }
    printf(" computes=%d graphs=%d%s nodes=%d,%d", P.n_computes, P.n_graphs, P.alternate ? "(alt)" : "", P.descs[0].n,
           P.n_graphs > 1 ? P.descs[1].n : 0);
    printf(" flags=%s%s%s%s%s%s%s%s\n", P.assign ? "assign," : "", P.assign_before_measure ? "assign_before_measure," : "",
           P.exotic ? "exotic," : "", P.pad ? "pad," : "", P.measure_inputs ? "measure_inputs," : "",
           P.talloc_at_create ? "talloc_at_create," : "", P.small_measure ? "small_measure," : "",
           P.measure_same_block ? "measure_same_block," : "");
    printf("~ leafs");
    for (int i = 0; i < P.n_leafs; i++) {
        const struct leaf * L = &P.leafs[i];
        printf(" L%d:%s:%s:%s", i, role_name[L->role], wsp_ggml_type_name(L->type), kind_name[L->kind]);
        if (L->kind == K_STORE || L->kind == K_TALLOC) {
            printf("@%s", P.b[L->backend].name);
        }
    }
    printf("\n~ case %s\n", is_case_b() ? "b" : "a");
}

// ---------------------------------------------------------------------------
// runtime (mode specific; never draws random numbers)

static bool g_ref;
static wsp_ggml_backend_t g_bk[MAXB]; // sched mode: the scheduler's backends
static wsp_ggml_backend_t g_cpu;
static wsp_ggml_backend_t g_foreign;
static wsp_ggml_backend_sched_t g_sched;
static struct wsp_ggml_context * g_pctx; // persistent leafs

enum { SID_PTR = MAXB, SID_PTRNULL, SID_FOREIGN, SID_HOST, N_SID };
struct store {
    wsp_ggml_backend_buffer_t buf;
    char * base;
    void * mem;
};
static struct store g_st[N_SID];

static int store_of(const struct leaf * L) {
    switch (L->kind) {
        case K_STORE: return L->backend;
        case K_PTR: return SID_PTR;
        case K_PTRNULL: return SID_PTRNULL;
        case K_FOREIGN: return SID_FOREIGN;
        case K_HOST: return SID_HOST;
        default: CHECK(!"store_of: talloc leaf"); return -1;
    }
}

static char * align64(void * p) {
    return (char *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

static void setup_backends(void) {
    g_cpu = su_cpu_backend();
    if (g_ref) {
        return;
    }
    for (int b = 0; b < P.nb; b++) {
        const struct bplan * B = &P.b[b];
        if (B->is_cpu) {
            g_bk[b] = g_cpu;
            continue;
        }
        struct test_backend_options o;
        memset(&o, 0, sizeof(o));
        o.name = B->name;
        o.alignment = B->align;
        o.has_cpy_tensor_from = B->from;
        o.has_cpy_tensor_to = B->to;
        o.has_buffer_hooks = B->hooks;
        o.rejected_ops = B->n_rej > 0 ? B->rej : NULL;
        o.n_rejected_ops = B->n_rej;
        o.shape = B->shape;
        g_bk[b] = test_backend_new(&o);
        CHECK(g_bk[b] != NULL);
    }
    // what each backend computes, compared by fuzz.rs (see compute)
    for (int b = 0; b < P.nb; b++) {
        su_trace_backend(g_bk[b], b);
    }
    if (P.exotic) {
        g_foreign = su_test_backend("FOREIGN", 32, true, true, false);
    }
}

static void setup_stores(void) {
    size_t cap = P.store_cap;
    for (int s = 0; s < N_SID; s++) {
        struct store * S = &g_st[s];
        memset(S, 0, sizeof(*S));
        if (s < MAXB) {
            if (s >= P.nb) {
                continue;
            }
            S->buf = wsp_ggml_backend_alloc_buffer(g_ref ? g_cpu : g_bk[s], cap);
        } else if (s == SID_FOREIGN) {
            S->buf = wsp_ggml_backend_alloc_buffer(g_ref || g_foreign == NULL ? g_cpu : g_foreign, cap);
        } else {
            S->mem = malloc(cap + 64);
            CHECK(S->mem != NULL);
            memset(S->mem, 0x5a, cap + 64);
            S->base = align64(S->mem);
            if (s == SID_PTR) {
                S->buf = wsp_ggml_backend_cpu_buffer_from_ptr(g_cpu, S->base, cap);
            } else if (s == SID_PTRNULL) {
                S->buf = wsp_ggml_backend_cpu_buffer_from_ptr(NULL, S->base, cap);
            }
            continue;
        }
        CHECK(S->buf != NULL);
        S->base = (char *)wsp_ggml_backend_buffer_get_base(S->buf);
    }
}

// bytes of a tensor wherever it lives (memcpy where no backend can be asked)
static void read_tensor(const struct wsp_ggml_tensor * t, void * dst, size_t n) {
    if (t->buffer == NULL || wsp_ggml_get_backend(t) == NULL) {
        memcpy(dst, t->data, n);
    } else {
        wsp_ggml_backend_tensor_get(t, dst, 0, n);
    }
}

static void write_tensor(struct wsp_ggml_tensor * t, const void * src, size_t n) {
    if (t->buffer == NULL || wsp_ggml_get_backend(t) == NULL) {
        memcpy(t->data, src, n);
    } else {
        wsp_ggml_backend_tensor_set(t, src, 0, n);
    }
}

static void place_leaf(int li) {
    struct leaf * L = &P.leafs[li];
    if (L->kind == K_TALLOC) {
        return;
    }
    struct store * S = &g_st[store_of(L)];
    struct wsp_ggml_tensor * t = L->t;
    t->data = S->base + L->slot;
    t->buffer = S->buf;
    if (S->buf != NULL) {
        wsp_ggml_backend_buffer_init_tensor(S->buf, t);
    }
    write_tensor(t, L->shadow, L->nbytes);
}

static void setup_leafs(void) {
    g_pctx = make_ctx((size_t)P.n_leafs + 4, false, true, 0);
    for (int i = 0; i < P.n_leafs; i++) {
        struct leaf * L = &P.leafs[i];
        if (L->kind == K_TALLOC) {
            continue;
        }
        L->t = wsp_ggml_new_tensor(g_pctx, L->type, L->n_dims, L->ne);
        wsp_ggml_format_name(L->t, "L%d", i);
        place_leaf(i);
    }
}

// ---------------------------------------------------------------------------
// graph builder: replays a description; every choice comes from the
// decision's random words, and a choice that would make an invalid graph is
// replaced by a valid one, so any mutation of a description still builds.

struct ent {
    struct wsp_ggml_tensor * t;
    float bound;
    int owner; // leaf whose memory this tensor is (or views), -1: compute memory
    bool node;
    bool hidden; // never picked as a source (the destination of a cpy)
    int used;
};

enum input_mode { IN_NONE, IN_MEASURE, IN_COMPUTE };

struct bstate {
    struct wsp_ggml_context * ctx;
    struct ent * pool;
    int n, cap;
    int n_names;
    size_t bytes;
    bool track; // update the leafs' tracked bounds (builds that are computed)
    enum input_mode in_mode;
    struct wsp_ggml_tensor * tin[MAX_LEAFS];
    int tin_leaf[MAX_LEAFS];
    int n_tin;
    int leaf_ent[MAX_LEAFS];
    int64_t idx_m[MAX_LEAFS];
    struct wsp_ggml_tensor ** outs;
    int n_outs;
    struct wsp_ggml_tensor ** cnodes;
    int n_cnodes;
    struct wsp_ggml_cgraph * g;
    int cur;          // position of the decision being applied
    int * dec_ent;    // [position] last pool entry a decision made, -1: none
    int n_leaf_ents;  // pool entries [0, n_leaf_ents) are the leafs
    int count;        // tensors in the graph, at most
    // the leafs' tracked bounds when the build started: decisions read
    // these, so that a build that tracks (a compute) and one that does not
    // (a measure) of the same description make the same graph
    float lb[MAX_LEAFS];
};

static int64_t nel(const struct wsp_ggml_tensor * t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static bool rows_contig(const struct wsp_ggml_tensor * t) {
    return t->nb[0] == wsp_ggml_type_size(t->type);
}

static bool is_float(const struct wsp_ggml_tensor * t) {
    return t->type == WSP_GGML_TYPE_F32 || t->type == WSP_GGML_TYPE_F16;
}

static int push(struct bstate * S, struct wsp_ggml_tensor * t, float bound, int owner, bool node) {
    CHECK(S->n < S->cap);
    if (node || owner < 0) {
        wsp_ggml_format_name(t, "t%d", S->n_names++);
    }
    struct ent * e = &S->pool[S->n];
    e->t = t;
    e->bound = bound;
    e->owner = owner;
    e->node = node;
    e->hidden = false;
    e->used = 0;
    if (t->view_src == NULL) {
        S->bytes += ((wsp_ggml_nbytes(t) + 63) & ~(size_t)63) + 64;
    }
    return S->n++;
}

typedef bool (*pred_fn)(const struct ent * e, const struct wsp_ggml_tensor * a);

// Pick a pool entry satisfying pred. Picks are local, so that a mutation of
// one decision changes few others: a quarter of them start at a leaf (leafs
// come first in the pool and never move), the others at the result of one
// of the 8 decisions before the current one; from there the scan goes
// backwards (then wraps to the newest entries).
static int pick(struct bstate * S, uint32_t r, pred_fn pred, const struct wsp_ggml_tensor * a) {
    int n = S->n;
    if (n == 0) {
        return -1;
    }
    int start = -1;
    if ((r & 3) != 0) {
        int p = S->cur - 1 - (int)((r >> 2) % 8u);
        while (p >= 0 && S->dec_ent[p] < 0) {
            p--;
        }
        if (p >= 0) {
            start = S->dec_ent[p];
        }
    }
    if (start < 0) {
        start = (int)((r >> 2) % (uint32_t)(S->n_leaf_ents > 0 ? S->n_leaf_ents : n));
    }
    for (int k = 0; k < n; k++) {
        int i = ((start - k) % n + n) % n;
        if (!S->pool[i].hidden && pred(&S->pool[i], a)) {
            return i;
        }
    }
    return -1;
}

static bool p_f32rows(const struct ent * e, const struct wsp_ggml_tensor * a) {
    (void)a;
    return e->t->type == WSP_GGML_TYPE_F32 && rows_contig(e->t);
}

static bool p_f32contig(const struct ent * e, const struct wsp_ggml_tensor * a) {
    (void)a;
    return e->t->type == WSP_GGML_TYPE_F32 && wsp_ggml_is_contiguous(e->t);
}

static bool p_float(const struct ent * e, const struct wsp_ggml_tensor * a) {
    (void)a;
    return is_float(e->t);
}

static bool p_float_contig(const struct ent * e, const struct wsp_ggml_tensor * a) {
    (void)a;
    return is_float(e->t) && wsp_ggml_is_contiguous(e->t);
}

static bool p_small_cpy(const struct ent * e, const struct wsp_ggml_tensor * a) {
    (void)a;
    return is_float(e->t) && nel(e->t) <= CACHE_N;
}

static bool p_mm0(const struct ent * e, const struct wsp_ggml_tensor * a) {
    (void)a;
    return is_float(e->t) && rows_contig(e->t) && e->t->ne[1] <= 1024;
}

static bool p_mm1(const struct ent * e, const struct wsp_ggml_tensor * a) {
    const struct wsp_ggml_tensor * b = e->t;
    return b->type == WSP_GGML_TYPE_F32 && rows_contig(b) && b->ne[0] == a->ne[0] && b->ne[2] % a->ne[2] == 0 &&
           b->ne[3] % a->ne[3] == 0 && a->ne[1] * b->ne[1] * b->ne[2] * b->ne[3] <= 16384;
}

static bool p_rep(const struct ent * e, const struct wsp_ggml_tensor * a) {
    const struct wsp_ggml_tensor * b = e->t;
    return b->type == WSP_GGML_TYPE_F32 && b->ne[0] == a->ne[0] && a->ne[1] % b->ne[1] == 0 && a->ne[2] % b->ne[2] == 0 &&
           a->ne[3] % b->ne[3] == 0;
}

static bool p_rows_src(const struct ent * e, const struct wsp_ggml_tensor * a) {
    (void)a;
    const struct wsp_ggml_tensor * t = e->t;
    return is_float(t) && rows_contig(t) && t->ne[2] == 1 && t->ne[3] == 1;
}

static void use(struct bstate * S, int i) {
    S->pool[i].used++;
}

static void undo_use(struct bstate * S, int i) {
    S->pool[i].used--;
}

// A contiguous operand of the given shape: a view of a slab at an offset.
static int slab_operand(struct bstate * S, enum wsp_ggml_type type, const int64_t ne[4], uint32_t r) {
    int64_t n = ne[0] * ne[1] * ne[2] * ne[3];
    if (n > SLAB_N) {
        return -1;
    }
    int li = -1;
    for (int i = 0; i < P.n_leafs; i++) {
        if (P.leafs[i].role == R_SLAB && P.leafs[i].type == type) {
            li = i;
            break;
        }
    }
    CHECK(li >= 0);
    int si = S->leaf_ent[li];
    struct wsp_ggml_tensor * slab = S->pool[si].t;
    size_t ts = wsp_ggml_type_size(type);
    size_t off = (size_t)(r % (uint32_t)(SLAB_N - n + 1)) * ts;
    struct wsp_ggml_tensor * v = wsp_ggml_view_4d(S->ctx, slab, ne[0], ne[1], ne[2], ne[3], ne[0] * ts, ne[0] * ne[1] * ts,
                                                  ne[0] * ne[1] * ne[2] * ts, off);
    use(S, si);
    return push(S, v, S->pool[si].bound, li, true);
}

// May this node write into the memory of entry e (an in-place op)? Only
// into pre-allocated leaf memory (a compute node's memory would tie the
// in-place node to the backend that computes it), never into leafs whose
// backend rejects the op, never scalars or row indices.
static bool inplace_ok(const struct bstate * S, const struct ent * e, enum wsp_ggml_op op) {
    (void)S;
    if (e->owner < 0 || e->t->type != WSP_GGML_TYPE_F32) {
        return false;
    }
    const struct leaf * L = &P.leafs[e->owner];
    if (L->role == R_SCALAR || L->role == R_IDX) {
        return false;
    }
    if (L->kind != K_STORE && L->kind != K_PTR && L->kind != K_TALLOC) {
        return false;
    }
    if ((L->kind == K_STORE || L->kind == K_TALLOC) && rejects(L->backend, op)) {
        return false;
    }
    return true;
}

// May this node write into the memory of entry e, a node's result (not a
// leaf's memory)? Its memory is allocated by the scheduler, so the whole
// in-place chain goes where every op of it is supported.
static bool node_inplace_ok(const struct ent * e) {
    return e->owner < 0 && !e->hidden && e->t->type == WSP_GGML_TYPE_F32 && e->t->op != WSP_GGML_OP_NONE;
}

static void leaf_written(struct bstate * S, int owner, float bound) {
    if (owner >= 0 && S->track && P.leafs[owner].bound < bound) {
        P.leafs[owner].bound = bound; // (read by the next builds)
    }
}

// Result of a node: normalized when its values could grow too large.
static void add_node(struct bstate * S, struct wsp_ggml_tensor * t, float bound, int owner) {
    int i = push(S, t, bound, owner, true);
    if (bound > 64.0f && owner < 0 && t->type == WSP_GGML_TYPE_F32 && rows_contig(t)) {
        use(S, i);
        S->pool[i].hidden = true; // only its normalized version is used
        struct wsp_ggml_tensor * nrm = wsp_ggml_norm(S->ctx, t, 1e-5f);
        push(S, nrm, sqrtf((float)t->ne[0]) + 1.0f, -1, true);
    }
}

static float leaf_read_bound(void) {
    return 16.0f;
}

static void apply_dec(struct bstate * S, const struct dec * d) {
    const uint32_t * r = d->r;
    struct wsp_ggml_context * ctx = S->ctx;
    bool want_inplace = (r[7] % 4) == 0;
    int o = d->op;
    switch (o) {
        case O_ADD:
        case O_MUL: {
            int ia = pick(S, r[0], p_f32rows, NULL);
            if (ia < 0) {
                break;
            }
            struct wsp_ggml_tensor * a = S->pool[ia].t;
            int ib = (r[2] % 5 == 0) ? -1 : pick(S, r[1], p_rep, a);
            if (ib < 0) {
                int64_t ne[4] = { a->ne[0], (r[3] & 1) ? 1 : a->ne[1], (r[3] & 2) ? 1 : a->ne[2], (r[3] & 4) ? 1 : a->ne[3] };
                ib = slab_operand(S, WSP_GGML_TYPE_F32, ne, r[4]);
                if (ib < 0) {
                    break;
                }
            }
            struct wsp_ggml_tensor * b = S->pool[ib].t;
            float ba = S->pool[ia].bound, bb = S->pool[ib].bound;
            enum wsp_ggml_op gop = o == O_ADD ? WSP_GGML_OP_ADD : WSP_GGML_OP_MUL;
            bool inplace = want_inplace && inplace_ok(S, &S->pool[ia], gop) && bb <= 1.0f && S->lb[S->pool[ia].owner] < 8.0f;
            use(S, ia);
            use(S, ib);
            struct wsp_ggml_tensor * t;
            if (o == O_ADD) {
                t = inplace ? wsp_ggml_add_inplace(ctx, a, b) : wsp_ggml_add(ctx, a, b);
            } else {
                t = inplace ? wsp_ggml_mul_inplace(ctx, a, b) : wsp_ggml_mul(ctx, a, b);
            }
            float bound = o == O_ADD ? ba + bb : ba * bb;
            if (inplace) {
                int owner = S->pool[ia].owner;
                float lb = S->lb[owner] + (o == O_ADD ? bb : 0.0f);
                leaf_written(S, owner, lb);
                push(S, t, leaf_read_bound(), owner, true);
            } else {
                add_node(S, t, bound, -1);
            }
            break;
        }
        case O_MUL_MAT: {
            int ia = pick(S, r[0], p_mm0, NULL);
            if (ia < 0) {
                break;
            }
            struct wsp_ggml_tensor * a = S->pool[ia].t;
            int ib = (r[2] % 4 == 0) ? -1 : pick(S, r[1], p_mm1, a);
            if (ib < 0) {
                int64_t n1 = D(r[3]);
                int64_t ne[4] = { a->ne[0], n1, a->ne[2] * (int64_t)((r[5] % 3 == 0) ? 2 : 1), a->ne[3] };
                if (a->ne[1] * ne[1] * ne[2] * ne[3] > 16384) {
                    break;
                }
                ib = slab_operand(S, WSP_GGML_TYPE_F32, ne, r[4]);
                if (ib < 0) {
                    break;
                }
            }
            struct wsp_ggml_tensor * b = S->pool[ib].t;
            use(S, ia);
            use(S, ib);
            struct wsp_ggml_tensor * t = wsp_ggml_mul_mat(ctx, a, b);
            add_node(S, t, (float)a->ne[0] * S->pool[ia].bound * S->pool[ib].bound, -1);
            break;
        }
        case O_SCALE: {
            int ia = pick(S, r[0], p_f32contig, NULL);
            if (ia < 0) {
                break;
            }
            int n_sc = 0, sc[8];
            for (int i = 0; i < P.n_leafs && n_sc < 8; i++) {
                if (P.leafs[i].role == R_SCALAR) {
                    sc[n_sc++] = i;
                }
            }
            int si = S->leaf_ent[sc[r[1] % (uint32_t)n_sc]];
            bool inplace = want_inplace && inplace_ok(S, &S->pool[ia], WSP_GGML_OP_SCALE);
            struct wsp_ggml_tensor * a = S->pool[ia].t;
            use(S, ia);
            use(S, si);
            if (inplace) {
                push(S, wsp_ggml_scale_inplace(ctx, a, S->pool[si].t), leaf_read_bound(), S->pool[ia].owner, true);
            } else {
                add_node(S, wsp_ggml_scale(ctx, a, S->pool[si].t), S->pool[ia].bound, -1);
            }
            break;
        }
        case O_GELU:
        case O_SILU:
        case O_SOFT_MAX: {
            int ia = pick(S, r[0], p_f32contig, NULL);
            if (ia < 0) {
                break;
            }
            enum wsp_ggml_op gop = o == O_SOFT_MAX ? WSP_GGML_OP_SOFT_MAX : WSP_GGML_OP_UNARY;
            bool inplace = want_inplace && inplace_ok(S, &S->pool[ia], gop);
            // (in place on a node's result: |f(v)| <= |v| for these, so the
            // bounds of the node's other readers hold)
            bool on_node = !inplace && want_inplace && (r[6] & 1) && node_inplace_ok(&S->pool[ia]);
            struct wsp_ggml_tensor * a = S->pool[ia].t;
            use(S, ia);
            struct wsp_ggml_tensor * t;
            if (on_node) {
                t = o == O_GELU ? wsp_ggml_gelu_inplace(ctx, a) : o == O_SILU ? wsp_ggml_silu_inplace(ctx, a) : wsp_ggml_soft_max_inplace(ctx, a);
                add_node(S, t, o == O_SOFT_MAX ? 1.0f : S->pool[ia].bound + 0.5f, -1);
                break;
            }
            if (o == O_GELU) {
                t = inplace ? wsp_ggml_gelu_inplace(ctx, a) : wsp_ggml_gelu(ctx, a);
            } else if (o == O_SILU) {
                t = inplace ? wsp_ggml_silu_inplace(ctx, a) : wsp_ggml_silu(ctx, a);
            } else {
                t = inplace ? wsp_ggml_soft_max_inplace(ctx, a) : wsp_ggml_soft_max(ctx, a);
            }
            float bound = o == O_SOFT_MAX ? 1.0f : S->pool[ia].bound + 0.5f;
            if (inplace) {
                push(S, t, leaf_read_bound(), S->pool[ia].owner, true);
            } else {
                add_node(S, t, bound, -1);
            }
            break;
        }
        case O_NORM: {
            int ia = pick(S, r[0], p_f32rows, NULL);
            if (ia < 0) {
                break;
            }
            struct wsp_ggml_tensor * a = S->pool[ia].t;
            bool inplace = want_inplace && a->ne[0] <= 64 && inplace_ok(S, &S->pool[ia], WSP_GGML_OP_NORM);
            use(S, ia);
            float bound = sqrtf((float)a->ne[0]) + 1.0f;
            if (inplace) {
                leaf_written(S, S->pool[ia].owner, bound);
                push(S, wsp_ggml_norm_inplace(ctx, a, 1e-5f), leaf_read_bound(), S->pool[ia].owner, true);
            } else {
                add_node(S, wsp_ggml_norm(ctx, a, 1e-5f), bound, -1);
            }
            break;
        }
        case O_CPY: {
            int ia = pick(S, r[0], p_small_cpy, NULL);
            if (ia < 0) {
                break;
            }
            struct wsp_ggml_tensor * a = S->pool[ia].t;
            float ba = S->pool[ia].bound;
            int64_t n = nel(a);
            // into a view of a leaf (a cache update), or into a new tensor
            int target = -1;
            if (r[1] % 3 != 0 && ba <= 16.0f) {
                int start = (int)(r[2] % (uint32_t)P.n_leafs);
                for (int k = 0; k < P.n_leafs; k++) {
                    int li = (start + k) % P.n_leafs;
                    const struct leaf * L = &P.leafs[li];
                    if (L->role != R_CACHE && L->role != R_SLAB && !(L->role == R_X && (r[3] & 1))) {
                        continue;
                    }
                    if (L->kind != K_STORE && L->kind != K_PTR && L->kind != K_TALLOC) {
                        continue;
                    }
                    if ((L->kind == K_STORE || L->kind == K_TALLOC) && rejects(L->backend, WSP_GGML_OP_CPY)) {
                        continue;
                    }
                    if (L->ne[0] * L->ne[1] * L->ne[2] < n) {
                        continue;
                    }
                    target = li;
                    break;
                }
            }
            use(S, ia);
            if (target >= 0) {
                int ei = S->leaf_ent[target];
                struct wsp_ggml_tensor * L = S->pool[ei].t;
                int64_t total = nel(L);
                size_t off = (size_t)(r[4] % (uint32_t)(total - n + 1)) * wsp_ggml_type_size(L->type);
                struct wsp_ggml_tensor * v = wsp_ggml_view_1d(ctx, L, n, off);
                use(S, ei);
                int vi = push(S, v, leaf_read_bound(), target, true);
                use(S, vi);
                leaf_written(S, target, ba);
                push(S, wsp_ggml_cpy(ctx, a, v), leaf_read_bound(), target, true);
            } else {
                enum wsp_ggml_type ty = (r[5] & 1) ? WSP_GGML_TYPE_F16 : WSP_GGML_TYPE_F32;
                struct wsp_ggml_tensor * dst =
                    (r[5] & 2) ? wsp_ggml_new_tensor_1d(ctx, ty, n) : wsp_ggml_new_tensor(ctx, ty, 4, a->ne);
                int di = push(S, dst, 0.0f, -1, false);
                S->pool[di].hidden = true;
                use(S, di);
                push(S, wsp_ggml_cpy(ctx, a, dst), ba, -1, true);
            }
            break;
        }
        case O_CONT: {
            int ia = pick(S, r[0], p_float, NULL);
            if (ia < 0) {
                break;
            }
            use(S, ia);
            add_node(S, wsp_ggml_cont(ctx, S->pool[ia].t), S->pool[ia].bound, -1);
            break;
        }
        case O_PERMUTE:
        case O_TRANSPOSE: {
            int ia = pick(S, r[0], p_float, NULL);
            if (ia < 0) {
                break;
            }
            struct wsp_ggml_tensor * a = S->pool[ia].t;
            use(S, ia);
            struct wsp_ggml_tensor * t;
            // ggml keeps n_dims through permute/transpose (and dup_tensor
            // uses it): no dimension > 1 may land at or beyond n_dims
            int ax[4] = { 0, 1, 2, 3 };
            if (o == O_TRANSPOSE) {
                ax[0] = 1;
                ax[1] = 0;
            } else {
                uint32_t x = r[1];
                for (int i = 3; i > 0; i--) {
                    int j = (int)(x % (uint32_t)(i + 1));
                    x /= (uint32_t)(i + 1);
                    int tmp = ax[i];
                    ax[i] = ax[j];
                    ax[j] = tmp;
                }
            }
            for (int k = 0; k < 4; k++) {
                if (a->ne[k] > 1 && ax[k] >= a->n_dims) {
                    undo_use(S, ia);
                    return;
                }
            }
            if (o == O_TRANSPOSE) {
                t = wsp_ggml_transpose(ctx, a);
            } else {
                t = wsp_ggml_permute(ctx, a, ax[0], ax[1], ax[2], ax[3]);
            }
            push(S, t, S->pool[ia].bound, S->pool[ia].owner, true);
            break;
        }
        case O_RESHAPE: {
            int ia = pick(S, r[0], p_float_contig, NULL);
            if (ia < 0) {
                break;
            }
            struct wsp_ggml_tensor * a = S->pool[ia].t;
            int64_t n = nel(a);
            struct wsp_ggml_tensor * t;
            uint32_t k = r[1] % 4;
            if (k == 0) {
                t = wsp_ggml_reshape_1d(ctx, a, n);
            } else {
                // a divisor of n near a random dimension
                int64_t d0 = D(r[2]);
                while (d0 > 1 && n % d0 != 0) {
                    d0--;
                }
                if (k == 3 && (n / d0) % 2 == 0) {
                    t = wsp_ggml_reshape_3d(ctx, a, d0, n / d0 / 2, 2);
                } else {
                    t = wsp_ggml_reshape_2d(ctx, a, d0, n / d0);
                }
            }
            use(S, ia);
            push(S, t, S->pool[ia].bound, S->pool[ia].owner, true);
            break;
        }
        case O_VIEW: {
            int ia = pick(S, r[0], p_float_contig, NULL);
            if (ia < 0) {
                break;
            }
            struct wsp_ggml_tensor * a = S->pool[ia].t;
            size_t ts = wsp_ggml_type_size(a->type);
            struct wsp_ggml_tensor * t;
            if (r[1] % 3 == 0) {
                int64_t n = nel(a);
                int64_t len = 1 + (int64_t)(r[2] % (uint32_t)(n < 4096 ? n : 4096));
                int64_t off = (int64_t)(r[3] % (uint32_t)(n - len + 1));
                t = wsp_ggml_view_1d(ctx, a, len, (size_t)off * ts);
            } else {
                int64_t c0 = (int64_t)(r[2] % (uint32_t)a->ne[0]);
                int64_t w = 1 + (int64_t)(r[3] % (uint32_t)(a->ne[0] - c0));
                int64_t r0 = (int64_t)(r[4] % (uint32_t)a->ne[1]);
                int64_t h = 1 + (int64_t)(r[5] % (uint32_t)(a->ne[1] - r0));
                int64_t planes = a->ne[2] * a->ne[3];
                int64_t p = (int64_t)(r[6] % (uint32_t)planes);
                size_t off = (size_t)p * a->nb[2] + (size_t)r0 * a->nb[1] + (size_t)c0 * ts;
                if (r[1] % 3 == 1 && a->ne[2] > 1) {
                    // 3d: all planes from p on
                    int64_t np = a->ne[2] - (p % a->ne[2]);
                    off = (size_t)(p % a->ne[2]) * a->nb[2] + (size_t)r0 * a->nb[1] + (size_t)c0 * ts;
                    t = wsp_ggml_view_3d(ctx, a, w, h, np, a->nb[1], a->nb[2], off);
                } else {
                    t = wsp_ggml_view_2d(ctx, a, w, h, a->nb[1], off);
                }
            }
            use(S, ia);
            push(S, t, S->pool[ia].bound, S->pool[ia].owner, true);
            break;
        }
        case O_GET_ROWS: {
            int n_idx = 0, idx[8];
            for (int i = 0; i < P.n_leafs && n_idx < 8; i++) {
                if (P.leafs[i].role == R_IDX) {
                    idx[n_idx++] = i;
                }
            }
            int ia = pick(S, r[0], p_rows_src, NULL);
            if (ia < 0 || n_idx == 0) {
                break;
            }
            int li = idx[r[1] % (uint32_t)n_idx];
            if (S->pool[ia].t->ne[0] * P.leafs[li].ne[0] > 16384) {
                break;
            }
            int ii = S->leaf_ent[li];
            struct wsp_ggml_tensor * a = S->pool[ia].t;
            if (S->idx_m[li] > a->ne[1]) {
                S->idx_m[li] = a->ne[1];
            }
            use(S, ia);
            use(S, ii);
            add_node(S, wsp_ggml_get_rows(ctx, a, S->pool[ii].t), S->pool[ia].bound, -1);
            break;
        }
        default:
            break;
    }
}

// Blocks of memory for the graph contexts: the same description rebuilt in
// the same block gives tensors at the same addresses.
static void * g_block[3];
static size_t g_block_size;
// Graphs in contexts wsp_ggml_init allocates (mem_buffer NULL), freed after
// each compute, instead of the blocks.
static bool g_own_ctx;
static int g_graph_size;

// ggml's asserts exit(1): an atexit handler says when that happened inside
// one of the program's own allocations through sched_get_tallocr (a compute
// buffer too small for what the program put in it), not inside the scheduler.
static const char * volatile g_user_call;

static void at_exit_report(void) {
    if (g_user_call != NULL) {
        fprintf(stderr, "fuzz: stopped inside the program's own call: %s\n", g_user_call);
    }
}

static void user_tallocr_alloc(wsp_ggml_backend_t b, struct wsp_ggml_tensor * t, const char * what) {
    g_user_call = what;
    wsp_ggml_tallocr_alloc(wsp_ggml_backend_sched_get_tallocr(g_sched, b), t);
    g_user_call = NULL;
}

static void fill_talloc_input(struct wsp_ggml_tensor * t, int li) {
    struct leaf * L = &P.leafs[li];
    leaf_fill_shadow(L);
    write_tensor(t, L->shadow, L->nbytes);
}

static void alloc_input(struct bstate * S, int k) {
    struct wsp_ggml_tensor * t = S->tin[k];
    int li = S->tin_leaf[k];
    if (S->in_mode == IN_MEASURE) {
        if (P.measure_inputs) {
            user_tallocr_alloc(g_bk[P.leafs[li].backend], t, "tallocr_alloc of an input before init_measure");
        }
    } else if (S->in_mode == IN_COMPUTE) {
        user_tallocr_alloc(g_bk[P.leafs[li].backend], t, "tallocr_alloc of an input before a compute");
        fill_talloc_input(t, li);
    }
}

// Build the first `limit` decisions of ds into a fresh context in block;
// with expand, make the graph; S->count: tensors in the graph (at most).
static void build_once(struct bstate * S, const struct desc * ds, int block, bool track, enum input_mode in_mode, int graph_size,
                       int limit, bool expand) {
    memset(S, 0, sizeof(*S));
    struct wsp_ggml_init_params ip = { g_block_size, g_own_ctx ? NULL : g_block[block], true };
    S->ctx = wsp_ggml_init(ip);
    CHECK(S->ctx != NULL);
    S->g = wsp_ggml_new_graph_custom(S->ctx, (size_t)graph_size, false);
    S->cap = 4 * P.dec_cap + P.n_leafs + 16;
    S->pool = (struct ent *)calloc((size_t)S->cap, sizeof(struct ent));
    CHECK(S->pool != NULL);
    S->track = track;
    S->in_mode = in_mode;
    for (int i = 0; i < P.n_leafs; i++) {
        S->lb[i] = P.leafs[i].bound;
    }
    for (int i = 0; i < MAX_LEAFS; i++) {
        S->leaf_ent[i] = -1;
        S->idx_m[i] = INT64_MAX;
    }
    // leafs first (persistent ones by pointer, talloc inputs made here)
    for (int li = 0; li < P.n_leafs; li++) {
        struct leaf * L = &P.leafs[li];
        struct wsp_ggml_tensor * t = L->t;
        if (L->kind == K_TALLOC) {
            t = wsp_ggml_new_tensor(S->ctx, L->type, L->n_dims, L->ne);
            S->tin[S->n_tin] = t;
            S->tin_leaf[S->n_tin] = li;
            if (P.talloc_at_create) {
                alloc_input(S, S->n_tin);
            }
            S->n_tin++;
        }
        S->leaf_ent[li] = push(S, t, leaf_read_bound(), li, false);
        if (L->kind == K_TALLOC) {
            wsp_ggml_format_name(t, "in%d", li);
        }
    }
    S->n_leaf_ents = S->n;
    S->dec_ent = (int *)malloc(sizeof(int) * (size_t)(ds->n > 0 ? ds->n : 1));
    CHECK(S->dec_ent != NULL);
    for (int i = 0; i < limit; i++) {
        S->cur = i;
        int before = S->n;
        apply_dec(S, &ds->d[i]);
        S->dec_ent[i] = S->n > before ? S->n - 1 : -1;
    }
    bool any_node = false;
    for (int i = 0; i < S->n && !any_node; i++) {
        any_node = S->pool[i].node;
    }
    if (!any_node) {
        int64_t ne[4] = { P.dims[0], 1, 1, 1 };
        int vi = slab_operand(S, WSP_GGML_TYPE_F32, ne, 0);
        use(S, vi);
        push(S, wsp_ggml_gelu(S->ctx, S->pool[vi].t), 2.0f, -1, true);
    }
    // outputs: nodes nothing consumes, made contiguous
    S->outs = (struct wsp_ggml_tensor **)calloc((size_t)S->cap, sizeof(void *));
    S->cnodes = (struct wsp_ggml_tensor **)calloc((size_t)S->cap, sizeof(void *));
    CHECK(S->outs != NULL && S->cnodes != NULL);
    int n_before = S->n;
    for (int i = 0; i < n_before; i++) {
        struct ent * e = &S->pool[i];
        if (!e->node || e->used > 0) {
            continue;
        }
        struct wsp_ggml_tensor * out = e->t;
        if (!wsp_ggml_is_contiguous(out)) {
            e->used++;
            int ci = push(S, wsp_ggml_cont(S->ctx, out), e->bound, -1, true);
            out = S->pool[ci].t;
        }
        S->outs[S->n_outs++] = out;
    }
    S->count = S->n - S->n_leaf_ents + P.n_leafs;
    if (!expand) {
        return;
    }
    for (int i = 0; i < S->n_outs; i++) {
        wsp_ggml_build_forward_expand(S->g, S->outs[i]);
    }
    for (int i = 0; i < S->n; i++) {
        struct wsp_ggml_tensor * t = S->pool[i].t;
        if (!S->pool[i].node || t->view_src != NULL) {
            continue;
        }
        if (t->op == WSP_GGML_OP_VIEW || t->op == WSP_GGML_OP_RESHAPE || t->op == WSP_GGML_OP_PERMUTE ||
            t->op == WSP_GGML_OP_TRANSPOSE || t->op == WSP_GGML_OP_NONE) {
            continue;
        }
        S->cnodes[S->n_cnodes++] = t;
    }
    if (!P.talloc_at_create) {
        for (int k = 0; k < S->n_tin; k++) {
            alloc_input(S, k);
        }
    }
}

static void unbuild(struct bstate * S) {
    free(S->dec_ent);
    free(S->pool);
    free(S->outs);
    free(S->cnodes);
    wsp_ggml_free(S->ctx);
    memset(S, 0, sizeof(*S));
}

// Build a description (truncated if its graph would not fit graph_size).
static void build(struct bstate * S, const struct desc * ds, int block, bool track, enum input_mode in_mode, int graph_size) {
    int limit = ds->n;
    if (4 * ds->n + 2 * P.n_leafs + 16 > graph_size) {
        float saved[MAX_LEAFS];
        for (;;) {
            for (int i = 0; i < P.n_leafs; i++) {
                saved[i] = P.leafs[i].bound;
            }
            build_once(S, ds, block, track, IN_NONE, graph_size, limit, false);
            int count = S->count;
            unbuild(S);
            for (int i = 0; i < P.n_leafs; i++) {
                P.leafs[i].bound = saved[i];
            }
            if (count <= graph_size - 4 || limit == 0) {
                break;
            }
            limit = limit * 3 / 4;
        }
        if (limit < ds->n) {
            printf("~ graph truncated to %d of %d decisions\n", limit, ds->n);
        }
    }
    build_once(S, ds, block, track, in_mode, graph_size, limit, true);
}

// Row indices within the rows of every get_rows source that uses them.
static void fix_idx(const struct bstate * S) {
    for (int li = 0; li < P.n_leafs; li++) {
        struct leaf * L = &P.leafs[li];
        if (L->role != R_IDX || S->idx_m[li] == INT64_MAX) {
            continue;
        }
        int64_t m = S->idx_m[li];
        struct lcg r = lcg_new(L->data_seed);
        int32_t * p = (int32_t *)L->shadow;
        for (int64_t i = 0; i < L->ne[0]; i++) {
            p[i] = (int32_t)((lcg_u32(&r) % 1000) % (uint32_t)m);
        }
        write_tensor(L->t, L->shadow, L->nbytes);
    }
}

// ---------------------------------------------------------------------------
// measure, compute

struct adraw {
    int n;
    uint32_t node[4];
    int backend[4];
};

static struct adraw draw_assign(void) {
    struct adraw a;
    a.n = rndn(5);
    for (int i = 0; i < 4; i++) {
        a.node[i] = rnd();
        a.backend[i] = rndn(P.nb);
    }
    return a;
}

static int apply_assign(const struct bstate * S, const struct adraw * a) {
    int done = 0;
    if (S->n_cnodes == 0) {
        return 0;
    }
    for (int i = 0; i < a->n; i++) {
        struct wsp_ggml_tensor * t = S->cnodes[a->node[i] % (uint32_t)S->n_cnodes];
        if (rejects(a->backend[i], t->op)) {
            continue;
        }
        wsp_ggml_backend_sched_set_node_backend(g_sched, t, g_bk[a->backend[i]]);
        done++;
    }
    return done;
}

static size_t g_pad_bytes;
static void dump_graph(const struct wsp_ggml_cgraph * g, int step);

// init_measure with the graph of description ds (sched mode only).
static void do_measure(const struct desc * ds, const struct adraw * pre, bool first, bool pad) {
    struct bstate S;
    int block = P.measure_same_block ? 0 : 2;
    int graph_size = g_graph_size;
    if (P.small_measure && first) {
        // a graph just large enough: its hash table is smaller than the
        // other graphs' (the original sizes its tables by the measure graph)
        build(&S, ds, block, false, IN_NONE, g_graph_size);
        int need = S.g->n_nodes + S.g->n_leafs + 8;
        unbuild(&S);
        graph_size = need;
    }
    build(&S, ds, block, false, IN_MEASURE, graph_size);
    struct wsp_ggml_cgraph * g = S.g;
    struct wsp_ggml_context * pad_ctx = NULL;
    if (pad) {
        if (first) {
            g_pad_bytes = 4 * S.bytes + 262144;
        }
        pad_ctx = make_ctx((size_t)P.nb + 1, false, true, 0);
        for (int b = 0; b < P.nb; b++) {
            struct wsp_ggml_tensor * pad = wsp_ggml_new_tensor_1d(pad_ctx, WSP_GGML_TYPE_I8, (int64_t)g_pad_bytes);
            user_tallocr_alloc(g_bk[b], pad, "tallocr_alloc of the slack before init_measure");
        }
    }
    if (pre != NULL) {
        printf("~ measure assignments %d\n", apply_assign(&S, pre));
    }
    printf("~ measure nodes=%d leafs=%d\n", g->n_nodes, g->n_leafs);
    dump_graph(g, -1);
    fflush(stdout);
    wsp_ggml_backend_sched_init_measure(g_sched, g);
    printf("~ measured pad=%zu buffers", pad ? g_pad_bytes : (size_t)0);
    for (int b = 0; b < P.nb; b++) {
        printf(" %s:%zu", P.b[b].name, wsp_ggml_backend_buffer_get_size(wsp_ggml_backend_sched_get_buffer(g_sched, g_bk[b])));
    }
    printf("\n");
    if (pad_ctx != NULL) {
        wsp_ggml_free(pad_ctx);
    }
    unbuild(&S);
}

static wsp_ggml_backend_buffer_t g_ref_buf;
static size_t g_ref_size;

static void print_outputs(int step, const struct bstate * S) {
    for (int i = 0; i < S->n_outs; i++) {
        const struct wsp_ggml_tensor * t = S->outs[i];
        size_t n = wsp_ggml_nbytes(t);
        void * buf = malloc(n > 0 ? n : 1);
        CHECK(buf != NULL);
        read_tensor(t, buf, n);
        printf("c%d %s %s %" PRId64 "x%" PRId64 "x%" PRId64 "x%" PRId64 " %016" PRIx64 "\n", step, t->name,
               wsp_ggml_type_name(t->type), t->ne[0], t->ne[1], t->ne[2], t->ne[3], fnv1a64(buf, n));
        free(buf);
    }
}

// FUZZ_DUMP=1: every node of every computed graph on stderr.
static void dump_graph(const struct wsp_ggml_cgraph * g, int step) {
    const char * v = getenv("FUZZ_DUMP");
    if (v == NULL || v[0] == '\0' || strcmp(v, "0") == 0) {
        return;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const struct wsp_ggml_tensor * t = g->nodes[i];
        fprintf(stderr, "c%d #%d %s %s %s [%lld %lld %lld %lld] nb[%zu %zu %zu %zu]%s", step, i, t->name, wsp_ggml_op_name(t->op),
                wsp_ggml_type_name(t->type), (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                t->nb[0], t->nb[1], t->nb[2], t->nb[3], t->view_src ? " view of " : "");
        if (t->view_src) {
            fprintf(stderr, "%s+%zu", t->view_src->name, t->view_offs);
        }
        fprintf(stderr, " <=");
        for (int j = 0; j < WSP_GGML_MAX_SRC && t->src[j]; j++) {
            fprintf(stderr, " %s[%lld %lld %lld %lld]", t->src[j]->name, (long long)t->src[j]->ne[0], (long long)t->src[j]->ne[1],
                    (long long)t->src[j]->ne[2], (long long)t->src[j]->ne[3]);
        }
        fprintf(stderr, "\n");
    }
}

static void compute(struct bstate * S, const struct adraw * a, int step) {
    // FUZZ_DUMP=2 in ref mode: compute node by node and report non-finite values
    fix_idx(S);
    dump_graph(S->g, step);
    if (!g_ref) {
        int n = P.assign ? apply_assign(S, a) : 0;
        printf("~ c%d nodes=%d leafs=%d outs=%d assigned=%d\n", step, S->g->n_nodes, S->g->n_leafs, S->n_outs, n);
        fflush(stdout);
        su_trace_begin();
        wsp_ggml_backend_sched_graph_compute(g_sched, S->g);
        // the split list as the backends saw it: one graph_compute call per
        // split (backend, nodes); fuzz.rs compares it with the original's
        char label[32];
        snprintf(label, sizeof(label), "~ trace c%d", step);
        su_trace_print(label);
        // what fuzz.rs checks of ours: no test backend computed a node its
        // supports_op rejects (the original ignores supports_op)
        long rejected = 0;
        for (int b = 0; b < P.nb; b++) {
            if (!P.b[b].is_cpu) {
                rejected += test_backend_stats(g_bk[b])->rejected_computed;
            }
        }
        printf("~ rejected-computed %ld\n", rejected);
    } else {
        printf("~ c%d nodes=%d leafs=%d outs=%d\n", step, S->g->n_nodes, S->g->n_leafs, S->n_outs);
        size_t need = S->bytes + 4096;
        if (need > g_ref_size) {
            wsp_ggml_backend_buffer_free(g_ref_buf);
            g_ref_size = need * 2;
            g_ref_buf = wsp_ggml_backend_alloc_buffer(g_cpu, g_ref_size);
            CHECK(g_ref_buf != NULL);
        }
        wsp_ggml_allocr_t al = wsp_ggml_allocr_new_from_buffer(g_ref_buf);
        for (int k = 0; k < S->n_tin; k++) {
            wsp_ggml_allocr_alloc(al, S->tin[k]);
            fill_talloc_input(S->tin[k], S->tin_leaf[k]);
        }
        wsp_ggml_allocr_alloc_graph(al, S->g);
        const char * dbg = getenv("FUZZ_DUMP");
        if (dbg != NULL && strcmp(dbg, "2") == 0) {
            // node by node, naming the first node with a non-finite value
            for (int i = 0; i < S->g->n_nodes; i++) {
                struct wsp_ggml_cgraph gv = *S->g;
                gv.nodes = S->g->nodes + i;
                gv.n_nodes = 1;
                gv.n_leafs = 0;
                wsp_ggml_backend_graph_compute(g_cpu, &gv);
                const struct wsp_ggml_tensor * t = S->g->nodes[i];
                if (t->type == WSP_GGML_TYPE_F32 && wsp_ggml_is_contiguous(t)) {
                    const float * f = (const float *)t->data;
                    for (int64_t k = 0; k < nel(t); k++) {
                        if (!isfinite(f[k]) || fabsf(f[k]) > 1e4f) {
                            fprintf(stderr, "c%d: node #%d %s (%s) has a non-finite or huge value at %lld\n", step, i, t->name,
                                    wsp_ggml_op_name(t->op), (long long)k);
                            break;
                        }
                    }
                }
            }
        } else {
            wsp_ggml_backend_graph_compute(g_cpu, S->g);
        }
        wsp_ggml_allocr_free(al);
    }
    print_outputs(step, S);
    fflush(stdout);
}

// ---------------------------------------------------------------------------
// mutations

enum mut { M_DATA, M_VIEW, M_REBUILD, M_MOVE, M_ADD, M_DEL, M_ALT, M_REMEASURE, M_IDX, M_REJECT, M_N };
static const int mut_weight[M_N] = { 20, 14, 20, 10, 10, 10, 5, 2, 4, 4 };
static const char * mut_name[M_N] = { "data", "view", "rebuild", "move", "add", "del", "alt", "remeasure", "idx", "reject" };

static bool g_remeasured;

struct step_plan {
    bool remeasure;
    int remeasure_slot;
    bool remeasure_pad;
};

static int pick_leaf(bool (*ok)(const struct leaf *)) {
    int start = rndn(P.n_leafs);
    for (int k = 0; k < P.n_leafs; k++) {
        int i = (start + k) % P.n_leafs;
        if (ok(&P.leafs[i])) {
            return i;
        }
    }
    return -1;
}

static bool l_data(const struct leaf * L) {
    return L->role == R_W || L->role == R_X || L->role == R_SLAB || L->role == R_CACHE;
}

static bool l_move(const struct leaf * L) {
    return L->kind == K_STORE || L->kind == K_PTR;
}

static bool l_idx(const struct leaf * L) {
    return L->role == R_IDX;
}

static void mutate(struct step_plan * sp) {
    memset(sp, 0, sizeof(*sp));
    int n_ev = chance(25) ? 0 : 1 + rndn(2);
    for (int e = 0; e < n_ev; e++) {
        int tot = 0;
        for (int i = 0; i < M_N; i++) {
            tot += mut_weight[i];
        }
        int x = rndn(tot), m = 0;
        while (x >= mut_weight[m]) {
            x -= mut_weight[m];
            m++;
        }
        int gi = rndn(P.n_graphs);
        struct desc * ds = &P.descs[gi];
        switch (m) {
            case M_DATA:
            case M_IDX: {
                int li = pick_leaf(m == M_DATA ? l_data : l_idx);
                if (li < 0) {
                    break;
                }
                struct leaf * L = &P.leafs[li];
                L->data_seed = rnd();
                leaf_fill_shadow(L);
                L->bound = 1.0f;
                if (L->kind != K_TALLOC) {
                    write_tensor(L->t, L->shadow, L->nbytes);
                }
                printf("~ mut %s L%d\n", mut_name[m], li);
                break;
            }
            case M_VIEW:
            case M_REBUILD: {
                if (ds->n == 0) {
                    break;
                }
                int start = rndn(ds->n);
                int di = start;
                if (m == M_VIEW) {
                    for (int k = 0; k < ds->n; k++) {
                        int j = (start + k) % ds->n;
                        if (ds->d[j].op == O_VIEW) {
                            di = j;
                            break;
                        }
                    }
                }
                struct dec * d = &ds->d[di];
                if (m == M_REBUILD && chance(50)) {
                    d->op = (uint8_t)rndn(O_N);
                } else {
                    int k = rndn(8);
                    d->r[k] = rnd();
                    if (m == M_VIEW) {
                        d->r[2 + rndn(5)] = rnd();
                    }
                }
                ds->version++;
                printf("~ mut %s g%d d%d\n", mut_name[m], gi, di);
                break;
            }
            case M_MOVE: {
                int li = pick_leaf(l_move);
                int b = rndn(P.nb);
                bool to_ptr = chance(20);
                if (li < 0) {
                    break;
                }
                struct leaf * L = &P.leafs[li];
                L->kind = to_ptr ? K_PTR : K_STORE;
                L->backend = b;
                place_leaf(li);
                printf("~ mut move L%d -> %s\n", li, to_ptr ? "ptr" : P.b[b].name);
                break;
            }
            case M_ADD: {
                int pos = rndn(ds->n + 1);
                struct dec nd;
                gen_dec(&nd);
                if (ds->n >= ds->cap) {
                    break;
                }
                memmove(&ds->d[pos + 1], &ds->d[pos], sizeof(struct dec) * (size_t)(ds->n - pos));
                ds->d[pos] = nd;
                ds->n++;
                ds->version++;
                printf("~ mut add g%d d%d\n", gi, pos);
                break;
            }
            case M_DEL: {
                int pos = rndn(ds->n);
                if (ds->n <= 1) {
                    break;
                }
                memmove(&ds->d[pos], &ds->d[pos + 1], sizeof(struct dec) * (size_t)(ds->n - pos - 1));
                ds->n--;
                ds->version++;
                printf("~ mut del g%d d%d\n", gi, pos);
                break;
            }
            case M_ALT:
                if (P.n_graphs == 2) {
                    P.alternate = !P.alternate;
                    printf("~ mut alt %d\n", P.alternate);
                }
                break;
            case M_REMEASURE:
                sp->remeasure = true;
                sp->remeasure_slot = gi;
                // slack again only at the first re-measure of a program
                // measured with slack (the original allocates it in its
                // real allocator, where it must fit)
                sp->remeasure_pad = chance(50) && P.pad && !g_remeasured;
                g_remeasured = true;
                printf("~ mut remeasure g%d%s\n", gi, sp->remeasure_pad ? " pad" : "");
                break;
            case M_REJECT: {
                // a test backend's supports_op changes between two computes
                // (programs of case b only). A backend holding leafs that
                // nodes may write into rejects no op that writes in place,
                // or copies: the graphs are built anew with the new set
                // (inplace_ok), and memory already pinned there would make
                // a rejection an error of the program's.
                int b = rndn(P.nb);
                if (!P.any_reject || P.b[b].is_cpu) {
                    break;
                }
                bool holds = false;
                for (int i = 0; i < P.n_leafs; i++) {
                    holds |= P.leafs[i].backend == b && (P.leafs[i].kind == K_STORE || P.leafs[i].kind == K_TALLOC);
                }
                struct bplan * B = &P.b[b];
                if (B->shape == TB_SHAPE_CUDA) {
                    break; // no supports_op to change
                }
                B->n_rej = 0;
                int n = rndn(4);
                for (int i = 0; i < n; i++) {
                    int op = rejectable[rndn((int)(sizeof(rejectable) / sizeof(rejectable[0])))];
                    bool writes = op != WSP_GGML_OP_MUL_MAT && op != WSP_GGML_OP_CONT && op != WSP_GGML_OP_GET_ROWS;
                    if (!(holds && writes) && !rejects(b, (enum wsp_ggml_op)op)) {
                        B->rej[B->n_rej++] = op;
                    }
                }
                if (!g_ref) {
                    test_backend_set_rejected(g_bk[b], B->rej, B->n_rej);
                }
                for (int g = 0; g < P.n_graphs; g++) {
                    P.descs[g].version++;
                }
                printf("~ mut reject %s n=%d\n", B->name, B->n_rej);
                break;
            }
            default:
                break;
        }
    }
}

// ---------------------------------------------------------------------------

static void final_leafs(void) {
    for (int li = 0; li < P.n_leafs; li++) {
        const struct leaf * L = &P.leafs[li];
        if (L->kind == K_TALLOC) {
            continue;
        }
        void * buf = malloc(L->nbytes);
        CHECK(buf != NULL);
        read_tensor(L->t, buf, L->nbytes);
        printf("final L%d %016" PRIx64 "\n", li, fnv1a64(buf, L->nbytes));
        free(buf);
    }
}

static void cleanup(void) {
    su_trace_free();
    if (g_sched != NULL) {
        wsp_ggml_backend_sched_free(g_sched);
    }
    if (g_ref_buf != NULL) {
        wsp_ggml_backend_buffer_free(g_ref_buf);
    }
    for (int s = 0; s < N_SID; s++) {
        if (g_st[s].buf != NULL) {
            wsp_ggml_backend_buffer_free(g_st[s].buf);
        }
        free(g_st[s].mem);
    }
    wsp_ggml_free(g_pctx);
    for (int i = 0; i < P.n_leafs; i++) {
        free(P.leafs[i].shadow);
    }
    for (int g = 0; g < 2; g++) {
        free(P.descs[g].d);
    }
    for (int i = 0; i < 3; i++) {
        free(g_block[i]);
    }
    if (!g_ref) {
        for (int b = 0; b < P.nb; b++) {
            if (!P.b[b].is_cpu) {
                wsp_ggml_backend_free(g_bk[b]);
            }
        }
    }
    if (g_foreign != NULL) {
        wsp_ggml_backend_free(g_foreign);
    }
    wsp_ggml_backend_free(g_cpu);
}

static void usage(void) {
    fprintf(stderr, "usage: fuzz_sched SEED [--mode sched|ref] [--nodes-max N]\n");
    exit(2);
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        usage();
    }
    char * end = NULL;
    uint64_t seed = strtoull(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0') {
        usage();
    }
    int nodes_max = 60;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
            const char * m = argv[++i];
            if (strcmp(m, "ref") == 0) {
                g_ref = true;
            } else if (strcmp(m, "sched") != 0) {
                usage();
            }
        } else if (strcmp(argv[i], "--nodes-max") == 0 && i + 1 < argc) {
            nodes_max = atoi(argv[++i]);
            if (nodes_max < 1) {
                usage();
            }
        } else {
            usage();
        }
    }

    atexit(at_exit_report);
    plan_program(seed, nodes_max);
    // (from the seed alone: no draw of the program's generator)
    g_own_ctx = ((seed * 0x9E3779B97F4A7C15ULL) >> 62) == 0;
    print_plan();
    if (g_own_ctx) {
        printf("~ graphs in contexts of their own, freed after each compute\n");
    }
    fflush(stdout);

    // blocks for the largest graph the descriptions could make
    int max_tensors = 4 * P.dec_cap + P.n_leafs + 16;
    int max_size = 64;
    while (max_size < max_tensors) {
        max_size *= 2;
    }
    g_block_size = (size_t)max_tensors * wsp_ggml_tensor_overhead() + 2 * wsp_ggml_graph_overhead_custom((size_t)max_size, false) + 65536;
    for (int i = 0; i < 3; i++) {
        g_block[i] = malloc(g_block_size);
        CHECK(g_block[i] != NULL);
    }

    setup_backends();
    setup_stores();
    setup_leafs();

    // One graph size for every graph (the original sizes its hash table by
    // the measure graph's), fitted to the first descriptions with some room
    // to grow: the original's fixed tables (the 'causes' array among them)
    // overflow beyond ~2000 tensors, and that should stay the exception.
    {
        int count = 0;
        for (int gi = 0; gi < P.n_graphs; gi++) {
            struct bstate S;
            build_once(&S, &P.descs[gi], 0, false, IN_NONE, max_size, P.descs[gi].n, false);
            count = S.count > count ? S.count : count;
            unbuild(&S);
        }
        g_graph_size = 64;
        while (g_graph_size < count + count / 4 + 16) {
            g_graph_size *= 2;
        }
        printf("~ graph_size %d\n", g_graph_size);
    }

    // init_measure with the first graph (draws happen in both modes)
    struct adraw pre = draw_assign();
    if (!g_ref) {
        g_sched = wsp_ggml_backend_sched_new(g_bk, P.nb);
        CHECK(g_sched != NULL);
        do_measure(&P.descs[0], P.assign_before_measure ? &pre : NULL, true, P.pad);
    }

    // distinct graphs computed: (description, version) pairs
    int n_graphs_built = 0;
    int seen[2] = { -1, -1 };
    for (int step = 0; step < P.n_computes; step++) {
        struct step_plan sp;
        if (step > 0) {
            mutate(&sp);
        } else {
            memset(&sp, 0, sizeof(sp));
        }
        int slot = (P.n_graphs == 2 && P.alternate) ? step % 2 : (P.n_graphs == 2 && chance(10) ? 1 : 0);
        struct adraw a = draw_assign();
        if (sp.remeasure && !g_ref) {
            do_measure(&P.descs[sp.remeasure_slot], NULL, false, sp.remeasure_pad);
        }
        struct bstate S;
        build(&S, &P.descs[slot], slot, true, g_ref ? IN_NONE : IN_COMPUTE, g_graph_size);
        if (seen[slot] != P.descs[slot].version) {
            seen[slot] = P.descs[slot].version;
            n_graphs_built++;
        }
        compute(&S, &a, step);
        unbuild(&S);
    }
    final_leafs();
    printf("done computes=%d graphs=%d\n", P.n_computes, n_graphs_built);
    fflush(stdout);
    cleanup();
    return 0;
}
