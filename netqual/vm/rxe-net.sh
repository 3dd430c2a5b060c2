#!/bin/sh
# Soft-RoCE devices inside the guest, on two links (two rails, docs/rails.md): rxe0 on veth
# nqa (198.18.0.1) and rxe1 on its peer nqb (198.18.0.2); rxe2 on veth nqc (198.18.1.1) and
# rxe3 on its peer nqd (198.18.1.2). All ends stay in the init network namespace: on Linux
# 6.1 rxe's UDP socket lives there, so rxe devices in two namespaces pass no traffic.
# Policy routing forces .1 <-> .2 of each link over its veth instead of the local table's
# shortcut through lo.
# Usage: rxe-net.sh [MTU]   (veth MTU, default 1500 -> rxe active MTU 1024)
set -eu
MTU=${1:-1500}
modprobe crc32_generic
modprobe rdma_rxe
modprobe veth
ip link set lo up
ip link add nqa type veth peer name nqb
ip link add nqc type veth peer name nqd
for dev in nqa nqb nqc nqd; do ip link set "$dev" mtu "$MTU"; done
ip addr add 198.18.0.1/24 dev nqa
ip addr add 198.18.0.2/24 dev nqb
ip addr add 198.18.1.1/24 dev nqc
ip addr add 198.18.1.2/24 dev nqd
for dev in nqa nqb nqc nqd; do ip link set "$dev" up; done
for key in all.rp_filter default.rp_filter nqa.rp_filter nqb.rp_filter nqc.rp_filter nqd.rp_filter; do
  sysctl -qw "net.ipv4.conf.$key=0"
done
for dev in all nqa nqb nqc nqd; do sysctl -qw "net.ipv4.conf.$dev.accept_local=1"; done
# A 1 MiB RDMA READ arrives as a burst of packets: the default backlog (1000) drops them.
sysctl -qw net.core.netdev_max_backlog=100000
# Locally sent traffic (iif lo) to the other end leaves through the right veth; what
# arrives on a veth is delivered by the local table, moved behind these rules.
ip route add 198.18.0.2 dev nqa src 198.18.0.1 table 10
ip route add 198.18.0.1 dev nqb src 198.18.0.2 table 11
ip route add 198.18.1.2 dev nqc src 198.18.1.1 table 12
ip route add 198.18.1.1 dev nqd src 198.18.1.2 table 13
ip rule add pref 10 iif lo to 198.18.0.2 lookup 10
ip rule add pref 11 iif lo to 198.18.0.1 lookup 11
ip rule add pref 12 iif lo to 198.18.1.2 lookup 12
ip rule add pref 13 iif lo to 198.18.1.1 lookup 13
ip rule add pref 100 lookup local
ip rule del pref 0 lookup local
ip neigh replace 198.18.0.2 lladdr "$(cat /sys/class/net/nqb/address)" dev nqa nud permanent
ip neigh replace 198.18.0.1 lladdr "$(cat /sys/class/net/nqa/address)" dev nqb nud permanent
ip neigh replace 198.18.1.2 lladdr "$(cat /sys/class/net/nqd/address)" dev nqc nud permanent
ip neigh replace 198.18.1.1 lladdr "$(cat /sys/class/net/nqc/address)" dev nqd nud permanent
rdma link add rxe0 type rxe netdev nqa
rdma link add rxe1 type rxe netdev nqb
rdma link add rxe2 type rxe netdev nqc
rdma link add rxe3 type rxe netdev nqd
# The ports turn ACTIVE and the IPv4-mapped GIDs appear asynchronously.
for _ in $(seq 100); do
  n=$(cat /sys/class/infiniband/rxe*/ports/1/gids/1 2>/dev/null | grep -c ffff:c612 || true)
  [ "$n" = 4 ] && break
  sleep 0.1
done
rdma link show
