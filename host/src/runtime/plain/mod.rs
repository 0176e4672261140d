//! Components that export plain functions instead of the agent world: a
//! component built for Wassette, or any WASI 0.2 component whose exports are
//! functions. Each exported function, at the top level or in an exported
//! interface, becomes a tool: its parameters are the tool's arguments (an
//! input schema derived from their WIT types, [`schema`]), its result the
//! tool's result, and an `err` of a `result` return is a tool error. It runs
//! as any agent does: a fresh instance per call, under the same limits and
//! grants.

pub mod json;
pub mod schema;

use crate::agent::tool::{AgentCard, ToolAnnotations, ToolSpec};
use serde_json::{Value, json};
use wasmtime::Engine;
use wasmtime::component::types::{ComponentFunc, ComponentItem, Type};
use wasmtime::component::{Component, ComponentExportIndex};

/// The most functions of one component served as tools.
pub const MAX_FUNCTIONS: usize = 128;

/// An exported function served as a tool.
pub struct Function {
    pub spec: ToolSpec,
    pub export: ComponentExportIndex,
    pub params: Vec<(String, Type)>,
    pub results: Vec<Type>,
}

/// The functions of a component that tools can call, and those it cannot
/// (with why), found once when it is prepared.
pub struct Functions {
    pub callable: Vec<Function>,
    pub skipped: Vec<String>,
}

impl Functions {
    pub fn get(&self, tool: &str) -> Option<&Function> {
        self.callable.iter().find(|f| f.spec.name == tool)
    }

    /// Finds the exported functions of `component`.
    pub fn of(component: &Component, engine: &Engine) -> Functions {
        let mut found: Vec<(Option<String>, String, ComponentFunc, ComponentExportIndex)> =
            Vec::new();
        let ty = component.component_type();
        for (name, export) in ty.exports(engine) {
            let Some(index) = component.get_export_index(None, name) else {
                continue;
            };
            match export.ty {
                ComponentItem::ComponentFunc(func) => {
                    found.push((None, name.to_owned(), func, index))
                }
                // componentize-py's pre-initialization hook, which its
                // build calls once: not a function of the program.
                ComponentItem::ComponentInstance(_)
                    if name == "exports" && is_componentize_py(&ty, engine) => {}
                ComponentItem::ComponentInstance(instance) => {
                    for (inner, item) in instance.exports(engine) {
                        if let (ComponentItem::ComponentFunc(func), Some(inner_index)) =
                            (item.ty, component.get_export_index(Some(&index), inner))
                        {
                            found.push((
                                Some(name.to_owned()),
                                inner.to_owned(),
                                func,
                                inner_index,
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
        // A function is named by itself, or by its interface and itself
        // where two interfaces export the same name.
        let short = |name: &str| found.iter().filter(|(_, other, ..)| other == name).count() == 1;
        let mut functions = Functions {
            callable: Vec::new(),
            skipped: Vec::new(),
        };
        for (interface, name, func, export) in &found {
            let tool = match interface {
                Some(interface) if !short(name) => {
                    format!("{}.{name}", interface_name(interface))
                }
                _ => name.clone(),
            };
            if functions.callable.len() == MAX_FUNCTIONS {
                functions
                    .skipped
                    .push(format!("{tool} (more than {MAX_FUNCTIONS} functions)"));
                continue;
            }
            match Function::new(tool.clone(), func, *export) {
                Ok(function) => functions.callable.push(function),
                Err(why) => functions.skipped.push(format!("{tool} ({why})")),
            }
        }
        functions
    }

    /// The card of a component that carries none: named by the operator
    /// (the file or repository it came from), described by its functions.
    pub fn card(&self, name: String, version: Option<String>) -> AgentCard {
        let names: Vec<&str> = self.callable.iter().map(|f| f.spec.name.as_str()).collect();
        let mut description = format!(
            "A WebAssembly component with the functions {}",
            names.join(", ")
        );
        if !self.skipped.is_empty() {
            description.push_str(&format!(
                "; not served as tools: {}",
                self.skipped.join(", ")
            ));
        }
        description.push('.');
        AgentCard {
            name,
            version: version.unwrap_or_else(|| "unversioned".to_owned()),
            description: crate::text::excerpt(&description, 4000).into_owned(),
            tags: vec!["component".to_owned()],
            homepage: None,
        }
    }
}

/// Whether the component's `exports` instance is componentize-py's: its
/// one function is `init(app-name, symbols, stub-wasi)`.
fn is_componentize_py(component: &wasmtime::component::types::Component, engine: &Engine) -> bool {
    let Some(export) = component.get_export(engine, "exports") else {
        return false;
    };
    let ComponentItem::ComponentInstance(instance) = export.ty else {
        return false;
    };
    let names: Vec<(&str, Vec<String>)> = instance
        .exports(engine)
        .filter_map(|(name, item)| match item.ty {
            ComponentItem::ComponentFunc(func) => {
                Some((name, func.params().map(|(p, _)| p.to_owned()).collect()))
            }
            _ => None,
        })
        .collect();
    matches!(names.as_slice(), [("init", params)] if params == &["app-name", "symbols", "stub-wasi"])
}

/// `wasi:cli/run@0.2.0` → `run`: the interface's own name.
fn interface_name(export: &str) -> &str {
    let path = export.split('@').next().unwrap_or(export);
    path.rsplit(['/', ':']).next().unwrap_or(path)
}

impl Function {
    fn new(
        name: String,
        func: &ComponentFunc,
        export: ComponentExportIndex,
    ) -> Result<Self, String> {
        crate::agent::tool::validate_tool_name(&name).map_err(|e| e.0)?;
        // An async function (WASI 0.3) is a tool as any other: its
        // component runs on the concurrent engine, which calls it through
        // the scheduler.
        let params: Vec<(String, Type)> = func.params().map(|(n, t)| (n.to_owned(), t)).collect();
        let results: Vec<Type> = func.results().collect();
        let mut properties = serde_json::Map::new();
        let mut required = Vec::new();
        for (param, ty) in &params {
            let schema = schema::of(ty).map_err(|e| format!("{param} is {}", e.0))?;
            properties.insert(param.clone(), schema);
            if !matches!(ty, Type::Option(_)) {
                required.push(param.clone());
            }
        }
        let input_schema = json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        });
        let output_schema = match results.as_slice() {
            [] => None,
            [ty] => {
                let value = match ty {
                    // An `err` is the tool's error; the result is the `ok`.
                    Type::Result(result) => result.ok().map(|ok| schema::of(&ok)),
                    ty => Some(schema::of(ty)),
                };
                let value = value.transpose().map_err(|e| format!("returns {}", e.0))?;
                value.map(|value| {
                    json!({
                        "type": "object",
                        "properties": { "result": value },
                        "required": ["result"],
                    })
                })
            }
            _ => return Err("more than one result".to_owned()),
        };
        let signature = format!(
            "{name}({}){}",
            params
                .iter()
                .map(|(n, t)| format!("{n}: {}", schema::wit(t)))
                .collect::<Vec<_>>()
                .join(", "),
            results
                .first()
                .map_or(String::new(), |t| format!(" -> {}", schema::wit(t)))
        );
        Ok(Function {
            spec: ToolSpec {
                name,
                title: None,
                description: crate::text::excerpt(&signature, 1000).into_owned(),
                input_schema,
                output_schema,
                annotations: ToolAnnotations::default(),
                app: None,
            },
            export,
            params,
            results,
        })
    }

    /// The call's arguments, from a JSON object of the parameters.
    pub fn arguments(&self, arguments: &str) -> Result<Vec<wasmtime::component::Val>, String> {
        let value: Value = serde_json::from_str(arguments)
            .map_err(|e| format!("the arguments are not JSON: {e}"))?;
        let object = value
            .as_object()
            .ok_or("the arguments must be a JSON object")?;
        if let Some(unknown) = object
            .keys()
            .find(|k| !self.params.iter().any(|(p, _)| p == *k))
        {
            return Err(format!(
                "unknown argument `{unknown}` (the arguments are: {})",
                self.params
                    .iter()
                    .map(|(p, _)| p.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        self.params
            .iter()
            .map(|(param, ty)| match (object.get(param), ty) {
                (None, Type::Option(_)) => Ok(wasmtime::component::Val::Option(None)),
                (None, _) => Err(format!("missing argument `{param}`")),
                (Some(value), ty) => json::to_val(ty, value, param),
            })
            .collect()
    }
}
