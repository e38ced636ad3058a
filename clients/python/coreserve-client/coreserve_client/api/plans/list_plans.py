import datetime
from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.plan_status import PlanStatus
from ...models.plan_view import PlanView
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    status: PlanStatus | Unset = UNSET,
    from_: datetime.datetime | Unset = UNSET,
    to: datetime.datetime | Unset = UNSET,
    request_id: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_status: str | Unset = UNSET
    if not isinstance(status, Unset):
        json_status = status.value

    params["status"] = json_status

    json_from_: str | Unset = UNSET
    if not isinstance(from_, Unset):
        json_from_ = from_.isoformat()
    params["from"] = json_from_

    json_to: str | Unset = UNSET
    if not isinstance(to, Unset):
        json_to = to.isoformat()
    params["to"] = json_to

    params["request_id"] = request_id

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/plans",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | list[PlanView] | None:
    if response.status_code == 200:
        response_200 = []
        _response_200 = response.json()
        for response_200_item_data in _response_200:
            response_200_item = PlanView.from_dict(response_200_item_data)

            response_200.append(response_200_item)

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


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Problem | list[PlanView]]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    status: PlanStatus | Unset = UNSET,
    from_: datetime.datetime | Unset = UNSET,
    to: datetime.datetime | Unset = UNSET,
    request_id: str | Unset = UNSET,
) -> Response[Problem | list[PlanView]]:
    """The caller's plans (an admin: everyone's), oldest first.

    Args:
        status (PlanStatus | Unset): The life of a plan, from the planner's answer to the stored
            plan: one type for the
            planner's outcome, the store and the REST API.

            One spelling, lowercase, for every form: JSON (serde), text (strum: `Display`, `FromStr`,
            `AsRef<str>`, `&'static str`, the metrics' labels) and the `plans.status` column (sqlx: a
            TEXT column read with `status as "status: PlanStatus"`; written as `&'static str`).
        from_ (datetime.datetime | Unset):
        to (datetime.datetime | Unset):
        request_id (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | list[PlanView]]
    """

    kwargs = _get_kwargs(
        status=status,
        from_=from_,
        to=to,
        request_id=request_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    status: PlanStatus | Unset = UNSET,
    from_: datetime.datetime | Unset = UNSET,
    to: datetime.datetime | Unset = UNSET,
    request_id: str | Unset = UNSET,
) -> Problem | list[PlanView] | None:
    """The caller's plans (an admin: everyone's), oldest first.

    Args:
        status (PlanStatus | Unset): The life of a plan, from the planner's answer to the stored
            plan: one type for the
            planner's outcome, the store and the REST API.

            One spelling, lowercase, for every form: JSON (serde), text (strum: `Display`, `FromStr`,
            `AsRef<str>`, `&'static str`, the metrics' labels) and the `plans.status` column (sqlx: a
            TEXT column read with `status as "status: PlanStatus"`; written as `&'static str`).
        from_ (datetime.datetime | Unset):
        to (datetime.datetime | Unset):
        request_id (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | list[PlanView]
    """

    return sync_detailed(
        client=client,
        status=status,
        from_=from_,
        to=to,
        request_id=request_id,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    status: PlanStatus | Unset = UNSET,
    from_: datetime.datetime | Unset = UNSET,
    to: datetime.datetime | Unset = UNSET,
    request_id: str | Unset = UNSET,
) -> Response[Problem | list[PlanView]]:
    """The caller's plans (an admin: everyone's), oldest first.

    Args:
        status (PlanStatus | Unset): The life of a plan, from the planner's answer to the stored
            plan: one type for the
            planner's outcome, the store and the REST API.

            One spelling, lowercase, for every form: JSON (serde), text (strum: `Display`, `FromStr`,
            `AsRef<str>`, `&'static str`, the metrics' labels) and the `plans.status` column (sqlx: a
            TEXT column read with `status as "status: PlanStatus"`; written as `&'static str`).
        from_ (datetime.datetime | Unset):
        to (datetime.datetime | Unset):
        request_id (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | list[PlanView]]
    """

    kwargs = _get_kwargs(
        status=status,
        from_=from_,
        to=to,
        request_id=request_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    status: PlanStatus | Unset = UNSET,
    from_: datetime.datetime | Unset = UNSET,
    to: datetime.datetime | Unset = UNSET,
    request_id: str | Unset = UNSET,
) -> Problem | list[PlanView] | None:
    """The caller's plans (an admin: everyone's), oldest first.

    Args:
        status (PlanStatus | Unset): The life of a plan, from the planner's answer to the stored
            plan: one type for the
            planner's outcome, the store and the REST API.

            One spelling, lowercase, for every form: JSON (serde), text (strum: `Display`, `FromStr`,
            `AsRef<str>`, `&'static str`, the metrics' labels) and the `plans.status` column (sqlx: a
            TEXT column read with `status as "status: PlanStatus"`; written as `&'static str`).
        from_ (datetime.datetime | Unset):
        to (datetime.datetime | Unset):
        request_id (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | list[PlanView]
    """

    return (
        await asyncio_detailed(
            client=client,
            status=status,
            from_=from_,
            to=to,
            request_id=request_id,
        )
    ).parsed
