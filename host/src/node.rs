//! A node: the store and the runtime together, behind the operations users
//! know (add, list, resolve, call, remove).
//!
//! Adding follows one path: bytes → sha256 → compile (refusing what is not a
//! component) → check the agent world → ask the agent for its card and tools
//! (validated) → store bytes, then the compiled artifact, then the record.
//! Calling follows another: name → record → loaded agent (bytes verified
//! against the id, artifact verified and mapped, imports resolved once per
//! process) → fresh instance → result.

use crate::AgentId;
use crate::agent::key::AgentKey;
use crate::agent::prompt::{PromptOutput, PromptSpec};
use crate::agent::resource::{ResourceCatalog, ResourceContents};
use crate::agent::tool::ToolOutput;
use crate::audit::{self, Audit, Outcome};
use crate::bridge::{Attachment, Bridge};
use crate::capabilities::caller::{Caller, ChainCaller};
use crate::capabilities::grant::Grants;
use crate::capabilities::peers::grant::MAX_DEPTH;
use crate::capabilities::peers::{Hop, PeerFailure};
use crate::capabilities::sources::{Sources, Used};
use crate::capabilities::wasi::exposure::NodeSelf;
use crate::clock::unix_seconds;
use crate::config::{DataDir, Limits};
use crate::llm::LlmConfig;
use crate::llm::config::Backend;
use crate::llm::models::Models;
use crate::policy::{PolicyFile, Refused};
use crate::receipt::Ran;
use crate::runtime::background::{BackgroundRuntime, RuntimeUnavailable};
use crate::runtime::{CallError, Capacity, ComponentError, LoadedAgent, Runtime, ToolCall};
use crate::store::Origin;
use crate::store::{AgentRecord, BlobStore, Catalog, CompiledCache, ResolveError, StoreError};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

/// Why an agent was not added. Nothing is stored when adding fails.
#[derive(Debug, thiserror::Error)]
pub enum AddError {
    #[error(transparent)]
    Component(#[from] ComponentError),
    #[error("its card or tools break the agent contract: {0}")]
    Contract(CallError),
    #[error(transparent)]
    Name(crate::agent::tool::ContractError),
    #[error("it exports plain functions and carries no card: name it (agentsite add --name NAME)")]
    Unnamed,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Runtime(#[from] RuntimeUnavailable),
    #[error("it was added, but the build it replaces could not be removed: {0}")]
    Replace(String),
}

/// What `install` does with an installed agent of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SameName {
    /// The new build takes its place, its grants and its data.
    Replace,
    /// Both stay installed (each then named by id).
    KeepBoth,
}

/// An agent `install` added, and the builds it replaced.
#[derive(Debug)]
pub struct Installed {
    pub record: AgentRecord,
    pub replaced: Vec<AgentRecord>,
}

/// An agent `remove` took away, and its tables in the policy file that
/// went with it.
#[derive(Debug)]
pub struct Removed {
    pub record: AgentRecord,
    pub grants: Vec<AgentKey>,
}

/// Why a server was not attached. Nothing is recorded when attaching fails.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error(transparent)]
    Name(#[from] crate::agent::tool::ContractError),
    #[error(
        "an agent named {name} is installed already ({id}); detach or remove it first, or choose another name"
    )]
    Taken { name: String, id: AgentId },
    #[error(transparent)]
    Attachment(#[from] crate::bridge::InvalidAttachment),
    #[error("{0}")]
    Probe(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a call through the node failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeCallError {
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error("cannot update the policy file: {0}")]
    Policy(String),
    #[error("{agent} has no tool named {tool:?}; {hint}its tools are: {known}")]
    UnknownTool {
        agent: String,
        tool: String,
        known: String,
        /// `did you mean "X"? ` when one is close, else empty.
        hint: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot load {agent}: {reason}")]
    Load { agent: String, reason: String },
    #[error(transparent)]
    Call(#[from] CallError),
    #[error(transparent)]
    Runtime(#[from] RuntimeUnavailable),
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error(
        "refused by policy: {agent}'s grant reaches the node itself: {reaches}; revoke it \
         (`agentsite revoke {agent} ...`), or grant it with --dangerously-allow-node-access if it is meant to"
    )]
    ReachesNode { agent: String, reaches: String },
}

impl NodeCallError {
    /// How a call ends for whoever asked for it (an MCP client, another
    /// agent here, another node): the one mapping of a call's errors. A
    /// failure of the tool or a limit it hit is a result with `isError`,
    /// which the caller sees, as MCP wants tool errors; what stopped the
    /// call from running at all is a refusal.
    pub fn answer(outcome: Result<ToolOutput, NodeCallError>) -> Result<ToolOutput, PeerFailure> {
        match outcome {
            Ok(output) => Ok(output),
            Err(NodeCallError::Call(CallError::InvalidArguments(reason))) => {
                Err(PeerFailure::InvalidArguments(reason))
            }
            Err(NodeCallError::Call(failure)) => Ok(ToolOutput::failure(failure.to_string())),
            Err(NodeCallError::UnknownTool { tool, .. }) => Err(PeerFailure::UnknownTool(tool)),
            Err(NodeCallError::Resolve(error)) => Err(PeerFailure::NotFound(error.to_string())),
            Err(error) => Err(PeerFailure::Unavailable(error.to_string())),
        }
    }
}

/// The sections of the configuration file a node reads itself; the rest
/// are the server's and the command line's.
#[derive(Debug, Clone, Default)]
pub struct NodeConfig {
    /// Limits applied to every call.
    pub limits: Limits,
    /// The node's language models.
    pub llm: LlmConfig,
    /// The policy file, when not `<data-dir>/policy.toml`.
    pub policy: Option<PathBuf>,
    /// The configuration file the node was started with, if any: no grant
    /// may hand it to an agent.
    pub config_file: Option<PathBuf>,
}

/// The node's own files and secrets, as no grant may hand them out.
fn node_self(data: &DataDir, config: &NodeConfig, policy: &PolicyFile) -> NodeSelf {
    let mut files = vec![(
        policy.path().to_owned(),
        "the node's policy file, where its grants are written",
    )];
    if let Some(file) = &config.config_file {
        files.push((file.clone(), "the node's configuration file"));
    }
    let secrets = config
        .llm
        .models
        .iter()
        .filter_map(|model| match &model.backend {
            Backend::Openai(openai) => openai.api_key_env.as_ref().map(|name| {
                (
                    name.clone(),
                    format!("holds the key of the node's model {}", model.name),
                )
            }),
            _ => None,
        });
    NodeSelf::new(data.root(), files, secrets)
}

/// A node: installed agents and the runtime that calls them.
pub struct Node {
    data: DataDir,
    config: NodeConfig,
    runtime: BackgroundRuntime,
    blobs: BlobStore,
    compiled: CompiledCache,
    catalog: Catalog,
    policy: PolicyFile,
    /// What of the node no grant hands an agent unless the operator says so.
    node_self: NodeSelf,
    audit: Arc<Audit>,
    models: Arc<Models>,
    loaded: Mutex<HashMap<AgentId, Arc<LoadedAgent>>>,
    /// The attached servers, connected as they are called.
    bridge: Bridge,
}

impl Node {
    /// Opens the node whose data lives in `data`, able to run `capacity`
    /// instances at once.
    pub fn open(data: DataDir, config: NodeConfig, capacity: Capacity) -> anyhow::Result<Self> {
        config.limits.validate()?;
        let policy = match &config.policy {
            Some(path) => PolicyFile::open(path.clone(), true)?,
            None => PolicyFile::open(data.policy(), false)?,
        };
        // The runtime is built while the caller reads the store.
        if capacity == Capacity::SERVER {
            // A serving node starts after a crash as often as not.
            for dir in [data.blobs(), data.compiled(), data.agents()] {
                crate::store::sweep_unfinished_writes(&dir, crate::store::STALE_WRITE);
            }
        }
        let audit = Arc::new(Audit::new());
        let models = Arc::new(
            Models::from_config(&config.llm, audit.clone())?.with_ledger(data.llm_usage()),
        );
        let runtime = BackgroundRuntime::start(data.kv(), capacity, audit.clone(), models.clone());
        let fingerprints = [
            crate::runtime::engine_fingerprint(crate::runtime::Mode::Synchronous)?,
            crate::runtime::engine_fingerprint(crate::runtime::Mode::Concurrent)?,
        ];
        let catalog = Catalog::new(data.agents());
        let node_self = node_self(&data, &config, &policy);
        Ok(Node {
            blobs: BlobStore::new(data.blobs()),
            compiled: CompiledCache::new(data.compiled(), fingerprints),
            bridge: Bridge::new(catalog.clone()),
            catalog,
            policy,
            node_self,
            audit,
            data,
            config,
            runtime,
            models,
            loaded: Mutex::new(HashMap::new()),
        })
    }

    /// The node's language models.
    pub fn models(&self) -> &Arc<Models> {
        &self.models
    }

    pub fn data_dir(&self) -> &DataDir {
        &self.data
    }

    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// The operator's policy: what each agent may reach.
    pub fn policy(&self) -> &PolicyFile {
        &self.policy
    }

    /// What of the node no grant hands an agent unless the operator says so.
    pub fn node_self(&self) -> &NodeSelf {
        &self.node_self
    }

    /// The node's audit trail and metrics.
    pub fn audit(&self) -> &Arc<Audit> {
        &self.audit
    }

    /// What a call of the agent of `record` may reach now, and its limits.
    /// The decision goes to the audit trail.
    pub fn grants(&self, record: &AgentRecord) -> Result<Grants, NodeCallError> {
        let agent = record.card.name.as_str();
        let policy = self.policy.current();
        let (grant, source) = match policy.grant_for(&record.id, agent, &record.origin) {
            Ok(decided) => decided,
            Err(refused) => {
                self.audit.denied(agent, "policy", &refused.to_string());
                return Err(refused.into());
            }
        };
        let refused = self.node_self.refused(&grant);
        if !refused.is_empty() {
            let reaches: Vec<String> = refused.iter().map(ToString::to_string).collect();
            let error = NodeCallError::ReachesNode {
                agent: agent.to_owned(),
                reaches: reaches.join("; "),
            };
            self.audit.denied(agent, "policy", &error.to_string());
            return Err(error);
        }
        let grants = grant.resolve(self.config.limits);
        tracing::debug!(
            target: audit::TARGET,
            agent,
            id = %record.id,
            from = ?source,
            fs = grants.fs.len(),
            http = grants.http.len(),
            env = grants.env.len(),
            kv = ?grants.kv,
            peers = ?grants.peers,
            llm = ?grants.llm,
            "grants"
        );
        Ok(grants)
    }

    /// The stored component bytes.
    pub fn blobs(&self) -> &BlobStore {
        &self.blobs
    }

    /// The node's runtime, once it is built.
    pub fn runtime(&self) -> Result<&Runtime, RuntimeUnavailable> {
        self.runtime.get()
    }

    /// Adds the component `bytes` from a file of this machine and returns
    /// its record. Adding an agent that is already installed returns the
    /// existing record.
    pub async fn add(&self, bytes: &[u8]) -> Result<AgentRecord, AddError> {
        self.add_from(bytes, Origin::Local).await
    }

    /// Adds the component `bytes` that came from `origin`.
    pub async fn add_from(&self, bytes: &[u8], origin: Origin) -> Result<AgentRecord, AddError> {
        self.add_named(bytes, origin, None).await
    }

    /// Adds the component `bytes` that came from `origin`; a component of
    /// plain functions, which carries no card, is named `name` (an agent
    /// of the agent world names itself).
    pub async fn add_named(
        &self,
        bytes: &[u8],
        origin: Origin,
        name: Option<&str>,
    ) -> Result<AgentRecord, AddError> {
        if let Some(name) = name {
            crate::agent::tool::validate_agent_name(name).map_err(AddError::Name)?;
        }
        let id = AgentId::of(bytes);
        if let Some(record) = self.catalog.get(&id)?
            && self.blobs.verify(&id).is_ok()
        {
            return Ok(record);
        }
        let limits = self.config.limits;
        let runtime = self.runtime()?;
        let compiled = runtime.compile(bytes, limits.compile_deadline)?;
        let component = compiled.component;
        let candidate = runtime.prepare(id, name.unwrap_or("new-agent"), &component, &limits)?;
        if candidate.is_plain() && name.is_none() {
            return Err(AddError::Unnamed);
        }
        let (card, tools) = runtime
            .describe(&candidate, &limits)
            .await
            .map_err(AddError::Contract)?;
        let imports = runtime.imports(&component);

        self.blobs.put(bytes)?;
        self.compiled.put(&id, compiled.mode, &compiled.artifact)?;
        let record = AgentRecord {
            id,
            card,
            tools,
            imports,
            size: bytes.len() as u64,
            origin,
            added_at: unix_seconds(),
            attached: None,
        };
        self.catalog.put(&record)?;
        tracing::info!(agent = %record.card.name, id = %id, "added");
        Ok(record)
    }

    /// Attaches the MCP server or A2A agent `attachment` as the agent
    /// `name`: connects to it, checks its tools (or skills) against the
    /// agent contract, and records it. An MCP server is stopped again; the
    /// node starts it when it is called.
    pub async fn attach(
        &self,
        name: &str,
        attachment: Attachment,
    ) -> Result<AgentRecord, AttachError> {
        crate::agent::tool::validate_agent_name(name)?;
        attachment.check()?;
        if let Some(taken) = self.list()?.into_iter().find(|r| r.card.name == name) {
            return Err(AttachError::Taken {
                name: name.to_owned(),
                id: taken.id,
            });
        }
        let (attachment, card, tools) =
            crate::bridge::probe(name, &attachment, &self.config.limits)
                .await
                .map_err(AttachError::Probe)?;
        let record = AgentRecord {
            id: attachment.new_id(name),
            card,
            tools,
            imports: Vec::new(),
            size: 0,
            origin: Origin::Attached,
            added_at: unix_seconds(),
            attached: Some(attachment),
        };
        self.catalog.put(&record)?;
        tracing::info!(agent = %record.card.name, id = %record.id, "attached");
        Ok(record)
    }

    /// Every installed agent.
    pub fn list(&self) -> Result<Vec<AgentRecord>, StoreError> {
        self.catalog.list()
    }

    /// The agent meant by `query`: a full id, a card name or a unique id prefix.
    pub fn resolve(&self, query: &str) -> Result<AgentRecord, ResolveError> {
        self.catalog.resolve(query)
    }

    /// The path of the agent's compiled artifact for this engine, if intact.
    pub fn compiled_path(&self, id: &AgentId) -> Option<PathBuf> {
        self.compiled.verified_path(id).map(|(path, _)| path)
    }

    /// Prepares `record` for calls, once per process: verifies the stored
    /// bytes against the id, maps the compiled artifact (rebuilding it if it
    /// is missing or damaged) and resolves imports.
    pub fn load(&self, record: &AgentRecord) -> Result<Arc<LoadedAgent>, NodeCallError> {
        if let Some(agent) = self.loaded_agents().get(&record.id) {
            return Ok(agent.clone());
        }
        let load_error = |reason: String| NodeCallError::Load {
            agent: record.card.name.clone(),
            reason,
        };
        if record.is_attached() {
            return Err(load_error(
                "it is an attached server, not a component".into(),
            ));
        }
        self.blobs.verify(&record.id)?;
        let artifact = self.compiled.verified_path(&record.id);
        let runtime = self.runtime()?;
        let precompiled = artifact.and_then(|(path, mode)| {
            // SAFETY: the artifact was written by the engine configuration
            // of `mode` (its fingerprint is in the name) and its digest was
            // just checked.
            match unsafe { runtime.load_precompiled(&path, mode) } {
                Ok(component) => Some(component),
                Err(e) => {
                    tracing::warn!(agent = %record.card.name, "compiled artifact unusable ({e:#}); recompiling");
                    None
                }
            }
        });
        let component = match precompiled {
            Some(component) => component,
            None => {
                let bytes = self.blobs.get(&record.id)?;
                let compiled = runtime
                    .compile(&bytes, self.config.limits.compile_deadline)
                    .map_err(|e| load_error(e.to_string()))?;
                if let Err(e) = self
                    .compiled
                    .put(&record.id, compiled.mode, &compiled.artifact)
                {
                    tracing::warn!("cannot cache compiled agent: {e}");
                }
                compiled.component
            }
        };
        let agent = runtime
            .prepare(
                record.id,
                &record.card.name,
                &component,
                &self.config.limits,
            )
            .map_err(|e| load_error(e.to_string()))?
            .keeping_data_under(record.key());
        // Two first calls may load concurrently: the first one stored wins,
        // so that every call shares one set of concurrency slots.
        let agent = self
            .loaded_agents()
            .entry(record.id)
            .or_insert_with(|| Arc::new(agent))
            .clone();
        Ok(agent)
    }

    fn loaded_agents(&self) -> std::sync::MutexGuard<'_, HashMap<AgentId, Arc<LoadedAgent>>> {
        self.loaded.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Calls `tool` of the agent meant by `query` with `arguments` (a JSON
    /// object as text), under the policy's grants.
    pub async fn call(
        &self,
        query: &str,
        tool: &str,
        arguments: &str,
        caller: Option<Arc<dyn Caller>>,
    ) -> Result<ToolOutput, NodeCallError> {
        let record = self.resolve(query)?;
        let grants = self.grants(&record)?;
        self.call_record(&record, tool, arguments, grants, caller)
            .await
    }

    /// Calls `tool` of the installed agent `record` for another agent (here
    /// or on another node) or a goal's member, at `hop`: the one path of
    /// every call made on an agent's behalf that runs on this node. It runs
    /// under this node's grants and limits, never longer than the caller
    /// still waits, and is refused past the longest chain.
    pub async fn call_at_hop(
        &self,
        record: &AgentRecord,
        tool: &str,
        arguments: &str,
        hop: Hop,
    ) -> Result<ToolOutput, PeerFailure> {
        Ok(self
            .call_at_hop_recorded(record, tool, arguments, hop)
            .await?
            .output)
    }

    /// [`Node::call_at_hop`], saying what the call ran under: what a node
    /// serving a remote call signs a receipt of.
    pub async fn call_at_hop_recorded(
        &self,
        record: &AgentRecord,
        tool: &str,
        arguments: &str,
        hop: Hop,
    ) -> Result<Ran, PeerFailure> {
        if hop.depth > MAX_DEPTH {
            return Err(PeerFailure::DepthExceeded(format!(
                "agents calling agents may chain at most {MAX_DEPTH} deep"
            )));
        }
        let mut grants = self
            .grants(record)
            .map_err(|e| PeerFailure::Unavailable(e.to_string()))?;
        grants.limits.deadline = grants.limits.deadline.min(hop.remaining());
        if grants.limits.deadline.is_zero() {
            return Err(PeerFailure::DeadlineExceeded(
                "the caller's deadline has already passed".into(),
            ));
        }
        let caller = Arc::new(ChainCaller { depth: hop.depth });
        let in_force = grants.capabilities();
        let sources = Sources::default();
        let outcome = self
            .call_record_recorded(record, tool, arguments, grants, Some(caller), &sources)
            .await;
        Ok(Ran {
            output: NodeCallError::answer(outcome)?,
            grants: in_force,
            used: sources.used(),
        })
    }

    /// Runs `tool` of `record` again with nothing granted, as a node
    /// checking another's replayable call does: the result, and the sources
    /// the call read (none, if the call is what the other node said).
    pub async fn replay(
        &self,
        record: &AgentRecord,
        tool: &str,
        arguments: &str,
        deadline: std::time::Duration,
    ) -> Result<Ran, NodeCallError> {
        let limits = Limits {
            deadline: deadline.min(self.grants(record)?.limits.deadline),
            ..Limits::default()
        };
        let sources = Sources::default();
        let output = self
            .call_record_recorded(
                record,
                tool,
                arguments,
                Grants::pure(limits),
                None,
                &sources,
            )
            .await?;
        Ok(Ran {
            output,
            grants: Vec::new(),
            used: sources.used(),
        })
    }

    /// Calls `tool` of an already resolved agent under `grants` (usually
    /// [`Node::grants`], perhaps with a shorter deadline).
    pub async fn call_record(
        &self,
        record: &AgentRecord,
        tool: &str,
        arguments: &str,
        grants: Grants,
        caller: Option<Arc<dyn Caller>>,
    ) -> Result<ToolOutput, NodeCallError> {
        let sources = &Sources::default();
        self.call_record_recorded(record, tool, arguments, grants, caller, sources)
            .await
    }

    /// [`Node::call_record`], recording the sources of nondeterminism the
    /// call reads in `sources`.
    pub async fn call_record_recorded(
        &self,
        record: &AgentRecord,
        tool: &str,
        arguments: &str,
        grants: Grants,
        caller: Option<Arc<dyn Caller>>,
        sources: &Sources,
    ) -> Result<ToolOutput, NodeCallError> {
        if !record.tools.iter().any(|t| t.name == tool) {
            let known: Vec<&str> = record.tools.iter().map(|t| t.name.as_str()).collect();
            return Err(NodeCallError::UnknownTool {
                agent: record.card.name.clone(),
                tool: tool.to_owned(),
                hint: crate::text::did_you_mean(tool, known.iter().copied()),
                known: known.join(", "),
            });
        }
        let started = std::time::Instant::now();
        let outcome = async {
            let object = parse_arguments(arguments)?;
            if record.is_attached() {
                // Its answer comes from a program outside the sandbox.
                sources.record(Used::OUTSIDE);
                let limits = &grants.limits;
                return Ok(self.bridge.call(record, tool, object, limits).await?);
            }
            let agent = self.load(record)?;
            let call = ToolCall {
                tool,
                arguments,
                grants,
                caller,
                sources: sources.clone(),
            };
            Ok::<_, NodeCallError>(self.runtime()?.call(&agent, call).await?)
        }
        .await;
        let audited = match &outcome {
            Ok(output) if output.is_error => Outcome::ToolError,
            Ok(_) => Outcome::Ok,
            Err(NodeCallError::Call(failure)) => Outcome::Failed(failure.audited()),
            Err(_) => Outcome::Rejected,
        };
        self.audit
            .call(&record.card.name, tool, started.elapsed(), audited);
        outcome
    }

    /// The resources and resource templates the agent of `record` offers
    /// now, under `grants` (from [`Node::grants`]). A listing has the
    /// shorter of the call deadline and the listing deadline.
    pub async fn resources(
        &self,
        record: &AgentRecord,
        grants: Grants,
    ) -> Result<ResourceCatalog, NodeCallError> {
        // The node passes on an attached server's tools only.
        if record.is_attached() {
            return Ok(ResourceCatalog::default());
        }
        let agent = self.load(record)?;
        let grants = for_listing(grants);
        Ok(self.runtime()?.resources(&agent, &grants).await?)
    }

    /// How far the agent of `record` has been called (see
    /// [`LoadedAgent::activity`]): what it lists may have changed when this
    /// has.
    pub fn activity(&self, record: &AgentRecord) -> Result<u64, NodeCallError> {
        if record.is_attached() {
            return Ok(0);
        }
        Ok(self.load(record)?.activity())
    }

    /// Reads the resource at `uri` from the agent of `record`.
    pub async fn read_resource(
        &self,
        record: &AgentRecord,
        uri: &str,
        caller: Option<Arc<dyn Caller>>,
    ) -> Result<Vec<ResourceContents>, NodeCallError> {
        if record.is_attached() {
            return Err(CallError::ResourceNotFound(uri.to_owned()).into());
        }
        let grants = self.grants(record)?;
        let agent = self.load(record)?;
        Ok(self
            .runtime()?
            .read_resource(&agent, uri, &grants, caller)
            .await?)
    }

    /// The prompts the agent of `record` offers now, under `grants`, within
    /// the listing deadline (as [`Node::resources`]).
    pub async fn prompts(
        &self,
        record: &AgentRecord,
        grants: Grants,
    ) -> Result<Vec<PromptSpec>, NodeCallError> {
        if record.is_attached() {
            return Ok(Vec::new());
        }
        let agent = self.load(record)?;
        let grants = for_listing(grants);
        Ok(self.runtime()?.prompts(&agent, &grants).await?)
    }

    /// Fills in the prompt `name` of the agent of `record`.
    pub async fn get_prompt(
        &self,
        record: &AgentRecord,
        name: &str,
        arguments: &[(String, String)],
        caller: Option<Arc<dyn Caller>>,
    ) -> Result<PromptOutput, NodeCallError> {
        if record.is_attached() {
            return Err(CallError::UnknownPrompt {
                agent: record.card.name.clone(),
                prompt: name.to_owned(),
            }
            .into());
        }
        let grants = self.grants(record)?;
        let agent = self.load(record)?;
        Ok(self
            .runtime()?
            .get_prompt(&agent, name, arguments, &grants, caller)
            .await?)
    }

    /// Uninstalls the agent meant by `query`, with its tables in the policy
    /// file (its build's, and its name's unless another build of it stays
    /// installed); with `purge`, deletes its key-value data too.
    pub fn remove(&self, query: &str, purge: bool) -> Result<Removed, NodeCallError> {
        let record = self.resolve(query)?;
        self.uninstall(&record)?;
        let key = record.key();
        let stays = self.list()?.iter().any(|other| other.key() == key);
        let mut keys = vec![AgentKey::Id(record.id)];
        if !stays && key != keys[0] {
            keys.push(key.clone());
        }
        let grants = crate::policy::edit::forget(&self.policy, &keys)
            .map_err(|e| NodeCallError::Policy(format!("{e:#}")))?;
        if purge && !stays && !record.is_attached() {
            let kv = self.runtime()?.kv();
            for store in [key, AgentKey::Id(record.id)] {
                kv.close(&store);
                crate::store::remove_file(&kv.path(&store))?;
            }
        }
        Ok(Removed { record, grants })
    }

    /// Takes `record` out of the catalog and its files off the disk (its
    /// grants and key-value data stay).
    fn uninstall(&self, record: &AgentRecord) -> Result<(), NodeCallError> {
        // The record goes first: from then on the agent is not installed,
        // whatever happens to the files after it.
        self.catalog.remove(&record.id)?;
        if record.is_attached() {
            self.bridge.detach(&record.id);
            return Ok(());
        }
        self.loaded_agents().remove(&record.id);
        self.compiled.remove(&record.id)?;
        self.blobs.remove(&record.id)?;
        Ok(())
    }

    /// Adds the component `bytes` from `origin` (named `name` if it is
    /// one of plain functions) as [`Node::add_named`] does; an agent the
    /// operator installed under the same name is replaced unless
    /// `same_name` says to keep both. The new build keeps the old one's
    /// grants and key-value data, which follow the name
    /// ([`AgentRecord::key`]).
    pub async fn install(
        &self,
        bytes: &[u8],
        origin: Origin,
        name: Option<&str>,
        same_name: SameName,
    ) -> Result<Installed, AddError> {
        let record = self.add_named(bytes, origin, name).await?;
        let key = record.key();
        if same_name == SameName::KeepBoth || key == AgentKey::Id(record.id) {
            return Ok(Installed {
                record,
                replaced: Vec::new(),
            });
        }
        let older: Vec<AgentRecord> = self
            .list()?
            .into_iter()
            .filter(|other| other.id != record.id && other.key() == key)
            .collect();
        for old in &older {
            if let Ok(runtime) = self.runtime() {
                runtime
                    .kv()
                    .adopt(&key, &old.id)
                    .map_err(|e| AddError::Replace(e.to_string()))?;
            }
            crate::policy::edit::follow_name(&self.policy, old.id, &record.card.name)
                .map_err(|e| AddError::Replace(format!("{e:#}")))?;
            self.uninstall(old)
                .map_err(|e| AddError::Replace(e.to_string()))?;
            tracing::info!(agent = %record.card.name, old = %old.id, new = %record.id, "replaced");
        }
        Ok(Installed {
            record,
            replaced: older,
        })
    }
}

/// `grants` for a listing: the call's deadline, cut to the listing deadline.
fn for_listing(mut grants: Grants) -> Grants {
    let limits = &mut grants.limits;
    limits.deadline = limits.deadline.min(limits.listing_deadline);
    grants
}

/// Arguments must be one JSON object; anything else is refused before any
/// WebAssembly runs or any attached server is asked. The object is what an
/// attached server is sent.
fn parse_arguments(
    arguments: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, CallError> {
    let value: serde_json::Value = serde_json::from_str(arguments)
        .map_err(|e| CallError::InvalidArguments(format!("arguments are not valid JSON: {e}")))?;
    match value {
        serde_json::Value::Object(object) => Ok(object),
        _ => Err(CallError::InvalidArguments(
            "arguments must be a JSON object, such as {\"a\": 1}".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_failed_call_is_a_result_and_a_call_that_could_not_run_is_refused() {
        let deadline = CallError::DeadlineExceeded(Duration::from_secs(1));
        let answer = NodeCallError::answer(Err(deadline.into())).unwrap();
        assert!(answer.is_error);
        assert_eq!(answer.text(), "deadline exceeded after 1s");
        let failed = CallError::Failed("division by zero".into());
        let answer = NodeCallError::answer(Err(failed.into())).unwrap();
        assert_eq!(
            (answer.is_error, answer.text().as_str()),
            (true, "division by zero")
        );

        let bad = CallError::InvalidArguments("missing field `a`".into());
        assert_eq!(
            NodeCallError::answer(Err(bad.into())),
            Err(PeerFailure::InvalidArguments("missing field `a`".into()))
        );
        let unknown = NodeCallError::UnknownTool {
            agent: "calculator".into(),
            tool: "cube_root".into(),
            known: "add".into(),
            hint: String::new(),
        };
        assert_eq!(
            NodeCallError::answer(Err(unknown)),
            Err(PeerFailure::UnknownTool("cube_root".into()))
        );
        let missing = ResolveError::NotFound {
            query: "nobody".into(),
            hint: String::new(),
        };
        assert!(matches!(
            NodeCallError::answer(Err(missing.into())),
            Err(PeerFailure::NotFound(_))
        ));
    }
}
