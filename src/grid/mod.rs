//! Grid importers and generators (being written).
