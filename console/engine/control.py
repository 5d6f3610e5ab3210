"""Control implementations for a local project: the live engine, another process's
engine (through the inbox), and file-only (nobody runs the project)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from console.control import Control, Outcome
from console.engine import evolution_apply, inbox, operations
from console.engine.backlog import close_ticket
from console.engine.cascade import project_ladders
from console.engine.engine import Engine
from console.engine.errors import EngineError, OwnedElsewhere
from console.engine.events import EventLog
from console.engine.evolution_apply import EvolutionConfig, parse_evolution
from console.engine.gitops import GitRepo
from console.engine.lock import EngineLock, bernstein_owner, engine_owner, owned_message
from console.engine.missions import MissionKeeper
from console.engine.store import TaskStore
from console.sdd.confine import UnsafePath
from console.sdd.missions import load_missions
from console.sdd.paths import SddPaths
from console.sdd.project_config import ConfigError, load_config
from console.sdd.trust import check as check_trust


class EngineControl:
    """Actions on the engine running in this process."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def retry(self, task_id: str) -> Outcome:
        return self.engine.handle({"action": "retry", "task_id": task_id})

    def escalate(self, task_id: str, model: str | None = None) -> Outcome:
        return self.engine.handle({"action": "escalate", "task_id": task_id, "model": model})

    def cancel(self, task_id: str, reason: str) -> Outcome:
        return self.engine.handle({"action": "cancel", "task_id": task_id, "reason": reason})

    def approve(self, proposal_id: str, reason: str = "") -> Outcome:
        return self.engine.handle({"action": "approve", "proposal_id": proposal_id,
                                   "reason": reason})

    def reject(self, proposal_id: str, reason: str) -> Outcome:
        return self.engine.handle({"action": "reject", "proposal_id": proposal_id,
                                   "reason": reason})

    def evolve(self) -> Outcome:
        return self.engine.handle({"action": "evolve"})

    def pause(self) -> Outcome:
        return self.engine.handle({"action": "pause"})

    def resume(self) -> Outcome:
        return self.engine.handle({"action": "resume"})

    def release_gate(self, mission_id: str, gate_name: str, reason: str) -> Outcome:
        return self.engine.handle({"action": "release_gate", "mission_id": mission_id,
                                   "gate_name": gate_name, "reason": reason})


class InboxControl:
    """Actions on an engine of ours running in another process."""

    def __init__(self, paths: SddPaths, owner: str) -> None:
        self.paths = paths
        self.owner = owner

    def _send(self, request: dict[str, object], timeout: float = 10.0) -> Outcome:
        return inbox.submit(self.paths, request, owner=self.owner, timeout=timeout,
                            alive=lambda: engine_owner(self.paths) is not None)

    def retry(self, task_id: str) -> Outcome:
        return self._send({"action": "retry", "task_id": task_id})

    def escalate(self, task_id: str, model: str | None = None) -> Outcome:
        return self._send({"action": "escalate", "task_id": task_id, "model": model})

    def cancel(self, task_id: str, reason: str) -> Outcome:
        return self._send({"action": "cancel", "task_id": task_id, "reason": reason})

    def approve(self, proposal_id: str, reason: str = "") -> Outcome:
        return self._send({"action": "approve", "proposal_id": proposal_id, "reason": reason},
                          timeout=APPLY_TIMEOUT)

    def reject(self, proposal_id: str, reason: str) -> Outcome:
        return self._send({"action": "reject", "proposal_id": proposal_id, "reason": reason})

    def evolve(self) -> Outcome:
        return self._send({"action": "evolve"}, timeout=APPLY_TIMEOUT)

    def pause(self) -> Outcome:
        return self._send({"action": "pause"})

    def resume(self) -> Outcome:
        return self._send({"action": "resume"})

    def release_gate(self, mission_id: str, gate_name: str, reason: str) -> Outcome:
        return self._send({"action": "release_gate", "mission_id": mission_id,
                           "gate_name": gate_name, "reason": reason})


class FileControl:
    """Actions on a project nobody runs: take the lock, change the task log, let go."""

    def __init__(self, paths: SddPaths) -> None:
        self.paths = paths

    def _with_store(self, action: Callable[[TaskStore], Outcome]) -> Outcome:
        try:
            with EngineLock(self.paths):
                store = TaskStore(self.paths)
                store.load()
                store.on_change(lambda task: close_ticket(self.paths, task))
                return action(store)
        except (EngineError, UnsafePath) as exc:
            return Outcome.refused(str(exc))
        except OSError as exc:  # a full disk, an unreadable task log
            return Outcome.refused(f"cannot write .sdd/: {exc.strerror or exc}")

    def retry(self, task_id: str) -> Outcome:
        return self._with_store(lambda store: operations.retry(store, task_id))

    def escalate(self, task_id: str, model: str | None = None) -> Outcome:
        try:
            ladders = project_ladders(self.paths.root)
        except (ValueError, TypeError, ConfigError) as exc:
            return Outcome.refused(f"bernstein.yaml: {exc}")
        return self._with_store(lambda store: operations.escalate(store, task_id, model,
                                                                  ladders))

    def cancel(self, task_id: str, reason: str) -> Outcome:
        return self._with_store(lambda store: operations.cancel(store, task_id, reason))

    def _evolution(self, action: Callable[[GitRepo | None, EvolutionConfig], Outcome]
                   ) -> Outcome:
        """Evolution work under the project lock, with the repository when there is one."""
        try:
            config = parse_evolution(load_config(self.paths.root).raw.get("evolution"))
        except (ValueError, TypeError, ConfigError) as exc:
            return Outcome.refused(f"bernstein.yaml: {exc}")
        try:
            with EngineLock(self.paths):
                try:
                    repo: GitRepo | None = GitRepo(self.paths.root)
                except EngineError:
                    repo = None
                return action(repo, config)
        except (EngineError, UnsafePath) as exc:
            return Outcome.refused(str(exc))

    def _untrusted(self, action: str) -> Outcome | None:
        """approve and evolve run the project's evolution commands: trusted projects only."""
        status = check_trust(self.paths.root)
        return None if status.trusted else Outcome.refused(f"{action} refused: {status.reason}")

    def approve(self, proposal_id: str, reason: str = "") -> Outcome:
        return self._untrusted("approve") or self._evolution(
            lambda repo, config: evolution_apply.approve(self.paths, repo, proposal_id, reason,
                                                         config))

    def reject(self, proposal_id: str, reason: str) -> Outcome:
        return self._evolution(lambda repo, config: evolution_apply.reject(
            self.paths, proposal_id, reason))

    def evolve(self) -> Outcome:
        return self._untrusted("evolve") or self._evolution(
            lambda repo, config: evolution_apply.evolve_outcome(self.paths, repo, config))

    def pause(self) -> Outcome:
        return Outcome.refused("pause: no engine runs this project, so nothing is dispatching")

    def resume(self) -> Outcome:
        return Outcome.refused("resume: no engine runs this project (start one with run)")

    def release_gate(self, mission_id: str, gate_name: str, reason: str) -> Outcome:
        """Recorded now, and the tasks the gate held are let go in the task log."""
        try:
            missions, problems = load_missions(self.paths,
                                               load_config(self.paths.root).raw.get("missions"))
        except ConfigError as exc:
            return Outcome.refused(f"bernstein.yaml: {exc}")
        if problems and not missions:
            return Outcome.refused(problems[0])

        def release(store: TaskStore) -> Outcome:
            keeper = MissionKeeper(self.paths, store, EventLog(self.paths), missions)
            return keeper.release(mission_id, gate_name, reason)

        return self._with_store(release)


APPLY_TIMEOUT = 900.0  # an approval runs the tests in a sandbox


def local_control(root: Path, command: str = "") -> Control:
    """The right Control for a local project; OwnedElsewhere (naming the `--server`
    command to use instead) if Bernstein runs it, `bernstein serve` included."""
    paths = SddPaths(root.resolve())
    owner = bernstein_owner(paths)
    if owner is not None:
        raise OwnedElsewhere(owned_message(paths.root, owner, command))
    engine = engine_owner(paths)
    if engine is not None:
        return InboxControl(paths, str(engine))
    return FileControl(paths)
