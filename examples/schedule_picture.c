// A picture of how the scheduler split a graph: a gpt-2-shaped model (token
// and position embeddings, two transformer blocks, a head) whose second
// block and head live on `gpu`, the rest on `cpu`; the graph is measured,
// computed, and its schedule written as Graphviz DOT to schedule.dot (or the
// file named by the first argument). Render it with Graphviz:
//
//   dot -Tsvg schedule.dot -o schedule.svg
//
// (scripts/render-schedule in this repository does the same). Without
// changing a program, WSP_GGML_SCHED_DOT=schedule.dot writes the picture at
// each wsp_ggml_backend_sched_init_measure.
//
// Build against the installed library (docs/install.md):
//
//   cc -o schedule_picture schedule_picture.c ggml.o ggml-alloc.o ggml-quants.o $(pkg-config --cflags --libs wsp_ggml_backend) -Ipath/to/ggml -lm -lpthread
#include "ggml-alloc.h"
#include "ggml-backend-ext.h" // includes ggml-backend.h
#include "ggml.h"

#include <math.h>
#include <stdio.h>

#define N_EMBD 16
#define N_HEAD 2
#define N_TOK 4
#define N_VOCAB 32
#define N_LAYER 2

struct block {
    struct wsp_ggml_tensor *ln1_g, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b;
    struct wsp_ggml_tensor *ln2_g, *ln2_b, *fc_w, *fc_b, *mlp_w, *mlp_b;
};

struct model {
    struct wsp_ggml_tensor *wte, *wpe, *tokens, *pos, *kq_scale; // on cpu
    struct block blocks[N_LAYER];                                // block 0 on cpu, block 1 on gpu
    struct wsp_ggml_tensor *ln_f_g, *ln_f_b, *head;              // on gpu
};

static struct wsp_ggml_tensor * norm(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * x, struct wsp_ggml_tensor * g,
                                     struct wsp_ggml_tensor * b) {
    return wsp_ggml_add(ctx, wsp_ggml_mul(ctx, wsp_ggml_norm(ctx, x, 1e-5f), g), b);
}

static struct wsp_ggml_tensor * linear(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * w, struct wsp_ggml_tensor * b,
                                       struct wsp_ggml_tensor * x) {
    return wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, w, x), b);
}

// gpt-2's graph, as ggml's gpt-2 example builds it (without the KV cache).
static struct wsp_ggml_cgraph * build_graph(struct wsp_ggml_context * ctx, const struct model * m) {
    const int hd = N_EMBD / N_HEAD;
    struct wsp_ggml_tensor * x = wsp_ggml_add(ctx, wsp_ggml_get_rows(ctx, m->wte, m->tokens), wsp_ggml_get_rows(ctx, m->wpe, m->pos));
    for (int il = 0; il < N_LAYER; il++) {
        const struct block * b = &m->blocks[il];
        struct wsp_ggml_tensor * qkv = linear(ctx, b->attn_w, b->attn_b, norm(ctx, x, b->ln1_g, b->ln1_b));
        struct wsp_ggml_tensor * q = wsp_ggml_cont(ctx, wsp_ggml_view_2d(ctx, qkv, N_EMBD, N_TOK, qkv->nb[1], 0));
        struct wsp_ggml_tensor * k = wsp_ggml_cont(ctx, wsp_ggml_view_2d(ctx, qkv, N_EMBD, N_TOK, qkv->nb[1], N_EMBD * sizeof(float)));
        struct wsp_ggml_tensor * v = wsp_ggml_cont(ctx, wsp_ggml_view_2d(ctx, qkv, N_EMBD, N_TOK, qkv->nb[1], 2 * N_EMBD * sizeof(float)));
        q = wsp_ggml_permute(ctx, wsp_ggml_reshape_3d(ctx, q, hd, N_HEAD, N_TOK), 0, 2, 1, 3);
        k = wsp_ggml_permute(ctx, wsp_ggml_reshape_3d(ctx, k, hd, N_HEAD, N_TOK), 0, 2, 1, 3);
        struct wsp_ggml_tensor * kq = wsp_ggml_soft_max(ctx, wsp_ggml_scale(ctx, wsp_ggml_mul_mat(ctx, k, q), m->kq_scale));
        v = wsp_ggml_cont(ctx, wsp_ggml_permute(ctx, wsp_ggml_reshape_3d(ctx, v, hd, N_HEAD, N_TOK), 1, 2, 0, 3));
        struct wsp_ggml_tensor * att = wsp_ggml_cont_2d(ctx, wsp_ggml_permute(ctx, wsp_ggml_mul_mat(ctx, v, kq), 0, 2, 1, 3), N_EMBD, N_TOK);
        x = wsp_ggml_add(ctx, linear(ctx, b->proj_w, b->proj_b, att), x);
        struct wsp_ggml_tensor * ff = wsp_ggml_gelu(ctx, linear(ctx, b->fc_w, b->fc_b, norm(ctx, x, b->ln2_g, b->ln2_b)));
        x = wsp_ggml_add(ctx, linear(ctx, b->mlp_w, b->mlp_b, ff), x);
        wsp_ggml_format_name(x, "block%d_out", il);
    }
    struct wsp_ggml_tensor * logits = wsp_ggml_mul_mat(ctx, m->head, norm(ctx, x, m->ln_f_g, m->ln_f_b));
    wsp_ggml_set_name(logits, "logits");
    struct wsp_ggml_cgraph * graph = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(graph, logits);
    return graph;
}

static struct wsp_ggml_tensor * tensor(struct wsp_ggml_context * ctx, int n0, int n1, const char * name) {
    struct wsp_ggml_tensor * t = n1 > 1 ? wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, n0, n1) : wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, n0);
    wsp_ggml_set_name(t, name);
    return t;
}

static void make_block(struct wsp_ggml_context * ctx, struct block * b) {
    b->ln1_g = tensor(ctx, N_EMBD, 1, "ln_1.g"), b->ln1_b = tensor(ctx, N_EMBD, 1, "ln_1.b");
    b->attn_w = tensor(ctx, N_EMBD, 3 * N_EMBD, "attn.w"), b->attn_b = tensor(ctx, 3 * N_EMBD, 1, "attn.b");
    b->proj_w = tensor(ctx, N_EMBD, N_EMBD, "proj.w"), b->proj_b = tensor(ctx, N_EMBD, 1, "proj.b");
    b->ln2_g = tensor(ctx, N_EMBD, 1, "ln_2.g"), b->ln2_b = tensor(ctx, N_EMBD, 1, "ln_2.b");
    b->fc_w = tensor(ctx, N_EMBD, 4 * N_EMBD, "fc.w"), b->fc_b = tensor(ctx, 4 * N_EMBD, 1, "fc.b");
    b->mlp_w = tensor(ctx, 4 * N_EMBD, N_EMBD, "mlp.w"), b->mlp_b = tensor(ctx, N_EMBD, 1, "mlp.b");
}

// Every tensor of ctx in one buffer of `backend`, small values in each.
static wsp_ggml_backend_buffer_t load(struct wsp_ggml_context * ctx, wsp_ggml_backend_t backend) {
    size_t size = 0;
    for (struct wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(ctx); t != NULL; t = wsp_ggml_get_next_tensor(ctx, t)) {
        size += wsp_ggml_nbytes(t) + wsp_ggml_backend_get_alignment(backend);
    }
    wsp_ggml_backend_buffer_t buffer = wsp_ggml_backend_alloc_buffer(backend, size);
    wsp_ggml_tallocr_t alloc = wsp_ggml_tallocr_new_from_buffer(buffer);
    float v[4 * N_EMBD * N_EMBD];
    for (struct wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(ctx); t != NULL; t = wsp_ggml_get_next_tensor(ctx, t)) {
        wsp_ggml_tallocr_alloc(alloc, t);
        if (t->type == WSP_GGML_TYPE_F32) {
            for (int64_t i = 0; i < wsp_ggml_nelements(t); i++) {
                v[i] = 0.01f * (float)(i % 7);
            }
            wsp_ggml_backend_tensor_set(t, v, 0, wsp_ggml_nbytes(t));
        }
    }
    wsp_ggml_tallocr_free(alloc);
    return buffer;
}

// The picture's text comes a line at a time; here it goes to a file.
static void write_to_file(const char * text, size_t len, void * user_data) {
    fwrite(text, 1, len, (FILE *)user_data);
}

int main(int argc, char ** argv) {
    const char * path = argc > 1 ? argv[1] : "schedule.dot";
    wsp_ggml_backend_t gpu = wsp_ggml_backend_cpu_init(); // stands in for a GPU backend
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();

    // the weights: one context (headers only) per backend
    struct wsp_ggml_init_params p = { 64 * wsp_ggml_tensor_overhead(), NULL, true };
    struct wsp_ggml_context * ctx_cpu = wsp_ggml_init(p);
    struct wsp_ggml_context * ctx_gpu = wsp_ggml_init(p);
    struct model m;
    m.wte = tensor(ctx_cpu, N_EMBD, N_VOCAB, "wte"), m.wpe = tensor(ctx_cpu, N_EMBD, N_TOK, "wpe");
    m.tokens = wsp_ggml_new_tensor_1d(ctx_cpu, WSP_GGML_TYPE_I32, N_TOK), m.pos = wsp_ggml_new_tensor_1d(ctx_cpu, WSP_GGML_TYPE_I32, N_TOK);
    wsp_ggml_set_name(m.tokens, "tokens"), wsp_ggml_set_name(m.pos, "pos");
    m.kq_scale = tensor(ctx_cpu, 1, 1, "kq_scale");
    make_block(ctx_cpu, &m.blocks[0]);
    make_block(ctx_gpu, &m.blocks[1]);
    m.ln_f_g = tensor(ctx_gpu, N_EMBD, 1, "ln_f.g"), m.ln_f_b = tensor(ctx_gpu, N_EMBD, 1, "ln_f.b");
    m.head = tensor(ctx_gpu, N_EMBD, N_VOCAB, "head");
    wsp_ggml_backend_buffer_t buf_cpu = load(ctx_cpu, cpu);
    wsp_ggml_backend_buffer_t buf_gpu = load(ctx_gpu, gpu);
    int32_t tokens[N_TOK] = { 3, 1, 4, 1 }, pos[N_TOK] = { 0, 1, 2, 3 };
    float scale = 1.0f / sqrtf((float)(N_EMBD / N_HEAD));
    wsp_ggml_backend_tensor_set(m.tokens, tokens, 0, sizeof tokens);
    wsp_ggml_backend_tensor_set(m.pos, pos, 0, sizeof pos);
    wsp_ggml_backend_tensor_set(m.kq_scale, &scale, 0, sizeof scale);

    wsp_ggml_backend_t backends[2] = { gpu, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    struct wsp_ggml_init_params gp = { 256 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), NULL, true };
    struct wsp_ggml_context * ctx = wsp_ggml_init(gp);
    struct wsp_ggml_cgraph * graph = build_graph(ctx, &m);
    wsp_ggml_backend_sched_init_measure(sched, graph);
    wsp_ggml_backend_sched_graph_compute(sched, graph);

    // The picture of the split just computed: the graph must be the one the
    // scheduler split last.
    FILE * f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        return 1;
    }
    wsp_ggml_backend_sched_write_dot(sched, graph, write_to_file, f);
    fclose(f);
    printf("%d nodes in %d splits; wrote %s\n", graph->n_nodes, wsp_ggml_backend_sched_get_n_splits(sched), path);

    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_buffer_free(buf_cpu);
    wsp_ggml_backend_buffer_free(buf_gpu);
    wsp_ggml_free(ctx_cpu);
    wsp_ggml_free(ctx_gpu);
    wsp_ggml_backend_free(gpu);
    wsp_ggml_backend_free(cpu);
    return 0;
}
