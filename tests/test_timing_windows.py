"""The timing windows of config ``timing``: a quick study times each point's call for at most
``cpu_seconds`` and its stages for at least ``stage_seconds``; outside a command's windows the
defaults hold again (a warm worker's next command must not inherit them)."""

import time

from kernels.measure import timing
from kernels.measure.stages import time_stages
from kernels.spec import STAGE_MIN_PASSES

CALL_S = 0.02  # a call that sleeps: never faster than this, however busy the machine


def sleep_call():
    time.sleep(CALL_S)


def test_a_short_cpu_window_times_fewer_calls_than_the_default():
    quick = timing.Windows(cpu_seconds=0.1, stage_seconds=0.01)
    with timing.windows(quick):
        assert timing.current_windows() == quick
        short = timing.time_cpu(sleep_call, threads=1)
    assert timing.current_windows() == timing.default_windows()
    # 0.1 s holds at most five 20 ms calls, besides the sizing of a block
    assert short["repeats"] <= 0.1 / CALL_S + 3, short
    # the default asks for ten calls' worth of time at least
    assert timing.time_cpu(sleep_call, threads=1)["repeats"] >= timing.CPU_MIN_SAMPLES


def test_the_stage_window_sets_how_long_the_passes_run():
    stages = [("sleep", lambda: time.sleep(0.002))]
    small = 1 << 20  # a 64 MiB flush (the least) for a made-up 1 MiB cache
    with timing.windows(timing.Windows(cpu_seconds=0.1, stage_seconds=0.001)):
        [few] = time_stages(stages, "cpu", small)
    assert few["repeats"] == STAGE_MIN_PASSES  # the least passes: the window was gone at once
    started = time.perf_counter()
    with timing.windows(timing.Windows(cpu_seconds=0.1, stage_seconds=0.5)):
        [more] = time_stages(stages, "cpu", small)
    assert time.perf_counter() - started >= 0.5 and more["repeats"] >= STAGE_MIN_PASSES


def test_the_warm_workers_rehearsal_times_with_the_short_windows(monkeypatch):
    """A warm worker rehearses a tiny point of each kind before its first measure job: what
    a process sets up on first use matters there, not the times, so its stages are timed in
    the shortest windows (the defaults had cost every worker's start seconds of CPU)."""
    import torch

    from kernels.measure import stages
    from kernels.warm import worker

    seen = []
    real = stages.time_stages

    def watched(*args, **kwargs):
        seen.append(timing.current_windows())
        return real(*args, **kwargs)

    monkeypatch.setattr(stages, "time_stages", watched)
    threads = torch.get_num_threads()  # a measure command sets them: this process's, kept
    try:
        worker.rehearse()
    finally:
        torch.set_num_threads(threads)
    assert seen and all(w.stage_seconds <= 0.01 and w.cpu_seconds <= 0.05 for w in seen), seen
    assert timing.current_windows() == timing.default_windows()
