"""Several routers on one loaded backbone (the GPU check's NF4 case of Compare with four checkpoints), on the tiny
model: the backbone is held once, and each router adds its own bytes and nothing else."""

from hero_core.bench.routers_memory import held_bytes, routers_on_one_backbone


def test_four_routers_share_the_one_backbone(tiny, tmp_path):
    report = routers_on_one_backbone(tiny.backbone, n=4, workdir=tmp_path)
    assert report["distinct_backbones"] == 1
    rows = report["rows"]
    assert [r["routers"] for r in rows] == [1, 2, 3, 4]
    router_bytes = sum(p.untyped_storage().nbytes() for p in [*tiny.router.parameters(), *tiny.router.buffers()])
    backbone_only = held_bytes([tiny]) - router_bytes
    # each router adds exactly one router's storage: the backbone is counted once however many routers hold it
    assert [r["held_bytes"] for r in rows] == [backbone_only + k * router_bytes for k in (1, 2, 3, 4)]
    assert report["ratio_held"] == round(rows[-1]["held_bytes"] / rows[0]["held_bytes"], 3)
    assert report["ratio_cuda_allocated"] is None and rows[0]["cuda_allocated_bytes"] is None  # on the CPU
    assert len({r["param_skip"] for r in rows}) > 1  # four different routers, not one loaded four times


def test_held_bytes_counts_two_loaded_backbones_twice(tiny):
    from hero_core.method.tiny import tiny_hero

    other = tiny_hero(seed=1)  # its own backbone, as a second load would give
    assert held_bytes([tiny, tiny]) == held_bytes([tiny])
    assert held_bytes([tiny, other]) == held_bytes([tiny]) + held_bytes([other])
