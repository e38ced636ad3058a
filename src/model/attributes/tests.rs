use super::*;
use crate::model::Site;

fn pkg(name: &str, version: &str, depends: &[&str]) -> Package {
    Package {
        name: name.into(),
        version: version.parse().unwrap(),
        depends: depends.iter().map(|d| d.parse().unwrap()).collect(),
        needs_extensions: vec![],
        needs_gpu_compute_capability: None,
    }
}

fn gpu(model: &str, count: u32, cc: f64, mem: u32) -> GpuPool {
    GpuPool { model: model.into(), count, compute_capability: cc, memory_gib: mem }
}

fn site_with(attributes: SiteAttributes) -> Site {
    Site { attributes, ..Site::new("s", "n", 64, "linux", 1.0) }
}

fn job(requires: Requirements) -> ComputeDemand {
    ComputeDemand { requires, ..ComputeDemand::new("j", "linux", 8, 0, 600) }
}

fn requires(json: serde_json::Value) -> Requirements {
    serde_json::from_value(json).unwrap()
}

/// Saito & Hirotsu's example: TensorFlow 1.5 and later needs a GPU of compute capability 3.5 or
/// more and AVX. Expressed on the package (its hardware needs) it excludes a site whose GPU is
/// too old even though TensorFlow is installed there.
#[test]
fn tensorflow_needs_avx_and_a_capable_gpu() {
    let tf = Package {
        needs_extensions: vec!["avx".into()],
        needs_gpu_compute_capability: Some(3.5),
        ..pkg("tensorflow", "1.15", &[])
    };
    let good = site_with(SiteAttributes {
        extensions: vec!["sse4_2".into(), "AVX".into()],
        gpus: vec![gpu("v100", 4, 7.0, 16)],
        software: vec![tf.clone()],
        ..Default::default()
    });
    let old_gpu = site_with(SiteAttributes { gpus: vec![gpu("k10", 4, 3.0, 4)], ..good.attributes.clone() });
    let no_avx = site_with(SiteAttributes { extensions: vec!["sse4_2".into()], ..good.attributes.clone() });
    let j = job(requires(serde_json::json!({"software": ["tensorflow >=1.5"], "gpus": {"count": 1}})));
    assert_eq!(unmet(&good, &j), None);
    assert_eq!(unmet(&old_gpu, &j), Some(Unmet::Software("tensorflow >=1.5".into())));
    assert_eq!(unmet(&no_avx, &j), Some(Unmet::Software("tensorflow >=1.5".into())));
    // The same rule stated on the job alone.
    let j2 = job(requires(serde_json::json!({
        "software": ["tensorflow >=1.5"], "extensions": ["avx"], "gpus": {"count": 1, "min_compute_capability": 3.5}
    })));
    assert_eq!(unmet(&old_gpu, &j2), Some(Unmet::Gpus("1 GPU with compute capability >= 3.5".into())));
    assert_eq!(unmet(&no_avx, &j2), Some(Unmet::Extension("avx".into())));
}

#[test]
fn software_counts_only_with_its_dependencies() {
    let mut a = SiteAttributes {
        software: vec![pkg("tensorflow", "2.13.1", &["cuda >=11.8", "cudnn"]), pkg("cuda", "11.2", &[])],
        ..Default::default()
    };
    let j = job(requires(serde_json::json!({"software": ["tensorflow >=2.12, <3"]})));
    assert_eq!(unmet(&site_with(a.clone()), &j), Some(Unmet::Software("tensorflow >=2.12, <3".into())));
    a.software.push(pkg("cuda", "12.1", &[]));
    assert!(unmet(&site_with(a.clone()), &j).is_some(), "cudnn still missing");
    a.software.push(pkg("cudnn", "8", &["cuda"]));
    assert_eq!(unmet(&site_with(a.clone()), &j), None);
    // Out of the version range.
    let j3 = job(requires(serde_json::json!({"software": ["tensorflow >=3"]})));
    assert_eq!(unmet(&site_with(a), &j3), Some(Unmet::Software("tensorflow >=3".into())));
}

#[test]
fn a_dependency_cycle_among_installed_packages_is_satisfied() {
    let a = SiteAttributes { software: vec![pkg("a", "1", &["b"]), pkg("b", "1", &["a"])], ..Default::default() };
    assert_eq!(unmet(&site_with(a), &job(requires(serde_json::json!({"software": ["a"]})))), None);
}

#[test]
fn requirements_are_checked_in_order_and_named() {
    let s = site_with(SiteAttributes {
        arch: Arch::Aarch64,
        cpu_generation: Some(2),
        extensions: vec!["sve".into()],
        gpus: vec![gpu("a100", 8, 8.0, 40)],
        labels: vec!["SSD".into()],
        ..Default::default()
    });
    let cases = [
        (serde_json::json!({"arch": "x86_64"}), Some(Unmet::Arch(Arch::X86_64))),
        (serde_json::json!({"min_cpu_generation": 3}), Some(Unmet::CpuGeneration(3))),
        (serde_json::json!({"extensions": ["sve", "avx512f"]}), Some(Unmet::Extension("avx512f".into()))),
        (serde_json::json!({"gpus": {"count": 9}}), Some(Unmet::Gpus("9 GPUs".into()))),
        (
            serde_json::json!({"gpus": {"count": 1, "min_memory_gib": 80}}),
            Some(Unmet::Gpus("1 GPU with >= 80 GiB".into())),
        ),
        (serde_json::json!({"gpus": {"count": 1, "model": "h100"}}), Some(Unmet::Gpus("1 GPU of model h100".into()))),
        (serde_json::json!({"labels": ["ssd", "infiniband"]}), Some(Unmet::Label("infiniband".into()))),
        (
            serde_json::json!({"arch": "aarch64", "min_cpu_generation": 2, "gpus": {"count": 8, "model": "A100"}, "labels": ["ssd"]}),
            None,
        ),
    ];
    for (r, want) in cases {
        assert_eq!(unmet(&s, &job(requires(r.clone()))), want, "{r}");
    }
    let mut wrong_os = job(Requirements::default());
    wrong_os.os = "bsd".into();
    assert_eq!(unmet(&s, &wrong_os), Some(Unmet::Os("bsd".into())));
    // A site without a known generation fails a generation bound.
    let unknown = site_with(SiteAttributes::default());
    assert_eq!(
        unmet(&unknown, &job(requires(serde_json::json!({"min_cpu_generation": 1})))),
        Some(Unmet::CpuGeneration(1))
    );
}

#[test]
fn versions_are_read_leniently_and_requirements_strictly() {
    assert_eq!("2".parse::<Version>().unwrap().to_string(), "2.0.0");
    assert_eq!("2.12".parse::<Version>().unwrap().to_string(), "2.12.0");
    assert_eq!("1.0-rc1".parse::<Version>().unwrap().to_string(), "1.0.0-rc1");
    assert!("two".parse::<Version>().is_err());
    let r: SoftwareRequirement = "TensorFlow   >=2.12, <3".parse().unwrap();
    assert_eq!(r.to_string(), "tensorflow >=2.12, <3");
    assert_eq!("gcc".parse::<SoftwareRequirement>().unwrap().to_string(), "gcc");
    assert!("tensor flow! >=1".parse::<SoftwareRequirement>().is_err());
    assert!("tensorflow >=>=1".parse::<SoftwareRequirement>().is_err());
}

#[test]
fn unknown_requirement_fields_and_bad_values_are_refused() {
    assert!(serde_json::from_value::<Requirements>(serde_json::json!({"gpu": 1})).is_err());
    assert!(requires(serde_json::json!({"gpus": {"count": 0}})).validate().is_err());
    assert!(requires(serde_json::json!({"extensions": [" "]})).validate().is_err());
    assert!(requires(serde_json::json!({"gpus": {"count": 1, "min_compute_capability": -1.0}})).validate().is_err());
    assert!(requires(serde_json::json!({"gpus": {"count": 2}, "labels": ["ssd"]})).validate().is_ok());
}

#[test]
fn round_one_sites_and_jobs_keep_their_json() {
    let site = serde_json::json!({"id": "s", "node": "n", "cpus": 4, "os": "linux", "price_per_cpu_hour": 1.0});
    let s: Site = serde_json::from_value(site.clone()).unwrap();
    assert_eq!(s.attributes, SiteAttributes::default());
    assert_eq!(serde_json::to_value(&s).unwrap(), site);
    let j = serde_json::json!({"name": "a", "os": "linux", "cpus": 1, "offset_s": 0, "duration_s": 5});
    let d: ComputeDemand = serde_json::from_value(j.clone()).unwrap();
    assert_eq!(serde_json::to_value(&d).unwrap(), j);
}

#[test]
fn site_attributes_are_validated() {
    let bad = [
        SiteAttributes { gpus: vec![gpu("a", 1, 7.0, 1), gpu("A", 1, 7.0, 1)], ..Default::default() },
        SiteAttributes { gpus: vec![gpu("a", 0, 7.0, 1)], ..Default::default() },
        SiteAttributes { gpus: vec![gpu("a", 1, f64::NAN, 1)], ..Default::default() },
        SiteAttributes { price_per_gpu_hour: -1.0, ..Default::default() },
        SiteAttributes { labels: vec!["\n".into()], ..Default::default() },
        SiteAttributes { software: vec![pkg("bad name", "1", &[])], ..Default::default() },
    ];
    for a in bad {
        assert!(a.validate().is_err(), "{a:?}");
    }
    let json = serde_json::json!({"id": "s", "node": "n", "cpus": 4, "os": "linux", "price_per_cpu_hour": 1.0,
        "arch": "ppc64le", "gpus": [{"model": "v100", "count": 2, "compute_capability": 7.0, "memory_gib": 16}],
        "price_per_gpu_hour": 2.5, "software": [{"name": "cuda", "version": "12.1", "depends": ["driver >=525"]}]});
    let s: Site = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(s.attributes.arch, Arch::Ppc64le);
    assert_eq!(s.attributes.gpu_pool("V100").map(|(i, _)| i), Some(0));
    let back = serde_json::to_value(&s).unwrap();
    assert_eq!(back["software"][0]["version"], "12.1.0");
    assert_eq!(back["gpus"], json["gpus"]);
}
