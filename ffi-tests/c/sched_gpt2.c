// A client of the scheduler shaped like ggml's gpt-2 example with a GPU
// (ggml a5e45604, examples/gpt-2/main.cpp with n_gpu_layers > 0): the
// scheduler over [second backend, CPU]; the last NGL layers' weights (and
// the output head when NGL > 0, the embeddings when NGL > n_layer, the KV
// cache when NGL >= n_layer/2) in the second backend's buffer, the rest in a
// CPU buffer; a worst-case graph measured once; then a prompt and one token
// at a time, the graph built anew every compute in a fresh context on the
// same memory (the shapes change with n_past).
//
// Usage: sched_gpt2 NGL TYPE [N_LAYER [LM_HEAD]]
//   TYPE: f32, f16 or q4_0 (the 2-D weights); N_LAYER: 4 by default;
//   LM_HEAD: 1 gives the model its own lm_head (else wte is copied into it,
//   as GPT-2 shares them).
// The second backend is the test backend (test_backend.c; its slot pattern
// from TEST_BACKEND_SHAPE), or with WSP_GGML_USE_CUBLAS the CUDA backend of
// ggml-cuda.cu. Weights are random with a fixed seed. It prints the compute
// buffer sizes, every step's greedy token and a hash of its logits' bytes;
// "~ " lines (times) are informational.
#include "common.h"

#ifdef WSP_GGML_USE_CUBLAS
#include "ggml-cuda.h"
#else
#include "test_backend.h"
#endif

#include <math.h>
#include <time.h>

// The example's graphs hold 4096 nodes; here 2048, the default: the
// original indexes its global `causes` array (room for 12288) by hash slot,
// and a graph of 4096 gets 12305 slots, so a node hashed past the end
// overwrites whatever follows the array (a hang in ggml_free's lock was
// seen), depending on addresses.
#define G2_MAX_NODES 2048

struct g2_layer {
    struct wsp_ggml_tensor *ln_1_g, *ln_1_b, *ln_2_g, *ln_2_b;
    struct wsp_ggml_tensor *attn_w, *attn_b, *proj_w, *proj_b;
    struct wsp_ggml_tensor *fc_w, *fc_b, *mlp_proj_w, *mlp_proj_b;
};

struct g2_model {
    int n_vocab, n_ctx, n_embd, n_head, n_layer;
    float eps;
    enum wsp_ggml_type wtype;
    struct wsp_ggml_tensor *ln_f_g, *ln_f_b, *wte, *wpe, *lm_head;
    struct g2_layer * layers;
    struct wsp_ggml_tensor *memory_k, *memory_v, *embd, *position, *kq_scale;
    struct wsp_ggml_context * ctx_w;
    wsp_ggml_backend_t gpu, cpu;
    wsp_ggml_backend_buffer_t buf_w[2], buf_kv, buf_in;
};

static wsp_ggml_backend_t g2_second_backend(void) {
#ifdef WSP_GGML_USE_CUBLAS
    wsp_ggml_backend_t b = wsp_ggml_backend_cuda_init();
#else
    struct test_backend_options o;
    memset(&o, 0, sizeof(o));
    o.name = "GPU";
    o.alignment = 128;
    o.has_cpy_tensor_from = true;
    o.has_cpy_tensor_to = true;
    o.has_buffer_hooks = true;
    wsp_ggml_backend_t b = test_backend_new(&o);
#endif
    CHECK(b != NULL);
    return b;
}

static int g2_threads(void) {
    const char * e = getenv("G2_THREADS");
    return e != NULL && atoi(e) > 0 ? atoi(e) : 1;
}

// Fill `t` (already allocated) with random values of its type, written as
// the example loads a model: straight into CPU memory, through tensor_set
// elsewhere.
static void g2_fill(struct wsp_ggml_tensor * t, struct lcg * r, float scale, bool ones) {
    int64_t n = wsp_ggml_nelements(t);
    float * f = (float *)malloc(sizeof(float) * (size_t)n);
    CHECK(f != NULL);
    for (int64_t i = 0; i < n; i++) {
        f[i] = ones ? 1.0f + 0.1f * lcg_f32(r) : scale * lcg_f32(r);
    }
    size_t nbytes = wsp_ggml_nbytes(t);
    void * data = malloc(nbytes);
    CHECK(data != NULL);
    switch (t->type) {
        case WSP_GGML_TYPE_F32: memcpy(data, f, nbytes); break;
        case WSP_GGML_TYPE_F16: wsp_ggml_fp32_to_fp16_row(f, (wsp_ggml_fp16_t *)data, (int)n); break;
        case WSP_GGML_TYPE_Q4_0: {
            int64_t hist[16] = { 0 };
            wsp_ggml_quantize_q4_0(f, data, (int)n, (int)t->ne[0], hist);
            break;
        }
        default: CHECK(false && "weight type");
    }
    if (wsp_ggml_backend_is_cpu(wsp_ggml_get_backend(t))) {
        memcpy(t->data, data, nbytes);
    } else {
        wsp_ggml_backend_tensor_set(t, data, 0, nbytes);
    }
    free(data);
    free(f);
}

static void g2_load(struct g2_model * m, int ngl, bool own_lm_head) {
    const int E = m->n_embd, L = m->n_layer;
    struct wsp_ggml_init_params ip = { wsp_ggml_tensor_overhead() * (size_t)(17 + 12 * L), NULL, true };
    m->ctx_w = wsp_ggml_init(ip);
    CHECK(m->ctx_w != NULL);
    struct wsp_ggml_context * ctx = m->ctx_w;

    m->layers = (struct g2_layer *)calloc((size_t)L, sizeof(struct g2_layer));
    CHECK(m->layers != NULL);
    m->ln_f_g = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, E);
    m->ln_f_b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, E);
    m->wte = wsp_ggml_new_tensor_2d(ctx, m->wtype, E, m->n_vocab);
    m->wpe = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, E, m->n_ctx);
    m->lm_head = wsp_ggml_new_tensor_2d(ctx, m->wtype, E, m->n_vocab);
    wsp_ggml_set_name(m->wte, "model/wte");
    wsp_ggml_set_name(m->wpe, "model/wpe");
    wsp_ggml_set_name(m->lm_head, "model/lm_head");
    for (int i = 0; i < L; i++) {
        struct g2_layer * l = &m->layers[i];
        l->ln_1_g = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, E);
        l->ln_1_b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, E);
        l->ln_2_g = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, E);
        l->ln_2_b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, E);
        l->attn_w = wsp_ggml_new_tensor_2d(ctx, m->wtype, E, 3 * E);
        l->attn_b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 3 * E);
        l->proj_w = wsp_ggml_new_tensor_2d(ctx, m->wtype, E, E);
        l->proj_b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, E);
        l->fc_w = wsp_ggml_new_tensor_2d(ctx, m->wtype, E, 4 * E);
        l->fc_b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 4 * E);
        l->mlp_proj_w = wsp_ggml_new_tensor_2d(ctx, m->wtype, 4 * E, E);
        l->mlp_proj_b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, E);
    }

    // which backend holds what (the example's rules)
    wsp_ggml_backend_t gpu = m->gpu, cpu = m->cpu;
    wsp_ggml_backend_t b_in = ngl > L ? gpu : cpu;
    wsp_ggml_backend_t b_out = ngl > 0 ? gpu : cpu;
    const int first_gpu_layer = L - ngl;

    // one weights buffer per backend, sized as the example sizes it
    struct wsp_ggml_tensor * all[12];
    size_t size[2] = { 0, 0 }; // [gpu, cpu]
    size[b_in == gpu ? 0 : 1] += wsp_ggml_nbytes(m->wte) + wsp_ggml_nbytes(m->wpe) + 2 * 512;
    size[b_out == gpu ? 0 : 1] += wsp_ggml_nbytes(m->ln_f_g) + wsp_ggml_nbytes(m->ln_f_b) + wsp_ggml_nbytes(m->lm_head) + 3 * 512;
    for (int i = 0; i < L; i++) {
        struct g2_layer * l = &m->layers[i];
        struct wsp_ggml_tensor * t[12] = { l->ln_1_g, l->ln_1_b, l->ln_2_g, l->ln_2_b, l->attn_w, l->attn_b,
                                          l->proj_w, l->proj_b, l->fc_w, l->fc_b, l->mlp_proj_w, l->mlp_proj_b };
        for (int k = 0; k < 12; k++) {
            size[i >= first_gpu_layer ? 0 : 1] += wsp_ggml_nbytes(t[k]) + 512;
        }
    }
    wsp_ggml_allocr_t alloc[2] = { NULL, NULL };
    wsp_ggml_backend_t bk[2] = { gpu, cpu };
    for (int k = 0; k < 2; k++) {
        m->buf_w[k] = NULL;
        if (size[k] > 0) {
            m->buf_w[k] = wsp_ggml_backend_alloc_buffer(bk[k], size[k]);
            CHECK(m->buf_w[k] != NULL);
            alloc[k] = wsp_ggml_allocr_new_from_buffer(m->buf_w[k]);
        }
    }
#define G2_ALLOC(t, b) wsp_ggml_allocr_alloc(alloc[(b) == gpu ? 0 : 1], (t))
    struct lcg r = lcg_new(2023);
    G2_ALLOC(m->ln_f_g, b_out);
    G2_ALLOC(m->ln_f_b, b_out);
    g2_fill(m->ln_f_g, &r, 0, true);
    g2_fill(m->ln_f_b, &r, 0.1f, false);
    G2_ALLOC(m->wte, b_in);
    G2_ALLOC(m->wpe, b_in);
    g2_fill(m->wte, &r, 0.5f, false);
    g2_fill(m->wpe, &r, 0.1f, false);
    G2_ALLOC(m->lm_head, b_out);
    if (own_lm_head) {
        g2_fill(m->lm_head, &r, 0.5f, false);
    } else {
        wsp_ggml_backend_tensor_copy(m->wte, m->lm_head); // GPT-2 shares wte as the head
    }
    for (int i = 0; i < L; i++) {
        struct g2_layer * l = &m->layers[i];
        wsp_ggml_backend_t b = i >= first_gpu_layer ? gpu : cpu;
        struct wsp_ggml_tensor * t[12] = { l->ln_1_g, l->ln_1_b, l->ln_2_g, l->ln_2_b, l->attn_w, l->attn_b,
                                          l->proj_w, l->proj_b, l->fc_w, l->fc_b, l->mlp_proj_w, l->mlp_proj_b };
        for (int k = 0; k < 12; k++) {
            G2_ALLOC(t[k], b);
            all[k] = t[k];
        }
        g2_fill(l->ln_1_g, &r, 0, true);
        g2_fill(l->ln_1_b, &r, 0.1f, false);
        g2_fill(l->ln_2_g, &r, 0, true);
        g2_fill(l->ln_2_b, &r, 0.1f, false);
        g2_fill(l->attn_w, &r, 0.25f, false);
        g2_fill(l->attn_b, &r, 0.1f, false);
        g2_fill(l->proj_w, &r, 0.25f, false);
        g2_fill(l->proj_b, &r, 0.1f, false);
        g2_fill(l->fc_w, &r, 0.25f, false);
        g2_fill(l->fc_b, &r, 0.1f, false);
        g2_fill(l->mlp_proj_w, &r, 0.125f, false);
        g2_fill(l->mlp_proj_b, &r, 0.1f, false);
    }
    (void)all;
#undef G2_ALLOC
    for (int k = 0; k < 2; k++) {
        if (alloc[k] != NULL) {
            wsp_ggml_allocr_free(alloc[k]);
        }
    }

    // key + value memory
    const int n_elements = E * L * m->n_ctx;
    m->memory_k = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, n_elements);
    m->memory_v = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, n_elements);
    wsp_ggml_set_name(m->memory_k, "model/memory_k");
    wsp_ggml_set_name(m->memory_v, "model/memory_v");
    wsp_ggml_backend_t b_kv = ngl >= L / 2 ? gpu : cpu;
    m->buf_kv = wsp_ggml_backend_alloc_buffer(b_kv, wsp_ggml_nbytes(m->memory_k) + wsp_ggml_nbytes(m->memory_v) + 512 * 2);
    CHECK(m->buf_kv != NULL);
    wsp_ggml_allocr_t a = wsp_ggml_allocr_new_from_buffer(m->buf_kv);
    wsp_ggml_allocr_alloc(a, m->memory_k);
    wsp_ggml_allocr_alloc(a, m->memory_v);
    wsp_ggml_allocr_free(a);

    // inputs: in the second backend only when everything is there (the example's FIXME)
    m->embd = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_I32, m->n_ctx);
    m->position = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_I32, m->n_ctx);
    wsp_ggml_set_name(m->embd, "in/embd");
    wsp_ggml_set_name(m->position, "in/position");
    wsp_ggml_backend_t b_input = ngl >= L ? gpu : cpu;
    m->buf_in = wsp_ggml_backend_alloc_buffer(b_input, wsp_ggml_nbytes(m->embd) + wsp_ggml_nbytes(m->position) + 512 * 3);
    CHECK(m->buf_in != NULL);
    a = wsp_ggml_allocr_new_from_buffer(m->buf_in);
    wsp_ggml_allocr_alloc(a, m->embd);
    wsp_ggml_allocr_alloc(a, m->position);
    // ggml_scale takes its factor as a tensor in this generation
    m->kq_scale = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 1);
    wsp_ggml_set_name(m->kq_scale, "in/kq_scale");
    wsp_ggml_allocr_alloc(a, m->kq_scale);
    wsp_ggml_allocr_free(a);
    const float kq_scale = 1.0f / sqrtf((float)E / (float)m->n_head);
    wsp_ggml_backend_tensor_set(m->kq_scale, &kq_scale, 0, sizeof(kq_scale));

    printf("weights: in %s, out %s, kv %s, input %s, first layer on GPU %d\n", wsp_ggml_backend_name(b_in),
           wsp_ggml_backend_name(b_out), wsp_ggml_backend_name(b_kv), wsp_ggml_backend_name(b_input), first_gpu_layer);
}

// The example's gpt2_graph: a new context on `buf` every call.
static struct wsp_ggml_cgraph * g2_graph(const struct g2_model * m, uint8_t * buf, size_t buf_size, int n_past, const int32_t * tokens,
                                         int N, struct wsp_ggml_context ** ctx_out) {
    const int E = m->n_embd, H = m->n_head, C = m->n_ctx;
    struct wsp_ggml_init_params ip = { buf_size, buf, true };
    struct wsp_ggml_context * ctx = wsp_ggml_init(ip);
    CHECK(ctx != NULL);
    struct wsp_ggml_cgraph * gf = wsp_ggml_new_graph_custom(ctx, G2_MAX_NODES, false);

    struct wsp_ggml_tensor * embd = wsp_ggml_view_1d(ctx, m->embd, N, 0);
    wsp_ggml_backend_tensor_set(m->embd, tokens, 0, (size_t)N * wsp_ggml_element_size(embd));
    struct wsp_ggml_tensor * position = wsp_ggml_view_1d(ctx, m->position, N, 0);
    for (int i = 0; i < N; i++) {
        int32_t v = n_past + i;
        wsp_ggml_backend_tensor_set(m->position, &v, (size_t)i * sizeof(int32_t), sizeof(v));
    }

    struct wsp_ggml_tensor * inpL = wsp_ggml_add(ctx, wsp_ggml_get_rows(ctx, m->wte, embd), wsp_ggml_get_rows(ctx, m->wpe, position));
    wsp_ggml_set_name(inpL, "inpL");
    for (int il = 0; il < m->n_layer; il++) {
        const struct g2_layer * l = &m->layers[il];
        struct wsp_ggml_tensor * cur = wsp_ggml_norm(ctx, inpL, m->eps);
        wsp_ggml_format_name(cur, "l%d.norm", il);
        cur = wsp_ggml_add(ctx, wsp_ggml_mul(ctx, cur, l->ln_1_g), l->ln_1_b);
        wsp_ggml_format_name(cur, "l%d.ln_1_b", il);
        cur = wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, l->attn_w, cur), l->attn_b);
        wsp_ggml_format_name(cur, "l%d.attn_b", il);

        struct wsp_ggml_tensor * Qcur = wsp_ggml_view_2d(ctx, cur, E, N, cur->nb[1], 0 * sizeof(float) * E);
        struct wsp_ggml_tensor * Kcur = wsp_ggml_view_2d(ctx, cur, E, N, cur->nb[1], 1 * sizeof(float) * E);
        struct wsp_ggml_tensor * Vcur = wsp_ggml_view_2d(ctx, cur, E, N, cur->nb[1], 2 * sizeof(float) * E);
        {
            size_t es = wsp_ggml_element_size(m->memory_k);
            struct wsp_ggml_tensor * k = wsp_ggml_view_1d(ctx, m->memory_k, N * E, es * E * (size_t)(il * C + n_past));
            struct wsp_ggml_tensor * v = wsp_ggml_view_1d(ctx, m->memory_v, N * E, es * E * (size_t)(il * C + n_past));
            wsp_ggml_build_forward_expand(gf, wsp_ggml_cpy(ctx, Kcur, k));
            wsp_ggml_build_forward_expand(gf, wsp_ggml_cpy(ctx, Vcur, v));
        }
        struct wsp_ggml_tensor * Q = wsp_ggml_permute(ctx, wsp_ggml_cont_3d(ctx, Qcur, E / H, H, N), 0, 2, 1, 3);
        size_t es = wsp_ggml_element_size(m->memory_k);
        struct wsp_ggml_tensor * K = wsp_ggml_permute(
            ctx, wsp_ggml_reshape_3d(ctx, wsp_ggml_view_1d(ctx, m->memory_k, (n_past + N) * E, (size_t)il * C * es * E), E / H, H, n_past + N),
            0, 2, 1, 3);
        struct wsp_ggml_tensor * KQ = wsp_ggml_mul_mat(ctx, K, Q);
        struct wsp_ggml_tensor * KQ_scaled = wsp_ggml_scale(ctx, KQ, m->kq_scale);
        struct wsp_ggml_tensor * KQ_masked = wsp_ggml_diag_mask_inf(ctx, KQ_scaled, n_past);
        struct wsp_ggml_tensor * KQ_soft_max = wsp_ggml_soft_max(ctx, KQ_masked);
        wsp_ggml_format_name(KQ_soft_max, "l%d.KQ_soft_max", il);
        struct wsp_ggml_tensor * V_trans = wsp_ggml_cont_3d(
            ctx,
            wsp_ggml_permute(ctx,
                             wsp_ggml_reshape_3d(ctx, wsp_ggml_view_1d(ctx, m->memory_v, (n_past + N) * E, (size_t)il * C * es * E),
                                                 E / H, H, n_past + N),
                             1, 2, 0, 3),
            n_past + N, E / H, H);
        struct wsp_ggml_tensor * KQV = wsp_ggml_mul_mat(ctx, V_trans, KQ_soft_max);
        struct wsp_ggml_tensor * KQV_merged = wsp_ggml_permute(ctx, KQV, 0, 2, 1, 3);
        cur = wsp_ggml_cont_2d(ctx, KQV_merged, E, N);
        cur = wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, l->proj_w, cur), l->proj_b);
        cur = wsp_ggml_add(ctx, cur, inpL);
        wsp_ggml_format_name(cur, "l%d.add", il);
        struct wsp_ggml_tensor * inpFF = cur;
        cur = wsp_ggml_norm(ctx, inpFF, m->eps);
        cur = wsp_ggml_add(ctx, wsp_ggml_mul(ctx, cur, l->ln_2_g), l->ln_2_b);
        cur = wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, l->fc_w, cur), l->fc_b);
        cur = wsp_ggml_gelu(ctx, cur);
        wsp_ggml_format_name(cur, "l%d.gelu", il);
        cur = wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, l->mlp_proj_w, cur), l->mlp_proj_b);
        inpL = wsp_ggml_add(ctx, cur, inpFF);
        wsp_ggml_format_name(inpL, "l%d.add2", il);
    }
    inpL = wsp_ggml_norm(ctx, inpL, m->eps);
    inpL = wsp_ggml_add(ctx, wsp_ggml_mul(ctx, inpL, m->ln_f_g), m->ln_f_b);
    inpL = wsp_ggml_mul_mat(ctx, m->lm_head, inpL);
    wsp_ggml_set_name(inpL, "out_lm_head");
    wsp_ggml_build_forward_expand(gf, inpL);
    *ctx_out = ctx;
    return gf;
}

static uint64_t g2_fnv(const void * p, size_t n) {
    const uint8_t * b = (const uint8_t *)p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ b[i]) * 1099511628211ULL;
    }
    return h;
}

static uint64_t g2_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s NGL f32|f16|q4_0 [N_LAYER [LM_HEAD]]\n", argv[0]);
        return 2;
    }
    struct g2_model m;
    memset(&m, 0, sizeof(m));
    int ngl = atoi(argv[1]);
    m.wtype = strcmp(argv[2], "f16") == 0 ? WSP_GGML_TYPE_F16 : strcmp(argv[2], "q4_0") == 0 ? WSP_GGML_TYPE_Q4_0 : WSP_GGML_TYPE_F32;
    CHECK(strcmp(argv[2], "f32") == 0 || m.wtype != WSP_GGML_TYPE_F32);
    m.n_layer = argc > 3 ? atoi(argv[3]) : 4;
    bool own_lm_head = argc > 4 && atoi(argv[4]) != 0;
    CHECK(m.n_layer > 0 && ngl >= 0);
    m.n_vocab = 96;
    m.n_ctx = 48;
    m.n_embd = 64;
    m.n_head = 4;
    m.eps = 1e-5f;

    struct wsp_ggml_init_params gp = { 0, NULL, true };
    wsp_ggml_free(wsp_ggml_init(gp)); // ggml's tables (fp16) before any conversion

    m.gpu = g2_second_backend();
    m.cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(m.cpu, g2_threads());
    g2_load(&m, ngl, own_lm_head);

    size_t buf_size = wsp_ggml_tensor_overhead() * G2_MAX_NODES + wsp_ggml_graph_overhead_custom(G2_MAX_NODES, false);
    uint8_t * buf = (uint8_t *)malloc(buf_size);
    CHECK(buf != NULL);

    // the scheduler: [GPU, CPU] when layers are offloaded, as the example
    wsp_ggml_backend_t backends[2] = { m.gpu, m.cpu };
    int n_backends = ngl > 0 ? 2 : 1;
    wsp_ggml_backend_t * list = ngl > 0 ? backends : &backends[1];
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(list, n_backends);
    const int n_batch = 8;
    {
        int32_t zeros[8] = { 0 };
        struct wsp_ggml_context * ctx;
        struct wsp_ggml_cgraph * gf = g2_graph(&m, buf, buf_size, m.n_ctx - n_batch, zeros, n_batch, &ctx);
        wsp_ggml_backend_sched_init_measure(sched, gf);
        wsp_ggml_free(ctx);
        // (the original's CPU measure counts the misalignment of its
        // buffer's malloc'ed base, ours is aligned: ours may be smaller)
        for (int i = 0; i < n_backends; i++) {
            printf("%scompute buffer %s %zu\n", wsp_ggml_backend_is_cpu(list[i]) ? "~le " : "", wsp_ggml_backend_name(list[i]),
                   wsp_ggml_backend_buffer_get_size(wsp_ggml_backend_sched_get_buffer(sched, list[i])));
        }
    }

    // a prompt of n_batch tokens, then greedy tokens one at a time
    int32_t tokens[8];
    struct lcg r = lcg_new(7);
    for (int i = 0; i < n_batch; i++) {
        tokens[i] = (int32_t)(lcg_u32(&r) % (uint32_t)m.n_vocab);
    }
    int N = n_batch, n_past = 0;
    float * logits = (float *)malloc(sizeof(float) * (size_t)m.n_vocab);
    CHECK(logits != NULL);
    uint64_t compute_us = 0;
    const int n_steps = m.n_ctx - n_batch - 4;
    for (int step = 0; step < n_steps; step++) {
        struct wsp_ggml_context * ctx;
        struct wsp_ggml_cgraph * gf = g2_graph(&m, buf, buf_size, n_past, tokens, N, &ctx);
        uint64_t t0 = g2_now_us();
        wsp_ggml_backend_sched_graph_compute(sched, gf);
        struct wsp_ggml_tensor * out = gf->nodes[gf->n_nodes - 1];
        wsp_ggml_backend_tensor_get(out, logits, (size_t)m.n_vocab * (size_t)(N - 1) * sizeof(float), sizeof(float) * (size_t)m.n_vocab);
        compute_us += g2_now_us() - t0;
        wsp_ggml_free(ctx);
        int best = 0;
        for (int i = 1; i < m.n_vocab; i++) {
            if (logits[i] > logits[best]) {
                best = i;
            }
        }
        printf("step %d n_past %d token %d logits %016" PRIx64 "\n", step, n_past, best, g2_fnv(logits, sizeof(float) * (size_t)m.n_vocab));
        n_past += N;
        N = 1;
        tokens[0] = best;
    }
    printf("~ time compute_us %" PRIu64 " steps %d\n", compute_us, n_steps);

#ifndef WSP_GGML_USE_CUBLAS
    test_backend_print_stats(m.gpu);
    CHECK(test_backend_stats(m.gpu)->uninit_computed == 0);
#endif

    wsp_ggml_backend_sched_free(sched);
    free(logits);
    free(buf);
    for (int k = 0; k < 2; k++) {
        if (m.buf_w[k] != NULL) {
            wsp_ggml_backend_buffer_free(m.buf_w[k]);
        }
    }
    wsp_ggml_backend_buffer_free(m.buf_kv);
    wsp_ggml_backend_buffer_free(m.buf_in);
    wsp_ggml_free(m.ctx_w);
    free(m.layers);
    wsp_ggml_backend_free(m.gpu);
    wsp_ggml_backend_free(m.cpu);
    return 0;
}
