mod bytes;
pub use self::bytes::BytesCodec;

mod length;
pub use self::length::LengthCodec;

mod lines;
pub use self::lines::LinesCodec;

#[cfg(feature = "json")]
mod json;
#[cfg(feature = "json")]
pub use self::json::{JsonCodec, JsonCodecError};

#[cfg(feature = "cbor")]
mod cbor;
#[cfg(feature = "cbor")]
pub use self::cbor::{CborCodec, CborCodecError};
