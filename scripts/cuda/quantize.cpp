// quantize: a whisper.cpp ggml model (f32/f16) to a quantized one, file
// format and choices as whisper.cpp v1.5.0's examples/quantize/quantize.cpp
// with examples/common-ggml.cpp's ggml_common_quantize_0 (neither is in the
// whisper-rs-sys crate, so scripts/cuda-pack builds this instead, against the
// crate's renamed ggml.c / ggml-quants.c):
//
//   - the header is copied, its ftype replaced by
//     WSP_GGML_QNT_VERSION * WSP_GGML_QNT_VERSION_FACTOR + FTYPE;
//   - the mel filters and the vocabulary are copied;
//   - every 2-D tensor except encoder.conv1.bias, encoder.conv2.bias,
//     encoder.positional_embedding and decoder.positional_embedding is
//     quantized (from f16 or f32) with wsp_ggml_quantize_<type>(data, out, n,
//     ne0, hist), every other tensor copied as it is.
//
//   quantize MODEL_IN MODEL_OUT TYPE      TYPE: q4_0 q4_1 q5_0 q5_1 q8_0
//
// Exit status 0 on success, 1 usage, 2 on a bad input file or a write error.

#include "ggml.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct Kind {
    const char * name;
    int ftype;                 // wsp_ggml_ftype
    enum wsp_ggml_type type;   // the tensors' type
    size_t (*quantize)(const float *, void *, int, int, int64_t *);
};

const Kind kKinds[] = {
    {"q4_0", WSP_GGML_FTYPE_MOSTLY_Q4_0, WSP_GGML_TYPE_Q4_0, wsp_ggml_quantize_q4_0},
    {"q4_1", WSP_GGML_FTYPE_MOSTLY_Q4_1, WSP_GGML_TYPE_Q4_1, wsp_ggml_quantize_q4_1},
    {"q5_0", WSP_GGML_FTYPE_MOSTLY_Q5_0, WSP_GGML_TYPE_Q5_0, wsp_ggml_quantize_q5_0},
    {"q5_1", WSP_GGML_FTYPE_MOSTLY_Q5_1, WSP_GGML_TYPE_Q5_1, wsp_ggml_quantize_q5_1},
    {"q8_0", WSP_GGML_FTYPE_MOSTLY_Q8_0, WSP_GGML_TYPE_Q8_0, wsp_ggml_quantize_q8_0},
};

int fail(const char * what) {
    fprintf(stderr, "quantize: error: %s\n", what);
    return 2;
}

template <typename T> bool rd(std::ifstream & f, T & v) { return (bool) f.read((char *) &v, sizeof v); }
template <typename T> void wr(std::ofstream & f, const T & v) { f.write((const char *) &v, sizeof v); }

}  // namespace

int main(int argc, char ** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL_IN MODEL_OUT q4_0|q4_1|q5_0|q5_1|q8_0\n", argv[0]);
        return 1;
    }
    const Kind * kind = nullptr;
    for (const Kind & k : kKinds) if (strcmp(k.name, argv[3]) == 0) kind = &k;
    if (!kind) {
        fprintf(stderr, "quantize: error: unknown type '%s'\n", argv[3]);
        return 1;
    }
    // ggml's fp16 tables
    struct wsp_ggml_init_params ip = {0, nullptr, true};
    wsp_ggml_free(wsp_ggml_init(ip));

    std::ifstream fin(argv[1], std::ios::binary);
    if (!fin) return fail("cannot open the input model");
    std::ofstream fout(argv[2], std::ios::binary);
    if (!fout) return fail("cannot create the output file");

    uint32_t magic = 0;
    if (!rd(fin, magic) || magic != WSP_GGML_FILE_MAGIC) return fail("not a ggml model file (bad magic)");
    wr(fout, magic);

    // hparams: n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer,
    // n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype
    int32_t hp[11];
    for (int32_t & v : hp) if (!rd(fin, v)) return fail("truncated header");
    const int32_t ftype_src = hp[10] % WSP_GGML_QNT_VERSION_FACTOR;
    if (ftype_src != WSP_GGML_FTYPE_ALL_F32 && ftype_src != WSP_GGML_FTYPE_MOSTLY_F16) return fail("the input model is already quantized");
    hp[10] = WSP_GGML_QNT_VERSION * WSP_GGML_QNT_VERSION_FACTOR + kind->ftype;
    for (int32_t v : hp) wr(fout, v);

    // mel filters
    int32_t n_mel = 0, n_fft = 0;
    if (!rd(fin, n_mel) || !rd(fin, n_fft) || n_mel <= 0 || n_fft <= 0) return fail("bad mel filters");
    std::vector<float> filters((size_t) n_mel * n_fft);
    if (!fin.read((char *) filters.data(), filters.size() * sizeof(float))) return fail("truncated mel filters");
    wr(fout, n_mel);
    wr(fout, n_fft);
    fout.write((const char *) filters.data(), filters.size() * sizeof(float));

    // vocabulary
    int32_t n_vocab = 0;
    if (!rd(fin, n_vocab) || n_vocab < 0) return fail("bad vocabulary");
    wr(fout, n_vocab);
    std::string word;
    for (int32_t i = 0; i < n_vocab; ++i) {
        uint32_t len = 0;
        if (!rd(fin, len) || len > 4096) return fail("bad vocabulary entry");
        word.resize(len);
        if (len && !fin.read(&word[0], len)) return fail("truncated vocabulary");
        wr(fout, len);
        fout.write(word.data(), len);
    }

    const char * to_skip[] = {"encoder.conv1.bias", "encoder.conv2.bias", "encoder.positional_embedding",
                              "decoder.positional_embedding"};
    std::vector<uint8_t> raw, work;
    std::vector<float> f32;
    size_t size_in = 0, size_out = 0;
    int n_tensors = 0, n_quantized = 0;
    while (true) {
        int32_t n_dims = 0, length = 0, ttype = 0;
        if (!rd(fin, n_dims)) break;  // end of file
        if (!rd(fin, length) || !rd(fin, ttype)) return fail("truncated tensor header");
        if (n_dims < 1 || n_dims > 4 || length < 1 || length > 1024) return fail("malformed tensor header");
        int32_t ne[4] = {1, 1, 1, 1};
        int64_t nelements = 1;
        for (int i = 0; i < n_dims; ++i) {
            if (!rd(fin, ne[i]) || ne[i] < 1) return fail("malformed tensor dimensions");
            nelements *= ne[i];
        }
        std::string name((size_t) length, '\0');
        if (!fin.read(&name[0], length)) return fail("truncated tensor name");

        bool quantize = n_dims == 2;
        for (const char * s : to_skip) if (name == s) quantize = false;
        if (ttype != WSP_GGML_TYPE_F32 && ttype != WSP_GGML_TYPE_F16) {
            fprintf(stderr, "quantize: error: tensor '%s' has type %d (only f32 and f16 are read)\n", name.c_str(), ttype);
            return 2;
        }
        const size_t bpe = ttype == WSP_GGML_TYPE_F32 ? sizeof(float) : sizeof(uint16_t);
        raw.resize((size_t) nelements * bpe);
        if (!fin.read((char *) raw.data(), raw.size())) {
            fprintf(stderr, "quantize: error: the data of tensor '%s' is truncated\n", name.c_str());
            return 2;
        }
        if (quantize && ne[0] % wsp_ggml_blck_size(kind->type) != 0) {
            fprintf(stderr, "quantize: error: tensor '%s': ne0 %d is not a multiple of the block size\n", name.c_str(), ne[0]);
            return 2;
        }
        const int32_t ttype_out = quantize ? (int32_t) kind->type : ttype;
        wr(fout, n_dims);
        wr(fout, length);
        wr(fout, ttype_out);
        for (int i = 0; i < n_dims; ++i) wr(fout, ne[i]);
        fout.write(name.data(), length);
        size_in += raw.size();
        if (quantize) {
            f32.resize((size_t) nelements);
            if (ttype == WSP_GGML_TYPE_F16) {
                const wsp_ggml_fp16_t * h = (const wsp_ggml_fp16_t *) raw.data();
                for (int64_t i = 0; i < nelements; ++i) f32[(size_t) i] = wsp_ggml_fp16_to_fp32(h[i]);
            } else {
                memcpy(f32.data(), raw.data(), raw.size());
            }
            work.resize((size_t) nelements * sizeof(float));
            int64_t hist[16] = {0};
            const size_t n = kind->quantize(f32.data(), work.data(), (int) nelements, ne[0], hist);
            fout.write((const char *) work.data(), (std::streamsize) n);
            size_out += n;
            ++n_quantized;
        } else {
            fout.write((const char *) raw.data(), (std::streamsize) raw.size());
            size_out += raw.size();
        }
        ++n_tensors;
    }
    fout.close();
    if (!fout) return fail("write error");
    printf("quantize: %d tensors (%d quantized to %s), data %.1f MB -> %.1f MB\n", n_tensors, n_quantized, kind->name,
           size_in / 1e6, size_out / 1e6);
    return 0;
}
