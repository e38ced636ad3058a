//! [`Algorithm`]: what a run simulates, a reservation method with a selection policy. It stays
//! typed from the scenario file to the outputs; only the CSV files and the figures' legends
//! spell it out, as its name `METHOD-POLICY`.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use coreserve::model::{ReservationMethod, SelectionPolicy, UnknownValue};

/// One algorithm: a reservation method and a selection policy, named `METHOD-POLICY`
/// (`bir-time`, `bbr-overlay-cost`, ...).
///
/// Ordered by name (byte-wise), the order of the rows of `runs.csv` and `summary.csv`; in
/// serde (scenario files, CSV rows) it is its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Algorithm {
    pub method: ReservationMethod,
    pub policy: SelectionPolicy,
}

impl Algorithm {
    /// The policies in the order of the paper's tables: time, cost, load, random.
    pub const POLICIES: [SelectionPolicy; 4] =
        [SelectionPolicy::Time, SelectionPolicy::Cost, SelectionPolicy::Load, SelectionPolicy::Random];
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.method, self.policy)
    }
}

impl FromStr for Algorithm {
    type Err = UnknownValue;
    /// `METHOD-POLICY`, e.g. `bir-time` or `bbr-overlay-cost`.
    fn from_str(s: &str) -> Result<Self, UnknownValue> {
        let (m, p) =
            s.rsplit_once('-').ok_or_else(|| UnknownValue::new("algorithm", s, "METHOD-POLICY, e.g. bir-time"))?;
        Ok(Algorithm { method: m.parse()?, policy: p.parse()? })
    }
}

impl Ord for Algorithm {
    fn cmp(&self, other: &Self) -> Ordering {
        self.to_string().cmp(&other.to_string())
    }
}

impl PartialOrd for Algorithm {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl serde::Serialize for Algorithm {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Algorithm {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <String as serde::Deserialize>::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// Tests compare an algorithm with its name.
#[cfg(test)]
impl PartialEq<&str> for Algorithm {
    fn eq(&self, name: &&str) -> bool {
        name.parse::<Algorithm>().is_ok_and(|a| a == *self)
    }
}

/// The 9 algorithms of the experiment: BBR and BIR with every policy (Ando & Aida), and
/// `bbr-overlay-time`, our step past the paper.
pub fn default_algorithms() -> Vec<Algorithm> {
    let mut v: Vec<Algorithm> = ReservationMethod::PAPER
        .iter()
        .flat_map(|&method| SelectionPolicy::ALL.iter().map(move |&policy| Algorithm { method, policy }))
        .collect();
    v.push(Algorithm { method: ReservationMethod::BbrOverlay, policy: SelectionPolicy::Time });
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_order_by_name() {
        let mut all: Vec<Algorithm> = default_algorithms();
        for a in &all {
            assert_eq!(a.to_string().parse::<Algorithm>().unwrap(), *a);
        }
        all.sort();
        let names: Vec<String> = all.iter().map(ToString::to_string).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert_eq!(names[..3], ["bbr-cost", "bbr-load", "bbr-overlay-time"]);
        assert!("bbr".parse::<Algorithm>().is_err());
    }
}
