//! The JSON a WIT type takes in a tool's arguments and result, as a JSON
//! Schema (2020-12). [`super::json`] reads and writes exactly these shapes:
//!
//! | WIT | JSON |
//! |---|---|
//! | `bool`, `string`, `char` | boolean, string, a string of one character |
//! | `u8`…`s64`, `f32`, `f64` | integer within the type's range, number |
//! | `list<T>`, `tuple<…>` | array (a tuple of fixed length) |
//! | `record` | object with every field |
//! | `variant` | `{"tag": CASE}` or `{"tag": CASE, "val": PAYLOAD}` |
//! | `enum` | one of the case names |
//! | `option<T>` | `T` or `null` (an optional argument may be left out) |
//! | `result<T, E>` | `{"ok": T}` or `{"err": E}` |
//! | `flags` | object of booleans, one per flag |
//!
//! This is the shape jco and Wassette use for variants and flags, so a
//! client that calls a component there calls it the same way here.

use serde_json::{Map, Value, json};
use wasmtime::component::types::Type;

/// Why a type has no JSON form: a resource handle, a future or a stream
/// live in one instance and cannot be written down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unrepresentable(pub &'static str);

/// The schema of `ty`.
pub fn of(ty: &Type) -> Result<Value, Unrepresentable> {
    Ok(match ty {
        Type::Bool => json!({ "type": "boolean" }),
        Type::S8 => integer(i8::MIN.into(), i8::MAX.into()),
        Type::U8 => integer(0, u8::MAX.into()),
        Type::S16 => integer(i16::MIN.into(), i16::MAX.into()),
        Type::U16 => integer(0, u16::MAX.into()),
        Type::S32 => integer(i32::MIN.into(), i32::MAX.into()),
        Type::U32 => integer(0, u32::MAX.into()),
        Type::S64 => integer(i64::MIN.into(), i64::MAX.into()),
        Type::U64 => integer(0, u64::MAX.into()),
        Type::Float32 | Type::Float64 => json!({ "type": "number" }),
        Type::Char => json!({ "type": "string", "minLength": 1, "maxLength": 1 }),
        Type::String => json!({ "type": "string" }),
        Type::List(list) => json!({ "type": "array", "items": of(&list.ty())? }),
        Type::FixedLengthList(list) => json!({
            "type": "array",
            "items": of(&list.ty())?,
            "minItems": list.len(),
            "maxItems": list.len(),
        }),
        Type::Map(map) => json!({
            "type": "array",
            "items": {
                "type": "array",
                "prefixItems": [of(&map.key())?, of(&map.value())?],
                "minItems": 2,
                "maxItems": 2,
            },
        }),
        Type::Record(record) => {
            let mut properties = Map::new();
            let mut required = Vec::new();
            for field in record.fields() {
                properties.insert(field.name.to_owned(), of(&field.ty)?);
                if !matches!(field.ty, Type::Option(_)) {
                    required.push(field.name.to_owned());
                }
            }
            json!({
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            })
        }
        Type::Tuple(tuple) => {
            let items = tuple
                .types()
                .map(|t| of(&t))
                .collect::<Result<Vec<_>, _>>()?;
            json!({
                "type": "array",
                "prefixItems": items,
                "minItems": items.len(),
                "maxItems": items.len(),
            })
        }
        Type::Variant(variant) => {
            let cases = variant
                .cases()
                .map(|case| {
                    Ok(match case.ty {
                        None => tagged(case.name, None),
                        Some(payload) => tagged(case.name, Some(of(&payload)?)),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            json!({ "oneOf": cases })
        }
        Type::Enum(cases) => json!({ "type": "string", "enum": cases.names().collect::<Vec<_>>() }),
        Type::Option(option) => json!({ "anyOf": [of(&option.ty())?, { "type": "null" }] }),
        Type::Result(result) => {
            let side = |name: &str, ty: Option<Type>| -> Result<Value, Unrepresentable> {
                let payload = match ty {
                    Some(ty) => of(&ty)?,
                    None => json!({ "type": "null" }),
                };
                Ok(json!({
                    "type": "object",
                    "properties": { name: payload },
                    "required": [name],
                    "additionalProperties": false,
                }))
            };
            json!({ "oneOf": [side("ok", result.ok())?, side("err", result.err())?] })
        }
        Type::Flags(flags) => {
            let properties: Map<String, Value> = flags
                .names()
                .map(|name| (name.to_owned(), json!({ "type": "boolean" })))
                .collect();
            json!({ "type": "object", "properties": properties, "additionalProperties": false })
        }
        Type::Own(_) | Type::Borrow(_) => return Err(Unrepresentable("a resource handle")),
        Type::Future(_) => return Err(Unrepresentable("a future")),
        Type::Stream(_) => return Err(Unrepresentable("a stream")),
        Type::ErrorContext => return Err(Unrepresentable("an error context")),
    })
}

fn integer(minimum: i128, maximum: i128) -> Value {
    json!({ "type": "integer", "minimum": minimum, "maximum": maximum })
}

fn tagged(case: &str, payload: Option<Value>) -> Value {
    match payload {
        None => json!({
            "type": "object",
            "properties": { "tag": { "const": case } },
            "required": ["tag"],
            "additionalProperties": false,
        }),
        Some(payload) => json!({
            "type": "object",
            "properties": { "tag": { "const": case }, "val": payload },
            "required": ["tag", "val"],
            "additionalProperties": false,
        }),
    }
}

/// A type as WIT writes it, for a tool's description.
pub fn wit(ty: &Type) -> String {
    match ty {
        Type::Bool => "bool".into(),
        Type::S8 => "s8".into(),
        Type::U8 => "u8".into(),
        Type::S16 => "s16".into(),
        Type::U16 => "u16".into(),
        Type::S32 => "s32".into(),
        Type::U32 => "u32".into(),
        Type::S64 => "s64".into(),
        Type::U64 => "u64".into(),
        Type::Float32 => "f32".into(),
        Type::Float64 => "f64".into(),
        Type::Char => "char".into(),
        Type::String => "string".into(),
        Type::List(list) => format!("list<{}>", wit(&list.ty())),
        Type::FixedLengthList(list) => format!("list<{}, {}>", wit(&list.ty()), list.len()),
        Type::Map(map) => format!("map<{}, {}>", wit(&map.key()), wit(&map.value())),
        Type::Record(record) => {
            let fields: Vec<String> = record
                .fields()
                .map(|f| format!("{}: {}", f.name, wit(&f.ty)))
                .collect();
            format!("record {{ {} }}", fields.join(", "))
        }
        Type::Tuple(tuple) => {
            let types: Vec<String> = tuple.types().map(|t| wit(&t)).collect();
            format!("tuple<{}>", types.join(", "))
        }
        Type::Variant(variant) => {
            let cases: Vec<String> = variant
                .cases()
                .map(|c| match c.ty {
                    Some(ty) => format!("{}({})", c.name, wit(&ty)),
                    None => c.name.to_owned(),
                })
                .collect();
            format!("variant {{ {} }}", cases.join(", "))
        }
        Type::Enum(cases) => format!(
            "enum {{ {} }}",
            cases.names().collect::<Vec<_>>().join(", ")
        ),
        Type::Option(option) => format!("option<{}>", wit(&option.ty())),
        Type::Result(result) => {
            let side = |ty: Option<Type>| ty.map_or("_".to_owned(), |t| wit(&t));
            format!("result<{}, {}>", side(result.ok()), side(result.err()))
        }
        Type::Flags(flags) => format!(
            "flags {{ {} }}",
            flags.names().collect::<Vec<_>>().join(", ")
        ),
        Type::Own(_) => "own<resource>".into(),
        Type::Borrow(_) => "borrow<resource>".into(),
        Type::Future(_) => "future".into(),
        Type::Stream(_) => "stream".into(),
        Type::ErrorContext => "error-context".into(),
    }
}
