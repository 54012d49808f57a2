// Ours-only test: where the library's messages go (the log callback of
// ggml-backend-ext.h, stderr, or Android's logcat and abort message) and
// that C's buffered output survives the abort that follows a misuse. One
// case per run:
//
//   log_route <case>   runs the case
//   log_route          lists the case names, one per line
//
// Compiled with -DSTANDIN (and linked with -rdynamic, so that the library's
// dlsym finds them) it defines stand-ins for Android's __android_log_write
// and android_set_abort_message, for a library built with the
// logcat-on-host feature (the Android code path on this machine). The
// stand-ins print to stdout, which is a pipe in the tests (fully buffered):
// what they print reaches the test only if the library flushes C's streams
// before it aborts.
#include "ext_util.h"

static const char * const CASES[] = {
    "misuse",          // a NULL tensor: the message goes to the default destination
    "callback",        // the callback receives the message, then the process aborts
    "callback_stdout", // the callback prints to stdout (buffered): flushed before the abort
    "unset",           // a callback set, then removed: the default destination again
    "stdout_survives", // printf before a misuse: the buffered line is not lost
    "debug",           // WSP_GGML_SCHED_DEBUG output, at level INFO (no abort)
};
#define N_CASES ((int)(sizeof(CASES) / sizeof(CASES[0])))

#ifdef STANDIN
// Android's liblog and bionic, as the library looks them up (dlsym).
int __android_log_write(int prio, const char * tag, const char * text);
void android_set_abort_message(const char * msg);

int __android_log_write(int prio, const char * tag, const char * text) {
    printf("logcat %d %s: [%s]\n", prio, tag, text);
    return 1;
}

void android_set_abort_message(const char * msg) {
    printf("abort message: [%s]\n", msg);
}
#endif

static int g_info_lines;

// Prints what it receives to stderr (unbuffered) or stdout (buffered).
static void on_log(enum wsp_ggml_log_level level, const char * text, void * user_data) {
    FILE * to = user_data ? (FILE *)user_data : stderr;
    if (level == WSP_GGML_LOG_LEVEL_INFO) {
        g_info_lines++;
        return;
    }
    size_t n = strlen(text);
    fprintf(to, "callback %d%s: [%.*s]\n", (int)level, n > 0 && text[n - 1] == '\n' ? " (newline)" : "", (int)(n ? n - 1 : 0), text);
}

static void misuse(void) {
    float v = 1.0f;
    wsp_ggml_backend_tensor_set(NULL, &v, 0, sizeof v);
    fprintf(stderr, "NOT ABORTED\n");
    exit(3);
}

// One scheduler over the CPU backend, one add: measured and computed.
static void debug_run(void) {
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    struct wsp_ggml_init_params p = { 8 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), NULL, true };
    struct wsp_ggml_context * ctx = wsp_ggml_init(p);
    struct wsp_ggml_tensor * a = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 4);
    struct wsp_ggml_tensor * b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 4);
    wsp_ggml_set_name(a, "a");
    wsp_ggml_set_name(b, "b");
    struct wsp_ggml_tensor * c = wsp_ggml_add(ctx, a, b);
    wsp_ggml_set_name(c, "c");
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, c);
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_alloc_buffer(cpu, 1024);
    wsp_ggml_tallocr_t ta = wsp_ggml_tallocr_new_from_buffer(buf);
    wsp_ggml_tallocr_alloc(ta, a);
    wsp_ggml_tallocr_alloc(ta, b);
    float ones[4] = { 1, 1, 1, 1 };
    wsp_ggml_backend_tensor_set(a, ones, 0, sizeof ones);
    wsp_ggml_backend_tensor_set(b, ones, 0, sizeof ones);
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(&cpu, 1);
    wsp_ggml_backend_sched_init_measure(sched, g);
    wsp_ggml_backend_sched_graph_compute(sched, g);
    float out[4];
    wsp_ggml_backend_tensor_get(c, out, 0, sizeof out);
    printf("c[0] %g\n", out[0]);
    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_tallocr_free(ta);
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_free(cpu);
}

int main(int argc, char ** argv) {
    int exit_code;
    const int k = eu_pick_case(argc, argv, CASES, N_CASES, &exit_code);
    if (k < 0) {
        return exit_code;
    }
    const char * c = CASES[k];
    if (strcmp(c, "misuse") == 0) {
        misuse();
    } else if (strcmp(c, "callback") == 0) {
        wsp_ggml_backend_log_set(on_log, NULL);
        misuse();
    } else if (strcmp(c, "callback_stdout") == 0) {
        wsp_ggml_backend_log_set(on_log, stdout);
        misuse();
    } else if (strcmp(c, "unset") == 0) {
        wsp_ggml_backend_log_set(on_log, NULL);
        wsp_ggml_backend_log_set(NULL, NULL);
        misuse();
    } else if (strcmp(c, "stdout_survives") == 0) {
        printf("written before the abort\n");
        misuse();
    }
    // debug [callback]
    if (argc > 2 && strcmp(argv[2], "callback") == 0) {
        wsp_ggml_backend_log_set(on_log, NULL);
    }
    debug_run();
    printf("info lines %d\n", g_info_lines);
    return 0;
}
