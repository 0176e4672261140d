//! The node's own language models, through the `agentsite` binary: the
//! embedded default model (obtained by the test set-up, scripts/model.sh)
//! answers with greedy decoding, and bad model files are one-line errors.

mod support;

use support::Cli;

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
