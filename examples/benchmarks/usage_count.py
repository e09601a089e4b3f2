"""The cost of the usage an intercepted call's reply tells the agent when the policy gives none: the prompt counted in
text pieces (`gymenvs.container.agent.wire.common.Reply.counted`), on a long agent history, in this process, no I/O.

An agent sends its whole history at every call, so each reply counts it again: the history here is a system prompt and
`--messages` turns of about 2 KB each (code, as a coding agent's tool results are). The first count of a history, then
the same history counted again (the next call's), and that history with one more message.

    python examples/benchmarks/usage_count.py [--messages 100] [--repeat 7]

Prints the median of `--repeat` timings in ms; nothing is asserted. To compare two checkouts, run each with its own
PYTHONPATH (the first line printed says which gymenvs was imported).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def history(messages: int, salt: str) -> list[dict[str, str]]:
    code = f"def f_{salt}(x):\n    return x + 1  # a line of the repository's code\n" * 40
    turns = [{"role": "user" if index % 2 else "assistant", "content": f"{index}\n{code}"} for index in range(messages)]
    return [{"role": "system", "content": "You are a coding agent. " * 80}, *turns]


def count_ms(messages: list[dict[str, str]]) -> float:
    from gymenvs.container.agent.wire.common import Reply

    started = time.perf_counter()
    Reply(content="ok").counted({"messages": messages})
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    import gymenvs

    print("gymenvs:", gymenvs.__file__, "| load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    first, again, grown = [], [], []
    for attempt in range(args.repeat):
        messages = history(args.messages, salt=f"{attempt}-{time.time_ns()}")  # new text: nothing counted before
        first.append(count_ms(messages))
        again.append(count_ms(messages))
        grown.append(count_ms([*messages, {"role": "user", "content": "one more turn"}]))
    size = sum(len(message["content"]) for message in history(args.messages, "x"))
    print(f"history of {args.messages + 1} messages, {size / 1000:.0f} kB of text:")
    for name, times in (("first count", first), ("the same history again", again), ("with one more message", grown)):
        print(f"  {name:<24} median {statistics.median(times):8.2f} ms")
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
