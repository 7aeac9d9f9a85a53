//! Python semantics the official scorers rely on: `str.strip`, `\s`/`\w`, `round`, `math.fsum`, `json.dumps`.
//!
//! The official scripts are Python; their numbers depend on Python's definitions of
//! whitespace, word characters, rounding and float printing. This module states those
//! definitions once so every metric uses the same ones.

pub mod json;
pub mod num;
pub mod text;
