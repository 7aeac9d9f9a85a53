//! Merged tables (placeholder until the report lands).
