"""What the PyTorch sides of the benchmarks share (bench_backbone.py, bench_image_folder.py, bench_gpt.py,
cp_input_side.py): their common flags, the seeded random model both sides load, and the timing (one
untimed call, then `repeats` timed calls)."""
import sys
import time

import torch


def add_common_arguments(parser, batch, repeats=None, threads=2):
    """--write (save the random weights and stop), --batch, --repeats (when timed in repeats), --threads."""
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--batch", type=int, default=batch)
    if repeats is not None:
        parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--threads", type=int, default=threads)


def seeded_model(build, write=None):
    """build() under torch.manual_seed(0). With `write` (a function of the model), writes the weights
    both sides load and ends the script."""
    torch.manual_seed(0)
    model = build()
    if write is not None:
        write(model)
        sys.exit(0)
    return model


def median_and_best(run, repeats):
    """Runs run() once untimed and `repeats` times timed; returns (median, best) in seconds."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2], times[0]
