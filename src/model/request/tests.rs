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
        (Box::new(|r| r.transfers[0].offset_s = 100), "not inside job `B`"),
        (Box::new(|r| r.transfers[0].duration_s = 700), "not inside job `A`"),
        (Box::new(|r| r.jobs[1].offset_s = -1), "offset_s must be >= 0"),
        (Box::new(|r| r.jobs.clear()), "at least one job"),
        (Box::new(|r| r.id.clear()), "must not be empty"),
        (Box::new(|r| r.deadline = "2026-01-01T01:00:00Z".parse().unwrap()), "before the earliest possible end"),
        (Box::new(|r| r.jobs[0].duration_s = i64::MAX), "duration_s must be at most 3153600000"),
        (Box::new(|r| r.jobs[0].duration_s = 9_007_199_254_740_992), "duration_s must be at most"),
        (Box::new(|r| r.jobs[0].offset_s = i64::MAX), "offset_s must be at most"),
        (Box::new(|r| r.transfers[0].duration_s = i64::MAX), "transfer A->B: duration_s must be at most"),
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
    r.jobs[0].offset_s = MAX_OFFSET_S;
    assert_eq!(PlanRequest::new(r), Err(RequestError::TimeOutOfRange));
    let mut r = raw();
    r.transfers.clear();
    r.jobs[0].offset_s = MAX_OFFSET_S;
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
