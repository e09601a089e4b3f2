"""Slots spread over hosts (worker processes or Ray actors): which host has which slot, the
episodes a host restart loses, and how a host runs the slots it has.

With H hosts, host h hosts slots h, h + H, h + 2H, ... A host that is restarted (it died or hung)
takes every slot it hosts with it: the slots whose requests it was running get an error at once,
and the others lose their episode, which their next step reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wrappers.vector.backends.threads import ThreadBackend
from wrappers.vector.slot import Command, EnvFactory, Request, SlotError

#: How long a host that is told to stop gives its envs to close.
HOST_CLOSE_TIMEOUT_S = 30.0


class SlotHosts:
    def __init__(self, num_slots: int, num_hosts: int):
        self.num_hosts = min(num_hosts, num_slots)
        self.slots_of = [list(range(host, num_slots, self.num_hosts)) for host in range(self.num_hosts)]
        #: Slots whose host was restarted while they sat idle: why their episode is gone.
        self._lost: dict[int, str] = {}

    def batches(self, requests: Sequence[Request], results: list[Any]) -> dict[int, list[int]]:
        """The positions of the requests each host must run. A step of a slot whose episode was lost
        gets its error in `results` instead; a reset starts the slot afresh."""
        batches: dict[int, list[int]] = {}
        for position, (index, command, _) in enumerate(requests):
            if index in self._lost:
                if command in (Command.STEP, Command.STEP_SAME):
                    results[position] = SlotError(self._lost.pop(index), rebuilt=True)
                    continue
                if command is Command.RESET:
                    del self._lost[index]
            batches.setdefault(index % self.num_hosts, []).append(position)
        return batches

    def fail(
        self, host: int, requests: Sequence[Request], positions: list[int], results: list[Any], reason: str, restarted: str
    ) -> None:
        """Host `host` is being restarted: its requests here fail (`reason` says how), and its other
        slots lose their episode (`restarted` says what happened to the host)."""
        for position in positions:
            message = f"{requests[position][1].value} {reason}; the env was rebuilt from its factory"
            results[position] = SlotError(message, rebuilt=True)
        answered = {requests[position][0] for position in positions}
        for index in self.slots_of[host]:
            if index not in answered:
                self._lost[index] = f"the episode was lost: {restarted} (a request {reason})"


class HostedSlots:
    """The slots one worker process or Ray actor hosts, run by a thread backend of its own.

    So a host with many slots (`max_workers` below the slot count) runs their requests
    concurrently, as the thread backend does, under a GIL of its own.
    """

    def __init__(self, factories: list[tuple[int, EnvFactory]], restart_on_error: bool):
        self.local = {index: position for position, (index, _) in enumerate(factories)}  # slot index -> its index here
        builders = [factory for _, factory in factories]
        self.threads = ThreadBackend(builders, max_workers=len(builders), restart_on_error=restart_on_error)

    def run(self, requests: list[Request]) -> list[Any]:
        local = self.local
        results = self.threads.run([(local[slot], command, argument) for slot, command, argument in requests], None)
        return [result.portable() if type(result) is SlotError else result for result in results]

    def close(self, timeout_s: float = HOST_CLOSE_TIMEOUT_S) -> None:
        self.threads.close(timeout_s)
