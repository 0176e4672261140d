//! The embedded default model (SmolLM2-135M-Instruct, GGUF Q4_1) against
//! llama.cpp on the same file, side by side in one run: a prompt of about
//! 200 tokens, 128 generated tokens, greedy decoding.
//!
//! * in process: `Models::complete` of the node, as an agent's `llm` call
//!   or `/v1` reaches it: prefill tokens/s, decode tokens/s, time to first
//!   token (TTFT);
//! * llama.cpp: the same prompt text through llama-cpp-python (installed
//!   into ~/.cache/agentsite-tools/llama-cpp on first use, a few minutes),
//!   2 threads;
//! * a serving node (`agentsite serve`) with the model loaded: resident
//!   memory, and TTFT through `/v1` (streamed, first content chunk) against
//!   in process, for a short prompt: the endpoint's overhead.
//!
//! Run with `cargo bench -p agentsite --bench models` (the set-up scripts
//! obtain the model). Prints a Markdown table for BENCHMARKS.md.

#[path = "../tests/support/mod.rs"]
mod support;

use agentsite::llm::models::Models;
use agentsite::llm::{ChatRequest, LlmConfig, Message, embedded};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{Cli, Server, tools_dir};

const RUNS: usize = 5;
const GENERATED: u32 = 128;
const LLAMA_CPP_PYTHON: &str = "llama-cpp-python==0.3.36";

const SYSTEM: &str = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
/// About 170 tokens of context, then the ask.
const USER: &str = "The river Rhine rises in the Swiss Alps, flows through Lake Constance, \
then forms the border between Germany and France before it turns north through the \
Rhineland, past Cologne and Düsseldorf, and reaches the North Sea in the Netherlands. \
For centuries it carried timber, coal, grain and wine; castles on its cliffs collected \
tolls from every boat that passed. Today barges still move millions of tonnes of goods \
each year, tourists ride steamers through the Middle Rhine gorge, and cities along the \
banks draw their drinking water from it. Floods in spring and low water in dry summers \
both stop the ships, and engineers have spent two hundred years straightening, deepening \
and guarding the channel. Write a long story for children about a small boat that \
travels the whole river from the mountains to the sea.";

#[derive(Debug, Clone, Copy)]
struct Run {
    prompt_tokens: u32,
    generated: u32,
    /// From the request to the first generated token.
    ttft: Duration,
    /// From the first generated token to the last.
    decode: Duration,
}

impl Run {
    fn prefill_rate(&self) -> f64 {
        f64::from(self.prompt_tokens) / self.ttft.as_secs_f64()
    }

    fn decode_rate(&self) -> f64 {
        f64::from(self.generated.saturating_sub(1)) / self.decode.as_secs_f64()
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The prompt as the model's chat template renders it (SmolLM2's ChatML).
fn rendered_prompt() -> String {
    format!(
        "<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{USER}<|im_end|>\n<|im_start|>assistant\n"
    )
}

async fn in_process(models: &Models, user: &str, max_tokens: u32) -> Run {
    let request = ChatRequest {
        messages: vec![Message::system(SYSTEM), Message::user(user)],
        max_tokens: Some(max_tokens),
        temperature: Some(0.0),
        ..ChatRequest::default()
    };
    let started = Instant::now();
    let completion = models
        .complete(
            None,
            request,
            started + Duration::from_secs(600),
            None,
            "bench",
        )
        .await
        .expect("the embedded model answers");
    let total = started.elapsed();
    let ttft = completion
        .time_to_first_token
        .expect("a token was generated");
    Run {
        prompt_tokens: completion.usage.prompt_tokens,
        generated: completion.usage.completion_tokens,
        ttft,
        decode: total - ttft,
    }
}

/// A Python with llama-cpp-python, installed on first use.
fn llama_cpp_python() -> PathBuf {
    let venv = tools_dir().join("llama-cpp");
    let python = venv.join("bin/python");
    let ready = Command::new(&python)
        .args(["-c", "import llama_cpp"])
        .status()
        .is_ok_and(|s| s.success());
    if !ready {
        eprintln!(
            "installing {LLAMA_CPP_PYTHON} into {} (once)",
            venv.display()
        );
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .expect("python3 runs");
        assert!(made.success(), "python3 -m venv failed");
        let installed = Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", LLAMA_CPP_PYTHON])
            .status()
            .expect("pip runs");
        assert!(installed.success(), "pip install {LLAMA_CPP_PYTHON} failed");
    }
    python
}

fn llama_cpp(model: &std::path::Path) -> Vec<Run> {
    let prompt = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(prompt.path(), rendered_prompt()).unwrap();
    let script = support::repo().join("benches/llama_cpp_anchor.py");
    let output = Command::new(llama_cpp_python())
        .arg(script)
        .arg(model)
        .arg(prompt.path())
        .arg(GENERATED.to_string())
        .arg(RUNS.to_string())
        .output()
        .expect("the llama.cpp script runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let run: serde_json::Value = serde_json::from_str(line).unwrap();
            Run {
                prompt_tokens: run["prompt_tokens"].as_u64().unwrap() as u32,
                generated: run["generated"].as_u64().unwrap() as u32,
                ttft: Duration::from_secs_f64(run["ttft"].as_f64().unwrap()),
                decode: Duration::from_secs_f64(run["decode"].as_f64().unwrap()),
            }
        })
        .collect()
}

/// Resident memory of process `pid`, in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib / 1024.0
}

/// TTFT through `/v1` with `stream: true`: until the first content chunk.
async fn over_http(client: &reqwest::Client, base: &str, user: &str) -> Duration {
    use futures::StreamExt as _;
    let body = serde_json::json!({
        "model": "local", "stream": true, "temperature": 0, "max_tokens": 1,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
    });
    let started = Instant::now();
    let response = client
        .post(format!("{base}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let mut stream = response.bytes_stream();
    let mut seen = String::new();
    while let Some(bytes) = stream.next().await {
        seen.push_str(&String::from_utf8_lossy(&bytes.unwrap()));
        // The first chunk only names the role; the first text follows.
        let text = seen
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .any(|data| {
                serde_json::from_str::<serde_json::Value>(data).is_ok_and(|chunk| {
                    chunk["choices"][0]["delta"]["content"]
                        .as_str()
                        .is_some_and(|t| !t.is_empty())
                })
            });
        if text {
            return started.elapsed();
        }
    }
    panic!("no content chunk: {seen}");
}

fn row(name: &str, runs: &[Run]) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "| {name} | {} | {} | {:.0} | {:.1} | {:.0} |",
        runs[0].prompt_tokens,
        runs[0].generated,
        median(runs.iter().map(Run::prefill_rate).collect()),
        median(runs.iter().map(Run::decode_rate).collect()),
        median(runs.iter().map(|r| ms(r.ttft)).collect()),
    )
}

#[tokio::main]
async fn main() {
    let model = embedded::models_dir().join(embedded::DEFAULT_FILE);
    assert!(
        model.exists(),
        "no model at {} (bash scripts/model.sh)",
        model.display()
    );
    let models = Arc::new(
        Models::from_config(
            &LlmConfig::default(),
            Arc::new(agentsite::audit::Audit::new()),
        )
        .unwrap(),
    );
    models.get(None).unwrap().prepare().await.unwrap();
    // One unmeasured run: caches, page faults.
    in_process(&models, USER, 8).await;
    let mut ours = Vec::new();
    for _ in 0..RUNS {
        ours.push(in_process(&models, USER, GENERATED).await);
    }
    let theirs = llama_cpp(&model);

    // A serving node with the model loaded, and the /v1 overhead.
    let cli = Cli::new();
    let server = Server::start(cli.data(), &[]);
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let short = "Hi";
    over_http(&client, &server.base, short).await;
    let mut http = Vec::new();
    let mut local = Vec::new();
    for _ in 0..10 {
        http.push(over_http(&client, &server.base, short).await.as_secs_f64() * 1000.0);
        local.push(in_process(&models, short, 1).await.ttft.as_secs_f64() * 1000.0);
    }
    let rss = rss_mib(server.pid());
    let (http, local) = (median(http), median(local));
    drop(server);

    let decode_ratio = median(ours.iter().map(Run::decode_rate).collect())
        / median(theirs.iter().map(Run::decode_rate).collect());
    let ttft_ratio = median(ours.iter().map(|r| r.ttft.as_secs_f64()).collect())
        / median(theirs.iter().map(|r| r.ttft.as_secs_f64()).collect());
    println!("| engine | prompt tokens | generated | prefill tok/s | decode tok/s | TTFT ms |");
    println!("|---|---:|---:|---:|---:|---:|");
    println!("{}", row("agentsite (in process)", &ours));
    println!("{}", row("llama.cpp (llama-cpp-python)", &theirs));
    println!();
    println!(
        "decode: {decode_ratio:.2}x llama.cpp (target >= 0.8); TTFT: {ttft_ratio:.2}x llama.cpp (target <= 1.25)"
    );
    println!("serving node with the model loaded: {rss:.0} MiB resident (target <= 350)");
    println!(
        "TTFT of {short:?}, max_tokens 1: {http:.1} ms through /v1 (streamed), {local:.1} ms in process: overhead {:.1} ms (target <= 2)",
        http - local
    );
}
