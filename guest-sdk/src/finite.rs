//! Finds a number JSON cannot carry in a result before it is written.
//!
//! serde_json writes an infinite or not-a-number float as `null`, so a sum
//! that overflowed would reach the caller as "nothing". The result is
//! walked once with a serializer that writes nothing and stops at the first
//! such number.

use serde::Serialize;
use serde::ser;

/// The first infinite or not-a-number float in `value`, if any.
pub fn first_non_finite<T: Serialize + ?Sized>(value: &T) -> Option<f64> {
    match value.serialize(Walk) {
        Err(Found(found)) => found,
        Ok(()) => None,
    }
}

/// Stops the walk: `Some` at a non-finite number, `None` where a type
/// failed to serialize on its own (serde_json then says so).
#[derive(Debug)]
struct Found(Option<f64>);

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl std::error::Error for Found {}

impl ser::Error for Found {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Found(None)
    }
}

struct Walk;

fn float(x: f64) -> Result<(), Found> {
    if x.is_finite() {
        Ok(())
    } else {
        Err(Found(Some(x)))
    }
}

/// The scalar methods, which look at nothing but floats.
macro_rules! nothing_to_see {
    ($($method:ident($type:ty)),* $(,)?) => {
        $(fn $method(self, _: $type) -> Result<(), Found> { Ok(()) })*
    };
}

impl ser::Serializer for Walk {
    type Ok = ();
    type Error = Found;
    type SerializeSeq = Walk;
    type SerializeTuple = Walk;
    type SerializeTupleStruct = Walk;
    type SerializeTupleVariant = Walk;
    type SerializeMap = Walk;
    type SerializeStruct = Walk;
    type SerializeStructVariant = Walk;

    nothing_to_see!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str),
    );

    fn serialize_f32(self, x: f32) -> Result<(), Found> {
        float(f64::from(x))
    }
    fn serialize_f64(self, x: f64) -> Result<(), Found> {
        float(x)
    }
    fn serialize_none(self) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Found> {
        value.serialize(Walk)
    }
    fn serialize_unit(self) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Found> {
        value.serialize(Walk)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<(), Found> {
        value.serialize(Walk)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Walk, Found> {
        Ok(Walk)
    }
    fn serialize_tuple(self, _: usize) -> Result<Walk, Found> {
        Ok(Walk)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Walk, Found> {
        Ok(Walk)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Walk, Found> {
        Ok(Walk)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Walk, Found> {
        Ok(Walk)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Walk, Found> {
        Ok(Walk)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Walk, Found> {
        Ok(Walk)
    }
}

/// Each part of a compound value is walked in turn.
macro_rules! compound {
    ($($trait:ident :: $method:ident $(($key:ty))?),* $(,)?) => {
        $(
            impl ser::$trait for Walk {
                type Ok = ();
                type Error = Found;
                fn $method<T: Serialize + ?Sized>(&mut self, $(_: $key,)? value: &T) -> Result<(), Found> {
                    value.serialize(Walk)
                }
                fn end(self) -> Result<(), Found> {
                    Ok(())
                }
            }
        )*
    };
}

compound!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
    SerializeStruct::serialize_field(&'static str),
    SerializeStructVariant::serialize_field(&'static str),
);

impl ser::SerializeMap for Walk {
    type Ok = ();
    type Error = Found;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Found> {
        key.serialize(Walk)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Found> {
        value.serialize(Walk)
    }
    fn end(self) -> Result<(), Found> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn non_finite_numbers_are_found_wherever_they_are() {
        assert_eq!(first_non_finite(&1.5f64), None);
        assert_eq!(first_non_finite(&f64::INFINITY), Some(f64::INFINITY));
        assert!(first_non_finite(&f64::NAN).unwrap().is_nan());
        assert_eq!(
            first_non_finite(&vec![1.0f32, f32::NEG_INFINITY]),
            Some(f64::NEG_INFINITY)
        );
        let nested: BTreeMap<&str, Option<(i32, f64)>> =
            BTreeMap::from([("a", Some((1, 2.0))), ("b", Some((3, f64::MAX * 2.0)))]);
        assert_eq!(first_non_finite(&nested), Some(f64::INFINITY));
        assert_eq!(first_non_finite(&("text", -0.0f64, [1u8, 2])), None);
    }
}
