//! The wasmtime side of the host: compiles components, checks that they
//! target the agent world, and runs each call in a fresh instance under the
//! call's limits.
//!
//! A call takes the agent's cached [`InstancePre`](wasmtime::component::InstancePre)
//! (imports already resolved), makes a new `Store` holding the per-call state
//! of every capability, instantiates, calls, and drops the store. Nothing
//! survives from one call to the next except through a capability such as kv.

pub(crate) mod background;
pub mod compiler;
pub(crate) mod complexity;
mod engine;
mod error;
mod exports;
pub mod mode;
pub mod plain;
pub(crate) mod result;
mod slots;

pub use engine::{
    Capacity, EPOCH_TICK, build_engine, engine_config, engine_fingerprint, fingerprint,
};
pub use error::CallError;
pub use mode::Mode;
pub use slots::CallSlots;

use crate::AgentId;
use crate::agent::key::AgentKey;
use crate::agent::prompt::{PromptOutput, PromptSpec};
use crate::agent::resource::{ResourceCatalog, ResourceContents};
use crate::agent::tool::{AgentCard, ToolOutput, ToolSpec};
use crate::audit::Audit;
pub use crate::capabilities::CallState;
use crate::capabilities::grant::Grants;
use crate::capabilities::sources::Sources;
use crate::capabilities::{
    self, CallSetup, Services, caller::Caller, guest_log::GuestLog, host::ResourceUpdate,
    kv::KvStores, limits, peers::PeerNetwork,
};
use crate::config::Limits;
use engine::EpochTicker;
use exports::{AsyncExports, Exports};
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, broadcast};
use wasmtime::component::{
    Component, ComponentExportIndex, ComponentNamedList, Instance, InstancePre, Lift, Linker, Lower,
};
use wasmtime::{Engine, Store, Trap, UpdateDeadline};

/// An agent ready to be called: its compiled component with imports resolved,
/// and the slots that bound its concurrent calls.
pub struct LoadedAgent {
    id: AgentId,
    name: Arc<str>,
    /// Whose stored data its calls use: its own id's unless
    /// [`LoadedAgent::keeping_data_under`] says otherwise.
    store: AgentKey,
    pre: InstancePre<CallState>,
    mode: Mode,
    kind: Kind,
    slots: CallSlots,
    /// Bumped when a call that may change what the agent lists (a tool
    /// call, a resource read, a prompt) starts and when it ends.
    activity: std::sync::atomic::AtomicU64,
}

/// What an agent exports: the agent world, the async agent world, or
/// plain functions.
enum Kind {
    World(Exports),
    AsyncWorld(AsyncExports),
    Plain(plain::Functions),
}

impl LoadedAgent {
    pub fn id(&self) -> &AgentId {
        &self.id
    }

    /// The agent with its calls' stored data kept under `store` (its
    /// name, for an agent the operator installed).
    pub fn keeping_data_under(self, store: AgentKey) -> Self {
        LoadedAgent { store, ..self }
    }

    /// Whether the agent is a component of plain functions, which carries
    /// no card of its own.
    pub fn is_plain(&self) -> bool {
        matches!(self.kind, Kind::Plain(_))
    }

    /// How the agent's calls are made (WASI 0.2 or 0.3).
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// How many calls hold one of the agent's slots now.
    pub fn calls_running(&self) -> usize {
        self.slots.taken()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A count that changes whenever a call that may change the agent's
    /// state starts or ends: a listing made at one count still holds while
    /// the count is the same (see `mcp::listing`).
    pub fn activity(&self) -> u64 {
        self.activity.load(std::sync::atomic::Ordering::Acquire)
    }

    fn touch(&self) {
        self.activity
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Marks a call of an agent as running: [`LoadedAgent::activity`] moves
/// when it starts and again when it ends, however it ends.
struct Touch<'a>(&'a LoadedAgent);

impl<'a> Touch<'a> {
    fn start(agent: &'a LoadedAgent) -> Self {
        agent.touch();
        Touch(agent)
    }
}

impl Drop for Touch<'_> {
    fn drop(&mut self) {
        self.0.touch();
    }
}

/// One tool call to run.
pub struct ToolCall<'a> {
    pub tool: &'a str,
    /// The arguments, a JSON object as text.
    pub arguments: &'a str,
    /// What the call may reach, and its limits.
    pub grants: Grants,
    /// The client the call serves, if any: where progress, log messages,
    /// sampling and elicitation requests go.
    pub caller: Option<Arc<dyn Caller>>,
    /// Where the call records the sources of nondeterminism it reads:
    /// whether its result is replayable.
    pub sources: Sources,
}

/// The wasmtime engines of a node, one per [`Mode`], with what the
/// capabilities of every call share.
pub struct Runtime {
    synchronous: Engines,
    /// Made when the first WASI 0.3 component is compiled or loaded: its
    /// pool reserves address space a node of WASI 0.2 agents never uses.
    concurrent: OnceLock<Result<Engines, String>>,
    capacity: Capacity,
    services: Services,
}

/// One engine with its linker and deadline clock.
struct Engines {
    engine: Engine,
    linker: Linker<CallState>,
    pooling: bool,
    _ticker: EpochTicker,
}

impl Engines {
    fn new(capacity: Capacity, mode: Mode) -> anyhow::Result<Engines> {
        let (engine, pooling) = build_engine(capacity, mode)?;
        let mut linker = Linker::new(&engine);
        capabilities::add_to_linker(&mut linker, mode)
            .map_err(|e| anyhow::anyhow!("cannot link host capabilities: {e:#}"))?;
        let ticker = EpochTicker::start(&engine)?;
        Ok(Engines {
            engine,
            linker,
            pooling,
            _ticker: ticker,
        })
    }
}

/// Why a component cannot be an agent.
#[derive(Debug, thiserror::Error)]
pub enum ComponentError {
    #[error("not a WebAssembly file (it does not start with the \\0asm magic number)")]
    NotWasm,
    #[error(
        "a core WebAssembly module, not a component: build the agent for the wasm32-wasip2 target"
    )]
    CoreModule,
    #[error("not a valid component: {0}")]
    Invalid(String),
    #[error("does not fit the agentsite agent world: {0}")]
    WrongWorld(String),
    #[error("refused before compiling: {0}")]
    TooComplex(complexity::TooComplex),
    #[error(
        "compiling took longer than {}, the node's limit (limits.compile_deadline); the compiler was stopped",
        humantime::format_duration(*.0)
    )]
    CompileDeadline(std::time::Duration),
    #[error("cannot compile: {0}")]
    Compiler(String),
}

/// A compiled component and its serialized code, for the compiled cache.
pub struct Compiled {
    pub component: Component,
    pub artifact: Vec<u8>,
    /// The engine it was compiled for.
    pub mode: Mode,
}

impl Runtime {
    /// A runtime whose agents keep their kv databases in `kv_dir`, sized to
    /// hold `capacity` instances at once, reporting denials to `audit`.
    pub fn new(
        kv_dir: std::path::PathBuf,
        capacity: Capacity,
        audit: Arc<Audit>,
    ) -> anyhow::Result<Self> {
        Ok(Runtime {
            synchronous: Engines::new(capacity, Mode::Synchronous)?,
            concurrent: OnceLock::new(),
            capacity,
            services: Services::new(kv_dir, audit),
        })
    }

    /// The engine of WASI 0.2 components.
    pub fn engine(&self) -> &Engine {
        &self.synchronous.engine
    }

    /// Whether instances come from the pooling allocator.
    pub fn pooling(&self) -> bool {
        self.synchronous.pooling
    }

    /// The engine and linker of components of `mode`.
    fn engines(&self, mode: Mode) -> Result<&Engines, ComponentError> {
        match mode {
            Mode::Synchronous => Ok(&self.synchronous),
            Mode::Concurrent => self
                .concurrent
                .get_or_init(|| {
                    Engines::new(self.capacity, Mode::Concurrent).map_err(|e| format!("{e:#}"))
                })
                .as_ref()
                .map_err(|e| ComponentError::Compiler(format!("no engine for WASI 0.3: {e}"))),
        }
    }

    /// Announcements of agents whose resources changed (`host.resource-updated`).
    pub fn resource_updates(&self) -> broadcast::Receiver<ResourceUpdate> {
        self.services.resource_updates()
    }

    /// Gives agents the network (the `peers` import). Set once, when the
    /// node joins a network; returns false if one was already set.
    pub fn set_peers(&self, network: Arc<dyn PeerNetwork>) -> bool {
        self.services.set_peers(network)
    }

    /// Gives agents the node's language models (the `llm` import); returns
    /// false if they were already set.
    pub fn set_models(&self, models: Arc<crate::llm::models::Models>) -> bool {
        self.services.set_models(models)
    }

    /// The key-value databases of this node's agents.
    pub fn kv(&self) -> &Arc<KvStores> {
        self.services.kv()
    }

    /// Compiles component bytes within `deadline` (see [`compiler`]),
    /// refusing anything that is not a component.
    pub fn compile(
        &self,
        bytes: &[u8],
        deadline: std::time::Duration,
    ) -> Result<Compiled, ComponentError> {
        if !bytes.starts_with(b"\0asm") {
            return Err(ComponentError::NotWasm);
        }
        if wasmparser::Parser::is_core_wasm(bytes) {
            return Err(ComponentError::CoreModule);
        }
        if !wasmparser::Parser::is_component(bytes) {
            return Err(ComponentError::Invalid(
                "unknown WebAssembly version or layer".into(),
            ));
        }
        complexity::check(bytes).map_err(|e| match e {
            complexity::TooComplex::Invalid(reason) => ComponentError::Invalid(reason),
            too_complex => ComponentError::TooComplex(too_complex),
        })?;
        let mode = Mode::of(bytes);
        let engine = &self.engines(mode)?.engine;
        let artifact = compiler::precompile(engine, mode, bytes, deadline)?;
        // SAFETY: the artifact was just made from `bytes` by this build's
        // compiler with this engine's settings (in this process or in a
        // worker running this executable); wasmtime checks that the
        // settings match before using it.
        let component = unsafe { Component::deserialize(engine, &artifact) }
            .map_err(|e| ComponentError::Compiler(one_line(&e)))?;
        Ok(Compiled {
            component,
            artifact,
            mode,
        })
    }

    /// Loads a component precompiled by the engine of `mode` from `path`.
    ///
    /// # Safety
    ///
    /// The file must have been produced by [`Component::serialize`] on an
    /// engine with the same fingerprint and not modified since; the store
    /// checks its digest before calling this.
    pub unsafe fn load_precompiled(
        &self,
        path: &std::path::Path,
        mode: Mode,
    ) -> anyhow::Result<Component> {
        let engine = &self.engines(mode)?.engine;
        // SAFETY: upheld by the caller, as documented above.
        unsafe { Component::deserialize_file(engine, path) }.map_err(|e| anyhow::anyhow!("{e:#}"))
    }

    /// Checks that `component` fits the agent world (every import is one the
    /// host provides, the four interfaces are exported with the right
    /// types), or else exports plain functions (see [`plain`]), and
    /// prepares it for calls.
    pub fn prepare(
        &self,
        id: AgentId,
        name: &str,
        component: &Component,
        limits: &Limits,
    ) -> Result<LoadedAgent, ComponentError> {
        let mode = self.mode_of(component);
        let pre = self
            .engines(mode)?
            .linker
            .instantiate_pre(component)
            .map_err(|e| ComponentError::WrongWorld(one_line(&e)))?;
        let world = Exports::new(&pre);
        // The async world's exports are looked for only where they can be:
        // in a component of the concurrent engine without the agent world.
        let async_world = match mode {
            Mode::Concurrent if world.is_err() => AsyncExports::new(component).ok(),
            _ => None,
        };
        let kind = match (world, async_world) {
            (Ok(exports), _) => Kind::World(exports),
            (Err(_), Some(exports)) => Kind::AsyncWorld(exports),
            (Err(e), None) => {
                let engine = component.engine();
                let exports_world = component
                    .component_type()
                    .exports(engine)
                    .any(|(name, _)| name.starts_with("agentsite:agent/"));
                let functions = plain::Functions::of(component, engine);
                if exports_world || functions.callable.is_empty() {
                    let skipped = match functions.skipped.as_slice() {
                        [] => String::new(),
                        skipped => {
                            format!("; none of its functions can be: {}", skipped.join(", "))
                        }
                    };
                    return Err(ComponentError::WrongWorld(format!(
                        "an agent must export agentsite:agent/card, tools, resources and prompts \
                         (or, built for WASI 0.3, their async-* forms) ({}), \
                         or plain functions to serve as tools{skipped}",
                        one_line(&e)
                    )));
                }
                Kind::Plain(functions)
            }
        };
        let slots = limits.max_concurrent_calls;
        Ok(LoadedAgent {
            id,
            name: name.into(),
            store: AgentKey::Id(id),
            pre,
            mode,
            kind,
            slots: CallSlots::new(slots),
            activity: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The mode of the engine `component` was compiled by.
    fn mode_of(&self, component: &Component) -> Mode {
        if Engine::same(component.engine(), &self.synchronous.engine) {
            Mode::Synchronous
        } else {
            Mode::Concurrent
        }
    }

    /// The names of the interfaces `component` imports.
    pub fn imports(&self, component: &Component) -> Vec<String> {
        let mut names: Vec<String> = component
            .component_type()
            .imports(component.engine())
            .map(|(name, _)| name.to_owned())
            .collect();
        names.sort();
        names
    }

    /// Asks a freshly prepared agent for its card and tools, validating both.
    /// A component of plain functions has no card: it is named `name` and
    /// described by its functions.
    pub async fn describe(
        &self,
        agent: &LoadedAgent,
        limits: &Limits,
    ) -> Result<(AgentCard, Vec<ToolSpec>), CallError> {
        let deadline = Instant::now() + limits.deadline;
        let sources = &Sources::default();
        let start = || self.start(agent, &Grants::pure(*limits), None, sources, deadline);
        let (card, tools, apps) = match &agent.kind {
            Kind::World(exports) => {
                start()?
                    .run(
                        &agent.pre,
                        |store, instance| {
                            let card = exports.card.load(&mut *store, instance)?;
                            let tools = exports.tools.load(&mut *store, instance)?;
                            let apps = match &exports.apps {
                                Some(apps) => Some(apps.load(store, instance)?),
                                None => None,
                            };
                            Ok((card, tools, apps))
                        },
                        async |(card, tools, apps), store| {
                            let card = card.call_describe(&mut *store).await?;
                            let tools = tools.call_list_tools(&mut *store).await?;
                            let apps = match apps {
                                Some(apps) => apps.call_tool_apps(store).await?,
                                None => Vec::new(),
                            };
                            Ok((card, tools, apps))
                        },
                    )
                    .await?
            }
            Kind::AsyncWorld(exports) => {
                start()?
                    .run(
                        &agent.pre,
                        |_, instance| Ok(*instance),
                        async |instance, store| {
                            // Every other export's types are checked here too,
                            // so that a component whose resources or prompts do
                            // not fit is refused when it is added.
                            exports.check_types(store, instance)?;
                            let (card,) =
                                call_concurrent(store, instance, &exports.describe, ()).await?;
                            let (tools,) =
                                call_concurrent(store, instance, &exports.list_tools, ()).await?;
                            Ok((card, tools, Vec::new()))
                        },
                    )
                    .await?
            }
            Kind::Plain(functions) => {
                let card = functions.card(agent.name.to_string(), None);
                let tools = functions.callable.iter().map(|f| f.spec.clone()).collect();
                return Ok((card, tools));
            }
        };
        result::describe(card, tools, apps)
    }

    /// Runs one tool call in a fresh instance of `agent`.
    pub async fn call(
        &self,
        agent: &LoadedAgent,
        request: ToolCall<'_>,
    ) -> Result<ToolOutput, CallError> {
        let _running = Touch::start(agent);
        let (tool, arguments) = (request.tool, request.arguments);
        let answer = match &agent.kind {
            Kind::World(exports) => {
                self.run_recorded(
                    agent,
                    &request.grants,
                    request.caller,
                    &request.sources,
                    |store, instance| exports.tools.load(store, instance),
                    async |tools, store| tools.call_call_tool(store, tool, arguments).await,
                )
                .await?
            }
            Kind::AsyncWorld(exports) => {
                let params = (tool.to_owned(), arguments.to_owned());
                self.run_export(
                    agent,
                    &request.grants,
                    request.caller,
                    &request.sources,
                    &exports.call_tool,
                    params,
                )
                .await?
            }
            Kind::Plain(functions) => {
                return self.call_function(agent, functions, request).await;
            }
        };
        match answer {
            Ok(output) => result::tool_output(output, &request.grants.limits),
            Err(error) => Err(result::tool_error(error, &agent.name)),
        }
    }

    /// Calls the plain function `request.tool` of `agent`.
    async fn call_function(
        &self,
        agent: &LoadedAgent,
        functions: &plain::Functions,
        request: ToolCall<'_>,
    ) -> Result<ToolOutput, CallError> {
        let function = functions
            .get(request.tool)
            .ok_or_else(|| CallError::UnknownTool {
                agent: agent.name.to_string(),
                tool: crate::text::excerpt(request.tool, 256).into_owned(),
            })?;
        let params = function
            .arguments(request.arguments)
            .map_err(CallError::InvalidArguments)?;
        let results = self
            .run_recorded(
                agent,
                &request.grants,
                request.caller,
                &request.sources,
                |store, instance| {
                    instance
                        .get_func(store, function.export)
                        .ok_or_else(|| wasmtime::format_err!("the function is not exported"))
                },
                async |func, store| {
                    let mut results =
                        vec![wasmtime::component::Val::Bool(false); function.results.len()];
                    match agent.mode {
                        Mode::Synchronous => {
                            func.call_async(&mut *store, &params, &mut results).await?
                        }
                        // An async function is called through the
                        // scheduler, as every function of a WASI 0.3
                        // component is.
                        Mode::Concurrent => {
                            let func = *func;
                            store
                                .run_concurrent(async |accessor| {
                                    func.call_concurrent(accessor, &params, &mut results).await
                                })
                                .await??
                        }
                    }
                    Ok(results)
                },
            )
            .await?;
        result::function_output(results, &request.grants.limits)
    }

    /// The resources and resource templates `agent` offers now.
    pub async fn resources(
        &self,
        agent: &LoadedAgent,
        grants: &Grants,
    ) -> Result<ResourceCatalog, CallError> {
        let (resources, templates) = match &agent.kind {
            Kind::World(exports) => {
                self.run(
                    agent,
                    grants,
                    None,
                    |store, instance| exports.resources.load(store, instance),
                    async |exports, store| {
                        let resources = exports.call_list_resources(&mut *store).await?;
                        Ok((
                            resources,
                            exports.call_list_resource_templates(store).await?,
                        ))
                    },
                )
                .await?
            }
            Kind::AsyncWorld(exports) => {
                self.run(
                    agent,
                    grants,
                    None,
                    |_, instance| Ok(*instance),
                    async |instance, store| {
                        let (resources,) =
                            call_concurrent(store, instance, &exports.list_resources, ()).await?;
                        let (templates,) =
                            call_concurrent(store, instance, &exports.list_resource_templates, ())
                                .await?;
                        Ok((resources, templates))
                    },
                )
                .await?
            }
            Kind::Plain(_) => return Ok(ResourceCatalog::default()),
        };
        result::resource_catalog(resources, templates, &grants.limits)
    }

    /// Reads the resource at `uri` in a fresh instance of `agent`.
    pub async fn read_resource(
        &self,
        agent: &LoadedAgent,
        uri: &str,
        grants: &Grants,
        caller: Option<Arc<dyn Caller>>,
    ) -> Result<Vec<ResourceContents>, CallError> {
        let _running = Touch::start(agent);
        let answer = match &agent.kind {
            Kind::World(exports) => {
                self.run(
                    agent,
                    grants,
                    caller,
                    |store, instance| exports.resources.load(store, instance),
                    async |resources, store| resources.call_read_resource(store, uri).await,
                )
                .await?
            }
            Kind::AsyncWorld(exports) => {
                let params = (uri.to_owned(),);
                let sources = &Sources::default();
                self.run_export(
                    agent,
                    grants,
                    caller,
                    sources,
                    &exports.read_resource,
                    params,
                )
                .await?
            }
            Kind::Plain(_) => {
                return Err(CallError::ResourceNotFound(
                    crate::text::excerpt(uri, 256).into_owned(),
                ));
            }
        };
        match answer {
            Ok(contents) => result::resource_contents(contents, &grants.limits),
            Err(error) => Err(result::resource_error(error)),
        }
    }

    /// The prompts `agent` offers now.
    pub async fn prompts(
        &self,
        agent: &LoadedAgent,
        grants: &Grants,
    ) -> Result<Vec<PromptSpec>, CallError> {
        let prompts = match &agent.kind {
            Kind::World(exports) => {
                self.run(
                    agent,
                    grants,
                    None,
                    |store, instance| exports.prompts.load(store, instance),
                    async |prompts, store| prompts.call_list_prompts(store).await,
                )
                .await?
            }
            Kind::AsyncWorld(exports) => {
                let sources = &Sources::default();
                self.run_export(agent, grants, None, sources, &exports.list_prompts, ())
                    .await?
            }
            Kind::Plain(_) => return Ok(Vec::new()),
        };
        result::prompts(prompts, &grants.limits)
    }

    /// Fills in the prompt `name` of `agent` with `arguments`.
    pub async fn get_prompt(
        &self,
        agent: &LoadedAgent,
        name: &str,
        arguments: &[(String, String)],
        grants: &Grants,
        caller: Option<Arc<dyn Caller>>,
    ) -> Result<PromptOutput, CallError> {
        let _running = Touch::start(agent);
        let answer = match &agent.kind {
            Kind::World(exports) => {
                self.run(
                    agent,
                    grants,
                    caller,
                    |store, instance| exports.prompts.load(store, instance),
                    async |prompts, store| prompts.call_get_prompt(store, name, arguments).await,
                )
                .await?
            }
            Kind::AsyncWorld(exports) => {
                let params = (name.to_owned(), arguments.to_vec());
                let sources = &Sources::default();
                self.run_export(agent, grants, caller, sources, &exports.get_prompt, params)
                    .await?
            }
            Kind::Plain(_) => {
                return Err(CallError::UnknownPrompt {
                    agent: agent.name.to_string(),
                    prompt: crate::text::excerpt(name, 256).into_owned(),
                });
            }
        };
        match answer {
            Ok(output) => result::prompt_output(output, &grants.limits),
            Err(error) => Err(result::prompt_error(error, &agent.name)),
        }
    }

    /// Runs `work` on the exports `load` finds in a fresh instance of
    /// `agent`, in one of its call slots: what every export of the agent
    /// world goes through.
    async fn run<E, T>(
        &self,
        agent: &LoadedAgent,
        grants: &Grants,
        caller: Option<Arc<dyn Caller>>,
        load: impl FnOnce(&mut Store<CallState>, &Instance) -> wasmtime::Result<E>,
        work: impl AsyncFnOnce(&E, &mut Store<CallState>) -> wasmtime::Result<T>,
    ) -> Result<T, CallError> {
        let sources = &Sources::default();
        self.run_recorded(agent, grants, caller, sources, load, work)
            .await
    }

    /// [`Runtime::run`], recording the sources the guest reads in `sources`.
    async fn run_recorded<E, T>(
        &self,
        agent: &LoadedAgent,
        grants: &Grants,
        caller: Option<Arc<dyn Caller>>,
        sources: &Sources,
        load: impl FnOnce(&mut Store<CallState>, &Instance) -> wasmtime::Result<E>,
        work: impl AsyncFnOnce(&E, &mut Store<CallState>) -> wasmtime::Result<T>,
    ) -> Result<T, CallError> {
        let (_slot, call) = self.enter(agent, grants, caller, sources).await?;
        call.run(&agent.pre, load, work).await
    }

    /// Calls the export at `index` of a WASI 0.3 agent, which returns one
    /// value, in a fresh instance and one of its call slots.
    async fn run_export<P, R>(
        &self,
        agent: &LoadedAgent,
        grants: &Grants,
        caller: Option<Arc<dyn Caller>>,
        sources: &Sources,
        index: &ComponentExportIndex,
        params: P,
    ) -> Result<R, CallError>
    where
        P: ComponentNamedList + Lower + Send + Sync + 'static,
        (R,): ComponentNamedList + Lift + Send + Sync + 'static,
    {
        self.run_recorded(
            agent,
            grants,
            caller,
            sources,
            |_, instance| Ok(*instance),
            async |instance, store| {
                let (result,) = call_concurrent(store, instance, index, params).await?;
                Ok(result)
            },
        )
        .await
    }

    /// Takes one of the agent's call slots and starts a call. Time spent
    /// waiting for a slot counts against the call's deadline.
    async fn enter(
        &self,
        agent: &LoadedAgent,
        grants: &Grants,
        caller: Option<Arc<dyn Caller>>,
        sources: &Sources,
    ) -> Result<(OwnedSemaphorePermit, RunningCall), CallError> {
        let limits = &grants.limits;
        let deadline = Instant::now() + limits.deadline;
        let slot = agent
            .slots
            .take(limits.max_concurrent_calls, deadline.into())
            .await?;
        Ok((slot, self.start(agent, grants, caller, sources, deadline)?))
    }

    fn start(
        &self,
        agent: &LoadedAgent,
        grants: &Grants,
        caller: Option<Arc<dyn Caller>>,
        sources: &Sources,
        deadline: Instant,
    ) -> Result<RunningCall, CallError> {
        let setup = CallSetup {
            agent: agent.id,
            name: agent.name.clone(),
            store: &agent.store,
            grants,
            caller,
            deadline,
            sources: sources.clone(),
        };
        let (state, log) =
            CallState::new(&self.services, setup).map_err(|e| CallError::Host(e.to_string()))?;
        let mut store = Store::new(agent.pre.component().engine(), state);
        store.limiter(|state| &mut state.limiter);
        // Checked whenever the epoch advances; yielding in between keeps a
        // long-running guest from holding an executor thread.
        store.set_epoch_deadline(1);
        // The deadline is read from the call's state, not captured: a
        // closure that captures nothing is boxed without an allocation.
        store.epoch_deadline_callback(|store| {
            if Instant::now() >= store.data().deadline {
                Err(Trap::Interrupt.into())
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        Ok(RunningCall {
            store,
            log,
            limits: grants.limits,
            deadline,
        })
    }
}

/// A store in use by one call.
struct RunningCall {
    store: Store<CallState>,
    log: GuestLog,
    limits: Limits,
    deadline: Instant,
}

/// Grace past the deadline for the epoch check to interrupt the guest
/// itself, before the call is cut off from outside.
const DEADLINE_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

/// Runs `work` (a call's use of its store) until `deadline`. A guest
/// running code is stopped by the epoch check; a guest waiting in a host
/// call (a slow HTTP body, say) cannot be, so past the deadline the work is
/// dropped from outside, instance and all.
async fn in_time<T>(
    deadline: Instant,
    work: impl std::future::Future<Output = wasmtime::Result<T>>,
) -> wasmtime::Result<T> {
    let cutoff = deadline + DEADLINE_GRACE;
    match tokio::time::timeout_at(cutoff.into(), work).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Trap::Interrupt.into()),
    }
}

impl RunningCall {
    /// Instantiates the agent, finds the exports the call uses with `load`
    /// and runs `work` on them under the call's deadline, then ends the call.
    async fn run<E, T>(
        mut self,
        pre: &InstancePre<CallState>,
        load: impl FnOnce(&mut Store<CallState>, &Instance) -> wasmtime::Result<E>,
        work: impl AsyncFnOnce(&E, &mut Store<CallState>) -> wasmtime::Result<T>,
    ) -> Result<T, CallError> {
        let store = &mut self.store;
        // Boxed: the instantiation and call futures are kilobytes, and
        // every layer above (the deadline, the slot, the caller) would
        // otherwise copy them whole as each is made and awaited.
        let outcome = in_time(
            self.deadline,
            Box::pin(async {
                let instance = pre.instantiate_async(&mut *store).await?;
                let exports = load(&mut *store, &instance)?;
                work(&exports, store).await
            }),
        )
        .await;
        self.finish(outcome)
    }

    /// Ends the call: flushes the guest's output and turns a trap into the
    /// limit or fault that caused it.
    fn finish<T>(self, outcome: wasmtime::Result<T>) -> Result<T, CallError> {
        self.log.finish();
        let error = match outcome {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        let limiter = &self.store.data().limiter;
        if limiter.memory_exceeded {
            return Err(CallError::MemoryExceeded(self.limits.memory));
        }
        if limiter.tables_exceeded {
            return Err(CallError::HostLimit(format!(
                "table elements (at most {} per table, {} per call)",
                limits::MAX_TABLE_ELEMENTS,
                limits::MAX_TABLE_ELEMENTS_PER_CALL
            )));
        }
        if let Some(limit) = host_limit(&error) {
            return Err(CallError::HostLimit(limit));
        }
        // `exit` ends the guest with its status as the error; the status is
        // what a person wants, not the trap and backtrace around it.
        if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
            return Err(CallError::Exited(exit.0));
        }
        let error = match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => CallError::DeadlineExceeded(self.limits.deadline),
            Some(Trap::StackOverflow) => CallError::StackOverflow,
            Some(trap) => {
                let reason = match self.log.last_words() {
                    Some(words) => format!("{trap} (its last words on stderr: {words})"),
                    None => trap.to_string(),
                };
                CallError::Trapped(reason)
            }
            None => CallError::Trapped(one_line(&error)),
        };
        Err(error)
    }
}

/// The host-side limit behind `error`, if one stopped the call: the
/// handle table full, or HTTP header fields over their size.
fn host_limit(error: &wasmtime::Error) -> Option<String> {
    error.chain().find_map(|cause| {
        if let Some(wasmtime::component::ResourceTableError::Full) = cause.downcast_ref() {
            return Some(format!(
                "more than {} handles open at once (streams, pollables, HTTP fields and bodies, files)",
                limits::MAX_HANDLES
            ));
        }
        match cause.downcast_ref::<wasmtime_wasi_http::FieldMapError>() {
            Some(
                wasmtime_wasi_http::FieldMapError::TotalSizeTooBig
                | wasmtime_wasi_http::FieldMapError::TooManyFields,
            ) => Some(format!(
                "HTTP header fields over {} per set",
                bytesize::ByteSize(limits::MAX_FIELDS_BYTES as u64)
            )),
            _ => None,
        }
    })
}

/// Calls the export at `index` of `instance` through the component model's
/// scheduler: how every function of a WASI 0.3 component is called (an
/// async function can only be called so). The call's deadline still holds:
/// the whole run is inside the call's [`in_time`].
async fn call_concurrent<P, R>(
    store: &mut Store<CallState>,
    instance: &Instance,
    index: &ComponentExportIndex,
    params: P,
) -> wasmtime::Result<R>
where
    P: ComponentNamedList + Lower + Send + Sync + 'static,
    R: ComponentNamedList + Lift + Send + Sync + 'static,
{
    let func = instance.get_typed_func::<P, R>(&mut *store, index)?;
    store
        .run_concurrent(async move |accessor| func.call_concurrent(accessor, params).await)
        .await?
}

/// An error chain on one line.
pub(crate) fn one_line(error: &wasmtime::Error) -> String {
    format!("{error:#}").replace('\n', " ")
}
