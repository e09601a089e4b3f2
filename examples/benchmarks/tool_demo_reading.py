"""Can the tool demo's model read the ball's column? Supervised steps on the right call only, then samples.

    python examples/benchmarks/tool_demo_reading.py [--steps 200 600] [--samples 16]

examples/grpo_tools_cpu.py asks GRPO to teach its tiny model (2 layers, 64 wide) to aim: to write the column its
observation names into a `catch` call. This measures whether that model can learn to read the plain observation
(`The ball falls in column b.`, which the demo no longer uses alone: it also draws the fall), and how fast, with
the strongest signal there is: supervised steps whose only target
for each of the three observations is the right call (Adam, lr 3e-3, as the demo's supervised steps). After each
step budget it prints the mean loss per token and, per column, which columns 16 sampled calls name. A model that
reads the column names it every time; one that does not names the three about equally.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the demo's toy env, from examples/grpo_cpu.py


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[200, 600])
    parser.add_argument("--samples", type=int, default=16)
    options = parser.parse_args()

    from wrappers.trl.extras.offline import run_offline_and_quietly

    run_offline_and_quietly(seedless_rows=True)
    import gymnasium as gym
    import torch
    from grpo_cpu import COLUMNS, LetterCatch

    from wrappers.trl import environment_factory, tiny_model, tool_call_text
    from wrappers.trl.extras.tiny_model import imitate

    gym.register("example/LetterCatch-v0", entry_point=LetterCatch)
    catch = environment_factory("example/LetterCatch-v0", name="letter_catch")().catch
    for steps in options.steps:
        model, tokenizer = tiny_model(seed=0, hidden_size=64, intermediate_size=128)  # the demo's model
        prompts = {column: tokenizer.apply_chat_template(
            [{"role": "user", "content": f"The ball falls in column {column}."}], tools=[catch],
            add_generation_prompt=True, return_dict=True)["input_ids"] for column in COLUMNS}
        imitate(model, tokenizer, list(prompts.values()), [tool_call_text("catch", {"column": column}) for column in prompts],
                steps=steps, learning_rate=3e-3, paired=True)
        named = {}
        torch.manual_seed(0)
        for column in COLUMNS:
            ids = torch.tensor([prompts[column]])
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True, max_new_tokens=28,
                                 num_return_sequences=options.samples, pad_token_id=tokenizer.pad_token_id)
            texts = tokenizer.batch_decode(out[:, ids.shape[1]:])
            named[column] = collections.Counter(match[1] if (match := re.search(r'"column": "(\w)"', text)) else "?"
                                                for text in texts)
        right = sum(named[column][column] for column in COLUMNS) / (options.samples * len(COLUMNS))
        print(f"{steps:5d} supervised steps: right column {right:.2f}; "
              + "; ".join(f"ball {column}: {dict(sorted(named[column].items()))}" for column in COLUMNS), flush=True)


if __name__ == "__main__":
    main()
