import datetime
from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.route_answer import RouteAnswer
from ...types import UNSET, Response


def _get_kwargs(
    *,
    from_site: str,
    to_site: str,
    bandwidth_mbps: int,
    start: datetime.datetime,
    end: datetime.datetime,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["from_site"] = from_site

    params["to_site"] = to_site

    params["bandwidth_mbps"] = bandwidth_mbps

    json_start = start.isoformat()
    params["start"] = json_start

    json_end = end.isoformat()
    params["end"] = json_end

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/network/route",
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | RouteAnswer | None:
    if response.status_code == 200:
        response_200 = RouteAnswer.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

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


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Problem | RouteAnswer]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    from_site: str,
    to_site: str,
    bandwidth_mbps: int,
    start: datetime.datetime,
    end: datetime.datetime,
) -> Response[Problem | RouteAnswer]:
    """The route the NIS would take for this bandwidth over `[start, end)`.

    Args:
        from_site (str):
        to_site (str):
        bandwidth_mbps (int):
        start (datetime.datetime):
        end (datetime.datetime):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | RouteAnswer]
    """

    kwargs = _get_kwargs(
        from_site=from_site,
        to_site=to_site,
        bandwidth_mbps=bandwidth_mbps,
        start=start,
        end=end,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    from_site: str,
    to_site: str,
    bandwidth_mbps: int,
    start: datetime.datetime,
    end: datetime.datetime,
) -> Problem | RouteAnswer | None:
    """The route the NIS would take for this bandwidth over `[start, end)`.

    Args:
        from_site (str):
        to_site (str):
        bandwidth_mbps (int):
        start (datetime.datetime):
        end (datetime.datetime):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | RouteAnswer
    """

    return sync_detailed(
        client=client,
        from_site=from_site,
        to_site=to_site,
        bandwidth_mbps=bandwidth_mbps,
        start=start,
        end=end,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    from_site: str,
    to_site: str,
    bandwidth_mbps: int,
    start: datetime.datetime,
    end: datetime.datetime,
) -> Response[Problem | RouteAnswer]:
    """The route the NIS would take for this bandwidth over `[start, end)`.

    Args:
        from_site (str):
        to_site (str):
        bandwidth_mbps (int):
        start (datetime.datetime):
        end (datetime.datetime):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | RouteAnswer]
    """

    kwargs = _get_kwargs(
        from_site=from_site,
        to_site=to_site,
        bandwidth_mbps=bandwidth_mbps,
        start=start,
        end=end,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    from_site: str,
    to_site: str,
    bandwidth_mbps: int,
    start: datetime.datetime,
    end: datetime.datetime,
) -> Problem | RouteAnswer | None:
    """The route the NIS would take for this bandwidth over `[start, end)`.

    Args:
        from_site (str):
        to_site (str):
        bandwidth_mbps (int):
        start (datetime.datetime):
        end (datetime.datetime):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | RouteAnswer
    """

    return (
        await asyncio_detailed(
            client=client,
            from_site=from_site,
            to_site=to_site,
            bandwidth_mbps=bandwidth_mbps,
            start=start,
            end=end,
        )
    ).parsed
