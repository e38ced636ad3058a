"""Fixtures of the Python client's tests: a live all-in-one `coreserve serve` (in-memory store)
started by the tests themselves, and clients of the generated package for its admin and users.

The binary: $CORESERVE_BIN, else target/release/coreserve of this repository. A missing binary
or a server that does not come up fails the tests (never skips them).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from coreserve_client import AuthenticatedClient, Client
from coreserve_client.api.ops import readyz
from coreserve_client.api.tokens import create_token
from coreserve_client.models import Health, TokenBody, TokenView

REPO = Path(__file__).resolve().parents[3]

# Three 16-CPU linux sites on a triangle of 1 Gbit/s links, and a bsd site. A 12-CPU job leaves
# room for no other at the same time, so the diamond's overlapping jobs land on different sites
# and every transfer needs a network path.
GRID = {
    "nodes": [{"id": "n1", "label": "one"}, {"id": "n2", "label": "two"}, {"id": "n3", "label": "three"}],
    "links": [
        {"id": "l12", "a": "n1", "b": "n2", "capacity_mbps": 1000, "price_per_gbps_hour": 0.1},
        {"id": "l23", "a": "n2", "b": "n3", "capacity_mbps": 1000, "price_per_gbps_hour": 0.1},
        {"id": "l13", "a": "n1", "b": "n3", "capacity_mbps": 1000, "price_per_gbps_hour": 0.1},
    ],
    "sites": [
        {"id": "s1", "node": "n1", "cpus": 16, "os": "linux", "price_per_cpu_hour": 1.0},
        {"id": "s2", "node": "n2", "cpus": 16, "os": "linux", "price_per_cpu_hour": 2.0},
        {"id": "s3", "node": "n3", "cpus": 16, "os": "linux", "price_per_cpu_hour": 1.5},
        {"id": "s4", "node": "n3", "cpus": 8, "os": "bsd", "price_per_cpu_hour": 0.5},
    ],
}

W_INTERVAL_S = 60
STARTUP_TIMEOUT_S = 30


@dataclass
class Service:
    base_url: str
    admin_token: str
    log: Path


def coreserve_bin() -> Path:
    path = Path(os.environ.get("CORESERVE_BIN") or REPO / "target" / "release" / "coreserve")
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"the coreserve binary is missing: {path} (build it with `cargo build --release`, or point "
            "CORESERVE_BIN at one); these tests need a live service and are never skipped",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    work = tmp_path_factory.mktemp("coreserve")
    grid = work / "grid.json"
    grid.write_text(json.dumps(GRID))
    log = work / "serve.log"
    admin = "cs_pytest_" + secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CORESERVE_ADMIN_TOKEN")}
    env.setdefault("RUST_LOG", "warn")
    cmd = [
        str(coreserve_bin()),
        "serve",
        "--grid",
        str(grid),
        "--listen",
        "127.0.0.1:0",  # the kernel picks a free port; serve prints it
        "--admin-token",
        admin,
        "--w-interval-s",
        str(W_INTERVAL_S),
        "--planners",
        "2",
        "--workers",
        "2",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        base_url = _wait_until_ready(proc, log)
        yield Service(base_url=base_url, admin_token=admin, log=log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_until_ready(proc: subprocess.Popen, log: Path) -> str:
    """The base URL once serve printed its address and /readyz answers 200."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    base_url = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"coreserve serve exited with {proc.returncode}:\n{log.read_text()}", pytrace=False)
        if base_url is None:
            m = re.search(r"serving .* on (http://127\.0\.0\.1:\d+)", log.read_text())
            base_url = m.group(1) if m else None
        if base_url is not None:
            try:
                with Client(base_url=base_url, timeout=httpx.Timeout(2.0)) as c:
                    health = readyz.sync(client=c)
                if isinstance(health, Health) and health.status == "ready":
                    return base_url
            except httpx.HTTPError:
                pass
        time.sleep(0.1)
    pytest.fail(f"coreserve serve was not ready within {STARTUP_TIMEOUT_S} s:\n{log.read_text()}", pytrace=False)


def client_for(service: Service, token: str) -> AuthenticatedClient:
    return AuthenticatedClient(base_url=service.base_url, token=token, timeout=httpx.Timeout(60.0))


@pytest.fixture(scope="session")
def admin(service: Service) -> Iterator[AuthenticatedClient]:
    with client_for(service, service.admin_token) as c:
        yield c


def new_token(admin: AuthenticatedClient, user: str) -> str:
    resp = create_token.sync_detailed(client=admin, body=TokenBody(user=user))
    assert resp.status_code == 201, resp.content
    assert isinstance(resp.parsed, TokenView)
    assert (resp.parsed.user, resp.parsed.admin, resp.parsed.service) == (user, False, False)
    return resp.parsed.token


@pytest.fixture(scope="session")
def alice_token(admin: AuthenticatedClient) -> str:
    return new_token(admin, "alice")


@pytest.fixture(scope="session")
def alice(service: Service, alice_token: str) -> Iterator[AuthenticatedClient]:
    with client_for(service, alice_token) as c:
        yield c


@pytest.fixture(scope="session")
def bob(service: Service, admin: AuthenticatedClient) -> Iterator[AuthenticatedClient]:
    with client_for(service, new_token(admin, "bob")) as c:
        yield c
