use super::*;

fn raw() -> RawPlanRequest {
    serde_json::from_str(
        r#"{"id":"r1","user":"u","submitted_at":"2026-01-01T00:00:00Z","deadline":"2026-01-01T10:00:00Z",
        "jobs":[{"name":"A","os":"linux","cpus":8,"offset_s":0,"duration_s":3600},
                {"name":"B","os":"bsd","cpus":16,"offset_s":3000,"duration_s":1200}],
        "transfers":[{"from":"A","to":"B","bandwidth_mbps":500,"offset_s":3000,"duration_s":600}]}"#,
    )
    .unwrap()
}

#[test]
fn the_method_is_read_under_its_name_and_under_mode_its_old_name() {
    let with = |key: &str| {
        let mut v = serde_json::to_value(raw()).unwrap();
        v[key] = "bbr-overlay".into();
        PlanRequest::new(serde_json::from_value(v).unwrap()).unwrap()
    };
    assert_eq!(with("method").method(), Some(ReservationMethod::BbrOverlay));
    assert_eq!(with("mode").method(), Some(ReservationMethod::BbrOverlay));
    let json = serde_json::to_value(with("mode")).unwrap();
    assert_eq!((json.get("method").is_some(), json.get("mode")), (true, None), "written as method");
    let mut v = serde_json::to_value(raw()).unwrap();
    v["jobs"][0]["gpus"] = 1.into();
    assert!(serde_json::from_value::<RawPlanRequest>(v).is_err(), "a job's unknown field is refused");
    let r = PlanRequest::new(raw()).unwrap();
    assert_eq!((r.submitted_at(), r.deadline(), r.not_before()), (1_767_225_600, 1_767_261_600, None));
}

#[test]
fn valid_request_parses_and_knows_its_span() {
    let r = PlanRequest::new(raw()).unwrap();
    assert_eq!(r.span_s(), 4200);
    assert_eq!(r.transfer_ends(0), (0, 1));
    assert_eq!(r.cpu_seconds(), 8.0 * 3600.0 + 16.0 * 1200.0);
    let json = serde_json::to_string(&r).unwrap();
    let back: PlanRequest = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
}

#[test]
fn every_invalid_shape_is_refused_with_its_reason() {
    type Mutation = Box<dyn Fn(&mut RawPlanRequest)>;
    let cases: Vec<(Mutation, &str)> = vec![
        (Box::new(|r| r.jobs[0].duration_s = 0), "duration_s must be > 0"),
        (Box::new(|r| r.jobs[0].duration_s = -5), "duration_s must be > 0"),
        (Box::new(|r| r.jobs[0].cpus = 0), "cpus must be > 0"),
        (Box::new(|r| r.jobs[1].name = "A".into()), "duplicate job name"),
        (Box::new(|r| r.transfers[0].to = "Z".into()), "unknown job `Z`"),
        (Box::new(|r| r.transfers[0].to = "A".into()), "two different jobs"),
        (Box::new(|r| r.transfers[0].bandwidth_mbps = 0), "bandwidth_mbps must be > 0"),
        (Box::new(|r| r.transfers[0].offset_s = Some(100)), "not inside job `B`"),
        (Box::new(|r| r.transfers[0].duration_s = Some(700)), "not inside job `A`"),
        (Box::new(|r| r.jobs[1].offset_s = Some(-1)), "offset_s must be >= 0"),
        (Box::new(|r| r.jobs.clear()), "at least one job"),
        (Box::new(|r| r.id.clear()), "must not be empty"),
        (Box::new(|r| r.deadline = "2026-01-01T01:00:00Z".parse().unwrap()), "before the earliest possible end"),
        (Box::new(|r| r.jobs[0].duration_s = i64::MAX), "duration_s must be at most 3153600000"),
        (Box::new(|r| r.jobs[0].duration_s = 9_007_199_254_740_992), "duration_s must be at most"),
        (Box::new(|r| r.jobs[0].offset_s = Some(i64::MAX)), "offset_s must be at most"),
        (Box::new(|r| r.transfers[0].duration_s = Some(i64::MAX)), "transfer A->B: duration_s must be at most"),
        (Box::new(|r| r.transfers[0].bandwidth_mbps = u64::MAX), "bandwidth_mbps must be at most"),
        (Box::new(|r| r.jobs[0].cpus = u32::MAX), "cpus must be at most"),
        (Box::new(|r| r.jobs[0].name.clear()), "jobs[0].name: must not be empty"),
        (Box::new(|r| r.jobs[1].name = "B\0".into()), "jobs[1].name: must not contain control characters"),
        (Box::new(|r| r.jobs[1].os = " ".into()), "jobs[1].os: must not be empty"),
        (Box::new(|r| r.id = "r\u{1}".into()), "id: must not contain control"),
        (Box::new(|r| r.id = "x".repeat(129)), "id: must be at most 128"),
        (Box::new(|r| r.user = "u\0".into()), "user: must not contain control"),
    ];
    for (mutate, expected) in cases {
        let mut r = raw();
        mutate(&mut r);
        let err = PlanRequest::new(r).unwrap_err().to_string();
        assert!(err.contains(expected), "expected `{expected}` in `{err}`");
    }
}

#[test]
fn extreme_times_are_refused_not_overflowed() {
    // The latest instant chrono knows plus the largest span: refused, not a panic.
    let mut r = raw();
    r.transfers.clear();
    r.submitted_at = DateTime::<Utc>::MAX_UTC;
    r.deadline = DateTime::<Utc>::MAX_UTC;
    r.jobs[0].duration_s = MAX_DURATION_S;
    r.jobs[0].offset_s = Some(MAX_OFFSET_S);
    assert_eq!(PlanRequest::new(r), Err(RequestError::TimeOutOfRange));
    let mut r = raw();
    r.transfers.clear();
    r.jobs[0].offset_s = Some(MAX_OFFSET_S);
    r.jobs[0].duration_s = MAX_DURATION_S;
    assert!(matches!(PlanRequest::new(r), Err(RequestError::DeadlineTooEarly { .. })));
}

#[test]
fn not_before_moves_the_earliest_end() {
    let mut r = raw();
    r.not_before = Some("2026-01-01T06:00:00Z".parse().unwrap());
    // 06:00 + 4200 s = 07:10 <= 10:00
    assert!(PlanRequest::new(r.clone()).is_ok());
    r.not_before = Some("2026-01-01T09:00:00Z".parse().unwrap());
    assert!(matches!(PlanRequest::new(r), Err(RequestError::DeadlineTooEarly { .. })));
}

#[test]
fn policy_and_method_parse_from_text() {
    assert_eq!("TIME".parse::<SelectionPolicy>().unwrap(), SelectionPolicy::Time);
    assert_eq!(ReservationMethod::Bbr.to_string(), "bbr");
    assert_eq!("bbr-overlay".parse::<ReservationMethod>().unwrap(), ReservationMethod::BbrOverlay);
    assert_eq!(serde_json::to_string(&ReservationMethod::BbrOverlay).unwrap(), "\"bbr-overlay\"");
    assert!("fastest".parse::<SelectionPolicy>().unwrap_err().to_string().contains("expected one of"));
}

/// The text forms (strum) and the JSON forms (serde) are spelled once each: they must agree,
/// and the parse error keeps its wording.
#[test]
fn text_and_json_spell_every_variant_alike() {
    fn check<T>(all: &[T])
    where
        T: Serialize
            + std::fmt::Display
            + std::str::FromStr<Err = UnknownValue>
            + AsRef<str>
            + PartialEq
            + std::fmt::Debug,
    {
        for v in all {
            let json = serde_json::to_string(v).unwrap();
            assert_eq!(json, format!("\"{v}\""));
            assert_eq!(v.as_ref(), v.to_string());
            assert_eq!(v.to_string().to_ascii_uppercase().parse::<T>().as_ref(), Ok(v));
        }
    }
    check(SelectionPolicy::ALL);
    check(ReservationMethod::ALL);
    assert_eq!(SelectionPolicy::ALL.len(), 4);
    assert_eq!(
        ReservationMethod::ALL,
        &[ReservationMethod::Bbr, ReservationMethod::Bir, ReservationMethod::BbrOverlay]
    );
    assert_eq!(
        "Fastest".parse::<SelectionPolicy>().unwrap_err().to_string(),
        "unknown value `fastest`; expected one of: time, cost, load, random"
    );
    assert_eq!(
        "x".parse::<ReservationMethod>().unwrap_err().to_string(),
        "unknown value `x`; expected one of: bbr, bir, bbr-overlay"
    );
}

/// A workflow request: `prep` fans out to `a` and `b` (staged transfers), which `join` is
/// after; offsets are laid out by the planner.
fn workflow() -> RawPlanRequest {
    serde_json::from_value(serde_json::json!({
        "id": "wf", "submitted_at": "2026-01-01T00:00:00Z", "deadline": "2026-01-02T00:00:00Z",
        "dependency_gap_s": 30, "slack_s": 60,
        "jobs": [
            {"name": "prep", "os": "linux", "cpus": 1, "duration_s": 100},
            {"name": "a", "os": "linux", "cpus": 4, "duration_s": 600, "after": ["prep"]},
            {"name": "b", "os": "linux", "cpus": 4, "duration_s": 300, "after": ["prep"], "slack_s": 0},
            {"name": "join", "os": "linux", "cpus": 2, "duration_s": 50, "after": ["a", "b"]}
        ],
        "transfers": [
            {"from": "prep", "to": "a", "bandwidth_mbps": 100, "mode": "staged", "size_mb": 1000},
            {"from": "prep", "to": "b", "bandwidth_mbps": 1000, "mode": "staged", "size_mb": 1000},
            {"from": "b", "to": "join", "bandwidth_mbps": 80, "mode": "staged", "size_mb": 1,
             "duration_s": 5}
        ]
    }))
    .unwrap()
}

#[test]
fn a_workflow_is_laid_out_as_early_as_its_dependencies_allow() {
    let r = PlanRequest::new(workflow()).unwrap();
    let span = |o, d| Span { offset_s: o, duration_s: d };
    // prep: [0, 160) with the request's 60 s of slack.
    assert_eq!(r.job_span(0), span(0, 160));
    // prep->a: 1000 MB at 100 Mbit/s = 80 s from prep's end; a starts at max(160 + 30, 240).
    assert_eq!(r.transfer_span(0), span(160, 80));
    assert_eq!(r.job_span(1), span(240, 660));
    // prep->b: 8 s; the gap (30 s) binds: b at 190, its own slack 0.
    assert_eq!(r.transfer_span(1), span(160, 8));
    assert_eq!(r.job_span(2), span(190, 300));
    // join after a (ends 900) and b (ends 490, staged 490..495): 900 + 30.
    assert_eq!(r.transfer_span(2), span(490, 5));
    assert_eq!(r.job_span(3), span(930, 110));
    assert_eq!(r.span_s(), 1040);
    assert_eq!(r.after(3), &[1, 2]);
    assert_eq!(r.after(1), &[0]);
    assert_eq!((r.slack_s(0), r.slack_s(2)), (60, 0));
    // prep 100 + a 600 + join 50.
    assert_eq!(r.critical_path_s(), 750);
    // It reads back as it was written (no laid-out offset in the JSON).
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["jobs"][1].get("offset_s"), None);
    assert_eq!(json["transfers"][0]["mode"], "staged");
    assert_eq!(serde_json::from_value::<PlanRequest>(json).unwrap(), r);
}

#[test]
fn explicit_offsets_without_after_keep_their_meaning() {
    let r = PlanRequest::new(raw()).unwrap();
    assert_eq!(r.job_span(1), Span { offset_s: 3000, duration_s: 1200 });
    assert_eq!(r.transfer_span(0), Span { offset_s: 3000, duration_s: 600 });
    assert_eq!(r.after(1), &[] as &[usize]);
    // A concurrent transfer without an offset starts at the later of its jobs' starts.
    let mut x = raw();
    x.transfers[0].offset_s = None;
    assert_eq!(PlanRequest::new(x).unwrap().transfer_span(0).offset_s, 3000);
    // An explicit offset that respects a dependency is kept.
    let mut x = workflow();
    x.jobs[3].offset_s = Some(2000);
    assert_eq!(PlanRequest::new(x).unwrap().job_span(3).offset_s, 2000);
}

#[test]
fn every_invalid_workflow_is_refused_with_its_reason() {
    type Mutation = Box<dyn Fn(&mut RawPlanRequest)>;
    let cases: Vec<(Mutation, &str)> = vec![
        (Box::new(|r| r.jobs[0].after = vec!["join".into()]), "cycle: prep -> a -> join -> prep"),
        (Box::new(|r| r.jobs[1].after = vec!["a".into()]), "cycle: a -> a"),
        (Box::new(|r| r.jobs[1].after = vec!["nope".into()]), "job `a`: `after` names unknown job `nope`"),
        (Box::new(|r| r.jobs[3].offset_s = Some(100)), "job `join`: offset_s 100 is before 930"),
        (
            Box::new(|r| {
                r.jobs[0].offset_s = Some(500);
                r.jobs[2].offset_s = Some(10);
            }),
            "job `b`: offset_s 10 is before 690, the earliest its dependency on job `prep` allows",
        ),
        (Box::new(|r| r.transfers[0].offset_s = Some(100)), "staged transfer prep->a: offset_s 100 is before 160"),
        (Box::new(|r| r.transfers[0].size_mb = Some(0.0)), "size_mb must be a number > 0"),
        (Box::new(|r| r.transfers[0].size_mb = Some(-3.0)), "size_mb must be a number > 0"),
        (Box::new(|r| r.transfers[0].size_mb = Some(f64::NAN)), "size_mb must be a number > 0"),
        (Box::new(|r| r.transfers[0].size_mb = Some(1e12)), "at most 1000000000"),
        (Box::new(|r| r.transfers[0].size_mb = None), "transfer prep->a: give duration_s or size_mb"),
        (Box::new(|r| r.transfers[0].duration_s = Some(79)), "duration_s 79 s is too short to move 1000 MB"),
        (Box::new(|r| r.dependency_gap_s = -1), "request: dependency_gap_s must be >= 0"),
        (Box::new(|r| r.slack_s = -1), "request: slack_s must be >= 0"),
        (Box::new(|r| r.jobs[1].slack_s = Some(-5)), "job `a`: slack_s must be >= 0"),
        (Box::new(|r| r.slack_s = i64::MAX), "slack_s must be at most"),
        (
            Box::new(|r| {
                let j = r.jobs[0].clone();
                r.jobs = (0..=MAX_JOBS).map(|i| ComputeDemand { name: format!("j{i}"), ..j.clone() }).collect();
                r.transfers.clear();
            }),
            "1001 jobs; at most 1000 per request",
        ),
        (
            Box::new(|r| {
                let t = r.transfers[0].clone();
                r.transfers = vec![t; MAX_TRANSFERS + 1];
            }),
            "4001 transfers; at most 4000 per request",
        ),
        (Box::new(|r| r.deadline = "2026-01-01T00:17:00Z".parse().unwrap()), "before the earliest possible end"),
    ];
    for (mutate, expected) in cases {
        let mut r = workflow();
        mutate(&mut r);
        let err = PlanRequest::new(r).unwrap_err().to_string();
        assert!(err.contains(expected), "expected `{expected}` in `{err}`");
    }
    // A staged transfer implies the order: a consumer with an explicit offset before its
    // producer's end is refused even without `after`.
    let mut r = workflow();
    r.jobs[1].after.clear();
    r.jobs[1].offset_s = Some(0);
    let err = PlanRequest::new(r).unwrap_err().to_string();
    assert!(
        err.contains("job `a`: offset_s 0 is before 240, the earliest its dependency on staged transfer prep->a"),
        "{err}"
    );
}

#[test]
fn a_thousand_job_chain_lays_out_in_order() {
    let mut r = workflow();
    r.transfers.clear();
    r.deadline = "2026-03-01T00:00:00Z".parse().unwrap();
    let j = r.jobs[0].clone();
    r.jobs = (0..MAX_JOBS)
        .map(|i| ComputeDemand {
            name: format!("j{i}"),
            after: if i == 0 { vec![] } else { vec![format!("j{}", i - 1)] },
            ..j.clone()
        })
        .collect();
    let req = PlanRequest::new(r).unwrap();
    // Each: 100 s + 60 s slack + 30 s gap.
    assert_eq!(req.job_span(MAX_JOBS - 1).offset_s, (MAX_JOBS as i64 - 1) * 190);
    assert_eq!(req.critical_path_s(), MAX_JOBS as i64 * 100);
}
