"""A balanced task assignor in Python: the algorithm of the Rust ``balanced`` sample, output for
output, so that the two can be compared in the same sandbox.

- **Actives** are dealt round-robin over the members, visiting processes in turn, so every
  member gets ``⌊T/M⌋`` or ``⌈T/M⌉`` active tasks.
- **Standbys**: each task of a stateful subtopology gets up to ``num_standby_replicas``
  standbys, each on the least-loaded member of a process that holds no copy of the task yet.

It ignores the current assignment: it is balanced, not sticky. ``componentize-py`` wraps this
module (``guest-sdk/python/build``); ``python -m unittest`` runs it natively.
"""

from __future__ import annotations

import heapq

import assignor_sdk
from assignor_sdk import Assignment, Group, Topology, export


class BalancedAssignor(assignor_sdk.TaskAssignor):
    """Spreads actives evenly over members and standbys over other processes."""

    def name(self) -> str:
        """The name the Rust sample has too, with the language to tell them apart."""
        return "balanced-python"

    def assign(self, group: Group, topology: Topology) -> Assignment:
        """Deals actives round-robin over interleaved members, then places standbys."""
        assignment = Assignment(group)
        if not group.members:
            return assignment
        order = interleaved_members(group)
        numbers = {p: i for i, p in enumerate(sorted({m.process_id for m in group.members}))}
        # A member's position in `order` stands for it; `process_of[pos]` is its process number.
        process_of = [numbers[group.members[member].process_id] for member in order]

        load = [0] * len(order)
        tasks = list(topology.tasks())
        active_pos = []
        for i, task in enumerate(tasks):
            pos = i % len(order)
            assignment.add_active(order[pos], task)
            load[pos] += 1
            active_pos.append(pos)

        replicas = group.num_standby_replicas
        if replicas == 0:
            return assignment
        # Least-loaded first; ties go to the earlier member in the interleaved order.
        heap = [(load[pos], pos) for pos in range(len(order))]
        heapq.heapify(heap)
        for task, active in zip(tasks, active_pos, strict=True):
            if not topology.is_stateful(task):
                continue
            holding = [process_of[active]]
            skipped = []
            while len(holding) <= replicas and heap:
                entry = heapq.heappop(heap)
                pos = entry[1]
                if process_of[pos] in holding:
                    skipped.append(entry)
                    continue
                assignment.add_standby(order[pos], task)
                holding.append(process_of[pos])
                heapq.heappush(heap, (entry[0] + 1, pos))
            for entry in skipped:
                heapq.heappush(heap, entry)
        return assignment


def interleaved_members(group: Group) -> list[int]:
    """Member indices ordered so that consecutive positions are on different processes: the
    first member of every process, then the second of every process, and so on (members sorted
    by id within a process, processes by id, so the result does not depend on input order)."""
    by_process: dict[str, list[int]] = {}
    for i, member in enumerate(group.members):
        by_process.setdefault(member.process_id, []).append(i)
    processes = [
        sorted(by_process[p], key=lambda i: group.members[i].member_id) for p in sorted(by_process)
    ]
    rounds = max(len(members) for members in processes)
    return [members[r] for r in range(rounds) for members in processes if r < len(members)]


# componentize-py looks the export up by its WIT name: hence the SDK's base class is not
# imported by that name above.
TaskAssignor = export(BalancedAssignor)
