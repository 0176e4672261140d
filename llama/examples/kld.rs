//! The engine's next-token log-probabilities, teacher-forced, in the file
//! format of llama.cpp's `llama-perplexity --kl-divergence-base`, so that
//! llama.cpp's own tool compares them with its own (top-1 agreement, KL
//! divergence):
//!
//! ```text
//! llama-perplexity -m FILE -f TEXT -c 512 --chunks 4 --kl-divergence-base llama.kld
//! cargo run --release -p agentsite-llama --example kld -- FILE llama.kld engine.kld
//! llama-perplexity -m FILE -c 512 --kl-divergence-base engine.kld --kl-divergence
//! ```
//!
//! The first run gives the tokens (read back from `llama.kld`); this one
//! feeds them to the engine one at a time, as generation does, and writes
//! the log-probabilities of the second half of each chunk (the positions
//! llama.cpp scores); the last reports "Same top p", the share of positions
//! where both pick the same next token. `--top` also prints each position
//! where the two disagree, with both tokens' log-probabilities in each.
//! `--prompt` runs each chunk's first half as the node runs a prompt (in
//! its chunks, [`PROMPT_CHUNK`], many tokens a step) and only the scored
//! half one token at a time, as generation follows a prompt.
//!
//! A position where the first choice barely leads the second can go either
//! way with the order of float additions, and llama.cpp's own batched and
//! one-token runs part there too. So the agreement is also reported by how
//! clearly the reference picks its token, and any two such files can be
//! compared the same way (llama.cpp against itself, say):
//!
//! ```text
//! cargo run --release -p agentsite-llama --example kld -- --compare REFERENCE.kld OTHER.kld
//! ```

use agentsite_llama::{Model, PROMPT_CHUNK, Session};
use std::io::{Read, Write};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, reference, other] = args.as_slice()
        && flag == "--compare"
    {
        return compare(reference, other);
    }
    let [model_path, base_path, out_path, ..] = args.as_slice() else {
        return Err("usage: kld GGUF LLAMA_KLD OUT_KLD [--top] [--prompt]".into());
    };
    let show_disagreements = args.iter().any(|a| a == "--top");
    let as_prompt = args.iter().any(|a| a == "--prompt");
    let mut file = std::io::BufReader::new(
        std::fs::File::open(model_path).map_err(|e| format!("{model_path}: {e}"))?,
    );
    let content =
        candle_core::quantized::gguf_file::Content::read(&mut file).map_err(|e| e.to_string())?;
    let add_bos = content
        .metadata
        .get("tokenizer.ggml.add_bos_token")
        .and_then(|v| v.to_bool().ok())
        .unwrap_or(false);
    let bos = content
        .metadata
        .get("tokenizer.ggml.bos_token_id")
        .and_then(|v| v.to_u32().ok());
    let model = Model::map(&content, file.get_ref()).map_err(|e| e.to_string())?;

    let base = read_logits(base_path)?;
    let int = |at: usize| i32::from_le_bytes(base[at..at + 4].try_into().unwrap());
    let n_ctx = int(8) as usize;
    let n_vocab = int(12) as usize;
    let n_chunk = int(16) as usize;
    let tokens: Vec<u32> = (0..n_chunk * n_ctx)
        .map(|i| int(20 + 4 * i) as u32)
        .collect();
    let base_records = 20 + 4 * n_chunk * n_ctx;
    let nv = 2 * n_vocab.div_ceil(2) + 4;
    let first = n_ctx / 2;
    let scored = n_ctx - 1 - first;

    let mut out = std::io::BufWriter::new(
        std::fs::File::create(out_path).map_err(|e| format!("{out_path}: {e}"))?,
    );
    out.write_all(&base[..base_records])
        .map_err(|e| e.to_string())?;
    let mut same = 0usize;
    for chunk in 0..n_chunk {
        let mut session = Session::new(&model, n_ctx);
        let mut input = tokens[chunk * n_ctx..(chunk + 1) * n_ctx].to_vec();
        if add_bos && let Some(bos) = bos {
            input[0] = bos;
        }
        if as_prompt {
            for prompt in input[..first].chunks(PROMPT_CHUNK) {
                session.forward(prompt)?;
            }
        }
        let one_at_a_time_from = if as_prompt { first } else { 0 };
        for (position, &token) in input[..n_ctx - 1]
            .iter()
            .enumerate()
            .skip(one_at_a_time_from)
        {
            session.forward(&[token])?;
            if position < first {
                continue;
            }
            let logits = session.logits();
            let record = log_probs(&logits[..n_vocab], nv);
            out.write_all(&record).map_err(|e| e.to_string())?;
            // llama.cpp's own top token at this position, from its file.
            let index = chunk * scored + (position - first);
            let at = base_records + index * nv * 2;
            let theirs = top(&base[at..at + nv * 2], n_vocab);
            let ours = top(&record, n_vocab);
            if ours == theirs {
                same += 1;
            } else if show_disagreements {
                println!(
                    "chunk {chunk} position {position}: engine {ours} ({:.3} vs {:.3}), llama.cpp {theirs} ({:.3} vs {:.3})",
                    log_prob(&record, ours),
                    log_prob(&record, theirs),
                    log_prob(&base[at..at + nv * 2], theirs),
                    log_prob(&base[at..at + nv * 2], ours),
                );
            }
        }
    }
    out.flush().map_err(|e| e.to_string())?;
    let total = n_chunk * scored;
    println!(
        "{total} positions ({n_chunk} chunks of {n_ctx}, second halves): engine and llama.cpp pick the same next token at {same} ({:.2}%)",
        100.0 * same as f64 / total as f64
    );
    compare(base_path, out_path)
}

/// How far the reference's first choice leads its second, in nats, at
/// which agreement is reported.
const MARGINS: [f32; 5] = [0.0, 0.05, 0.1, 0.2, 0.3];

/// Prints how often `other` picks the reference's top token, over all
/// positions and over those where the reference leads by each of
/// [`MARGINS`].
fn compare(reference_path: &str, other_path: &str) -> Result<(), String> {
    let (reference, other) = (read_logits(reference_path)?, read_logits(other_path)?);
    let int = |bytes: &[u8], at: usize| i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let (n_ctx, n_vocab, n_chunk) = (
        int(&reference, 8) as usize,
        int(&reference, 12) as usize,
        int(&reference, 16) as usize,
    );
    if reference[..20] != other[..20] || reference.len() != other.len() {
        return Err("the two files score different texts or vocabularies".into());
    }
    let records = 20 + 4 * n_chunk * n_ctx;
    let record_bytes = (2 * n_vocab.div_ceil(2) + 4) * 2;
    let mut counts = [(0usize, 0usize); MARGINS.len()];
    for (theirs, ours) in reference[records..]
        .chunks_exact(record_bytes)
        .zip(other[records..].chunks_exact(record_bytes))
    {
        let top_theirs = top(theirs, n_vocab);
        let lead = log_prob(theirs, top_theirs) - second_best(theirs, n_vocab, top_theirs);
        let same = top(ours, n_vocab) == top_theirs;
        for (count, &margin) in counts.iter_mut().zip(&MARGINS) {
            if margin == 0.0 || lead > margin {
                count.0 += 1;
                count.1 += usize::from(same);
            }
        }
    }
    println!("| the reference's first choice leads its second by | positions | same top token |");
    println!("|---|---:|---:|");
    for ((positions, same), margin) in counts.iter().zip(MARGINS) {
        let label = if margin == 0.0 {
            "any amount".to_owned()
        } else {
            format!("more than {margin} nats")
        };
        println!(
            "| {label} | {positions} | {same} ({:.2}%) |",
            100.0 * *same as f64 / (*positions).max(1) as f64
        );
    }
    Ok(())
}

/// A file `llama-perplexity --kl-divergence-base` wrote, whole.
fn read_logits(path: &str) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| format!("{path}: {e}"))?;
    if bytes.get(..8) != Some(b"_logits_".as_slice()) {
        return Err(format!("{path} is not a llama-perplexity logits file"));
    }
    Ok(bytes)
}

/// The highest log-probability a record gives a token other than `top`.
fn second_best(record: &[u8], n_vocab: usize, top: usize) -> f32 {
    (0..n_vocab)
        .filter(|&i| i != top)
        .map(|i| log_prob(record, i))
        .fold(f32::NEG_INFINITY, f32::max)
}

/// One position's record as llama-perplexity writes it: the scale and the
/// least log-probability as two floats (four u16), then each token's
/// log-probability as a u16 step above that least one.
fn log_probs(logits: &[f32], nv: usize) -> Vec<u8> {
    let max = logits.iter().copied().fold(f32::MIN, f32::max);
    let min = logits
        .iter()
        .copied()
        .fold(f32::MAX, f32::min)
        .max(max - 16.0);
    let sum: f64 = logits.iter().map(|&l| f64::from((l - max).exp())).sum();
    let log_sum = sum.ln() as f32;
    let min_log_prob = min - max - log_sum;
    let scale = (max - min) / 65535.0;
    let mut record = vec![0u8; nv * 2];
    record[0..4].copy_from_slice(&scale.to_le_bytes());
    record[4..8].copy_from_slice(&min_log_prob.to_le_bytes());
    if scale > 0.0 {
        for (i, &logit) in logits.iter().enumerate() {
            let step = if logit > min {
                ((logit - min) / scale).round() as u16
            } else {
                0
            };
            record[8 + 2 * i..10 + 2 * i].copy_from_slice(&step.to_le_bytes());
        }
    }
    record
}

/// The token a record gives the highest log-probability (the first of
/// equals, as llama.cpp picks).
fn top(record: &[u8], n_vocab: usize) -> usize {
    let mut best = (0, 0u16);
    for i in 0..n_vocab {
        let step = u16::from_le_bytes([record[8 + 2 * i], record[9 + 2 * i]]);
        if i == 0 || step > best.1 {
            best = (i, step);
        }
    }
    best.0
}

/// A token's log-probability in a record.
fn log_prob(record: &[u8], token: usize) -> f32 {
    let scale = f32::from_le_bytes(record[0..4].try_into().unwrap());
    let min = f32::from_le_bytes(record[4..8].try_into().unwrap());
    let step = u16::from_le_bytes([record[8 + 2 * token], record[9 + 2 * token]]);
    scale * f32::from(step) + min
}
