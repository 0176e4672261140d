//! Components in OCI registries, where the WebAssembly ecosystem keeps
//! them (`wkg`, Wassette, wasmCloud): `agentsite add oci://…` pulls one,
//! `agentsite push` publishes one, in the Wasm OCI artifact layout
//! ([`artifact`]). The registry protocol is oci-client's; this module
//! bounds what a registry can make the node hold and checks what it sent.
//!
//! A registry is untrusted: a manifest or token is read to at most 8 MiB
//! (vendor/oci-client), a layer to at most the size its manifest declares
//! and never past [`MAX_AGENT_SIZE`], its bytes must hash to the digest the
//! manifest gives (and the manifest to the digest a reference pins), and
//! the component is then checked as any added file is. Nothing is stored
//! until all of that holds.

pub mod artifact;
pub mod credentials;
pub mod reference;
pub mod signature;

use crate::store::Origin;
use crate::store::manifest::MAX_AGENT_SIZE;
use crate::text::terminal_safe;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{OciDescriptor, OciImageManifest, OciManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use std::collections::BTreeMap;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

pub use reference::{is_registry, parse};

/// How long a registry may take to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a registry may go without sending a byte of an answer.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one pull or push may take in all: a registry that trickles
/// bytes without ever stalling for `READ_TIMEOUT` is cut off here.
pub const DEADLINE: Duration = Duration::from_secs(600);

/// Why a pull or push failed, each a line for a person.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error(transparent)]
    Reference(#[from] reference::ReferenceError),
    #[error("oci://{reference}: {problem}")]
    Layout {
        reference: String,
        problem: artifact::LayoutError,
    },
    #[error(
        "oci://{reference}: the component is {size} bytes, more than the {MAX_AGENT_SIZE} an agent may be"
    )]
    TooLarge { reference: String, size: u64 },
    #[error(
        "oci://{reference}: the registry sent more than the {declared} bytes its manifest gives the component; nothing was stored"
    )]
    Overlong { reference: String, declared: u64 },
    #[error(
        "oci://{reference}: the registry sent bytes that hash to {actual}, not to the {expected} its manifest names; nothing was stored"
    )]
    DigestMismatch {
        reference: String,
        expected: String,
        actual: String,
    },
    #[error(
        "oci://{reference}: the registry asks for credentials: give them with --username and --password-stdin (see `agentsite add --help`)"
    )]
    CredentialsNeeded { reference: String },
    #[error("oci://{reference}: the registry refused the credentials given ({detail})")]
    Refused { reference: String, detail: String },
    #[error("oci://{reference}: {detail}")]
    Registry { reference: String, detail: String },
    #[error("oci://{reference}: no answer within {}", humantime::format_duration(*deadline))]
    Deadline {
        reference: String,
        deadline: Duration,
    },
}

/// A component pulled from a registry and checked against its manifest.
pub struct Pulled {
    pub bytes: Vec<u8>,
    /// The reference as pulled, safe to show.
    pub reference: String,
    /// The digest of the manifest it came under.
    pub manifest: String,
    /// The cosign signatures beside the manifest, unchecked; or why they
    /// could not be read.
    pub signatures: Result<Vec<signature::Found>, String>,
}

impl Pulled {
    /// What the node's record keeps of where it came from, once its
    /// signatures were checked: `signer` is the trusted key that signed it.
    pub fn origin(&self, signer: Option<libp2p::PeerId>) -> Origin {
        Origin::Registry {
            reference: self.reference.clone(),
            manifest: self.manifest.clone(),
            signer,
        }
    }
}

/// What a push made.
pub struct Pushed {
    /// The reference pinned to the manifest pushed:
    /// `REGISTRY/REPOSITORY@sha256:…`.
    pub pinned: String,
    /// The digest of the manifest.
    pub digest: String,
}

/// A client of one registry, with the credentials to use there.
pub struct Registry {
    client: Client,
    auth: RegistryAuth,
}

impl Registry {
    /// A client for `reference`'s registry: plain HTTP for a registry on
    /// this machine or when `plain_http` says so, HTTPS otherwise.
    pub fn new(reference: &Reference, auth: RegistryAuth, plain_http: bool) -> Self {
        let registry = reference.resolve_registry().to_owned();
        let protocol = if plain_http || reference::is_loopback(&registry) {
            ClientProtocol::HttpsExcept(vec![registry])
        } else {
            ClientProtocol::Https
        };
        let config = ClientConfig {
            protocol,
            connect_timeout: Some(CONNECT_TIMEOUT),
            read_timeout: Some(READ_TIMEOUT),
            platform_resolver: Some(Box::new(wasm_entry)),
            user_agent: concat!("agentsite/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        };
        Self {
            client: Client::new(config),
            auth,
        }
    }

    /// Pulls the component `reference` names, checked against its manifest.
    pub async fn pull(&self, reference: &Reference) -> Result<Pulled, OciError> {
        let shown = shown(reference);
        within_deadline(&shown, self.pull_checked(reference, &shown)).await
    }

    async fn pull_checked(&self, reference: &Reference, shown: &str) -> Result<Pulled, OciError> {
        let anonymous = self.auth == RegistryAuth::Anonymous;
        let failed = |error| registry_error(shown, anonymous, error);
        self.client
            .auth(reference, &self.auth, RegistryOperation::Pull)
            .await
            .map_err(failed)?;
        // An image index is resolved to its Wasm entry (`wasm_entry`).
        let (manifest, manifest_digest) = self
            .client
            .pull_image_manifest(reference, &self.auth)
            .await
            .map_err(failed)?;
        let (digest, size) =
            artifact::wasm_layer(&manifest).map_err(|problem| OciError::Layout {
                reference: shown.to_owned(),
                problem,
            })?;
        if size > MAX_AGENT_SIZE {
            return Err(OciError::TooLarge {
                reference: shown.to_owned(),
                size,
            });
        }
        let layer = OciDescriptor {
            media_type: artifact::LAYER_MEDIA_TYPE.to_owned(),
            digest: digest.clone(),
            size: size as i64,
            ..Default::default()
        };
        let mut sink = Bounded::new(size);
        let pulled = self.client.pull_blob(reference, &layer, &mut sink).await;
        if sink.overflowed {
            return Err(OciError::Overlong {
                reference: shown.to_owned(),
                declared: size,
            });
        }
        // oci-client checks the digest too; the node's own check does not
        // depend on how it reports a mismatch.
        let actual = sha256_digest(&sink.bytes);
        match pulled {
            Err(OciDistributionError::DigestError(_)) => {}
            Err(error) => return Err(failed(error)),
            Ok(()) => {}
        }
        if actual != digest {
            return Err(OciError::DigestMismatch {
                reference: shown.to_owned(),
                expected: digest,
                actual,
            });
        }
        let signatures = self.signatures(reference, &manifest_digest).await;
        Ok(Pulled {
            bytes: sink.bytes,
            reference: shown.to_owned(),
            manifest: manifest_digest,
            signatures,
        })
    }

    /// The cosign signatures beside `manifest_digest` (the manifest tagged
    /// `sha256-….sig` in the same repository): at most
    /// [`signature::MAX_LAYERS`] layers, each payload at most
    /// [`signature::MAX_PAYLOAD`] bytes and hashing to its digest. None is
    /// an empty list; a registry that fails to answer is a reason.
    async fn signatures(
        &self,
        reference: &Reference,
        manifest_digest: &str,
    ) -> Result<Vec<signature::Found>, String> {
        let tagged = signature_reference(reference, manifest_digest);
        let shown = shown(&tagged);
        let anonymous = self.auth == RegistryAuth::Anonymous;
        let manifest = match self.client.pull_image_manifest(&tagged, &self.auth).await {
            Ok((manifest, _)) => manifest,
            Err(error) if is_not_found(&error) => return Ok(Vec::new()),
            Err(error) => {
                return Err(format!(
                    "its signatures could not be read ({})",
                    registry_error(&shown, anonymous, error)
                ));
            }
        };
        let mut found = Vec::new();
        // Why the last layer that could not be read was not: said when
        // none could, so that "not signed" is never said of a manifest
        // that has signatures.
        let mut unread = None;
        for layer in manifest
            .layers
            .iter()
            .filter(|layer| layer.media_type == signature::LAYER_MEDIA_TYPE)
            .take(signature::MAX_LAYERS)
        {
            let Some(text) = layer
                .annotations
                .as_ref()
                .and_then(|annotations| annotations.get(signature::SIGNATURE_ANNOTATION))
            else {
                continue;
            };
            let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
            if size > signature::MAX_PAYLOAD {
                unread = Some(format!(
                    "a signature payload of {} bytes, more than the {} read of one",
                    layer.size,
                    signature::MAX_PAYLOAD
                ));
                continue;
            }
            let mut sink = Bounded::new(size);
            let pulled = self.client.pull_blob(&tagged, layer, &mut sink).await;
            if sink.overflowed {
                unread = Some(format!(
                    "a signature payload longer than the {size} bytes its manifest gives"
                ));
                continue;
            }
            match pulled {
                Ok(()) | Err(OciDistributionError::DigestError(_)) => {}
                Err(error) => {
                    unread = Some(registry_error(&shown, anonymous, error).to_string());
                    continue;
                }
            }
            if sha256_digest(&sink.bytes) != layer.digest {
                unread = Some(format!(
                    "a signature payload that does not hash to its digest {}",
                    crate::text::excerpt(&layer.digest, 80)
                ));
                continue;
            }
            found.push(signature::Found {
                payload: sink.bytes,
                signature: text.clone(),
            });
        }
        match unread {
            Some(why) if found.is_empty() => {
                Err(format!("its signatures could not be read ({why})"))
            }
            _ => Ok(found),
        }
    }

    /// Signs the manifest `manifest_digest` of `reference`'s repository
    /// with `signer`, in cosign's format: a layer added to the manifest
    /// tagged `sha256-….sig` (made if there is none; a signature already
    /// there by the same key of the same payload is kept as it is).
    pub async fn sign(
        &self,
        reference: &Reference,
        manifest_digest: &str,
        signer: &signature::Signer,
    ) -> Result<(), OciError> {
        let tagged = signature_reference(reference, manifest_digest);
        let signed = self.sign_unbounded(reference, &tagged, manifest_digest, signer);
        self.bounded(&shown(&tagged), signed).await
    }

    async fn sign_unbounded(
        &self,
        reference: &Reference,
        tagged: &Reference,
        manifest_digest: &str,
        signer: &signature::Signer,
    ) -> Result<(), OciDistributionError> {
        let repository = format!("{}/{}", reference.registry(), reference.repository());
        let payload = signature::Payload::new(&repository, manifest_digest).to_bytes();
        let layer = OciDescriptor {
            media_type: signature::LAYER_MEDIA_TYPE.to_owned(),
            digest: sha256_digest(&payload),
            size: payload.len() as i64,
            annotations: Some(BTreeMap::from([(
                signature::SIGNATURE_ANNOTATION.to_owned(),
                signer.sign(&payload),
            )])),
            ..Default::default()
        };
        self.client
            .auth(tagged, &self.auth, RegistryOperation::Push)
            .await?;
        // Signatures others made stay beside this one, as cosign keeps them.
        let mut layers = match self.client.pull_image_manifest(tagged, &self.auth).await {
            Ok((existing, _)) => existing.layers,
            Err(error) if is_not_found(&error) => Vec::new(),
            Err(error) => return Err(error),
        };
        let same = |other: &OciDescriptor| {
            other.digest == layer.digest && other.annotations == layer.annotations
        };
        if layers.iter().any(same) {
            return Ok(());
        }
        if !self.client.blob_exists(tagged, &layer.digest).await? {
            self.client
                .push_blob(tagged, payload, &layer.digest)
                .await?;
        }
        layers.push(layer);
        let config = signature_config(&layers);
        let config_digest = sha256_digest(&config);
        self.client
            .push_blob(tagged, config.clone(), &config_digest)
            .await?;
        let manifest = OciImageManifest {
            schema_version: 2,
            media_type: Some(artifact::MANIFEST_MEDIA_TYPE.to_owned()),
            config: OciDescriptor {
                media_type: "application/vnd.oci.image.config.v1+json".to_owned(),
                digest: config_digest,
                size: config.len() as i64,
                ..Default::default()
            },
            layers,
            ..Default::default()
        };
        let body =
            serde_json::to_vec(&OciManifest::Image(manifest)).expect("a manifest serializes");
        let content_type = http::HeaderValue::from_static(artifact::MANIFEST_MEDIA_TYPE);
        self.client
            .push_manifest_raw(tagged, body, content_type)
            .await?;
        Ok(())
    }

    /// Pushes `bytes` (a component the node holds) to `reference` in the
    /// Wasm artifact layout, with `annotations` on its manifest. The layer
    /// is titled `file_name`, the name ORAS gives the file it pulls.
    pub async fn push(
        &self,
        reference: &Reference,
        bytes: Vec<u8>,
        file_name: &str,
        annotations: BTreeMap<String, String>,
    ) -> Result<Pushed, OciError> {
        let pushed = self.push_unbounded(reference, bytes, file_name, annotations);
        self.bounded(&shown(reference), pushed).await
    }

    /// `work` against the registry, cut off at [`DEADLINE`], its errors
    /// said as lines about `shown`.
    async fn bounded<T>(
        &self,
        shown: &str,
        work: impl std::future::Future<Output = Result<T, OciDistributionError>>,
    ) -> Result<T, OciError> {
        let anonymous = self.auth == RegistryAuth::Anonymous;
        let work = async {
            work.await
                .map_err(|error| registry_error(shown, anonymous, error))
        };
        within_deadline(shown, work).await
    }

    async fn push_unbounded(
        &self,
        reference: &Reference,
        bytes: Vec<u8>,
        file_name: &str,
        annotations: BTreeMap<String, String>,
    ) -> Result<Pushed, OciDistributionError> {
        let layer_digest = sha256_digest(&bytes);
        let config = artifact::WasmConfig::for_component(&bytes, layer_digest.clone());
        let config = serde_json::to_vec(&config).expect("the config serializes");
        let config_digest = sha256_digest(&config);
        let manifest = OciImageManifest {
            schema_version: 2,
            media_type: Some(artifact::MANIFEST_MEDIA_TYPE.to_owned()),
            config: OciDescriptor {
                media_type: artifact::CONFIG_MEDIA_TYPE.to_owned(),
                digest: config_digest.clone(),
                size: config.len() as i64,
                ..Default::default()
            },
            layers: vec![OciDescriptor {
                media_type: artifact::LAYER_MEDIA_TYPE.to_owned(),
                digest: layer_digest.clone(),
                size: bytes.len() as i64,
                annotations: Some(BTreeMap::from([(
                    "org.opencontainers.image.title".to_owned(),
                    file_name.to_owned(),
                )])),
                ..Default::default()
            }],
            annotations: Some(annotations),
            ..Default::default()
        };
        self.client
            .auth(reference, &self.auth, RegistryOperation::Push)
            .await?;
        if !self.client.blob_exists(reference, &layer_digest).await? {
            self.client
                .push_blob(reference, bytes, &layer_digest)
                .await?;
        }
        self.client
            .push_blob(reference, config, &config_digest)
            .await?;
        let body =
            serde_json::to_vec(&OciManifest::Image(manifest)).expect("a manifest serializes");
        let digest = sha256_digest(&body);
        let content_type = http::HeaderValue::from_static(artifact::MANIFEST_MEDIA_TYPE);
        self.client
            .push_manifest_raw(reference, body, content_type)
            .await?;
        Ok(Pushed {
            pinned: format!(
                "{}/{}@{digest}",
                reference.registry(),
                reference.repository()
            ),
            digest,
        })
    }
}

/// `work` (a pull or a push of `shown`), cut off at [`DEADLINE`].
async fn within_deadline<T>(
    shown: &str,
    work: impl std::future::Future<Output = Result<T, OciError>>,
) -> Result<T, OciError> {
    tokio::time::timeout(DEADLINE, work)
        .await
        .map_err(|_| OciError::Deadline {
            reference: shown.to_owned(),
            deadline: DEADLINE,
        })?
}

/// Where the signatures of `manifest_digest` are: its repository, tagged
/// as cosign tags them.
fn signature_reference(reference: &Reference, manifest_digest: &str) -> Reference {
    Reference::with_tag(
        reference.registry().to_owned(),
        reference.repository().to_owned(),
        signature::tag(manifest_digest),
    )
}

/// The config of a signature manifest: an OCI image config whose layers
/// are the payloads, as cosign writes one.
fn signature_config(layers: &[OciDescriptor]) -> Vec<u8> {
    let diff_ids: Vec<&str> = layers.iter().map(|layer| layer.digest.as_str()).collect();
    serde_json::to_vec(&serde_json::json!({
        "architecture": "",
        "created": "0001-01-01T00:00:00Z",
        "history": [{ "created": "0001-01-01T00:00:00Z" }],
        "os": "",
        "rootfs": { "type": "layers", "diff_ids": diff_ids },
        "config": {},
    }))
    .expect("a config serializes")
}

/// Whether a registry said it has no such manifest.
fn is_not_found(error: &OciDistributionError) -> bool {
    use oci_client::errors::OciErrorCode;
    match error {
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        OciDistributionError::ServerError { code: 404, .. } => true,
        OciDistributionError::RegistryError { envelope, .. } => {
            envelope.errors.iter().any(|error| {
                matches!(
                    error.code,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NotFound
                        | OciErrorCode::NameUnknown
                )
            })
        }
        _ => false,
    }
}

/// An OCI digest (`sha256:<hex>`), written as the node's content ids are.
fn sha256_digest(bytes: &[u8]) -> String {
    crate::AgentId::of(bytes).to_string()
}

/// The manifest of an image index to pull: the one for Wasm.
fn wasm_entry(entries: &[oci_client::manifest::ImageIndexEntry]) -> Option<String> {
    entries
        .iter()
        .find(|entry| {
            entry
                .platform
                .as_ref()
                .is_some_and(|platform| platform.architecture.to_string() == "wasm")
        })
        .map(|entry| entry.digest.clone())
}

/// A reference as a person wrote it, without the scheme.
fn shown(reference: &Reference) -> String {
    terminal_safe(&reference.whole()).into_owned()
}

/// The most of a registry's own words an error repeats.
const MAX_DETAIL: usize = 300;

/// An oci-client error as one line: the registry's words made safe for a
/// terminal and cut short. oci-client's errors name URLs and registry
/// messages, never the credentials sent.
fn registry_error(reference: &str, anonymous: bool, error: OciDistributionError) -> OciError {
    let unauthorized = match &error {
        OciDistributionError::AuthenticationFailure(_)
        | OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::ServerError {
            code: 401 | 403, ..
        } => true,
        OciDistributionError::RequestError(request) => request
            .status()
            .is_some_and(|status| status.as_u16() == 401 || status.as_u16() == 403),
        _ => false,
    };
    let mut detail = match &error {
        OciDistributionError::RequestError(request) => {
            // reqwest's Display hides the cause (connection refused, …).
            let mut text = request.to_string();
            let mut source = std::error::Error::source(request);
            while let Some(cause) = source {
                text = format!("{text}: {cause}");
                source = cause.source();
            }
            text
        }
        OciDistributionError::ResponseTooLarge { url, limit } => {
            format!("the registry's answer at {url} is larger than the {limit} bytes read of one")
        }
        other => other.to_string(),
    };
    detail = terminal_safe(&detail.replace(['\n', '\r'], " ")).into_owned();
    if detail.chars().count() > MAX_DETAIL {
        detail = detail.chars().take(MAX_DETAIL).collect::<String>() + "…";
    }
    let reference = reference.to_owned();
    if unauthorized && anonymous {
        OciError::CredentialsNeeded { reference }
    } else if unauthorized {
        OciError::Refused { reference, detail }
    } else {
        OciError::Registry { reference, detail }
    }
}

/// Where a layer is read to: refuses a byte past the size the manifest
/// declared, so an endless or oversized layer stops there.
struct Bounded {
    bytes: Vec<u8>,
    limit: u64,
    overflowed: bool,
}

impl Bounded {
    fn new(limit: u64) -> Self {
        Self {
            // Room for a typical component at once; a larger one grows.
            bytes: Vec::with_capacity(limit.min(16 * 1024 * 1024) as usize),
            limit,
            overflowed: false,
        }
    }
}

impl tokio::io::AsyncWrite for Bounded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.bytes.len() as u64 + buf.len() as u64 > self.limit {
            self.overflowed = true;
            return Poll::Ready(Err(std::io::Error::other(
                "the layer is longer than its manifest says",
            )));
        }
        self.bytes.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
