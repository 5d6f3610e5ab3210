"""The State's chains (metrics/cascade_chains.jsonl): every chain by id, each task's
latest, their total cost, an index of each task's chains, and a checkpoint's chains
until they are first asked for. The chain kind's add and reset (sdd/kinds.py) change
them; everything else reads them.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from console.model import Chain, Problem
from console.sdd.problem_log import ProblemLog


class SavedChains(msgspec.Struct, frozen=True):
    """A checkpoint's chains, not decoded yet (ChainState.chains decodes them)."""

    file: str  # (the chains' file: where a problem decoding them is said)
    count: int
    escalated: int
    decode: Callable[[], list[Chain]]


class ChainState(ProblemLog):
    """The chains' part of the State."""

    def __init__(self) -> None:
        super().__init__()
        self._chains: dict[str, Chain] = {}
        #: a checkpoint's chains, decoded at the first `chains` (sdd/checkpoint.py)
        self._saved_chains: SavedChains | None = None
        self.chain_cost = 0.0  # total_cost_usd over every chain, kept as lines arrive
        self.last_chain: dict[str, Chain] = {}  # task id → its latest chain
        #: task id → its chains by id: built by `index_chains` (once a load ends), then
        #: kept by the chain kind's add and reset (None: not built)
        self.chains_by_task: dict[str, dict[str, Chain]] | None = None
        #: a checkpoint's chains could not be decoded: the file is read cold next time
        self.chains_lost = False

    @property
    def chains(self) -> dict[str, Chain]:
        """Every chain of cascade_chains.jsonl by its id, in the order ids came. A
        checkpoint's are decoded only now: half of a warm start's decoding, and neither
        the first paint nor `status` needs them (`chain_stats`)."""
        saved = self._saved_chains
        if saved is not None:
            self._saved_chains = None
            try:
                chains = saved.decode()
            except Exception as exc:  # (sealed by this version: never, but never a crash)
                self._problem(Problem(saved.file, None, f"the checkpoint's chains are "
                                      f"unreadable ({exc}): read again at the next start"))
                self.chains_lost = True  # (the next checkpoint leaves the file out)
                chains = []
            self._chains = {chain.chain_id: chain for chain in chains} | self._chains
        return self._chains

    def save_chains(self, saved: SavedChains) -> None:
        """A checkpoint's chains, into a State that has none yet."""
        self._chains.clear()
        self.chains_by_task = None  # (built again when first asked)
        self._saved_chains = saved

    def chain_stats(self) -> tuple[int, int]:
        """How many chains there are, and how many of them escalated (without decoding a
        checkpoint's)."""
        saved = self._saved_chains
        if saved is not None:
            return saved.count, saved.escalated
        return len(self._chains), sum(chain.escalated for chain in self._chains.values())

    def chains_of(self, task_id: str) -> list[Chain]:
        """A task's chains from cascade_chains.jsonl (a task's detail asks at every
        redraw: a scan of 500,000 chains was 34 ms of the event loop at 10x)."""
        return list(self.index_chains().get(task_id, {}).values())

    def index_chains(self) -> dict[str, dict[str, Chain]]:
        """`chains_by_task`, built now if it is not (the watcher builds it once a load
        ends, on its thread: not at the first redraw, on the event loop)."""
        index = self.chains_by_task
        if index is None:
            index = self.chains_by_task = {}
            for chain in self.chains.values():
                index.setdefault(chain.task_id, {})[chain.chain_id] = chain
        return index
