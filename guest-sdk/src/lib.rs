//! Write agentsite agents as plain Rust functions.
//!
//! An agent is a WebAssembly component that exports a card and MCP-style
//! tools (see `wit/agent.wit`). With this crate an author writes ordinary
//! functions with doc comments; the [`agent`] attribute turns an `impl` block
//! into a complete agent: it derives each tool's JSON Schema from the argument
//! types, validates and deserializes arguments, and maps return values and
//! errors to MCP results.
//!
//! ```ignore
//! use agentsite_sdk::agent;
//!
//! struct Calculator;
//!
//! /// Arithmetic on floating-point numbers.
//! #[agent(tags = ["math"])]
//! impl Calculator {
//!     /// Add two numbers.
//!     #[tool(read_only, idempotent)]
//!     fn add(a: f64, b: f64) -> f64 {
//!         a + b
//!     }
//! }
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` from a crate
//! with `crate-type = ["cdylib"]`.
//!
//! # Return values
//!
//! * `String` and `&str` become a text result.
//! * [`Content`], `Vec<Content>` and [`ToolResult`] are passed through.
//! * `()` becomes an empty result.
//! * Anything else that implements `Serialize` and `JsonSchema` becomes
//!   structured content with an output schema (and its JSON as text, for
//!   clients that only read text). Values that are not JSON objects are
//!   wrapped as `{"result": value}`, because MCP structured content is an object.
//!   A struct of your own gets both from the [`data`] attribute, with no
//!   `serde` or `schemars` dependency to add:
//!
//! ```ignore
//! #[agentsite_sdk::data]
//! struct Conversion {
//!     /// The converted amount.
//!     value: f64,
//!     unit: String,
//! }
//! ```
//! * `Result<T, E>` returns `T` as above, or a tool error: `E` may be
//!   [`ToolError`] itself or anything that implements `Display`.

pub use agentsite_sdk_macros::{agent, data};

/// Bindings generated from the WIT contract. Most agents never need them
/// directly; the re-exports below cover the common cases.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        // A link to the contract at the top of the repository, so that the
        // packaged crate carries the contract it was built against.
        path: "wit",
        world: "apps-agent-core",
        pub_export_macro: true,
        export_macro_name: "__export_agent",
        default_bindings_module: "::agentsite_sdk::bindings",
    });
}

/// Bindings of the `async-agent-core` world, for agents whose tools are
/// `async fn` (agents built on WASI 0.3, with the `wasip3` crate). The
/// imports and their types are those of [`bindings`]; the exports are the
/// `async-*` interfaces, whose records the SDK fills from the author's
/// [`Resources`] and [`Prompts`] (see `asynchronous`).
#[doc(hidden)]
pub mod async_bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "async-agent-core",
        pub_export_macro: true,
        export_macro_name: "__export_async_agent",
        default_bindings_module: "::agentsite_sdk::async_bindings",
        with: {
            "agentsite:agent/types@0.1.3": crate::bindings::agentsite::agent::types,
            "agentsite:agent/host@0.1.3": crate::bindings::agentsite::agent::host,
            "agentsite:agent/kv@0.1.3": crate::bindings::agentsite::agent::kv,
            "agentsite:agent/peers@0.1.3": crate::bindings::agentsite::agent::peers,
            "agentsite:agent/llm@0.1.3": crate::bindings::agentsite::agent::llm,
            "agentsite:agent/chat@0.1.3": crate::bindings::agentsite::agent::chat,
            "agentsite:agent/user@0.1.3": crate::bindings::agentsite::agent::user,
            "agentsite:agent/resource-types@0.1.3": generate,
            "agentsite:agent/prompt-types@0.1.3": generate,
        },
    });
}

mod asynchronous;
mod finite;
mod standard_schema;

pub use bindings::agentsite::agent::types::{
    AgentCard, Content, EmbeddedResource, Media, ResourceBody, Tool, ToolAnnotations, ToolError,
    ToolResult,
};

pub use bindings::exports::agentsite::agent::prompts::{
    Prompt, PromptArgument, PromptError, PromptMessage, PromptResult, PromptRole,
};
pub use bindings::exports::agentsite::agent::resources::{
    Resource, ResourceContents, ResourceError, ResourceTemplate,
};

/// Data an agent offers for reading (MCP resources). Implement it on the
/// agent type and write `#[agent(resources)]`.
///
/// ```ignore
/// impl agentsite_sdk::Resources for Notes {
///     fn templates() -> Vec<ResourceTemplate> {
///         vec![ResourceTemplate::new("notes://{title}", "note")]
///     }
///     fn read(uri: &str) -> Result<Vec<ResourceContents>, ResourceError> {
///         let title = uri.strip_prefix("notes://").ok_or_else(|| ResourceError::NotFound(uri.into()))?;
///         Ok(vec![ResourceContents::text(uri, "text/markdown", load(title)?)])
///     }
/// }
/// ```
pub trait Resources {
    /// The resources with fixed URIs.
    fn list() -> Vec<Resource> {
        Vec::new()
    }

    /// The URI templates the agent can read.
    fn templates() -> Vec<ResourceTemplate> {
        Vec::new()
    }

    /// Reads the resource at `uri`.
    fn read(uri: &str) -> Result<Vec<ResourceContents>, ResourceError>;
}

/// Prompt templates an agent offers (MCP prompts). Implement it on the agent
/// type and write `#[agent(prompts)]`.
pub trait Prompts {
    /// Every prompt the agent offers.
    fn list() -> Vec<Prompt>;

    /// Fills in the prompt `name`.
    fn get(name: &str, arguments: &PromptArguments) -> Result<PromptResult, PromptError>;
}

/// The arguments a client passed to a prompt.
#[derive(Debug, Clone, Default)]
pub struct PromptArguments(Vec<(String, String)>);

impl PromptArguments {
    pub fn new(arguments: Vec<(String, String)>) -> Self {
        PromptArguments(arguments)
    }

    /// The value of `name`, if passed.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The value of `name`, or an `invalid-arguments` error naming it.
    pub fn required(&self, name: &str) -> Result<&str, PromptError> {
        self.get(name).ok_or_else(|| {
            PromptError::InvalidArguments(format!("missing required argument {name:?}"))
        })
    }
}

impl Resource {
    /// A resource at `uri` called `name`; fill in the rest with struct update syntax.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Resource {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
        }
    }
}

impl ResourceTemplate {
    /// Resources whose URIs follow `uri_template`, called `name`.
    pub fn new(uri_template: impl Into<String>, name: impl Into<String>) -> Self {
        ResourceTemplate {
            uri_template: uri_template.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
        }
    }
}

impl ResourceContents {
    /// Text contents of `uri`.
    pub fn text(uri: impl Into<String>, mime_type: &str, text: impl Into<String>) -> Self {
        ResourceContents {
            uri: uri.into(),
            mime_type: Some(mime_type.to_owned()),
            body: ResourceBody::Text(text.into()),
        }
    }

    /// Binary contents of `uri`.
    pub fn blob(uri: impl Into<String>, mime_type: &str, bytes: Vec<u8>) -> Self {
        ResourceContents {
            uri: uri.into(),
            mime_type: Some(mime_type.to_owned()),
            body: ResourceBody::Blob(bytes),
        }
    }
}

impl Prompt {
    /// A prompt called `name`, described by `description`, taking `arguments`.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        arguments: Vec<PromptArgument>,
    ) -> Self {
        Prompt {
            name: name.into(),
            title: None,
            description: Some(description.into()),
            arguments,
        }
    }
}

impl PromptArgument {
    /// An argument called `name`.
    pub fn new(name: impl Into<String>, description: impl Into<String>, required: bool) -> Self {
        PromptArgument {
            name: name.into(),
            title: None,
            description: Some(description.into()),
            required,
        }
    }
}

impl PromptMessage {
    /// A message from the user.
    pub fn user(content: Content) -> Self {
        PromptMessage {
            role: PromptRole::User,
            content,
        }
    }

    /// A message from the assistant.
    pub fn assistant(content: Content) -> Self {
        PromptMessage {
            role: PromptRole::Assistant,
            content,
        }
    }
}

/// The node's log and progress reporting.
pub mod host {
    pub use crate::bindings::agentsite::agent::host::{LogLevel, log, progress, resource_updated};

    /// Logs at info level.
    pub fn info(message: &str) {
        log(LogLevel::Info, message);
    }

    /// Logs at warn level.
    pub fn warn(message: &str) {
        log(LogLevel::Warn, message);
    }

    /// Logs at error level.
    pub fn error(message: &str) {
        log(LogLevel::Error, message);
    }
}

/// Declares an SDK error type mirroring a WIT error variant whose cases
/// each carry a one-line message. wit-bindgen's own `Display` of such a
/// variant is its debug text (`NotGranted("...")`); these show the message.
macro_rules! plain_error {
    ($(#[$doc:meta])* $name:ident from $wit:path { $($(#[$case_doc:meta])* $case:ident),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum $name {
            $($(#[$case_doc])* $case(String)),+
        }

        impl $name {
            /// The message the node gave.
            pub fn message(&self) -> &str {
                match self {
                    $(Self::$case(message))|+ => message,
                }
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.message())
            }
        }

        impl ::std::error::Error for $name {}

        impl From<$wit> for $name {
            fn from(error: $wit) -> Self {
                use $wit as Wit;
                match error {
                    $(Wit::$case(message) => Self::$case(message)),+
                }
            }
        }
    };
}

/// The agent's own persistent key-value store (when the operator grants it).
pub mod kv {
    use crate::bindings::agentsite::agent::kv as wit;

    plain_error! {
        /// Why a key-value operation failed. Shown (`Display`) as the node's
        /// one-line message.
        KvError from wit::KvError {
            /// The operator has not granted this agent a key-value store.
            NotGranted,
            /// The agent's quota of keys or bytes is used up.
            QuotaExceeded,
            /// The key or value is not acceptable (empty key, too large, ...).
            Invalid,
            /// The node's storage failed; retrying later may succeed.
            Storage,
        }
    }

    /// The value stored under `key`, if any.
    pub fn get(key: &str) -> Result<Option<Vec<u8>>, KvError> {
        Ok(wit::get(key)?)
    }

    /// Stores `value` under `key`, replacing any previous value. Durable
    /// when it returns.
    pub fn set(key: &str, value: &[u8]) -> Result<(), KvError> {
        Ok(wit::set(key, value)?)
    }

    /// Removes `key`; returns whether it existed.
    pub fn delete(key: &str) -> Result<bool, KvError> {
        Ok(wit::delete(key)?)
    }

    /// Keys that start with `prefix`, in ascending order, strictly after
    /// `after` when given, at most `limit` of them (the node caps `limit`
    /// at 1000).
    pub fn list_keys(
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<String>, KvError> {
        Ok(wit::list_keys(prefix, after, limit)?)
    }

    /// The value under `key` as UTF-8 text, if any.
    pub fn get_string(key: &str) -> Result<Option<String>, KvError> {
        match get(key)? {
            None => Ok(None),
            Some(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| KvError::Invalid(format!("value of key {key:?} is not UTF-8"))),
        }
    }

    /// Every key starting with `prefix`, fetched page by page.
    pub fn keys_with_prefix(prefix: &str) -> Result<Vec<String>, KvError> {
        const PAGE: u32 = 1000;
        let mut keys: Vec<String> = Vec::new();
        loop {
            let page = list_keys(prefix, keys.last().map(String::as_str), PAGE)?;
            let done = page.len() < PAGE as usize;
            keys.extend(page);
            if done {
                return Ok(keys);
            }
        }
    }
}

/// Other agents, on this node or elsewhere on the network (when granted).
pub mod peers {
    use crate::ToolError;
    use crate::bindings::agentsite::agent::peers as wit;
    pub use wit::AgentRef;

    /// Why finding or calling another agent failed. Shown (`Display`) as
    /// the node's one-line message, or the other agent's error.
    #[derive(Debug, Clone)]
    pub enum PeerError {
        /// The operator has not granted this agent access to other agents.
        NotGranted(String),
        /// No agent with that id could be found.
        NotFound(String),
        /// The chain of agents calling agents is too deep.
        DepthExceeded(String),
        /// The call's deadline passed before the other agent answered.
        DeadlineExceeded(String),
        /// The other agent answered with a tool error.
        Tool(ToolError),
        /// The network or the other node failed; retrying may succeed.
        Unavailable(String),
    }

    impl core::fmt::Display for PeerError {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            match self {
                PeerError::NotGranted(message)
                | PeerError::NotFound(message)
                | PeerError::DepthExceeded(message)
                | PeerError::DeadlineExceeded(message)
                | PeerError::Unavailable(message) => f.write_str(message),
                PeerError::Tool(error) => f.write_str(&crate::__private::tool_error_text(error)),
            }
        }
    }

    impl std::error::Error for PeerError {}

    impl From<wit::PeerError> for PeerError {
        fn from(error: wit::PeerError) -> Self {
            match error {
                wit::PeerError::NotGranted(m) => PeerError::NotGranted(m),
                wit::PeerError::NotFound(m) => PeerError::NotFound(m),
                wit::PeerError::DepthExceeded(m) => PeerError::DepthExceeded(m),
                wit::PeerError::DeadlineExceeded(m) => PeerError::DeadlineExceeded(m),
                wit::PeerError::Tool(e) => PeerError::Tool(e),
                wit::PeerError::Unavailable(m) => PeerError::Unavailable(m),
            }
        }
    }

    /// Agents matching `query` (a keyword or capability), at most `limit`.
    pub fn discover(query: &str, limit: u32) -> Result<Vec<AgentRef>, PeerError> {
        Ok(wit::discover(query, limit)?)
    }

    /// Calls `tool` of the agent `agent_id` with JSON `arguments`.
    pub fn call(
        agent_id: &str,
        tool: &str,
        arguments: &str,
    ) -> Result<crate::ToolResult, PeerError> {
        Ok(wit::call(agent_id, tool, arguments)?)
    }
}

/// A language model chosen by the node or the calling client (when granted).
pub mod llm {
    use crate::bindings::agentsite::agent::llm as wit;
    pub use wit::{ChatRequest, ChatResponse, Message, Role};

    plain_error! {
        /// Why a model could not answer. Shown (`Display`) as the node's
        /// one-line message.
        LlmError from wit::LlmError {
            /// The operator has not granted this agent a language model.
            NotGranted,
            /// The request is malformed (no messages, ...).
            InvalidRequest,
            /// The model or the person supervising it declined the request.
            Refused,
            /// No model could be reached; retrying may succeed.
            Unavailable,
        }
    }

    /// Completes the conversation in `request`.
    pub fn chat(request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        Ok(wit::chat(request)?)
    }

    /// Asks the model one question and returns its answer.
    pub fn ask(prompt: &str, max_tokens: u32) -> Result<ChatResponse, LlmError> {
        chat(&ChatRequest {
            messages: vec![Message {
                role: Role::User,
                content: prompt.to_owned(),
            }],
            model_hint: None,
            max_tokens: Some(max_tokens),
            temperature: None,
        })
    }
}

/// A language model that can call tools and stream its answer (contract
/// 0.1.1), for agents that run their own tool loop. Needs the `llm` grant.
///
/// ```ignore
/// use agentsite_sdk::chat::{Chat, ToolChoice};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Search { query: String }
///
/// let mut chat = Chat::new()
///     .system("Find agents for the task.")
///     .user("Who can add numbers?")
///     .tool::<Search>("search", "Searches the network's agents")
///     .tool_choice(ToolChoice::Required);
/// let answer = chat.complete()?;
/// for call in &answer.tool_calls {
///     let Search { query } = call.arguments_as()?;
///     chat.push_tool_result(call, &run_search(&query));
/// }
/// chat.push_answer(&answer);
/// ```
pub mod chat {
    use crate::bindings::agentsite::agent::chat as wit;
    use serde::de::DeserializeOwned;
    pub use wit::{
        Completion, Delta, Message, Request, Role, StopReason, ToolCall, ToolChoice, ToolSpec,
        Usage,
    };

    plain_error! {
        /// Why a model could not answer. Shown (`Display`) as the node's
        /// one-line message.
        ChatError from wit::ChatError {
            /// The operator has not granted this agent a language model.
            NotGranted,
            /// The request cannot be answered as asked.
            InvalidRequest,
            /// The model or the person supervising it declined.
            Refused,
            /// A token budget of the agent's grant is used up.
            BudgetExceeded,
            /// The model is serving as many requests as it may.
            Busy,
            /// The call's deadline passed.
            DeadlineExceeded,
            /// No model could be reached or it failed; retrying may succeed.
            Unavailable,
        }
    }

    impl Message {
        fn plain(role: Role, content: impl Into<String>) -> Self {
            Message {
                role,
                content: content.into(),
                tool_calls: Vec::new(),
                tool_call_id: None,
            }
        }

        /// Instructions for the model.
        pub fn system(content: impl Into<String>) -> Self {
            Self::plain(Role::System, content)
        }

        /// What the person (or the agent, on their behalf) says.
        pub fn user(content: impl Into<String>) -> Self {
            Self::plain(Role::User, content)
        }

        /// The model's earlier answer, tool calls included.
        pub fn assistant(answer: &Completion) -> Self {
            Message {
                role: Role::Assistant,
                content: answer.content.clone(),
                tool_calls: answer.tool_calls.clone(),
                tool_call_id: None,
            }
        }

        /// The result of `call`, for the model to read.
        pub fn tool_result(call: &ToolCall, result: impl Into<String>) -> Self {
            Message {
                role: Role::Tool,
                content: result.into(),
                tool_calls: Vec::new(),
                tool_call_id: Some(call.id.clone()),
            }
        }
    }

    impl ToolSpec {
        /// A tool whose arguments are the fields of `A` (its JSON Schema is
        /// derived as for the agent's own tools).
        pub fn of<A: schemars::JsonSchema>(
            name: impl Into<String>,
            description: impl Into<String>,
        ) -> Self {
            ToolSpec {
                name: name.into(),
                description: description.into(),
                parameters: crate::__private::input_schema::<A>(),
            }
        }
    }

    impl ToolCall {
        /// The call's arguments as `A`; an error says which field is wrong.
        pub fn arguments_as<A: DeserializeOwned>(&self) -> Result<A, crate::ToolError> {
            crate::__private::parse_arguments(&self.arguments)
        }
    }

    /// A conversation with the model, built up turn by turn.
    #[derive(Debug, Clone)]
    pub struct Chat {
        request: Request,
    }

    impl Default for Chat {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Chat {
        /// An empty conversation: greedy decoding, the model's own length bound.
        pub fn new() -> Self {
            Chat {
                request: Request {
                    messages: Vec::new(),
                    tools: Vec::new(),
                    tool_choice: ToolChoice::Auto,
                    response_schema: None,
                    model_hint: None,
                    max_tokens: None,
                    temperature: None,
                    seed: None,
                },
            }
        }

        /// Adds instructions for the model.
        pub fn system(mut self, content: impl Into<String>) -> Self {
            self.request.messages.push(Message::system(content));
            self
        }

        /// Adds what the person says.
        pub fn user(mut self, content: impl Into<String>) -> Self {
            self.request.messages.push(Message::user(content));
            self
        }

        /// Offers the model a tool whose arguments are the fields of `A`.
        pub fn tool<A: schemars::JsonSchema>(
            mut self,
            name: impl Into<String>,
            description: impl Into<String>,
        ) -> Self {
            self.request
                .tools
                .push(ToolSpec::of::<A>(name, description));
            self
        }

        /// Whether the model must, may or must not call a tool.
        pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
            self.request.tool_choice = choice;
            self
        }

        /// Bounds the answer's length in tokens.
        pub fn max_tokens(mut self, tokens: u32) -> Self {
            self.request.max_tokens = Some(tokens);
            self
        }

        /// Samples at `temperature` (0 is greedy) with `seed`.
        pub fn sampling(mut self, temperature: f32, seed: u64) -> Self {
            self.request.temperature = Some(temperature);
            self.request.seed = Some(seed);
            self
        }

        /// A model the agent prefers (used when its grant allows it).
        pub fn model(mut self, name: impl Into<String>) -> Self {
            self.request.model_hint = Some(name.into());
            self
        }

        /// Adds a message.
        pub fn push(&mut self, message: Message) {
            self.request.messages.push(message);
        }

        /// Adds the model's answer, so that the next request continues it.
        pub fn push_answer(&mut self, answer: &Completion) {
            self.push(Message::assistant(answer));
        }

        /// Adds the result of one of the model's tool calls.
        pub fn push_tool_result(&mut self, call: &ToolCall, result: impl Into<String>) {
            self.push(Message::tool_result(call, result));
        }

        /// The conversation so far.
        pub fn messages(&self) -> &[Message] {
            &self.request.messages
        }

        /// The model's next answer.
        pub fn complete(&self) -> Result<Completion, ChatError> {
            Ok(wit::complete(&self.request)?)
        }

        /// The model's next answer, as pieces while it writes them.
        pub fn stream(&self) -> Result<Stream, ChatError> {
            Ok(Stream {
                generation: wit::start(&self.request)?,
                done: false,
            })
        }

        /// The model's next answer as a `T`: the answer is held to `T`'s
        /// JSON Schema while it is generated, then parsed.
        pub fn complete_as<T: DeserializeOwned + schemars::JsonSchema>(
            &self,
        ) -> Result<T, ChatError> {
            let mut request = self.request.clone();
            let mut schema = schemars::schema_for!(T).to_value();
            crate::standard_schema::standardize(&mut schema);
            request.response_schema = Some(schema.to_string());
            request.tools.clear();
            let answer = wit::complete(&request)?;
            serde_json::from_str(&answer.content).map_err(|e| {
                ChatError::InvalidRequest(format!(
                    "the model's answer is not the JSON asked for: {e}"
                ))
            })
        }
    }

    /// An answer arriving piece by piece: iterate for the pieces, then
    /// [`Stream::finish`] for the whole completion. Dropping it stops the model.
    pub struct Stream {
        generation: wit::Generation,
        done: bool,
    }

    impl Iterator for Stream {
        type Item = Result<Delta, ChatError>;

        fn next(&mut self) -> Option<Self::Item> {
            if self.done {
                return None;
            }
            match self.generation.next() {
                Ok(Some(delta)) => Some(Ok(delta)),
                Ok(None) => {
                    self.done = true;
                    None
                }
                Err(error) => {
                    self.done = true;
                    Some(Err(error.into()))
                }
            }
        }
    }

    impl Stream {
        /// Waits for the end of the answer and returns it whole.
        pub fn finish(self) -> Result<Completion, ChatError> {
            Ok(self.generation.finish()?)
        }
    }
}

/// The person using the MCP client that called the agent (elicitation).
pub mod user {
    use crate::bindings::agentsite::agent::user as wit;
    pub use wit::{ElicitAction, ElicitResponse};

    plain_error! {
        /// Why the person could not be asked. Shown (`Display`) as the
        /// node's one-line message.
        ElicitError from wit::ElicitError {
            /// Nobody can be asked (no client that supports elicitation).
            Unavailable,
            /// The requested schema is not an elicitation schema.
            InvalidRequest,
        }
    }

    /// Shows `message` and a form described by `requested_schema` (JSON
    /// Schema, as text) to the person, and waits for the answer.
    pub fn elicit(message: &str, requested_schema: &str) -> Result<ElicitResponse, ElicitError> {
        Ok(wit::elicit(message, requested_schema)?)
    }
}

impl ToolResult {
    /// A successful result holding one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::from_content(vec![Content::Text(text.into())])
    }

    /// A result that reports a failure to the caller (MCP `isError`).
    pub fn error(text: impl Into<String>) -> Self {
        ToolResult {
            content: vec![Content::Text(text.into())],
            structured_content: None,
            is_error: true,
        }
    }

    /// A successful result holding `content`.
    pub fn from_content(content: Vec<Content>) -> Self {
        ToolResult {
            content,
            structured_content: None,
            is_error: false,
        }
    }
}

impl Content {
    /// An image block.
    pub fn image(data: Vec<u8>, mime_type: impl Into<String>) -> Self {
        Content::Image(Media {
            data,
            mime_type: mime_type.into(),
        })
    }

    /// An audio block.
    pub fn audio(data: Vec<u8>, mime_type: impl Into<String>) -> Self {
        Content::Audio(Media {
            data,
            mime_type: mime_type.into(),
        })
    }
}

/// Support code for the [`agent`] macro's expansion; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::asynchronous::each;
    pub use schemars;
    pub use serde;
    pub use serde_json;

    use crate::{
        Content, Prompt, PromptArguments, PromptError, PromptResult, Prompts, ResourceContents,
        ResourceError, Resources, ToolError, ToolResult,
    };

    /// The resources of an agent that declares none.
    pub struct NoResources;

    impl Resources for NoResources {
        fn read(uri: &str) -> Result<Vec<ResourceContents>, ResourceError> {
            Err(ResourceError::NotFound(uri.to_owned()))
        }
    }

    /// The prompts of an agent that declares none.
    pub struct NoPrompts;

    impl Prompts for NoPrompts {
        fn list() -> Vec<Prompt> {
            Vec::new()
        }

        fn get(name: &str, _arguments: &PromptArguments) -> Result<PromptResult, PromptError> {
            Err(PromptError::UnknownPrompt(name.to_owned()))
        }
    }
    use schemars::JsonSchema;
    use serde::Serialize;
    use serde::de::DeserializeOwned;
    use serde_json::{Map, Value};

    /// Parses a tool's arguments. An empty string means "no arguments".
    /// An error names the argument and what it should have been.
    pub fn parse_arguments<A: DeserializeOwned>(arguments: &str) -> Result<A, ToolError> {
        agentsite_json_words::parse_arguments(arguments)
            .map_err(|refusal| ToolError::InvalidArguments(refusal.to_string()))
    }

    /// The JSON Schema of an arguments struct, as MCP wants it: an object
    /// schema without the generated struct's title.
    pub fn input_schema<A: JsonSchema>() -> String {
        let mut schema = schemars::schema_for!(A).to_value();
        if let Value::Object(map) = &mut schema {
            map.remove("title");
        }
        crate::standard_schema::standardize(&mut schema);
        schema.to_string()
    }

    fn is_object_schema(schema: &Value) -> bool {
        schema.get("type").and_then(Value::as_str) == Some("object")
    }

    /// The output schema for a structured return type: the type's own schema
    /// if it describes an object, otherwise an object with one `result` property.
    pub fn output_schema<T: JsonSchema>() -> String {
        let mut schema = schemars::schema_for!(T).to_value();
        crate::standard_schema::standardize(&mut schema);
        if is_object_schema(&schema) {
            return schema.to_string();
        }
        let mut inner = schema;
        let mut defs = None;
        if let Value::Object(map) = &mut inner {
            map.remove("$schema");
            defs = map.remove("$defs");
        }
        let mut wrapper = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": { "result": inner },
            "required": ["result"],
        });
        if let (Some(defs), Value::Object(map)) = (defs, &mut wrapper) {
            map.insert("$defs".into(), defs);
        }
        wrapper.to_string()
    }

    /// A structured result: the value as structured content and as JSON text.
    ///
    /// Whether the value is wrapped as `{"result": …}` follows
    /// [`output_schema`]. Only a JSON object can match an object schema, so
    /// the type's schema is built (a cost paid on every call, since each call
    /// runs in a fresh instance) only when the value is an object.
    pub fn structured<T: Serialize + JsonSchema>(value: &T) -> Result<ToolResult, ToolError> {
        // serde_json would write such a number as null: an overflow would
        // read as "nothing".
        if let Some(x) = crate::finite::first_non_finite(value) {
            let what = if x.is_nan() {
                "not a number (as 0/0 or the square root of -1 gives)".to_owned()
            } else {
                let sign = if x < 0.0 { "minus " } else { "" };
                format!("{sign}infinite (beyond ±1.8e308: the computation overflowed)")
            };
            return Err(ToolError::Failed(format!(
                "the result is {what}, which JSON cannot carry"
            )));
        }
        let json = serde_json::to_value(value)
            .map_err(|e| ToolError::Failed(format!("result is not serializable: {e}")))?;
        let text = json.to_string();
        let unwrapped = json.is_object() && is_object_schema(&schemars::schema_for!(T).to_value());
        let structured = if unwrapped {
            text.clone()
        } else {
            let mut map = Map::new();
            map.insert("result".into(), json);
            Value::Object(map).to_string()
        };
        Ok(ToolResult {
            content: vec![Content::Text(text)],
            structured_content: Some(structured),
            is_error: false,
        })
    }

    /// Return values that already are content.
    pub trait IntoContentResult {
        fn into_content_result(self) -> ToolResult;
    }

    impl IntoContentResult for ToolResult {
        fn into_content_result(self) -> ToolResult {
            self
        }
    }

    impl IntoContentResult for Content {
        fn into_content_result(self) -> ToolResult {
            ToolResult::from_content(vec![self])
        }
    }

    impl IntoContentResult for Vec<Content> {
        fn into_content_result(self) -> ToolResult {
            ToolResult::from_content(self)
        }
    }

    impl IntoContentResult for String {
        fn into_content_result(self) -> ToolResult {
            ToolResult::text(self)
        }
    }

    impl IntoContentResult for &str {
        fn into_content_result(self) -> ToolResult {
            ToolResult::text(self)
        }
    }

    impl IntoContentResult for () {
        fn into_content_result(self) -> ToolResult {
            ToolResult::from_content(Vec::new())
        }
    }

    /// A tool error in plain words (wit-bindgen's `Display` of it is its
    /// debug text).
    pub fn tool_error_text(error: &ToolError) -> String {
        match error {
            ToolError::UnknownTool(name) => format!("unknown tool: {name}"),
            ToolError::InvalidArguments(why) => format!("invalid arguments: {why}"),
            ToolError::Failed(why) => why.clone(),
        }
    }

    /// Maps an author's error type to a tool error: `ToolError` keeps its
    /// kind, anything else becomes `failed` with its `Display` text.
    pub fn tool_error<E: std::fmt::Display + 'static>(error: E) -> ToolError {
        let any: &dyn std::any::Any = &error;
        match any.downcast_ref::<ToolError>() {
            Some(tool_error) => tool_error.clone(),
            None => ToolError::Failed(error.to_string()),
        }
    }

    /// Reads the `homepage` of the card from Cargo metadata.
    pub fn homepage(homepage: &str, repository: &str) -> Option<String> {
        [homepage, repository]
            .into_iter()
            .find(|s| !s.is_empty())
            .map(str::to_owned)
    }
}
