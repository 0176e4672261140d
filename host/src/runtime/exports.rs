//! Where each interface the agent world (or the async agent world) exports
//! sits in an instance of one agent, found once when the agent is prepared.
//!
//! bindgen's `AgentCorePre::instantiate_async` looks up and type-checks the
//! functions of all four interfaces after every instantiation, but a call
//! uses one of them (a tool call only `tools`). Keeping the indices per
//! interface lets a call load just the one it uses.

use crate::capabilities::CallState;
use crate::capabilities::bindings::exports::agentsite::agent::{
    apps, card, prompts, resources, tools,
};
use wasmtime::Store;
use wasmtime::component::{Component, ComponentExportIndex, Instance, InstancePre};

pub(super) struct Exports {
    pub card: card::GuestIndices,
    pub tools: tools::GuestIndices,
    pub resources: resources::GuestIndices,
    pub prompts: prompts::GuestIndices,
    /// The views of tools (contract 0.1.3), when the agent exports them.
    pub apps: Option<apps::GuestIndices>,
}

impl Exports {
    /// Finds the four interfaces in `pre`'s component; fails when one is
    /// missing or has other types than the world's.
    pub fn new(pre: &InstancePre<CallState>) -> wasmtime::Result<Exports> {
        Ok(Exports {
            card: card::GuestIndices::new(pre)?,
            tools: tools::GuestIndices::new(pre)?,
            resources: resources::GuestIndices::new(pre)?,
            prompts: prompts::GuestIndices::new(pre)?,
            apps: apps::GuestIndices::new(pre).ok(),
        })
    }
}

/// The functions of the `async-agent` world's exports (`async-card`,
/// `async-tools`, `async-resources`, `async-prompts`), found by name; their
/// types are checked when the agent is described, at `add`
/// ([`AsyncExports::check_types`]). Their records are the `agent` world's,
/// field for field, so the calls lift into the same Rust types.
pub(super) struct AsyncExports {
    pub describe: ComponentExportIndex,
    pub list_tools: ComponentExportIndex,
    pub call_tool: ComponentExportIndex,
    pub list_resources: ComponentExportIndex,
    pub list_resource_templates: ComponentExportIndex,
    pub read_resource: ComponentExportIndex,
    pub list_prompts: ComponentExportIndex,
    pub get_prompt: ComponentExportIndex,
}

/// The contract's version whose async interfaces the node calls.
const ASYNC_VERSION: &str = "0.1.2";

impl AsyncExports {
    /// Finds the four async interfaces' functions in `component`; fails
    /// naming the first one missing.
    pub fn new(component: &Component) -> wasmtime::Result<AsyncExports> {
        let function = |interface: &str, name: &str| {
            let interface = format!("agentsite:agent/{interface}@{ASYNC_VERSION}");
            let instance = component
                .get_export_index(None, &interface)
                .ok_or_else(|| wasmtime::format_err!("no exported instance named `{interface}`"))?;
            component
                .get_export_index(Some(&instance), name)
                .ok_or_else(|| wasmtime::format_err!("`{interface}` exports no `{name}`"))
        };
        Ok(AsyncExports {
            describe: function("async-card", "describe")?,
            list_tools: function("async-tools", "list-tools")?,
            call_tool: function("async-tools", "call-tool")?,
            list_resources: function("async-resources", "list-resources")?,
            list_resource_templates: function("async-resources", "list-resource-templates")?,
            read_resource: function("async-resources", "read-resource")?,
            list_prompts: function("async-prompts", "list-prompts")?,
            get_prompt: function("async-prompts", "get-prompt")?,
        })
    }

    /// Checks that every function has the type the contract gives it (the
    /// typed lookups of the calls would otherwise find out one by one).
    pub fn check_types(
        &self,
        store: &mut Store<CallState>,
        instance: &Instance,
    ) -> wasmtime::Result<()> {
        use crate::capabilities::bindings::exports::agentsite::agent::{
            prompts as p, resources as r,
        };
        use crate::capabilities::bindings::types as t;
        instance.get_typed_func::<(), (t::AgentCard,)>(&mut *store, &self.describe)?;
        instance.get_typed_func::<(), (Vec<t::Tool>,)>(&mut *store, &self.list_tools)?;
        instance.get_typed_func::<(String, String), (Result<t::ToolResult, t::ToolError>,)>(
            &mut *store,
            &self.call_tool,
        )?;
        instance.get_typed_func::<(), (Vec<r::Resource>,)>(&mut *store, &self.list_resources)?;
        instance.get_typed_func::<(), (Vec<r::ResourceTemplate>,)>(
            &mut *store,
            &self.list_resource_templates,
        )?;
        instance
            .get_typed_func::<(String,), (Result<Vec<r::ResourceContents>, r::ResourceError>,)>(
                &mut *store,
                &self.read_resource,
            )?;
        instance.get_typed_func::<(), (Vec<p::Prompt>,)>(&mut *store, &self.list_prompts)?;
        instance
            .get_typed_func::<(String, Vec<(String, String)>), (Result<p::PromptResult, p::PromptError>,)>(
                &mut *store,
                &self.get_prompt,
            )?;
        Ok(())
    }
}
