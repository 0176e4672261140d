//! The node's one HTTP edge. Every HTTP surface (MCP, `/v1`, A2A, the goals
//! API, the pages, the control API) stands on what is here, and nothing
//! here knows those surfaces:
//!
//! - [`connections`]: the front end's connections, how many, from whom and
//!   for how long, and the Host/Origin rules checked once per request;
//! - [`guard`]: those rules (against DNS rebinding and cross-site requests);
//! - [`token`]: the node's bearer token where a route asks for it, and the
//!   error body each family of clients reads;
//! - [`body_limit`]: a request body read whole up to a limit;
//! - [`streams`]: server-sent events and newline-delimited JSON;
//! - [`json_error`]: a JSON API's refusal, and why a body is not one;
//! - [`bounded`]: the body of an answer from a server the node does not
//!   trust, read up to a bound;
//! - [`destination`]: where no request the node makes may go (link-local
//!   and metadata addresses);
//! - [`write_idle`]: a connection whose client stops reading its response;
//! - [`options`]: where and how the node serves.
//!
//! A new endpoint is a router of its own domain's, put behind a
//! [`token::Gate`] if it needs the token and merged where the server is
//! assembled; it gets the connection bounds and the Host/Origin rules
//! without asking.

pub(crate) mod body_limit;
pub(crate) mod bounded;
pub(crate) mod connections;
pub mod destination;
pub(crate) mod guard;
mod idle_body;
pub(crate) mod json_error;
pub(crate) mod options;
pub(crate) mod streams;
pub mod token;
pub(crate) mod write_idle;

pub use options::HttpOptions;
