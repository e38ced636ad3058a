from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.plan_modification import PlanModification
from ...models.plan_view import PlanView
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: UUID,
    *,
    body: PlanModification,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "patch",
        "url": "/v1/plans/{id}".format(
            id=quote(str(id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> PlanView | Problem | None:
    if response.status_code == 200:
        response_200 = PlanView.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = Problem.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())

        return response_422

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[PlanView | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    id: UUID,
    *,
    client: AuthenticatedClient,
    body: PlanModification,
    idempotency_key: str | Unset = UNSET,
) -> Response[PlanView | Problem]:
    """Modify a committed or active plan: move its start, change a job's interval or CPUs, a
    transfer's interval or bandwidth; all of it or nothing.

    Args:
        id (UUID):
        idempotency_key (str | Unset):
        body (PlanModification): What to change in a committed plan; what is absent stays as it
            is. Offsets count from the
            application's start (the plan's `start`, or the new `start`), as in a plan request.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PlanView | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: UUID,
    *,
    client: AuthenticatedClient,
    body: PlanModification,
    idempotency_key: str | Unset = UNSET,
) -> PlanView | Problem | None:
    """Modify a committed or active plan: move its start, change a job's interval or CPUs, a
    transfer's interval or bandwidth; all of it or nothing.

    Args:
        id (UUID):
        idempotency_key (str | Unset):
        body (PlanModification): What to change in a committed plan; what is absent stays as it
            is. Offsets count from the
            application's start (the plan's `start`, or the new `start`), as in a plan request.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PlanView | Problem
    """

    return sync_detailed(
        id=id,
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    id: UUID,
    *,
    client: AuthenticatedClient,
    body: PlanModification,
    idempotency_key: str | Unset = UNSET,
) -> Response[PlanView | Problem]:
    """Modify a committed or active plan: move its start, change a job's interval or CPUs, a
    transfer's interval or bandwidth; all of it or nothing.

    Args:
        id (UUID):
        idempotency_key (str | Unset):
        body (PlanModification): What to change in a committed plan; what is absent stays as it
            is. Offsets count from the
            application's start (the plan's `start`, or the new `start`), as in a plan request.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PlanView | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: UUID,
    *,
    client: AuthenticatedClient,
    body: PlanModification,
    idempotency_key: str | Unset = UNSET,
) -> PlanView | Problem | None:
    """Modify a committed or active plan: move its start, change a job's interval or CPUs, a
    transfer's interval or bandwidth; all of it or nothing.

    Args:
        id (UUID):
        idempotency_key (str | Unset):
        body (PlanModification): What to change in a committed plan; what is absent stays as it
            is. Offsets count from the
            application's start (the plan's `start`, or the new `start`), as in a plan request.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PlanView | Problem
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
