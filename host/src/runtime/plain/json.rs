//! Values of WIT types to and from the JSON [`super::schema`] describes.
//! Arguments that do not fit are refused naming where (`point.x: expected
//! an integer from 0 to 255, got -1`); a result is written within a byte
//! budget, so a function that returns a huge list is stopped while it is
//! written, not after.

use serde_json::{Map, Value};
use wasmtime::component::Val;
use wasmtime::component::types::Type;

/// Reads `value` (at `path`, for messages) as a value of `ty`.
pub fn to_val(ty: &Type, value: &Value, path: &str) -> Result<Val, String> {
    let expected = |what: &str| format!("{path}: expected {what}, got {}", shown(value));
    Ok(match ty {
        Type::Bool => Val::Bool(value.as_bool().ok_or_else(|| expected("true or false"))?),
        Type::S8 => Val::S8(integer(value, path)?),
        Type::U8 => Val::U8(integer(value, path)?),
        Type::S16 => Val::S16(integer(value, path)?),
        Type::U16 => Val::U16(integer(value, path)?),
        Type::S32 => Val::S32(integer(value, path)?),
        Type::U32 => Val::U32(integer(value, path)?),
        Type::S64 => Val::S64(integer(value, path)?),
        Type::U64 => Val::U64(integer(value, path)?),
        Type::Float32 => Val::Float32(value.as_f64().ok_or_else(|| expected("a number"))? as f32),
        Type::Float64 => Val::Float64(value.as_f64().ok_or_else(|| expected("a number"))?),
        Type::Char => {
            let text = value.as_str().ok_or_else(|| expected("one character"))?;
            let mut chars = text.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Val::Char(c),
                _ => return Err(expected("one character")),
            }
        }
        Type::String => Val::String(
            value
                .as_str()
                .ok_or_else(|| expected("a string"))?
                .to_owned(),
        ),
        Type::List(list) => {
            let items = value.as_array().ok_or_else(|| expected("an array"))?;
            let ty = list.ty();
            Val::List(elements(&ty, items, path)?)
        }
        Type::FixedLengthList(list) => {
            let items = value.as_array().ok_or_else(|| expected("an array"))?;
            if items.len() != list.len() as usize {
                return Err(expected(&format!("an array of {} items", list.len())));
            }
            Val::FixedLengthList(elements(&list.ty(), items, path)?)
        }
        Type::Map(map) => {
            let pairs = value
                .as_array()
                .ok_or_else(|| expected("an array of [key, value] pairs"))?;
            let (key, val) = (map.key(), map.value());
            let mut entries = Vec::with_capacity(pairs.len());
            for (i, pair) in pairs.iter().enumerate() {
                let here = format!("{path}[{i}]");
                match pair.as_array().map(Vec::as_slice) {
                    Some([k, v]) => entries.push((
                        to_val(&key, k, &format!("{here}[0]"))?,
                        to_val(&val, v, &format!("{here}[1]"))?,
                    )),
                    _ => {
                        return Err(format!(
                            "{here}: expected a [key, value] pair, got {}",
                            shown(pair)
                        ));
                    }
                }
            }
            Val::Map(entries)
        }
        Type::Record(record) => {
            let object = value.as_object().ok_or_else(|| expected("an object"))?;
            let mut fields = Vec::with_capacity(record.fields().len());
            for field in record.fields() {
                let here = join(path, field.name);
                let val = match (object.get(field.name), &field.ty) {
                    (None | Some(Value::Null), Type::Option(_)) => Val::Option(None),
                    (None, _) => return Err(format!("{here}: missing")),
                    (Some(value), ty) => to_val(ty, value, &here)?,
                };
                fields.push((field.name.to_owned(), val));
            }
            if let Some(unknown) = object
                .keys()
                .find(|k| !record.fields().any(|f| f.name == *k))
            {
                return Err(format!(
                    "{}: not a field of this record",
                    join(path, unknown)
                ));
            }
            Val::Record(fields)
        }
        Type::Tuple(tuple) => {
            let items = value.as_array().ok_or_else(|| expected("an array"))?;
            if items.len() != tuple.types().len() {
                return Err(expected(&format!(
                    "an array of {} items",
                    tuple.types().len()
                )));
            }
            let vals = tuple
                .types()
                .zip(items)
                .enumerate()
                .map(|(i, (ty, item))| to_val(&ty, item, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?;
            Val::Tuple(vals)
        }
        Type::Variant(variant) => {
            let names: Vec<&str> = variant.cases().map(|c| c.name).collect();
            let (tag, payload) = tagged(value, &names, path)?;
            let case = variant
                .cases()
                .find(|c| c.name == tag)
                .expect("tag checked");
            let payload = match (case.ty, payload) {
                (None, None) => None,
                (Some(ty), Some(payload)) => {
                    Some(Box::new(to_val(&ty, payload, &join(path, "val"))?))
                }
                (Some(_), None) => return Err(format!("{}: missing", join(path, "val"))),
                (None, Some(_)) => return Err(format!("{path}: case {tag:?} carries no \"val\"")),
            };
            Val::Variant(tag.to_owned(), payload)
        }
        Type::Enum(cases) => {
            let names: Vec<&str> = cases.names().collect();
            match value.as_str() {
                Some(name) if names.contains(&name) => Val::Enum(name.to_owned()),
                _ => return Err(expected(&format!("one of {}", names.join(", ")))),
            }
        }
        Type::Option(option) => match value {
            Value::Null => Val::Option(None),
            value => Val::Option(Some(Box::new(to_val(&option.ty(), value, path)?))),
        },
        Type::Result(result) => {
            let object = value.as_object().filter(|o| o.len() == 1);
            let (side, payload) = object
                .and_then(|o| o.iter().next())
                .ok_or_else(|| expected(r#"{"ok": …} or {"err": …}"#))?;
            let ty = match side.as_str() {
                "ok" => result.ok(),
                "err" => result.err(),
                _ => return Err(expected(r#"{"ok": …} or {"err": …}"#)),
            };
            let payload = match ty {
                Some(ty) => Some(Box::new(to_val(&ty, payload, &join(path, side))?)),
                None => None,
            };
            Val::Result(if side == "ok" {
                Ok(payload)
            } else {
                Err(payload)
            })
        }
        Type::Flags(flags) => {
            let object = value
                .as_object()
                .ok_or_else(|| expected("an object of booleans"))?;
            let names: Vec<&str> = flags.names().collect();
            let mut set = Vec::new();
            for (name, on) in object {
                if !names.contains(&name.as_str()) {
                    return Err(format!(
                        "{}: not a flag (flags: {})",
                        join(path, name),
                        names.join(", ")
                    ));
                }
                match on {
                    Value::Bool(true) => set.push(name.clone()),
                    Value::Bool(false) => {}
                    other => {
                        return Err(format!(
                            "{}: expected true or false, got {}",
                            join(path, name),
                            shown(other)
                        ));
                    }
                }
            }
            Val::Flags(set)
        }
        Type::Own(_) | Type::Borrow(_) | Type::Future(_) | Type::Stream(_) | Type::ErrorContext => {
            return Err(format!("{path}: has no JSON form"));
        }
    })
}

fn elements(ty: &Type, items: &[Value], path: &str) -> Result<Vec<Val>, String> {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| to_val(ty, item, &format!("{path}[{i}]")))
        .collect()
}

fn integer<T: TryFrom<i128> + Bounded>(value: &Value, path: &str) -> Result<T, String> {
    let whole = value
        .as_i64()
        .map(i128::from)
        .or_else(|| value.as_u64().map(i128::from));
    whole.and_then(|n| T::try_from(n).ok()).ok_or_else(|| {
        format!(
            "{path}: expected an integer from {} to {}, got {}",
            T::MIN,
            T::MAX,
            shown(value)
        )
    })
}

/// The range of an integer type, for messages.
trait Bounded {
    const MIN: i128;
    const MAX: i128;
}

macro_rules! bounded {
    ($($t:ty),*) => {$(
        impl Bounded for $t {
            const MIN: i128 = <$t>::MIN as i128;
            const MAX: i128 = <$t>::MAX as i128;
        }
    )*};
}
bounded!(i8, u8, i16, u16, i32, u32, i64, u64);

/// The case and payload of a variant written `{"tag": …, "val": …}`.
fn tagged<'a>(
    value: &'a Value,
    names: &[&str],
    path: &str,
) -> Result<(&'a str, Option<&'a Value>), String> {
    let cases = names.join(", ");
    let object = value.as_object().ok_or_else(|| {
        format!(
            "{path}: expected {{\"tag\": one of {cases}, \"val\": …}}, got {}",
            shown(value)
        )
    })?;
    let tag = object
        .get("tag")
        .and_then(Value::as_str)
        .filter(|tag| names.contains(tag))
        .ok_or_else(|| format!("{}: expected one of {cases}", join(path, "tag")))?;
    if let Some(unknown) = object.keys().find(|k| *k != "tag" && *k != "val") {
        return Err(format!(
            "{}: a variant has only \"tag\" and \"val\"",
            join(path, unknown)
        ));
    }
    Ok((tag, object.get("val")))
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

/// A value in a message: its JSON kind and, for a short scalar, itself.
fn shown(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.chars().count() <= 32 => format!("the string {s:?}"),
        Value::String(_) => "a string".into(),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// Takes `bytes` from `budget`, or fails once it is spent.
fn spend(budget: &mut usize, bytes: usize) -> Result<(), Unwritable> {
    *budget = budget.checked_sub(bytes).ok_or(Unwritable::OverBudget)?;
    Ok(())
}

/// Why a result cannot be written as JSON.
#[derive(Debug, PartialEq)]
pub enum Unwritable {
    /// It is too large to write within its budget.
    OverBudget,
    /// It holds a number JSON cannot carry: infinite, or not a number.
    /// (Written as `null`, an overflow would read as "nothing".)
    NonFinite(f64),
}

impl std::fmt::Display for Unwritable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unwritable::OverBudget => f.write_str("larger than the output limit"),
            Unwritable::NonFinite(x) if x.is_nan() => f.write_str(
                "not a number (as 0/0 or the square root of -1 gives), which JSON cannot carry",
            ),
            Unwritable::NonFinite(x) => write!(
                f,
                "{}infinite (beyond ±1.8e308: the computation overflowed), which JSON cannot carry",
                if *x < 0.0 { "minus " } else { "" }
            ),
        }
    }
}

/// A finite number as JSON.
fn number(x: f64) -> Result<Value, Unwritable> {
    serde_json::Number::from_f64(x)
        .map(Value::Number)
        .ok_or(Unwritable::NonFinite(x))
}

/// Writes `val` as JSON, spending from `budget` (bytes, roughly as the
/// JSON text will take them) and stopping once it is spent.
pub fn from_val(val: &Val, budget: &mut usize) -> Result<Value, Unwritable> {
    spend(budget, 8)?;
    Ok(match val {
        Val::Bool(b) => Value::Bool(*b),
        Val::S8(n) => (*n).into(),
        Val::U8(n) => (*n).into(),
        Val::S16(n) => (*n).into(),
        Val::U16(n) => (*n).into(),
        Val::S32(n) => (*n).into(),
        Val::U32(n) => (*n).into(),
        Val::S64(n) => (*n).into(),
        Val::U64(n) => (*n).into(),
        Val::Float32(x) => number(f64::from(*x))?,
        Val::Float64(x) => number(*x)?,
        Val::Char(c) => Value::String(c.to_string()),
        Val::String(s) => {
            spend(budget, s.len())?;
            Value::String(s.clone())
        }
        Val::List(items) | Val::Tuple(items) | Val::FixedLengthList(items) => Value::Array(
            items
                .iter()
                .map(|item| from_val(item, budget))
                .collect::<Result<_, _>>()?,
        ),
        Val::Map(entries) => {
            let mut pairs = Vec::with_capacity(entries.len());
            for (key, value) in entries {
                pairs.push(Value::Array(vec![
                    from_val(key, budget)?,
                    from_val(value, budget)?,
                ]));
            }
            Value::Array(pairs)
        }
        Val::Record(fields) => {
            let mut object = Map::new();
            for (name, value) in fields {
                spend(budget, name.len())?;
                object.insert(name.clone(), from_val(value, budget)?);
            }
            Value::Object(object)
        }
        Val::Variant(tag, payload) => {
            spend(budget, tag.len())?;
            let mut object = Map::from_iter([("tag".to_owned(), Value::String(tag.clone()))]);
            if let Some(payload) = payload {
                object.insert("val".to_owned(), from_val(payload, budget)?);
            }
            Value::Object(object)
        }
        Val::Enum(name) => {
            spend(budget, name.len())?;
            Value::String(name.clone())
        }
        Val::Option(None) => Value::Null,
        Val::Option(Some(value)) => from_val(value, budget)?,
        Val::Result(result) => {
            let (side, payload) = match result {
                Ok(payload) => ("ok", payload),
                Err(payload) => ("err", payload),
            };
            let payload = match payload {
                Some(payload) => from_val(payload, budget)?,
                None => Value::Null,
            };
            Value::Object(Map::from_iter([(side.to_owned(), payload)]))
        }
        Val::Flags(names) => {
            let mut object = Map::new();
            for name in names {
                spend(budget, name.len())?;
                object.insert(name.clone(), Value::Bool(true));
            }
            Value::Object(object)
        }
        // Functions with these in their results are not tools.
        Val::Resource(_) | Val::Future(_) | Val::Stream(_) | Val::ErrorContext(_) => Value::Null,
    })
}
