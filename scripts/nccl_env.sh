#!/usr/bin/env bash
# Network environment for NCCL (and Open MPI's own bootstrap), sourced by the launch scripts. Nothing is
# hard-coded: every variable keeps a value the user already exported, and interface names are never
# guessed — set them for your cluster (`ip -br link`, `ibv_devinfo`, `nvidia-smi topo -m` show what exists).
#
#   NET=ib   (default) InfiniBand / RoCE: NCCL uses the IB verbs transport (GPUDirect RDMA when the
#            nvidia-peermem module is loaded). Optional: NCCL_IB_HCA=mlx5_0,mlx5_1 to pick adapters;
#            NCCL_SOCKET_IFNAME=<bootstrap interface> if the default route's interface is not reachable
#            between nodes; for RoCE, NCCL_IB_GID_INDEX (often 3).
#   NET=eth  TCP sockets only: NCCL_IB_DISABLE=1; set NCCL_SOCKET_IFNAME=<interface> (e.g. the 100 GbE
#            port, as named on your nodes) and optionally NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD.
#   Both: NCCL_DEBUG=WARN (INFO to see the transport chosen); OMPI_MCA_btl_tcp_if_include and
#   OMPI_MCA_oob_tcp_if_include=<interface> if mpirun's own TCP traffic picks a wrong interface.
# Single node: NVLink/NVSwitch (or PCIe P2P) is found by NCCL itself; nothing to set.
NET=${NET:-ib}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
case $NET in
ib) ;;
eth)
    export NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-1}
    if [ -z "${NCCL_SOCKET_IFNAME:-}" ]; then
        echo "note: NET=eth without NCCL_SOCKET_IFNAME: NCCL picks an interface itself; set it to the inter-node one" >&2
    fi
    ;;
*) echo "error: NET=$NET: expected ib or eth" >&2; return 2 2>/dev/null || exit 2 ;;
esac
