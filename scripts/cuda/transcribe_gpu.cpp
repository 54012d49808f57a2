// transcribe_gpu: demo/transcribe.cpp with whisper.cpp's use_gpu switched on,
// for the CUDA builds of scripts/cuda-pack.
//
// demo/transcribe.cpp always asks for the CPU (cparams.use_gpu = false) and
// has no option for it; rather than copy it, scripts/cuda-pack links this
// file beside it with
//
//     -Wl,--wrap=whisper_init_from_file_with_params
//
// so that transcribe.cpp's call lands here, use_gpu is set, and the real
// function (whisper.cpp's) is called. Everything else (the audio reader, the
// model check, the "key: value" output that the callers compare) is
// transcribe.cpp's, unchanged.
//
// It also prints one line on stderr saying which backend whisper.cpp asked
// for, and the environment variable TRANSCRIBE_USE_GPU=0 turns the switch off
// (to compare with the CPU path of the same binary).

#include "whisper.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {

struct whisper_context * __real_whisper_init_from_file_with_params(const char * path_model,
                                                                    struct whisper_context_params params);

struct whisper_context * __wrap_whisper_init_from_file_with_params(const char * path_model,
                                                                    struct whisper_context_params params) {
    const char * env = getenv("TRANSCRIBE_USE_GPU");
    params.use_gpu = !(env != nullptr && strcmp(env, "0") == 0);
    fprintf(stderr, "transcribe_gpu: whisper_context_params.use_gpu = %s\n", params.use_gpu ? "true" : "false");
    return __real_whisper_init_from_file_with_params(path_model, params);
}

}  // extern "C"
