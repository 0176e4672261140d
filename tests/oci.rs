//! Components in OCI registries, as the WebAssembly ecosystem keeps them:
//! `agentsite push` to a real registry (Debian's `docker-registry`, CNCF
//! distribution) on loopback and `agentsite add oci://…` on another data
//! dir; ORAS (the `oras` Python SDK, pinned in tests/python) reading what
//! agentsite pushed and writing what agentsite pulls; credentials that
//! work and never show; and a lying registry refused with nothing stored.

use crate::support;

use std::time::Duration;
use support::registry::{LyingRegistry, PASSWORD, Registry, USER};
use support::{Cli, wasm};

/// Bound on one `agentsite add` or `push` against a registry on loopback.
const LIMIT: Duration = Duration::from_secs(120);

fn installed(cli: &Cli) -> serde_json::Value {
    cli.run(&["ls", "--json"]).json()
}

/// The component files in a data dir's store: none after a refused pull.
fn stored_blobs(cli: &Cli) -> usize {
    std::fs::read_dir(cli.data().join("blobs/sha256")).map_or(0, |dir| dir.count())
}

#[test]
fn a_pushed_agent_is_added_from_the_registry_on_another_node_by_tag_and_by_digest() {
    let registry = Registry::start();
    let author = Cli::new();
    let id = author.add(&["calculator"]).remove(0);
    let tagged = registry.reference("agents/calculator:1.0");
    let pushed = author.run_fed(&["push", "calculator", &tagged], &[], "", LIMIT);
    let pinned = pushed.success().trim().to_owned();
    let prefix = format!("oci://{}/agents/calculator@sha256:", registry.address);
    assert!(pinned.starts_with(&prefix), "{pinned}");
    let manifest_digest = pinned.rsplit('@').next().unwrap().to_owned();

    let user = Cli::new();
    let added = user.run_fed(&["add", &tagged], &[], "", LIMIT);
    assert_eq!(added.success().trim(), id, "the same bytes, the same id");
    assert!(added.stderr().contains("4 tools"), "{}", added.stderr());
    let record = &installed(&user)[0];
    assert_eq!(record["origin"]["kind"], "registry");
    assert_eq!(
        record["origin"]["reference"],
        format!("{}/agents/calculator:1.0", registry.address)
    );
    assert_eq!(record["origin"]["manifest"], manifest_digest);
    let inspected = user.run(&["inspect", "calculator"]).success();
    assert!(
        inspected.contains(&format!(
            "origin:    pulled from {tagged} (manifest {manifest_digest})"
        )),
        "{inspected}"
    );
    let sum = user.call("calculator", "add", r#"{"a": 2, "b": 3}"#).json();
    assert_eq!(sum["structuredContent"]["result"], 5.0);

    // Pinned by the digest `push` printed, on a third node.
    let pinning = Cli::new();
    let added = pinning.run_fed(&["add", &pinned], &[], "", LIMIT);
    assert_eq!(added.success().trim(), id);
}

/// Runs tests/python/oras_client.py with `args`; returns its stdout.
fn oras(args: &[&str]) -> String {
    support::python_script("oras_client.py", args, LIMIT)
}

#[test]
fn oras_reads_what_agentsite_pushes_and_agentsite_adds_what_oras_pushes() {
    let registry = Registry::start();
    let author = Cli::new();
    author.add(&["calculator"]);
    let reference = registry.reference("agents/calculator:1.0");
    author
        .run_fed(&["push", "calculator", &reference], &[], "", LIMIT)
        .success();

    // ORAS pulls it: one application/wasm layer, named for the agent, with
    // the component's exact bytes; a wasm config describing it.
    let out = tempfile::tempdir().unwrap();
    let target = reference.trim_start_matches("oci://");
    let pulled: serde_json::Value =
        serde_json::from_str(&oras(&["pull", target, out.path().to_str().unwrap()])).unwrap();
    assert_eq!(
        pulled["manifest"]["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(
        pulled["manifest"]["layers"][0]["mediaType"],
        "application/wasm"
    );
    assert_eq!(pulled["config"]["architecture"], "wasm");
    assert_eq!(pulled["config"]["os"], "wasip2");
    let exports = pulled["config"]["component"]["exports"].to_string();
    assert!(exports.contains("agentsite:agent/tools@"), "{exports}");
    assert_eq!(
        std::fs::read(out.path().join("calculator.wasm")).unwrap(),
        std::fs::read(wasm("calculator")).unwrap()
    );

    // ORAS pushes a component in the same layout; agentsite adds it.
    let theirs = registry.address.clone() + "/theirs/text:2";
    oras(&["push", &theirs, wasm("text").to_str().unwrap()]);
    let user = Cli::new();
    let added = user.run_fed(&["add", &format!("oci://{theirs}")], &[], "", LIMIT);
    added.success();
    let text = user
        .call("text", "upper", r#"{"text": "from oras"}"#)
        .success();
    assert!(text.contains("FROM ORAS"), "{text}");
}

#[test]
fn credentials_open_a_private_registry_and_are_never_shown_or_kept() {
    let registry = Registry::with_user();
    let author = Cli::new();
    author.add(&["calculator"]);
    let reference = registry.reference("private/calculator:1");

    let anonymous = author.run_fed(&["push", "calculator", &reference], &[], "", LIMIT);
    anonymous.failure(
        "the registry asks for credentials: give them with --username and --password-stdin",
    );

    let wrong = push_with_password(&author, &reference, "not the password", "");
    wrong.failure("the registry refused the credentials given");

    // With -vvv, every debug line of the pull and push is written: none
    // holds the password, in plain or in the base64 of basic auth.
    let pushed = push_with_password(&author, &reference, PASSWORD, "-vvv");
    pushed.success();
    let basic = base64_of(&format!("{USER}:{PASSWORD}"));
    assert!(pushed.stderr().lines().count() > 20, "{}", pushed.stderr());
    for shown in [pushed.stderr(), pushed.stdout()] {
        assert!(
            !shown.contains(PASSWORD) && !shown.contains(&basic),
            "{shown}"
        );
    }

    // The environment's credentials, for the registry they name; then
    // Docker's config.json.
    let from_env = Cli::new();
    let env_credentials = |registry: Option<&str>| {
        let mut env = vec![
            ("AGENTSITE_REGISTRY_USERNAME", USER),
            ("AGENTSITE_REGISTRY_PASSWORD", PASSWORD),
        ];
        env.extend(registry.map(|named| ("AGENTSITE_REGISTRY", named)));
        from_env.run_fed(&["-vvv", "add", &reference], &env, "", LIMIT)
    };
    env_credentials(None).failure(
        "AGENTSITE_REGISTRY does not name the registry they are for: set AGENTSITE_REGISTRY=127.0.0.1:",
    );
    // Named for another registry, they are not offered to this one.
    env_credentials(Some("ghcr.io")).failure("the registry asks for credentials");
    env_credentials(Some(&registry.address)).success();
    let docker = tempfile::tempdir().unwrap();
    let auths = serde_json::json!({ "auths": { (registry.address.clone()): { "auth": basic } } });
    std::fs::write(docker.path().join("config.json"), auths.to_string()).unwrap();
    let from_docker = Cli::new();
    let added = from_docker.run_fed(
        &["-vvv", "add", &reference],
        &[("DOCKER_CONFIG", docker.path().to_str().unwrap())],
        "",
        LIMIT,
    );
    added.success();
    assert!(!added.stderr().contains(PASSWORD) && !added.stderr().contains(&basic));

    // Nothing the node keeps holds them: not its records, not any file of
    // its data dir.
    for cli in [&author, &from_env, &from_docker] {
        let mut files = vec![cli.data().to_path_buf()];
        while let Some(path) = files.pop() {
            if path.is_dir() {
                files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            } else {
                let bytes = std::fs::read(&path).unwrap();
                let text = String::from_utf8_lossy(&bytes);
                assert!(
                    !text.contains(PASSWORD) && !text.contains(&basic),
                    "{} holds the credentials",
                    path.display()
                );
            }
        }
    }
}

/// `agentsite [VERBOSITY] push calculator REFERENCE --username ann
/// --password-stdin`, fed `password`.
fn push_with_password(cli: &Cli, reference: &str, password: &str, verbosity: &str) -> support::Run {
    let mut args = vec![
        "push",
        "calculator",
        reference,
        "--username",
        USER,
        "--password-stdin",
    ];
    if !verbosity.is_empty() {
        args.insert(0, verbosity);
    }
    cli.run_fed(&args, &[], &format!("{password}\n"), LIMIT)
}

fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[test]
fn a_lying_registry_gets_a_one_line_error_and_nothing_is_stored() {
    let component = std::fs::read(wasm("calculator")).unwrap();
    let size = component.len();
    let liar = LyingRegistry::start(component);
    let cases = [
        (
            "wrong-digest",
            "the registry sent bytes that hash to sha256:".to_owned(),
        ),
        (
            "endless",
            format!("the registry sent more than the {size} bytes its manifest gives the component"),
        ),
        (
            "huge",
            "the component is 314572800 bytes, more than the 268435456 an agent may be".to_owned(),
        ),
        (
            "endless-manifest",
            "manifests/1 is larger than the 8388608 bytes read of one".to_owned(),
        ),
        (
            "not-a-component",
            "not a WebAssembly file".to_owned(),
        ),
        (
            "container-image",
            "not a Wasm component artifact: it has no application/wasm layer (its layers: application/vnd.oci.image.layer.v1.tar+gzip)".to_owned(),
        ),
    ];
    let user = Cli::new();
    for (case, expected) in cases {
        let reference = liar.reference(&format!("lies/{case}:1"));
        let refused = user.run_fed(&["add", &reference], &[], "", LIMIT);
        let line = refused.failure(&expected);
        assert_eq!(
            refused
                .stderr()
                .lines()
                .filter(|l| l.starts_with("error:"))
                .count(),
            1
        );
        assert!(line.len() < 400, "{case}: {line}");
        assert_eq!(installed(&user), serde_json::json!([]), "{case}");
        assert_eq!(stored_blobs(&user), 0, "{case}");
    }

    // A reference pinned to a digest the manifest does not hash to.
    let pinned = liar.reference(&format!("lies/wrong-digest@sha256:{}", "0".repeat(64)));
    user.run_fed(&["add", &pinned], &[], "", LIMIT)
        .failure("Digest error");
    assert_eq!(installed(&user), serde_json::json!([]));
}

#[test]
fn references_that_name_no_registry_or_carry_credentials_are_refused() {
    let user = Cli::new();
    for (argument, expected) in [
        ("oci://calculator:1.0", "names no registry"),
        (
            "oci://ann:hunter2@127.0.0.1:1/a/b:1",
            "carries no credentials",
        ),
        ("oci://127.0.0.1:1/Upper/case:1", "is not a reference"),
    ] {
        let line = user.run(&["add", argument]).failure(expected);
        assert!(!line.contains("hunter2"), "{line}");
    }
    // Nothing listening: the registry cannot be reached, said in a line.
    user.run_fed(&["add", "oci://127.0.0.1:1/a/b:1"], &[], "", LIMIT)
        .failure("oci://127.0.0.1:1/a/b:1: error sending request");
}
