//! Signed OCI artifacts: `agentsite push --sign` attaches a cosign
//! signature (keyed, ed25519) beside the manifest it pushed, and `agentsite
//! add oci://…` checks the signatures it finds against the keys the
//! operator trusts, refusing, where `[trust] registry_signature =
//! "required"`, a component that is unsigned, signed by a stranger, or
//! signed for another manifest — each said in one line, nothing stored.
//! Interoperability with the reference format's tooling (sigstore-rs;
//! cosign's Go needs a toolchain this machine cannot fetch): a signature
//! sigstore-rs made (tests/fixtures/cosign, made by
//! tests/interop/cosign/make-fixture.sh) verifies, and agentsite still
//! signs, byte for byte, the layer sigstore-rs verified there.

use crate::support;

use agentsite::oci::signature::{self, Payload, Signer};
use std::path::PathBuf;
use std::time::Duration;
use support::Cli;
use support::registry::{LyingRegistry, Registry};

/// Bound on one `agentsite add` or `push` against a registry on loopback.
const LIMIT: Duration = Duration::from_secs(120);

const REQUIRED: &str = "[trust]\nregistry_signature = \"required\"\n";

/// A node whose policy demands signatures.
fn demanding() -> Cli {
    let cli = Cli::new();
    std::fs::write(cli.data().join("policy.toml"), REQUIRED).unwrap();
    cli
}

fn stored_blobs(cli: &Cli) -> usize {
    std::fs::read_dir(cli.data().join("blobs/sha256")).map_or(0, |dir| dir.count())
}

fn installed(cli: &Cli) -> serde_json::Value {
    cli.run(&["ls", "--json"]).json()
}

/// Pushes `agent` to `reference` with `extra` flags; its manifest digest
/// and what it said on stderr.
fn push(cli: &Cli, agent: &str, reference: &str, extra: &[&str]) -> (String, String) {
    let mut args = vec!["push", agent, reference];
    args.extend_from_slice(extra);
    let pushed = cli.run_fed(&args, &[], "", LIMIT);
    let pinned = pushed.success();
    let digest = pinned.trim().rsplit('@').next().unwrap().to_owned();
    (digest, pushed.stderr())
}

/// The did:key `push --sign` said it signed with.
fn signer_of(stderr: &str) -> String {
    let line = stderr
        .lines()
        .find(|line| line.starts_with("signed sha256:"))
        .unwrap_or_else(|| panic!("push said nothing of signing: {stderr}"));
    line.split(" with ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap()
        .to_owned()
}

/// Adds `reference`, which `add` must say `did` signed.
fn added_signed_by(cli: &Cli, reference: &str, did: &str) {
    let added = cli.run_fed(&["add", reference], &[], "", LIMIT);
    added.success();
    assert!(
        added.stderr().contains(&format!("signed by {did}")),
        "{}",
        added.stderr()
    );
}

fn refused(cli: &Cli, reference: &str, expected: &str) {
    let line = cli
        .run_fed(&["add", reference], &[], "", LIMIT)
        .failure(expected);
    assert!(line.contains("nothing was stored"), "{line}");
    assert_eq!(installed(cli), serde_json::json!([]), "{line}");
    assert_eq!(stored_blobs(cli), 0, "{line}");
}

#[test]
fn a_signed_push_is_checked_on_pull_and_the_policy_refuses_what_it_must() {
    let registry = Registry::start();
    let author = Cli::new();
    author.add(&["calculator"]);
    author.add(&["text"]);
    // Both in one repository: a signature can only be moved to another
    // manifest where its blobs are.
    let signed = registry.reference("agents/shared:calculator");
    let unsigned = registry.reference("agents/shared:text");
    let (signed_digest, said) = push(&author, "calculator", &signed, &["--sign"]);
    let did = signer_of(&said);
    assert!(did.starts_with("did:key:z6Mk"), "{said}");
    assert!(said.contains(&signature::tag(&signed_digest)), "{said}");
    let (unsigned_digest, _) = push(&author, "text", &unsigned, &[]);

    // Signed, but by a key this node does not trust.
    let user = demanding();
    refused(
        &user,
        &signed,
        "refused by policy: signed, but by no key this node trusts",
    );

    user.run(&["trust", &did]).success();
    added_signed_by(&user, &signed, &did);
    let inspected = user.run(&["inspect", "calculator"]).success();
    assert!(
        inspected.contains(&format!("(manifest {signed_digest}), signed by {did}")),
        "{inspected}"
    );
    let record = &installed(&user)[0];
    assert_eq!(
        record["origin"]["signer"].as_str(),
        Some(agentsite::did::peer_of(&did).unwrap().to_string().as_str())
    );
    let sum = user.call("calculator", "add", r#"{"a": 2, "b": 3}"#).json();
    assert_eq!(sum["structuredContent"]["result"], 5.0);
    // The agent's page names the signer as its publisher, trusted.
    let server = support::Server::start(user.data(), &[]);
    let page = tokio::runtime::Runtime::new().unwrap().block_on(async {
        reqwest::get(server.url("/hub/agents/calculator"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    drop(server);
    assert!(
        page.contains(&format!("signed by {did}")) && page.contains(&format!(">{did}</code>")),
        "{page}"
    );

    // Not signed at all.
    let user = demanding();
    user.run(&["trust", &did]).success();
    refused(
        &user,
        &unsigned,
        "refused by policy: not signed; [trust] registry_signature = \"required\"",
    );

    // The calculator's signature put beside the text agent's manifest: a
    // trusted key's true signature, of another manifest.
    let moved = registry.manifest("agents/shared", &signature::tag(&signed_digest));
    registry.upload(
        "agents/shared",
        &[],
        &[(&signature::tag(&unsigned_digest), &moved)],
    );
    refused(
        &user,
        &unsigned,
        &format!("{did} signed {signed_digest}, not this manifest"),
    );

    // Where signatures are optional (the default), the same component is
    // added and the operator told what was found.
    let lenient = Cli::new();
    let added = lenient.run_fed(&["add", &unsigned], &[], "", LIMIT);
    added.success();
    assert!(
        added
            .stderr()
            .contains("signed, but by no key this node trusts"),
        "{}",
        added.stderr()
    );

    // Signing again with another key adds a signature beside the first,
    // and an operator's key file signs as the node's key does.
    let key = fixtures().join("agentsite-test.key");
    let (again, said) = push(
        &author,
        "calculator",
        &signed,
        &["--key", key.to_str().unwrap()],
    );
    let keyed = signer_of(&said);
    assert_ne!(keyed, did);
    if again == signed_digest {
        let layers = serde_json::from_slice::<serde_json::Value>(
            &registry.manifest("agents/shared", &signature::tag(&again)),
        )
        .unwrap()["layers"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(layers, 2, "both signatures are kept");
    }
    let keyed_user = demanding();
    keyed_user.run(&["trust", &keyed]).success();
    keyed_user
        .run_fed(&["add", &signed], &[], "", LIMIT)
        .success();

    // A key file that is not an ed25519 key is refused before any push.
    let bad = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(bad.path(), "not a key").unwrap();
    author
        .run_fed(
            &[
                "push",
                "calculator",
                &registry.reference("agents/never:1"),
                "--key",
                bad.path().to_str().unwrap(),
            ],
            &[],
            "",
            LIMIT,
        )
        .failure("is not an ed25519 private key in PKCS#8 PEM");
}

fn fixtures() -> PathBuf {
    support::repo().join("tests/fixtures/cosign")
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(name)).unwrap()
}

#[test]
fn a_signature_sigstore_made_verifies_and_agentsite_signs_as_sigstore_verified() {
    let registry = Registry::start();
    let component =
        std::fs::read(support::repo().join("tests/fixtures/agent-0.1.0/conformance.wasm")).unwrap();
    let manifest = fixture("manifest.json");
    let digest = format!("sha256:{}", sha256_hex(&manifest));
    registry.upload(
        "fixtures/conformance",
        &[
            &component,
            &fixture("config.json"),
            &fixture("signature-config.json"),
            &fixture("signature-payload.json"),
        ],
        &[
            ("0.1.0", &manifest),
            (
                &signature::tag(&digest),
                &fixture("signature-manifest.json"),
            ),
        ],
    );
    let reference = registry.reference("fixtures/conformance:0.1.0");

    let user = demanding();
    refused(&user, &reference, "by no key this node trusts");
    // The operator trusts the key file sigstore-rs wrote, as a cosign user would.
    let public = fixtures().join("cosign.pub");
    user.run(&["trust", public.to_str().unwrap()]).success();
    let peer =
        signature::peer_of_public_pem(&String::from_utf8(fixture("cosign.pub")).unwrap()).unwrap();
    let did = agentsite::did::of_peer(&peer).unwrap();
    added_signed_by(&user, &reference, &did);

    // agentsite's signature that sigstore-rs verified when the fixture was
    // made: agentsite signing the same manifest with the same key today
    // makes the same payload and, ed25519 being deterministic, the same
    // signature.
    let kept_payload = fixture("agentsite-signature-payload.json");
    let kept: Payload = serde_json::from_slice(&kept_payload).unwrap();
    let payload = Payload::new(
        &kept.critical.identity.docker_reference,
        &kept.critical.image.docker_manifest_digest,
    )
    .to_bytes();
    assert_eq!(
        String::from_utf8_lossy(&payload),
        String::from_utf8_lossy(&kept_payload)
    );
    let kept_manifest: serde_json::Value =
        serde_json::from_slice(&fixture("agentsite-signature-manifest.json")).unwrap();
    let layer = &kept_manifest["layers"][0];
    assert_eq!(layer["mediaType"], signature::LAYER_MEDIA_TYPE);
    assert_eq!(layer["digest"], format!("sha256:{}", sha256_hex(&payload)));
    let signer = Signer::from_pem_file(&fixtures().join("agentsite-test.key")).unwrap();
    assert_eq!(
        layer["annotations"][signature::SIGNATURE_ANNOTATION],
        signer.sign(&payload)
    );
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[test]
fn signatures_a_registry_lies_about_are_refused_in_a_line_where_required_and_do_not_block_otherwise()
 {
    let component = std::fs::read(support::wasm("calculator")).unwrap();
    let liar = LyingRegistry::start(component);
    for (case, expected) in [
        (
            "endless-signature",
            "a signature payload longer than the 300 bytes its manifest gives",
        ),
        (
            "huge-signature",
            "a signature payload of 104857600 bytes, more than the 65536 read of one",
        ),
    ] {
        let reference = liar.reference(&format!("lies/{case}:1"));
        let user = demanding();
        refused(&user, &reference, expected);
        let lenient = Cli::new();
        let added = lenient.run_fed(&["add", &reference], &[], "", LIMIT);
        added.success();
        assert!(added.stderr().contains(expected), "{}", added.stderr());
    }
}
