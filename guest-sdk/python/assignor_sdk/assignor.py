"""The interface an assignor implements (Kafka's ``TaskAssignor`` with ``Configurable``)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from .model import Assignment, Group, Topology


class TaskAssignor(ABC):
    """A task assignor. Implement :meth:`name` and :meth:`assign`; override :meth:`configure`
    to read configuration. A fresh instance serves every call: nothing survives between calls."""

    @abstractmethod
    def name(self) -> str:
        """The assignor's unique short name, used in ``streams.assignor.name``."""

    def configure(self, config: dict[str, str]) -> None:  # noqa: B027 - optional, as in Kafka
        """Reads the broker's (or the upload's) configuration; raise :class:`ValueError`
        naming the bad key and the accepted values to fail the load. Ignores it by default."""

    @abstractmethod
    def assign(self, group: Group, topology: Topology) -> Assignment:
        """Computes the group's new target assignment; raise
        :class:`~assignor_sdk.AssignError` when there is none."""
