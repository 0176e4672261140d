//! The node's container image (`scripts/image.sh`) and the Kubernetes
//! manifests that run it (`deploy/kubernetes`). The image is built from the
//! binary under test, unpacked, and two containers of it are run as a
//! runtime runs them (`support::image`), each on a host of its own in
//! network namespaces, configured as the manifests configure a node: the
//! ConfigMap's config file, the token from the environment, a volume at
//! /data, and the second node joining through the first by its StatefulSet
//! DNS name. They join, publish, find and call each other; the image's
//! health check answers; a restarted node keeps its identity; SIGTERM stops
//! a node cleanly.
//!
//! Skipped, saying why, where the machine does not let a test make network
//! namespaces (or mount namespaces: the test runs as root).

use crate::support;

use serde_json::Value;
use std::path::Path;
use std::time::Duration;
use support::eventually;
use support::image::{Container, Image, Mount};
use support::netns::Internet;

/// The manifests' StatefulSet and ConfigMap, as a cluster would read them.
struct Manifests {
    statefulset: Value,
    config_toml: String,
}

fn manifests() -> Manifests {
    let dir = support::repo().join("deploy/kubernetes");
    let mut statefulset = None;
    let mut config_toml = None;
    for file in ["config.yaml", "services.yaml", "statefulset.yaml"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(document)
                .unwrap_or_else(|e| panic!("deploy/kubernetes/{file} does not read: {e}"));
            match value["kind"].as_str() {
                Some("StatefulSet") => statefulset = Some(value),
                Some("ConfigMap") => {
                    config_toml = value["data"]["config.toml"].as_str().map(str::to_owned)
                }
                _ => {}
            }
        }
    }
    Manifests {
        statefulset: statefulset.expect("a StatefulSet in deploy/kubernetes"),
        config_toml: config_toml.expect("a ConfigMap with config.toml in deploy/kubernetes"),
    }
}

/// The one container of the StatefulSet's pods.
fn container(statefulset: &Value) -> &Value {
    &statefulset["spec"]["template"]["spec"]["containers"][0]
}

/// Where the pod mounts `volume`.
fn mount_path<'a>(statefulset: &'a Value, volume: &str) -> &'a str {
    container(statefulset)["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|mount| mount["name"] == volume)
        .and_then(|mount| mount["mountPath"].as_str())
        .unwrap_or_else(|| panic!("the pod mounts no volume {volume}"))
}

/// The host names the config's bootstrap addresses name (`/dns4/NAME/…`).
fn bootstrap_names(config: &toml::Table) -> Vec<String> {
    config["p2p"]["bootstrap"]
        .as_array()
        .expect("the config names bootstrap peers")
        .iter()
        .filter_map(|address| {
            let address = address.as_str()?;
            address
                .strip_prefix("/dns4/")
                .map(|rest| rest.split('/').next().unwrap().to_owned())
        })
        .collect()
}

#[test]
fn two_nodes_from_the_image_join_publish_find_and_call_each_other() {
    if let Some(why) = support::image::missing_tools() {
        panic!("{why}");
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: running the image needs root (mount namespaces and chroot)");
        return;
    }
    let Some(mut internet) = Internet::new() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let image = Image::build(work.path(), Path::new(env!("CARGO_BIN_EXE_agentsite")));

    // The image: not root, its data in a volume, the health check asking
    // the node, the ports the node listens on.
    let (uid, gid) = image.user();
    assert_ne!(uid, 0, "the image runs as root");
    assert!(
        image.config.volumes.contains_key("/data"),
        "{:?}",
        image.config.volumes
    );
    assert!(
        image
            .config
            .env
            .contains(&"AGENTSITE_DATA_DIR=/data".to_owned())
    );
    assert_eq!(
        image.config.healthcheck.as_ref().unwrap().test,
        ["CMD", "/agentsite", "health"]
    );
    for port in ["7777/tcp", "4077/tcp", "4077/udp"] {
        assert!(image.config.exposed_ports.contains_key(port), "{port}");
    }
    // Everything in it is root's and cannot be changed by the node, but
    // its volume, which is the node's.
    for entry in walk(&image.rootfs) {
        use std::os::unix::fs::MetadataExt as _;
        let meta = std::fs::symlink_metadata(&entry).unwrap();
        let relative = entry.strip_prefix(&image.rootfs).unwrap();
        if relative == Path::new("data") {
            assert_eq!((meta.uid(), meta.gid()), (uid, gid), "/data");
        } else if relative == Path::new("tmp") {
            // Everyone's, as /tmp is: only a file's owner may remove it.
            assert_eq!(meta.mode() & 0o1777, 0o1777, "/tmp");
        } else {
            assert_eq!(meta.uid(), 0, "/{} is not root's", relative.display());
            assert_eq!(
                meta.mode() & 0o002,
                0,
                "/{} is world-writable",
                relative.display()
            );
        }
    }
    // The embedded model is in it, where the image tells the node to look.
    assert!(
        image
            .config
            .env
            .contains(&"AGENTSITE_MODELS=/models".to_owned())
    );
    assert!(
        image
            .rootfs
            .join("models/SmolLM2-135M-Instruct.Q4_1.gguf")
            .is_file()
    );

    // The manifests run this image as it is built to run.
    let manifests = manifests();
    let pod = &manifests.statefulset["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsUser"], uid);
    assert_eq!(pod["securityContext"]["fsGroup"], gid);
    assert_eq!(mount_path(&manifests.statefulset, "data"), "/data");
    assert_eq!(
        manifests.statefulset["spec"]["volumeClaimTemplates"][0]["metadata"]["name"], "data",
        "the data volume is each node's own claim"
    );
    let ports = container(&manifests.statefulset)["ports"]
        .as_array()
        .unwrap();
    for port in ports {
        let exposed = format!(
            "{}/{}",
            port["containerPort"],
            port["protocol"].as_str().unwrap().to_ascii_lowercase()
        );
        assert!(
            image.config.exposed_ports.contains_key(&exposed),
            "the pod's port {exposed} is not the image's"
        );
    }
    for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
        let get = &container(&manifests.statefulset)[probe]["httpGet"];
        assert_eq!(get["path"], "/health", "{probe}");
        // The kubelet asks by the pod's address, which the node refuses
        // (DNS rebinding) unless the probe names a host it answers for.
        assert_eq!(get["httpHeaders"][0]["name"], "Host", "{probe}");
        assert_eq!(get["httpHeaders"][0]["value"], "localhost", "{probe}");
    }
    let config_env = container(&manifests.statefulset)["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|env| env["name"] == "AGENTSITE_CONFIG")
        .and_then(|env| env["value"].as_str())
        .expect("the pod names its config file")
        .to_owned();
    let config_dir = mount_path(&manifests.statefulset, "config");
    assert_eq!(
        Path::new(&config_env).parent().unwrap(),
        Path::new(config_dir)
    );

    // The cluster: two pods' hosts, the ConfigMap mounted, the first pod's
    // StatefulSet name in the pods' /etc/hosts (as the cluster's DNS
    // answers it), the token as the Secret gives it.
    let config: toml::Table = manifests.config_toml.parse().expect("config.toml reads");
    let first_pod_names = bootstrap_names(&config);
    assert!(
        !first_pod_names.is_empty(),
        "bootstrap by the first pod's DNS name"
    );
    let hosts = [internet.public_host(1), internet.public_host(2)];
    let files = work.path().join("files");
    std::fs::create_dir_all(files.join("config")).unwrap();
    std::fs::write(
        files
            .join("config")
            .join(Path::new(&config_env).file_name().unwrap()),
        &manifests.config_toml,
    )
    .unwrap();
    let mut etc_hosts = String::from("127.0.0.1 localhost\n");
    for name in &first_pod_names {
        etc_hosts.push_str(&format!("{} {name}\n", hosts[0].ip));
    }
    std::fs::write(files.join("hosts"), etc_hosts).unwrap();
    std::fs::write(
        files.join("resolv.conf"),
        format!("nameserver {}\n", hosts[0].ip),
    )
    .unwrap();
    let volumes = ["agentsite-0", "agentsite-1"].map(|name| {
        let volume = work.path().join(name);
        std::fs::create_dir(&volume).unwrap();
        std::os::unix::fs::chown(&volume, Some(uid), Some(gid)).unwrap();
        volume
    });
    let mounts = |volume: &Path| {
        vec![
            Mount {
                source: volume.to_owned(),
                target: "/data".into(),
            },
            Mount {
                source: files.join("config"),
                target: config_dir.to_owned(),
            },
            Mount {
                source: files.join("hosts"),
                target: "/etc/hosts".into(),
            },
            Mount {
                source: files.join("resolv.conf"),
                target: "/etc/resolv.conf".into(),
            },
        ]
    };
    let token = "a-token-from-the-secret";
    let env = [
        ("AGENTSITE_CONFIG", config_env.as_str()),
        ("AGENTSITE_TOKEN", token),
    ];
    let mut first = Container::run(&image, &hosts[0], "pod 0", &mounts(&volumes[0]), &env, &[]);
    let mut second = Container::run(&image, &hosts[1], "pod 1", &mounts(&volumes[1]), &env, &[]);
    for pod in [&first, &second] {
        // Its process is the image's user's, not root's.
        let status = std::fs::read_to_string(format!("/proc/{}/status", pod.server.pid())).unwrap();
        let uids = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        assert!(
            uids.split_whitespace()
                .skip(1)
                .all(|id| id == uid.to_string()),
            "{uids}"
        );
        let health = pod.health_check();
        assert!(
            health.success().starts_with("ok: agentsite "),
            "{}",
            health.stdout()
        );
    }

    // The second pod joined through the first by its DNS name.
    let first_id = first.server.peer_id().unwrap().to_owned();
    eventually(
        Duration::from_secs(30),
        "pod 1 is connected to pod 0",
        || {
            let peers = second.exec(&["peers", "--json"]).json();
            let connected = peers
                .as_array()
                .is_some_and(|peers| peers.iter().any(|p| p["peer_id"] == first_id.as_str()));
            if connected { Ok(()) } else { Err(peers) }
        },
    );
    // The table shows an address that reaches pod 0 (its name, or its
    // pod's address), not the loopback address every node lists first.
    let table = second.exec(&["peers"]).success();
    assert!(table.contains(&first_id), "{table}");
    assert!(!table.contains("/ip4/127.0.0.1/"), "{table}");

    // Each publishes an agent from its volume; each finds the other's and
    // calls it where it lives; the second fetches the first's by hash.
    let put = |volume: &Path, agent: &str| {
        let target = volume.join(format!("{agent}.wasm"));
        std::fs::copy(support::wasm(agent), &target).unwrap();
        std::os::unix::fs::chown(&target, Some(uid), Some(gid)).unwrap();
    };
    put(&volumes[0], "calculator");
    put(&volumes[1], "text");
    let calculator = first.exec(&["add", "/data/calculator.wasm"]).success();
    let calculator = calculator.trim();
    second.exec(&["add", "/data/text.wasm"]).success();
    first.exec(&["publish", "calculator"]).success();
    second.exec(&["publish", "text"]).success();
    let finds = |pod: &Container, word: &str, id: &str| {
        eventually(
            Duration::from_secs(60),
            &format!("a search for {word} finds {id}"),
            || {
                let found = pod.exec(&["search", word, "--json"]).json();
                let seen = found
                    .as_array()
                    .is_some_and(|found| found.iter().any(|f| f["id"] == id));
                if seen { Ok(()) } else { Err(found) }
            },
        )
    };
    finds(&second, "arithmetic", calculator);
    let text_id = second.exec(&["ls", "--json"]).json()[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    finds(&first, "text", &text_id);
    let remote = |pod: &Container, agent: &str, tool: &str, arguments: &str| {
        pod.exec(&["call", agent, tool, arguments, "--remote", "--json"])
            .json()
    };
    let sum = remote(&second, "calculator", "add", r#"{"a": 2, "b": 40}"#);
    assert_eq!(sum["structuredContent"]["result"], 42.0, "{sum}");
    let upper = remote(&first, "text", "upper", r#"{"text": "planet"}"#);
    assert!(upper.to_string().contains("PLANET"), "{upper}");
    second.exec(&["fetch", calculator]).success();
    let product = second
        .exec(&[
            "call",
            "calculator",
            "multiply",
            r#"{"a": 6, "b": 7}"#,
            "--json",
        ])
        .json();
    assert_eq!(product["structuredContent"]["result"], 42.0, "{product}");

    // A pod that restarts on its volume is the same node, with its agents.
    let second_id = second.server.peer_id().unwrap().to_owned();
    assert!(second.server.terminate(Duration::from_secs(30)).success());
    drop(second);
    let second = Container::run(
        &image,
        &hosts[1],
        "pod 1 again",
        &mounts(&volumes[1]),
        &env,
        &[],
    );
    assert_eq!(second.server.peer_id(), Some(second_id.as_str()));
    let installed = second.exec(&["ls", "--json"]).json();
    assert_eq!(installed.as_array().unwrap().len(), 2, "{installed}");

    // SIGTERM, the image's stop signal, stops a node cleanly: it exits
    // with success and leaves no sign of running in its volume.
    assert!(first.server.terminate(Duration::from_secs(30)).success());
    assert!(!volumes[0].join("node.json").exists());
    drop(second);
}

/// Every path under `root`, `root` not included.
fn walk(root: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if std::fs::symlink_metadata(&path).unwrap().is_dir() {
                pending.push(path.clone());
            }
            found.push(path);
        }
    }
    found
}
