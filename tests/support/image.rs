//! The node's container image for the tests, and containers of it run as a
//! runtime runs them, without one (this machine's kernel refuses podman its
//! cgroups): the image built by `scripts/image.sh`, unpacked with skopeo
//! and umoci, and its filesystem run with chroot, as the image's user, with
//! the image's environment and command, in a mount namespace of its own
//! (where the volume and the files a runtime provides are mounted) inside a
//! network namespace of the test's internet.

use super::netns::Host;
use super::{Run, Server, run_bounded_fed};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// What a runtime reads from the image's configuration (Docker's format,
/// as `scripts/image.sh` writes it).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Config {
    pub user: String,
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default)]
    pub entrypoint: Vec<String>,
    #[serde(default)]
    pub cmd: Vec<String>,
    #[serde(default)]
    pub volumes: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub exposed_ports: BTreeMap<String, serde_json::Value>,
    pub healthcheck: Option<Healthcheck>,
    #[serde(default)]
    pub working_dir: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Healthcheck {
    pub test: Vec<String>,
}

/// A built and unpacked image.
pub struct Image {
    pub archive: PathBuf,
    pub config: Config,
    /// The unpacked filesystem.
    pub rootfs: PathBuf,
}

/// Where the image's tools are missing, why: `scripts/tools.sh` installs them.
pub fn missing_tools() -> Option<String> {
    let missing: Vec<&str> = ["buildah", "skopeo", "umoci"]
        .into_iter()
        .filter(|tool| super::which(tool).is_none())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "{} not installed: scripts/tools.sh installs them (Debian's buildah, skopeo and umoci)",
            missing.join(", ")
        )
    })
}

impl Image {
    /// Builds the image of `binary` into `dir` with `scripts/image.sh`,
    /// reads its configuration and unpacks it there.
    pub fn build(dir: &Path, binary: &Path) -> Image {
        let archive = dir.join("agentsite.image.tar");
        let output = run_bounded_fed(
            Command::new("bash")
                .arg(super::repo().join("scripts/image.sh"))
                .arg("--binary")
                .arg(binary)
                .arg("--output")
                .arg(&archive),
            None,
            Duration::from_secs(600),
        );
        assert!(
            output.status.success(),
            "scripts/image.sh failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let reference = format!("docker-archive:{}", archive.display());
        let raw = must(Command::new("skopeo").args(["inspect", "--config", "--raw", &reference]));
        #[derive(Deserialize)]
        struct Document {
            config: Config,
        }
        let document: Document = serde_json::from_slice(&raw)
            .unwrap_or_else(|e| panic!("the image's configuration does not read ({e})"));
        let layout = format!("{}:agentsite", dir.join("layout").display());
        let copy = format!("oci:{layout}");
        must(Command::new("skopeo").args(["copy", "--quiet", &reference, &copy]));
        let bundle = dir.join("bundle");
        must(
            Command::new("umoci")
                .args(["unpack", "--image", &layout])
                .arg(&bundle),
        );
        Image {
            archive,
            config: document.config,
            rootfs: bundle.join("rootfs"),
        }
    }

    /// The image's user as `uid:gid`, numbers.
    pub fn user(&self) -> (u32, u32) {
        let (uid, gid) = self
            .config
            .user
            .split_once(':')
            .unwrap_or((&self.config.user, &self.config.user));
        (
            uid.parse().expect("the image's user is a number"),
            gid.parse().expect("the image's group is a number"),
        )
    }
}

/// A file or folder a runtime mounts into a container.
pub struct Mount {
    pub source: PathBuf,
    /// Its path inside the container.
    pub target: String,
}

/// A container of the image: its command running on a host of the
/// test's internet.
pub struct Container<'a> {
    image: &'a Image,
    pub server: Server,
    /// Set on top of the image's environment, in `exec` too.
    env: Vec<(String, String)>,
}

impl<'a> Container<'a> {
    /// Runs the image's entry point and command with `args` after them, on
    /// `host`, with `mounts` and `env` (on top of the image's), as the
    /// image's user; returns once it serves.
    pub fn run(
        image: &'a Image,
        host: &Host,
        name: &str,
        mounts: &[Mount],
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Container<'a> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        // What a runtime does before it starts the command: the mounts,
        // then /proc, in a mount namespace of the container's own.
        let mut script = String::new();
        for mount in mounts {
            let target = image.rootfs.join(mount.target.trim_start_matches('/'));
            if mount.source.is_dir() {
                std::fs::create_dir_all(&target).unwrap();
            } else {
                std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                if !target.exists() {
                    std::fs::write(&target, "").unwrap();
                }
            }
            script.push_str(&format!(
                "mount --bind {} {} && ",
                quote(&mount.source.to_string_lossy()),
                quote(&target.to_string_lossy())
            ));
        }
        let proc = image.rootfs.join("proc");
        std::fs::create_dir_all(&proc).unwrap();
        script.push_str(&format!(
            "mount -t proc proc {} && exec \"$@\"",
            quote(&proc.to_string_lossy())
        ));
        let mut command = host.command("unshare");
        command
            .args([
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
                "sh",
            ])
            .args(in_image(image, &env))
            .args(&image.config.entrypoint)
            .args(&image.config.cmd)
            .args(args);
        Container {
            image,
            server: Server::spawn(command, name),
            env,
        }
    }

    /// Runs `agentsite ARGS` inside the running container, as `docker
    /// exec` does: in its namespaces, as the image's user, with its
    /// environment.
    pub fn exec(&self, args: &[&str]) -> Run {
        let mut command = Command::new("nsenter");
        command
            .arg("--target")
            .arg(self.server.pid().to_string())
            .args(["--mount", "--net", "--"])
            .args(in_image(self.image, &self.env))
            .arg("/agentsite")
            .args(args);
        Run {
            output: run_bounded_fed(&mut command, None, Duration::from_secs(120)),
        }
    }

    /// The container's health check, as the image states it.
    pub fn health_check(&self) -> Run {
        let test = &self
            .image
            .config
            .healthcheck
            .as_ref()
            .expect("the image has a health check")
            .test;
        assert_eq!(test[0], "CMD", "an exec-form health check: {test:?}");
        assert_eq!(test[1], "/agentsite", "{test:?}");
        let args: Vec<&str> = test[2..].iter().map(String::as_str).collect();
        self.exec(&args)
    }
}

/// The command line that enters the image's filesystem as its user with
/// only its environment (and `env`); the command follows it.
fn in_image(image: &Image, env: &[(String, String)]) -> Vec<String> {
    let (uid, gid) = image.user();
    let mut line = vec!["env".to_owned(), "-i".to_owned()];
    line.extend(image.config.env.iter().cloned());
    line.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    line.extend([
        "/usr/sbin/chroot".to_owned(),
        format!("--userspec={uid}:{gid}"),
        image.rootfs.to_string_lossy().into_owned(),
    ]);
    line
}

fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

fn must(command: &mut Command) -> Vec<u8> {
    let output = run_bounded_fed(command, None, Duration::from_secs(300));
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}
