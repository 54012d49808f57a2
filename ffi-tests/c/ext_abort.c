// Ours-only test: wsp_ggml_backend_cpu_set_abort_callback.
//
// A long chain n_i = n_{i-1} + 1 (N_CHAIN nodes) on the CPU backend, every
// node in its own memory of a CPU buffer, prefilled with a sentinel. An abort
// callback that returns true after `limit` calls stops the compute between
// nodes: the computed nodes form a prefix (exact values), every later node
// keeps its sentinel. Checked on the graph_compute path and on the plan path
// (callback set before the plan is created), with 1 and with 2 threads
// (stops, later nodes untouched), and with no callback (runs to the end).
#include "ext_util.h"

#include <stdatomic.h>

#define N_CHAIN 200
#define N_ELEM  64
#define SENTINEL (-7777.0f)

struct abort_state {
    atomic_int calls;
    int limit; // return true once calls > limit
};

static bool abort_cb(void * data) {
    struct abort_state * s = (struct abort_state *)data;
    int c = atomic_fetch_add(&s->calls, 1) + 1;
    return c > s->limit;
}

struct chain {
    struct wsp_ggml_context * ctx;
    wsp_ggml_backend_buffer_t buf;
    wsp_ggml_allocr_t alloc;
    struct wsp_ggml_cgraph * g;
    struct wsp_ggml_tensor * nodes[N_CHAIN];
};

static void chain_init(struct chain * c, wsp_ggml_backend_t cpu) {
    c->ctx = su_graph_ctx(N_CHAIN + 8, WSP_GGML_DEFAULT_GRAPH_SIZE);
    struct wsp_ggml_tensor * x0 = wsp_ggml_new_tensor_1d(c->ctx, WSP_GGML_TYPE_F32, N_ELEM);
    struct wsp_ggml_tensor * one = wsp_ggml_new_tensor_1d(c->ctx, WSP_GGML_TYPE_F32, N_ELEM);
    struct wsp_ggml_tensor * cur = x0;
    for (int i = 0; i < N_CHAIN; i++) {
        cur = wsp_ggml_add(c->ctx, cur, one);
        wsp_ggml_format_name(cur, "n%d", i);
        c->nodes[i] = cur;
    }
    c->g = wsp_ggml_new_graph(c->ctx);
    wsp_ggml_build_forward_expand(c->g, cur);
    CHECK(c->g->n_nodes == N_CHAIN);
    c->buf = wsp_ggml_backend_alloc_buffer(cpu, (size_t)(N_CHAIN + 4) * (N_ELEM * sizeof(float) + 128));
    c->alloc = wsp_ggml_allocr_new_from_buffer(c->buf);
    eu_alloc_graph(c->alloc, c->g);
    eu_fill_value(x0, 0.0f);
    eu_fill_value(one, 1.0f);
}

static void chain_free(struct chain * c) {
    wsp_ggml_allocr_free(c->alloc);
    wsp_ggml_backend_buffer_free(c->buf);
    wsp_ggml_free(c->ctx);
}

static void chain_prefill(struct chain * c) {
    for (int i = 0; i < N_CHAIN; i++) {
        eu_fill_value(c->nodes[i], SENTINEL);
    }
}

// Number of computed nodes if they form a prefix with exact values and the
// rest holds the sentinel; -1 otherwise.
static int chain_prefix(const struct chain * c) {
    int n_done = 0;
    bool in_prefix = true;
    float buf[N_ELEM];
    for (int i = 0; i < N_CHAIN; i++) {
        wsp_ggml_backend_tensor_get(c->nodes[i], buf, 0, sizeof(buf));
        bool done = true, untouched = true;
        for (int k = 0; k < N_ELEM; k++) {
            done = done && buf[k] == (float)(i + 1);
            untouched = untouched && buf[k] == SENTINEL;
        }
        if (in_prefix && done) {
            n_done++;
        } else if (untouched) {
            in_prefix = false;
        } else {
            printf("~ node %d is neither computed nor untouched (first value %a)\n", i, (double)buf[0]);
            return -1;
        }
    }
    return n_done;
}

// Index + 1 of the last node that does not hold the sentinel any more.
static int chain_touched(const struct chain * c) {
    int last = 0;
    float buf[N_ELEM];
    for (int i = 0; i < N_CHAIN; i++) {
        wsp_ggml_backend_tensor_get(c->nodes[i], buf, 0, sizeof(buf));
        for (int k = 0; k < N_ELEM; k++) {
            if (buf[k] != SENTINEL) {
                last = i + 1;
                break;
            }
        }
    }
    return last;
}

// Compute with the callback (limit < 0: no callback); returns the prefix length.
static int run_chain(wsp_ggml_backend_t cpu, struct chain * c, struct abort_state * s, int limit, bool use_plan) {
    chain_prefill(c);
    if (limit >= 0) {
        atomic_store(&s->calls, 0);
        s->limit = limit;
        wsp_ggml_backend_cpu_set_abort_callback(cpu, abort_cb, s);
    } else {
        wsp_ggml_backend_cpu_set_abort_callback(cpu, NULL, NULL);
    }
    if (use_plan) {
        wsp_ggml_backend_graph_plan_t plan = wsp_ggml_backend_graph_plan_create(cpu, c->g);
        wsp_ggml_backend_graph_plan_compute(cpu, plan);
        wsp_ggml_backend_graph_plan_free(cpu, plan);
    } else {
        wsp_ggml_backend_graph_compute(cpu, c->g);
    }
    return chain_prefix(c);
}

int main(void) {
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(cpu, 1);
    struct chain c;
    chain_init(&c, cpu);
    static struct abort_state st;

    for (int plan = 0; plan < 2; plan++) {
        const char * path = plan ? "plan" : "compute";
        char name[64];

        int n = run_chain(cpu, &c, &st, -1, plan);
        snprintf(name, sizeof(name), "abort_%s_no_callback_runs_all", path);
        EU_EXPECT(name, n == N_CHAIN, "%d of %d nodes computed", n, N_CHAIN);

        n = run_chain(cpu, &c, &st, 20, plan);
        int calls = atomic_load(&st.calls);
        printf("~ %s limit 20: %d nodes computed, %d callback calls\n", path, n, calls);
        snprintf(name, sizeof(name), "abort_%s_stops_after_limit", path);
        EU_EXPECT(name, n >= 1 && n <= 21 && calls > 20, "%d nodes computed (expected 1..21), %d callback calls", n, calls);

        n = run_chain(cpu, &c, &st, 0, plan);
        snprintf(name, sizeof(name), "abort_%s_immediately", path);
        EU_EXPECT(name, n == 0 && atomic_load(&st.calls) >= 1, "%d nodes computed, %d calls", n, atomic_load(&st.calls));

        // the callback can be removed again
        n = run_chain(cpu, &c, &st, -1, plan);
        snprintf(name, sizeof(name), "abort_%s_cleared", path);
        EU_EXPECT(name, n == N_CHAIN, "%d of %d nodes computed after clearing", n, N_CHAIN);
    }

    // an abort callback on one CPU backend does not affect another
    {
        wsp_ggml_backend_t cpu2 = wsp_ggml_backend_cpu_init();
        wsp_ggml_backend_cpu_set_n_threads(cpu2, 1);
        atomic_store(&st.calls, 0);
        st.limit = 0;
        wsp_ggml_backend_cpu_set_abort_callback(cpu, abort_cb, &st);
        chain_prefill(&c);
        wsp_ggml_backend_graph_compute(cpu2, c.g);
        EU_EXPECT("abort_per_backend", chain_prefix(&c) == N_CHAIN && atomic_load(&st.calls) == 0,
                  "the other CPU backend used this one's abort callback");
        wsp_ggml_backend_cpu_set_abort_callback(cpu, NULL, NULL);
        wsp_ggml_backend_free(cpu2);
    }

    // several threads: it still stops, and the later nodes are untouched.
    // (ggml.c's own threaded abort lets the other workers run one more node
    // after the aborting thread left, on an uncomputed input: so only
    // "stopped early, tail untouched" is checked here, not the exact prefix.)
    {
        wsp_ggml_backend_cpu_set_n_threads(cpu, 2);
        run_chain(cpu, &c, &st, 20, false);
        int touched = chain_touched(&c);
        printf("~ 2 threads limit 20: %d nodes written, %d calls\n", touched, atomic_load(&st.calls));
        EU_EXPECT("abort_threads_stops", touched > 0 && touched <= 2 * 21, "%d of %d nodes written", touched, N_CHAIN);
        int n = run_chain(cpu, &c, &st, -1, false);
        EU_EXPECT("abort_threads_cleared", n == N_CHAIN, "%d of %d nodes computed", n, N_CHAIN);
    }

    chain_free(&c);
    wsp_ggml_backend_free(cpu);
    return eu_finish();
}
