//! OCI registries for the tests: Debian's `docker-registry` (CNCF
//! distribution, the registry most others are built on) on a loopback
//! port, and a lying one of the test's own that answers as a hostile
//! registry would.

use super::eventually;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The user and password of a registry started [`Registry::with_user`].
pub const USER: &str = "ann";
pub const PASSWORD: &str = "correct horse";
/// `PASSWORD` hashed with bcrypt, as the registry's htpasswd file keeps it.
const PASSWORD_BCRYPT: &str = "$2b$05$4cZBZ/J8efZUkjoi69fNh.B22vxofeCTMA12axsbFWvOlku6e9nAO";

/// A `docker-registry serve` process on a free loopback port, with its
/// storage in a temporary folder; stopped and removed on drop.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`, the registry part of a reference.
    pub address: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// A registry anyone may pull from and push to.
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// A registry that takes only [`USER`] with [`PASSWORD`] (HTTP basic
    /// authentication from an htpasswd file).
    pub fn with_user() -> Self {
        Self::start_with(Some(format!("{USER}:{PASSWORD_BCRYPT}\n")))
    }

    fn start_with(htpasswd: Option<String>) -> Self {
        let binary = super::which("docker-registry").unwrap_or_else(|| {
            panic!(
                "docker-registry is missing: run `bash scripts/test.sh` (or `bash scripts/tools.sh`) once, \
                 which installs Debian's docker-registry"
            )
        });
        // A port found free may be taken before the registry binds it: the
        // registry then exits, and another port is tried.
        for _ in 0..5 {
            if let Some(registry) = Self::try_start(&binary, htpasswd.as_deref()) {
                return registry;
            }
        }
        panic!("docker-registry did not start on any of 5 loopback ports");
    }

    fn try_start(binary: &std::path::Path, htpasswd: Option<&str>) -> Option<Self> {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: 127.0.0.1:{port}\n  secret: test-only-secret\n",
            dir.path().join("data").display()
        );
        if let Some(htpasswd) = htpasswd {
            let file = dir.path().join("htpasswd");
            std::fs::write(&file, htpasswd).expect("htpasswd written");
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: agentsite-tests\n    path: {}\n",
                file.display()
            ));
        }
        let config_file = dir.path().join("config.yml");
        std::fs::write(&config_file, config).expect("registry config written");
        let child = Command::new(binary)
            .arg("serve")
            .arg(&config_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry starts");
        let mut registry = Registry {
            child,
            address: format!("127.0.0.1:{port}"),
            _dir: dir,
        };
        let target: SocketAddr = registry.address.parse().unwrap();
        let answered = eventually(Duration::from_secs(20), "the registry listens", || {
            if let Ok(Some(_)) = registry.child.try_wait() {
                return Ok(false);
            }
            answers_as_registry(target).map(|()| true)
        });
        // It answered, but it may be another process on the port it lost.
        (answered && registry.child.try_wait().ok().flatten().is_none()).then_some(registry)
    }

    /// `oci://ADDRESS/PATH`.
    pub fn reference(&self, path: &str) -> String {
        format!("oci://{}/{path}", self.address)
    }

    /// Puts `blobs` and then `manifests` (tag, bytes) into `repository`
    /// as they are, byte for byte: what another tool made, replayed.
    pub fn upload(&self, repository: &str, blobs: &[&[u8]], manifests: &[(&str, &[u8])]) {
        use oci_client::client::{ClientConfig, ClientProtocol};
        let client = oci_client::Client::new(ClientConfig {
            protocol: ClientProtocol::Http,
            ..ClientConfig::default()
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let at = |tag: &str| -> oci_client::Reference {
                format!("{}/{repository}:{tag}", self.address)
                    .parse()
                    .unwrap()
            };
            for blob in blobs {
                let digest = sha256(blob);
                tokio::time::timeout(
                    Duration::from_secs(30),
                    client.push_blob(&at("upload"), blob.to_vec(), &digest),
                )
                .await
                .expect("the registry takes a blob in time")
                .expect("the registry takes the blob");
            }
            for (tag, manifest) in manifests {
                let content_type =
                    http::HeaderValue::from_static("application/vnd.oci.image.manifest.v1+json");
                tokio::time::timeout(
                    Duration::from_secs(30),
                    client.push_manifest_raw(&at(tag), manifest.to_vec(), content_type),
                )
                .await
                .expect("the registry takes a manifest in time")
                .expect("the registry takes the manifest");
            }
        });
    }

    /// The manifest at `repository:tag`, as the registry holds it.
    pub fn manifest(&self, repository: &str, tag: &str) -> Vec<u8> {
        let url = format!("http://{}/v2/{repository}/manifests/{tag}", self.address);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let answer = reqwest::Client::new()
                .get(&url)
                .header("accept", "application/vnd.oci.image.manifest.v1+json")
                .timeout(Duration::from_secs(30))
                .send()
                .await
                .and_then(|answer| answer.error_for_status())
                .unwrap_or_else(|e| panic!("{url}: {e}"));
            answer.bytes().await.unwrap().to_vec()
        })
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `target` answers `GET /v2/` as a distribution registry does.
fn answers_as_registry(target: SocketAddr) -> Result<(), String> {
    use std::io::{Read as _, Write as _};
    let mut stream =
        TcpStream::connect_timeout(&target, Duration::from_secs(1)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(b"GET /v2/ HTTP/1.0\r\nHost: registry\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    let _ = stream.take(4096).read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    if answer.contains("docker-distribution-api-version") {
        Ok(())
    } else {
        Err(format!("not a registry's answer: {answer:?}"))
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// A registry that lies, each repository in its own way (its name says
/// how), about a component it holds: `component`'s bytes.
///
/// - `wrong-digest`: sends other bytes than the manifest's digest names;
/// - `endless`: sends the layer without end;
/// - `huge`: declares a layer of 300 MiB;
/// - `endless-manifest`: sends a manifest without end;
/// - `not-a-component`: a layer of the right type and digest that is text;
/// - `container-image`: a container image, not a Wasm artifact;
/// - `endless-signature`: a true component whose cosign signature layer
///   is sent without end;
/// - `huge-signature`: a true component with a signature layer of 100 MiB.
pub struct LyingRegistry {
    served: super::served::Served,
}

impl LyingRegistry {
    pub fn start(component: Vec<u8>) -> Self {
        let component = std::sync::Arc::new(component);
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let component = component.clone();
            async move { lie(uri.path(), &component) }
        });
        LyingRegistry {
            served: super::served::Served::start(app),
        }
    }

    /// `oci://ADDRESS/PATH`.
    pub fn reference(&self, path: &str) -> String {
        format!("oci://{}/{path}", self.served.address)
    }
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

fn manifest(layer_type: &str, digest: &str, size: u64) -> String {
    let config = b"{}";
    serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.wasm.config.v0+json",
            "digest": sha256(config),
            "size": config.len(),
        },
        "layers": [{ "mediaType": layer_type, "digest": digest, "size": size }],
    })
    .to_string()
}

/// A cosign signature manifest of one layer declaring `size` bytes.
fn signature_manifest(size: u64) -> String {
    let config = b"{}";
    serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": sha256(config),
            "size": config.len(),
        },
        "layers": [{
            "mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
            "digest": sha256(b"a payload"),
            "size": size,
            "annotations": { "dev.cosignproject.cosign/signature": "AAAA" },
        }],
    })
    .to_string()
}

const NOT_A_COMPONENT: &[u8] = b"this is text, not a WebAssembly component";

fn lie(path: &str, component: &[u8]) -> axum::response::Response {
    use axum::body::Body;
    use axum::response::IntoResponse as _;
    let endless = || {
        Body::from_stream(futures::stream::repeat_with(|| {
            Ok::<_, std::io::Error>(bytes::Bytes::from_static(&[b'x'; 64 * 1024]))
        }))
    };
    let manifest_type = [("content-type", "application/vnd.oci.image.manifest.v1+json")];
    let parts: Vec<&str> = path.trim_start_matches("/v2/").split('/').collect();
    let wasm = "application/wasm";
    let size = component.len() as u64;
    let component_digest = sha256(component);
    match parts.as_slice() {
        [""] => ([("docker-distribution-api-version", "registry/2.0")], "{}").into_response(),
        ["lies", case, "manifests", tag] if tag.ends_with(".sig") => {
            let declared = match *case {
                "endless-signature" => 300,
                "huge-signature" => 100 * 1024 * 1024,
                _ => return axum::http::StatusCode::NOT_FOUND.into_response(),
            };
            (manifest_type, signature_manifest(declared)).into_response()
        }
        ["lies", case, "manifests", _] => {
            let body = match *case {
                "wrong-digest" | "endless" | "endless-signature" | "huge-signature" => {
                    manifest(wasm, &sha256(component), size)
                }
                "huge" => manifest(wasm, &sha256(component), 300 * 1024 * 1024),
                "endless-manifest" => return (manifest_type, endless()).into_response(),
                "not-a-component" => {
                    manifest(wasm, &sha256(NOT_A_COMPONENT), NOT_A_COMPONENT.len() as u64)
                }
                "container-image" => manifest(
                    "application/vnd.oci.image.layer.v1.tar+gzip",
                    &sha256(component),
                    size,
                ),
                _ => return axum::http::StatusCode::NOT_FOUND.into_response(),
            };
            (manifest_type, body).into_response()
        }
        ["lies", "endless-signature", "blobs", digest] if *digest != component_digest => {
            endless().into_response()
        }
        ["lies", case, "blobs", _] => match *case {
            "wrong-digest" => {
                let mut other = component.to_vec();
                let last = other.len() - 1;
                other[last] ^= 1;
                other.into_response()
            }
            "endless" => endless().into_response(),
            "not-a-component" => NOT_A_COMPONENT.into_response(),
            _ => component.to_vec().into_response(),
        },
        _ => axum::http::StatusCode::NOT_FOUND.into_response(),
    }
}
