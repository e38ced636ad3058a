"""The few calls the plugin makes to a coreserve service (REST API v1), over httpx.

Every call that changes something carries an Idempotency-Key and is sent again with the same key
on an answer that says "try again" (503, 429, 408, and 409 while the same key is in progress) or a dropped connection, as
the coreserve client does; a refusal (other 4xx) raises `BrokerError` with the problem's
`detail`.
"""

from __future__ import annotations

import time
import uuid

import httpx

RETRY_STATUS = {503, 429, 408}
# A 409 worth sending again: the same key's first request is still being answered. Other 409s
# (a modification that does not fit, a plan that cannot be modified) are answers.
IN_PROGRESS = "idempotency-in-progress"


class BrokerError(Exception):
    """The service refused a call, or could not be reached after the retries."""


class Broker:
    """A coreserve service at `url`, called with a bearer `token`."""

    def __init__(self, url: str, token: str, *, timeout_s: float = 120.0, tries: int = 5) -> None:
        self.http = httpx.Client(
            base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {token}"}, timeout=timeout_s
        )
        self.tries = tries

    def close(self) -> None:
        self.http.close()

    def _call(self, method: str, path: str, *, json: dict | None = None, idempotent: bool = False) -> dict:
        headers = {"Idempotency-Key": str(uuid.uuid4())} if idempotent else {}
        last = ""
        for attempt in range(self.tries):
            if attempt:
                time.sleep(min(5, attempt))
            try:
                r = self.http.request(method, path, json=json, headers=headers)
            except httpx.TransportError as e:
                last = f"{method} {path}: {e}"
                continue
            if r.status_code in RETRY_STATUS or (r.status_code == 409 and IN_PROGRESS in r.text):
                last = f"{method} {path}: {r.status_code} {r.text[:300]}"
                continue
            if r.is_success:
                return r.json() if r.content else {}
            try:
                detail = r.json().get("detail") or r.text
            except ValueError:
                detail = r.text
            raise BrokerError(f"{method} {path}: {r.status_code}: {detail}")
        raise BrokerError(f"gave up after {self.tries} tries: {last}")

    def create_plan(self, body: dict) -> dict:
        """Books a plan request; the plan answer (`status` committed or rejected)."""
        return self._call("POST", "/v1/plans", json=body, idempotent=True)

    def plan(self, plan_id: str) -> dict:
        """The plan as it is now."""
        return self._call("GET", f"/v1/plans/{plan_id}")

    def modify_plan(self, plan_id: str, change: dict) -> dict:
        """Applies a modification (`PATCH`); the plan as modified."""
        return self._call("PATCH", f"/v1/plans/{plan_id}", json=change, idempotent=True)

    def cancel_plan(self, plan_id: str) -> dict:
        """Cancels what is left of a plan; its reservations are released."""
        return self._call("DELETE", f"/v1/plans/{plan_id}", idempotent=True)
