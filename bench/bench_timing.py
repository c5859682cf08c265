"""Timing shared by the PyTorch sides of the benchmarks (bench_backbone.py, bench_gpt.py, cp_input_side.py): one
untimed call (warm-up: allocations, lazy initialisation), then `repeats` timed calls."""
import time


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
