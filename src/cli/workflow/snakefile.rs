//! A Snakefile of a plan request's DAG (`coreserve workflow import --snakefile`): one rule per
//! job whose task sleeps the job's `duration_s` and touches a marker file its successors read,
//! so that Snakemake infers the same dependencies as the request's `after`. Each rule carries
//! what the coreserve executor plugin books from: `threads` (the job's CPUs), `runtime_s` (its
//! length) and `coreserve_job` (its name in the plan).

use std::collections::HashMap;
use std::fmt::Write;

use serde_json::Value;

/// A Python identifier for job `name`, unique among those in `taken`.
fn rule_name(name: &str, taken: &mut HashMap<String, usize>) -> String {
    let base: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let base = format!("t_{base}");
    let n = taken.entry(base.clone()).or_insert(0);
    *n += 1;
    if *n == 1 {
        base
    } else {
        format!("{base}_{n}")
    }
}

/// A Python string literal of `s`.
fn literal(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

/// The Snakefile of `request` (a plan request body whose jobs have `name`, `cpus`, `duration_s`
/// and maybe `after`).
pub fn snakefile(request: &Value) -> String {
    let jobs = request["jobs"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut taken = HashMap::new();
    let rules: HashMap<&str, String> =
        jobs.iter().filter_map(|j| j["name"].as_str()).map(|n| (n, rule_name(n, &mut taken))).collect();
    let marker = |job: &str| format!("done/{}.done", rules[job]);
    let has_successor: std::collections::HashSet<&str> =
        jobs.iter().flat_map(|j| j["after"].as_array().into_iter().flatten()).filter_map(Value::as_str).collect();
    let mut s = String::from(
        "# Written by `coreserve workflow import --snakefile`: one rule per job of the plan request,\n\
         # each sleeping the job's length. Run it through coreserve with the executor plugin:\n\
         #   snakemake --executor coreserve --coreserve-request REQUEST.json ...\n\n",
    );
    let sinks: Vec<String> = jobs
        .iter()
        .filter_map(|j| j["name"].as_str())
        .filter(|n| !has_successor.contains(n))
        .map(|n| literal(&marker(n)))
        .collect();
    let _ = writeln!(s, "rule all:\n    input:\n        {}\n", sinks.join(",\n        "));
    for j in jobs {
        let Some(name) = j["name"].as_str() else { continue };
        let duration_s = j["duration_s"].as_i64().unwrap_or(1);
        let _ = writeln!(s, "rule {}:", rules[name]);
        let inputs: Vec<String> = j["after"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|p| rules.contains_key(p))
            .map(|p| literal(&marker(p)))
            .collect();
        if !inputs.is_empty() {
            let _ = writeln!(s, "    input:\n        {}", inputs.join(",\n        "));
        }
        let _ = writeln!(s, "    output:\n        {}", literal(&marker(name)));
        let _ = writeln!(s, "    threads: {}", j["cpus"].as_u64().unwrap_or(1));
        let _ = writeln!(s, "    resources:\n        runtime_s={duration_s},\n        coreserve_job={}", literal(name));
        let _ = writeln!(s, "    shell:\n        \"sleep {duration_s} && touch {{output}}\"\n");
    }
    s
}
