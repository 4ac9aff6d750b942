"""What the views say about one pod's GPU ask."""

from optsched.model.snapshot import PodRequest
from optsched.render.facts import shape_text


def test_the_gpu_column_names_every_kind_of_ask() -> None:
    assert shape_text(PodRequest(gpus=8)) == "8"
    assert shape_text(PodRequest(gpus=1, gpu_milli=250)) == "0.25"
    assert shape_text(PodRequest(gpus=2, gpu_milli=250, gpu_mem_mib=4000)) == "2x0.25"
    assert shape_text(PodRequest(gpus=2, gpu_milli=0, gpu_mem_mib=4000)) == "2x4000MiB"
    assert shape_text(PodRequest(gpus=1, gpu_milli=0, gpu_mem_percent=50)) == "50%mem"
    assert shape_text(PodRequest(extended={"nvidia.com/mig-1g.10gb": 1})) == "mig-1g.10gb"
    assert shape_text(PodRequest(cpu_milli=1000)) == "0"
