//! Grants that would open the sandbox onto the node itself: `/proc` (the
//! node's environment, its secrets), the node's data directory (whose
//! policy file an agent would rewrite to grant itself more), the host's
//! root, the node's token and credentials in its environment, every host,
//! the cloud's metadata address. Each is refused with its reason whichever
//! way it is asked for: typed, from the pages' edit, imported from a
//! stranger's `policy.yaml`, or written into the policy file by hand (then
//! the call is refused). The operator's deliberately named flag grants it.

use crate::support;

use agentsite::policy::edit::{NodeAccess, Subject, add_grants, remove_grants};
use serde_json::json;
use support::Cli;
use support::hostile::{error_of, grant, node_with, result_of, test_limits};

fn items(list: &[String]) -> Vec<String> {
    list.to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_that_reach_the_node_are_refused_with_the_reason_unless_named_deliberately() {
    let (node, dir) = node_with(&["hostile_escape", "hostile_snoop"], test_limits()).await;
    let data = dir.path().to_owned();
    let escape = Subject::Agent(agentsite::AgentKey::Id(
        node.resolve("hostile-escape").unwrap().id,
    ));
    let policy = node.policy().path().to_owned();
    let _ = std::fs::write(&policy, "");
    let before = std::fs::read_to_string(&policy).unwrap();
    let up = data.parent().unwrap().display().to_string();
    let data = data.display().to_string();
    for (item, why) in [
        ("fs=/proc:/proc".to_owned(), "is /proc, the kernel's view"),
        ("fs=/proc/self:/me".to_owned(), "is inside /proc"),
        ("fs=/sys:/sys".to_owned(), "is /sys"),
        ("fs=/dev:/dev".to_owned(), "is /dev"),
        ("fs=/:/host:rw".to_owned(), "is the host's root"),
        (format!("fs={data}:/data:rw"), "the node's data directory"),
        (format!("fs={up}:/up"), "contains"),
        (format!("fs={data}/blobs:/blobs:rw"), "is inside"),
        ("env=AGENTSITE_TOKEN".to_owned(), "the node's bearer token"),
        (
            "env=AGENTSITE_REGISTRY_PASSWORD".to_owned(),
            "registry credentials",
        ),
        ("env=OPENAI_API_KEY".to_owned(), "OpenAI"),
        ("http=http://*:*".to_owned(), "every host"),
        ("http=https://*".to_owned(), "every host"),
        (
            "http=http://169.254.169.254".to_owned(),
            "cloud metadata service",
        ),
    ] {
        if item.contains("/blobs") {
            std::fs::create_dir_all(format!("{data}/blobs")).unwrap();
        }
        let error = add_grants(
            node.policy(),
            &escape,
            &items(std::slice::from_ref(&item)),
            node.node_self(),
            NodeAccess::Refused,
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains(why), "{item}: {error}");
        assert!(
            error.contains("nothing was granted")
                && error.contains("--dangerously-allow-node-access")
                && !error.contains('\n'),
            "{item}: {error}"
        );
        assert_eq!(
            std::fs::read_to_string(&policy).unwrap(),
            before,
            "{item} changed the policy"
        );
    }

    // Written into the policy file by anything but the edits: the call is
    // refused, and the agent reads nothing.
    grant(&node, "hostile-escape", &["fs=/proc:/proc"]);
    let error = error_of(
        &node,
        "hostile-escape",
        "read",
        &json!({"path": "/proc/self/environ"}).to_string(),
    )
    .await;
    assert!(
        error.contains("reaches the node itself") && error.contains("fs /proc is /proc"),
        "{error}"
    );
    // A setting of the node's own (not the token itself, which the
    // binaries this suite starts would then ask for).
    // SAFETY: set before any other thread of this test reads the environment.
    unsafe { std::env::set_var("AGENTSITE_REACH_TEST_SECRET", "node-secret") };
    grant(&node, "hostile-snoop", &["env=AGENTSITE_REACH_TEST_SECRET"]);
    let error = error_of(
        &node,
        "hostile-snoop",
        "env",
        &json!({"name": "AGENTSITE_REACH_TEST_SECRET"}).to_string(),
    )
    .await;
    assert!(error.contains("one of the node's own settings"), "{error}");
    assert!(!error.contains("node-secret"), "{error}");

    // Named deliberately, it is granted, written down as deliberate, and
    // the agent reads what it was given.
    let granted = add_grants(
        node.policy(),
        &escape,
        &items(&["fs=/proc:/proc".to_owned()]),
        node.node_self(),
        NodeAccess::Allowed,
    )
    .unwrap();
    assert_eq!(granted.node_access, vec!["fs /proc".to_owned()]);
    let version = result_of(
        &node,
        "hostile-escape",
        "read",
        json!({"path": "/proc/version"}),
    )
    .await;
    assert!(version.as_str().unwrap().contains("Linux"), "{version}");
    // The allowance goes with its entry: granted again, it is judged again.
    let left = remove_grants(node.policy(), &escape, &items(&["fs=/proc".to_owned()])).unwrap();
    assert!(left.node_access.is_empty(), "{left:?}");
    assert!(
        add_grants(
            node.policy(),
            &escape,
            &items(&["fs=/proc:/proc".to_owned()]),
            node.node_self(),
            NodeAccess::Refused,
        )
        .is_err()
    );
}

#[test]
fn a_strangers_policy_file_cannot_reach_the_node_and_asks_before_granting_broadly() {
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let folder = tempfile::tempdir().unwrap();
    let policy_show = || cli.run(&["policy", "show"]).success();
    let before = policy_show();
    let import = |yaml: &str, extra: &[&str]| {
        let file = folder.path().join("policy.yaml");
        std::fs::write(&file, yaml).unwrap();
        let mut args = vec![
            "grant",
            "calculator",
            "--from-policy",
            file.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        cli.run(&args)
    };
    for (yaml, why) in [
        (
            "permissions:\n  storage:\n    allow:\n      - uri: \"fs:///proc\"\n        access: [read]\n",
            "fs /proc is /proc, the kernel's view",
        ),
        (
            "permissions:\n  storage:\n    allow:\n      - uri: \"fs:///\"\n        access: [read, write]\n",
            "is the host's root",
        ),
        (
            "permissions:\n  environment:\n    allow:\n      - key: AGENTSITE_TOKEN\n",
            "env AGENTSITE_TOKEN is the node's bearer token",
        ),
        (
            "permissions:\n  network:\n    allow:\n      - host: \"*\"\n",
            "allows every host",
        ),
        (
            "permissions:\n  network:\n    allow:\n      - host: \"http://169.254.169.254/\"\n",
            "cloud metadata service",
        ),
    ] {
        // Not even --yes grants it: only the deliberately named flag does.
        import(yaml, &["--yes"]).failure(why);
        assert_eq!(policy_show(), before, "{yaml}");
    }
    let data = cli.data().display().to_string();
    import(
        &format!(
            "permissions:\n  storage:\n    allow:\n      - uri: \"fs://{data}\"\n        access: [read, write]\n"
        ),
        &["--yes"],
    )
    .failure("the node's data directory");

    // Broad but clear of the node: printed, and granted only when the
    // operator says yes (no terminal here to ask at).
    let broad = "permissions:\n  network:\n    allow:\n      - host: \"*.com\"\n      - host: \"http://10.0.0.5:*\"\n";
    let refused = import(broad, &[]);
    let line = refused.failure("grants broadly");
    assert!(
        line.contains("every host under .com")
            && line.contains("every port")
            && line.contains("--yes"),
        "{line}"
    );
    assert!(refused.stderr().contains("allows: http=https://*.com"));
    assert_eq!(policy_show(), before);
    import(broad, &["--yes"]).success();
    let after = policy_show();
    assert!(after.contains("https://*.com"), "{after}");

    // Typed, the same refusal and the same flag.
    cli.run(&["grant", "calculator", "env=AGENTSITE_REGISTRY_PASSWORD"])
        .failure("is one of the node's registry credentials");
    let granted = cli.run(&[
        "grant",
        "calculator",
        "fs=/proc:/proc",
        "--dangerously-allow-node-access",
    ]);
    granted.success();
    assert!(
        granted
            .stderr()
            .contains("may reach the node itself through: fs /proc"),
        "{}",
        granted.stderr()
    );
    assert!(policy_show().contains("node_access = [\"fs /proc\"]"));
}

/// A policy file nested 100,000 deep took 22 s to refuse (the YAML parser's
/// work grows with the square of the depth): its brackets are counted
/// first, and it is refused by its depth, naming it.
#[test]
fn a_policy_file_nested_past_the_bound_is_refused_by_its_depth() {
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("policy.yaml");
    for deep in [
        format!(
            "permissions:\n  storage:\n    allow:\n      - uri: {}1\n",
            "[".repeat(100_000)
        ),
        format!("{}1{}\n", "{a: ".repeat(50_000), "}".repeat(50_000)),
    ] {
        std::fs::write(&file, deep).unwrap();
        cli.run_fed(
            &[
                "grant",
                "calculator",
                "--from-policy",
                file.to_str().unwrap(),
            ],
            &[],
            "",
            std::time::Duration::from_secs(60),
        )
        .failure("deep, where a policy file has at most 64");
    }
}
