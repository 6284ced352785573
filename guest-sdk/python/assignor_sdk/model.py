"""The domain model an assignor sees: plain Python objects over the WIT's index tables.

The WIT sends everything that repeats once and refers to it by index (parallel integer lists,
member and process tables) so that large groups cross the sandbox boundary cheaply. This module
turns that back into what an author expects: members with their process, tags and current
tasks, a topology with its subtopologies, and an :class:`Assignment` to fill in.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple


class Task(NamedTuple):
    """A task: a partition of a subtopology, the subtopology given by its index in
    :attr:`Topology.subtopologies` (Kafka's ``TaskId``, ``<subtopology id>_<partition>``)."""

    subtopology: int
    partition: int


@dataclass(frozen=True)
class SourceTopic:
    """A source topic of a subtopology, with the racks holding each partition's replicas."""

    name: str
    partitions: int
    #: Partition number → names of the racks holding a replica of it (absent: unknown).
    partition_racks: dict[int, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Subtopology:
    """One subtopology: ``partitions`` tasks, numbered ``0 .. partitions``."""

    id: str
    partitions: int
    #: Whether the subtopology has a changelog, so that its tasks may have standbys.
    is_stateful: bool
    source_topics: list[SourceTopic] = field(default_factory=list)


@dataclass(frozen=True)
class Topology:
    """The group's topology (Kafka's ``TopologyDescriber``)."""

    subtopologies: list[Subtopology]

    def tasks(self) -> Iterator[Task]:
        """Every task, subtopology by subtopology, partitions in order."""
        for index, subtopology in enumerate(self.subtopologies):
            for partition in range(subtopology.partitions):
                yield Task(index, partition)

    def is_stateful(self, task: Task) -> bool:
        """Whether ``task`` belongs to a stateful subtopology (so it may have standbys)."""
        return self.subtopologies[task.subtopology].is_stateful

    def task_name(self, task: Task) -> str:
        """The task as Kafka users know it: ``<subtopology id>_<partition>``."""
        return f"{self.subtopologies[task.subtopology].id}_{task.partition}"


@dataclass
class Member:
    """A member of the group with its static metadata and its current tasks."""

    member_id: str
    #: The Streams client (JVM) this member runs in; members of one process share its state.
    process_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    active_tasks: set[Task] = field(default_factory=set)
    standby_tasks: set[Task] = field(default_factory=set)
    warmup_tasks: set[Task] = field(default_factory=set)
    #: Last reported cumulative changelog offset per task (Kafka's ``taskOffsets``).
    task_offsets: dict[Task, int] = field(default_factory=dict)
    #: Last reported changelog end offset per task (Kafka's ``taskEndOffsets``).
    task_end_offsets: dict[Task, int] = field(default_factory=dict)


@dataclass
class Group:
    """Kafka's ``GroupSpec``: the members, in the order the coordinator sent them, and the
    resolved assignment configs."""

    members: list[Member]
    num_standby_replicas: int = 0
    rack_aware_assignment_tags: list[str] = field(default_factory=list)


class Assignment:
    """The new target assignment being built: per member (by its index in
    :attr:`Group.members`), the active and standby tasks. Members given nothing get nothing."""

    def __init__(self, group: Group) -> None:
        """An empty assignment for every member of ``group``."""
        self.active: list[set[Task]] = [set() for _ in group.members]
        self.standby: list[set[Task]] = [set() for _ in group.members]

    def add_active(self, member: int, task: Task) -> None:
        """Makes ``task`` active on the member at index ``member``."""
        self.active[member].add(task)

    def add_standby(self, member: int, task: Task) -> None:
        """Gives the member at index ``member`` a standby of ``task``."""
        self.standby[member].add(task)


class AssignError(Exception):
    """Raised by an assignor that cannot compute an assignment: the call fails with this
    message (a ``guest-error``) and the group keeps its previous target assignment."""
