"""Write Kafka Streams task assignors in Python, as WebAssembly components of the
``kafka:streams-assignor@0.1.0`` world.

Implement :class:`TaskAssignor` over the domain model (:class:`Group`, :class:`Topology`,
:class:`Assignment`) and export it with :func:`export` in the module ``componentize-py`` wraps:

.. code-block:: python

    TaskAssignor = export(MyAssignor)

:mod:`assignor_sdk.testing` runs the same class natively on the JSON input contract.
"""

from .assignor import TaskAssignor
from .component import export
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

__all__ = [
    "Assignment",
    "AssignError",
    "Group",
    "Member",
    "SourceTopic",
    "Subtopology",
    "Task",
    "TaskAssignor",
    "Topology",
    "export",
]
