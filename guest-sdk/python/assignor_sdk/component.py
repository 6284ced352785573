"""The glue between an assignor class and the component's WIT export.

Only a component build has the generated bindings (``wit_world``, ``componentize_py_types``):
they are imported inside the calls, so that :func:`export` also runs natively and the module
that calls it can be imported by plain ``python`` tests.

The component is built with ``componentize-py --stub-wasi``: it imports no WASI at all (the
runtime refuses the ``wasi:sockets`` imports a full CPython build links), so writing to the real
stdout or stderr would trap. Each call points ``sys.stdout`` and ``sys.stderr`` at a buffer
instead, and a failed call carries the buffer's tail in its error message: ``print`` debugging
works, and an uncaught exception arrives as a ``guest-error`` with its traceback.
"""

from __future__ import annotations

import io
import traceback
from contextlib import redirect_stderr, redirect_stdout
from typing import TYPE_CHECKING, Any

from .assignor import TaskAssignor
from .model import (
    Assignment,
    AssignError,
    Group,
    Member,
    SourceTopic,
    Subtopology,
    Task,
    Topology,
)

if TYPE_CHECKING:
    from wit_world.imports import types as wit

#: Most characters of printed output and traceback a failed call's message keeps (the host keeps
#: 4 KiB of a guest's message by default).
MESSAGE_TAIL_CHARS = 3000


def export(assignor: type[TaskAssignor]) -> type:
    """Returns the class ``componentize-py`` instantiates for the ``task-assignor`` export, over
    one ``assignor()``. Bind it to ``TaskAssignor`` in the app module:
    ``TaskAssignor = export(MyAssignor)``.

    The host runs every call in a fresh component instance and calls ``configure`` in it before
    ``assign``, so the instance's configuration is the call's, and nothing else survives."""

    class Export:
        """The WIT ``task-assignor`` interface over ``assignor``."""

        def __init__(self) -> None:
            self.assignor = assignor()

        def name(self) -> str:
            return self.assignor.name()

        def configure(self, config: list[tuple[str, str]]) -> None:
            output = io.StringIO()
            try:
                with redirect_stdout(output), redirect_stderr(output):
                    self.assignor.configure(dict(config))
            except ValueError as error:
                raise _err(_with_output(str(error), output)) from error
            except Exception as error:  # noqa: BLE001 - a bug fails the load, not the host
                raise _err(_describe(error, output)) from error

        def assign(self, group: wit.GroupSpec, topology: wit.Topology) -> wit.GroupAssignment:
            from wit_world.imports import types as wit

            output = io.StringIO()
            try:
                with redirect_stdout(output), redirect_stderr(output):
                    result = self.assignor.assign(to_group(group), to_topology(topology))
                return from_assignment(result)
            except AssignError as error:
                raise _err(wit.AssignError(_with_output(str(error), output))) from error
            except Exception as error:  # noqa: BLE001 - a bug is reported, not trapped
                raise _err(wit.AssignError(_describe(error, output))) from error

    Export.__name__ = Export.__qualname__ = "TaskAssignor"
    return Export


def _err(value: Any) -> Exception:
    """The exception ``componentize-py`` lowers to a WIT ``result``'s error case."""
    from componentize_py_types import Err

    return Err(value)


def _describe(error: Exception, output: io.StringIO) -> str:
    """An unexpected exception as its traceback, printed output before it.

    The traceback names each frame's file, line and function but quotes no source line:
    ``traceback.format_exception`` reads the source files through ``linecache``, and in the
    component every file access is a stubbed WASI call that traps, which turned each
    unexpected exception into a bare trap instead of a ``guest-error``."""
    frames = traceback.StackSummary.extract(
        traceback.walk_tb(error.__traceback__), lookup_lines=False
    )
    lines = ["Traceback (most recent call last):"]
    lines += [f'  File "{f.filename}", line {f.lineno}, in {f.name}' for f in frames]
    lines += [line.rstrip() for line in traceback.format_exception_only(error)]
    return _with_output("\n".join(lines), output)


def _with_output(message: str, output: io.StringIO) -> str:
    """``message`` after what the call printed, cut to its last ``MESSAGE_TAIL_CHARS``."""
    printed = output.getvalue()
    text = f"{printed.rstrip()}\n{message}" if printed else message
    return text[-MESSAGE_TAIL_CHARS:]


def to_group(spec: wit.GroupSpec) -> Group:
    """The WIT group spec as a :class:`Group`: processes, tags and tasks per member."""
    members = [
        Member(
            member_id=m.member_id,
            process_id=spec.processes[m.process],
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            client_tags=dict(m.client_tags),
        )
        for m in spec.members
    ]
    for attribute, tasks in (
        ("active_tasks", spec.active_tasks),
        ("standby_tasks", spec.standby_tasks),
        ("warmup_tasks", spec.warmup_tasks),
    ):
        for member, subtopology, partition in zip(
            tasks.members, tasks.subtopologies, tasks.partitions, strict=True
        ):
            getattr(members[member], attribute).add(Task(subtopology, partition))
    for attribute, offsets in (
        ("task_offsets", spec.task_offsets),
        ("task_end_offsets", spec.task_end_offsets),
    ):
        for member, subtopology, partition, offset in zip(
            offsets.members, offsets.subtopologies, offsets.partitions, offsets.offsets, strict=True
        ):
            getattr(members[member], attribute)[Task(subtopology, partition)] = offset
    return Group(
        members=members,
        num_standby_replicas=spec.configs.num_standby_replicas,
        rack_aware_assignment_tags=list(spec.configs.rack_aware_assignment_tags),
    )


def to_topology(topology: wit.Topology) -> Topology:
    """The WIT topology as a :class:`Topology`, rack indices resolved to names."""

    def source_topic(topic: wit.SourceTopic) -> SourceTopic:
        racks: dict[int, list[str]] = {}
        for partition, rack in zip(topic.replica_partitions, topic.replica_racks, strict=True):
            racks.setdefault(partition, []).append(topology.racks[rack])
        return SourceTopic(topic.name, topic.partitions, racks)

    return Topology(
        [
            Subtopology(
                s.id,
                s.max_num_input_partitions,
                s.is_stateful,
                [source_topic(t) for t in s.source_topics],
            )
            for s in topology.subtopologies
        ]
    )


def from_assignment(assignment: Assignment) -> wit.GroupAssignment:
    """An :class:`Assignment` as the WIT's parallel lists."""
    from wit_world.imports import types as wit

    def member_tasks(per_member: list[set[Task]]) -> wit.MemberTasks:
        members: list[int] = []
        subtopologies: list[int] = []
        partitions: list[int] = []
        for member, tasks in enumerate(per_member):
            for subtopology, partition in tasks:
                members.append(member)
                subtopologies.append(subtopology)
                partitions.append(partition)
        return wit.MemberTasks(members, subtopologies, partitions)

    return wit.GroupAssignment(member_tasks(assignment.active), member_tasks(assignment.standby))
