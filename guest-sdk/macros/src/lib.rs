//! The `#[agent]` attribute of `agentsite-sdk`.
//!
//! It reads an `impl` block whose `#[tool]` functions are the agent's tools
//! and generates the WIT exports: the card, the tool list (with JSON Schemas
//! derived from the argument types by schemars) and the dispatch of calls
//! (argument parsing, error mapping, result conversion). Everything the
//! expansion needs at run time lives in `agentsite_sdk::__private`, so this
//! crate only moves tokens.

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote};
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{
    Attribute, Expr, ExprLit, FnArg, GenericArgument, ImplItem, ItemImpl, Lit, LitStr, Meta, Pat,
    PathArguments, ReturnType, Type, TypePath,
};

/// Turns an `impl` block into an agent. See the `agentsite-sdk` crate docs.
///
/// Options: `name = "..."` (default: the package name), `description = "..."`
/// (default: the block's doc comment, else the package description),
/// `tags = ["...", ...]`, and the flags `resources` and `prompts`, which say
/// that the type also implements `agentsite_sdk::Resources` or
/// `agentsite_sdk::Prompts` (without them the agent offers none), and
/// `async`, which builds the agent for the `async-agent` world (WASI 0.3)
/// even when none of its tools is an `async fn` (one `async fn` tool does
/// so by itself). Inside, every function marked `#[tool]` is a tool, a
/// plain `fn` or an `async fn`; `#[tool(...)]` accepts `name = "..."`,
/// `title = "..."`, the hints `read_only`, `destructive`, `idempotent`,
/// `open_world` (each optionally `= bool`), `app = "ui://..."`, which
/// names the agent's resource that MCP clients render as the tool's
/// interactive view (MCP Apps), and `app_only`, which offers such a tool to
/// its view alone, not to the model.
#[proc_macro_attribute]
pub fn agent(attr: TokenStream, item: TokenStream) -> TokenStream {
    match expand(attr.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

/// Makes a struct or enum data a tool can take or return: derives serde's
/// `Serialize` and `Deserialize` and schemars' `JsonSchema` through the
/// SDK's own copies, so the agent's crate needs no `serde` or `schemars`
/// dependency of its own. Its doc comments, and its fields', describe it
/// in the tool's schema; `#[serde(...)]` attributes on it still apply.
///
/// ```ignore
/// #[agentsite_sdk::data]
/// struct Conversion {
///     /// The converted amount.
///     value: f64,
///     unit: String,
/// }
/// ```
#[proc_macro_attribute]
pub fn data(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return syn::Error::new(
            TokenStream2::from(attr).span(),
            "#[data] takes no options (serde's and schemars' own attributes go on the item)",
        )
        .to_compile_error()
        .into();
    }
    let item = TokenStream2::from(item);
    quote! {
        #[derive(
            ::agentsite_sdk::__private::serde::Serialize,
            ::agentsite_sdk::__private::serde::Deserialize,
            ::agentsite_sdk::__private::schemars::JsonSchema
        )]
        #[serde(crate = "::agentsite_sdk::__private::serde")]
        #[schemars(crate = "::agentsite_sdk::__private::schemars")]
        #item
    }
    .into()
}

#[derive(Default)]
struct AgentOptions {
    name: Option<LitStr>,
    description: Option<LitStr>,
    tags: Vec<LitStr>,
    /// The type implements `agentsite_sdk::Resources`.
    resources: bool,
    /// The type implements `agentsite_sdk::Prompts`.
    prompts: bool,
    /// Built for the `async-agent` world even if no tool is an `async fn`.
    asynchronous: bool,
}

#[derive(Default)]
struct ToolOptions {
    name: Option<LitStr>,
    title: Option<LitStr>,
    read_only: Option<bool>,
    destructive: Option<bool>,
    idempotent: Option<bool>,
    open_world: Option<bool>,
    /// The `ui://` resource the tool's view is.
    app: Option<LitStr>,
    /// Offered to the view alone (MCP Apps visibility `["app"]`).
    app_only: bool,
}

struct Param {
    ident: syn::Ident,
    /// The owned type stored in the arguments struct.
    field_type: Type,
    /// The function takes a reference to the field (`&str`, `&[T]`, `&T`).
    by_ref: bool,
    docs: Vec<Attribute>,
}

enum Output {
    /// Text or content blocks, converted by `IntoContentResult`.
    Content,
    /// Any serializable value, returned as structured content.
    Structured(Box<Type>),
}

struct ToolFn {
    ident: syn::Ident,
    options: ToolOptions,
    description: String,
    params: Vec<Param>,
    fallible: bool,
    output: Output,
    /// An `async fn`: the agent is then built for the `async-agent` world.
    is_async: bool,
}

fn expand(attr: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    let options = parse_agent_options(attr)?;
    let mut block: ItemImpl = syn::parse2(item)?;
    if let Some((_, path, _)) = &block.trait_ {
        return Err(syn::Error::new(
            path.span(),
            "#[agent] goes on an inherent impl block (`impl MyAgent { ... }`)",
        ));
    }
    let self_ty = block.self_ty.clone();
    let agent_doc = doc_text(&block.attrs);

    let mut tools = Vec::new();
    for item in &mut block.items {
        if let ImplItem::Fn(function) = item
            && let Some(tool) = take_tool(function)?
        {
            tools.push(tool);
        }
    }
    if tools.is_empty() {
        return Err(syn::Error::new(
            block.self_ty.span(),
            "an agent needs at least one function marked #[tool]",
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for tool in &tools {
        let name = tool_name(tool);
        if !seen.insert(name.clone()) {
            return Err(syn::Error::new(
                tool.ident.span(),
                format!("two tools are named {name:?}"),
            ));
        }
    }

    let name = match &options.name {
        Some(name) => quote!(#name),
        None => quote!(env!("CARGO_PKG_NAME")),
    };
    let description = match (&options.description, agent_doc) {
        (Some(text), _) => quote!(#text),
        (None, Some(doc)) => quote!(#doc),
        (None, None) => quote!(env!("CARGO_PKG_DESCRIPTION")),
    };
    let tags = &options.tags;

    let mut arg_structs = Vec::new();
    let mut descriptors = Vec::new();
    let mut arms = Vec::new();
    for tool in &tools {
        let (arg_struct, descriptor, arm) = generate_tool(tool, &self_ty);
        arg_structs.push(arg_struct);
        descriptors.push(descriptor);
        arms.push(arm);
    }

    // One `async fn` tool makes the agent one of the `async-agent` world:
    // its tool calls may wait on WASI 0.3's asynchronous imports.
    let world = World::of(options.asynchronous || tools.iter().any(|tool| tool.is_async));
    let resources = generate_resources(options.resources, &self_ty, world);
    let prompts = generate_prompts(options.prompts, &self_ty, world);
    let apps = generate_apps(&tools, world)?;
    let bindings = world.bindings();
    let (interfaces, export_macro) = match world {
        World::Sync => (quote!(card, tools), quote!(__export_agent)),
        World::Async => (
            quote!(async_card as card, async_tools as tools),
            quote!(__export_async_agent),
        ),
    };
    let func = world.func();

    Ok(quote! {
        #block

        const _: () = {
            use #bindings::exports::agentsite::agent::{#interfaces};
            use ::agentsite_sdk::{AgentCard, Tool, ToolAnnotations, ToolError, ToolResult};

            #(#arg_structs)*

            struct __AgentsiteExports;

            impl card::Guest for __AgentsiteExports {
                fn describe() -> AgentCard {
                    AgentCard {
                        name: ::std::string::String::from(#name),
                        version: ::std::string::String::from(env!("CARGO_PKG_VERSION")),
                        description: ::std::string::String::from(#description),
                        tags: ::std::vec![#(::std::string::String::from(#tags)),*],
                        homepage: ::agentsite_sdk::__private::homepage(
                            env!("CARGO_PKG_HOMEPAGE"),
                            env!("CARGO_PKG_REPOSITORY"),
                        ),
                    }
                }
            }

            impl tools::Guest for __AgentsiteExports {
                #func list_tools() -> ::std::vec::Vec<Tool> {
                    ::std::vec![#(#descriptors),*]
                }

                #func call_tool(
                    name: ::std::string::String,
                    arguments: ::std::string::String,
                ) -> ::std::result::Result<ToolResult, ToolError> {
                    match name.as_str() {
                        #(#arms)*
                        _ => ::std::result::Result::Err(ToolError::UnknownTool(name)),
                    }
                }
            }

            #resources
            #prompts

            #apps

            #bindings::#export_macro!(
                __AgentsiteExports with_types_in #bindings
            );
        };
    })
}

/// The `apps` export, one entry per tool with a view: agents of the
/// `agent` world export it (empty when no tool has a view).
fn generate_apps(tools: &[ToolFn], world: World) -> syn::Result<TokenStream2> {
    if let World::Async = world {
        return match tools.iter().find(|tool| tool.options.app.is_some()) {
            Some(tool) => Err(syn::Error::new(
                tool.ident.span(),
                "views of tools (`app = ...`) are for agents of the `agent` world for now, not `async fn` ones",
            )),
            None => Ok(TokenStream2::new()),
        };
    }
    let entries = tools.iter().filter_map(|tool| {
        let uri = tool.options.app.as_ref()?;
        let name = tool_name(tool);
        let visibility = if tool.options.app_only {
            quote!(::std::vec![Audience::App])
        } else {
            quote!(::std::vec::Vec::new())
        };
        Some(quote! {
            ToolApp {
                tool: ::std::string::String::from(#name),
                resource_uri: ::std::string::String::from(#uri),
                visibility: #visibility,
            }
        })
    });
    Ok(quote! {
        impl ::agentsite_sdk::bindings::exports::agentsite::agent::apps::Guest for __AgentsiteExports {
            fn tool_apps() -> ::std::vec::Vec<::agentsite_sdk::bindings::exports::agentsite::agent::apps::ToolApp> {
                use ::agentsite_sdk::bindings::exports::agentsite::agent::apps::{Audience, ToolApp};
                ::std::vec![#(#entries),*]
            }
        }
    })
}

/// The `resources` export: delegated to the author's `Resources` impl when
/// the agent declares `resources`, otherwise to the SDK's empty one.
/// The world an agent is built for.
#[derive(Clone, Copy)]
enum World {
    /// `agent`: every tool is a plain function.
    Sync,
    /// `async-agent`: some tool is an `async fn`, or `#[agent(async)]`.
    Async,
}

impl World {
    fn of(any_async: bool) -> World {
        if any_async { World::Async } else { World::Sync }
    }

    /// How the world's exported functions are declared (`describe`
    /// excepted, which never waits).
    fn func(self) -> TokenStream2 {
        match self {
            World::Sync => quote!(fn),
            World::Async => quote!(async fn),
        }
    }

    /// The world's export of `interface` (`resources`, `prompts`), named
    /// by that name.
    fn export(self, interface: &str) -> TokenStream2 {
        let name = format_ident!("{interface}");
        let bindings = self.bindings();
        match self {
            World::Sync => quote!(#bindings::exports::agentsite::agent::#name),
            World::Async => {
                let exported = format_ident!("async_{interface}");
                quote!(#bindings::exports::agentsite::agent::#exported as #name)
            }
        }
    }

    /// The SDK's bindings of the world.
    fn bindings(self) -> TokenStream2 {
        match self {
            World::Sync => quote!(::agentsite_sdk::bindings),
            World::Async => quote!(::agentsite_sdk::async_bindings),
        }
    }

    /// How a list the author's `Resources` or `Prompts` answers (in the
    /// `agent` world's types) becomes the world's: as it is, or moved into
    /// the `async-agent` world's types of the same shape.
    fn list(self, value: TokenStream2) -> TokenStream2 {
        match self {
            World::Sync => value,
            World::Async => quote!(::agentsite_sdk::__private::each(#value)),
        }
    }
}

/// The `resources` export: delegated to the author's `Resources` impl when
/// the agent declares `resources`, otherwise to the SDK's empty one.
fn generate_resources(declared: bool, self_ty: &Type, world: World) -> TokenStream2 {
    let source = match declared {
        true => quote!(#self_ty),
        false => quote!(::agentsite_sdk::__private::NoResources),
    };
    let (export, func) = (world.export("resources"), world.func());
    let list = world.list(quote!(<#source as ::agentsite_sdk::Resources>::list()));
    let templates = world.list(quote!(<#source as ::agentsite_sdk::Resources>::templates()));
    let read = match world {
        World::Sync => quote!(<#source as ::agentsite_sdk::Resources>::read(&uri)),
        World::Async => quote! {
            <#source as ::agentsite_sdk::Resources>::read(&uri)
                .map(::agentsite_sdk::__private::each)
                .map_err(::core::convert::Into::into)
        },
    };
    quote! {
        use #export;
        impl resources::Guest for __AgentsiteExports {
            #func list_resources() -> ::std::vec::Vec<resources::Resource> {
                #list
            }
            #func list_resource_templates() -> ::std::vec::Vec<resources::ResourceTemplate> {
                #templates
            }
            #func read_resource(
                uri: ::std::string::String,
            ) -> ::std::result::Result<
                ::std::vec::Vec<resources::ResourceContents>,
                resources::ResourceError,
            > {
                #read
            }
        }
    }
}

/// The `prompts` export: delegated to the author's `Prompts` impl when the
/// agent declares `prompts`, otherwise to the SDK's empty one.
fn generate_prompts(declared: bool, self_ty: &Type, world: World) -> TokenStream2 {
    let source = match declared {
        true => quote!(#self_ty),
        false => quote!(::agentsite_sdk::__private::NoPrompts),
    };
    let (export, func) = (world.export("prompts"), world.func());
    let list = world.list(quote!(<#source as ::agentsite_sdk::Prompts>::list()));
    let get = quote! {
        <#source as ::agentsite_sdk::Prompts>::get(
            &name,
            &::agentsite_sdk::PromptArguments::new(arguments),
        )
    };
    let get = match world {
        World::Sync => get,
        World::Async => {
            quote!((#get).map(::core::convert::Into::into).map_err(::core::convert::Into::into))
        }
    };
    quote! {
        use #export;
        impl prompts::Guest for __AgentsiteExports {
            #func list_prompts() -> ::std::vec::Vec<prompts::Prompt> {
                #list
            }
            #func get_prompt(
                name: ::std::string::String,
                arguments: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
            ) -> ::std::result::Result<prompts::PromptResult, prompts::PromptError> {
                #get
            }
        }
    }
}

fn tool_name(tool: &ToolFn) -> String {
    match &tool.options.name {
        Some(name) => name.value(),
        None => tool.ident.to_string(),
    }
}

fn generate_tool(tool: &ToolFn, self_ty: &Type) -> (TokenStream2, TokenStream2, TokenStream2) {
    let ident = &tool.ident;
    let name = tool_name(tool);
    let args_ident = format_ident!("__AgentsiteArgs_{}", ident);
    let fields = tool.params.iter().map(|p| {
        let Param {
            ident,
            field_type,
            docs,
            ..
        } = p;
        quote!(#(#docs)* #ident: #field_type)
    });
    let arg_struct = quote! {
        #[derive(::agentsite_sdk::__private::serde::Deserialize, ::agentsite_sdk::__private::schemars::JsonSchema)]
        #[serde(crate = "::agentsite_sdk::__private::serde", deny_unknown_fields)]
        #[schemars(crate = "::agentsite_sdk::__private::schemars")]
        #[allow(non_camel_case_types)]
        struct #args_ident { #(#fields),* }
    };

    let description = &tool.description;
    let title = option_string(tool.options.title.as_ref().map(LitStr::value));
    let read_only = option_bool(tool.options.read_only);
    let destructive = option_bool(tool.options.destructive);
    let idempotent = option_bool(tool.options.idempotent);
    let open_world = option_bool(tool.options.open_world);
    let output_schema = match &tool.output {
        Output::Content => quote!(::std::option::Option::None),
        Output::Structured(ty) => {
            quote!(::std::option::Option::Some(::agentsite_sdk::__private::output_schema::<#ty>()))
        }
    };
    let descriptor = quote! {
        Tool {
            name: ::std::string::String::from(#name),
            title: #title,
            description: ::std::string::String::from(#description),
            input_schema: ::agentsite_sdk::__private::input_schema::<#args_ident>(),
            output_schema: #output_schema,
            annotations: ToolAnnotations {
                read_only: #read_only,
                destructive: #destructive,
                idempotent: #idempotent,
                open_world: #open_world,
            },
        }
    };

    let call_args = tool.params.iter().map(|p| {
        let field = &p.ident;
        if p.by_ref {
            quote!(&__args.#field)
        } else {
            quote!(__args.#field)
        }
    });
    let unwrap_error = if tool.fallible {
        quote! {
            let __out = match __out {
                ::std::result::Result::Ok(value) => value,
                ::std::result::Result::Err(error) => {
                    return ::std::result::Result::Err(::agentsite_sdk::__private::tool_error(error));
                }
            };
        }
    } else {
        quote!()
    };
    let convert = match &tool.output {
        Output::Content => quote! {
            ::std::result::Result::Ok(::agentsite_sdk::__private::IntoContentResult::into_content_result(__out))
        },
        Output::Structured(_) => quote!(::agentsite_sdk::__private::structured(&__out)),
    };
    let wait = match tool.is_async {
        true => quote!(.await),
        false => quote!(),
    };
    let arm = quote! {
        #name => {
            let __args: #args_ident = ::agentsite_sdk::__private::parse_arguments(&arguments)?;
            let __out = <#self_ty>::#ident(#(#call_args),*)#wait;
            #unwrap_error
            #convert
        }
    };
    (arg_struct, descriptor, arm)
}

fn option_bool(value: Option<bool>) -> TokenStream2 {
    match value {
        Some(v) => quote!(::std::option::Option::Some(#v)),
        None => quote!(::std::option::Option::None),
    }
}

fn option_string(value: Option<String>) -> TokenStream2 {
    match value {
        Some(v) => quote!(::std::option::Option::Some(::std::string::String::from(#v))),
        None => quote!(::std::option::Option::None),
    }
}

fn parse_agent_options(attr: TokenStream2) -> syn::Result<AgentOptions> {
    let mut options = AgentOptions::default();
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("name") {
            options.name = Some(meta.value()?.parse()?);
        } else if meta.path.is_ident("description") {
            options.description = Some(meta.value()?.parse()?);
        } else if meta.path.is_ident("tags") {
            let array: syn::ExprArray = meta.value()?.parse()?;
            for element in array.elems {
                match element {
                    Expr::Lit(ExprLit {
                        lit: Lit::Str(tag), ..
                    }) => options.tags.push(tag),
                    other => {
                        return Err(syn::Error::new(other.span(), "tags are string literals"));
                    }
                }
            }
        } else if meta.path.is_ident("resources") {
            options.resources = true;
        } else if meta.path.is_ident("prompts") {
            options.prompts = true;
        } else if meta.path.is_ident("async") {
            options.asynchronous = true;
        } else {
            return Err(meta.error(
                "expected `name`, `description`, `tags`, `resources`, `prompts` or `async`",
            ));
        }
        Ok(())
    });
    parser.parse2(attr)?;
    Ok(options)
}

/// Removes the `#[tool]` attribute from `function` and reads the tool from it,
/// or returns `None` for a function that is not a tool.
fn take_tool(function: &mut syn::ImplItemFn) -> syn::Result<Option<ToolFn>> {
    let Some(position) = function
        .attrs
        .iter()
        .position(|a| a.path().is_ident("tool"))
    else {
        return Ok(None);
    };
    let attr = function.attrs.remove(position);
    let options = parse_tool_options(&attr)?;
    let sig = &function.sig;
    if !sig.generics.params.is_empty() {
        return Err(syn::Error::new(
            sig.generics.span(),
            "tools cannot be generic",
        ));
    }
    let description = doc_text(&function.attrs).ok_or_else(|| {
        syn::Error::new(
            sig.ident.span(),
            format!(
                "tool `{}` needs a doc comment: it is the description people and models read",
                sig.ident
            ),
        )
    })?;

    let mut params = Vec::new();
    for input in function.sig.inputs.iter_mut() {
        let typed = match input {
            FnArg::Receiver(receiver) => {
                return Err(syn::Error::new(
                    receiver.span(),
                    "tools are plain functions without `self`: every call runs in a fresh instance",
                ));
            }
            FnArg::Typed(typed) => typed,
        };
        let Pat::Ident(pat) = typed.pat.as_ref() else {
            return Err(syn::Error::new(
                typed.pat.span(),
                "tool arguments must be plain names: they become the JSON argument names",
            ));
        };
        // Doc comments on parameters describe them in the schema; rustc does
        // not accept them on parameters, so they are moved to the struct field.
        let (docs, rest): (Vec<Attribute>, Vec<Attribute>) = typed
            .attrs
            .drain(..)
            .partition(|a| a.path().is_ident("doc"));
        typed.attrs = rest;
        let (field_type, by_ref) = owned_type(&typed.ty);
        params.push(Param {
            ident: pat.ident.clone(),
            field_type,
            by_ref,
            docs,
        });
    }

    let (fallible, value_type) = match &function.sig.output {
        ReturnType::Default => (false, None),
        ReturnType::Type(_, ty) => match result_ok_type(ty) {
            Some(ok) => (true, Some(ok)),
            None => (false, Some(ty.as_ref().clone())),
        },
    };
    let output = match value_type {
        None => Output::Content,
        Some(ty) if is_content_type(&ty) => Output::Content,
        Some(ty) => Output::Structured(Box::new(ty)),
    };

    Ok(Some(ToolFn {
        ident: function.sig.ident.clone(),
        options,
        description,
        params,
        fallible,
        output,
        is_async: function.sig.asyncness.is_some(),
    }))
}

fn parse_tool_options(attr: &Attribute) -> syn::Result<ToolOptions> {
    let mut options = ToolOptions::default();
    if matches!(attr.meta, Meta::Path(_)) {
        return Ok(options);
    }
    attr.parse_nested_meta(|meta| {
        let flag = |meta: &syn::meta::ParseNestedMeta| -> syn::Result<Option<bool>> {
            if meta.input.peek(syn::Token![=]) {
                let value: syn::LitBool = meta.value()?.parse()?;
                Ok(Some(value.value))
            } else {
                Ok(Some(true))
            }
        };
        if meta.path.is_ident("name") {
            let name: LitStr = meta.value()?.parse()?;
            validate_tool_name(&name)?;
            options.name = Some(name);
        } else if meta.path.is_ident("title") {
            options.title = Some(meta.value()?.parse()?);
        } else if meta.path.is_ident("read_only") {
            options.read_only = flag(&meta)?;
        } else if meta.path.is_ident("destructive") {
            options.destructive = flag(&meta)?;
        } else if meta.path.is_ident("idempotent") {
            options.idempotent = flag(&meta)?;
        } else if meta.path.is_ident("open_world") {
            options.open_world = flag(&meta)?;
        } else if meta.path.is_ident("app") {
            let uri: LitStr = meta.value()?.parse()?;
            if !uri.value().starts_with("ui://") {
                return Err(syn::Error::new(
                    uri.span(),
                    "a tool's view is a resource at a ui:// URI (MCP Apps), such as \"ui://converter/view\"",
                ));
            }
            options.app = Some(uri);
        } else if meta.path.is_ident("app_only") {
            options.app_only = flag(&meta)?.unwrap_or(true);
        } else {
            return Err(meta.error(
                "expected `name`, `title`, `read_only`, `destructive`, `idempotent`, `open_world`, `app` or `app_only`",
            ));
        }
        Ok(())
    })?;
    if options.app_only && options.app.is_none() {
        return Err(syn::Error::new(
            attr.span(),
            "`app_only` offers a tool to its view alone: name the view with `app = \"ui://...\"`",
        ));
    }
    Ok(options)
}

fn validate_tool_name(name: &LitStr) -> syn::Result<()> {
    let value = name.value();
    let valid = (1..=128).contains(&value.len())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if valid {
        Ok(())
    } else {
        Err(syn::Error::new(
            name.span(),
            "tool names are 1 to 128 characters of A-Z a-z 0-9 _ - .",
        ))
    }
}

/// The text of `///` comments, one leading space per line removed.
fn doc_text(attrs: &[Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|line| line.strip_prefix(' ').unwrap_or(&line).to_owned())
        .collect();
    let text = lines.join("\n").trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// The owned form of a parameter type, and whether the function borrows it.
fn owned_type(ty: &Type) -> (Type, bool) {
    let Type::Reference(reference) = ty else {
        return (ty.clone(), false);
    };
    let owned: Type = match reference.elem.as_ref() {
        Type::Path(path) if path.path.is_ident("str") => syn::parse_quote!(::std::string::String),
        Type::Slice(slice) => {
            let elem = &slice.elem;
            syn::parse_quote!(::std::vec::Vec<#elem>)
        }
        other => other.clone(),
    };
    (owned, true)
}

fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(TypePath { path, .. }) => path.segments.last(),
        _ => None,
    }
}

fn first_type_argument(segment: &syn::PathSegment) -> Option<Type> {
    let PathArguments::AngleBracketed(args) = &segment.arguments else {
        return None;
    };
    args.args.iter().find_map(|arg| match arg {
        GenericArgument::Type(ty) => Some(ty.clone()),
        _ => None,
    })
}

/// `T` when `ty` is `Result<T, E>` (or an alias such as `anyhow::Result<T>`).
fn result_ok_type(ty: &Type) -> Option<Type> {
    let segment = last_segment(ty)?;
    if segment.ident != "Result" {
        return None;
    }
    first_type_argument(segment)
}

/// Return types that are already text or content rather than data.
fn is_content_type(ty: &Type) -> bool {
    match ty {
        Type::Tuple(tuple) => tuple.elems.is_empty(),
        Type::Reference(reference) => {
            matches!(reference.elem.as_ref(), Type::Path(p) if p.path.is_ident("str"))
        }
        _ => match last_segment(ty) {
            Some(segment) if segment.ident == "Vec" => first_type_argument(segment)
                .as_ref()
                .and_then(last_segment)
                .is_some_and(|inner| inner.ident == "Content"),
            Some(segment) => ["String", "Content", "ToolResult"]
                .iter()
                .any(|name| segment.ident == name),
            None => false,
        },
    }
}
