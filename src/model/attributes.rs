//! Heterogeneous sites and what a job requires of them (docs/model.md, "Heterogeneous sites").
//!
//! Sites differ in processor architecture and generation, instruction-set extensions, GPUs and
//! installed software; a job may require any of these. Matching is a hard filter applied before
//! any selection policy, after Saito & Hirotsu's heterogeneous multi-cluster scheduler: a site
//! that fails one requirement is never a candidate ([`unmet`]). Software counts only when what
//! it depends on is installed too, and when the site's hardware meets the package's own
//! constraints (their example: TensorFlow 1.5 and later runs only with a GPU of compute
//! capability 3.5 or more, on a CPU with AVX).
//!
//! Every attribute has a default, so a grid written before sites had attributes is still valid:
//! `x86_64`, no generation, no extensions, no GPUs, no software, no labels, GPUs free of charge.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_with::{DeserializeFromStr, SerializeDisplay};

use super::limits::{price_ok, MAX_AMOUNT};
use super::text::{check_text, TextError};
use super::ComputeDemand;

/// Processor architecture of a site (and of a job's requirement).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[derive(Serialize, Deserialize, utoipa::ToSchema)]
#[derive(strum::Display, strum::EnumString, strum::AsRefStr, strum::VariantArray)]
pub enum Arch {
    /// 64-bit x86 (Intel, AMD): the default.
    #[default]
    #[serde(rename = "x86_64")]
    #[strum(serialize = "x86_64")]
    X86_64,
    /// 64-bit ARM.
    #[serde(rename = "aarch64")]
    #[strum(serialize = "aarch64")]
    Aarch64,
    /// 64-bit little-endian POWER.
    #[serde(rename = "ppc64le")]
    #[strum(serialize = "ppc64le")]
    Ppc64le,
}

impl Arch {
    fn is_default(&self) -> bool {
        *self == Arch::default()
    }
}

/// A pool of identical GPUs at a site, reserved in advance by count like CPUs (one capacity
/// calendar per pool).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuPool {
    /// Model name, unique within the site, e.g. `a100-40gb`.
    pub model: String,
    /// Number of GPUs, in `1 ..= MAX_AMOUNT`.
    #[schema(minimum = 1, maximum = 1073741824)]
    pub count: u32,
    /// CUDA compute capability (or the vendor's equivalent), e.g. `8.0`; finite, `>= 0`.
    #[schema(minimum = 0)]
    pub compute_capability: f64,
    /// Memory of one GPU in GiB.
    pub memory_gib: u32,
}

/// A software package installed at a site.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Package {
    /// Package name (`[A-Za-z0-9_.+-]`, 1-128 characters), compared case-insensitively.
    pub name: String,
    /// Installed version, semantic versioning; missing parts count as 0 (`2.12` is `2.12.0`).
    #[schema(value_type = String, example = "2.13.1")]
    pub version: Version,
    /// What it needs installed to work, each `NAME [VERSION-REQUIREMENT]`, e.g. `cuda >=11.8`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<String>, example = json!(["cuda >=11.8", "cudnn"]))]
    pub depends: Vec<SoftwareRequirement>,
    /// Instruction-set extensions the package needs on the site's CPUs (e.g. `avx`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs_extensions: Vec<String>,
    /// Least GPU compute capability the package needs; the site must have a GPU pool with at
    /// least this much.
    pub needs_gpu_compute_capability: Option<f64>,
}

/// The attributes of a heterogeneous site, beside its CPUs, OS and price (every field has a
/// default; JSON: flattened into the site).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SiteAttributes {
    /// Processor architecture; default `x86_64`.
    #[serde(default, skip_serializing_if = "Arch::is_default")]
    pub arch: Arch,
    /// Processor generation within its architecture (a larger number is newer), when known.
    pub cpu_generation: Option<u32>,
    /// Instruction-set extensions of the site's CPUs, e.g. `sse4_2`, `avx2`, `avx512f`, `sve`
    /// (compared case-insensitively).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    /// GPU pools (model names unique within the site).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuPool>,
    /// Price of one GPU for one hour, in `0 ..= MAX_PRICE`; default 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub price_per_gpu_hour: f64,
    /// Installed software.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub software: Vec<Package>,
    /// Free labels (e.g. `ssd`, `infiniband`), compared case-insensitively.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
}

/// Why site attributes, a job's requirements, a version or a software requirement were refused.
/// Each variant names the field (its JSON path, e.g. `requires.gpus.count` or
/// `` gpus: `A100`: count ``) and the bad value where it helps.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttributeError {
    /// A text value (extension, label, GPU model) fails [`check_text`].
    #[error("{field}: `{value}`: {reason}")]
    BadText { field: String, value: String, reason: TextError },
    /// A GPU count outside `1 ..= MAX_AMOUNT`.
    #[error("{field} must be in 1..={MAX_AMOUNT} (got {value})")]
    BadCount { field: String, value: u32 },
    /// A compute capability that is not a finite number `>= 0`.
    #[error("{field} must be a finite number >= 0")]
    BadCapability { field: String },
    /// `price_per_gpu_hour` outside `0 ..= MAX_PRICE`.
    #[error("price_per_gpu_hour must be a finite number in 0..=1000000")]
    BadPrice,
    /// Two GPU pools of one site with the same model (case-insensitive).
    #[error("gpus: duplicate model `{0}`")]
    DuplicateGpuModel(String),
    /// A version semver cannot read (after padding `2.12` to `2.12.0`); `reason` is semver's.
    #[error("version `{value}`: {reason}")]
    BadVersion { value: String, reason: String },
    /// A package name outside 1-128 characters of `A-Z a-z 0-9 _ . + -`.
    #[error("software `{0}`: the name must be 1-128 characters of A-Z a-z 0-9 _ . + -")]
    BadPackageName(String),
    /// A version requirement semver cannot read; `reason` is semver's.
    #[error("software `{value}`: {reason}")]
    BadVersionRequirement { value: String, reason: String },
    /// An installed package whose name and version do not make a valid requirement.
    #[error("software: {0}")]
    BadPackage(Box<AttributeError>),
}

/// Checks every value of the list `field` with [`check_text`].
fn check_texts(field: &str, values: &[String]) -> Result<(), AttributeError> {
    for v in values {
        check_text(v).map_err(|reason| AttributeError::BadText {
            field: field.to_owned(),
            value: v.escape_debug().to_string(),
            reason,
        })?;
    }
    Ok(())
}

fn check_count(field: impl Into<String>, count: u32) -> Result<(), AttributeError> {
    if count == 0 || u64::from(count) > MAX_AMOUNT {
        return Err(AttributeError::BadCount { field: field.into(), value: count });
    }
    Ok(())
}

fn check_capability(field: impl Into<String>, c: f64) -> Result<(), AttributeError> {
    if !c.is_finite() || c < 0.0 {
        return Err(AttributeError::BadCapability { field: field.into() });
    }
    Ok(())
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// GPUs a job needs: `count` GPUs of one pool that meets every bound.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuDemand {
    /// GPUs to reserve, in `1 ..= MAX_AMOUNT`.
    #[schema(minimum = 1, maximum = 1073741824)]
    pub count: u32,
    /// Least compute capability, e.g. `3.5`.
    pub min_compute_capability: Option<f64>,
    /// Least memory per GPU in GiB.
    pub min_memory_gib: Option<u32>,
    /// This model only (case-insensitive).
    pub model: Option<String>,
}

impl GpuDemand {
    /// True when `pool` meets every bound (its size is checked by the calendars, not here).
    pub fn accepts(&self, pool: &GpuPool) -> bool {
        self.min_compute_capability.is_none_or(|c| pool.compute_capability >= c)
            && self.min_memory_gib.is_none_or(|m| pool.memory_gib >= m)
            && self.model.as_ref().is_none_or(|m| pool.model.eq_ignore_ascii_case(m))
    }
}

/// What a job requires of the site it runs on (the `requires` object of a job). Every field is
/// optional; an empty object requires nothing beyond the job's OS and CPUs.
///
/// Example (Saito & Hirotsu's): `{"software": ["tensorflow >=1.5"], "extensions": ["avx"],
/// "gpus": {"count": 1, "min_compute_capability": 3.5}}`.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Requirements {
    /// Processor architecture.
    pub arch: Option<Arch>,
    /// Least processor generation (a site without a known generation fails it).
    pub min_cpu_generation: Option<u32>,
    /// Instruction-set extensions the site's CPUs must all have.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    /// GPUs to reserve with the CPUs.
    pub gpus: Option<GpuDemand>,
    /// Software, each `NAME [VERSION-REQUIREMENT]` with a semantic-versioning requirement, e.g.
    /// `tensorflow >=2.12, <3`; it counts only with its dependencies installed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<String>, example = json!(["tensorflow >=2.12, <3"]))]
    pub software: Vec<SoftwareRequirement>,
    /// Labels the site must all have.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
}

impl Requirements {
    /// True when nothing is required.
    pub fn is_empty(&self) -> bool {
        *self == Requirements::default()
    }

    /// GPUs to reserve (0 without a GPU demand).
    pub fn gpu_count(&self) -> u32 {
        self.gpus.as_ref().map_or(0, |g| g.count)
    }

    /// Checks the requirement's own values (not a site): text fields valid, a GPU count in
    /// `1 ..= MAX_AMOUNT`, capabilities finite and `>= 0`.
    ///
    /// # Errors
    /// An [`AttributeError`] naming the bad field.
    pub fn validate(&self) -> Result<(), AttributeError> {
        check_texts("requires.extensions", &self.extensions)?;
        check_texts("requires.labels", &self.labels)?;
        if let Some(g) = &self.gpus {
            check_count("requires.gpus.count", g.count)?;
            if let Some(c) = g.min_compute_capability {
                check_capability("requires.gpus.min_compute_capability", c)?;
            }
            if let Some(m) = &g.model {
                check_texts("requires.gpus.model", std::slice::from_ref(m))?;
            }
        }
        Ok(())
    }
}

/// A semantic version, read leniently: `2`, `2.12` and `2.12.0` are the same version.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, SerializeDisplay, DeserializeFromStr)]
pub struct Version(semver::Version);

impl FromStr for Version {
    type Err = AttributeError;
    fn from_str(s: &str) -> Result<Self, AttributeError> {
        let s = s.trim();
        let core_len = s.find(['-', '+']).unwrap_or(s.len());
        let dots = s[..core_len].matches('.').count();
        let padded = format!("{}{}{}", &s[..core_len], ".0".repeat(2usize.saturating_sub(dots)), &s[core_len..]);
        semver::Version::parse(&padded)
            .map(Version)
            .map_err(|e| AttributeError::BadVersion { value: s.escape_debug().to_string(), reason: e.to_string() })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A package name and the versions that satisfy it: `NAME [REQUIREMENT]`, the requirement in
/// semantic-versioning syntax (comparators joined by commas, e.g. `>=2.12, <3`; none: any
/// version).
#[derive(Debug, Clone, PartialEq, SerializeDisplay, DeserializeFromStr)]
pub struct SoftwareRequirement {
    /// The package name (lowercased).
    pub name: String,
    /// The acceptable versions.
    pub versions: semver::VersionReq,
}

impl FromStr for SoftwareRequirement {
    type Err = AttributeError;
    fn from_str(s: &str) -> Result<Self, AttributeError> {
        let s = s.trim();
        let (name, req) = s.split_once(char::is_whitespace).unwrap_or((s, ""));
        let req = req.trim();
        if name.is_empty() || name.len() > 128 || !name.chars().all(|c| c.is_ascii_alphanumeric() || "_.+-".contains(c))
        {
            return Err(AttributeError::BadPackageName(s.escape_debug().to_string()));
        }
        let versions = if req.is_empty() {
            semver::VersionReq::STAR
        } else {
            semver::VersionReq::parse(req).map_err(|e| AttributeError::BadVersionRequirement {
                value: s.escape_debug().to_string(),
                reason: e.to_string(),
            })?
        };
        Ok(SoftwareRequirement { name: name.to_ascii_lowercase(), versions })
    }
}

impl fmt::Display for SoftwareRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.versions == semver::VersionReq::STAR {
            f.write_str(&self.name)
        } else {
            write!(f, "{} {}", self.name, self.versions)
        }
    }
}

impl SoftwareRequirement {
    fn accepts(&self, p: &Package) -> bool {
        p.name.eq_ignore_ascii_case(&self.name) && self.versions.matches(&p.version.0)
    }
}

/// The first requirement of a job that a site fails (what a rejection names).
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "requirement", content = "wanted", rename_all = "snake_case")]
pub enum Unmet {
    #[error("OS {0}")]
    Os(String),
    #[error("{0} CPUs")]
    Cpus(u32),
    #[error("architecture {0}")]
    Arch(Arch),
    #[error("CPU generation >= {0}")]
    CpuGeneration(u32),
    #[error("instruction-set extension {0}")]
    Extension(String),
    #[error("{0}")]
    Gpus(String),
    #[error("software {0} (with its dependencies)")]
    Software(String),
    #[error("label {0}")]
    Label(String),
}

impl Unmet {
    /// Position in the order requirements are checked: a larger rank means the site met more
    /// (used to name the nearest miss).
    pub fn rank(&self) -> u8 {
        match self {
            Unmet::Os(_) => 0,
            Unmet::Cpus(_) => 1,
            Unmet::Arch(_) => 2,
            Unmet::CpuGeneration(_) => 3,
            Unmet::Extension(_) => 4,
            Unmet::Gpus(_) => 5,
            Unmet::Software(_) => 6,
            Unmet::Label(_) => 7,
        }
    }
}

/// The first requirement of `demand` (OS, CPUs, then `requires` in field order) that `site`
/// fails, or `None` when the site can run the job. OS names, extensions and labels compare
/// case-insensitively.
pub fn unmet(site: &super::Site, demand: &ComputeDemand) -> Option<Unmet> {
    if !site.os.eq_ignore_ascii_case(&demand.os) {
        return Some(Unmet::Os(demand.os.clone()));
    }
    if site.cpus < demand.cpus {
        return Some(Unmet::Cpus(demand.cpus));
    }
    let (a, r) = (&site.attributes, &demand.requires);
    if let Some(arch) = r.arch.filter(|&arch| arch != a.arch) {
        return Some(Unmet::Arch(arch));
    }
    if let Some(g) = r.min_cpu_generation.filter(|&g| a.cpu_generation.is_none_or(|have| have < g)) {
        return Some(Unmet::CpuGeneration(g));
    }
    if let Some(x) = r.extensions.iter().find(|x| !has(&a.extensions, x)) {
        return Some(Unmet::Extension(x.to_ascii_lowercase()));
    }
    if let Some(g) = &r.gpus {
        if !a.gpus.iter().any(|p| g.accepts(p) && p.count >= g.count) {
            return Some(Unmet::Gpus(describe_gpus(g)));
        }
    }
    if !r.software.is_empty() {
        let mut usable = Usable::new(a);
        if let Some(s) = r.software.iter().find(|s| !usable.satisfied(s)) {
            return Some(Unmet::Software(s.to_string()));
        }
    }
    r.labels.iter().find(|l| !has(&a.labels, l)).map(|l| Unmet::Label(l.to_ascii_lowercase()))
}

fn has(set: &[String], x: &str) -> bool {
    set.iter().any(|s| s.eq_ignore_ascii_case(x))
}

fn describe_gpus(g: &GpuDemand) -> String {
    let mut s = format!("{} GPU{}", g.count, if g.count == 1 { "" } else { "s" });
    if let Some(m) = &g.model {
        s += &format!(" of model {m}");
    }
    if let Some(c) = g.min_compute_capability {
        s += &format!(" with compute capability >= {c}");
    }
    if let Some(m) = g.min_memory_gib {
        s += &format!(" with >= {m} GiB");
    }
    s
}

/// Which installed packages work at a site: the package's hardware needs are met and every
/// dependency is satisfied by a package that works (recursively; a dependency cycle among
/// installed packages counts as satisfied).
struct Usable<'a> {
    site: &'a SiteAttributes,
    /// Index into `site.software` -> works (`None` while being decided: a cycle).
    memo: HashMap<usize, Option<bool>>,
}

impl<'a> Usable<'a> {
    fn new(site: &'a SiteAttributes) -> Self {
        Usable { site, memo: HashMap::new() }
    }

    fn satisfied(&mut self, req: &SoftwareRequirement) -> bool {
        let site = self.site;
        (0..site.software.len()).any(|i| req.accepts(&site.software[i]) && self.works(i))
    }

    fn works(&mut self, i: usize) -> bool {
        match self.memo.get(&i) {
            Some(Some(done)) => return *done,
            Some(None) => return true, // a cycle: assume it holds (coinductively)
            None => {}
        }
        self.memo.insert(i, None);
        let site = self.site;
        let p = &site.software[i];
        let hardware = p.needs_extensions.iter().all(|x| has(&site.extensions, x))
            && p.needs_gpu_compute_capability.is_none_or(|c| site.gpus.iter().any(|g| g.compute_capability >= c));
        let ok = hardware && p.depends.iter().all(|d| self.satisfied(d));
        self.memo.insert(i, Some(ok));
        ok
    }
}

impl SiteAttributes {
    /// Checks the attributes: text fields valid, GPU models unique with counts in
    /// `1 ..= MAX_AMOUNT` and finite capabilities, package names valid, the GPU price in
    /// `0 ..= MAX_PRICE`.
    ///
    /// # Errors
    /// An [`AttributeError`] naming the bad field.
    pub fn validate(&self) -> Result<(), AttributeError> {
        let a = self;
        check_texts("extensions", &a.extensions)?;
        check_texts("labels", &a.labels)?;
        if !price_ok(a.price_per_gpu_hour) {
            return Err(AttributeError::BadPrice);
        }
        let mut models = std::collections::HashSet::new();
        for g in &a.gpus {
            check_texts("gpus: model", std::slice::from_ref(&g.model))?;
            if !models.insert(g.model.to_ascii_lowercase()) {
                return Err(AttributeError::DuplicateGpuModel(g.model.clone()));
            }
            check_count(format!("gpus: `{}`: count", g.model), g.count)?;
            check_capability(format!("gpus: `{}`: compute_capability", g.model), g.compute_capability)?;
        }
        for p in &a.software {
            format!("{} ={}", p.name, p.version)
                .parse::<SoftwareRequirement>()
                .map_err(|e| AttributeError::BadPackage(Box::new(e)))?;
            if let Some(c) = p.needs_gpu_compute_capability {
                check_capability(format!("software: `{}`: needs_gpu_compute_capability", p.name), c)?;
            }
        }
        Ok(())
    }

    /// The pool of GPU model `model` (case-insensitive), with its index.
    pub fn gpu_pool(&self, model: &str) -> Option<(usize, &GpuPool)> {
        self.gpus.iter().enumerate().find(|(_, g)| g.model.eq_ignore_ascii_case(model))
    }
}

#[cfg(test)]
mod tests;
