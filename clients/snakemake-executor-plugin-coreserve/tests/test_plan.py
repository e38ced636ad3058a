"""The plugin's plan logic, without Snakemake or a service: requests from a DAG, placements,
the extension of a running job and the re-plan of what has not started."""

from datetime import UTC, datetime, timedelta

from snakemake_executor_plugin_coreserve.plan import (
    widest_level,
    DagJob,
    descendants,
    early_end,
    extension,
    extension_due,
    instant,
    job_name,
    placements,
    replan_request,
    request_from_dag,
    rfc3339,
    slack_for,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def at(s: int) -> str:
    return rfc3339(T0 + timedelta(seconds=s))


# A diamond a -> (b, c) -> d, booked from T0, and a job e beside it.
PLAN = {
    "id": "p1",
    "start": at(0),
    "jobs": [
        {"name": "a", "site": "s1", "start": at(0), "end": at(60), "reservation_name": "cs_1", "after": []},
        {"name": "b", "site": "s2", "start": at(70), "end": at(130), "reservation_name": "cs_2", "after": ["a"]},
        {"name": "c", "site": "s1", "start": at(65), "end": at(100), "reservation_name": "cs_3", "after": ["a"]},
        {"name": "d", "site": "s1", "start": at(140), "end": at(200), "reservation_name": "cs_4", "after": ["b", "c"]},
        {"name": "e", "site": "s2", "start": at(0), "end": at(30), "reservation_name": "cs_5", "after": []},
    ],
    "transfers": [
        {"from": "a", "to": "b", "start": at(60), "end": at(66), "mode": "staged"},
        {"from": "b", "to": "d", "start": at(130), "end": at(135), "mode": "staged"},
        {"from": "e", "to": "d", "start": at(30), "end": at(40), "mode": "staged"},
    ],
}


def test_job_names_are_the_rule_and_its_wildcards():
    assert job_name("map", {}) == "map"
    assert job_name("map", {"sample": "A", "chunk": "3"}) == "map[chunk=3,sample=A]"
    assert len(job_name("x" * 300, {})) == 128
    assert job_name("bad\nname", {}) == "bad_name"


def test_a_request_from_a_dag_has_dependencies_and_staged_data():
    jobs = [
        DagJob("split", 2, 30, [], output_mb=500.0),
        DagJob("map", 4, 120, ["split", "not-run"]),
        DagJob("merge", 1, 10, ["map"]),
    ]
    r = request_from_dag(
        jobs, request_id="r1", os="linux", deadline=T0 + timedelta(days=1), not_before=None,
        gap_s=12, slack_s=20, bandwidth_mbps=1000,
    )
    assert r["jobs"][0] == {"name": "split", "os": "linux", "cpus": 2, "duration_s": 30}
    assert r["jobs"][1]["after"] == ["split"], "a dependency outside the DAG to run is dropped"
    assert r["transfers"] == [{"from": "split", "to": "map", "bandwidth_mbps": 1000, "mode": "staged", "size_mb": 500.0}]
    assert (r["dependency_gap_s"], r["slack_s"], r["deadline"]) == (12, 20, "2030-01-02T00:00:00Z")
    assert "not_before" not in r


def test_placements_read_a_plan_answer():
    p = placements(PLAN)
    assert p["b"].site == "s2" and p["b"].reservation == "cs_2"
    assert p["b"].start == T0 + timedelta(seconds=70) and p["b"].end == T0 + timedelta(seconds=130)
    assert p["a"].plan_id == "p1" and p["a"].broken is None


def test_an_extension_pushes_what_depends_on_the_job_as_far_as_it_must():
    assert descendants(PLAN, "a") == {"b", "c", "d"}
    assert descendants(PLAN, "e") == {"d"}
    assert descendants(PLAN, "d") == set()
    change = extension(PLAN, {"a": 60}, 5)
    assert change["jobs"][0] == {"name": "a", "duration_s": 120}
    # c: a's new end + the gap; b: its staged transfer from a (now 120-126) ends after that;
    # d: b's new end (186) + the gap, and the transfer b->d (186-191).
    assert change["jobs"][1:] == [
        {"name": "c", "offset_s": 125},
        {"name": "b", "offset_s": 126},
        {"name": "d", "offset_s": 191},
    ]
    # a->b leaves the job, b->d leaves a moved job: both move; e->d stays (e does not move).
    assert change["transfers"] == [{"from": "a", "to": "b", "offset_s": 120}, {"from": "b", "to": "d", "offset_s": 186}]
    # Every dependency holds: each moved job starts after its parents' new ends and the gap.
    lengths = {"a": 120, "b": 60, "c": 35, "d": 60, "e": 30}
    starts = {j["name"]: j["offset_s"] for j in change["jobs"][1:]} | {"a": 0, "e": 0}
    for j in PLAN["jobs"]:
        for parent in j["after"]:
            assert starts[j["name"]] >= starts[parent] + lengths[parent] + 5, (j["name"], parent)
    assert extension(PLAN, {"d": 30}, 5) == {"jobs": [{"name": "d", "duration_s": 90}]}


def test_an_overrun_with_room_after_it_moves_nothing_else():
    # c ends at 100 and d, after c, starts at 140: 20 s more for c still leaves d its gap.
    assert extension(PLAN, {"c": 20}, 5) == {"jobs": [{"name": "c", "duration_s": 55}]}
    # 40 s more does not: d moves just far enough (140 -> 145), and nothing else.
    assert extension(PLAN, {"c": 40}, 5) == {"jobs": [{"name": "c", "duration_s": 75}, {"name": "d", "offset_s": 145}]}


def test_a_job_that_ends_early_gives_back_its_time_and_its_dependants_start_earlier():
    # a (booked to 60) ends at 40: its reservation ends 3 s later (43), and b and c, which wait
    # for it, start then (c) or once a->b, moved up to a's new end, has arrived (b: 43 + 6).
    # d waits for b and c, which have not ended: it does not move.
    assert early_end(PLAN, {"a"}, T0 + timedelta(seconds=40), 3, 5) == {
        "jobs": [{"name": "a", "duration_s": 43}, {"name": "b", "offset_s": 49}, {"name": "c", "offset_s": 43}],
        "transfers": [{"from": "a", "to": "b", "offset_s": 43}],
    }
    # c (booked to 100) ends at 80: d may start after b's booked end + the gap (135) and b->d
    # (130-135), not at 83: b has not ended.
    assert early_end(PLAN, {"c"}, T0 + timedelta(seconds=80), 3, 5) == {
        "jobs": [{"name": "c", "duration_s": 18}, {"name": "d", "offset_s": 135}]
    }
    # b and c are seen ended at 110: b's reservation ends at 113 (c's ended at 100 already); d
    # waits for b->d, moved up to 113 (e->d arrived long ago), and starts at 118.
    assert early_end(PLAN, {"b", "c"}, T0 + timedelta(seconds=110), 3, 5) == {
        "jobs": [{"name": "b", "duration_s": 43}, {"name": "d", "offset_s": 118}],
        "transfers": [{"from": "b", "to": "d", "offset_s": 113}],
    }
    # e ends at its booked end: nothing to give back; d, which waits for e->d too, starts as
    # early as b (booked end + the gap) and b->d allow.
    assert early_end(PLAN, {"e"}, T0 + timedelta(seconds=30), 3, 5) == {"jobs": [{"name": "d", "offset_s": 135}]}
    # d, the last, ends at its booked end: nothing changes.
    assert early_end(PLAN, {"d"}, T0 + timedelta(seconds=200), 3, 5) is None
    # Dependants that begin before the change could reach them stay (b at 70, c at 65: seen at
    # 68, the change takes effect at 71).
    assert early_end(PLAN, {"a"}, T0 + timedelta(seconds=68), 3, 5) is None


def test_a_replan_books_what_has_not_started_from_now_on():
    request = {
        "id": "wf",
        "deadline": at(86400),
        "dependency_gap_s": 5,
        "slack_s": 7,
        "jobs": [
            {"name": "a", "os": "linux", "cpus": 1, "duration_s": 60},
            {"name": "b", "os": "linux", "cpus": 1, "duration_s": 60, "after": ["a"]},
            {"name": "d", "os": "linux", "cpus": 1, "duration_s": 60, "after": ["b", "c"]},
            {"name": "c", "os": "linux", "cpus": 1, "duration_s": 30, "after": ["a"], "offset_s": 65},
        ],
        "transfers": [
            {"from": "a", "to": "b", "bandwidth_mbps": 100, "mode": "staged", "size_mb": 10},
            {"from": "b", "to": "d", "bandwidth_mbps": 100, "mode": "staged", "size_mb": 10},
        ],
    }
    booked = {"c": T0 + timedelta(seconds=400), "d": T0 + timedelta(seconds=600)}
    r = replan_request(request, {"c", "d"}, T0 + timedelta(seconds=500), "wf-re1", booked)
    assert r["id"] == "wf-re1" and r["not_before"] == at(500)
    assert [j["name"] for j in r["jobs"]] == ["d", "c"]
    assert r["jobs"][0]["after"] == ["c"], "dependencies on jobs that ran are met by not_before"
    assert "offset_s" not in r["jobs"][0]
    assert r["jobs"][1]["offset_s"] == 0 and "after" not in r["jobs"][1]
    assert r["transfers"] == [], "no transfer joins two re-planned jobs"
    assert (r["dependency_gap_s"], r["slack_s"], r["deadline"]) == (5, 7, at(86400))
    assert instant(r["not_before"]) == T0 + timedelta(seconds=500)


def test_a_replan_keeps_the_spacing_of_the_jobs_it_leaves_without_dependencies():
    """Found by a 197-task run: its 47 jobs waiting on running ones, re-planned at offset 0
    together, needed 47 CPUs of 32 ("can never fit on this grid")."""
    request = {
        "id": "wf",
        "deadline": at(86400),
        "jobs": [{"name": "a", "os": "linux", "cpus": 1, "duration_s": 60}]
        + [{"name": f"b{i}", "os": "linux", "cpus": 8, "duration_s": 60, "after": ["a"]} for i in range(3)]
        + [{"name": "c", "os": "linux", "cpus": 1, "duration_s": 60, "after": ["b0", "b1", "b2"]}],
        "transfers": [],
    }
    booked = {"b0": T0 + timedelta(seconds=70), "b1": T0 + timedelta(seconds=140), "b2": T0 + timedelta(seconds=70)}
    r = replan_request(request, {"b0", "b1", "b2", "c"}, T0 + timedelta(seconds=100), "wf-re1", booked)
    offsets = {j["name"]: j.get("offset_s") for j in r["jobs"]}
    assert offsets == {"b0": 0, "b1": 70, "b2": 0, "c": None}


def test_the_widest_level_counts_the_jobs_that_may_start_at_once():
    fan = [DagJob("a", 1, 10)] + [DagJob(f"b{i}", 1, 10, ["a"]) for i in range(5)] + [DagJob("c", 1, 10, [f"b{i}" for i in range(5)])]
    assert widest_level(fan) == 5
    assert widest_level([DagJob(f"r{i}", 1, 10) for i in range(3)]) == 3
    assert widest_level([]) == 1
    chain = [DagJob("j0", 1, 1)] + [DagJob(f"j{i}", 1, 1, [f"j{i - 1}"]) for i in range(1, 1000)]
    assert widest_level(chain) == 1


def test_a_job_expected_to_end_in_its_last_seconds_is_extended_before_them():
    # Booked [0, 100): a job that started at 20 with 70 s to run and 6 s of start-up is
    # expected to end at 98 (2 s of grace): inside its window, but with less room after it
    # than a status check and an extension take (4 s). It was extended only once it had
    # overrun, at 98, too late to be sure of beating its end at 100.
    t = lambda s: T0 + timedelta(seconds=s)  # noqa: E731
    due = lambda now, started: extension_due(  # noqa: E731
        t(now), t(started), t(100), 70, 6.0, lead_s=10, margin_s=4, extend_by_s=30
    )
    assert due(89, 20) is None  # not yet within 10 s of the end
    assert due(90, 20) == 30  # decided at once: 98 leaves 2 s, not 4
    assert due(90, 15) is None  # expected at 93: room enough; left to end
    assert due(94, 15) == 30  # overran its expected end: extended, 6 s before the end
    # Started so late that 30 s do not suffice: as much as its expected end and the margin need.
    assert due(90, 50) == (50 + 78) - 96


def test_a_job_that_starts_as_late_as_the_probe_measured_is_not_extended():
    # The probe measured 2 s from submit to start and 4.5 s of start-up; status checks every
    # 2 s, an extension 1 s. A 60 s job booked [0, 60 + slack) that starts at 2 s (and takes its
    # start-up) ends with room to spare: never due. With the slack booked before (2 + 4.5 + 4.5,
    # 11 s) it was due 10 s before its end, and so were 31 of 41 Epigenomics tasks.
    latency, startup, interval, extension_s = 2.0, 4.5, 2, 1
    t = lambda s: T0 + timedelta(seconds=s)  # noqa: E731

    def due(slack_s, now):
        return extension_due(
            t(now), t(latency), t(60 + slack_s), 60, startup,
            lead_s=10, margin_s=interval + extension_s, extend_by_s=30,
        )

    slack = slack_for(latency, startup, interval, extension_s)
    assert slack == 16
    # While it runs: it ends at 2 + 4.5 + 60 = 66.5 (68.5 with the grace).
    assert all(due(slack, now) is None for now in range(0, 67))
    assert due(11, 61) == 30
    # A job that starts later than the probe measured still is.
    assert extension_due(
        t(66), t(8), t(60 + slack), 60, startup, lead_s=10, margin_s=interval + extension_s, extend_by_s=30
    ) == 30


def test_jobs_that_overrun_together_are_extended_in_one_change():
    # b and c (both after a) overrun at once: one PATCH gives each its time and moves d once,
    # after the later of them; one change per job would have cost a round trip each.
    change = extension(PLAN, {"b": 20, "c": 40}, 5)
    assert change["jobs"] == [
        {"name": "b", "duration_s": 80},
        {"name": "c", "duration_s": 75},
        {"name": "d", "offset_s": 155},
    ]
    assert change["transfers"] == [{"from": "b", "to": "d", "offset_s": 150}]
