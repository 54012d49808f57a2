// Graphs computed through ggml-backend: weights and inputs in a backend buffer
// (placed by a ggml-alloc allocator, data set with wsp_ggml_backend_tensor_set),
// intermediates placed by wsp_ggml_allocr_alloc_graph (measure first, then real),
// computed with wsp_ggml_backend_graph_compute and with the plan API, on the
// CPU backend with 1 and 2 threads and on test backends.
#include "common.h"
#include "test_backend.h"

#define N_EMBD 64
#define N_OUT  48
#define N_TOK  8
#define N_HEAD 3
#define HEAD_D 16
#define N_VOCAB 10
#define N_ROWS 6

struct model {
    wsp_ggml_backend_t backend;
    bool exact_layout; // buffer bases aligned in both builds (test backends): layout sizes are exact
    struct wsp_ggml_context * ctx;
    wsp_ggml_backend_buffer_t buffer;
    wsp_ggml_allocr_t allocr;
    struct wsp_ggml_tensor * x;      // f32 [N_EMBD, N_TOK]
    struct wsp_ggml_tensor * w_f32;  // f32 [N_EMBD, N_OUT]
    struct wsp_ggml_tensor * w_f16;  // f16 [N_EMBD, N_OUT]
    struct wsp_ggml_tensor * w_q4;   // q4_0 [N_EMBD, N_OUT]
    struct wsp_ggml_tensor * w_q8;   // q8_0 [N_EMBD, N_OUT]
    struct wsp_ggml_tensor * b;      // f32 [N_OUT]
    struct wsp_ggml_tensor * g;      // f32 [N_OUT]
    struct wsp_ggml_tensor * emb;    // f32 [32, N_VOCAB]
    struct wsp_ggml_tensor * idx;    // i32 [N_ROWS]
    struct wsp_ggml_tensor * sc;     // f32 [1]
    struct wsp_ggml_tensor * o16;    // f16 [N_OUT, N_TOK], destination of a cpy
    struct wsp_ggml_tensor * orows;  // f32 [N_ROWS, 32], destination of a cpy
};

// host data shared by every model (so that results on all backends are comparable)
static float h_x[N_EMBD * N_TOK];
static float h_w[N_EMBD * N_OUT];
static float h_w2[N_EMBD * N_OUT];
static float h_b[N_OUT];
static float h_g[N_OUT];
static float h_emb[32 * N_VOCAB];
static int32_t h_idx[N_ROWS] = { 3, 0, 9, 3, 7, 1 };

static void init_host_data(void) {
    struct lcg r = lcg_new(42);
    lcg_fill_f32(&r, h_x, N_EMBD * N_TOK, 1.0f);
    lcg_fill_f32(&r, h_w, N_EMBD * N_OUT, 0.25f);
    lcg_fill_f32(&r, h_w2, N_EMBD * N_OUT, 0.5f);
    lcg_fill_f32(&r, h_b, N_OUT, 0.1f);
    lcg_fill_f32(&r, h_g, N_OUT, 1.5f);
    lcg_fill_f32(&r, h_emb, 32 * N_VOCAB, 2.0f);
}

static size_t pad_to(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}

static void set_quantized(struct wsp_ggml_tensor * t, const float * src) {
    size_t nbytes = wsp_ggml_nbytes(t);
    void * q = malloc(nbytes);
    int64_t hist[16] = { 0 };
    size_t n = wsp_ggml_quantize_chunk(t->type, src, q, 0, (int)wsp_ggml_nelements(t), hist);
    CHECK(n == nbytes);
    printf("quantized %s %s nbytes=%zu fnv=%016" PRIx64 "\n", wsp_ggml_get_name(t), wsp_ggml_type_name(t->type), n,
           fnv1a64(q, n));
    wsp_ggml_backend_tensor_set(t, q, 0, nbytes);
    free(q);
}

static void make_model(struct model * m, wsp_ggml_backend_t backend, bool exact_layout) {
    memset(m, 0, sizeof(*m));
    m->backend = backend;
    m->exact_layout = exact_layout;
    m->ctx = make_ctx(16, false, true, 0);
    m->x     = wsp_ggml_new_tensor_2d(m->ctx, WSP_GGML_TYPE_F32, N_EMBD, N_TOK);
    m->w_f32 = wsp_ggml_new_tensor_2d(m->ctx, WSP_GGML_TYPE_F32, N_EMBD, N_OUT);
    m->w_f16 = wsp_ggml_new_tensor_2d(m->ctx, WSP_GGML_TYPE_F16, N_EMBD, N_OUT);
    m->w_q4  = wsp_ggml_new_tensor_2d(m->ctx, WSP_GGML_TYPE_Q4_0, N_EMBD, N_OUT);
    m->w_q8  = wsp_ggml_new_tensor_2d(m->ctx, WSP_GGML_TYPE_Q8_0, N_EMBD, N_OUT);
    m->b     = wsp_ggml_new_tensor_1d(m->ctx, WSP_GGML_TYPE_F32, N_OUT);
    m->g     = wsp_ggml_new_tensor_1d(m->ctx, WSP_GGML_TYPE_F32, N_OUT);
    m->emb   = wsp_ggml_new_tensor_2d(m->ctx, WSP_GGML_TYPE_F32, 32, N_VOCAB);
    m->idx   = wsp_ggml_new_tensor_1d(m->ctx, WSP_GGML_TYPE_I32, N_ROWS);
    m->sc    = wsp_ggml_new_tensor_1d(m->ctx, WSP_GGML_TYPE_F32, 1);
    m->o16   = wsp_ggml_new_tensor_2d(m->ctx, WSP_GGML_TYPE_F16, N_OUT, N_TOK);
    m->orows = wsp_ggml_new_tensor_2d(m->ctx, WSP_GGML_TYPE_F32, N_ROWS, 32);
    wsp_ggml_set_name(m->x, "x");
    wsp_ggml_set_name(m->w_f32, "w_f32");
    wsp_ggml_set_name(m->w_f16, "w_f16");
    wsp_ggml_set_name(m->w_q4, "w_q4");
    wsp_ggml_set_name(m->w_q8, "w_q8");
    wsp_ggml_set_name(m->b, "b");
    wsp_ggml_set_name(m->g, "g");
    wsp_ggml_set_name(m->emb, "emb");
    wsp_ggml_set_name(m->idx, "idx");
    wsp_ggml_set_name(m->sc, "sc");
    wsp_ggml_set_name(m->o16, "o16");
    wsp_ggml_set_name(m->orows, "orows");

    // sized by the buffers' own alloc sizes (a CUDA-like buffer pads
    // quantized rows), asked of a small buffer of the backend
    size_t align = wsp_ggml_backend_get_alignment(backend);
    size_t total = align;
    wsp_ggml_backend_buffer_t probe = wsp_ggml_backend_alloc_buffer(backend, 1);
    for (struct wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(m->ctx); t != NULL; t = wsp_ggml_get_next_tensor(m->ctx, t)) {
        total += pad_to(wsp_ggml_backend_buffer_get_alloc_size(probe, t), align);
    }
    wsp_ggml_backend_buffer_free(probe);
    m->buffer = wsp_ggml_backend_alloc_buffer(backend, total);
    m->allocr = wsp_ggml_allocr_new_from_buffer(m->buffer);
    for (struct wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(m->ctx); t != NULL; t = wsp_ggml_get_next_tensor(m->ctx, t)) {
        wsp_ggml_allocr_alloc(m->allocr, t);
    }
    printf("model %s weights buffer request=%zu\n", wsp_ggml_backend_name(backend), total);
    if (exact_layout) {
        printf("model %s weights max=%zu\n", wsp_ggml_backend_name(backend), wsp_ggml_allocr_max_size(m->allocr));
    } else {
        printf("~le model %s weights max %zu\n", wsp_ggml_backend_name(backend), wsp_ggml_allocr_max_size(m->allocr));
    }

    wsp_ggml_backend_tensor_set(m->x, h_x, 0, sizeof(h_x));
    wsp_ggml_backend_tensor_set(m->w_f32, h_w, 0, sizeof(h_w));
    {
        wsp_ggml_fp16_t * h16 = (wsp_ggml_fp16_t *)malloc(sizeof(wsp_ggml_fp16_t) * N_EMBD * N_OUT);
        wsp_ggml_fp32_to_fp16_row(h_w2, h16, N_EMBD * N_OUT);
        wsp_ggml_backend_tensor_set(m->w_f16, h16, 0, wsp_ggml_nbytes(m->w_f16));
        free(h16);
    }
    set_quantized(m->w_q4, h_w);
    set_quantized(m->w_q8, h_w2);
    wsp_ggml_backend_tensor_set(m->b, h_b, 0, sizeof(h_b));
    wsp_ggml_backend_tensor_set(m->g, h_g, 0, sizeof(h_g));
    wsp_ggml_backend_tensor_set(m->emb, h_emb, 0, sizeof(h_emb));
    wsp_ggml_backend_tensor_set(m->idx, h_idx, 0, sizeof(h_idx));
    const float s = 0.125f;
    wsp_ggml_backend_tensor_set(m->sc, &s, 0, sizeof(s));
}

static void free_model(struct model * m) {
    wsp_ggml_allocr_free(m->allocr);
    wsp_ggml_backend_buffer_free(m->buffer);
    wsp_ggml_free(m->ctx);
}

// ---------------------------------------------------------------------------
// graph builders: add the graph's outputs to gf and to outs

#define MAX_OUTS 4

typedef int (*build_fn)(struct wsp_ggml_context * ctx, struct model * m, struct wsp_ggml_cgraph * gf,
                        struct wsp_ggml_tensor ** outs);

// mul_mat (f32 weight), add (broadcast), norm, mul, gelu, scale
static int build_mlp(struct wsp_ggml_context * ctx, struct model * m, struct wsp_ggml_cgraph * gf,
                     struct wsp_ggml_tensor ** outs) {
    struct wsp_ggml_tensor * h = wsp_ggml_mul_mat(ctx, m->w_f32, m->x);
    h = wsp_ggml_add(ctx, h, m->b);
    h = wsp_ggml_norm(ctx, h, 1e-5f);
    h = wsp_ggml_mul(ctx, h, m->g);
    h = wsp_ggml_gelu(ctx, h);
    h = wsp_ggml_scale(ctx, h, m->sc);
    wsp_ggml_set_name(h, "mlp_out");
    wsp_ggml_build_forward_expand(gf, h);
    outs[0] = h;
    return 1;
}

// attention-like: reshape, permute, mul_mat (f32, f16, q8_0 weights), scale,
// soft_max, cont, transpose, cpy to f16, view
static int build_attn(struct wsp_ggml_context * ctx, struct model * m, struct wsp_ggml_cgraph * gf,
                      struct wsp_ggml_tensor ** outs) {
    struct wsp_ggml_tensor * q = wsp_ggml_mul_mat(ctx, m->w_f32, m->x);               // [48, 8]
    q = wsp_ggml_permute(ctx, wsp_ggml_reshape_3d(ctx, q, HEAD_D, N_HEAD, N_TOK), 0, 2, 1, 3); // [16, 8, 3]
    struct wsp_ggml_tensor * k = wsp_ggml_mul_mat(ctx, m->w_f16, m->x);
    k = wsp_ggml_permute(ctx, wsp_ggml_reshape_3d(ctx, k, HEAD_D, N_HEAD, N_TOK), 0, 2, 1, 3); // [16, 8, 3]
    struct wsp_ggml_tensor * kq = wsp_ggml_mul_mat(ctx, k, q);                          // [8, 8, 3]
    kq = wsp_ggml_scale(ctx, kq, m->sc);
    kq = wsp_ggml_soft_max(ctx, kq);
    struct wsp_ggml_tensor * v = wsp_ggml_mul_mat(ctx, m->w_q8, m->x);               // [48, 8]
    v = wsp_ggml_cont(ctx, wsp_ggml_permute(ctx, wsp_ggml_reshape_3d(ctx, v, HEAD_D, N_HEAD, N_TOK), 1, 2, 0, 3)); // [8, 16, 3]
    struct wsp_ggml_tensor * kqv = wsp_ggml_mul_mat(ctx, v, kq);                        // [16, 8, 3]
    kqv = wsp_ggml_cont(ctx, wsp_ggml_permute(ctx, kqv, 0, 2, 1, 3));                   // [16, 3, 8]
    struct wsp_ggml_tensor * flat = wsp_ggml_reshape_2d(ctx, kqv, N_OUT, N_TOK);       // [48, 8]
    struct wsp_ggml_tensor * c16 = wsp_ggml_cpy(ctx, flat, m->o16);
    wsp_ggml_set_name(c16, "attn_f16");
    struct wsp_ggml_tensor * tr = wsp_ggml_cont(ctx, wsp_ggml_transpose(ctx, flat));   // [8, 48]
    wsp_ggml_set_name(tr, "attn_t");
    // rows 2..4 of the transposed result, then add a row-broadcast of a view of x
    struct wsp_ggml_tensor * rows = wsp_ggml_view_2d(ctx, tr, N_TOK, 3, tr->nb[1], 2 * tr->nb[1]);
    struct wsp_ggml_tensor * xrow = wsp_ggml_view_1d(ctx, m->x, N_TOK, 5 * sizeof(float));
    struct wsp_ggml_tensor * sum = wsp_ggml_add(ctx, wsp_ggml_cont(ctx, rows), xrow);
    wsp_ggml_set_name(sum, "attn_rows");
    wsp_ggml_build_forward_expand(gf, c16);
    wsp_ggml_build_forward_expand(gf, sum);
    wsp_ggml_set_name(kq, "attn_kq");
    struct wsp_ggml_tensor * kq_out = wsp_ggml_soft_max(ctx, wsp_ggml_cont(ctx, wsp_ggml_transpose(ctx, wsp_ggml_view_2d(ctx, kq, N_TOK, N_TOK, kq->nb[1], 0))));
    wsp_ggml_set_name(kq_out, "attn_kq_t");
    wsp_ggml_build_forward_expand(gf, kq_out);
    outs[0] = c16;
    outs[1] = sum;
    outs[2] = kq_out;
    return 3;
}

// quantized weights: q4_0 and q8_0 mul_mat, f16 mul_mat, add
static int build_quant(struct wsp_ggml_context * ctx, struct model * m, struct wsp_ggml_cgraph * gf,
                       struct wsp_ggml_tensor ** outs) {
    struct wsp_ggml_tensor * y4 = wsp_ggml_mul_mat(ctx, m->w_q4, m->x);
    struct wsp_ggml_tensor * y8 = wsp_ggml_mul_mat(ctx, m->w_q8, m->x);
    struct wsp_ggml_tensor * y16 = wsp_ggml_mul_mat(ctx, m->w_f16, m->x);
    struct wsp_ggml_tensor * s = wsp_ggml_add(ctx, wsp_ggml_add(ctx, y4, y8), y16);
    wsp_ggml_set_name(s, "quant_sum");
    struct wsp_ggml_tensor * only4 = wsp_ggml_mul_mat(ctx, m->w_q4, wsp_ggml_view_2d(ctx, m->x, N_EMBD, 2, m->x->nb[1], 3 * m->x->nb[1]));
    wsp_ggml_set_name(only4, "quant_q4");
    wsp_ggml_build_forward_expand(gf, s);
    wsp_ggml_build_forward_expand(gf, only4);
    outs[0] = s;
    outs[1] = only4;
    return 2;
}

// get_rows, transpose, cont, cpy into a pre-allocated tensor, view, mul
static int build_rows(struct wsp_ggml_context * ctx, struct model * m, struct wsp_ggml_cgraph * gf,
                      struct wsp_ggml_tensor ** outs) {
    struct wsp_ggml_tensor * r = wsp_ggml_get_rows(ctx, m->emb, m->idx);         // [32, 6]
    struct wsp_ggml_tensor * t = wsp_ggml_cpy(ctx, wsp_ggml_transpose(ctx, r), m->orows); // [6, 32]
    wsp_ggml_set_name(t, "rows_t");
    struct wsp_ggml_tensor * v = wsp_ggml_view_2d(ctx, r, 32, 3, r->nb[1], 1 * r->nb[1]);
    struct wsp_ggml_tensor * e = wsp_ggml_view_2d(ctx, m->emb, 32, 1, m->emb->nb[1], 4 * m->emb->nb[1]);
    struct wsp_ggml_tensor * p = wsp_ggml_mul(ctx, wsp_ggml_cont(ctx, v), e);
    p = wsp_ggml_soft_max(ctx, p);
    wsp_ggml_set_name(p, "rows_p");
    wsp_ggml_build_forward_expand(gf, t);
    wsp_ggml_build_forward_expand(gf, p);
    outs[0] = t;
    outs[1] = p;
    return 2;
}

struct graph_def {
    const char * name;
    build_fn build;
};

static const struct graph_def graphs[] = {
    { "mlp", build_mlp },
    { "attn", build_attn },
    { "quant", build_quant },
    { "rows", build_rows },
};

// ---------------------------------------------------------------------------

static void print_graph(const char * label, struct wsp_ggml_cgraph * gf) {
    printf("%s graph n_nodes=%d n_leafs=%d ops:", label, gf->n_nodes, gf->n_leafs);
    for (int i = 0; i < gf->n_nodes; i++) {
        printf(" %s", wsp_ggml_op_name(gf->nodes[i]->op));
    }
    printf("\n");
}

static void zero_tensor(struct wsp_ggml_tensor * t) {
    size_t n = wsp_ggml_nbytes(t);
    void * z = calloc(1, n);
    wsp_ggml_backend_tensor_set(t, z, 0, n);
    free(z);
}

enum mode { MODE_COMPUTE, MODE_PLAN };

static void run_graph(struct model * m, const struct graph_def * def, const int * thread_counts, int n_thread_counts) {
    wsp_ggml_backend_t backend = m->backend;
    char label[96];
    snprintf(label, sizeof(label), "%s %s", wsp_ggml_backend_name(backend), def->name);
    struct wsp_ggml_tensor * outs[MAX_OUTS];

    // 1. measure
    size_t mem;
    {
        struct wsp_ggml_context * ctx0 = make_ctx(128, true, true, 0);
        struct wsp_ggml_cgraph * gf = wsp_ggml_new_graph(ctx0);
        def->build(ctx0, m, gf, outs);
        wsp_ggml_allocr_t measure = wsp_ggml_allocr_new_measure_from_backend(backend);
        printf("%s measure is_measure=%d\n", label, (int)wsp_ggml_allocr_is_measure(measure));
        mem = wsp_ggml_allocr_alloc_graph(measure, gf);
        if (m->exact_layout) {
            printf("%s measured=%zu\n", label, mem);
        } else {
            printf("~le %s measured %zu\n", label, mem);
        }
        wsp_ggml_allocr_free(measure);
        wsp_ggml_free(ctx0);
    }

    // 2. real allocation in a buffer of the measured size
    struct wsp_ggml_context * ctx = make_ctx(128, true, true, 0);
    struct wsp_ggml_cgraph * gf = wsp_ggml_new_graph(ctx);
    int n_outs = def->build(ctx, m, gf, outs);
    print_graph(label, gf);
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_alloc_buffer(backend, mem);
    wsp_ggml_allocr_t alloc = wsp_ggml_allocr_new_from_buffer(buf);
    size_t used = wsp_ggml_allocr_alloc_graph(alloc, gf);
    if (m->exact_layout) {
        printf("%s allocated=%zu\n", label, used);
        // node placement is fully determined by ggml-alloc when the bases are aligned
        printf("%s offsets:", label);
        char * base = (char *)wsp_ggml_backend_buffer_get_base(buf);
        for (int i = 0; i < gf->n_nodes; i++) {
            struct wsp_ggml_tensor * n = gf->nodes[i];
            if (n->buffer == buf) {
                printf(" %td", (char *)n->data - base);
            } else {
                printf(" w");
            }
        }
        printf("\n");
    } else {
        printf("~le %s allocated %zu\n", label, used);
    }
    for (int i = 0; i < gf->n_nodes; i++) {
        CHECK(gf->nodes[i]->data != NULL);
        CHECK(wsp_ggml_get_backend(gf->nodes[i]) == backend);
    }

    // supports_op for every node
    // (not asked where the slot is NULL, as in CUDA's backend: the original
    // calls the slot unguarded)
    printf("%s supports_op:", label);
    for (int i = 0; i < gf->n_nodes && backend->iface.supports_op != NULL; i++) {
        printf(" %d", (int)wsp_ggml_backend_supports_op(backend, gf->nodes[i]));
    }
    printf("\n");

    // 3. compute in every mode
    for (int ti = 0; ti < n_thread_counts; ti++) {
        if (wsp_ggml_backend_is_cpu(backend)) {
            wsp_ggml_backend_cpu_set_n_threads(backend, thread_counts[ti]);
        }
        for (int mode = MODE_COMPUTE; mode <= MODE_PLAN; mode++) {
            for (int o = 0; o < n_outs; o++) {
                zero_tensor(outs[o]);
            }
            // a backend without plans (Metal's pattern) computes the graph
            // directly in plan mode too: the original calls the slots unguarded
            if (mode == MODE_COMPUTE || backend->iface.graph_plan_create == NULL) {
                wsp_ggml_backend_graph_compute(backend, gf);
            } else {
                wsp_ggml_backend_graph_plan_t plan = wsp_ggml_backend_graph_plan_create(backend, gf);
                wsp_ggml_backend_graph_plan_compute(backend, plan);
                // a plan can be computed more than once
                if (ti == 0) {
                    wsp_ggml_backend_graph_plan_compute(backend, plan);
                }
                wsp_ggml_backend_graph_plan_free(backend, plan);
            }
            for (int o = 0; o < n_outs; o++) {
                char l2[160];
                snprintf(l2, sizeof(l2), "%s nt=%d %s %s", label, thread_counts[ti], mode == MODE_COMPUTE ? "compute" : "plan",
                         wsp_ggml_get_name(outs[o]));
                if (ti == 0 && mode == MODE_COMPUTE && outs[o]->type == WSP_GGML_TYPE_F32) {
                    print_tensor_all_f32(l2, outs[o]);
                } else {
                    print_tensor(l2, outs[o], 4);
                }
            }
        }
    }

    wsp_ggml_allocr_free(alloc);
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_free(ctx);
}

int main(void) {
    init_host_data();
    // tables of ggml are initialized by the first context
    struct wsp_ggml_context * dummy = make_ctx(1, false, true, 0);

    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    const int rejected[] = { WSP_GGML_OP_SOFT_MAX, WSP_GGML_OP_GET_ROWS, -1 };
    struct test_backend_options o1 = { "TGH", 32, true, false, true, rejected, 0, false, 0, NULL, 0, TB_SHAPE_DEFAULT };
    struct test_backend_options o2 = { "TGP", 128, false, true, false, NULL, 0, false, 0, NULL, 0, TB_SHAPE_DEFAULT };
    wsp_ggml_backend_t t1 = test_backend_new(&o1);
    wsp_ggml_backend_t t2 = test_backend_new(&o2);

    const int cpu_threads[] = { 1, 2 };
    const int one_thread[] = { 1 };
    const int n_graphs = (int)(sizeof(graphs) / sizeof(graphs[0]));

    struct model mc;
    make_model(&mc, cpu, false);
    for (int i = 0; i < n_graphs; i++) {
        run_graph(&mc, &graphs[i], cpu_threads, 2);
    }
    free_model(&mc);

    struct model m1;
    make_model(&m1, t1, true);
    for (int i = 0; i < n_graphs; i++) {
        run_graph(&m1, &graphs[i], one_thread, 1);
    }
    free_model(&m1);
    test_backend_print_stats(t1);

    struct model m2;
    make_model(&m2, t2, true);
    for (int i = 0; i < n_graphs; i++) {
        run_graph(&m2, &graphs[i], one_thread, 1);
    }
    free_model(&m2);
    test_backend_print_stats(t2);

    printf("live test buffers: %ld\n", test_backend_live_buffers());
    wsp_ggml_backend_free(t1);
    wsp_ggml_backend_free(t2);
    wsp_ggml_backend_free(cpu);
    wsp_ggml_free(dummy);
    return 0;
}
