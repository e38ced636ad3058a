//! SWF trace reader and workload generator (being written).
