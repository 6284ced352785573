"""Native tests of the Python balanced assignor (``python -m unittest``, with
``guest-sdk/python`` on ``PYTHONPATH``); the sandboxed runs are in ``tests/all/polyglot.rs``."""

from __future__ import annotations

import pathlib
import unittest

from app import BalancedAssignor
from assignor_sdk import Group, Member, Subtopology, Task, Topology
from assignor_sdk.testing import parse_input, problems, to_output

EXAMPLE = pathlib.Path(__file__).parents[2] / "runtime" / "demo" / "group.json"


class BalancedTest(unittest.TestCase):
    """The sample's promises, checked without a sandbox."""

    def test_example_group_is_valid(self) -> None:
        """The JSON contract's example group gets a valid assignment naming every member."""
        group, topology = parse_input(EXAMPLE.read_text())
        assignment = BalancedAssignor().assign(group, topology)
        self.assertEqual(problems(group, topology, assignment), [])
        output = to_output(group, topology, assignment)
        self.assertEqual(set(output["members"]), {m.member_id for m in group.members})

    def test_balanced_with_standbys_on_other_processes(self) -> None:
        """Seven tasks over three members differ by at most one; each standby is on another
        process than its active."""
        members = [Member("a", "p1"), Member("b", "p1"), Member("c", "p2")]
        group = Group(members, num_standby_replicas=1)
        topology = Topology([Subtopology("orders", 7, is_stateful=True)])
        assignment = BalancedAssignor().assign(group, topology)
        counts = [len(tasks) for tasks in assignment.active]
        self.assertLessEqual(max(counts) - min(counts), 1)
        self.assertEqual(problems(group, topology, assignment), [])
        self.assertEqual(sum(len(s) for s in assignment.standby), 7)

    def test_one_process_places_no_standby(self) -> None:
        """With a single process there is nowhere else for a standby, so none is placed."""
        group = Group([Member("a", "p"), Member("b", "p")], num_standby_replicas=2)
        topology = Topology([Subtopology("s", 2, is_stateful=True)])
        assignment = BalancedAssignor().assign(group, topology)
        self.assertEqual(assignment.standby, [set(), set()])
        self.assertEqual(assignment.active[0] | assignment.active[1], {Task(0, 0), Task(0, 1)})

    def test_empty_group(self) -> None:
        """A group without members gets an empty assignment, not an error."""
        topology = Topology([Subtopology("s", 3, is_stateful=False)])
        assignment = BalancedAssignor().assign(Group([]), topology)
        self.assertEqual(assignment.active, [])


if __name__ == "__main__":
    unittest.main()
