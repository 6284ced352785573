"""Run an assignor natively, on the project's JSON input contract, and check its result.

The same documents ``assignor assign --input`` reads (``runtime/demo/group.json``), so a test
can take a captured or hand-written group, call the assignor as plain Python, and compare with
what the sandboxed component returns.
"""

from __future__ import annotations

import json
from typing import Any

from .model import Assignment, Group, Member, SourceTopic, Subtopology, Task, Topology


def parse_input(document: str) -> tuple[Group, Topology]:
    """The group and topology of an input document (``topology``, ``configs``, ``members``)."""
    doc = json.loads(document)
    subtopologies = doc["topology"]["subtopologies"]
    index = {s["id"]: i for i, s in enumerate(subtopologies)}
    topology = Topology(
        [
            Subtopology(
                s["id"],
                s["maxNumInputPartitions"],
                s["isStateful"],
                [
                    SourceTopic(
                        t["name"],
                        len(t.get("partitionRacks", [])),
                        {p: list(r) for p, r in enumerate(t.get("partitionRacks", [])) if r},
                    )
                    for t in s.get("sourceTopics", [])
                ],
            )
            for s in subtopologies
        ]
    )

    def tasks(by_subtopology: dict[str, list[int]]) -> set[Task]:
        return {Task(index[s], p) for s, ps in by_subtopology.items() for p in ps}

    def offsets(by_subtopology: dict[str, dict[str, int]]) -> dict[Task, int]:
        return {
            Task(index[s], int(p)): o for s, ps in by_subtopology.items() for p, o in ps.items()
        }

    configs = doc.get("configs", {})
    members = [
        Member(
            member_id=m["memberId"],
            process_id=m["processId"],
            instance_id=m.get("instanceId"),
            rack_id=m.get("rackId"),
            client_tags=dict(m.get("clientTags", {})),
            active_tasks=tasks(m.get("activeTasks", {})),
            standby_tasks=tasks(m.get("standbyTasks", {})),
            warmup_tasks=tasks(m.get("warmupTasks", {})),
            task_offsets=offsets(m.get("taskOffsets", {})),
            task_end_offsets=offsets(m.get("taskEndOffsets", {})),
        )
        for m in doc["members"]
    ]
    group = Group(
        members,
        configs.get("numStandbyReplicas", 0),
        list(configs.get("rackAwareAssignmentTags", [])),
    )
    return group, topology


def to_output(group: Group, topology: Topology, assignment: Assignment) -> dict[str, Any]:
    """The output document ``assignor assign`` prints: member id → sorted tasks by subtopology."""

    def by_subtopology(tasks: set[Task]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for task in sorted(tasks):
            out.setdefault(topology.subtopologies[task.subtopology].id, []).append(task.partition)
        return out

    return {
        "members": {
            m.member_id: {
                "activeTasks": by_subtopology(assignment.active[i]),
                "standbyTasks": by_subtopology(assignment.standby[i]),
            }
            for i, m in enumerate(group.members)
        }
    }


def problems(group: Group, topology: Topology, assignment: Assignment) -> list[str]:
    """What the runtime would reject in ``assignment``, as sentences; empty when it is valid:
    every task active exactly once, standbys only of stateful tasks, never beside the active
    on the same member or process, every task inside the topology."""
    found: list[str] = []
    owner: dict[Task, int] = {}
    for member, tasks in enumerate(assignment.active):
        for task in tasks:
            if task in owner:
                found.append(f"duplicate active task {_name(topology, task)}")
            owner[task] = member
    for task in topology.tasks():
        if task not in owner:
            found.append(f"missing task: {topology.task_name(task)} is not active on any member")
    for member, tasks in enumerate(assignment.standby):
        for task in tasks:
            if not _exists(topology, task) or not topology.is_stateful(task):
                found.append(f"standby for a stateless or unknown task {_name(topology, task)}")
            elif task in owner and (
                owner[task] == member
                or group.members[owner[task]].process_id == group.members[member].process_id
            ):
                found.append(f"standby of {topology.task_name(task)} on the active's process")
    found.extend(
        f"unknown task {_name(topology, t)}"
        for tasks in assignment.active
        for t in tasks
        if not _exists(topology, t)
    )
    return found


def _exists(topology: Topology, task: Task) -> bool:
    """Whether ``task`` is inside ``topology`` (an assignor may return anything)."""
    return (
        0 <= task.subtopology < len(topology.subtopologies)
        and 0 <= task.partition < topology.subtopologies[task.subtopology].partitions
    )


def _name(topology: Topology, task: Task) -> str:
    """``task``'s Kafka name, or its raw indices when it is outside ``topology``."""
    return topology.task_name(task) if _exists(topology, task) else repr(task)
