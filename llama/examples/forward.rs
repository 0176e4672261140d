//! Times the forward pass alone on a GGUF file, for profiling:
//! `cargo run --release -p agentsite-llama --example forward -- FILE [PROMPT_TOKENS] [GENERATED] [CHUNK]`.
//! The prompt is token ids counting up (the text does not change the work),
//! run in chunks of `CHUNK` tokens (the node's, [`PROMPT_CHUNK`], unless
//! said).

use agentsite_llama::{Model, PROMPT_CHUNK, Session};
use std::time::Instant;

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: forward FILE [PROMPT_TOKENS] [GENERATED] [CHUNK]")?;
    let prompt: usize = args
        .next()
        .map_or(Ok(194), |n| n.parse())
        .map_err(|e| format!("{e}"))?;
    let generated: usize = args
        .next()
        .map_or(Ok(128), |n| n.parse())
        .map_err(|e| format!("{e}"))?;
    let chunk: usize = args
        .next()
        .map_or(Ok(PROMPT_CHUNK), |n| n.parse())
        .map_err(|e| format!("{e}"))?;
    if chunk == 0 {
        return Err("a chunk of no tokens".into());
    }
    let mut file = std::io::BufReader::new(std::fs::File::open(&path).map_err(|e| e.to_string())?);
    let content =
        candle_core::quantized::gguf_file::Content::read(&mut file).map_err(|e| e.to_string())?;
    let model = Model::map(&content, file.get_ref()).map_err(|e| e.to_string())?;
    let tokens: Vec<u32> = (0..prompt as u32).map(|t| 100 + t).collect();
    run(&model, &tokens, generated, chunk)
}

fn run(model: &Model, tokens: &[u32], generated: usize, chunk: usize) -> Result<(), String> {
    let prompt = tokens.len();
    for _ in 0..3 {
        let mut session = Session::new(model, prompt + generated);
        let started = Instant::now();
        for chunk in tokens.chunks(chunk) {
            session.forward(chunk)?;
        }
        let prefill = started.elapsed();
        let started = Instant::now();
        for n in 0..generated {
            let next = session
                .logits()
                .iter()
                .enumerate()
                .fold((0, f32::MIN), |b, (i, &l)| if l > b.1 { (i, l) } else { b })
                .0 as u32;
            if n + 1 < generated {
                session.forward(&[next])?;
            }
        }
        let decode = started.elapsed();
        println!(
            "prefill {prompt} tokens: {:.1} ms ({:.0} tok/s); decode {generated}: {:.1} ms ({:.1} tok/s)",
            prefill.as_secs_f64() * 1e3,
            prompt as f64 / prefill.as_secs_f64(),
            decode.as_secs_f64() * 1e3,
            generated as f64 / decode.as_secs_f64()
        );
    }
    Ok(())
}
