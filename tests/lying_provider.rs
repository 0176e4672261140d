//! A provider that lies: it claims to host an agent and serves corrupted
//! chunks. The fetch completes from an honest provider, the liar is caught
//! and blocked, and its bytes never reach the store. In-process nodes on the
//! memory transport, driven through the library.

use crate::support;

use agentsite::AgentId;
use agentsite::config::DataDir;
use agentsite::net::fetch::{FetchRequest, FetchResponse};
use agentsite::net::rpc::{self, CallRequest, RpcError};
use agentsite::net::{Keypair, Library, Network, PeerId};
use agentsite::receipt::Ran;
use agentsite::store::manifest::SignedManifest;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::testnet::{manifest_from_dht, memory_config, node_with_hub};

/// Serves the real manifest and chunks with every byte flipped.
struct Liar {
    manifest: Mutex<Option<SignedManifest>>,
}

#[async_trait::async_trait]
impl Library for Liar {
    fn answer(&self, _from: PeerId, request: FetchRequest) -> FetchResponse {
        let manifest = self.manifest.lock().unwrap().clone();
        match (request, manifest) {
            (FetchRequest::Chunk { index, .. }, Some(signed)) => {
                let length = signed.manifest().chunk_range(index as usize).len();
                FetchResponse::Chunk(vec![0xA5; length].into())
            }
            (FetchRequest::Manifest { .. }, Some(signed)) => {
                FetchResponse::Manifest(signed.encoded().to_vec())
            }
            _ => FetchResponse::NotFound,
        }
    }

    async fn call(&self, _from: PeerId, _request: &CallRequest) -> Result<Ran, RpcError> {
        Err(RpcError {
            code: rpc::code::INTERNAL,
            message: "no".into(),
        })
    }

    fn announced(&self, _manifest: SignedManifest, _host: PeerId) {}
}

/// Files in the blob store of the node in `dir`.
fn stored_blobs(dir: &std::path::Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(DataDir::new(dir).blobs()) else {
        return Vec::new();
    };
    entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_provider_is_caught_and_its_bytes_never_stored() {
    let honest_dir = tempfile::tempdir().unwrap();
    let fetcher_dir = tempfile::tempdir().unwrap();
    let victim_dir = tempfile::tempdir().unwrap();

    // The honest publisher.
    let (honest_node, honest) = node_with_hub(honest_dir.path(), &[]).await;
    let bytes = support::padded_agent("calculator", 1_500_000);
    let id = AgentId::of(&bytes);
    honest_node.add(&bytes).await.unwrap();
    let (manifest, _) = honest.publish(&id.to_string()).await.unwrap();
    assert!(manifest.manifest().chunk_count() >= 6);
    let entry = honest.network().addresses().await.unwrap();

    // The liar copies the signed manifest from the DHT and says it hosts
    // the agent too.
    let liar_library = Arc::new(Liar {
        manifest: Mutex::new(None),
    });
    let liar = Network::start(
        Keypair::generate_ed25519(),
        memory_config(entry.clone()),
        liar_library.clone(),
    )
    .await
    .unwrap();
    let copied = manifest_from_dht(&liar, id).await;
    *liar_library.manifest.lock().unwrap() = Some(copied.clone());
    liar.publish(copied).await.unwrap();

    // The fetcher sees both providers, is fed corrupt chunks by one, and
    // still ends with the agent, verified.
    let (fetcher_node, fetcher) = node_with_hub(fetcher_dir.path(), &entry).await;
    let fetched = tokio::time::timeout(Duration::from_secs(60), fetcher.fetch(id, &|_| {}))
        .await
        .expect("the fetch ends")
        .expect("the fetch succeeds from the honest provider");
    assert!(fetched.downloaded);
    assert_eq!(fetched.record.id, id);
    assert_eq!(fetched.liars, vec![liar.peer_id().to_string()]);
    assert_eq!(
        fetched.providers_used, 1,
        "only the honest provider's chunks are kept"
    );
    fetcher_node.blobs().verify(&id).unwrap();
    assert_eq!(stored_blobs(fetcher_dir.path()), vec![id.hex()]);
    let sum = fetcher_node
        .call("calculator", "add", r#"{"a": 40, "b": 2}"#, None)
        .await
        .unwrap();
    assert_eq!(sum.structured_content.unwrap().to_value()["result"], 42.0);

    // The liar is blocked: the fetcher drops its connection and refuses it.
    support::eventually_async(Duration::from_secs(10), "the liar is dropped", async || {
        let peers = fetcher.network().peers().await.unwrap();
        let liar = liar.peer_id().to_string();
        match peers.iter().any(|p| p.peer_id == liar) {
            false => Ok(()),
            true => Err(format!("still connected among {peers:?}")),
        }
    })
    .await;

    // With the honest provider gone, a new node can only reach the liar:
    // the fetch fails with a clear reason and stores nothing.
    honest.network().shutdown().await;
    let liar_address = liar.addresses().await.unwrap();
    let (_victim_node, victim) = node_with_hub(victim_dir.path(), &liar_address).await;
    let error = tokio::time::timeout(Duration::from_secs(60), victim.fetch(id, &|_| {}))
        .await
        .expect("the fetch ends")
        .expect_err("nobody honest is left");
    let message = error.to_string();
    assert!(message.contains("corrupt chunks"), "{message}");
    assert!(stored_blobs(victim_dir.path()).is_empty());
    liar.shutdown().await;
}
