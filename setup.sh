#!/usr/bin/env bash
# One-time (idempotent) set-up: system packages (as root on Debian/Ubuntu), then a
# virtual environment in .venv with netqual and its test tools.
# NETQUAL_SKIP_APT=1 skips the system packages (the demo needs none of them).
set -euo pipefail
cd "$(dirname "$0")"

APT_PACKAGES=(
  iproute2        # network namespaces for `netqual lab` and its tests
  sockperf iperf3 # reference tools for bench/ and their smoke tests
  chromium        # headless browser: the HTML report screenshot test
  python3-pyverbs rdma-core ibverbs-providers ibverbs-utils perftest  # RDMA transport, doctor, bench/rdma_vs_perftest
  gcc libibverbs-dev  # compiles the RDMA ping-pong loop (netqual/transports/rdma/hotloop.c) at pip install
  qemu-system-x86 busybox-static cpio kmod  # the Soft-RoCE guest (tests/env/test_rxe_guest.py, netqual lab rdma-shell)
  slurmd slurmctld slurm-client munge  # tests/env/test_slurm_job.py: a single-host Slurm cluster
  prometheus      # tests/env/test_campaign_prometheus.py: a real server scrapes `campaign serve`
  strace          # tests/e2e/test_campaign_walkthrough.py: slows one agent for week 2 (syscall delay injection)
  libibverbs1 libnuma1 libcurl4  # the Mooncake Transfer Engine wheel links them (--engine mooncake)
)

if [[ "${NETQUAL_SKIP_APT:-0}" != 1 && $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "setup: installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

PY=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
# NETQUAL_INSTALLER=uv installs through uv (from PyPI, into the venv): the same packages
# in ~10 s instead of pip's 35-100 s; CI uses it. uv reads no pip.conf (a site's own
# index or mirror), so pip stays the default, and the fallback where uv fails. Byte-code
# compiled at install, as pip does: where PYTHONDONTWRITEBYTECODE is set, nothing would
# write it later and every process would compile numpy, typer, ... again.
if [[ ${NETQUAL_INSTALLER:-pip} == uv ]]; then
  .venv/bin/python -m pip install -q uv || echo "setup: uv not installed; using pip"
fi
pip_install() { # pip install's arguments
  if [[ ${NETQUAL_INSTALLER:-pip} == uv && -x .venv/bin/uv ]]; then
    .venv/bin/uv pip install -q --compile-bytecode --python .venv/bin/python "$@" && return 0
    echo "setup: uv failed; installing with pip"
  fi
  .venv/bin/python -m pip install -q "$@"
}
pip_install -e '.[dev,mooncake]'
# NIXL without the CUDA torch its wheel declares (docs/engines.md): --engine nixl moves
# host memory. Both engines are installed so that CI runs their tests for real.
pip_install --no-deps 'nixl-cu12>=1.5.1'
# The Soft-RoCE guest's kernel: Debian's linux-image-amd64, downloaded and unpacked into
# ~/.cache/netqual/vm (never installed). The rxe test fetches it itself when missing.
# The guest runs this venv's Python with Debian's python3-pyverbs: both must be the
# same minor version (3.11 on Debian 12).
if [[ "${NETQUAL_SKIP_APT:-0}" != 1 ]] && command -v apt-get >/dev/null; then
  .venv/bin/netqual lab rdma-shell --prepare \
    || echo "setup: guest kernel not prepared; tests/env/test_rxe_guest.py will try again"
fi
echo "setup: ready: .venv/bin/netqual. To call it as plain \`netqual\` (as README.md's"
echo "  script does), in your shell: source .venv/bin/activate"
