"""A test guest: a Python assignor whose code fails with an exception it did not foresee.

``assign`` prints a line, then looks up a key that is not there (``KeyError``); ``configure``
raises ``RuntimeError`` when ``failing.in`` is ``configure``. The host must see both as the
assignor's own errors (a ``guest-error`` from ``assign``, a refused load from ``configure``)
with the exception, where it was raised and what was printed, never as a bare trap.
"""

from __future__ import annotations

import assignor_sdk
from assignor_sdk import Assignment, Group, Topology, export


class FailingAssignor(assignor_sdk.TaskAssignor):
    """Fails in ``assign`` always, and in ``configure`` when asked to."""

    def name(self) -> str:
        return "failing-python"

    def configure(self, config: dict[str, str]) -> None:
        if config.get("failing.in") == "configure":
            raise RuntimeError("configure failed on purpose")

    def assign(self, group: Group, topology: Topology) -> Assignment:
        print(f"assigning {len(group.members)} members")
        return {}["missing"]


TaskAssignor = export(FailingAssignor)
