//! WfCommons instances (WfFormat JSON) read into one shape, whatever their schema version:
//! WfFormat 1.4 (`workflow.tasks[]`, each with its `files[]`, `runtimeInSeconds` and `cores`)
//! and 1.5 and later (`workflow.specification` for the graph and the files,
//! `workflow.execution.tasks[]` for runtimes and cores). WfCommons 1.6's generator writes the
//! latter. Source: the WfCommons project (Coleman, Casanova, Ferreira da Silva et al., "WfCommons:
//! A Framework for Enabling Scientific Workflow Research and Development", FGCS 2022) and its
//! WfFormat schema.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

/// One task of an instance, its graph resolved to indices.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// The task's id (1.5: `id`; 1.4: `id`, else `name`), unique in the instance.
    pub id: String,
    /// Measured run time in seconds (`runtimeInSeconds`), > 0.
    pub runtime_s: f64,
    /// Cores the task used (`coreCount` / `cores`; 1 when the instance does not say).
    pub cores: u32,
    /// Indices (into [`Instance::tasks`]) of the tasks this one depends on.
    pub parents: Vec<usize>,
}

/// An instance's tasks and the data on its edges.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// The instance's `name`, if any.
    pub name: Option<String>,
    /// The tasks in the instance's order.
    pub tasks: Vec<Task>,
    /// `(parent, child, bytes)`: the bytes of the files the parent writes and the child reads,
    /// for every edge in the order of the child's parents (0 when they share no file).
    pub edges: Vec<(usize, usize, u64)>,
}

/// Why an instance cannot be read; every message names the task it is about.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum WfFormatError {
    /// Not JSON, or not of WfFormat's shape.
    #[error("not a WfCommons instance (WfFormat 1.4 or 1.5 JSON): {0}")]
    Shape(String),
    /// Two tasks with one id.
    #[error("task `{0}` appears twice")]
    DuplicateTask(String),
    /// A parent that is no task of the instance.
    #[error("task `{task}`: its parent `{parent}` is not a task of the instance")]
    UnknownParent { task: String, parent: String },
    /// A task without a usable run time.
    #[error("task `{0}`: no runtimeInSeconds > 0 in the instance (a plan needs each job's length)")]
    NoRuntime(String),
    /// A task whose core count is not a number in `1 ..= 2^30`.
    #[error("task `{task}`: {cores} cores cannot be booked (a job needs 1 to 2^30 CPUs)")]
    BadCores { task: String, cores: f64 },
    /// An instance with no task.
    #[error("the instance has no task")]
    Empty,
}

#[derive(Deserialize)]
struct Document {
    name: Option<String>,
    workflow: Value,
}

/// WfFormat 1.5+: `workflow.specification`.
#[derive(Deserialize)]
struct Specification {
    tasks: Vec<SpecTask>,
    #[serde(default)]
    files: Vec<SpecFile>,
}

#[derive(Deserialize)]
struct SpecTask {
    id: String,
    #[serde(default)]
    parents: Vec<String>,
    #[serde(default, rename = "inputFiles")]
    input_files: Vec<String>,
    #[serde(default, rename = "outputFiles")]
    output_files: Vec<String>,
}

#[derive(Deserialize)]
struct SpecFile {
    id: String,
    #[serde(default, rename = "sizeInBytes")]
    size_bytes: f64,
}

/// WfFormat 1.5+: `workflow.execution`.
#[derive(Deserialize)]
struct Execution {
    #[serde(default)]
    tasks: Vec<ExecTask>,
}

#[derive(Deserialize)]
struct ExecTask {
    id: String,
    #[serde(rename = "runtimeInSeconds")]
    runtime_s: Option<f64>,
    #[serde(rename = "coreCount")]
    cores: Option<f64>,
}

/// WfFormat 1.4: `workflow.tasks[]`.
#[derive(Deserialize)]
struct Flat {
    tasks: Vec<FlatTask>,
}

#[derive(Deserialize)]
struct FlatTask {
    name: String,
    id: Option<String>,
    #[serde(default)]
    parents: Vec<String>,
    #[serde(default)]
    files: Vec<FlatFile>,
    #[serde(rename = "runtimeInSeconds", alias = "runtime")]
    runtime_s: Option<f64>,
    cores: Option<f64>,
}

#[derive(Deserialize)]
struct FlatFile {
    link: String,
    name: String,
    #[serde(rename = "sizeInBytes", alias = "size")]
    size_bytes: Option<f64>,
}

/// A task before its parents are resolved: id, run time, cores, parent references, and the
/// files it reads and writes with their sizes in bytes.
struct Raw {
    id: String,
    /// 1.4: the task's `name` (parents may name it); 1.5: its id.
    name: String,
    runtime_s: Option<f64>,
    cores: Option<f64>,
    parents: Vec<String>,
    inputs: Vec<(String, u64)>,
    outputs: Vec<(String, u64)>,
}

fn shape<T: serde::de::DeserializeOwned>(v: Value, what: &str) -> Result<T, WfFormatError> {
    serde_json::from_value(v).map_err(|e| WfFormatError::Shape(format!("{what}: {e}")))
}

/// Reads an instance from its JSON text.
///
/// # Errors
/// [`WfFormatError`]: not WfFormat's shape, a duplicate task, an unknown parent, a task without
/// a run time or with an impossible core count, no task at all.
pub fn parse(json: &str) -> Result<Instance, WfFormatError> {
    let doc: Document = serde_json::from_str(json).map_err(|e| WfFormatError::Shape(e.to_string()))?;
    let mut wf = doc.workflow;
    let raws = if let Some(spec) = wf.get_mut("specification").map(Value::take) {
        let spec: Specification = shape(spec, "workflow.specification")?;
        let exec: Execution = match wf.get_mut("execution").map(Value::take) {
            Some(e) => shape(e, "workflow.execution")?,
            None => Execution { tasks: vec![] },
        };
        let size: HashMap<String, u64> = spec.files.into_iter().map(|f| (f.id, bytes(f.size_bytes))).collect();
        let run: HashMap<String, ExecTask> = exec.tasks.into_iter().map(|t| (t.id.clone(), t)).collect();
        let sized = |ids: Vec<String>| {
            ids.into_iter().map(|f| (size.get(&f).copied().unwrap_or(0), f)).map(|(s, f)| (f, s)).collect()
        };
        spec.tasks
            .into_iter()
            .map(|t| {
                let e = run.get(&t.id);
                Raw {
                    runtime_s: e.and_then(|e| e.runtime_s),
                    cores: e.and_then(|e| e.cores),
                    parents: t.parents,
                    inputs: sized(t.input_files),
                    outputs: sized(t.output_files),
                    name: t.id.clone(),
                    id: t.id,
                }
            })
            .collect::<Vec<_>>()
    } else {
        let flat: Flat = shape(wf, "workflow")?;
        flat.tasks
            .into_iter()
            .map(|t| {
                let files = |link: &str| {
                    t.files
                        .iter()
                        .filter(|f| f.link == link)
                        .map(|f| (f.name.clone(), bytes(f.size_bytes.unwrap_or(0.0))))
                        .collect()
                };
                Raw {
                    inputs: files("input"),
                    outputs: files("output"),
                    runtime_s: t.runtime_s,
                    cores: t.cores,
                    parents: t.parents,
                    id: t.id.unwrap_or_else(|| t.name.clone()),
                    name: t.name,
                }
            })
            .collect()
    };
    resolve(doc.name, raws)
}

/// Bytes as a whole number (sizes are written as floats by some versions).
fn bytes(b: f64) -> u64 {
    if b.is_finite() && b > 0.0 {
        b.round() as u64
    } else {
        0
    }
}

/// Resolves parents (by id, then by name for 1.4 instances whose parents name tasks) and the
/// data on every edge.
fn resolve(name: Option<String>, raws: Vec<Raw>) -> Result<Instance, WfFormatError> {
    if raws.is_empty() {
        return Err(WfFormatError::Empty);
    }
    let mut index = HashMap::new();
    for (i, r) in raws.iter().enumerate() {
        if index.insert(r.id.clone(), i).is_some() {
            return Err(WfFormatError::DuplicateTask(r.id.clone()));
        }
    }
    // Parents by name where a name is one task's (1.4 instances name parents by name).
    let mut by_name: HashMap<&str, Option<usize>> = HashMap::new();
    for (i, r) in raws.iter().enumerate() {
        by_name.entry(&r.name).and_modify(|e| *e = None).or_insert(Some(i));
    }
    let mut tasks = Vec::with_capacity(raws.len());
    let mut edges = Vec::new();
    for (child, r) in raws.iter().enumerate() {
        let runtime_s =
            r.runtime_s.filter(|s| s.is_finite() && *s > 0.0).ok_or_else(|| WfFormatError::NoRuntime(r.id.clone()))?;
        let cores = r.cores.unwrap_or(1.0);
        if !(cores.is_finite() && cores >= 1.0 && cores.ceil() <= f64::from(1u32 << 30)) {
            return Err(WfFormatError::BadCores { task: r.id.clone(), cores });
        }
        let mut parents = Vec::with_capacity(r.parents.len());
        for p in &r.parents {
            let Some(parent) = index.get(p).copied().or_else(|| by_name.get(p.as_str()).copied().flatten()) else {
                return Err(WfFormatError::UnknownParent { task: r.id.clone(), parent: p.clone() });
            };
            if parents.contains(&parent) {
                continue;
            }
            parents.push(parent);
            let written = &raws[parent].outputs;
            let data = r.inputs.iter().filter(|(f, _)| written.iter().any(|(w, _)| w == f)).map(|(_, s)| s).sum();
            edges.push((parent, child, data));
        }
        tasks.push(Task { id: r.id.clone(), runtime_s, cores: cores.ceil() as u32, parents });
    }
    Ok(Instance { name, tasks, edges })
}
