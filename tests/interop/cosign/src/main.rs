//! sigstore-rs (the sigstore project's Rust implementation of cosign's
//! formats) signing and verifying a component in a registry, to check
//! agentsite's signatures against the reference format's own code.
use anyhow::{Context, anyhow, bail};
use sigstore::cosign::constraint::PrivateKeySigner;
use sigstore::cosign::verification_constraint::{PublicKeyVerifier, VerificationConstraintVec};
use sigstore::cosign::{Constraint, CosignCapabilities, SignatureLayer};
use sigstore::crypto::SigningScheme;
use sigstore::crypto::signing_key::KeyPair;
use sigstore::crypto::signing_key::ed25519::Ed25519Keys;
use sigstore::registry::{Auth, ClientConfig, ClientProtocol, OciReference};
use zeroize::Zeroizing;

fn client() -> anyhow::Result<sigstore::cosign::Client> {
    let mut config = ClientConfig::default();
    config.protocol = ClientProtocol::Http;
    Ok(sigstore::cosign::ClientBuilder::default().with_oci_client_config(config).build()?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("keygen") => {
            let dir = std::path::Path::new(&args[2]);
            let keys = Ed25519Keys::new()?;
            std::fs::write(dir.join("cosign.key"), keys.private_key_to_pem()?.as_bytes())?;
            std::fs::write(dir.join("cosign.pub"), keys.public_key_to_pem()?)?;
        }
        Some("sign") => {
            let key = std::fs::read(&args[2]).context("key")?;
            let image: OciReference = args[3].parse()?;
            let mut client = client()?;
            let (signature_image, digest) = client.triangulate(&image, &Auth::Anonymous).await?;
            let mut layer = SignatureLayer::new_unsigned(&image, &digest)?;
            let signer = PrivateKeySigner::new_with_raw(Zeroizing::new(key), Zeroizing::new(vec![]), &SigningScheme::ED25519)?;
            signer.add_constraint(&mut layer)?;
            client.push_signature(None, &Auth::Anonymous, &signature_image, vec![layer]).await?;
            println!("signed {digest} as {signature_image}");
        }
        Some("verify") => {
            let key = std::fs::read(&args[2]).context("key")?;
            let image: OciReference = args[3].parse()?;
            let mut client = client()?;
            let layers = client.trusted_signature_layers(&Auth::Anonymous, &image).await?;
            if layers.is_empty() {
                bail!("no signature layers for {image}");
            }
            let constraints: VerificationConstraintVec =
                vec![Box::new(PublicKeyVerifier::new(&key, &SigningScheme::ED25519)?)];
            sigstore::cosign::verify_constraints(&layers, constraints.iter())
                .map_err(|e| anyhow!("not verified: {:?}", e.unsatisfied_constraints))?;
            println!("verified {image}: {} signature layer(s), one by the key", layers.len());
        }
        _ => bail!("usage: cosign-interop keygen DIR | sign KEY REF | verify PUB REF"),
    }
    Ok(())
}
