// The implementation structs' fields, as an X-macro list shared by
// layout_print.c (prints them from the original header) and layout_check.c
// (asserts them against our generated header).
#pragma once

#define LAYOUT_FIELDS(SIZE, OFF) \
    SIZE(wsp_ggml_backend_buffer_i) \
    OFF(wsp_ggml_backend_buffer_i, free_buffer) \
    OFF(wsp_ggml_backend_buffer_i, get_base) \
    OFF(wsp_ggml_backend_buffer_i, get_alloc_size) \
    OFF(wsp_ggml_backend_buffer_i, init_tensor) \
    OFF(wsp_ggml_backend_buffer_i, free_tensor) \
    SIZE(wsp_ggml_backend_buffer) \
    OFF(wsp_ggml_backend_buffer, iface) \
    OFF(wsp_ggml_backend_buffer, backend) \
    OFF(wsp_ggml_backend_buffer, context) \
    OFF(wsp_ggml_backend_buffer, size) \
    SIZE(wsp_ggml_backend_i) \
    OFF(wsp_ggml_backend_i, get_name) \
    OFF(wsp_ggml_backend_i, free) \
    OFF(wsp_ggml_backend_i, alloc_buffer) \
    OFF(wsp_ggml_backend_i, get_alignment) \
    OFF(wsp_ggml_backend_i, set_tensor_async) \
    OFF(wsp_ggml_backend_i, get_tensor_async) \
    OFF(wsp_ggml_backend_i, synchronize) \
    OFF(wsp_ggml_backend_i, cpy_tensor_from) \
    OFF(wsp_ggml_backend_i, cpy_tensor_to) \
    OFF(wsp_ggml_backend_i, graph_plan_create) \
    OFF(wsp_ggml_backend_i, graph_plan_free) \
    OFF(wsp_ggml_backend_i, graph_plan_compute) \
    OFF(wsp_ggml_backend_i, graph_compute) \
    OFF(wsp_ggml_backend_i, supports_op) \
    SIZE(wsp_ggml_backend) \
    OFF(wsp_ggml_backend, iface) \
    OFF(wsp_ggml_backend, context)
