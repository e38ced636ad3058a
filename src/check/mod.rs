//! Outcome checker (being written).
