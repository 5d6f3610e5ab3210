"""What one batch of changes did to the State: tasks upserted or removed by id, the
console's sections (`kinds.Section`) and the tasks whose other records changed."""

from __future__ import annotations

import msgspec

from console.model import Task


class Delta(msgspec.Struct):
    """What one batch of file changes did to the state."""

    upserts: dict[str, Task] = msgspec.field(default_factory=dict)
    removed: set[str] = msgspec.field(default_factory=set)
    sections: set[str] = msgspec.field(default_factory=set)  # Section values
    #: tasks whose gates, SLA or chains changed without a new task record
    touched: set[str] = msgspec.field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.upserts or self.removed or self.sections or self.touched)

    def merge(self, other: Delta) -> Delta:
        for task_id in other.removed:
            self.upserts.pop(task_id, None)
        self.removed -= other.upserts.keys()
        self.removed |= other.removed
        self.upserts.update(other.upserts)
        self.sections |= other.sections
        self.touched |= other.touched
        return self
