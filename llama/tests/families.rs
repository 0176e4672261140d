//! Each family's forward pass against llama.cpp's on the same synthetic
//! model of random weights: the fixtures are llama.cpp's logits, made once
//! by `fixtures/make_reference.py` on the file the recipe writes.

use agentsite_llama::synthetic::{Recipe, write};
use agentsite_llama::{Model, Session};
use candle_core::quantized::{GgmlDType, gguf_file};
use sha2::Digest as _;

/// The engine computes as llama.cpp does (activations quantized with f16
/// scales, GELU from llama.cpp's f16 table): what is left is the order of
/// float additions, which differs between kernels (AVX2, AVX-512). Measured
/// here: KL at most 1.6e-5, top tokens all the same.
const MOST_DIVERGENCE: f64 = 1e-4;
/// A logit gap within which two tokens are a tie to any two float sums.
const NEAR_TIE: f32 = 0.005;

/// As `make_reference.py` runs them.
const TOKENS: [u32; 12] = [0, 17, 42, 311, 5, 5, 128, 64, 400, 3, 250, 77];

/// The family's small synthetic model, and the sha256 of its file.
fn synthetic(family: &'static str) -> (Model, String) {
    // A name of its own for each call: the tests run at once, in one
    // process, and two of them write the same family.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!(
        "agentsite-synthetic-{family}-{}-{call}.gguf",
        std::process::id()
    ));
    let mut file = std::fs::File::create(&path).unwrap();
    write(&Recipe::small(family, GgmlDType::Q8_0), &mut file).unwrap();
    drop(file);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let digest = hex(&sha2::Sha256::digest(&bytes));
    let content = gguf_file::Content::read(&mut std::io::Cursor::new(&bytes)).unwrap();
    (
        Model::read(&content, std::sync::Arc::new(bytes)).unwrap(),
        digest,
    )
}

/// The engine's logits at each position of [`TOKENS`], one token at a time.
fn engine_logits(family: &'static str) -> (Vec<Vec<f32>>, String) {
    let (model, digest) = synthetic(family);
    let mut session = Session::new(&model, TOKENS.len());
    let logits = TOKENS
        .iter()
        .map(|&token| {
            session.forward(&[token]).unwrap();
            session.logits().to_vec()
        })
        .collect();
    (logits, digest)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn fixture(family: &str, extension: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/{family}.{extension}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x)) as f64;
    let total: f64 = logits.iter().map(|&x| (x as f64 - max).exp()).sum();
    logits
        .iter()
        .map(|&x| x as f64 - max - total.ln())
        .collect()
}

/// KL divergence of the engine's next-token distribution from llama.cpp's.
fn kl(reference: &[f32], engine: &[f32]) -> f64 {
    let (p, q) = (log_softmax(reference), log_softmax(engine));
    p.iter().zip(&q).map(|(p, q)| p.exp() * (p - q)).sum()
}

fn argmax(values: &[f32]) -> usize {
    values
        .iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |best, (i, &v)| {
            if v > best.1 { (i, v) } else { best }
        })
        .0
}

fn agrees_with_llama_cpp(family: &'static str) {
    let (engine, digest) = engine_logits(family);
    let expected_digest = String::from_utf8(fixture(family, "sha256")).unwrap();
    assert_eq!(
        digest,
        expected_digest.trim(),
        "the recipe no longer writes the file the fixture was made from: run fixtures/make_reference.py"
    );
    let reference: Vec<f32> = fixture(family, "logits")
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let vocabulary = engine[0].len();
    assert_eq!(reference.len(), TOKENS.len() * vocabulary);
    for (position, (theirs, ours)) in reference.chunks_exact(vocabulary).zip(&engine).enumerate() {
        let divergence = kl(theirs, ours);
        let (their_top, our_top) = (argmax(theirs), argmax(ours));
        // How far below llama.cpp's best its logit for the engine's pick is:
        // zero when they agree.
        let shortfall = theirs[their_top] - theirs[our_top];
        eprintln!(
            "{family} position {position}: KL {divergence:.6}, top {their_top} / {our_top}, shortfall {shortfall:.4}"
        );
        assert!(
            divergence < MOST_DIVERGENCE,
            "{family} at position {position}: KL {divergence}"
        );
        assert!(
            shortfall <= NEAR_TIE,
            "{family} at position {position}: llama.cpp picks {their_top}, the engine {our_top}, {shortfall} below it"
        );
    }
}

#[test]
fn llama_agrees_with_llama_cpp() {
    agrees_with_llama_cpp("llama");
}

#[test]
fn qwen2_agrees_with_llama_cpp() {
    agrees_with_llama_cpp("qwen2");
}

#[test]
fn qwen3_agrees_with_llama_cpp() {
    agrees_with_llama_cpp("qwen3");
}

#[test]
fn gemma3_agrees_with_llama_cpp() {
    agrees_with_llama_cpp("gemma3");
}

/// A prompt in one call (its tokens in two of the attention's blocks, two
/// heads to a key-value head, gemma3's window of four positions) gives the
/// logits the same tokens give one at a time.
#[test]
fn a_prompt_at_once_computes_what_its_tokens_one_at_a_time_do() {
    for family in ["llama", "qwen2", "qwen3", "gemma3"] {
        let (model, _) = synthetic(family);
        let mut one_at_a_time = Session::new(&model, TOKENS.len());
        for &token in &TOKENS {
            one_at_a_time.forward(&[token]).unwrap();
        }
        let mut at_once = Session::new(&model, TOKENS.len());
        at_once.forward(&TOKENS).unwrap();
        let (apart, together) = (one_at_a_time.logits().to_vec(), at_once.logits().to_vec());
        let divergence = kl(&apart, &together);
        assert!(divergence < MOST_DIVERGENCE, "{family}: KL {divergence}");
        let (top_apart, top_together) = (argmax(&apart), argmax(&together));
        assert!(
            apart[top_apart] - apart[top_together] <= NEAR_TIE,
            "{family}: {top_apart} one at a time, {top_together} at once"
        );
    }
}

/// Where the CPU has AVX-512 and FMA, the engine takes the steps of
/// llama.cpp's x86 build one token at a time (its exponential, its lanes
/// and their order, its rotation and norms: the crate's `ggml` module):
/// the logits are llama.cpp's to the bit, so the top token is llama.cpp's
/// at every near tie too.
#[test]
fn with_avx512_one_token_at_a_time_gives_llama_cpps_logits_to_the_bit() {
    #[cfg(target_arch = "x86_64")]
    let avx512 = std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    let avx512 = false;
    if !avx512 {
        eprintln!("no AVX-512 here: llama.cpp's lanes are not this CPU's");
        return;
    }
    for family in ["llama", "qwen2", "qwen3", "gemma3"] {
        let (engine, _) = engine_logits(family);
        let reference = fixture(family, "logits");
        let ours: Vec<u8> = engine
            .concat()
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let differing = reference
            .chunks_exact(4)
            .zip(ours.chunks_exact(4))
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(
            differing,
            0,
            "{family}: {differing} of {} logits differ from llama.cpp's",
            reference.len() / 4
        );
    }
}
