import datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.availability_view import AvailabilityView
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: str,
    *,
    from_: datetime.datetime,
    to: datetime.datetime,
    cpus: int,
    duration_s: int,
    gpus: int | Unset = UNSET,
    min_gpu_compute_capability: float | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_from_ = from_.isoformat()
    params["from"] = json_from_

    json_to = to.isoformat()
    params["to"] = json_to

    params["cpus"] = cpus

    params["duration_s"] = duration_s

    params["gpus"] = gpus

    params["min_gpu_compute_capability"] = min_gpu_compute_capability

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/sites/{id}/availability".format(
            id=quote(str(id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> AvailabilityView | Problem | None:
    if response.status_code == 200:
        response_200 = AvailabilityView.from_dict(response.json())

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
) -> Response[AvailabilityView | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    id: str,
    *,
    client: AuthenticatedClient,
    from_: datetime.datetime,
    to: datetime.datetime,
    cpus: int,
    duration_s: int,
    gpus: int | Unset = UNSET,
    min_gpu_compute_capability: float | Unset = UNSET,
) -> Response[AvailabilityView | Problem]:
    """The LIS free-slot search: earliest start of `cpus` CPUs for `duration_s` in `[from, to]`,
    never before now + the broker's W interval (no plan starts earlier); more CPUs than the
    site has are 422.

    Args:
        id (str):
        from_ (datetime.datetime):
        to (datetime.datetime):
        cpus (int):
        duration_s (int):
        gpus (int | Unset):
        min_gpu_compute_capability (float | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AvailabilityView | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
        from_=from_,
        to=to,
        cpus=cpus,
        duration_s=duration_s,
        gpus=gpus,
        min_gpu_compute_capability=min_gpu_compute_capability,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: str,
    *,
    client: AuthenticatedClient,
    from_: datetime.datetime,
    to: datetime.datetime,
    cpus: int,
    duration_s: int,
    gpus: int | Unset = UNSET,
    min_gpu_compute_capability: float | Unset = UNSET,
) -> AvailabilityView | Problem | None:
    """The LIS free-slot search: earliest start of `cpus` CPUs for `duration_s` in `[from, to]`,
    never before now + the broker's W interval (no plan starts earlier); more CPUs than the
    site has are 422.

    Args:
        id (str):
        from_ (datetime.datetime):
        to (datetime.datetime):
        cpus (int):
        duration_s (int):
        gpus (int | Unset):
        min_gpu_compute_capability (float | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AvailabilityView | Problem
    """

    return sync_detailed(
        id=id,
        client=client,
        from_=from_,
        to=to,
        cpus=cpus,
        duration_s=duration_s,
        gpus=gpus,
        min_gpu_compute_capability=min_gpu_compute_capability,
    ).parsed


async def asyncio_detailed(
    id: str,
    *,
    client: AuthenticatedClient,
    from_: datetime.datetime,
    to: datetime.datetime,
    cpus: int,
    duration_s: int,
    gpus: int | Unset = UNSET,
    min_gpu_compute_capability: float | Unset = UNSET,
) -> Response[AvailabilityView | Problem]:
    """The LIS free-slot search: earliest start of `cpus` CPUs for `duration_s` in `[from, to]`,
    never before now + the broker's W interval (no plan starts earlier); more CPUs than the
    site has are 422.

    Args:
        id (str):
        from_ (datetime.datetime):
        to (datetime.datetime):
        cpus (int):
        duration_s (int):
        gpus (int | Unset):
        min_gpu_compute_capability (float | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AvailabilityView | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
        from_=from_,
        to=to,
        cpus=cpus,
        duration_s=duration_s,
        gpus=gpus,
        min_gpu_compute_capability=min_gpu_compute_capability,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: str,
    *,
    client: AuthenticatedClient,
    from_: datetime.datetime,
    to: datetime.datetime,
    cpus: int,
    duration_s: int,
    gpus: int | Unset = UNSET,
    min_gpu_compute_capability: float | Unset = UNSET,
) -> AvailabilityView | Problem | None:
    """The LIS free-slot search: earliest start of `cpus` CPUs for `duration_s` in `[from, to]`,
    never before now + the broker's W interval (no plan starts earlier); more CPUs than the
    site has are 422.

    Args:
        id (str):
        from_ (datetime.datetime):
        to (datetime.datetime):
        cpus (int):
        duration_s (int):
        gpus (int | Unset):
        min_gpu_compute_capability (float | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AvailabilityView | Problem
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            from_=from_,
            to=to,
            cpus=cpus,
            duration_s=duration_s,
            gpus=gpus,
            min_gpu_compute_capability=min_gpu_compute_capability,
        )
    ).parsed
