from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.plan_body import PlanBody
from ...models.plan_view import PlanView
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: PlanBody,
    dry_run: bool | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    params: dict[str, Any] = {}

    params["dry_run"] = dry_run

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/plans",
        "params": params,
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> PlanView | Problem | None:
    if response.status_code == 200:
        response_200 = PlanView.from_dict(response.json())

        return response_200

    if response.status_code == 201:
        response_201 = PlanView.from_dict(response.json())

        return response_201

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

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

    if response.status_code == 429:
        response_429 = Problem.from_dict(response.json())

        return response_429

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
    *,
    client: AuthenticatedClient,
    body: PlanBody,
    dry_run: bool | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> Response[PlanView | Problem]:
    """Plan and book a request.

    Args:
        dry_run (bool | Unset):
        idempotency_key (str | Unset):
        body (PlanBody): `POST /v1/plans` body: a plan request in the model's format, without
            `user` (the token's)
            and `submitted_at` (the time the server received it). Unknown fields are refused. Example:
            {'deadline': datetime.datetime(2030, 1, 1, 12, 0,
            tzinfo=datetime.timezone(datetime.timedelta(0), 'Z')), 'id': 'wf-1', 'jobs': [{'cpus': 16,
            'duration_s': 3600, 'name': 'A', 'offset_s': 0, 'os': 'linux'}, {'cpus': 16, 'duration_s':
            3600, 'name': 'B', 'offset_s': 0, 'os': 'linux'}], 'transfers': [{'bandwidth_mbps': 500,
            'duration_s': 600, 'from': 'A', 'offset_s': 0, 'to': 'B'}]}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PlanView | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
        dry_run=dry_run,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: PlanBody,
    dry_run: bool | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> PlanView | Problem | None:
    """Plan and book a request.

    Args:
        dry_run (bool | Unset):
        idempotency_key (str | Unset):
        body (PlanBody): `POST /v1/plans` body: a plan request in the model's format, without
            `user` (the token's)
            and `submitted_at` (the time the server received it). Unknown fields are refused. Example:
            {'deadline': datetime.datetime(2030, 1, 1, 12, 0,
            tzinfo=datetime.timezone(datetime.timedelta(0), 'Z')), 'id': 'wf-1', 'jobs': [{'cpus': 16,
            'duration_s': 3600, 'name': 'A', 'offset_s': 0, 'os': 'linux'}, {'cpus': 16, 'duration_s':
            3600, 'name': 'B', 'offset_s': 0, 'os': 'linux'}], 'transfers': [{'bandwidth_mbps': 500,
            'duration_s': 600, 'from': 'A', 'offset_s': 0, 'to': 'B'}]}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PlanView | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
        dry_run=dry_run,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: PlanBody,
    dry_run: bool | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> Response[PlanView | Problem]:
    """Plan and book a request.

    Args:
        dry_run (bool | Unset):
        idempotency_key (str | Unset):
        body (PlanBody): `POST /v1/plans` body: a plan request in the model's format, without
            `user` (the token's)
            and `submitted_at` (the time the server received it). Unknown fields are refused. Example:
            {'deadline': datetime.datetime(2030, 1, 1, 12, 0,
            tzinfo=datetime.timezone(datetime.timedelta(0), 'Z')), 'id': 'wf-1', 'jobs': [{'cpus': 16,
            'duration_s': 3600, 'name': 'A', 'offset_s': 0, 'os': 'linux'}, {'cpus': 16, 'duration_s':
            3600, 'name': 'B', 'offset_s': 0, 'os': 'linux'}], 'transfers': [{'bandwidth_mbps': 500,
            'duration_s': 600, 'from': 'A', 'offset_s': 0, 'to': 'B'}]}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PlanView | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
        dry_run=dry_run,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: PlanBody,
    dry_run: bool | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> PlanView | Problem | None:
    """Plan and book a request.

    Args:
        dry_run (bool | Unset):
        idempotency_key (str | Unset):
        body (PlanBody): `POST /v1/plans` body: a plan request in the model's format, without
            `user` (the token's)
            and `submitted_at` (the time the server received it). Unknown fields are refused. Example:
            {'deadline': datetime.datetime(2030, 1, 1, 12, 0,
            tzinfo=datetime.timezone(datetime.timedelta(0), 'Z')), 'id': 'wf-1', 'jobs': [{'cpus': 16,
            'duration_s': 3600, 'name': 'A', 'offset_s': 0, 'os': 'linux'}, {'cpus': 16, 'duration_s':
            3600, 'name': 'B', 'offset_s': 0, 'os': 'linux'}], 'transfers': [{'bandwidth_mbps': 500,
            'duration_s': 600, 'from': 'A', 'offset_s': 0, 'to': 'B'}]}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PlanView | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            dry_run=dry_run,
            idempotency_key=idempotency_key,
        )
    ).parsed
