//! The Wasm OCI artifact layout of the CNCF TAG Runtime's "Wasm OCI
//! Artifact" guidance, which `wkg`, Wassette and wasmCloud read and write:
//! one layer of type `application/wasm` holding the component, and a config
//! of type `application/vnd.wasm.config.v0+json` describing it.

use oci_client::manifest::OciImageManifest;
use serde::Serialize;

pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";

/// The config blob: what the component is, for registries and indexes.
/// Field names as the layout gives them (and `oci-wasm` writes them).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    /// RFC 3339, as the OCI image config's `created`.
    pub created: String,
    pub author: Option<String>,
    pub architecture: &'static str,
    pub os: &'static str,
    /// The digests of the manifest's layers, in order: makes the config
    /// (and so the artifact's id) differ for different components.
    pub layer_digests: Vec<String>,
    pub component: ComponentDescription,
}

/// A component's world, as names.
#[derive(Serialize, Debug, PartialEq, Eq)]
pub struct ComponentDescription {
    pub exports: Vec<String>,
    pub imports: Vec<String>,
    pub target: Option<String>,
}

impl WasmConfig {
    pub fn for_component(bytes: &[u8], layer_digest: String) -> Self {
        Self {
            created: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            author: None,
            architecture: "wasm",
            os: "wasip2",
            layer_digests: vec![layer_digest],
            component: describe(bytes),
        }
    }
}

/// The names a component imports and exports at its top level (not those
/// of the modules and components nested in it). A component that does not
/// parse has an empty description: the node checked it when it was added.
pub fn describe(bytes: &[u8]) -> ComponentDescription {
    use wasmparser::{Parser, Payload};
    let mut description = ComponentDescription {
        exports: Vec::new(),
        imports: Vec::new(),
        target: None,
    };
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let Ok(payload) = payload else { break };
        match payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(imports) if depth == 0 => {
                for import in imports.into_iter().flatten() {
                    description.imports.push(import.name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(exports) if depth == 0 => {
                for export in exports.into_iter().flatten() {
                    description.exports.push(export.name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    description
}

/// What is wrong with a manifest that should describe one component.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LayoutError {
    #[error(
        "it is not a Wasm component artifact: it has no {LAYER_MEDIA_TYPE} layer (its layers: {0})"
    )]
    NoWasmLayer(String),
    #[error("it has {0} {LAYER_MEDIA_TYPE} layers; a component artifact has one")]
    SeveralWasmLayers(usize),
    #[error("its layer's digest {0:?} is not a sha256 digest")]
    NotSha256(String),
    #[error("its layer's size {0} is not a size")]
    BadSize(i64),
}

/// The one `application/wasm` layer of `manifest`: its digest and size.
pub fn wasm_layer(manifest: &OciImageManifest) -> Result<(String, u64), LayoutError> {
    let wasm: Vec<_> = manifest
        .layers
        .iter()
        .filter(|layer| layer.media_type == LAYER_MEDIA_TYPE)
        .collect();
    let layer = match wasm.as_slice() {
        [layer] => layer,
        [] => {
            let kinds: Vec<String> = manifest
                .layers
                .iter()
                .take(5)
                .map(|layer| crate::text::terminal_safe(&layer.media_type).into_owned())
                .collect();
            let kinds = if kinds.is_empty() {
                "none".to_owned()
            } else {
                kinds.join(", ")
            };
            return Err(LayoutError::NoWasmLayer(kinds));
        }
        several => return Err(LayoutError::SeveralWasmLayers(several.len())),
    };
    let hex = layer.digest.strip_prefix("sha256:").unwrap_or_default();
    if hex.len() != 64
        || !hex
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return Err(LayoutError::NotSha256(
            crate::text::terminal_safe(&layer.digest)
                .chars()
                .take(80)
                .collect(),
        ));
    }
    let size = u64::try_from(layer.size).map_err(|_| LayoutError::BadSize(layer.size))?;
    Ok((layer.digest.clone(), size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_client::manifest::OciDescriptor;

    #[test]
    fn a_component_is_described_by_its_top_level_imports_and_exports() {
        let component = wat::parse_str(
            r#"(component
                (import "wasi:cli/environment@0.2.0" (instance))
                (core module $m (func (export "inner")))
                (component $c (import "nested" (instance)))
                (instance $i)
                (export "agentsite:agent/tools@0.1.0" (instance $i)))"#,
        )
        .unwrap();
        assert_eq!(
            describe(&component),
            ComponentDescription {
                exports: vec!["agentsite:agent/tools@0.1.0".into()],
                imports: vec!["wasi:cli/environment@0.2.0".into()],
                target: None,
            }
        );
    }

    fn manifest(layers: &[(&str, &str, i64)]) -> OciImageManifest {
        OciImageManifest {
            layers: layers
                .iter()
                .map(|(media_type, digest, size)| OciDescriptor {
                    media_type: (*media_type).into(),
                    digest: (*digest).into(),
                    size: *size,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn only_one_sha256_wasm_layer_is_a_component_artifact() {
        let digest = format!("sha256:{}", "0".repeat(64));
        assert_eq!(
            wasm_layer(&manifest(&[(LAYER_MEDIA_TYPE, &digest, 10)])),
            Ok((digest.clone(), 10))
        );
        let image = manifest(&[("application/vnd.oci.image.layer.v1.tar+gzip", &digest, 10)]);
        assert!(wasm_layer(&image).unwrap_err().to_string().contains(
            "no application/wasm layer (its layers: application/vnd.oci.image.layer.v1.tar+gzip)"
        ));
        let two = manifest(&[
            (LAYER_MEDIA_TYPE, &digest, 1),
            (LAYER_MEDIA_TYPE, &digest, 1),
        ]);
        assert_eq!(wasm_layer(&two), Err(LayoutError::SeveralWasmLayers(2)));
        let sha512 = manifest(&[(LAYER_MEDIA_TYPE, "sha512:00", 1)]);
        assert!(matches!(
            wasm_layer(&sha512),
            Err(LayoutError::NotSha256(_))
        ));
        let negative = manifest(&[(LAYER_MEDIA_TYPE, &digest, -1)]);
        assert_eq!(wasm_layer(&negative), Err(LayoutError::BadSize(-1)));
    }
}
