//! The node's own language models, through the `agentsite` binary: the
//! embedded default model (obtained by the test set-up, scripts/model.sh)
//! answers with greedy decoding, bad model files are one-line errors, and a
//! node uses another node's model over the OpenAI API (`kind = "openai"`
//! against the other's `/v1` endpoint), streaming or not, hearing its
//! refusals and noticing when it dies mid-answer.

use crate::support;

use agentsite::llm::config::OpenAiConfig;
use agentsite::llm::openai::OpenAiModel;
use agentsite::llm::{
    ChatModel, ChatRequest, Delta, LlmFailure, Message, StopReason, ToolChoice, ToolSpec,
};
use std::time::{Duration, Instant};
use support::{Cli, Server};

const FRANCE: &str = "What is the capital of France? Answer in one sentence.";

/// A config whose model `remote` is the embedded model of the node at `base`.
fn config_with_remote(cli: &Cli, base: &str) -> String {
    let config = cli.data().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[[llm.models]]\nname = \"remote\"\nkind = \"openai\"\nbase_url = \"{base}/v1\"\nmodel = \"local\"\napi_key_env = \"REMOTE_KEY\"\ntimeout = \"5m\"\n"
        ),
    )
    .unwrap();
    config.to_str().unwrap().to_owned()
}

fn remote_model(base: &str) -> OpenAiModel {
    OpenAiModel::new(
        "remote",
        &OpenAiConfig {
            base_url: format!("{base}/v1"),
            model: "local".into(),
            api_key_env: None,
            timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(5),
            headers: Default::default(),
        },
    )
    .unwrap()
}

fn question(text: &str, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user(text)],
        max_tokens: Some(max_tokens),
        temperature: Some(0.0),
        ..ChatRequest::default()
    }
}

/// A config with one `[[llm.models]]` GGUF model called `m` at `path`.
fn config_with_model(cli: &Cli, path: &std::path::Path) -> std::path::PathBuf {
    let config = cli.data().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[[llm.models]]\nname = \"m\"\nkind = \"gguf\"\npath = {:?}\n",
            path.to_str().unwrap()
        ),
    )
    .unwrap();
    config
}

#[test]
fn the_embedded_model_is_listed_and_answers_a_fixed_question() {
    let cli = Cli::new();
    let listing = cli.run(&["models"]).success();
    assert!(listing.contains("local (default)"), "{listing}");
    assert!(listing.contains("gguf"), "{listing}");
    assert!(listing.contains("93.8 MiB"), "{listing}");
    assert!(listing.contains("not loaded"), "{listing}");

    let json = cli.run(&["models", "--json"]).json();
    assert_eq!(json[0]["name"], "local");
    assert_eq!(json[0]["default"], true);
    assert_eq!(json[0]["size"], 98_362_432);

    // Greedy decoding: the same answer on every machine and every run.
    let run = cli.run(&["models", "test"]);
    let answer = run.success();
    assert_eq!(answer.trim(), "The capital of France is Paris.");
    let stderr = run.stderr();
    assert!(
        stderr.contains("first token after") && stderr.contains("(end-turn)"),
        "{stderr}"
    );

    let run = cli.run(&[
        "models",
        "test",
        "local",
        "--question",
        "What is 2 + 2? Answer with the number only.",
    ]);
    assert!(run.success().contains('4'), "{}", run.stdout());
}

#[test]
fn bad_model_files_are_one_line_errors() {
    let cli = Cli::new();
    let missing = cli.data().join("missing.gguf");
    let config = config_with_model(&cli, &missing);
    let config = config.to_str().unwrap();
    let listing = cli.run(&["--config", config, "models"]).success();
    assert!(listing.contains("missing: no file at"), "{listing}");
    cli.run(&["--config", config, "models", "test"])
        .failure("no model file at");

    // The first megabyte of the real model: a header, then nothing.
    let real = std::fs::read(default_model_path()).expect("the test set-up obtains the model");
    std::fs::write(&missing, &real[..1 << 20]).unwrap();
    cli.run(&["--config", config, "models", "test", "m"])
        .failure("is not a complete GGUF file");

    std::fs::write(&missing, b"this is not a model").unwrap();
    cli.run(&["--config", config, "models", "test", "m"])
        .failure("is not a complete GGUF file");

    std::fs::write(&missing, gguf_of_architecture("mamba")).unwrap();
    cli.run(&["--config", config, "models", "test", "m"])
        .failure(
            "holds a model of the \"mamba\" family; the engine runs llama, qwen2, qwen3 and gemma3",
        );

    cli.run(&["--config", config, "models", "test", "nope"])
        .failure("this node has no model \"nope\"; it has m");
}

#[test]
fn a_gguf_file_is_checked_and_added_as_a_model() {
    let cli = Cli::new();
    let file = default_model_path();
    let run = cli.run(&["models", "add", file.to_str().unwrap(), "--name", "small"]);
    assert_eq!(run.success().trim(), "small");
    assert!(
        run.stderr().contains(
            "added model \"small\" (134.5M parameters, trained for 8192 tokens of context)"
        ),
        "{}",
        run.stderr()
    );
    // The embedded default stays beside it, and the default.
    let listing = cli.run(&["models", "--json"]).json();
    let names: Vec<&str> = listing
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["local", "small"], "{listing}");
    assert_eq!(listing[0]["default"], true);
    let answer = cli.run(&["models", "test", "small"]).success();
    assert_eq!(answer.trim(), "The capital of France is Paris.");

    cli.run(&["models", "add", file.to_str().unwrap(), "--name", "small"])
        .failure("the config already has a model called \"small\"; choose another with --name");
    let mamba = cli.data().join("mamba-130m.gguf");
    std::fs::write(&mamba, gguf_of_architecture("mamba")).unwrap();
    cli.run(&["models", "add", mamba.to_str().unwrap()])
        .failure(
            "holds a model of the \"mamba\" family; the engine runs llama, qwen2, qwen3 and gemma3",
        );
    cli.run(&["models", "add", "/nowhere/model.gguf"])
        .failure("cannot read /nowhere/model.gguf");
    let config = std::fs::read_to_string(cli.data().join("config.toml")).unwrap();
    assert_eq!(config.matches("[[llm.models]]").count(), 2, "{config}");
}

/// What the loopback file server of the download test does.
#[derive(Default)]
struct Hosting {
    model: Vec<u8>,
    /// The next whole-file answer breaks off after this many bytes.
    cut_after: std::sync::Mutex<Option<usize>>,
    /// The `X-Linked-Etag` it sends (Hugging Face's sha256 of the file).
    vouches: std::sync::Mutex<String>,
    /// The `Range` headers it was sent.
    ranges: std::sync::Mutex<Vec<String>>,
    /// Bytes of the endless wrong-family file it sent.
    sent_of_mamba: std::sync::atomic::AtomicUsize,
}

/// `/m/...`: the model, with ranges, a validator, a cut and a vouched
/// sha256; `/page.gguf`: a web page; `/mamba.gguf`: a mamba header, then
/// 64 MiB of nothing.
fn model_server(hosting: std::sync::Arc<Hosting>) -> support::served::Served {
    use axum::http::{HeaderMap, StatusCode, header};
    use axum::response::IntoResponse;
    let model = {
        let hosting = hosting.clone();
        move |headers: HeaderMap| {
            let hosting = hosting.clone();
            async move {
                let length = hosting.model.len();
                let vouches = format!("\"{}\"", hosting.vouches.lock().unwrap());
                let range = headers
                    .get(header::RANGE)
                    .map(|v| v.to_str().unwrap().to_owned());
                let from = match range {
                    Some(range) => {
                        hosting.ranges.lock().unwrap().push(range.clone());
                        let from: usize = range["bytes=".len()..range.len() - 1].parse().unwrap();
                        assert_eq!(headers[header::IF_RANGE], "\"v1\"");
                        from
                    }
                    None => 0,
                };
                let cut = hosting.cut_after.lock().unwrap().take();
                let body = hosting.model[from..].to_vec();
                let stream = futures::stream::iter(
                    body.chunks(64 << 10)
                        .scan(from, move |at, chunk| {
                            *at += chunk.len();
                            Some(match cut {
                                Some(cut) if *at > cut => Err(std::io::Error::other("cut")),
                                _ => Ok(axum::body::Bytes::copy_from_slice(chunk)),
                            })
                        })
                        .collect::<Vec<_>>(),
                );
                let status = if from > 0 {
                    StatusCode::PARTIAL_CONTENT
                } else {
                    StatusCode::OK
                };
                let mut response = (
                    status,
                    [
                        (header::ETAG, "\"v1\"".to_owned()),
                        (header::CONTENT_LENGTH, (length - from).to_string()),
                        (header::HeaderName::from_static("x-linked-etag"), vouches),
                    ],
                    axum::body::Body::from_stream(stream),
                )
                    .into_response();
                if from > 0 {
                    response.headers_mut().insert(
                        header::CONTENT_RANGE,
                        format!("bytes {from}-{}/{length}", length - 1)
                            .parse()
                            .unwrap(),
                    );
                }
                response
            }
        }
    };
    let mamba = move || {
        let hosting = hosting.clone();
        async move {
            let mut start = gguf_of_architecture("mamba");
            start.resize(1 << 20, 0);
            let chunks = std::iter::once(start).chain(std::iter::repeat_n(vec![0u8; 1 << 20], 63));
            let stream = futures::stream::iter(chunks).map(move |chunk| {
                hosting
                    .sent_of_mamba
                    .fetch_add(chunk.len(), std::sync::atomic::Ordering::SeqCst);
                Ok::<_, std::io::Error>(axum::body::Bytes::from(chunk))
            });
            (
                [(header::CONTENT_LENGTH, (64u64 << 20).to_string())],
                axum::body::Body::from_stream(stream),
            )
        }
    };
    use futures::StreamExt as _;
    support::served::Served::start(
        axum::Router::new()
            .route("/m/{file}", axum::routing::get(model))
            .route("/mamba.gguf", axum::routing::get(mamba))
            .route(
                "/page.gguf",
                axum::routing::get(|| async {
                    axum::response::Html("<html>the model's page</html>")
                }),
            ),
    )
}

/// `models add URL`: downloaded into the data directory with the sha256
/// the server vouches for checked, resumed where it broke off; a wrong
/// sha256, a file past --max-size, a web page and a model of a family the
/// node does not run are refused (the last at its header, not at its end)
/// and leave nothing behind.
#[test]
fn a_model_is_downloaded_resumed_checked_and_added() {
    use sha2::Digest as _;
    let cli = Cli::new();
    let model = std::fs::read(default_model_path()).expect("the test set-up obtains the model");
    let sha256 = hex::encode(sha2::Sha256::digest(&model));
    let hosting = std::sync::Arc::new(Hosting {
        cut_after: std::sync::Mutex::new(Some(model.len() / 3)),
        vouches: std::sync::Mutex::new(sha256.clone()),
        model,
        ..Hosting::default()
    });
    let served = model_server(hosting.clone());
    let url = |path: &str| format!("http://{}{path}", served.address);
    let models = cli.data().join("models");
    let listed = |dir: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };

    let file_url = url("/m/SmolLM2-135M-Instruct.Q4_1.gguf");
    cli.run(&["models", "add", &file_url])
        .failure("the same command resumes it");
    assert_eq!(
        listed(&models),
        [
            "SmolLM2-135M-Instruct.Q4_1.gguf.part",
            "SmolLM2-135M-Instruct.Q4_1.gguf.part.json"
        ]
    );
    let kept = std::fs::metadata(models.join("SmolLM2-135M-Instruct.Q4_1.gguf.part"))
        .unwrap()
        .len();
    assert!(kept > 0 && kept <= hosting.model.len() as u64 / 3, "{kept}");

    let run = cli.run(&["models", "add", &file_url]);
    assert_eq!(run.success().trim(), "smollm2-135m-instruct");
    let told = run.stderr();
    assert!(told.contains("resuming at"), "{told}");
    assert!(
        told.contains(&format!(
            "sha256 {sha256} as the server's X-Linked-Etag says"
        )),
        "{told}"
    );
    assert_eq!(*hosting.ranges.lock().unwrap(), [format!("bytes={kept}-")]);
    let fetched = models.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(std::fs::read(&fetched).unwrap() == hosting.model);
    assert_eq!(listed(&models), ["SmolLM2-135M-Instruct.Q4_1.gguf"]);
    let listing = cli.run(&["models", "--json"]).json();
    assert_eq!(listing[1]["name"], "smollm2-135m-instruct", "{listing}");

    // A sha256 other than the file's, the operator's or the server's.
    let wrong = "0".repeat(64);
    cli.run(&[
        "models", "add", &file_url, "--name", "other", "--sha256", &wrong,
    ])
    .failure(&format!(
        "the file's sha256 is {sha256}, not {wrong} as --sha256 says; nothing was kept"
    ));
    *hosting.vouches.lock().unwrap() = wrong.clone();
    cli.run(&["models", "add", &file_url, "--name", "other"])
        .failure("as the server's X-Linked-Etag says; nothing was kept");
    cli.run(&[
        "models",
        "add",
        &file_url,
        "--name",
        "other",
        "--max-size",
        "1MiB",
    ])
    .failure("more than the 1.0 MiB a download may take (--max-size)");
    cli.run(&["models", "add", &url("/page.gguf")])
        .failure("is not a GGUF file (text/html; charset=utf-8); for a Hugging Face file, use its /resolve/ link");
    cli.run(&["models", "add", &url("/mamba.gguf")])
        .failure("holds a model of the \"mamba\" family");
    let sent = hosting
        .sent_of_mamba
        .load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        sent < 32 << 20,
        "the mamba file was refused after {sent} bytes"
    );
    cli.run(&["models", "add", "http://example.com/"])
        .failure("the URL does not end with a .gguf file name");
    assert_eq!(listed(&models), ["SmolLM2-135M-Instruct.Q4_1.gguf"]);
    let config = std::fs::read_to_string(cli.data().join("config.toml")).unwrap();
    assert_eq!(config.matches("[[llm.models]]").count(), 2, "{config}");
}

#[test]
fn bad_model_configs_are_one_line_errors() {
    let cli = Cli::new();
    let config = cli.data().join("config.toml");
    std::fs::write(
        &config,
        "[[llm.models]]\nname = \"a\"\nkind = \"gguf\"\npath = \"/m\"\n[[llm.models]]\nname = \"a\"\nkind = \"gguf\"\npath = \"/n\"\n",
    )
    .unwrap();
    cli.run(&["--config", config.to_str().unwrap(), "models"])
        .failure("the name \"a\" is used twice");
}

fn default_model_path() -> std::path::PathBuf {
    let dir = std::env::var_os("AGENTSITE_MODELS").map_or_else(
        || {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap())
                .join(".cache/agentsite/models")
        },
        std::path::PathBuf::from,
    );
    dir.join("SmolLM2-135M-Instruct.Q4_1.gguf")
}

/// A GGUF file (version 3) with no tensors whose only metadata names its
/// architecture.
fn gguf_of_architecture(architecture: &str) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"GGUF");
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // tensors
    out.extend_from_slice(&1u64.to_le_bytes()); // metadata entries
    let key = b"general.architecture";
    out.extend_from_slice(&(key.len() as u64).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&8u32.to_le_bytes()); // string
    out.extend_from_slice(&(architecture.len() as u64).to_le_bytes());
    out.extend_from_slice(architecture.as_bytes());
    out
}

#[test]
fn an_agent_granted_llm_gets_the_nodes_model_from_the_command_line() {
    let cli = Cli::new();
    cli.add(&["conformance"]);
    let args = r#"{"prompt": "What is the capital of France? Answer in one sentence."}"#;
    let refused = cli.call("conformance", "test_sampling", args);
    refused.failure("has not granted this agent a language model");

    cli.grant("conformance", &["llm"]);
    let answer = cli.call("conformance", "test_sampling", args).json();
    let text = answer["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("LLM response: ") && text.contains("Paris"),
        "{answer}"
    );
}

#[test]
fn a_node_uses_another_nodes_model_over_the_openai_api() {
    let sharer = Cli::new();
    let server = Server::start(sharer.data(), &["--token", "s3cret"]);
    let cli = Cli::new();
    let config = config_with_remote(&cli, &server.base);
    let config = config.as_str();

    let listing = cli.run(&["--config", config, "models"]).success();
    assert!(
        listing.contains("its API key variable REMOTE_KEY is not set"),
        "{listing}"
    );
    cli.run(&["--config", config, "models", "test"])
        .failure("model \"remote\": its API key variable REMOTE_KEY is not set");

    let wrong = [("REMOTE_KEY", "wrong")];
    let listing = cli
        .run_with_env(&["--config", config, "models"], &wrong)
        .success();
    assert!(listing.contains("401"), "{listing}");

    let key = [("REMOTE_KEY", "s3cret")];
    let json = cli
        .run_with_env(&["--config", config, "models", "--json"], &key)
        .json();
    assert_eq!(json[0]["state"], "reachable", "{json}");
    assert_eq!(json[0]["kind"], "openai");

    // Streamed through this node from the other: the same greedy answer.
    let run = cli.run_with_env(&["--config", config, "models", "test"], &key);
    assert_eq!(run.success().trim(), "The capital of France is Paris.");
    assert!(
        run.stderr().contains("first token after"),
        "{}",
        run.stderr()
    );

    // An agent granted llm on this node: a whole answer from the other node.
    cli.add(&["conformance"]);
    cli.grant("conformance", &["llm"]);
    let answer = cli
        .run_with_env(
            &[
                "--config",
                config,
                "call",
                "conformance",
                "test_sampling",
                r#"{"prompt": "What is the capital of France? Answer in one sentence."}"#,
            ],
            &key,
        )
        .json();
    let text = answer["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("Paris"), "{answer}");

    let mut server = server;
    server.kill();
    cli.run_with_env(&["--config", config, "models", "test"], &key)
        .failure(&format!(
            "model \"remote\": cannot reach {}/v1",
            server.base
        ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_server_answers_429_and_a_dead_one_ends_the_stream_with_an_error() {
    let sharer = Cli::new();
    let config = sharer.data().join("config.toml");
    let model = default_model_path();
    std::fs::write(
        &config,
        format!(
            "[[llm.models]]\nname = \"local\"\nkind = \"gguf\"\npath = {:?}\nmax_concurrent = 1\nqueue = 0\n",
            model.to_str().unwrap()
        ),
    )
    .unwrap();
    let mut server = Server::start(sharer.data(), &["--config", config.to_str().unwrap()]);
    let remote = remote_model(&server.base);
    let deadline = Instant::now() + Duration::from_secs(300);

    // A long answer holds the only slot; the next request is turned away.
    let (sink, mut pieces) = tokio::sync::mpsc::channel(256);
    let long = tokio::spawn({
        let remote = remote_model(&server.base);
        async move {
            remote
                .complete(
                    question("Write a long story about a dragon.", 400),
                    deadline,
                    Some(sink),
                )
                .await
        }
    });
    let first = tokio::time::timeout(Duration::from_secs(240), pieces.recv())
        .await
        .expect("the long answer starts")
        .expect("a piece of text");
    assert!(matches!(first, Delta::Text(_)), "{first:?}");
    let busy = remote
        .complete(question(FRANCE, 10), deadline, None)
        .await
        .unwrap_err();
    let LlmFailure::Busy(message) = &busy else {
        panic!("{busy:?}")
    };
    assert!(
        message.contains("429") && message.contains("model \"local\" is busy"),
        "{message}"
    );

    // The serving node dies mid-answer: the stream's end is an error.
    server.kill();
    let cut = tokio::time::timeout(Duration::from_secs(60), long)
        .await
        .expect("the cut answer ends")
        .unwrap()
        .unwrap_err();
    let LlmFailure::Unavailable(message) = &cut else {
        panic!("{cut:?}")
    };
    assert!(
        message.starts_with("model \"remote\": the server's stream"),
        "{message}"
    );
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "weather".into(),
        description: "The weather forecast for a city".into(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city's name"}},
            "required": ["city"],
        }),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_model_keeps_to_schemas_and_calls_tools_over_the_openai_api() {
    let sharer = Cli::new();
    let server = Server::start(sharer.data(), &[]);
    let remote = remote_model(&server.base);
    let deadline = Instant::now() + Duration::from_secs(300);

    // A JSON answer of the asked shape, from a 135M-parameter model.
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 40},
            "country": {"type": "string", "maxLength": 40},
        },
        "required": ["city", "country"],
        "additionalProperties": false,
    });
    let answer = remote
        .complete(
            ChatRequest {
                response_schema: Some(schema),
                ..question("What is the capital of France?", 60)
            },
            deadline,
            None,
        )
        .await
        .unwrap();
    let json: serde_json::Value = serde_json::from_str(&answer.content)
        .unwrap_or_else(|e| panic!("{e}: {:?}", answer.content));
    assert!(
        json["city"].is_string() && json["country"].is_string(),
        "{json}"
    );
    assert_eq!(json.as_object().unwrap().len(), 2, "{json}");

    // A required tool call: the model asks for the tool, with arguments of
    // its schema; streamed, the call arrives as a piece of its own.
    let ask = ChatRequest {
        tools: vec![weather_tool()],
        tool_choice: ToolChoice::Required,
        ..question("What's the weather like in Paris today?", 60)
    };
    let (sink, mut pieces) = tokio::sync::mpsc::channel(64);
    let answer = remote
        .complete(ask.clone(), deadline, Some(sink))
        .await
        .unwrap();
    assert_eq!(answer.stop_reason, StopReason::ToolCalls, "{answer:?}");
    let call = &answer.tool_calls[0];
    assert_eq!(call.name, "weather");
    let arguments: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
    assert!(arguments["city"].is_string(), "{arguments}");
    let mut streamed_calls = Vec::new();
    while let Some(piece) = pieces.recv().await {
        if let Delta::ToolCall(call) = piece {
            streamed_calls.push(call);
        }
    }
    assert_eq!(streamed_calls, answer.tool_calls);

    // The model answers the tool's result in words.
    let mut conversation = ask.messages.clone();
    conversation.push(Message {
        tool_calls: answer.tool_calls.clone(),
        ..Message::new(agentsite::llm::Role::Assistant, "")
    });
    conversation.push(Message {
        tool_call_id: Some(call.id.clone()),
        ..Message::new(agentsite::llm::Role::Tool, "Sunny, 24 degrees Celsius.")
    });
    let answer = remote
        .complete(
            ChatRequest {
                messages: conversation,
                tool_choice: ToolChoice::None,
                ..ask.clone()
            },
            deadline,
            None,
        )
        .await
        .unwrap();
    assert!(
        answer.tool_calls.is_empty() && !answer.content.is_empty(),
        "{answer:?}"
    );

    // Requests that cannot be held to their shape are refused, in a line.
    for (request, reason) in [
        (
            ChatRequest {
                tool_choice: ToolChoice::Named("forecast".into()),
                ..ask.clone()
            },
            "tool \"forecast\", which it does not offer",
        ),
        (
            ChatRequest {
                response_schema: Some(serde_json::json!({"type": "frobnicate"})),
                ..question(FRANCE, 10)
            },
            "the model cannot be held to this schema",
        ),
    ] {
        let refused = remote.complete(request, deadline, None).await.unwrap_err();
        let LlmFailure::InvalidRequest(message) = &refused else {
            panic!("{refused:?}")
        };
        assert!(message.contains(reason), "{message}");
    }
}

/// An MCP client that keeps the progress messages it is sent.
#[derive(Clone, Default)]
struct Watcher {
    progress: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl rmcp::ClientHandler for Watcher {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        if let Some(message) = params.message {
            self.progress.lock().unwrap().push(message);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_runs_its_own_tool_loop_and_streams_with_the_chat_interface() {
    use rmcp::ServiceExt as _;
    let cli = Cli::new();
    cli.add(&["research", "calculator"]);
    let task = r#"{"task": "Which agent can add two numbers?"}"#;
    cli.call("research", "find_agents", task)
        .failure("has not granted this agent a language model");

    // A tool loop runs the model several times: more than the default 10 s.
    cli.grant("research", &["llm", "peers", "deadline=2m"]);
    let found = cli.call("research", "find_agents", task).json();
    let findings = &found["structuredContent"];
    let searches = findings["searches"].as_array().unwrap();
    assert!(!searches.is_empty(), "the model searched: {found}");
    assert!(
        searches.iter().all(|s| s.as_str().unwrap().len() >= 2),
        "each search is held to the tool's schema: {found}"
    );
    assert_eq!(findings["model"], "local", "{found}");
    assert!(findings["answer"].is_string(), "{found}");

    // The summary streams: the agent reports the text so far as progress
    // while the model writes it, and the caller sees it grow.
    let server = Server::start(cli.data(), &[]);
    let watcher = Watcher::default();
    let client = watcher
        .clone()
        .serve(rmcp::transport::StreamableHttpClientTransport::from_uri(
            server.url("/mcp"),
        ))
        .await
        .unwrap();
    let arguments = serde_json::json!({"text": "The Rhine rises in the Swiss Alps and flows north through Germany and the Netherlands into the North Sea. It is one of Europe's busiest waterways."});
    let summary = call_over_mcp(&client, "research.summarize", arguments).await;
    // Notifications may trail the result: wait until the last one is in.
    let started = Instant::now();
    while watcher.progress.lock().unwrap().last() != Some(&summary) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?} then {summary:?}",
            watcher.progress.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let progress = watcher.progress.lock().unwrap().clone();
    assert!(progress.len() >= 3, "{progress:?}");
    assert!(
        progress
            .windows(2)
            .all(|w| w[1].starts_with(&w[0]) && w[1].len() > w[0].len()),
        "{progress:?}"
    );
    client.cancel().await.unwrap();
}

#[test]
fn an_agent_built_against_contract_0_1_0_still_runs() {
    // The conformance agent as built before `chat` was added (0.1.0).
    let fixture = support::repo().join("tests/fixtures/agent-0.1.0/conformance.wasm");
    let cli = Cli::new();
    cli.run(&["add", fixture.to_str().unwrap()]).success();
    let listing = cli.run(&["inspect", "conformance", "--json"]).json();
    let imports = listing["imports"].as_array().unwrap();
    assert!(
        imports.iter().any(|i| i == "agentsite:agent/llm@0.1.0"),
        "{listing}"
    );
    cli.grant("conformance", &["llm"]);
    let answer = cli
        .call(
            "conformance",
            "test_sampling",
            r#"{"prompt": "What is the capital of France? Answer in one sentence."}"#,
        )
        .json();
    let text = answer["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("Paris"), "{answer}");
    let sum = cli.call("conformance", "test_simple_text", "{}").json();
    assert!(sum["content"][0]["text"].is_string(), "{sum}");
}

/// An MCP client that lends no model.
struct Plain;

impl rmcp::ClientHandler for Plain {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_a_model_borrows_the_one_another_node_shares() {
    use rmcp::ServiceExt as _;
    // The sharer offers its embedded default model to the network.
    let sharer = Cli::new();
    std::fs::write(
        sharer.data().join("config.toml"),
        "[llm]\nshare = [\"local\"]\nshare_rate = 4\n",
    )
    .unwrap();
    let mut sharer_node = Server::start(sharer.data(), &["--p2p-listen", "/ip4/127.0.0.1/tcp/0"]);
    let bootstrap = sharer_node.p2p.clone().unwrap();
    let sharer_id = bootstrap.rsplit('/').next().unwrap().to_owned();

    // The borrower's only model is the one the network shares.
    let borrower = Cli::new();
    std::fs::write(
        borrower.data().join("config.toml"),
        "[[llm.models]]\nname = \"borrowed\"\nkind = \"network\"\nmodel = \"local\"\n",
    )
    .unwrap();
    borrower.add(&["conformance"]);
    borrower.grant("conformance", &["llm", "deadline=2m"]);
    let borrower_node = Server::start(
        borrower.data(),
        &[
            "--p2p-listen",
            "/ip4/127.0.0.1/tcp/0",
            "--bootstrap",
            &bootstrap,
        ],
    );

    // `models --network` finds it once the borrower has joined.
    let started = Instant::now();
    let listed = loop {
        let listed = borrower.run(&["models", "--network", "--json"]).json();
        if listed.as_array().is_some_and(|l| !l.is_empty()) {
            break listed;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no shared model found: {listed}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(listed[0]["name"], "local", "{listed}");
    assert_eq!(listed[0]["sharers"][0], sharer_id.as_str(), "{listed}");

    // An agent on the borrower gets its answer from the sharer's model.
    let transport =
        rmcp::transport::StreamableHttpClientTransport::from_uri(borrower_node.url("/mcp"));
    let client = Plain.serve(transport).await.unwrap();
    let arguments =
        serde_json::json!({"prompt": "What is the capital of France? Answer in one sentence."});
    let text = call_over_mcp(&client, "conformance.test_sampling", arguments).await;
    assert!(text.contains("Paris"), "{text}");
    client.cancel().await.unwrap();
    let metrics = sharer_node.metrics().await;
    assert!(
        metrics.contains("agentsite_llm_requests_total{model=\"local\",agent=\"peer:"),
        "{metrics}"
    );

    // The borrower's /v1 serves it too; past the sharer's rate per peer,
    // requests are turned away as busy.
    let borrowed = OpenAiModel::new(
        "borrowed-over-http",
        &OpenAiConfig {
            base_url: format!("{}/v1", borrower_node.base),
            model: "borrowed".into(),
            api_key_env: None,
            timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(5),
            headers: Default::default(),
        },
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut busy = None;
    for _ in 0..4 {
        match borrowed.complete(question(FRANCE, 3), deadline, None).await {
            Ok(answer) => assert_eq!(answer.usage.completion_tokens, 3),
            Err(failure) => {
                busy = Some(failure);
                break;
            }
        }
    }
    let Some(LlmFailure::Busy(message)) = &busy else {
        panic!("{busy:?}")
    };
    assert!(
        message.contains("at most 4 requests a minute from one peer"),
        "{message}"
    );

    // The sharer goes away: a clear error, and the borrower serves on.
    sharer_node.kill();
    let gone = borrowed
        .complete(question(FRANCE, 3), deadline, None)
        .await
        .unwrap_err();
    assert!(
        matches!(gone, LlmFailure::Unavailable(_) | LlmFailure::Busy(_)),
        "{gone:?}"
    );
    let health = reqwest::get(borrower_node.url("/health")).await.unwrap();
    assert!(health.status().is_success());
}

/// An MCP client that lends a model of its own (sampling): it answers
/// every request with the same words.
struct Lender;

// Sampling is deprecated in the 2026 MCP revision, and still what clients
// that lend a model speak.
#[allow(deprecated)]
impl rmcp::ClientHandler for Lender {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.capabilities.sampling = Some(Default::default());
        info
    }

    async fn create_message(
        &self,
        _params: rmcp::model::CreateMessageRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        Ok(rmcp::model::CreateMessageResult::new(
            rmcp::model::SamplingMessage::assistant_text("the lent model's answer"),
            "lender".into(),
        ))
    }
}

async fn sample_over_mcp(
    client: &rmcp::service::RunningService<rmcp::RoleClient, Lender>,
) -> String {
    let arguments =
        serde_json::json!({"prompt": "What is the capital of France? Answer in one sentence."});
    call_over_mcp(client, "conformance.test_sampling", arguments).await
}

/// Calls `tool` over MCP; its text, which must not be an error.
async fn call_over_mcp<H: rmcp::ClientHandler>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, H>,
    tool: &'static str,
    arguments: serde_json::Value,
) -> String {
    let result = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new(tool)
                .with_arguments(arguments.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<String>();
    assert_ne!(result.is_error, Some(true), "{text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_llm_grant_routes_requests_counts_them_and_holds_budgets() {
    use rmcp::ServiceExt as _;
    let cli = Cli::new();
    cli.add(&["conformance"]);
    let args = r#"{"prompt": "What is the capital of France? Answer in one sentence."}"#;

    // The command line lends no model: a client-only route has none.
    cli.grant("conformance", &["llm", "llm-route=client"]);
    cli.call("conformance", "test_sampling", args)
        .failure("route client");

    let server = Server::start(cli.data(), &[]);
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(server.url("/mcp"));
    let client = Lender.serve(transport).await.unwrap();
    assert!(
        sample_over_mcp(&client)
            .await
            .contains("the lent model's answer")
    );
    cli.grant("conformance", &["llm-route=node"]);
    let answer = sample_over_mcp(&client).await;
    assert!(answer.contains("Paris"), "{answer}");
    cli.grant("conformance", &["llm-route=client-first"]);
    assert!(
        sample_over_mcp(&client)
            .await
            .contains("the lent model's answer")
    );
    client.cancel().await.unwrap();

    // Only the node's model's request is counted, with its tokens.
    let metrics = server.metrics().await;
    assert!(
        metrics.contains(r#"agentsite_llm_requests_total{model="local",agent="conformance"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            r#"agentsite_llm_tokens_total{model="local",agent="conformance",kind="completion"}"#
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"agentsite_llm_time_to_first_token_seconds_count{model="local",agent="conformance"} 1"#),
        "{metrics}"
    );
    drop(server);

    // A daily budget: the first answer spends it and the next is refused.
    // (On a node of its own: the answer above counts toward this day.)
    let cli = Cli::new();
    cli.add(&["conformance"]);
    let granted = cli.run(&["grant", "conformance", "llm=default:30tokens/day"]);
    assert!(
        granted
            .success()
            .contains("the default model, 30 tokens per day, route client-first"),
        "{}",
        granted.stdout()
    );
    let answer = cli.call("conformance", "test_sampling", args).json();
    assert!(answer.to_string().contains("Paris"), "{answer}");
    cli.call("conformance", "test_sampling", args)
        .failure("this agent used its budget of 30 tokens per day (llm grant)");

    // A grant of a model the node does not have says so.
    cli.grant("conformance", &["llm=gpt"]);
    cli.call("conformance", "test_sampling", args)
        .failure("which this node does not have (it has local)");
}

/// A goal on the embedded model whose tool's input schema defines its
/// types under `$defs` and refers to them with `$ref` (the conformance
/// agent's JSON Schema 2020-12 tool): the call is written under the
/// schema's grammar and runs; the conclusion states what it returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_calls_a_tool_whose_schema_uses_defs_on_the_embedded_model() {
    use agentsite::goals::config::GoalsConfig;
    use agentsite::goals::{GoalState, NewGoal};
    use support::scripted::{first_call, run_goal};
    let (node, dir) =
        support::hostile::node_with(&["conformance"], agentsite::config::Limits::default()).await;
    let goals = support::scripted::goals_for(
        dir.path(),
        &node,
        None,
        node.models().clone(),
        GoalsConfig::default(),
    );
    let new = NewGoal {
        text: "Greet 'Ada'.".into(),
        team: vec!["conformance".into()],
        ..Default::default()
    };
    let (record, messages) = run_goal(&goals, new, Duration::from_secs(300)).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    let call = first_call(&messages);
    assert_eq!(call.tool, "json_schema_2020_12_tool");
    assert!(!call.is_error, "{call:?}");
    assert!(call.result.starts_with("Hello, Ada"), "{call:?}");
    let conclusion = record.conclusion.unwrap();
    assert!(conclusion.contains("Hello, Ada"), "{conclusion}");
}

/// The peak resident memory of process `pid`, in bytes.
fn peak_resident(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status");
    kib * 1024
}

/// A prompt longer than the model's window by its bytes alone is refused
/// before it is tokenized (issue 41): tokenizing costs about a hundred
/// times the text's size, so a 3.9 MB prompt cost the node some 350 MiB
/// before it learnt that the prompt was too long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_longer_than_the_window_is_refused_before_it_is_tokenized() {
    let cli = Cli::new();
    let server = Server::start(cli.data(), &[]);
    let client = reqwest::Client::new();
    let ask = |content: String, max_tokens: u32| {
        client
            .post(server.url("/v1/chat/completions"))
            .json(&serde_json::json!({
                "model": "local",
                "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": content}],
            }))
            .send()
    };
    // The model is loaded by a first, short request.
    assert!(ask("Hi".into(), 1).await.unwrap().status().is_success());
    let before = peak_resident(server.pid());
    let response = ask("word ".repeat(780_000), 16).await.unwrap();
    assert_eq!(response.status(), 400);
    let body: serde_json::Value = response.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("takes at most"), "{body}");
    let grown = peak_resident(server.pid()).saturating_sub(before);
    assert!(
        grown < 64 << 20,
        "refusing a 3.9 MB prompt raised the node's peak memory by {} MiB",
        grown >> 20
    );
}

/// A model of random weights of `family` whose vocabulary can write any
/// text and whose file carries `template` (see agentsite_llama::synthetic).
fn chatting_model(
    path: &std::path::Path,
    family: &'static str,
    chat: agentsite_llama::synthetic::Chat,
) {
    use agentsite_llama::synthetic::{Recipe, write};
    let recipe = Recipe::chatting(family, candle_core::quantized::GgmlDType::Q8_0, chat);
    let mut file = std::fs::File::create(path).unwrap();
    write(&recipe, &mut file).unwrap();
}

fn template_fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/../tests/fixtures/templates/{name}.jinja",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// A FunctionGemma-style template: tools declared in the first turn, past
/// calls written as `<start_function_call>call:name{…}<end_function_call>`.
const FUNCTION_GEMMA: &str = "{{ bos_token }}{% for m in messages %}{{ '<start_of_turn>' + ('model' if m.role == 'assistant' else 'user') + '\\n' }}{% if loop.first and tools %}{% for t in tools %}{{ '<start_function_declaration>declaration:' + t.function.name + '{description:<escape>' + t.function.description + '<escape>}<end_function_declaration>' }}{% endfor %}{% endif %}{{ m.content }}{% if m.tool_calls %}{% for c in m.tool_calls %}{{ '<start_function_call>call:' + c.function.name + '{}<end_function_call>' }}{% endfor %}{% endif %}{{ '<end_of_turn>\\n' }}{% endfor %}{{ '<start_of_turn>model\\n' }}";

/// Each family's tool calls, in its own form, come out of `/v1` as OpenAI
/// tool calls held to the tool's schema: a model of random weights can
/// only be right because the template, the tokenizer, the grammar and the
/// reading of its answer each do their part.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_familys_tool_calls_come_out_of_v1_held_to_the_schema() {
    use agentsite_llama::synthetic::Chat;
    let qwen = Chat {
        sentence_piece: false,
        controls: strings(&["<|endoftext|>", "<|im_start|>", "<|im_end|>"]),
        user_defined: strings(&["<tool_call>", "</tool_call>", "<think>", "</think>"]),
        bos: "<|endoftext|>".into(),
        eos: "<|im_end|>".into(),
        add_bos: false,
        template: Some(template_fixture("qwen3")),
    };
    let llama = Chat {
        sentence_piece: false,
        controls: strings(&[
            "<|begin_of_text|>",
            "<|end_of_text|>",
            "<|start_header_id|>",
            "<|end_header_id|>",
            "<|eot_id|>",
            "<|eom_id|>",
            "<|python_tag|>",
        ]),
        user_defined: Vec::new(),
        bos: "<|begin_of_text|>".into(),
        eos: "<|eot_id|>".into(),
        add_bos: true,
        template: Some(template_fixture("llama3.2")),
    };
    let gemma_controls = [
        "<pad>",
        "<eos>",
        "<bos>",
        "<start_of_turn>",
        "<end_of_turn>",
    ];
    let gemma = Chat {
        sentence_piece: true,
        controls: strings(&gemma_controls),
        user_defined: Vec::new(),
        bos: "<bos>".into(),
        eos: "<eos>".into(),
        add_bos: true,
        template: None,
    };
    let function_gemma = Chat {
        controls: strings(
            &[
                &gemma_controls[..],
                &[
                    "<start_function_declaration>",
                    "<end_function_declaration>",
                    "<start_function_call>",
                    "<end_function_call>",
                    "<escape>",
                ],
            ]
            .concat(),
        ),
        template: Some(FUNCTION_GEMMA.into()),
        ..gemma.clone()
    };
    let cases = [
        ("qwen3", qwen.clone(), "qwen3 (Hermes <tool_call>)"),
        ("qwen2", qwen, "qwen2"),
        ("llama", llama, "llama (Llama 3 JSON)"),
        ("gemma3", gemma, "gemma3 without a template (listed calls)"),
        ("gemma3", function_gemma, "gemma3 (FunctionGemma)"),
    ];
    let tool = ToolSpec {
        name: "weather".into(),
        description: "The weather in a city.".into(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {"city": {"enum": ["Oslo", "Rome"]}},
            "required": ["city"],
        }),
    };
    for (family, chat, case) in cases {
        let cli = Cli::new();
        let path = cli.data().join("synthetic.gguf");
        chatting_model(&path, family, chat);
        config_with_model(&cli, &path);
        let server = Server::start(cli.data(), &[]);
        let model = OpenAiModel::new(
            "m",
            &OpenAiConfig {
                base_url: format!("{}/v1", server.base),
                model: "m".into(),
                api_key_env: None,
                timeout: Duration::from_secs(120),
                connect_timeout: Duration::from_secs(5),
                headers: Default::default(),
            },
        )
        .unwrap();
        let answer = model
            .complete(
                ChatRequest {
                    tools: vec![tool.clone()],
                    tool_choice: ToolChoice::Required,
                    // One call: a model of random weights would otherwise
                    // go on calling until its tokens run out.
                    parallel_tool_calls: Some(false),
                    ..question("What's the weather in Oslo?", 200)
                },
                Instant::now() + Duration::from_secs(120),
                None,
            )
            .await
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(
            answer.stop_reason,
            StopReason::ToolCalls,
            "{case}: {answer:?}"
        );
        assert_eq!(answer.tool_calls[0].name, "weather", "{case}");
        let arguments: serde_json::Value =
            serde_json::from_str(&answer.tool_calls[0].arguments).unwrap();
        assert!(
            ["Oslo", "Rome"].contains(&arguments["city"].as_str().unwrap_or_default()),
            "{case}: {arguments}"
        );
    }
}
