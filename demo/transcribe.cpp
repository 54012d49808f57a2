// transcribe: the whisper.cpp driver that scripts/demo and ffi-tests/tests/whisper.rs
// build twice (linked with our ggml-backend library, and with the original
// ggml-backend.c) and whose outputs they compare.
//
//   transcribe [options] MODEL WAV
//     --threads N   worker threads (default 2)
//     --probe N     low-level mode: encode, then decode N tokens greedily
//                   (argmax) from <|startoftranscript|>, hashing every logit
//     --quiet       only whisper.cpp's error messages on stderr
//
// stdout (one "key: value" per line, compared by the callers):
//   audio: ...             what was read (and whether it was resampled)
//   tokens: ID ID ...      every token id whisper_full produced (or the probe's)
//   logits_fnv1a64: HEX    FNV-1a 64 of the bytes of every logits vector seen
//                          (whisper_full: the logits_filter_callback; probe:
//                          whisper_get_logits after each whisper_decode)
//   text: ...              the transcript (not in probe mode)
//   cpu_backend: ...       what the library says of a fresh CPU backend (whisper.cpp
//                          relies on wsp_ggml_backend_is_cpu to set its thread count)
//   load_ms / run_ms: N    wall-clock times
//
// Bad input never crashes: a missing, truncated or malformed model file, a
// file that is not a WAV, or an unsupported WAV encoding gives a message
// "transcribe: error: ..." on stderr and a non-zero exit status:
//   1 usage, 2 bad audio, 3 bad model, 4 whisper.cpp failed, 5 internal error.
// WAVs at another sample rate are resampled to 16 kHz (windowed sinc) and
// multi-channel WAVs mixed down to mono, with a note on stderr.

#include "whisper.h"
#include "ggml-backend.h"

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

namespace {

const int kSampleRate = WHISPER_SAMPLE_RATE;  // 16000

struct Failure {
    int code;
    std::string message;
};

[[noreturn]] void fail(int code, const std::string & message) { throw Failure{code, message}; }

std::string fmt(const char * f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char * f, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

bool read_file(const std::string & path, std::vector<uint8_t> & out) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    f.seekg(0, std::ios::end);
    std::streamoff n = f.tellg();
    if (n < 0) return false;
    f.seekg(0, std::ios::beg);
    out.resize((size_t) n);
    if (n > 0 && !f.read((char *) out.data(), n)) return false;
    return true;
}

uint16_t le16(const uint8_t * p) { return (uint16_t) (p[0] | (p[1] << 8)); }
uint32_t le32(const uint8_t * p) { return (uint32_t) p[0] | ((uint32_t) p[1] << 8) | ((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24); }

// ---------------------------------------------------------------- audio

// Windowed-sinc resampling (Hann window, 16 zero crossings of the narrower
// low-pass each side), normalised to unity gain at DC.
std::vector<float> resample(const std::vector<float> & in, int rate_in, int rate_out) {
    const double ratio = (double) rate_out / rate_in;
    const double scale = std::min(1.0, ratio);          // low-pass below both Nyquists
    const double fc = 0.5 * scale * 0.97;                // cycles per input sample
    const int half = (int) std::ceil(16.0 / scale);      // taps each side, in input samples
    const size_t n_out = (size_t) std::floor(in.size() * ratio);
    std::vector<float> out(n_out);
    const double pi = 3.14159265358979323846;
    for (size_t j = 0; j < n_out; ++j) {
        const double t = j / ratio;
        const long c = (long) std::floor(t);
        double acc = 0.0, wsum = 0.0;
        for (long i = c - half + 1; i <= c + half; ++i) {
            const double x = t - (double) i;
            const double s = x == 0.0 ? 2 * fc : std::sin(2 * pi * fc * x) / (pi * x);
            const double w = 0.5 + 0.5 * std::cos(pi * x / half);
            const double k = s * w;
            wsum += k;
            if (i >= 0 && (size_t) i < in.size()) acc += k * in[(size_t) i];
        }
        out[j] = (float) (wsum != 0.0 ? acc / wsum : 0.0);
    }
    return out;
}

std::vector<float> read_wav(const std::string & path, std::string & description) {
    std::vector<uint8_t> b;
    if (!read_file(path, b)) fail(2, fmt("cannot read audio file '%s'", path.c_str()));
    if (b.size() < 12 || memcmp(b.data(), "RIFF", 4) != 0 || memcmp(b.data() + 8, "WAVE", 4) != 0) {
        fail(2, fmt("'%s' is not a WAV file (no RIFF/WAVE header); expected 16 kHz mono 16-bit PCM WAV", path.c_str()));
    }
    const uint8_t * fmt_chunk = nullptr;
    uint32_t fmt_size = 0;
    const uint8_t * data = nullptr;
    size_t data_size = 0;
    bool truncated = false;
    size_t pos = 12;
    while (pos + 8 <= b.size()) {
        const uint8_t * id = b.data() + pos;
        size_t size = le32(b.data() + pos + 4);
        size_t body = pos + 8;
        if (size > b.size() - body) {
            truncated = true;
            size = b.size() - body;
        }
        if (memcmp(id, "fmt ", 4) == 0) {
            fmt_chunk = b.data() + body;
            fmt_size = (uint32_t) size;
        } else if (memcmp(id, "data", 4) == 0) {
            data = b.data() + body;
            data_size = size;
            break;
        }
        pos = body + size + (size & 1);
    }
    if (!fmt_chunk || fmt_size < 16) fail(2, fmt("'%s': WAV file has no valid 'fmt ' chunk", path.c_str()));
    if (!data) fail(2, fmt("'%s': WAV file has no 'data' chunk", path.c_str()));
    uint16_t format = le16(fmt_chunk);
    const int channels = le16(fmt_chunk + 2);
    const int rate = (int) le32(fmt_chunk + 4);
    const int bits = le16(fmt_chunk + 14);
    if (format == 0xFFFE && fmt_size >= 26) format = le16(fmt_chunk + 24);  // WAVE_FORMAT_EXTENSIBLE sub-format
    if (format != 1 || bits != 16) {
        fail(2, fmt("'%s': unsupported WAV encoding (format tag %u, %d bits per sample); only 16-bit PCM is supported "
                    "(convert with e.g. `sox in.wav -b 16 -e signed-integer out.wav`)", path.c_str(), format, bits));
    }
    if (channels < 1 || channels > 64) fail(2, fmt("'%s': invalid channel count %d", path.c_str(), channels));
    if (rate < 1000 || rate > 768000) fail(2, fmt("'%s': invalid sample rate %d Hz", path.c_str(), rate));
    if (truncated) fprintf(stderr, "transcribe: warning: '%s' is truncated; using the %zu bytes of audio present\n", path.c_str(), data_size);

    const size_t frames = data_size / (2 * (size_t) channels);
    if (frames == 0) fail(2, fmt("'%s': WAV file contains no audio samples", path.c_str()));
    std::vector<float> pcm(frames);
    for (size_t i = 0; i < frames; ++i) {
        float acc = 0.0f;
        for (int c = 0; c < channels; ++c) acc += (float) (int16_t) le16(data + 2 * (i * channels + c));
        pcm[i] = acc / (32768.0f * channels);
    }
    description = fmt("%s, %zu samples, %.2f s", path.c_str(), frames, (double) frames / rate);
    if (channels != 1) {
        fprintf(stderr, "transcribe: note: mixed %d channels down to mono\n", channels);
        description += fmt(", mixed down from %d channels", channels);
    }
    if (rate != kSampleRate) {
        fprintf(stderr, "transcribe: note: '%s' is %d Hz; resampling to %d Hz\n", path.c_str(), rate, kSampleRate);
        pcm = resample(pcm, rate, kSampleRate);
        description += fmt(", resampled from %d Hz to %d Hz", rate, kSampleRate);
    }
    return pcm;
}

// ---------------------------------------------------------------- model file check

// Walks the whole file the way whisper_model_load reads it, so that a missing,
// truncated or malformed file gets a clear message instead of whatever
// whisper.cpp's loader does with garbage sizes.
void check_model_file(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) fail(3, fmt("cannot open model file '%s'", path.c_str()));
    f.seekg(0, std::ios::end);
    const uint64_t size = (uint64_t) f.tellg();
    f.seekg(0, std::ios::beg);
    uint64_t pos = 0;
    auto need = [&](uint64_t n, const char * what) {
        if (n > size - pos) {
            fail(3, fmt("model file '%s' is truncated: %s needs %llu bytes at offset %llu, but the file has %llu bytes",
                        path.c_str(), what, (unsigned long long) n, (unsigned long long) pos, (unsigned long long) size));
        }
    };
    auto i32 = [&](const char * what) {
        need(4, what);
        uint8_t p[4];
        f.read((char *) p, 4);
        pos += 4;
        return (int32_t) le32(p);
    };
    auto skip = [&](uint64_t n, const char * what) {
        need(n, what);
        f.seekg((std::streamoff) n, std::ios::cur);
        pos += n;
    };
    if (size < 4) fail(3, fmt("model file '%s' is empty or truncated (%llu bytes)", path.c_str(), (unsigned long long) size));
    if ((uint32_t) i32("magic") != 0x67676d6c) {
        fail(3, fmt("'%s' is not a whisper.cpp ggml model file (bad magic)", path.c_str()));
    }
    const char * names[11] = {"n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer", "n_text_ctx",
                              "n_text_state", "n_text_head", "n_text_layer", "n_mels", "ftype"};
    int32_t hp[11];
    for (int i = 0; i < 11; ++i) {
        hp[i] = i32("the hyperparameters");
        const int32_t max = i == 10 ? 1000000 : 1 << 20;
        if (hp[i] < (i == 10 ? 0 : 1) || hp[i] > max) fail(3, fmt("model file '%s': implausible %s = %d", path.c_str(), names[i], hp[i]));
    }
    const int32_t n_mel = i32("the mel filters"), n_fft = i32("the mel filters");
    if (n_mel < 1 || n_mel > 1024 || n_fft < 1 || n_fft > 65536) fail(3, fmt("model file '%s': implausible mel filter size %d x %d", path.c_str(), n_mel, n_fft));
    skip((uint64_t) n_mel * n_fft * 4, "the mel filters");
    const int32_t n_vocab = i32("the vocabulary");
    if (n_vocab < 0 || n_vocab > hp[0]) fail(3, fmt("model file '%s': implausible vocabulary size %d", path.c_str(), n_vocab));
    for (int32_t i = 0; i < n_vocab; ++i) {
        const int32_t len = i32("the vocabulary");
        if (len < 0 || len > 4096) fail(3, fmt("model file '%s': implausible length %d of token %d", path.c_str(), len, i));
        skip((uint64_t) len, "the vocabulary");
    }
    // ggml types whisper.cpp can load: {type id, block size, bytes per block}
    struct T { int id, blck, bytes; };
    const T types[] = {{0, 1, 4}, {1, 1, 2}, {2, 32, 18}, {3, 32, 20}, {6, 32, 22}, {7, 32, 24}, {8, 32, 34}};
    const long expected = 11 + 15L * hp[4] + 24L * hp[8];
    long n_tensors = 0;
    while (pos < size) {
        const int32_t n_dims = i32("a tensor header"), len = i32("a tensor header"), ttype = i32("a tensor header");
        if (n_dims < 1 || n_dims > 4 || len < 1 || len > 1024) fail(3, fmt("model file '%s': malformed tensor header at tensor %ld", path.c_str(), n_tensors));
        const T * t = nullptr;
        for (const T & c : types) if (c.id == ttype) t = &c;
        if (!t) fail(3, fmt("model file '%s': tensor %ld has unsupported type %d", path.c_str(), n_tensors, ttype));
        uint64_t nel = 1;
        for (int d = 0; d < n_dims; ++d) {
            const int32_t ne = i32("a tensor header");
            if (ne < 1 || ne > (1 << 24)) fail(3, fmt("model file '%s': tensor %ld has implausible dimension %d", path.c_str(), n_tensors, ne));
            nel *= (uint64_t) ne;
        }
        need((uint64_t) len, "a tensor name");
        std::string name((size_t) len, '\0');
        f.read(&name[0], len);
        pos += (uint64_t) len;
        if (nel % t->blck) fail(3, fmt("model file '%s': tensor '%s' does not fill whole blocks", path.c_str(), name.c_str()));
        skip(nel / t->blck * t->bytes, ("the data of tensor '" + name + "'").c_str());
        ++n_tensors;
    }
    if (n_tensors != expected) {
        fail(3, fmt("model file '%s' is truncated or incomplete: it holds %ld tensors, a model with these "
                    "hyperparameters has %ld", path.c_str(), n_tensors, expected));
    }
}

// ---------------------------------------------------------------- whisper

struct Fnv {
    uint64_t h = 0xcbf29ce484222325ull;
    uint64_t bytes = 0;
    void add(const void * p, size_t n) {
        const uint8_t * b = (const uint8_t *) p;
        for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
        bytes += n;
    }
};

bool g_quiet = false;

void log_cb(enum wsp_ggml_log_level level, const char * text, void *) {
    if (!g_quiet || level == WSP_GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

void logits_cb(struct whisper_context * ctx, struct whisper_state *, const whisper_token_data *, int, float * logits, void * user) {
    ((Fnv *) user)->add(logits, sizeof(float) * (size_t) whisper_n_vocab(ctx));
}

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void usage() {
    fprintf(stderr,
            "usage: transcribe [--threads N] [--probe N] [--quiet] MODEL WAV\n"
            "  MODEL  whisper.cpp ggml model file (e.g. target/demo/models/ggml-tiny.en.bin)\n"
            "  WAV    16-bit PCM WAV; 16 kHz mono preferred (other rates are resampled)\n");
}

int run(int argc, char ** argv) {
    int n_threads = 2, probe = -1;
    std::vector<std::string> pos;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto intarg = [&](int lo, int hi) {
            if (i + 1 >= argc) fail(1, a + " needs a value");
            char * end = nullptr;
            long v = strtol(argv[++i], &end, 10);
            if (!end || *end || v < lo || v > hi) fail(1, fmt("%s: expected an integer in %d..%d, got '%s'", a.c_str(), lo, hi, argv[i]));
            return (int) v;
        };
        if (a == "--threads") n_threads = intarg(1, 256);
        else if (a == "--probe") probe = intarg(1, 200);
        else if (a == "--quiet") g_quiet = true;
        else if (a == "-h" || a == "--help") { usage(); return 0; }
        else if (a.size() > 1 && a[0] == '-') fail(1, "unknown option " + a);
        else pos.push_back(a);
    }
    if (pos.size() != 2) {
        usage();
        fail(1, "expected MODEL and WAV arguments");
    }
    whisper_log_set(log_cb, nullptr);

    {
        wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
        if (!cpu) fail(4, "wsp_ggml_backend_cpu_init failed");
        printf("cpu_backend: name=%s is_cpu=%d\n", wsp_ggml_backend_name(cpu), (int) wsp_ggml_backend_is_cpu(cpu));
        wsp_ggml_backend_free(cpu);
    }

    std::string audio_desc;
    const std::vector<float> pcm = read_wav(pos[1], audio_desc);
    printf("audio: %s\n", audio_desc.c_str());
    check_model_file(pos[0]);

    auto t0 = std::chrono::steady_clock::now();
    whisper_context_params cparams = whisper_context_default_params();
    cparams.use_gpu = false;
    whisper_context * ctx = whisper_init_from_file_with_params(pos[0].c_str(), cparams);
    if (!ctx) fail(3, fmt("whisper.cpp could not load the model '%s' (see its messages above)", pos[0].c_str()));
    printf("load_ms: %.1f\n", ms_since(t0));
    fflush(stdout);

    Fnv fnv;
    std::vector<int> tokens;
    std::string text;
    t0 = std::chrono::steady_clock::now();
    if (probe > 0) {
        if (whisper_pcm_to_mel(ctx, pcm.data(), (int) pcm.size(), n_threads) != 0) { whisper_free(ctx); fail(4, "whisper_pcm_to_mel failed"); }
        if (whisper_encode(ctx, 0, n_threads) != 0) { whisper_free(ctx); fail(4, "whisper_encode failed"); }
        std::vector<whisper_token> in = {whisper_token_sot(ctx)};
        const int n_vocab = whisper_n_vocab(ctx);
        int n_past = 0;
        for (int step = 0; step < probe; ++step) {
            if (whisper_decode(ctx, in.data(), (int) in.size(), n_past, n_threads) != 0) { whisper_free(ctx); fail(4, "whisper_decode failed"); }
            const float * logits = whisper_get_logits(ctx);
            fnv.add(logits, sizeof(float) * (size_t) n_vocab * in.size());
            const float * last = logits + (size_t) n_vocab * (in.size() - 1);
            int best = 0;
            for (int v = 1; v < n_vocab; ++v) if (last[v] > last[best]) best = v;
            n_past += (int) in.size();
            in = {best};
            tokens.push_back(best);
        }
    } else {
        whisper_full_params p = whisper_full_default_params(WHISPER_SAMPLING_GREEDY);
        p.n_threads = n_threads;
        p.language = "en";
        p.translate = false;
        p.detect_language = false;
        p.no_context = true;
        p.no_timestamps = true;
        p.print_special = false;
        p.print_progress = false;
        p.print_realtime = false;
        p.print_timestamps = false;
        p.temperature = 0.0f;
        p.temperature_inc = 0.0f;  // no sampling fallback: fully deterministic
        p.greedy.best_of = 1;
        p.logits_filter_callback = logits_cb;
        p.logits_filter_callback_user_data = &fnv;
        if (whisper_full(ctx, p, pcm.data(), (int) pcm.size()) != 0) { whisper_free(ctx); fail(4, "whisper_full failed"); }
        for (int s = 0; s < whisper_full_n_segments(ctx); ++s) {
            text += whisper_full_get_segment_text(ctx, s);
            for (int k = 0; k < whisper_full_n_tokens(ctx, s); ++k) tokens.push_back(whisper_full_get_token_id(ctx, s, k));
        }
    }
    const double run_ms = ms_since(t0);

    printf("tokens:");
    for (int t : tokens) printf(" %d", t);
    printf("\nlogits_fnv1a64: %016llx (%llu bytes)\n", (unsigned long long) fnv.h, (unsigned long long) fnv.bytes);
    if (probe <= 0) {
        size_t b = text.find_first_not_of(' ');
        printf("text: %s\n", b == std::string::npos ? "" : text.c_str() + b);
    }
    printf("run_ms: %.1f\n", run_ms);
    whisper_free(ctx);
    return 0;
}

}  // namespace

int main(int argc, char ** argv) {
    try {
        return run(argc, argv);
    } catch (const Failure & f) {
        fflush(stdout);
        fprintf(stderr, "transcribe: error: %s\n", f.message.c_str());
        return f.code;
    } catch (const std::exception & e) {
        fflush(stdout);
        fprintf(stderr, "transcribe: error: %s\n", e.what());
        return 5;
    }
}
