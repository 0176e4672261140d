//! A unit converter as a new user writes one with `agentsite new`: units
//! are symbols (`km`, `lb`, `c`), a conversion echoes what it was given
//! beside its result, and a unit it does not know is refused with the list
//! of those it does.

use agentsite_sdk::agent;
use schemars::JsonSchema;
use serde::Serialize;

struct UnitConvert;

/// What a unit measures, and how many base units (metres, kilograms,
/// litres) one of it is. Temperatures convert through Celsius.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Length,
    Mass,
    Volume,
    Temperature,
}

const UNITS: &[(&str, Kind, f64)] = &[
    ("mm", Kind::Length, 0.001),
    ("cm", Kind::Length, 0.01),
    ("m", Kind::Length, 1.0),
    ("km", Kind::Length, 1000.0),
    ("in", Kind::Length, 0.0254),
    ("ft", Kind::Length, 0.3048),
    ("yd", Kind::Length, 0.9144),
    ("mi", Kind::Length, 1609.344),
    ("g", Kind::Mass, 0.001),
    ("kg", Kind::Mass, 1.0),
    ("oz", Kind::Mass, 0.028349523125),
    ("lb", Kind::Mass, 0.45359237),
    ("ml", Kind::Volume, 0.001),
    ("l", Kind::Volume, 1.0),
    ("gal", Kind::Volume, 3.785411784),
    ("c", Kind::Temperature, 1.0),
    ("f", Kind::Temperature, 1.0),
    ("k", Kind::Temperature, 1.0),
];

fn unit(symbol: &str) -> Result<(Kind, f64), String> {
    let wanted = symbol.trim().to_lowercase();
    UNITS
        .iter()
        .find(|(s, _, _)| *s == wanted)
        .map(|(_, kind, factor)| (*kind, *factor))
        .ok_or_else(|| {
            let known: Vec<&str> = UNITS.iter().map(|(s, _, _)| *s).collect();
            format!("unknown unit {symbol:?}; known units: {}", known.join(", "))
        })
}

fn to_celsius(value: f64, symbol: &str) -> f64 {
    match symbol {
        "f" => (value - 32.0) * 5.0 / 9.0,
        "k" => value - 273.15,
        _ => value,
    }
}

fn from_celsius(value: f64, symbol: &str) -> f64 {
    match symbol {
        "f" => value * 9.0 / 5.0 + 32.0,
        "k" => value + 273.15,
        _ => value,
    }
}

/// A conversion and its result.
#[derive(Serialize, JsonSchema)]
struct Conversion {
    /// The amount given.
    amount: f64,
    /// The unit it was given in.
    from_unit: String,
    /// The unit it was converted to.
    to_unit: String,
    /// The amount in `to_unit`, rounded to 4 decimals.
    result: f64,
}

/// Converts amounts between units of length, mass, volume and temperature.
#[agent(tags = ["units", "conversion", "measurement"])]
impl UnitConvert {
    /// Convert an amount from one unit to another of the same kind. Units
    /// are symbols: mm, cm, m, km, in, ft, yd, mi (length); g, kg, oz, lb
    /// (mass); ml, l, gal (volume); c, f, k (temperature).
    #[tool(read_only, idempotent)]
    fn convert(
        /// The amount to convert.
        amount: f64,
        /// The unit symbol of the amount, such as km.
        from_unit: String,
        /// The unit symbol to convert to, such as mi.
        to_unit: String,
    ) -> Result<Conversion, String> {
        let (from_kind, from_factor) = unit(&from_unit)?;
        let (to_kind, to_factor) = unit(&to_unit)?;
        if from_kind != to_kind {
            return Err(format!(
                "cannot convert {from_unit} to {to_unit}: they measure different things"
            ));
        }
        let (from, to) = (
            from_unit.trim().to_lowercase(),
            to_unit.trim().to_lowercase(),
        );
        let converted = if from_kind == Kind::Temperature {
            from_celsius(to_celsius(amount, &from), &to)
        } else {
            amount * from_factor / to_factor
        };
        Ok(Conversion {
            amount,
            from_unit,
            to_unit,
            result: (converted * 10_000.0).round() / 10_000.0,
        })
    }
}
