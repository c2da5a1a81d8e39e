"""Issue #65 §4: chains' GPU shares spread over the GPUs first (sentlab.parallel.gpus). Ray by itself packs fractional
GPU requests onto the fewest GPUs (four tasks of 0.25 on four GPUs: all on GPU 0); the coordinator places each share
on the GPU with the most room, through one Ray resource per GPU that a local Ray declares (runner.start_ray)."""

from __future__ import annotations

import pytest

from sentlab.errors import SentlabError
from sentlab.parallel.gpus import Placer, chain_devices, ray_options, slot_capacity, slot_resources, visible_devices


def test_shares_fill_every_gpu_before_doubling_up():
    p = Placer({i: 1.0 for i in range(4)})
    assert [p.place(0.25) for _ in range(6)] == [{0: 0.25}, {1: 0.25}, {2: 0.25}, {3: 0.25}, {0: 0.25}, {1: 0.25}]


def test_a_whole_gpu_takes_a_free_one_and_a_share_the_roomiest():
    p = Placer({i: 1.0 for i in range(3)})
    assert p.place(0.5) == {0: 0.5}
    assert p.place(2) == {1: 1.0, 2: 1.0}           # two whole GPUs: the free ones
    assert p.place(1) is None                        # none free now
    assert p.place(0.75) is None and p.place(0.5) == {0: 0.5}
    p.release({1: 1.0, 2: 1.0})
    assert p.place(0.75) == {1: 0.75} and p.place(1) == {2: 1.0}
    with pytest.raises(SentlabError, match="whole number of GPUs"):
        p.place(1.5)


def test_a_slot_is_the_nodes_own_device_at_that_position():
    assert visible_devices([1, 3], "4,5,6,7") == "5,7"   # e.g. the GPUs a scheduler gave the job
    assert visible_devices([2], None) == "2"
    with pytest.raises(SentlabError, match="more sentlab_gpu_<i> slots than it has GPUs"):
        visible_devices([2], "4,5")


@pytest.mark.slow
def test_four_quarter_gpu_tasks_land_on_four_devices_of_a_local_ray(monkeypatch):
    """A local Ray declaring 4 GPUs on a machine without any (Ray schedules declared GPUs; nothing touches a device):
    four chains of 0.25 placed as fan_out places them see four devices; Ray's own GPU resource puts the same four
    on one (the control: what `num_gpus=0.25` did before)."""
    ray = pytest.importorskip("ray", reason="`ray` is not installed: pip install 'sentlab[ray]' (the parallel "
                                            "runner's optional extra)")
    from sentlab.parallel.ray_run import start_ray

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")   # the node's GPUs, as a scheduler may number them
    try:
        resources = start_ray(ray, jobs=4, address=None, gpus=4, cpus_per_task=1.0)
        assert slot_capacity(resources) == {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0} and resources["GPU"] == 4
        placer = Placer(slot_capacity(resources))
        devices = ray.remote(chain_devices)
        taken = [placer.place(0.25) for _ in range(4)]
        placed = ray.get([devices.options(**ray_options(t), num_cpus=1).remote(sorted(t)) for t in taken])
        assert sorted(placed) == ["4", "5", "6", "7"]

        @ray.remote
        def rays_own():
            import os

            return os.environ.get("CUDA_VISIBLE_DEVICES")

        assert set(ray.get([rays_own.options(num_gpus=0.25, num_cpus=1).remote() for _ in range(4)])) == {"4"}
    finally:
        ray.shutdown()


def test_the_slots_a_node_declares():
    assert slot_resources(2) == {"sentlab_gpu_0": 1.0, "sentlab_gpu_1": 1.0}
    assert slot_capacity({"GPU": 4.0, "CPU": 8.0, "sentlab_gpu_1": 2.0, "sentlab_gpu_0": 2.0}) == {0: 2.0, 1: 2.0}
    assert chain_devices([]) == ""
