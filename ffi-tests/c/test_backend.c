// A test backend written in C against ggml-backend-impl.h (see test_backend.h).
//
// Notes on compatibility between the original ggml-backend.c and the Rust
// replacement:
//   - the original calls cpy_tensor_from / cpy_tensor_to with backend->context
//     as the first argument, the replacement passes the backend itself, so
//     those two functions never look at their first argument; they find their
//     own backend through the tensors' buffers instead.
//   - buffers hold a reference to the backend context (refcounted), so the
//     backend and its buffers can be freed in any order.
#include "test_backend.h"

#include "ggml.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TB_CHECK(cond)                                                                        \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fflush(stdout);                                                                   \
            fprintf(stderr, "%s:%d: test backend check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

struct tb_context {
    char * name;
    size_t alignment;
    bool has_cpy_tensor_from;
    bool has_cpy_tensor_to;
    bool has_buffer_hooks;
    enum test_backend_shape shape;
    int * rejected_ops;
    int n_rejected_ops;
    bool corrupt;
    int corrupt_unary;
    wsp_ggml_backend_t delegate;
    size_t max_alloc;
    struct test_backend_stats stats;
    int refs; // the backend itself + each live buffer
    struct tb_buffer ** buffers; // the live buffers (CUDA shape: whose rings hold valid extras)
    int n_buffers;
    bool log; // TEST_BACKEND_LOG, read when the backend is made (no global state: threads)
};

// CUDA shape: what init_tensor gives a tensor as its `extra` (ggml-cuda.cu's
// wsp_ggml_tensor_extra_gpu holds the device address the kernels use).
struct tb_extra {
    const struct tb_buffer * buffer;
    void * data;
};
#define TB_EXTRAS 4096 // ggml-cuda.cu's ring per buffer holds 8192: half, so that a wrap shows sooner

struct tb_buffer {
    struct tb_context * owner;
    void * mem;   // malloc'd block
    char * base;  // aligned start inside mem
    size_t size;  // usable bytes from base
    struct tb_extra * extras; // CUDA shape: the ring, made on first use
    size_t next_extra;
};

static void tb_log_graph(const struct tb_context * ctx, const struct wsp_ggml_cgraph * g);
static void tb_buffer_free_buffer(wsp_ggml_backend_buffer_t buffer);

enum test_backend_shape test_backend_resolve_shape(enum test_backend_shape shape) {
    if (shape != TB_SHAPE_DEFAULT) {
        return shape;
    }
    const char * e = getenv("TEST_BACKEND_SHAPE");
    if (e == NULL || e[0] == '\0' || strcmp(e, "full") == 0) {
        return TB_SHAPE_FULL;
    }
    if (strcmp(e, "cuda") == 0) {
        return TB_SHAPE_CUDA;
    }
    if (strcmp(e, "metal") == 0) {
        return TB_SHAPE_METAL;
    }
    fprintf(stderr, "test backend: TEST_BACKEND_SHAPE='%s' is not full, cuda or metal\n", e);
    abort();
}

// test_backend_set_hook: called on some iface calls (see test_backend.h).
static test_backend_hook g_hook;
static void * g_hook_data;

void test_backend_set_hook(test_backend_hook hook, void * data) {
    g_hook = hook;
    g_hook_data = data;
}

static void tb_hook(enum test_backend_call call) {
    if (g_hook != NULL) {
        g_hook(call, g_hook_data);
    }
}
static bool tb_rejects(const struct tb_context * ctx, const struct wsp_ggml_tensor * op);

// Non-view nodes of `g` that this backend's supports_op rejects: a scheduler
// must never give it those.
static void tb_count_rejected(struct tb_context * ctx, const struct wsp_ggml_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const struct wsp_ggml_tensor * n = g->nodes[i];
        bool view = n->op == WSP_GGML_OP_RESHAPE || n->op == WSP_GGML_OP_VIEW || n->op == WSP_GGML_OP_PERMUTE || n->op == WSP_GGML_OP_TRANSPOSE;
        if (!view && tb_rejects(ctx, n)) {
            ctx->stats.rejected_computed++;
        }
    }
}

// CUDA shape: a tensor of one of this backend's buffers must carry the extra
// its buffer's init_tensor gave it, still holding its data address (ring
// slots are reused after TB_EXTRAS inits): ggml-cuda.cu computes on the
// address in the extra.
static void tb_check_extra(struct tb_context * ctx, const struct wsp_ggml_tensor * t) {
    if (t == NULL || t->buffer == NULL || t->buffer->iface.free_buffer != tb_buffer_free_buffer) {
        return;
    }
    const struct tb_buffer * b = (const struct tb_buffer *)t->buffer->context;
    if (b->owner != ctx) {
        return;
    }
    // the extra may come from any live buffer of this backend (the original
    // initialises a split input's view through the scheduler's compute buffer)
    const struct tb_extra * e = (const struct tb_extra *)t->extra;
    bool ok = false;
    for (int i = 0; i < ctx->n_buffers && !ok; i++) {
        const struct tb_extra * ring = ctx->buffers[i]->extras;
        ok = ring != NULL && e >= ring && e < ring + TB_EXTRAS && e->data == t->data;
    }
    if (!ok) {
        ctx->stats.uninit_computed++;
    }
}

static void tb_check_extras(struct tb_context * ctx, const struct wsp_ggml_cgraph * g) {
    if (ctx->shape != TB_SHAPE_CUDA) {
        return;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        tb_check_extra(ctx, g->nodes[i]);
        for (int j = 0; j < WSP_GGML_MAX_SRC; j++) {
            tb_check_extra(ctx, g->nodes[i]->src[j]);
        }
    }
}

// The deliberately wrong backend: flip a high mantissa bit of every element
// of each node of the chosen unary op.
static void tb_corrupt(struct tb_context * ctx, const struct wsp_ggml_cgraph * g) {
    if (!ctx->corrupt) {
        return;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        struct wsp_ggml_tensor * n = g->nodes[i];
        if (n->op == WSP_GGML_OP_UNARY && (int)wsp_ggml_get_unary_op(n) == ctx->corrupt_unary) {
            TB_CHECK(n->type == WSP_GGML_TYPE_F32 && wsp_ggml_is_contiguous(n));
            uint32_t * u = (uint32_t *)n->data;
            for (int64_t k = 0; k < wsp_ggml_nelements(n); k++) {
                u[k] ^= 0x00400000u;
            }
            ctx->stats.corrupted++;
        }
    }
}

struct tb_plan {
    struct wsp_ggml_cplan cplan;
    struct wsp_ggml_cgraph graph;
    wsp_ggml_backend_graph_plan_t inner; // the delegate's plan, if any
};

// updated atomically: schedulers on several threads allocate and free buffers
static long g_live_buffers = 0;

static void tb_ctx_unref(struct tb_context * ctx) {
    TB_CHECK(ctx->refs > 0);
    ctx->refs--;
    if (ctx->refs == 0) {
        free(ctx->name);
        free(ctx->rejected_ops);
        free(ctx->buffers);
        free(ctx);
    }
}

static const char * tb_get_name(wsp_ggml_backend_t backend);

static struct tb_context * tb_ctx(wsp_ggml_backend_t backend) {
    TB_CHECK(backend != NULL);
    TB_CHECK(backend->iface.get_name == tb_get_name);
    return (struct tb_context *)backend->context;
}

static struct tb_buffer * tb_buf(wsp_ggml_backend_buffer_t buffer) {
    TB_CHECK(buffer != NULL && buffer->context != NULL);
    return (struct tb_buffer *)buffer->context;
}

// the tensor's bytes [data+offset, data+offset+size) must lie inside one of our buffers
static void tb_check_range(const struct wsp_ggml_tensor * tensor, size_t offset, size_t size) {
    TB_CHECK(tensor->data != NULL && "tensor not allocated");
    TB_CHECK(offset <= wsp_ggml_nbytes(tensor) && size <= wsp_ggml_nbytes(tensor) - offset && "tensor access out of bounds");
    TB_CHECK(tensor->buffer != NULL);
    struct tb_buffer * b = tb_buf(tensor->buffer);
    const char * p = (const char *)tensor->data + offset;
    TB_CHECK(p >= b->base && (size_t)(p - b->base) <= b->size && size <= b->size - (size_t)(p - b->base)
             && "access outside of the test backend buffer");
}

// [data+offset, data+offset+size) inside buffer b (may reach past nbytes: padding)
static void tb_check_range_raw(const struct tb_buffer * b, const struct wsp_ggml_tensor * tensor, size_t offset, size_t size) {
    TB_CHECK(tensor->data != NULL);
    const char * p = (const char *)tensor->data + offset;
    TB_CHECK(p >= b->base && (size_t)(p - b->base) <= b->size && size <= b->size - (size_t)(p - b->base)
             && "padding outside of the test backend buffer");
}

// --- buffer interface ---------------------------------------------------------

static void tb_buffer_free_buffer(wsp_ggml_backend_buffer_t buffer) {
    struct tb_buffer * b = tb_buf(buffer);
    b->owner->stats.calls[TB_BUF_FREE_BUFFER]++;
    free(b->mem);
    free(b->extras);
    struct tb_context * ctx = b->owner;
    for (int i = 0; i < ctx->n_buffers; i++) {
        if (ctx->buffers[i] == b) {
            ctx->buffers[i] = ctx->buffers[--ctx->n_buffers];
            break;
        }
    }
    tb_ctx_unref(b->owner);
    free(b);
    buffer->context = NULL;
    __atomic_sub_fetch(&g_live_buffers, 1, __ATOMIC_SEQ_CST);
}

static void * tb_buffer_get_base(wsp_ggml_backend_buffer_t buffer) {
    struct tb_buffer * b = tb_buf(buffer);
    b->owner->stats.calls[TB_BUF_GET_BASE]++;
    return b->base;
}

static size_t tb_buffer_get_alloc_size(wsp_ggml_backend_buffer_t buffer, struct wsp_ggml_tensor * tensor) {
    struct tb_buffer * b = tb_buf(buffer);
    b->owner->stats.calls[TB_BUF_GET_ALLOC_SIZE]++;
    size_t n = wsp_ggml_nbytes(tensor);
    if (b->owner->shape == TB_SHAPE_CUDA) {
        // ggml-cuda.cu's rule: a quantized tensor's rows padded to a
        // multiple of 512 elements (MATRIX_ROW_PADDING); nothing else
        int64_t ne0 = tensor->ne[0];
        if (wsp_ggml_is_quantized(tensor->type) && ne0 % 512 != 0) {
            n += (size_t)(512 - ne0 % 512) * wsp_ggml_type_size(tensor->type) / (size_t)wsp_ggml_blck_size(tensor->type);
        }
        return n;
    }
    return (n + 31) & ~(size_t)31;
}

static void tb_buffer_init_tensor(wsp_ggml_backend_buffer_t buffer, struct wsp_ggml_tensor * tensor) {
    struct tb_buffer * b = tb_buf(buffer);
    b->owner->stats.calls[TB_BUF_INIT_TENSOR]++; tb_hook(TB_BUF_INIT_TENSOR);
    TB_CHECK(tensor != NULL);
    if (b->owner->shape != TB_SHAPE_CUDA) {
        return;
    }
    // as ggml-cuda.cu: a view at offset 0 shares its source's extra; any
    // other tensor takes the next one of the ring; a non-view's padding
    // (alloc size beyond nbytes) is zeroed, inside the memory the allocator
    // must have reserved for it
    if (tensor->view_src != NULL && tensor->view_offs == 0) {
        tensor->extra = tensor->view_src->extra;
        return;
    }
    if (b->extras == NULL) {
        b->extras = (struct tb_extra *)calloc(TB_EXTRAS, sizeof(struct tb_extra));
        TB_CHECK(b->extras != NULL);
    }
    struct tb_extra * e = &b->extras[b->next_extra];
    b->next_extra = (b->next_extra + 1) % TB_EXTRAS;
    e->buffer = b;
    e->data = tensor->data;
    tensor->extra = e;
    size_t nbytes = wsp_ggml_nbytes(tensor);
    size_t padded = tb_buffer_get_alloc_size(buffer, tensor);
    b->owner->stats.calls[TB_BUF_GET_ALLOC_SIZE]--; // not the library's call
    if (tensor->view_src == NULL && padded > nbytes && tensor->data != NULL) {
        tb_check_range_raw(b, tensor, nbytes, padded - nbytes);
        memset((char *)tensor->data + nbytes, 0, padded - nbytes);
    }
}

static void tb_buffer_free_tensor(wsp_ggml_backend_buffer_t buffer, struct wsp_ggml_tensor * tensor) {
    struct tb_buffer * b = tb_buf(buffer);
    b->owner->stats.calls[TB_BUF_FREE_TENSOR]++;
    TB_CHECK(tensor != NULL);
}

// --- backend interface --------------------------------------------------------

static const char * tb_get_name(wsp_ggml_backend_t backend) {
    struct tb_context * ctx = (struct tb_context *)backend->context;
    ctx->stats.calls[TB_GET_NAME]++;
    return ctx->name;
}

static void tb_free(wsp_ggml_backend_t backend) {
    struct tb_context * ctx = tb_ctx(backend);
    ctx->stats.calls[TB_FREE]++;
    tb_ctx_unref(ctx);
    free(backend);
}

static wsp_ggml_backend_buffer_t tb_alloc_buffer(wsp_ggml_backend_t backend, size_t size) {
    struct tb_context * ctx = tb_ctx(backend);
    ctx->stats.calls[TB_ALLOC_BUFFER]++;
    if (ctx->max_alloc != 0 && size > ctx->max_alloc) {
        return NULL; // out of (device) memory
    }

    struct tb_buffer * b = (struct tb_buffer *)malloc(sizeof(*b));
    TB_CHECK(b != NULL);
    b->owner = ctx;
    b->mem = malloc(size + ctx->alignment);
    TB_CHECK(b->mem != NULL);
    uintptr_t p = (uintptr_t)b->mem;
    p = (p + ctx->alignment - 1) & ~(uintptr_t)(ctx->alignment - 1);
    b->base = (char *)p;
    b->size = size;
    b->extras = NULL;
    b->next_extra = 0;
    struct tb_buffer ** list = (struct tb_buffer **)realloc(ctx->buffers, sizeof(*list) * (size_t)(ctx->n_buffers + 1));
    TB_CHECK(list != NULL);
    ctx->buffers = list;
    ctx->buffers[ctx->n_buffers++] = b;
    // deterministic content for never-written bytes
    memset(b->mem, 0xA5, size + ctx->alignment);
    ctx->refs++;
    __atomic_add_fetch(&g_live_buffers, 1, __ATOMIC_SEQ_CST);

    struct wsp_ggml_backend_buffer_i iface = {
        /* .free_buffer    = */ tb_buffer_free_buffer,
        /* .get_base       = */ tb_buffer_get_base,
        /* .get_alloc_size = */ ctx->has_buffer_hooks ? tb_buffer_get_alloc_size : NULL,
        /* .init_tensor    = */ ctx->has_buffer_hooks ? tb_buffer_init_tensor : NULL,
        /* .free_tensor    = */ ctx->has_buffer_hooks && ctx->shape == TB_SHAPE_FULL ? tb_buffer_free_tensor : NULL,
    };
    wsp_ggml_backend_buffer_t buffer = wsp_ggml_backend_buffer_init(backend, iface, b, size);
    if (buffer == NULL) {
        // no memory for the buffer struct (our library returns NULL then):
        // give back what this buffer took, as a careful backend does
        ctx->n_buffers--;
        ctx->refs--;
        __atomic_sub_fetch(&g_live_buffers, 1, __ATOMIC_SEQ_CST);
        free(b->mem);
        free(b);
    }
    return buffer;
}

static size_t tb_get_alignment(wsp_ggml_backend_t backend) {
    struct tb_context * ctx = tb_ctx(backend);
    ctx->stats.calls[TB_GET_ALIGNMENT]++;
    return ctx->alignment;
}

static void tb_set_tensor_async(wsp_ggml_backend_t backend, struct wsp_ggml_tensor * tensor, const void * data, size_t offset, size_t size) {
    struct tb_context * ctx = tb_ctx(backend);
    ctx->stats.calls[TB_SET_TENSOR_ASYNC]++; tb_hook(TB_SET_TENSOR_ASYNC);
    TB_CHECK(tensor->buffer->backend == backend);
    tb_check_range(tensor, offset, size);
    if (size > 0) {
        memcpy((char *)tensor->data + offset, data, size);
    }
    ctx->stats.bytes_set += (long)size;
}

static void tb_get_tensor_async(wsp_ggml_backend_t backend, const struct wsp_ggml_tensor * tensor, void * data, size_t offset, size_t size) {
    struct tb_context * ctx = tb_ctx(backend);
    ctx->stats.calls[TB_GET_TENSOR_ASYNC]++; tb_hook(TB_GET_TENSOR_ASYNC);
    TB_CHECK(tensor->buffer->backend == backend);
    tb_check_range(tensor, offset, size);
    if (size > 0) {
        memcpy(data, (const char *)tensor->data + offset, size);
    }
    ctx->stats.bytes_get += (long)size;
}

static void tb_synchronize(wsp_ggml_backend_t backend) {
    struct tb_context * ctx = tb_ctx(backend);
    ctx->stats.calls[TB_SYNCHRONIZE]++;
}

// First argument deliberately unused (see the note at the top of this file).
static void tb_cpy_tensor_from(wsp_ggml_backend_t unused, struct wsp_ggml_tensor * src, struct wsp_ggml_tensor * dst) {
    (void)unused;
    TB_CHECK(dst->buffer != NULL);
    struct tb_context * ctx = tb_ctx(dst->buffer->backend);
    TB_CHECK(ctx->has_cpy_tensor_from);
    ctx->stats.calls[TB_CPY_TENSOR_FROM]++; tb_hook(TB_CPY_TENSOR_FROM);
    size_t nbytes = wsp_ggml_nbytes(src);
    tb_check_range(dst, 0, nbytes);
    wsp_ggml_backend_tensor_get(src, dst->data, 0, nbytes);
    ctx->stats.bytes_set += (long)nbytes; // written into this backend, as set_tensor_async counts
}

static void tb_cpy_tensor_to(wsp_ggml_backend_t unused, struct wsp_ggml_tensor * src, struct wsp_ggml_tensor * dst) {
    (void)unused;
    TB_CHECK(src->buffer != NULL);
    struct tb_context * ctx = tb_ctx(src->buffer->backend);
    TB_CHECK(ctx->has_cpy_tensor_to);
    ctx->stats.calls[TB_CPY_TENSOR_TO]++; tb_hook(TB_CPY_TENSOR_TO);
    size_t nbytes = wsp_ggml_nbytes(src);
    tb_check_range(src, 0, nbytes);
    wsp_ggml_backend_tensor_set(dst, src->data, 0, nbytes);
}

static wsp_ggml_backend_graph_plan_t tb_graph_plan_create(wsp_ggml_backend_t backend, struct wsp_ggml_cgraph * cgraph) {
    struct tb_context * ctx = tb_ctx(backend);
    ctx->stats.calls[TB_GRAPH_PLAN_CREATE]++;
    struct tb_plan * plan = (struct tb_plan *)malloc(sizeof(*plan));
    TB_CHECK(plan != NULL);
    plan->graph = *cgraph;
    plan->inner = NULL;
    memset(&plan->cplan, 0, sizeof(plan->cplan));
    if (ctx->delegate != NULL) {
        plan->inner = wsp_ggml_backend_graph_plan_create(ctx->delegate, cgraph);
        return plan;
    }
    plan->cplan = wsp_ggml_graph_plan(cgraph, 1);
    plan->cplan.work_data = NULL;
    if (plan->cplan.work_size > 0) {
        plan->cplan.work_data = (uint8_t *)malloc(plan->cplan.work_size);
        TB_CHECK(plan->cplan.work_data != NULL);
    }
    return plan;
}

static void tb_graph_plan_free(wsp_ggml_backend_t backend, wsp_ggml_backend_graph_plan_t plan) {
    struct tb_context * ctx = tb_ctx(backend);
    ctx->stats.calls[TB_GRAPH_PLAN_FREE]++;
    struct tb_plan * p = (struct tb_plan *)plan;
    TB_CHECK(p != NULL);
    if (p->inner != NULL) {
        wsp_ggml_backend_graph_plan_free(ctx->delegate, p->inner);
    }
    free(p->cplan.work_data);
    free(p);
}

static void tb_graph_plan_compute(wsp_ggml_backend_t backend, wsp_ggml_backend_graph_plan_t plan) {
    struct tb_context * ctx = tb_ctx(backend);
    ctx->stats.calls[TB_GRAPH_PLAN_COMPUTE]++;
    struct tb_plan * p = (struct tb_plan *)plan;
    TB_CHECK(p != NULL);
    tb_log_graph(ctx, &p->graph);
    tb_count_rejected(ctx, &p->graph);
    tb_check_extras(ctx, &p->graph);
    if (p->inner != NULL) {
        wsp_ggml_backend_graph_plan_compute(ctx->delegate, p->inner);
    } else {
        wsp_ggml_graph_compute(&p->graph, &p->cplan);
    }
    tb_corrupt(ctx, &p->graph);
    ctx->stats.nodes_computed += p->graph.n_nodes;
}

// With TEST_BACKEND_LOG set in the environment, every graph a test backend
// computes is printed (backend, node count, node names): this makes each
// node's backend assignment and every split boundary part of the compared
// output.
static void tb_log_graph(const struct tb_context * ctx, const struct wsp_ggml_cgraph * g) {
    if (!ctx->log) {
        return;
    }
    printf("graph %s n=%d:", ctx->name, g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) {
        printf(" %s", g->nodes[i]->name);
    }
    printf("\n");
}

static void tb_graph_compute(wsp_ggml_backend_t backend, struct wsp_ggml_cgraph * cgraph) {
    struct tb_context * ctx = tb_ctx(backend);
    ctx->stats.calls[TB_GRAPH_COMPUTE]++;
    tb_count_rejected(ctx, cgraph);
    tb_check_extras(ctx, cgraph);
    if (ctx->delegate != NULL) {
        tb_log_graph(ctx, cgraph);
        wsp_ggml_backend_graph_compute(ctx->delegate, cgraph);
        tb_corrupt(ctx, cgraph);
        ctx->stats.nodes_computed += cgraph->n_nodes;
        return;
    }
    struct wsp_ggml_cplan cplan = wsp_ggml_graph_plan(cgraph, 1);
    cplan.work_data = NULL;
    if (cplan.work_size > 0) {
        cplan.work_data = (uint8_t *)malloc(cplan.work_size);
        TB_CHECK(cplan.work_data != NULL);
    }
    tb_log_graph(ctx, cgraph);
    wsp_ggml_graph_compute(cgraph, &cplan);
    free(cplan.work_data);
    tb_corrupt(ctx, cgraph);
    ctx->stats.nodes_computed += cgraph->n_nodes;
}

static bool tb_rejects(const struct tb_context * ctx, const struct wsp_ggml_tensor * op) {
    if (ctx->shape == TB_SHAPE_CUDA) {
        return false; // no supports_op: it accepts every op
    }
    for (int i = 0; i < ctx->n_rejected_ops; i++) {
        if ((int)op->op == ctx->rejected_ops[i]) {
            return true;
        }
    }
    return false;
}

static bool tb_supports_op(wsp_ggml_backend_t backend, const struct wsp_ggml_tensor * op) {
    struct tb_context * ctx = tb_ctx(backend);
    ctx->stats.calls[TB_SUPPORTS_OP]++; tb_hook(TB_SUPPORTS_OP);
    return !tb_rejects(ctx, op);
}

// --- public functions ---------------------------------------------------------

wsp_ggml_backend_t test_backend_new(const struct test_backend_options * opts) {
    TB_CHECK(opts != NULL && opts->name != NULL);
    TB_CHECK(opts->alignment >= 8 && (opts->alignment & (opts->alignment - 1)) == 0);

    struct tb_context * ctx = (struct tb_context *)calloc(1, sizeof(*ctx));
    TB_CHECK(ctx != NULL);
    size_t len = strlen(opts->name);
    ctx->name = (char *)malloc(len + 1);
    TB_CHECK(ctx->name != NULL);
    memcpy(ctx->name, opts->name, len + 1);
    ctx->alignment = opts->alignment;
    ctx->shape = test_backend_resolve_shape(opts->shape);
    // the real backends' patterns override the options' slots
    bool real = ctx->shape != TB_SHAPE_FULL;
    ctx->has_cpy_tensor_from = real ? ctx->shape == TB_SHAPE_METAL : opts->has_cpy_tensor_from;
    ctx->has_cpy_tensor_to = real ? ctx->shape == TB_SHAPE_METAL : opts->has_cpy_tensor_to;
    ctx->has_buffer_hooks = real ? ctx->shape == TB_SHAPE_CUDA : opts->has_buffer_hooks;
    ctx->corrupt = opts->corrupt;
    ctx->corrupt_unary = opts->corrupt_unary;
    ctx->delegate = opts->delegate;
    ctx->max_alloc = opts->max_alloc;
    const char * log = getenv("TEST_BACKEND_LOG");
    ctx->log = log != NULL && log[0] != '\0' && strcmp(log, "0") != 0;

    int n = 0;
    if (opts->rejected_ops != NULL) {
        while ((opts->n_rejected_ops <= 0 || n < opts->n_rejected_ops) && opts->rejected_ops[n] != -1) {
            n++;
        }
    }
    ctx->n_rejected_ops = n;
    ctx->rejected_ops = (int *)malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    TB_CHECK(ctx->rejected_ops != NULL);
    for (int i = 0; i < n; i++) {
        ctx->rejected_ops[i] = opts->rejected_ops[i];
    }
    ctx->refs = 1;

    struct wsp_ggml_backend_i iface = {
        /* .get_name           = */ tb_get_name,
        /* .free               = */ tb_free,
        /* .alloc_buffer       = */ tb_alloc_buffer,
        /* .get_alignment      = */ tb_get_alignment,
        /* .set_tensor_async   = */ tb_set_tensor_async,
        /* .get_tensor_async   = */ tb_get_tensor_async,
        /* .synchronize        = */ tb_synchronize,
        /* .cpy_tensor_from    = */ ctx->has_cpy_tensor_from ? tb_cpy_tensor_from : NULL,
        /* .cpy_tensor_to      = */ ctx->has_cpy_tensor_to ? tb_cpy_tensor_to : NULL,
        /* .graph_plan_create  = */ ctx->shape == TB_SHAPE_METAL ? NULL : tb_graph_plan_create,
        /* .graph_plan_free    = */ ctx->shape == TB_SHAPE_METAL ? NULL : tb_graph_plan_free,
        /* .graph_plan_compute = */ ctx->shape == TB_SHAPE_METAL ? NULL : tb_graph_plan_compute,
        /* .graph_compute      = */ tb_graph_compute,
        /* .supports_op        = */ ctx->shape == TB_SHAPE_CUDA ? NULL : tb_supports_op,
    };

    wsp_ggml_backend_t backend = (wsp_ggml_backend_t)malloc(sizeof(struct wsp_ggml_backend));
    TB_CHECK(backend != NULL);
    backend->iface = iface;
    backend->context = ctx;
    return backend;
}

bool test_backend_is(wsp_ggml_backend_t backend) {
    return backend != NULL && backend->iface.get_name == tb_get_name;
}

void test_backend_set_rejected(wsp_ggml_backend_t backend, const int * ops, int n) {
    struct tb_context * ctx = tb_ctx(backend);
    if (n < 0) {
        n = 0;
        while (ops != NULL && ops[n] != -1) {
            n++;
        }
    }
    free(ctx->rejected_ops);
    ctx->rejected_ops = (int *)malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    TB_CHECK(ctx->rejected_ops != NULL);
    for (int i = 0; i < n; i++) {
        ctx->rejected_ops[i] = ops[i];
    }
    ctx->n_rejected_ops = n;
}

void test_backend_set_max_alloc(wsp_ggml_backend_t backend, size_t size) {
    tb_ctx(backend)->max_alloc = size;
}

enum test_backend_shape test_backend_shape_of(wsp_ggml_backend_t backend) {
    return tb_ctx(backend)->shape;
}

struct test_backend_stats * test_backend_stats(wsp_ggml_backend_t backend) {
    return &tb_ctx(backend)->stats;
}

long test_backend_live_buffers(void) {
    return __atomic_load_n(&g_live_buffers, __ATOMIC_SEQ_CST);
}

void test_backend_print_stats(wsp_ggml_backend_t backend) {
    struct tb_context * ctx = tb_ctx(backend);
    // snapshot first: nothing below must change the counters
    struct test_backend_stats s = ctx->stats;
    const char * n = ctx->name;

    // exact
    printf("stat %s graph_compute %ld\n",          n, s.calls[TB_GRAPH_COMPUTE]);
    printf("stat %s graph_plan_create %ld\n",      n, s.calls[TB_GRAPH_PLAN_CREATE]);
    printf("stat %s graph_plan_compute %ld\n",     n, s.calls[TB_GRAPH_PLAN_COMPUTE]);
    printf("stat %s graph_plan_free %ld\n",        n, s.calls[TB_GRAPH_PLAN_FREE]);
    printf("stat %s alloc_buffer %ld\n",           n, s.calls[TB_ALLOC_BUFFER]);
    printf("stat %s free_buffer %ld\n",            n, s.calls[TB_BUF_FREE_BUFFER]);
    printf("stat %s nodes_computed %ld\n",         n, s.nodes_computed);
    printf("stat %s buf_init_tensor %ld\n",        n, s.calls[TB_BUF_INIT_TENSOR]);
    printf("stat %s buf_free_tensor %ld\n",        n, s.calls[TB_BUF_FREE_TENSOR]);
    // ours may be lower
    printf("~le %s set_tensor_async %ld\n",        n, s.calls[TB_SET_TENSOR_ASYNC]);
    printf("~le %s get_tensor_async %ld\n",        n, s.calls[TB_GET_TENSOR_ASYNC]);
    printf("~le %s synchronize %ld\n",             n, s.calls[TB_SYNCHRONIZE]);
    printf("~le %s cpy_tensor_from %ld\n",         n, s.calls[TB_CPY_TENSOR_FROM]);
    printf("~le %s cpy_tensor_to %ld\n",           n, s.calls[TB_CPY_TENSOR_TO]);
    printf("~le %s bytes_set %ld\n",               n, s.bytes_set);
    printf("~le %s bytes_get %ld\n",               n, s.bytes_get);
    printf("~le %s uninit_computed %ld\n",         n, s.uninit_computed);
    // informational
    printf("~ %s get_name %ld\n",                  n, s.calls[TB_GET_NAME]);
    printf("~ %s get_alignment %ld\n",             n, s.calls[TB_GET_ALIGNMENT]);
    printf("~ %s supports_op %ld\n",               n, s.calls[TB_SUPPORTS_OP]);
    printf("~ %s get_base %ld\n",                  n, s.calls[TB_BUF_GET_BASE]);
    // ours may ask more: a placement that does not fit is planned again
    printf("~ %s buf_get_alloc_size %ld\n",        n, s.calls[TB_BUF_GET_ALLOC_SIZE]);
}
