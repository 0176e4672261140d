//! Each weight format runs in its own kernels and computes the model its
//! file describes: a synthetic model written in the format gives the
//! logits of the same weights written out in f32, up to the rounding of
//! the products' quantized inputs.

use agentsite_llama::synthetic::{Recipe, write};
use agentsite_llama::{Model, Session};
use candle_core::Device;
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};
use std::sync::Arc;

const TOKENS: [u32; 6] = [0, 17, 42, 311, 5, 128];

fn temporary(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "agentsite-formats-{name}-{}.gguf",
        std::process::id()
    ))
}

/// The file's bytes, written by `fill`.
fn bytes_of(name: &str, fill: impl FnOnce(&mut std::fs::File)) -> Vec<u8> {
    let path = temporary(name);
    let mut file = std::fs::File::create(&path).unwrap();
    fill(&mut file);
    drop(file);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    bytes
}

/// The same model with every tensor's values in f32.
fn widened(bytes: &[u8]) -> Vec<u8> {
    let mut reader = std::io::Cursor::new(bytes);
    let content = gguf_file::Content::read(&mut reader).unwrap();
    let tensors: Vec<(String, QTensor)> = content
        .tensor_infos
        .keys()
        .map(|name| {
            let values = content
                .tensor(&mut reader, name, &Device::Cpu)
                .and_then(|t| t.dequantize(&Device::Cpu))
                .unwrap();
            (
                name.clone(),
                QTensor::quantize(&values, GgmlDType::F32).unwrap(),
            )
        })
        .collect();
    bytes_of("widened", |file| {
        let metadata: Vec<(&str, &gguf_file::Value)> = content
            .metadata
            .iter()
            .map(|(k, v)| (k.as_str(), v))
            .collect();
        let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
        gguf_file::write(file, &metadata, &tensors).unwrap();
    })
}

fn logits(bytes: Vec<u8>) -> Vec<Vec<f32>> {
    let content = gguf_file::Content::read(&mut std::io::Cursor::new(&bytes)).unwrap();
    let model = Model::read(&content, Arc::new(bytes)).unwrap();
    let mut session = Session::new(&model, TOKENS.len());
    TOKENS
        .iter()
        .map(|&token| {
            session.forward(&[token]).unwrap();
            session.logits().to_vec()
        })
        .collect()
}

/// KL(p‖q) of the softmaxes of two rows of logits.
fn divergence(p: &[f32], q: &[f32]) -> f64 {
    let softmax = |logits: &[f32]| {
        let max = logits.iter().fold(f32::MIN, |m, &l| m.max(l));
        let exps: Vec<f64> = logits.iter().map(|&l| f64::from(l - max).exp()).collect();
        let total: f64 = exps.iter().sum();
        exps.into_iter().map(|e| e / total).collect::<Vec<f64>>()
    };
    let (p, q) = (softmax(p), softmax(q));
    p.iter()
        .zip(&q)
        .filter(|(p, _)| **p > 0.0)
        .map(|(p, q)| p * (p / q.max(1e-300)).ln())
        .sum()
}

#[test]
fn each_format_computes_the_model_its_file_holds() {
    for format in [
        GgmlDType::Q4_0,
        GgmlDType::Q4_1,
        GgmlDType::Q5_0,
        GgmlDType::Q5_1,
        GgmlDType::Q8_0,
        GgmlDType::Q4K,
        GgmlDType::Q5K,
        GgmlDType::Q6K,
        GgmlDType::F16,
        GgmlDType::BF16,
    ] {
        let recipe = Recipe::small("qwen3", format);
        let native = bytes_of(&format!("{format:?}"), |file| write(&recipe, file).unwrap());
        let reference = logits(widened(&native));
        let got = logits(native);
        let mut largest = 0f64;
        for (position, (got, want)) in got.iter().zip(&reference).enumerate() {
            let kl = divergence(want, got);
            largest = largest.max(kl);
            // The f32 model's products take f32 inputs; the format's take
            // them rounded to 8 bits (16 for the float formats).
            assert!(kl < 2e-3, "{format:?} at position {position}: KL {kl}");
        }
        eprintln!("{format:?}: KL from the same weights in f32 at most {largest:.2e}");
    }
}
