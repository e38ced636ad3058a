from http import HTTPStatus
from typing import Any
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.plan_event import PlanEvent
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    after: int | Unset = UNSET,
    plan_id: UUID | Unset = UNSET,
    last_event_id: int | None | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(last_event_id, Unset):
        headers["Last-Event-ID"] = last_event_id

    params: dict[str, Any] = {}

    params["after"] = after

    json_plan_id: str | Unset = UNSET
    if not isinstance(plan_id, Unset):
        json_plan_id = str(plan_id)
    params["plan_id"] = json_plan_id

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/events",
        "params": params,
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> PlanEvent | Problem | None:
    if response.status_code == 200:
        response_200 = PlanEvent.from_dict(response.text)

        return response_200

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[PlanEvent | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    after: int | Unset = UNSET,
    plan_id: UUID | Unset = UNSET,
    last_event_id: int | None | Unset = UNSET,
) -> Response[PlanEvent | Problem]:
    """The plans' events as a stream (`text/event-stream`): every event after `Last-Event-ID` (or
    `after`; with neither, only events from now on), the caller's plans' only unless admin.

    Args:
        after (int | Unset):
        plan_id (UUID | Unset):
        last_event_id (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PlanEvent | Problem]
    """

    kwargs = _get_kwargs(
        after=after,
        plan_id=plan_id,
        last_event_id=last_event_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    after: int | Unset = UNSET,
    plan_id: UUID | Unset = UNSET,
    last_event_id: int | None | Unset = UNSET,
) -> PlanEvent | Problem | None:
    """The plans' events as a stream (`text/event-stream`): every event after `Last-Event-ID` (or
    `after`; with neither, only events from now on), the caller's plans' only unless admin.

    Args:
        after (int | Unset):
        plan_id (UUID | Unset):
        last_event_id (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PlanEvent | Problem
    """

    return sync_detailed(
        client=client,
        after=after,
        plan_id=plan_id,
        last_event_id=last_event_id,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    after: int | Unset = UNSET,
    plan_id: UUID | Unset = UNSET,
    last_event_id: int | None | Unset = UNSET,
) -> Response[PlanEvent | Problem]:
    """The plans' events as a stream (`text/event-stream`): every event after `Last-Event-ID` (or
    `after`; with neither, only events from now on), the caller's plans' only unless admin.

    Args:
        after (int | Unset):
        plan_id (UUID | Unset):
        last_event_id (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PlanEvent | Problem]
    """

    kwargs = _get_kwargs(
        after=after,
        plan_id=plan_id,
        last_event_id=last_event_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    after: int | Unset = UNSET,
    plan_id: UUID | Unset = UNSET,
    last_event_id: int | None | Unset = UNSET,
) -> PlanEvent | Problem | None:
    """The plans' events as a stream (`text/event-stream`): every event after `Last-Event-ID` (or
    `after`; with neither, only events from now on), the caller's plans' only unless admin.

    Args:
        after (int | Unset):
        plan_id (UUID | Unset):
        last_event_id (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PlanEvent | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            after=after,
            plan_id=plan_id,
            last_event_id=last_event_id,
        )
    ).parsed
