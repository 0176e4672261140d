//! The node's own language models, through the `agentsite` binary: the
//! embedded default model (obtained by the test set-up, scripts/model.sh)
//! answers with greedy decoding, bad model files are one-line errors, and a
//! node uses another node's model over the OpenAI API (`kind = "openai"`
//! against the other's `/v1` endpoint), streaming or not, hearing its
//! refusals and noticing when it dies mid-answer.

mod support;

use agentsite::llm::config::OpenAiConfig;
use agentsite::llm::openai::OpenAiModel;
use agentsite::llm::{ChatModel, ChatRequest, Delta, LlmFailure, Message};
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

    std::fs::write(&missing, gguf_of_architecture("qwen2")).unwrap();
    cli.run(&["--config", config, "models", "test", "m"])
        .failure("holds a model of the \"qwen2\" family; the node runs the llama family");

    cli.run(&["--config", config, "models", "test", "nope"])
        .failure("this node has no model \"nope\"; it has m");
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
    let args = r#"{"prompt": "What is the capital of France?"}"#;
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
                r#"{"prompt": "What is the capital of France?"}"#,
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
    let arguments = serde_json::json!({"prompt": "What is the capital of France?"});
    let result = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("conformance.test_sampling")
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
    let args = r#"{"prompt": "What is the capital of France?"}"#;

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
