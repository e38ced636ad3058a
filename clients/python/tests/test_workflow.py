"""coreserve.workflow.from_wfcommons against the CLI's `coreserve workflow import`: the same
request from the same WfCommons instance and options (both WfFormat shapes), and the same
refusals, each naming the task; the request is booked by a live service."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timezone

import pytest

from coreserve.workflow import WorkflowImportError, from_wfcommons
from conftest import REPO, coreserve_bin

INSTANCE = REPO / "data" / "wfcommons" / "epigenomics-41.json"
DEADLINE = datetime(2030, 1, 1, tzinfo=timezone.utc)


def cli_import(path, *args: str) -> dict:
    out = subprocess.run(
        [str(coreserve_bin()), "workflow", "import", str(path), *args], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def test_the_same_request_as_the_cli_from_wfformat_1_5():
    cli = cli_import(
        INSTANCE, "--time-scale", "0.1", "--data-scale", "0.5", "--bandwidth-mbps", "100", "--min-transfer-mb", "0.01",
        "--id", "epi", "--deadline", "2030-01-01T00:00:00Z", "--gap", "10", "--slack", "5",
    )
    py = from_wfcommons(
        INSTANCE, time_scale=0.1, data_scale=0.5, bandwidth_mbps=100, min_transfer_mb=0.01,
        request_id="epi", deadline=DEADLINE, gap_s=10, slack_s=5,
    )
    assert len(py["jobs"]) == 41 and len(py["transfers"]) > 0
    assert py == cli


def test_the_same_request_as_the_cli_from_wfformat_1_4(tmp_path):
    def task(name, parents, runtime, cores, files):
        return {"name": name, "id": f"id-{name}", "parents": parents, "runtimeInSeconds": runtime, "cores": cores, "files": files}

    doc = {"name": "four", "schemaVersion": "1.4", "workflow": {"tasks": [
        task("a", [], 10.5, 2, [{"link": "output", "name": "x", "sizeInBytes": 2_500_000}]),
        # Parents by name and by id.
        task("b", ["a"], 3, 1, [{"link": "input", "name": "x", "sizeInBytes": 2_500_000},
                                {"link": "output", "name": "y", "sizeInBytes": 1_000_000}]),
        task("c", ["id-a"], 7, 1.5, [{"link": "input", "name": "x", "sizeInBytes": 2_500_000}]),
        task("d", ["b", "c"], 1, 1, [{"link": "input", "name": "y", "sizeInBytes": 1_000_000}]),
    ]}}
    path = tmp_path / "four.json"
    path.write_text(json.dumps(doc))
    cli = cli_import(path, "--time-scale", "2", "--id", "four", "--deadline", "2030-01-01T00:00:00Z")
    py = from_wfcommons(path, time_scale=2, request_id="four", deadline=DEADLINE)
    assert py == cli
    by_name = {j["name"]: j for j in py["jobs"]}
    assert by_name["id-a"]["duration_s"] == 21 and by_name["id-c"]["cpus"] == 2
    assert by_name["id-d"]["after"] == ["id-b", "id-c"]
    assert {(t["from"], t["to"], t["size_mb"]) for t in py["transfers"]} == {
        ("id-a", "id-b", 2.5), ("id-a", "id-c", 2.5), ("id-b", "id-d", 1.0)
    }


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda t: t[1].update(parents=["ghost"]), "task `b`: its parent `ghost` is not a task of the instance"),
        (lambda t: t[1].pop("runtimeInSeconds"), "task `b`: no runtimeInSeconds > 0"),
        (lambda t: t[2].update(cores=0), "task `c`: 0 cores cannot be booked"),
        (lambda t: t.append(dict(t[0])), "task `a` appears twice"),
    ],
)
def test_what_cannot_be_expressed_is_refused_naming_the_task(tmp_path, mutate, message):
    tasks = [
        {"name": "a", "parents": [], "runtimeInSeconds": 5, "cores": 1, "files": []},
        {"name": "b", "parents": ["a"], "runtimeInSeconds": 5, "cores": 1, "files": []},
        {"name": "c", "parents": ["a"], "runtimeInSeconds": 5, "cores": 1, "files": []},
    ]
    mutate(tasks)
    doc = {"name": "bad", "workflow": {"tasks": tasks}}
    with pytest.raises(WorkflowImportError, match=message.replace("`", ".").replace("(", r"\(")):
        from_wfcommons(doc, deadline=DEADLINE)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    cli = subprocess.run([str(coreserve_bin()), "workflow", "import", str(path)], capture_output=True, text=True)
    assert cli.returncode != 0 and message in cli.stderr, cli.stderr


def test_the_request_is_booked(admin):
    request = from_wfcommons(INSTANCE, time_scale=0.01, data_scale=0.001, bandwidth_mbps=100, gap_s=5, slack_s=5)
    request["id"] = "wf-python-import"
    r = admin.get_httpx_client().post("/v1/plans", json=request)
    assert r.status_code == 201, r.text
    plan = r.json()
    assert plan["status"] == "committed", plan["reason"]
    assert len(plan["jobs"]) == 41
