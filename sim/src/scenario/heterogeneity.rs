//! The settings of `experiment = "heterogeneity"` (`crate::heterogeneous`) in a scenario.

/// How the `per-type` arm picks a queue when several site types can run a request (scenario
/// field `type_choice`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TypeChoice {
    /// At random, weighted by the types' CPUs (the default): each queue gets a share of the
    /// requests it can take in proportion to its capacity.
    #[default]
    Weighted,
    /// The type with the most CPUs (the "default partition"; ties: the first type by name).
    Largest,
}
