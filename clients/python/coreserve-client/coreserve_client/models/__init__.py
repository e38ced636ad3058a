"""Contains all the data models used in inputs/outputs"""

from .allocation import Allocation
from .arch import Arch
from .availability_view import AvailabilityView
from .compute_demand import ComputeDemand
from .delivery_record import DeliveryRecord
from .extend_body import ExtendBody
from .footprint import Footprint
from .gpu_demand import GpuDemand
from .gpu_pool import GpuPool
from .health import Health
from .hold_result import HoldResult
from .hold_view import HoldView
from .job_change import JobChange
from .job_placement import JobPlacement
from .link import Link
from .link_reservation_view import LinkReservationView
from .network_demand import NetworkDemand
from .network_hold_body import NetworkHoldBody
from .network_view import NetworkView
from .node import Node
from .outcome import Outcome
from .package import Package
from .part_state import PartState
from .plan_body import PlanBody
from .plan_event import PlanEvent
from .plan_modification import PlanModification
from .plan_status import PlanStatus
from .plan_view import PlanView
from .pool_gpus import PoolGpus
from .problem import Problem
from .problem_participant_error_type_0 import ProblemParticipantErrorType0
from .project import Project
from .project_body import ProjectBody
from .requirements import Requirements
from .reservation_method import ReservationMethod
from .reservation_state import ReservationState
from .reservation_view import ReservationView
from .route_answer import RouteAnswer
from .route_view import RouteView
from .selection_policy import SelectionPolicy
from .site import Site
from .site_attributes import SiteAttributes
from .site_body import SiteBody
from .site_hold_body import SiteHoldBody
from .token_body import TokenBody
from .token_view import TokenView
from .transfer_change import TransferChange
from .transfer_mode import TransferMode
from .transfer_placement import TransferPlacement
from .transfer_traffic import TransferTraffic
from .usage_report import UsageReport
from .webhook_body import WebhookBody
from .webhook_created import WebhookCreated
from .webhook_view import WebhookView
from .who_am_i import WhoAmI

__all__ = (
    "Allocation",
    "Arch",
    "AvailabilityView",
    "ComputeDemand",
    "DeliveryRecord",
    "ExtendBody",
    "Footprint",
    "GpuDemand",
    "GpuPool",
    "Health",
    "HoldResult",
    "HoldView",
    "JobChange",
    "JobPlacement",
    "Link",
    "LinkReservationView",
    "NetworkDemand",
    "NetworkHoldBody",
    "NetworkView",
    "Node",
    "Outcome",
    "Package",
    "PartState",
    "PlanBody",
    "PlanEvent",
    "PlanModification",
    "PlanStatus",
    "PlanView",
    "PoolGpus",
    "Problem",
    "ProblemParticipantErrorType0",
    "Project",
    "ProjectBody",
    "Requirements",
    "ReservationMethod",
    "ReservationState",
    "ReservationView",
    "RouteAnswer",
    "RouteView",
    "SelectionPolicy",
    "Site",
    "SiteAttributes",
    "SiteBody",
    "SiteHoldBody",
    "TokenBody",
    "TokenView",
    "TransferChange",
    "TransferMode",
    "TransferPlacement",
    "TransferTraffic",
    "UsageReport",
    "WebhookBody",
    "WebhookCreated",
    "WebhookView",
    "WhoAmI",
)
