use serde_json::json;

use super::wfformat::{parse, Task, WfFormatError};
use super::*;
use crate::model::{PlanRequest, RawPlanRequest};

fn epigenomics() -> Instance {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/wfcommons/epigenomics-41.json")).unwrap();
    parse(&text).unwrap()
}

fn options() -> ImportOptions {
    ImportOptions { time_scale: 0.1, data_scale: 1.0, bandwidth_mbps: 1000, min_transfer_mb: 0.0, os: "linux".into() }
}

/// The request body of `inst` as the service would validate it.
fn validated(jobs: Vec<Value>, transfers: Vec<Value>) -> Result<PlanRequest, crate::model::RequestError> {
    let raw: RawPlanRequest = serde_json::from_value(json!({
        "id": "wf", "user": "u", "submitted_at": "2030-01-01T00:00:00Z", "deadline": "2030-01-03T00:00:00Z",
        "jobs": jobs, "transfers": transfers, "dependency_gap_s": 5, "slack_s": 10,
    }))
    .unwrap();
    PlanRequest::new(raw)
}

#[test]
fn a_wfformat_1_5_instance_is_read_with_its_graph_and_data() {
    let inst = epigenomics();
    assert_eq!(inst.tasks.len(), 41);
    assert_eq!(inst.edges.len(), 48, "one edge per (parent, child)");
    assert_eq!(inst.tasks.iter().map(|t| t.parents.len()).sum::<usize>(), 48);
    let chr21 = &inst.tasks[0];
    assert_eq!((chr21.id.as_str(), chr21.runtime_s, chr21.cores), ("chr21_00000001", 12.027, 1));
    assert_eq!(inst.tasks[chr21.parents[0]].id, "mapMerge_00000002");
    // mapMerge_00000002 writes 325ccac3-...map (201,811,452 bytes), which chr21 reads.
    let edge = inst.edges.iter().find(|e| e.1 == 0).unwrap();
    assert_eq!(edge.2, 201_811_452);
    assert!(inst.edges.iter().all(|e| e.2 > 0), "every edge of this instance carries a file");
}

#[test]
fn a_wfformat_1_4_instance_names_parents_and_files_in_its_tasks() {
    let text = json!({"name": "tiny", "schemaVersion": "1.4", "workflow": {"makespanInSeconds": 3, "tasks": [
        {"name": "split", "id": "s1", "type": "compute", "parents": [], "runtimeInSeconds": 2.5, "cores": 2,
         "files": [{"link": "output", "name": "part", "sizeInBytes": 3000000}]},
        {"name": "map", "id": "m1", "type": "compute", "parents": ["split"], "runtimeInSeconds": 4,
         "files": [{"link": "input", "name": "part", "sizeInBytes": 3000000}, {"link": "input", "name": "ref", "sizeInBytes": 9}]}
    ]}})
    .to_string();
    let inst = parse(&text).unwrap();
    assert_eq!(inst.name.as_deref(), Some("tiny"));
    assert_eq!(inst.tasks[1].parents, vec![0], "a parent named by its task's name");
    assert_eq!((inst.tasks[0].cores, inst.tasks[1].cores), (2, 1), "cores default to 1");
    assert_eq!(inst.edges, vec![(0, 1, 3_000_000)], "only the file the parent wrote counts");
    let (jobs, transfers) = jobs_and_transfers(&inst, &ImportOptions { time_scale: 1.0, ..options() }).unwrap();
    assert_eq!(jobs[0], json!({"name": "s1", "os": "linux", "cpus": 2, "duration_s": 3}));
    assert_eq!(jobs[1], json!({"name": "m1", "os": "linux", "cpus": 1, "duration_s": 4, "after": ["s1"]}));
    assert_eq!(
        transfers,
        vec![json!({"from": "s1", "to": "m1", "bandwidth_mbps": 1000, "mode": "staged", "size_mb": 3.0})]
    );
}

#[test]
fn what_cannot_be_booked_is_refused_naming_the_task() {
    let one = |task: Value| json!({"workflow": {"tasks": [task]}}).to_string();
    assert_eq!(
        parse(&one(json!({"name": "a", "parents": ["ghost"], "runtimeInSeconds": 1}))),
        Err(WfFormatError::UnknownParent { task: "a".into(), parent: "ghost".into() })
    );
    assert_eq!(parse(&one(json!({"name": "a", "runtimeInSeconds": 0}))), Err(WfFormatError::NoRuntime("a".into())));
    assert_eq!(parse(&one(json!({"name": "a"}))), Err(WfFormatError::NoRuntime("a".into())));
    assert_eq!(
        parse(&one(json!({"name": "a", "runtimeInSeconds": 1, "cores": 0.5}))),
        Err(WfFormatError::BadCores { task: "a".into(), cores: 0.5 })
    );
    let twice =
        json!({"workflow": {"tasks": [{"name": "a", "runtimeInSeconds": 1}, {"name": "a", "runtimeInSeconds": 1}]}});
    assert_eq!(parse(&twice.to_string()), Err(WfFormatError::DuplicateTask("a".into())));
    assert_eq!(parse(&json!({"workflow": {"tasks": []}}).to_string()), Err(WfFormatError::Empty));
    assert!(matches!(parse("[1]"), Err(WfFormatError::Shape(_))));
    assert!(WfFormatError::NoRuntime("map_7".into()).to_string().contains("task `map_7`"));
}

#[test]
fn an_instance_becomes_a_request_the_service_accepts() {
    let inst = epigenomics();
    let (jobs, transfers) = jobs_and_transfers(&inst, &options()).unwrap();
    assert_eq!((jobs.len(), transfers.len()), (41, 48));
    // chr21 ran 12.027 s: a tenth is 1.2027 s, rounded up to 2 s.
    assert_eq!(jobs[0]["duration_s"], 2);
    assert_eq!(jobs[0]["after"], json!(["mapMerge_00000002"]));
    assert!(transfers.iter().all(|t| t["mode"] == "staged" && t["size_mb"].as_f64().unwrap() > 0.0));
    let request = validated(jobs, transfers).expect("the service's validation accepts the import");
    assert!(request.critical_path_s() > 0);
    // Without data on an edge (or under --min-transfer-mb) only the dependency stays.
    let (jobs, transfers) = jobs_and_transfers(&inst, &ImportOptions { min_transfer_mb: 1e6, ..options() }).unwrap();
    assert!(transfers.is_empty());
    assert_eq!(jobs.iter().filter(|j| j.get("after").is_some()).count(), 40, "every task but the root has parents");
    validated(jobs, transfers).unwrap();
}

#[test]
fn limits_and_scales_are_checked() {
    let mut inst = epigenomics();
    let task = inst.tasks[0].clone();
    inst.tasks = (0..=MAX_JOBS).map(|i| Task { id: format!("t{i}"), parents: vec![], ..task.clone() }).collect();
    inst.edges.clear();
    assert_eq!(jobs_and_transfers(&inst, &options()), Err(ImportError::TooManyJobs(MAX_JOBS + 1)));
    let inst = epigenomics();
    assert_eq!(
        jobs_and_transfers(&inst, &ImportOptions { time_scale: 0.0, ..options() }),
        Err(ImportError::NotPositive("--time-scale"))
    );
    assert_eq!(
        jobs_and_transfers(&inst, &ImportOptions { bandwidth_mbps: 0, ..options() }),
        Err(ImportError::NotPositive("--bandwidth-mbps"))
    );
}

#[test]
fn the_snakefile_has_the_requests_dag() {
    let inst = epigenomics();
    let (jobs, transfers) = jobs_and_transfers(&inst, &options()).unwrap();
    let s = snakefile::snakefile(&json!({"jobs": jobs, "transfers": transfers}));
    assert_eq!(s.matches("\nrule t_").count(), 41);
    assert!(s.contains(
        "rule t_chr21_00000001:\n    input:\n        \"done/t_mapMerge_00000002.done\"\n    output:\n        \"done/t_chr21_00000001.done\"\n    threads: 1\n    resources:\n        runtime_s=2,\n        coreserve_job=\"chr21_00000001\"\n    shell:\n        \"sleep 2 && touch {output}\"\n"
    ), "{s}");
    // `rule all` asks for the sinks only: the tasks nothing depends on.
    let all = s.split("\n\n").find(|r| r.starts_with("rule all:") || r.contains("\nrule all:")).unwrap();
    assert_eq!(all.matches(".done").count(), 1, "Epigenomics ends in one pileup: {all}");
}
