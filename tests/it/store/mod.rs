//! The stores.

mod postgres;
