"""benchmarks/gpu_host.py's torch-free parts: the launch queue's depth read from the host's
clock, the optimizer kernels' bytes per parameter by hand."""

from __future__ import annotations

from benchmark_scripts import load

gh = load("gpu_host")


def test_the_queue_depth_is_the_launches_before_the_first_slow_one():
    fast = [i * 5e-6 for i in range(1025)]  # 1,024 launches of 5 us each
    blocked = fast + [fast[-1] + 0.9, fast[-1] + 0.9 + 5e-6]  # the next waits on the spin
    assert gh.queue_depth(blocked) == 1024
    assert gh.queue_depth(fast) is None  # never blocked: deeper than the launches
    assert gh.queue_depth([0.0, 2e-3], slow_s=1e-3) == 0


def test_the_optimizer_kernels_bytes_per_parameter_by_hand():
    # BF16 gradient read (2) + FP32 copy written (4); AdamW: master, gradient, m, v read
    # (4 x 4) and master, m, v written (3 x 4); the FP32 master read (4), BF16 written (2)
    assert gh.OPTIMIZER_BYTES_PER_PARAM == {"grad_cast": 6, "fused_adamw": 28, "master_copy": 6}
    assert gh.SPIN_CYCLES / 2e9 > gh.LAUNCHES * 5e-6 * 10  # the spin outlasts the launches
