"""The generated package's models (`coreserve_client.models`), under `coreserve.models`: build
request bodies (`PlanBody`, `ComputeDemand`, `NetworkDemand`, `PlanModification`, ...) and read
answers (`PlanView`, `Site`, ...) with them."""

from coreserve_client.models import *  # noqa: F403
from coreserve_client.models import __all__ as __all__  # noqa: F401
